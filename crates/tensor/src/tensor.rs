use std::fmt;
use std::sync::Arc;

use rlgrad_core::{Cpu, Device, Error, Float, Layout, Result, Shape, View};

/// An n-d array of `T` on device `D`: a shared buffer plus a [`Layout`] (shape, strides,
/// offset). Cloning is cheap (the buffer is shared); view ops (reshape of a dense tensor,
/// transpose, permute, narrow, broadcast, squeeze) make new layouts over the same buffer;
/// every other op returns a new tensor. Tensors are immutable.
pub struct Tensor<T: Float, D: Device = Cpu> {
    pub(crate) buffer: Arc<D::Buffer<T>>,
    pub(crate) layout: Layout,
    pub(crate) device: D,
}

impl<T: Float, D: Device> Clone for Tensor<T, D> {
    fn clone(&self) -> Self {
        Self {
            buffer: Arc::clone(&self.buffer),
            layout: self.layout.clone(),
            device: self.device.clone(),
        }
    }
}

impl<T: Float, D: Device> Tensor<T, D> {
    /// A tensor over a fresh buffer in row-major order.
    pub(crate) fn from_buffer(device: &D, buffer: D::Buffer<T>, shape: Shape) -> Self {
        Self {
            buffer: Arc::new(buffer),
            layout: Layout::contiguous(shape),
            device: device.clone(),
        }
    }

    /// A tensor sharing this one's buffer through another layout.
    pub(crate) fn with_layout(&self, layout: Layout) -> Self {
        Self {
            buffer: Arc::clone(&self.buffer),
            layout,
            device: self.device.clone(),
        }
    }

    /// The view kernels read.
    pub(crate) fn view(&self) -> View<'_, D::Buffer<T>> {
        View::new(&self.buffer, &self.layout)
    }

    /// A tensor holding `data` in row-major order, on `device`. An error when the
    /// length of `data` is not the number of elements of `shape`.
    pub fn from_vec_on(device: &D, data: Vec<T>, shape: impl Into<Shape>) -> Result<Self> {
        let shape = shape.into();
        let numel = shape.numel_for("Tensor::from_vec", "shape")?;
        if data.len() != numel {
            return Err(Error::shape(
                "Tensor::from_vec",
                "data",
                format_args!("{numel} elements for shape {shape}"),
                format_args!("{} elements", data.len()),
            ));
        }
        Ok(Self::from_buffer(device, device.upload_vec(data)?, shape))
    }

    /// A tensor of `shape` filled with `value`, on `device`.
    pub fn full_on(device: &D, shape: impl Into<Shape>, value: T) -> Result<Self> {
        let shape = shape.into();
        let numel = shape.numel_for("Tensor::full", "shape")?;
        Self::from_vec_on(device, vec![value; numel], shape)
    }

    /// A tensor of zeros, on `device`.
    pub fn zeros_on(device: &D, shape: impl Into<Shape>) -> Result<Self> {
        let shape = shape.into();
        let numel = shape.numel_for("Tensor::zeros", "shape")?;
        Ok(Self::from_buffer(device, device.alloc_zeros(numel)?, shape))
    }

    /// A tensor of ones, on `device`.
    pub fn ones_on(device: &D, shape: impl Into<Shape>) -> Result<Self> {
        Self::full_on(device, shape, T::one())
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        self.layout.shape()
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        self.layout.shape().dims()
    }

    /// The number of dimensions.
    pub fn ndim(&self) -> usize {
        self.layout.shape().ndim()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }

    /// The layout (shape, strides, offset) of this view.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// Whether the elements are dense and in row-major order.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }
}

impl<T: Float> Tensor<T, Cpu> {
    /// A tensor holding `data` in row-major order, on the default [`Cpu`].
    ///
    /// ```
    /// use rlgrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3])?;
    /// assert_eq!(t.dims(), &[2, 3]);
    /// assert!(Tensor::from_vec(vec![1.0f32; 5], [2, 3]).is_err());
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn from_vec(data: Vec<T>, shape: impl Into<Shape>) -> Result<Self> {
        Self::from_vec_on(&Cpu::default(), data, shape)
    }

    /// A tensor of `shape` filled with `value`, on the default [`Cpu`].
    pub fn full(shape: impl Into<Shape>, value: T) -> Result<Self> {
        Self::full_on(&Cpu::default(), shape, value)
    }

    /// A tensor of zeros, on the default [`Cpu`].
    pub fn zeros(shape: impl Into<Shape>) -> Result<Self> {
        Self::zeros_on(&Cpu::default(), shape)
    }

    /// A tensor of ones, on the default [`Cpu`].
    pub fn ones(shape: impl Into<Shape>) -> Result<Self> {
        Self::ones_on(&Cpu::default(), shape)
    }

    /// A scalar (shape `[]`), on the default [`Cpu`].
    pub fn scalar(value: T) -> Self {
        Self::from_buffer(&Cpu::default(), vec![value], Shape::scalar())
    }
}

impl<T: Float, D: Device> fmt::Debug for Tensor<T, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Tensor(shape={}, dtype={}, device={}, strides={:?}, offset={})",
            self.shape(),
            T::DTYPE,
            self.device.name(),
            self.layout.strides(),
            self.layout.offset()
        )
    }
}
