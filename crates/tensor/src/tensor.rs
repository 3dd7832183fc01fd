use std::fmt;
use std::mem::ManuallyDrop;
use std::sync::Arc;

use rlgrad_core::cpu::alloc;
use rlgrad_core::{Cpu, Device, Error, Float, Layout, Result, Shape, View};

/// An n-d array of `T` on device `D`: a shared buffer plus a [`Layout`] (shape, strides,
/// offset). Cloning is cheap (the buffer is shared); view ops (reshape of a dense tensor,
/// transpose, permute, narrow, broadcast, squeeze) make new layouts over the same buffer;
/// every other op returns a new tensor. Tensors are immutable, with one exception for
/// optimizers: [`Tensor::make_mut`] (copy on write).
///
/// Outputs come from [`Device::alloc_output`] and a tensor hands its buffer back with
/// [`Device::recycle`] when its last reference goes, so a loop that repeats the same ops
/// stops allocating after its first pass (the [`Cpu`]'s cache,
/// [`rlgrad_core::cpu::cache`]).
pub struct Tensor<T: Float = f32, D: Device = Cpu> {
    // Taken out exactly once, in `Drop`, to be handed back to the device.
    pub(crate) buffer: ManuallyDrop<Arc<D::Buffer<T>>>,
    pub(crate) layout: Layout,
    pub(crate) device: D,
}

impl<T: Float, D: Device> Clone for Tensor<T, D> {
    fn clone(&self) -> Self {
        self.with_layout(self.layout.clone())
    }
}

impl<T: Float, D: Device> Drop for Tensor<T, D> {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and `self.buffer` is not touched after this line.
        let buffer = unsafe { ManuallyDrop::take(&mut self.buffer) };
        self.device.recycle(buffer);
    }
}

impl<T: Float, D: Device> Tensor<T, D> {
    /// A tensor over a fresh buffer in row-major order.
    pub(crate) fn from_buffer(device: &D, buffer: D::Buffer<T>, shape: Shape) -> Self {
        Self::from_shared(device, Arc::new(buffer), shape)
    }

    fn from_shared(device: &D, buffer: Arc<D::Buffer<T>>, shape: Shape) -> Self {
        Self {
            buffer: ManuallyDrop::new(buffer),
            layout: Layout::contiguous(shape),
            device: device.clone(),
        }
    }

