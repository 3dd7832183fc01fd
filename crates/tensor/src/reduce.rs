//! Reductions over all elements or one axis, in the canonical order of
//! [`rlgrad_core::reduce`]: the same bits for every thread count, and an axis reduction
//! equals the full reduction of the same elements.

use rlgrad_core::kernels::ReduceOp;
use rlgrad_core::{Dims, Error, Float, Result, Shape};

use crate::{Tensor, TensorDevice};

impl<T: Float, D: TensorDevice<T>> Tensor<T, D> {
    fn reduce_all(&self, function: &'static str, op: ReduceOp) -> Result<T> {
        check_len(function, op, self.numel())?;
        let value = Self::from_kernel(&self.device, Shape::scalar(), |out| {
            self.device.reduce(op, self.view(), None, out)
        })?;
        value.to_scalar()
    }

    fn reduce_axis(
        &self,
        function: &'static str,
        op: ReduceOp,
        axis: usize,
        keepdim: bool,
    ) -> Result<Self> {
        let len = self.shape().dim(function, axis)?;
        if self.numel() > 0 {
            check_len(function, op, len)?;
        }
        let mut dims: Dims = self.dims().into();
        if keepdim {
            dims[axis] = 1;
        } else {
            dims.remove(axis);
        }
        Self::from_kernel(&self.device, Shape::from(dims), |out| {
            self.device.reduce(op, self.view(), Some(axis), out)
        })
    }

    /// The sum of all elements (`0` for none).
    ///
    /// ```
    /// use rlgrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0], [2, 2])?;
    /// assert_eq!(t.sum_all()?, 10.0);
    /// assert_eq!(t.sum_axis(0, false)?.to_vec()?, [4.0, 6.0]);
    /// assert_eq!(t.mean_axis(1, true)?.dims(), &[2, 1]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn sum_all(&self) -> Result<T> {
        self.reduce_all("Tensor::sum_all", ReduceOp::Sum)
    }

    /// The mean of all elements; an error for an empty tensor.
    pub fn mean_all(&self) -> Result<T> {
        self.reduce_all("Tensor::mean_all", ReduceOp::Mean)
    }

    /// The variance of all elements with `ddof` delta degrees of freedom (0: population,
    /// 1: sample); an error unless there are more than `ddof` elements.
    pub fn var_all(&self, ddof: usize) -> Result<T> {
        self.reduce_all("Tensor::var_all", ReduceOp::Var { ddof })
    }

    /// The smallest element (NaN if any is NaN); an error for an empty tensor.
    pub fn min_all(&self) -> Result<T> {
        self.reduce_all("Tensor::min_all", ReduceOp::Min)
    }

    /// The largest element (NaN if any is NaN); an error for an empty tensor.
    pub fn max_all(&self) -> Result<T> {
        self.reduce_all("Tensor::max_all", ReduceOp::Max)
    }

    /// Sums along `axis`, keeping it with size 1 if `keepdim`.
    pub fn sum_axis(&self, axis: usize, keepdim: bool) -> Result<Self> {
        self.reduce_axis("Tensor::sum_axis", ReduceOp::Sum, axis, keepdim)
    }

    /// Means along `axis`; an error when the axis is empty.
    pub fn mean_axis(&self, axis: usize, keepdim: bool) -> Result<Self> {
        self.reduce_axis("Tensor::mean_axis", ReduceOp::Mean, axis, keepdim)
    }

    /// Variances along `axis` with `ddof`; an error unless the axis is longer than `ddof`.
    pub fn var_axis(&self, axis: usize, ddof: usize, keepdim: bool) -> Result<Self> {
        self.reduce_axis("Tensor::var_axis", ReduceOp::Var { ddof }, axis, keepdim)
    }

    /// Minima along `axis`; an error when the axis is empty.
    pub fn min_axis(&self, axis: usize, keepdim: bool) -> Result<Self> {
        self.reduce_axis("Tensor::min_axis", ReduceOp::Min, axis, keepdim)
    }

    /// Maxima along `axis`; an error when the axis is empty.
    pub fn max_axis(&self, axis: usize, keepdim: bool) -> Result<Self> {
        self.reduce_axis("Tensor::max_axis", ReduceOp::Max, axis, keepdim)
    }
}

fn check_len(function: &'static str, op: ReduceOp, len: usize) -> Result<()> {
    if len >= op.min_len() {
        Ok(())
    } else {
        Err(Error::empty(
            function,
            "self",
            format_args!("at least {} elements to reduce, got {len}", op.min_len()),
        ))
    }
}
