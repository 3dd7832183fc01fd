//! Shape ops. Views (reshape of a dense tensor, transpose, permute, broadcast, narrow,
//! squeeze, unsqueeze) share the buffer; gathers and joins copy.

use rlgrad_core::{Dims, Error, Float, Layout, Result, Shape};

use crate::{Tensor, TensorDevice};

impl<T: Float, D: TensorDevice<T>> Tensor<T, D> {
    /// The elements in row-major order, copied to the host.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let whole_buffer = self.is_contiguous()
            && self.layout.offset() == 0
            && self.device.buffer_len(&self.buffer) == self.numel();
        if whole_buffer {
            self.device.download(&self.buffer)
        } else {
            // A view into a larger buffer: copy just its elements on the device first.
            self.contiguous_copy()?.to_vec()
        }
    }

    /// The single element of a one-element tensor (any shape).
    pub fn to_scalar(&self) -> Result<T> {
        if self.numel() != 1 {
            return Err(Error::shape(
                "Tensor::to_scalar",
                "self",
                "exactly one element",
                self.shape(),
            ));
        }
        Ok(self.to_vec()?[0])
    }

    /// This tensor with dense row-major elements: itself when already dense, a copy
    /// otherwise.
    pub fn contiguous(&self) -> Result<Self> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        self.contiguous_copy()
    }

    /// A dense copy of exactly this view's elements, in a buffer of their number.
    fn contiguous_copy(&self) -> Result<Self> {
        Self::from_kernel(&self.device, self.shape().clone(), |out| {
            self.device.copy(self.view(), out)
        })
    }

    /// The same elements in another shape with as many elements (a view when dense).
    ///
    /// ```
    /// use rlgrad_tensor::Tensor;
    /// let t = Tensor::<f32>::arange(0.0, 6.0, 1.0)?.reshape([2, 3])?;
    /// assert_eq!(t.to_vec()?, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    /// assert!(t.reshape([4, 2]).is_err());
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn reshape(&self, shape: impl Into<Shape>) -> Result<Self> {
        let shape = shape.into();
        let numel = shape.numel_for("Tensor::reshape", "shape")?;
        if numel != self.numel() {
            return Err(Error::shape(
                "Tensor::reshape",
                "shape",
                format_args!("a shape of {} elements like {}", self.numel(), self.shape()),
                format_args!("{shape} ({numel} elements)"),
            ));
        }
        let dense = self.contiguous()?;
        let strides = shape.strides();
        Ok(dense.with_layout(Layout::from_parts(shape, strides, dense.layout.offset())))
    }

    /// Axes `a` and `b` swapped (a view).
    pub fn transpose(&self, a: usize, b: usize) -> Result<Self> {
        self.shape().check_axis("Tensor::transpose", "a", a)?;
        self.shape().check_axis("Tensor::transpose", "b", b)?;
        let mut order: Dims = (0..self.ndim()).collect();
        order.swap(a, b);
        self.permute_unchecked(&order)
    }

    /// The last two axes swapped (a view); an error below two dimensions.
    pub fn t(&self) -> Result<Self> {
        if self.ndim() < 2 {
            return Err(Error::shape(
                "Tensor::t",
                "self",
                "at least 2 dimensions",
                self.shape(),
            ));
        }
        self.transpose(self.ndim() - 2, self.ndim() - 1)
    }

    /// The axes reordered: axis `i` of the result is axis `order[i]` of `self` (a view).
    pub fn permute(&self, order: &[usize]) -> Result<Self> {
        let mut seen: smallvec::SmallVec<[bool; 8]> = smallvec::smallvec![false; self.ndim()];
        let is_permutation = order.len() == self.ndim()
            && order
                .iter()
                .all(|&a| a < seen.len() && !std::mem::replace(&mut seen[a], true));
        if !is_permutation {
            return Err(Error::value(
                "Tensor::permute",
                "order",
                format_args!("a permutation of 0..{}", self.ndim()),
                format_args!("{order:?}"),
            ));
        }
        self.permute_unchecked(order)
    }

    fn permute_unchecked(&self, order: &[usize]) -> Result<Self> {
        let dims: Dims = order.iter().map(|&a| self.dims()[a]).collect();
        let strides: Dims = order.iter().map(|&a| self.layout.strides()[a]).collect();
        Ok(self.with_layout(Layout::from_parts(
            Shape::from(dims),
            strides,
            self.layout.offset(),
        )))
    }

    /// This tensor repeated to `shape` by NumPy broadcasting (a view with stride-0 axes).
    pub fn broadcast_to(&self, shape: impl Into<Shape>) -> Result<Self> {
        let shape = shape.into();
        shape.numel_for("Tensor::broadcast_to", "shape")?;
        if !self.shape().broadcasts_to(&shape) {
            return Err(Error::shape(
                "Tensor::broadcast_to",
                "shape",
                format_args!("a shape {} broadcasts to", self.shape()),
                shape,
            ));
        }
        Ok(self.with_layout(broadcast_layout(&self.layout, &shape)))
    }

    /// `len` entries of axis `axis` starting at `start` (a view).
    pub fn narrow(&self, axis: usize, start: usize, len: usize) -> Result<Self> {
        let size = self.shape().dim("Tensor::narrow", axis)?;
        if start.checked_add(len).is_none_or(|end| end > size) {
            return Err(Error::out_of_range(
                "Tensor::narrow",
                "start",
                format_args!("start + len <= {size}, the size of axis {axis}"),
                format_args!("start {start}, len {len}"),
            ));
        }
        let mut dims: Dims = self.dims().into();
        dims[axis] = len;
        let offset = self.layout.offset() + start * self.layout.strides()[axis];
        Ok(self.with_layout(Layout::from_parts(
            Shape::from(dims),
            self.layout.strides().into(),
            offset,
        )))
    }

    /// The entries `indices` of axis `axis`, in that order (a copy).
    pub fn index_select(&self, axis: usize, indices: &[usize]) -> Result<Self> {
        self.shape()
            .check_axis("Tensor::index_select", "axis", axis)?;
        let size = self.dims()[axis];
        if let Some(&bad) = indices.iter().find(|&&i| i >= size) {
            return Err(Error::out_of_range(
                "Tensor::index_select",
                "indices",
                format_args!("indices below {size}, the size of axis {axis}"),
                bad,
            ));
        }
        let mut dims: Dims = self.dims().into();
        dims[axis] = indices.len();
        Self::from_kernel(&self.device, Shape::from(dims), |out| {
            self.device.index_select(self.view(), axis, indices, out)
        })
    }

    /// The adjoint of [`Tensor::index_select`] (the backward of a gather): a tensor of
    /// this one's shape with axis `axis` of size `size`, zero except that slice `i` of
    /// `self` along `axis` is added to slice `indices[i]`, for `i` in increasing order.
    ///
    /// ```
    /// use rlgrad_tensor::Tensor;
    /// let rows = Tensor::from_vec(vec![1.0f32, 2.0, 10.0, 20.0, 100.0, 200.0], [3, 2])?;
    /// let summed = rows.index_add(0, &[2, 0, 2], 3)?;
    /// assert_eq!(summed.to_vec()?, [10.0, 20.0, 0.0, 0.0, 101.0, 202.0]);
    /// assert!(rows.index_add(0, &[0, 1], 3).is_err()); // one index per row
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn index_add(&self, axis: usize, indices: &[usize], size: usize) -> Result<Self> {
        let len = self.shape().dim("Tensor::index_add", axis)?;
        if indices.len() != len {
            return Err(Error::shape(
                "Tensor::index_add",
                "indices",
                format_args!(
                    "{len} indices, one per slice of axis {axis} of {}",
                    self.shape()
                ),
                format_args!("{} indices", indices.len()),
            ));
        }
        if let Some(&bad) = indices.iter().find(|&&i| i >= size) {
            return Err(Error::out_of_range(
                "Tensor::index_add",
                "indices",
                format_args!("indices below size = {size}"),
                bad,
            ));
        }
        let mut dims: Dims = self.dims().into();
        dims[axis] = size;
        let shape = Shape::from(dims);
        shape.numel_for("Tensor::index_add", "size")?;
        Self::from_kernel(&self.device, shape, |out| {
            self.device.index_add(self.view(), axis, indices, size, out)
        })
    }

    /// `tensors` joined along `axis`; all other dimensions must agree.
    pub fn concat(tensors: &[&Self], axis: usize) -> Result<Self> {
        let Some(first) = tensors.first() else {
            return Err(Error::empty(
                "Tensor::concat",
                "tensors",
                "at least one tensor",
            ));
        };
        first.shape().check_axis("Tensor::concat", "axis", axis)?;
        let mut dims: Dims = first.dims().into();
        dims[axis] = 0;
        for t in tensors {
            let agrees = t.ndim() == first.ndim()
                && t.dims()
                    .iter()
                    .zip(first.dims())
                    .enumerate()
                    .all(|(i, (a, b))| i == axis || a == b);
            if !agrees {
                return Err(Error::shape(
                    "Tensor::concat",
                    "tensors",
                    format_args!("shapes equal to {} except along axis {axis}", first.shape()),
                    t.shape(),
                ));
            }
            dims[axis] += t.dims()[axis];
        }
        let views: smallvec::SmallVec<[_; 4]> = tensors.iter().map(|t| t.view()).collect();
        Self::from_kernel(&first.device, Shape::from(dims), |out| {
            first.device.concat(&views, axis, out)
        })
    }

    /// `tensors` (all of one shape) stacked along a new axis `axis`.
    pub fn stack(tensors: &[&Self], axis: usize) -> Result<Self> {
        let Some(first) = tensors.first() else {
            return Err(Error::empty(
                "Tensor::stack",
                "tensors",
                "at least one tensor",
            ));
        };
        if let Some(t) = tensors.iter().find(|t| t.shape() != first.shape()) {
            return Err(Error::shape(
                "Tensor::stack",
                "tensors",
                format_args!("every tensor of shape {}", first.shape()),
                t.shape(),
            ));
        }
        if axis > first.ndim() {
            return Err(Error::out_of_range(
                "Tensor::stack",
                "axis",
                format_args!("an axis <= {}", first.ndim()),
                axis,
            ));
        }
        let expanded = tensors
            .iter()
            .map(|t| t.unsqueeze(axis))
            .collect::<Result<Vec<_>>>()?;
        Self::concat(&expanded.iter().collect::<Vec<_>>(), axis)
    }

    /// Axis `axis`, which must have size 1, removed (a view).
    pub fn squeeze(&self, axis: usize) -> Result<Self> {
        let size = self.shape().dim("Tensor::squeeze", axis)?;
        if size != 1 {
            return Err(Error::shape(
                "Tensor::squeeze",
                "axis",
                format_args!("an axis of size 1 in {}", self.shape()),
                format_args!("axis {axis} of size {size}"),
            ));
        }
        let mut dims: Dims = self.dims().into();
        let mut strides: Dims = self.layout.strides().into();
        dims.remove(axis);
        strides.remove(axis);
        Ok(self.with_layout(Layout::from_parts(
            Shape::from(dims),
            strides,
            self.layout.offset(),
        )))
    }

    /// A new axis of size 1 inserted at `axis` (`0..=ndim`; a view).
    pub fn unsqueeze(&self, axis: usize) -> Result<Self> {
        if axis > self.ndim() {
            return Err(Error::out_of_range(
                "Tensor::unsqueeze",
                "axis",
                format_args!("an axis <= {}", self.ndim()),
                axis,
            ));
        }
        let mut dims: Dims = self.dims().into();
        let mut strides: Dims = self.layout.strides().into();
        // The stride of a size-1 axis is never used to step; keep the layout dense-looking.
        let stride = if axis < self.ndim() {
            strides[axis] * dims[axis]
        } else {
            1
        };
        dims.insert(axis, 1);
        strides.insert(axis, stride);
        Ok(self.with_layout(Layout::from_parts(
            Shape::from(dims),
            strides,
            self.layout.offset(),
        )))
    }
}

/// `layout` viewed as `shape` (which it broadcasts to): new leading axes and axes of
/// size 1 that grow get stride 0.
pub(crate) fn broadcast_layout(layout: &Layout, shape: &Shape) -> Layout {
    if layout.shape() == shape {
        return layout.clone();
    }
    let pad = shape.ndim() - layout.shape().ndim();
    let strides: Dims = shape
        .dims()
        .iter()
        .enumerate()
        .map(|(i, &target)| {
            if i < pad {
                0
            } else {
                let j = i - pad;
                if layout.shape().dims()[j] == 1 && target != 1 {
                    0
                } else {
                    layout.strides()[j]
                }
            }
        })
        .collect();
    Layout::from_parts(shape.clone(), strides, layout.offset())
}
