//! Random buffers drawn by the device, with the bits of drawing them on the host.

use crate::{Device, Float, Result, Rng};

/// Fills a buffer with an [`Rng`] stream's next uniform or normal samples, in order: the
/// values, and where the stream stands afterwards, are those of drawing the samples one by
/// one on the host ([`Rng::uniform`], [`Rng::normal`]), on every device: the Cpu draws them
/// in order into the buffer, and a GPU (rlgrad-cuda's) where the buffer lives, each sample
/// from its own position in the stream ([`crate::PcgPosition`]).
///
/// ```
/// use rlgrad_core::kernels::RandomKernel;
/// use rlgrad_core::{Cpu, Rng};
/// let mut rng = Rng::new(7, "noise");
/// let mut out = vec![0.0f32; 3];
/// Cpu::seq().fill_normal(&mut rng, 0.0, 0.2, &mut out)?;
/// let mut host = Rng::new(7, "noise");
/// let drawn: Vec<f32> = (0..3).map(|_| host.normal(0.0, 0.2)).collect();
/// assert_eq!(out, drawn);
/// assert_eq!(rng.state(), host.state());
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub trait RandomKernel<T: Float>: Device {
    /// `out[i] = low + (high - low) * u_i`, computed in `T`, with `u_i` the stream's next
    /// [`Rng::uniform`] samples (one 64-bit draw each). The caller checks the bounds.
    fn fill_uniform(&self, rng: &mut Rng, low: T, high: T, out: &mut Self::Buffer<T>)
    -> Result<()>;

    /// `out[i]` the stream's next [`Rng::normal`]`(mean, std)` samples (Box-Muller pairs of
    /// two draws, a pending sample first). The caller checks `mean` and `std`.
    fn fill_normal(
        &self,
        rng: &mut Rng,
        mean: f64,
        std: f64,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;
}
