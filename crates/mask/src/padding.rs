//! Packed `[N, F]` rows to padded batches and back.

use rlgrad_core::cpu::sequence as kernel;
use rlgrad_core::{Float, Par, Result};

use crate::{PadOrder, Sequences};

/// Packed rows `flat` (`[N, F]`, sequence after sequence) to a zero-padded `[B, T, F]`
/// batch (RLlib's and `tf.RaggedTensor.to_tensor`'s layout). `N` must equal the sum of the
/// lengths. An error when `B * T * F` does not fit in `usize` or the host cannot allocate
/// it.
pub fn pad<T: Float>(seqs: &Sequences, flat: &[T], features: usize) -> Result<Vec<T>> {
    kernel::pad_new(Par::auto(), seqs, features, PadOrder::BatchMajor, flat)
}

/// Packed rows to a zero-padded time-major `[T, B, F]` batch, the input layout of
/// recurrent cells.
pub fn pad_time_major<T: Float>(seqs: &Sequences, flat: &[T], features: usize) -> Result<Vec<T>> {
    kernel::pad_new(Par::auto(), seqs, features, PadOrder::TimeMajor, flat)
}

/// [`pad`] or [`pad_time_major`] with the parallelism you choose: a fresh buffer, written
/// once (large outputs take fresh zeroed pages and write the rows into them; smaller
/// ones write rows and padding in one pass), where [`pad_into`] must zero yours first.
pub fn pad_with<T: Float>(
    par: Par,
    seqs: &Sequences,
    flat: &[T],
    features: usize,
    order: PadOrder,
) -> Result<Vec<T>> {
    kernel::pad_new(par, seqs, features, order, flat)
}

/// [`pad`] or [`pad_time_major`] into your buffer, with the parallelism you choose. Every
/// element of `padded` is written (padding with zeros).
pub fn pad_into<T: Float>(
    par: Par,
    seqs: &Sequences,
    flat: &[T],
    features: usize,
    order: PadOrder,
    padded: &mut [T],
) -> Result<()> {
    kernel::pad(par, seqs, features, order, flat, padded)
}

/// A padded `[B, T, F]` batch back to packed `[N, F]` rows; whatever the padding holds is
/// ignored.
pub fn unpad<T: Float>(seqs: &Sequences, padded: &[T], features: usize) -> Result<Vec<T>> {
    kernel::unpad_new(Par::auto(), seqs, features, PadOrder::BatchMajor, padded)
}

/// A padded time-major `[T, B, F]` batch back to packed rows.
pub fn unpad_time_major<T: Float>(
    seqs: &Sequences,
    padded: &[T],
    features: usize,
) -> Result<Vec<T>> {
    kernel::unpad_new(Par::auto(), seqs, features, PadOrder::TimeMajor, padded)
}

/// [`unpad`] or [`unpad_time_major`] with the parallelism you choose, into a fresh buffer
/// written once.
pub fn unpad_with<T: Float>(
    par: Par,
    seqs: &Sequences,
    padded: &[T],
    features: usize,
    order: PadOrder,
) -> Result<Vec<T>> {
    kernel::unpad_new(par, seqs, features, order, padded)
}

/// [`unpad`] or [`unpad_time_major`] into your buffer, with the parallelism you choose.
pub fn unpad_into<T: Float>(
    par: Par,
    seqs: &Sequences,
    padded: &[T],
    features: usize,
    order: PadOrder,
    flat: &mut [T],
) -> Result<()> {
    kernel::unpad(par, seqs, features, order, padded, flat)
}
