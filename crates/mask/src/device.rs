//! The same operations on any device: inputs and outputs are device buffers and the work
//! is done by the device's [`SequenceKernel`], so the bits match the slice level. The
//! device traits and the [`Cpu`] device are re-exported here, so this crate alone is
//! enough to use them.
//!
//! ```
//! use rlgrad_mask::device::{self, Cpu, Device};
//! use rlgrad_mask::{Par, Sequences};
//!
//! let cpu = Cpu::new(Par::rayon(2));
//! let seqs = Sequences::new(&[2, 1], None)?;
//! let x = cpu.upload(&[1.0f32, 3.0, 5.0, f32::NAN])?; // padding may hold anything
//! assert_eq!(device::masked_mean(&cpu, &seqs, &x, 1)?, 3.0);
//! # Ok::<(), rlgrad_mask::Error>(())
//! ```

pub use rlgrad_core::kernels::SequenceKernel;
pub use rlgrad_core::{Cpu, Device};

use rlgrad_core::{Float, Result, check};

use crate::backend::OnDevice;
use crate::reductions::generic as r;
use crate::{PadOrder, Sequences};

/// `(N * F, B * T * F)` once `input` (`[N, F]` when `packed`, else padded) has its length:
/// an input that disagrees with `seqs` is refused before anything is allocated.
fn checked_sizes<D: SequenceKernel<T>, T: Float>(
    function: &'static str,
    device: &D,
    seqs: &Sequences,
    features: usize,
    input: &D::Buffer<T>,
    packed: bool,
) -> Result<(usize, usize)> {
    let packed_len = check::product(function, "features", seqs.total(), features)?;
    let padded_len = check::product(function, "features", seqs.padded_steps(), features)?;
    let (argument, want) = if packed {
        ("flat", packed_len)
    } else {
        ("padded", padded_len)
    };
    check::len(function, argument, want, device.buffer_len(input))?;
    Ok((packed_len, padded_len))
}

/// [`crate::pad`] / [`crate::pad_time_major`] on `device`.
pub fn pad<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    flat: &D::Buffer<T>,
    features: usize,
    order: PadOrder,
) -> Result<D::Buffer<T>> {
    let (_, padded_len) = checked_sizes("pad", device, seqs, features, flat, true)?;
    let mut out = device.alloc_zeros(padded_len)?;
    device.pad(seqs, features, order, flat, &mut out)?;
    Ok(out)
}

/// [`crate::unpad`] / [`crate::unpad_time_major`] on `device`.
pub fn unpad<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    padded: &D::Buffer<T>,
    features: usize,
    order: PadOrder,
) -> Result<D::Buffer<T>> {
    let (packed_len, _) = checked_sizes("unpad", device, seqs, features, padded, false)?;
    let mut out = device.alloc_zeros(packed_len)?;
    device.unpad(seqs, features, order, padded, &mut out)?;
    Ok(out)
}

/// [`crate::masked_sum`] on `device`.
pub fn masked_sum<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    x: &D::Buffer<T>,
    features: usize,
) -> Result<T> {
    r::sum(&OnDevice(device), seqs, features, x)
}

/// [`crate::masked_sum_backward`] on `device`.
pub fn masked_sum_backward<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    features: usize,
    grad: T,
) -> Result<D::Buffer<T>> {
    r::fill(
        "masked_sum_backward",
        &OnDevice(device),
        seqs,
        features,
        grad,
    )
}

/// [`crate::masked_mean`] on `device`.
pub fn masked_mean<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    x: &D::Buffer<T>,
    features: usize,
) -> Result<T> {
    r::mean(&OnDevice(device), seqs, features, x)
}

/// [`crate::masked_mean_backward`] on `device`.
pub fn masked_mean_backward<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    features: usize,
    grad: T,
) -> Result<D::Buffer<T>> {
    r::mean_backward(&OnDevice(device), seqs, features, grad)
}

/// [`crate::sequence_means`] on `device` (the `[B]` means come back to the host).
pub fn sequence_means<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    x: &D::Buffer<T>,
    features: usize,
) -> Result<Vec<T>> {
    r::sequence_means(&OnDevice(device), seqs, features, x)
}

/// [`crate::sequence_means_backward`] on `device`.
pub fn sequence_means_backward<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    features: usize,
    grad: &[T],
) -> Result<D::Buffer<T>> {
    r::sequence_means_backward(&OnDevice(device), seqs, features, grad)
}

/// [`crate::masked_var`] on `device`.
pub fn masked_var<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    x: &D::Buffer<T>,
    features: usize,
    ddof: usize,
) -> Result<T> {
    r::var(&OnDevice(device), seqs, features, x, ddof)
}

/// [`crate::masked_var_backward`] on `device`.
pub fn masked_var_backward<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    x: &D::Buffer<T>,
    features: usize,
    ddof: usize,
    grad: T,
) -> Result<D::Buffer<T>> {
    r::var_backward(&OnDevice(device), seqs, features, x, ddof, grad)
}

/// [`crate::masked_std`] on `device`.
pub fn masked_std<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    x: &D::Buffer<T>,
    features: usize,
    ddof: usize,
) -> Result<T> {
    r::std(&OnDevice(device), seqs, features, x, ddof)
}

/// [`crate::masked_std_backward`] on `device`.
pub fn masked_std_backward<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    x: &D::Buffer<T>,
    features: usize,
    ddof: usize,
    grad: T,
) -> Result<D::Buffer<T>> {
    r::std_backward(&OnDevice(device), seqs, features, x, ddof, grad)
}

/// [`crate::masked_normalize`] on `device`.
pub fn masked_normalize<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    x: &D::Buffer<T>,
    features: usize,
    eps: T,
    ddof: usize,
) -> Result<D::Buffer<T>> {
    r::normalize(&OnDevice(device), seqs, features, x, eps, ddof)
}

/// [`crate::masked_normalize_backward`] on `device`.
pub fn masked_normalize_backward<D: SequenceKernel<T>, T: Float>(
    device: &D,
    seqs: &Sequences,
    x: &D::Buffer<T>,
    features: usize,
    eps: T,
    ddof: usize,
    grad: &D::Buffer<T>,
) -> Result<D::Buffer<T>> {
    r::normalize_backward(&OnDevice(device), seqs, features, x, eps, ddof, grad)
}
