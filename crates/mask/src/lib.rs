//! rlgrad-mask: padded sequences done right, for recurrent policies trained on
//! variable-length sequences.
//!
//! - [`sequence_mask`]: the `[B, T]` validity mask (as bools, `u8` or floats), like
//!   `tf.sequence_mask`.
//! - [`pad`] / [`unpad`] (and their time-major `[T, B, F]` forms): packed `[N, F]` rows to a
//!   zero-padded batch and back, as gather/scatter copies over the prefix sums of the
//!   lengths, parallel across sequences.
//! - Masked reductions over `[B, T, F]` data (`F` values per step; `[B, T]` is `F = 1`) with
//!   their backward passes: [`masked_sum`], [`masked_mean`] (divides by the number of
//!   *valid* values), [`sequence_means`], [`masked_var`], [`masked_std`],
//!   [`masked_normalize`] (advantage normalization over valid steps only). Padding is
//!   selected away, never multiplied by zero, so NaN or garbage in padding cannot leak
//!   into a loss or a gradient.
//! - [`Sequences::mask`] and [`transpose`] (batch-major `[B, T, F]` to time-major
//!   `[T, B, F]` and back, any `F`).
//! - [`chop_into_sequences`]: RLlib's episode chopping into a [`SequenceBatch`], whose
//!   [`minibatches`](SequenceBatch::minibatches) shuffle whole sequences with a seeded
//!   [`Rng`], never rows inside them.
//!
//! Everything works on plain slices, on the [`Cpu`](device::Cpu) with all its threads;
//! [`device`] runs the same kernels on any device implementing
//! [`SequenceKernel`](device::SequenceKernel). Every type the functions take or return is
//! exported here, so this crate alone is a complete dependency.
//!
//! # Example
//!
//! ```
//! use rlgrad_mask::{masked_mean, masked_mean_backward, pad, unpad, Sequences};
//!
//! // Three sequences of 2, 0 and 3 steps, one feature per step, packed.
//! let seqs = Sequences::new(&[2, 0, 3], None)?;
//! let flat = [1.0f32, 2.0, 10.0, 20.0, 30.0];
//! let padded = pad(&seqs, &flat, 1)?; // [B, T, F] = [3, 3, 1]
//! assert_eq!(padded, [1.0, 2.0, 0.0, 0.0, 0.0, 0.0, 10.0, 20.0, 30.0]);
//! assert_eq!(unpad(&seqs, &padded, 1)?, flat);
//!
//! // The mean over the 5 valid steps, not over the 9 padded ones.
//! assert_eq!(masked_mean(&seqs, &padded, 1)?, 63.0 / 5.0);
//! let grad = masked_mean_backward(&seqs, 1, 1.0f32)?;
//! assert_eq!(grad, [0.2, 0.2, 0.0, 0.0, 0.0, 0.0, 0.2, 0.2, 0.2]);
//! # Ok::<(), rlgrad_mask::Error>(())
//! ```
//!
//! # Guarantees and errors
//!
//! Masked sums follow the canonical order of [`rlgrad_core::kernels::sequence`]: the valid
//! values in packed order, reduced like any rlgrad sum, so `masked_mean` of padded data is
//! bitwise equal to the mean of the unpadded values, at every thread count. A reduction
//! over zero valid values (and a variance with `N F <= ddof`) is an [`Error`], never a
//! silent NaN. Lengths longer than `max_len`, lengths that do not sum to the packed row count,
//! mismatched buffer sizes and feature widths, and (on request) non-contiguous episode ids
//! are errors naming the argument. No public function panics or aborts on its input: sizes
//! are checked arithmetic, a buffer the host cannot allocate is an error naming its size,
//! accessors past the end give `None`, and an `_into` function that fails leaves its
//! output as it was (tested with random sizes up to `usize::MAX` and non-finite values).

#![forbid(unsafe_code)]

mod backend;
mod chop;
pub mod device;
mod padding;
mod reductions;

pub use chop::{ChopConfig, Column, SequenceBatch, chop_into_sequences};
pub use padding::{
    pad, pad_into, pad_time_major, pad_with, unpad, unpad_into, unpad_time_major, unpad_with,
};
pub use reductions::{
    masked_mean, masked_mean_backward, masked_normalize, masked_normalize_backward, masked_std,
    masked_std_backward, masked_sum, masked_sum_backward, masked_var, masked_var_backward,
    sequence_means, sequence_means_backward,
};
pub use rlgrad_core::cpu::layout::transpose;
pub use rlgrad_core::kernels::sequence::{PadOrder, SequenceMask, Sequences, sequence_mask};
pub use rlgrad_core::{Error, Float, Par, Result, Rng};

/// The README's examples, compiled and run as doctests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