    /// A new row-major tensor of `shape` whose buffer `fill` writes entirely (a kernel
    /// call): the buffer comes from [`Device::alloc_output`], so it may be a recycled one,
    /// and goes back to the device if `fill` fails. For kernels of other crates (the fused
    /// LSTM cell of `rlgrad-autodiff` writes two outputs by nesting two calls).
    ///
    /// ```
    /// use rlgrad_core::Cpu;
    /// use rlgrad_tensor::Tensor;
    /// let t = Tensor::<f32>::from_kernel(&Cpu::default(), [2].into(), |out| {
    ///     out.copy_from_slice(&[1.0, 2.0]);
    ///     Ok(())
    /// })?;
    /// assert_eq!(t.to_vec()?, [1.0, 2.0]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn from_kernel(
        device: &D,
        shape: Shape,
        fill: impl FnOnce(&mut D::Buffer<T>) -> Result<()>,
    ) -> Result<Self> {
        let mut buffer = device.alloc_output::<T>(shape.numel())?;
        let Some(target) = Arc::get_mut(&mut buffer) else {
            return Err(Error::Device {
                function: "Tensor",
                device: device.name(),
                message: "alloc_output returned a buffer that is shared".to_owned(),
                cause: None,
            });
        };
        match fill(target) {
            Ok(()) => Ok(Self::from_shared(device, buffer, shape)),
            Err(error) => {
                device.recycle(buffer);
                Err(error)
            }
        }
    }

    /// A tensor sharing this one's buffer through another layout.
    pub(crate) fn with_layout(&self, layout: Layout) -> Self {
        Self {
            buffer: ManuallyDrop::new(Arc::clone(&self.buffer)),
            layout,
            device: self.device.clone(),
        }
    }

    /// The view kernels read: the buffer (possibly larger than this tensor, or shared
    /// with others) and the layout that picks this tensor's elements from it.
    pub fn view(&self) -> View<'_, D::Buffer<T>> {
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
        Self::filled(device, shape.into(), value, "Tensor::full")
    }

    /// A tensor of zeros, on `device`.
    pub fn zeros_on(device: &D, shape: impl Into<Shape>) -> Result<Self> {
        let function = "Tensor::zeros";
        let shape = shape.into();
        let numel = shape.numel_for(function, "shape")?;
        let buffer = device
            .alloc_zeros(numel)
            .map_err(|e| e.in_function(function))?;
        Ok(Self::from_buffer(device, buffer, shape))
    }

    /// A tensor of ones, on `device`.
    pub fn ones_on(device: &D, shape: impl Into<Shape>) -> Result<Self> {
        Self::filled(device, shape.into(), T::one(), "Tensor::ones")
    }

    fn filled(device: &D, shape: Shape, value: T, function: &'static str) -> Result<Self> {
        let numel = shape.numel_for(function, "shape")?;
        let data = alloc::try_filled(numel, value, function, "shape")?;
        Self::from_vec_on(device, data, shape)
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

    /// A tensor over a device buffer that holds exactly the elements of `shape` in
    /// row-major order (what device-level functions of the other crates return).
    pub fn from_buffer_on(
        device: &D,
        buffer: D::Buffer<T>,
        shape: impl Into<Shape>,
    ) -> Result<Self> {
        let shape = shape.into();
        let numel = shape.numel_for("Tensor::from_buffer_on", "shape")?;
        let len = device.buffer_len(&buffer);
        if len != numel {
            return Err(Error::shape(
                "Tensor::from_buffer_on",
                "buffer",
                format_args!("{numel} elements for shape {shape}"),
                format_args!("{len} elements"),
            ));
        }
        Ok(Self::from_buffer(device, buffer, shape))
    }

    /// The buffer holding exactly this tensor's elements in row-major order, when it does
    /// (a dense tensor that is not a view into a larger buffer): what device-level
    /// functions taking whole buffers need. `None` for other views;
    /// [`Tensor::contiguous`] makes one that has it.
    pub fn dense_buffer(&self) -> Option<&D::Buffer<T>> {
        let whole = self.is_contiguous()
            && self.layout.offset() == 0
            && self.device.buffer_len(&self.buffer) == self.numel();
        whole.then_some(&**self.buffer)
    }
}

impl<T: Float, D: crate::TensorDevice<T>> Tensor<T, D> {
    /// A tensor whose buffer holds exactly its elements in row-major order
    /// ([`Tensor::dense_buffer`] is `Some`): a clone when this one's does, else a copy.
    pub fn dense(&self) -> Result<Self> {
        if self.dense_buffer().is_some() {
            return Ok(self.clone());
        }
        Self::from_kernel(&self.device, self.shape().clone(), |out| {
            self.device.copy(self.view(), out)
        })
    }

    /// The buffer of this tensor's elements (row-major, exactly `numel` long) for writing
    /// in place, copying first when the buffer is shared with another tensor or is not
    /// such a dense buffer (copy on write). Optimizers update parameters through it; a
    /// tensor recorded earlier (on a gradient tape, say) keeps the old values.
    ///
    /// ```
    /// use rlgrad_tensor::Tensor;
    /// let mut w = Tensor::from_vec(vec![1.0f32, 2.0], [2])?;
    /// let before = w.clone();
    /// w.make_mut()?[0] = 5.0;
    /// assert_eq!((w.to_vec()?, before.to_vec()?), (vec![5.0, 2.0], vec![1.0, 2.0]));
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn make_mut(&mut self) -> Result<&mut D::Buffer<T>> {
        if self.dense_buffer().is_none() || Arc::get_mut(&mut self.buffer).is_none() {
            *self = Self::from_kernel(&self.device, self.shape().clone(), |out| {
                self.device.copy(self.view(), out)
            })?;
        }
        Ok(Arc::get_mut(&mut self.buffer).expect("a buffer made or proven unique just now"))
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
