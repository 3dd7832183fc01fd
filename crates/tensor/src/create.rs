//! Constructors that compute their values: ranges and seeded random tensors. Values are
//! computed on the host (in f64 where a formula needs it, then rounded once) and uploaded,
//! so every device and thread count gets the same bits.

use rlgrad_core::cpu::alloc;
use rlgrad_core::kernels::RandomKernel;
use rlgrad_core::{Cpu, Device, Error, Float, Result, Rng, Shape};

use crate::Tensor;

impl<T: Float, D: Device> Tensor<T, D> {
    /// `start, start + step, ...` up to but excluding `end`, as a 1-D tensor on `device`.
    /// Element `i` is `start + i * step` computed in f64 and rounded to `T`. An error when
    /// `step` is zero or any argument is not finite; empty when `step` points away from
    /// `end`.
    pub fn arange_on(device: &D, start: f64, end: f64, step: f64) -> Result<Self> {
        let function = "Tensor::arange";
        for (name, v) in [("start", start), ("end", end), ("step", step)] {
            if !v.is_finite() {
                return Err(Error::value(function, name, "a finite value", v));
            }
        }
        if step == 0.0 {
            return Err(Error::value(function, "step", "a non-zero step", step));
        }
        let count = ((end - start) / step).ceil().max(0.0);
        if count > isize::MAX as f64 {
            return Err(Error::value(
                function,
                "step",
                "a step giving fewer than isize::MAX elements",
                step,
            ));
        }
        let len = count as usize;
        let data = alloc::try_from_fn(
            len,
            |i| T::from_f64(start + i as f64 * step),
            function,
            "step",
        )?;
        Self::from_vec_on(device, data, [len])
    }

    /// `count` evenly spaced values from `start` to `end` inclusive, on `device`. Element
    /// `i` is `start + i * (end - start) / (count - 1)` in f64, rounded to `T`; the last is
    /// exactly `end`. An error when an argument is not finite.
    pub fn linspace_on(device: &D, start: f64, end: f64, count: usize) -> Result<Self> {
        let function = "Tensor::linspace";
        for (name, v) in [("start", start), ("end", end)] {
            if !v.is_finite() {
                return Err(Error::value(function, name, "a finite value", v));
            }
        }
        let step = if count > 1 {
            (end - start) / (count - 1) as f64
        } else {
            0.0
        };
        let value = |i: usize| {
            if i + 1 == count && count > 1 {
                T::from_f64(end)
            } else {
                T::from_f64(start + i as f64 * step)
            }
        };
        let data = alloc::try_from_fn(count, value, function, "count")?;
        Self::from_vec_on(device, data, [count])
    }

    /// Uniform samples in `[low, high)` from `rng`, in row-major order: element `i` is
    /// `low + (high - low) * u_i` computed in `T`, `u_i` from [`Rng::uniform`], drawn by
    /// the device ([`RandomKernel::fill_uniform`]: on a GPU, in place, with the bits of
    /// drawing on the host). An error unless `low <= high`, both finite.
    pub fn rand_uniform_on(
        device: &D,
        shape: impl Into<Shape>,
        low: T,
        high: T,
        rng: &mut Rng,
    ) -> Result<Self>
    where
        D: RandomKernel<T>,
    {
        let function = "Tensor::rand_uniform";
        if !(low.is_finite() && high.is_finite() && low <= high) {
            return Err(Error::value(
                function,
                "high",
                format_args!("finite bounds with low <= high, low = {low}"),
                high,
            ));
        }
        let shape = shape.into();
        shape.numel_for(function, "shape")?;
        Self::from_kernel(device, shape, |out| {
            device.fill_uniform(rng, low, high, out)
        })
        .map_err(|e| e.in_function(function))
    }

    /// Normal samples `mean + std * z` from `rng` ([`Rng::normal`], Box-Muller in f64),
    /// in row-major order, drawn by the device ([`RandomKernel::fill_normal`]). An error
    /// unless `std >= 0` and both are finite.
    pub fn rand_normal_on(
        device: &D,
        shape: impl Into<Shape>,
        mean: f64,
        std: f64,
        rng: &mut Rng,
    ) -> Result<Self>
    where
        D: RandomKernel<T>,
    {
        let function = "Tensor::rand_normal";
        if !mean.is_finite() {
            return Err(Error::value(function, "mean", "a finite value", mean));
        }
        rlgrad_core::check::non_negative(function, "std", std)?;
        let shape = shape.into();
        shape.numel_for(function, "shape")?;
        Self::from_kernel(device, shape, |out| device.fill_normal(rng, mean, std, out))
            .map_err(|e| e.in_function(function))
    }
}

impl<T: Float> Tensor<T, Cpu> {
    /// [`Tensor::arange_on`] on the default [`Cpu`].
    ///
    /// ```
    /// use rlgrad_tensor::Tensor;
    /// assert_eq!(Tensor::<f32>::arange(0.0, 1.0, 0.25)?.to_vec()?, [0.0, 0.25, 0.5, 0.75]);
    /// assert_eq!(Tensor::<f64>::linspace(0.0, 1.0, 3)?.to_vec()?, [0.0, 0.5, 1.0]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn arange(start: f64, end: f64, step: f64) -> Result<Self> {
        Self::arange_on(&Cpu::default(), start, end, step)
    }

    /// [`Tensor::linspace_on`] on the default [`Cpu`].
    pub fn linspace(start: f64, end: f64, count: usize) -> Result<Self> {
        Self::linspace_on(&Cpu::default(), start, end, count)
    }

    /// [`Tensor::rand_uniform_on`] on the default [`Cpu`].
    ///
    /// ```
    /// use rlgrad_core::Rng;
    /// use rlgrad_tensor::Tensor;
    /// let a = Tensor::<f32>::rand_normal([3, 4], 0.0, 1.0, &mut Rng::new(7, "init"))?;
    /// let b = Tensor::<f32>::rand_normal([3, 4], 0.0, 1.0, &mut Rng::new(7, "init"))?;
    /// assert_eq!(a.to_vec()?, b.to_vec()?); // the same seed and stream, the same bits
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn rand_uniform(shape: impl Into<Shape>, low: T, high: T, rng: &mut Rng) -> Result<Self> {
        Self::rand_uniform_on(&Cpu::default(), shape, low, high, rng)
    }

    /// [`Tensor::rand_normal_on`] on the default [`Cpu`].
    pub fn rand_normal(
        shape: impl Into<Shape>,
        mean: f64,
        std: f64,
        rng: &mut Rng,
    ) -> Result<Self> {
        Self::rand_normal_on(&Cpu::default(), shape, mean, std, rng)
    }
}
