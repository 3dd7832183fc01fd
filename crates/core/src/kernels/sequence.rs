//! Ragged sequences in padded batches: the kernels behind `rlgrad-mask`.
//!
//! A batch of `B` sequences of lengths `l_b` is stored either packed (`[N, F]`, `N = sum l_b`,
//! sequence after sequence) or padded to `T` steps (`[B, T, F]` batch-major or
//! `[T, B, F]` time-major, zeros outside the valid steps). [`Sequences`] holds the lengths
//! and their prefix sums (`offsets[b]` is the packed row where sequence `b` starts), so
//! pad and unpad are gather/scatter copies.
//!
//! # Canonical orders
//!
//! - Masked sums run over the valid elements of a `[B, T]` array in *packed order*
//!   (sequence by sequence, step by step), with the canonical reduction of
//!   [`crate::reduce`] over that sequence of values: a masked sum equals, bit for bit, the
//!   plain sum of the unpadded values. Padding is never read, so NaN in padding is harmless.
//! - Per-sequence sums are the canonical sum of each sequence's valid values.
//! - Masked maps write `map(x)` at valid steps and `+0` at padding.

use crate::{Device, Error, Float, Result};

/// Lengths of `B` sequences padded to `max_len` steps, with their prefix sums.
///
/// ```
/// use rlgrad_core::kernels::sequence::Sequences;
/// let seqs = Sequences::new(&[3, 0, 2], None)?;
/// assert_eq!((seqs.batch(), seqs.max_len(), seqs.total()), (3, 3, 5));
/// assert_eq!(seqs.offsets(), &[0, 3, 3, 5]);
/// assert!(Sequences::new(&[3, 5], Some(4)).is_err()); // a sequence longer than max_len
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Sequences {
    lengths: Vec<usize>,
    offsets: Vec<usize>,
    max_len: usize,
}

impl Sequences {
    /// Sequences of `lengths`, padded to `max_len` (`None`: the longest length). An error
    /// when a length exceeds `max_len` or the total overflows.
    pub fn new(lengths: &[usize], max_len: Option<usize>) -> Result<Self> {
        let longest = lengths.iter().copied().max().unwrap_or(0);
        let max_len = max_len.unwrap_or(longest);
        if let Some((b, &len)) = lengths.iter().enumerate().find(|&(_, &l)| l > max_len) {
            return Err(Error::out_of_range(
                "Sequences::new",
                "lengths",
                format_args!("lengths <= max_len = {max_len}"),
                format_args!("length {len} at index {b}"),
            ));
        }
        let mut offsets =
            crate::cpu::alloc::try_with_capacity(lengths.len() + 1, "Sequences::new", "lengths")?;
        offsets.push(0usize);
        for &len in lengths {
            let next = offsets[offsets.len() - 1].checked_add(len).ok_or_else(|| {
                Error::shape(
                    "Sequences::new",
                    "lengths",
                    "a total length that fits in usize",
                    "an overflowing sum",
                )
            })?;
            offsets.push(next);
        }
        lengths.len().checked_mul(max_len).ok_or_else(|| {
            Error::shape(
                "Sequences::new",
                "max_len",
                "B * max_len that fits in usize",
                format_args!("{} x {max_len}", lengths.len()),
            )
        })?;
        Ok(Self {
            lengths: crate::cpu::alloc::try_copy(lengths, "Sequences::new", "lengths")?,
            offsets,
            max_len,
        })
    }

    /// The number of sequences `B`.
    pub fn batch(&self) -> usize {
        self.lengths.len()
    }

    /// The padded length `T`.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The number of valid steps `N`.
    pub fn total(&self) -> usize {
        self.offsets[self.lengths.len()]
    }

    /// The lengths.
    pub fn lengths(&self) -> &[usize] {
        &self.lengths
    }

    /// The prefix sums of the lengths (`B + 1` entries, from 0 to `N`).
    pub fn offsets(&self) -> &[usize] {
        &self.offsets
    }

    /// `B * T`, the number of steps of the padded batch.
    pub fn padded_steps(&self) -> usize {
        self.lengths.len() * self.max_len
    }

    /// The sequence holding packed row `row`, or `None` when `row >= total()`.
    ///
    /// ```
    /// use rlgrad_core::kernels::sequence::Sequences;
    /// let seqs = Sequences::new(&[2, 0, 1], None)?;
    /// assert_eq!(seqs.sequence_of(1), Some(0));
    /// assert_eq!(seqs.sequence_of(2), Some(2)); // the empty sequence 1 holds no row
    /// assert_eq!(seqs.sequence_of(3), None);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn sequence_of(&self, row: usize) -> Option<usize> {
        crate::reduce::segment_of(&self.offsets, row)
    }
}

/// Where padded data keeps its steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PadOrder {
    /// `[B, T, F]`: one sequence after the other (RLlib's layout).
    BatchMajor,
    /// `[T, B, F]`: one step after the other (what recurrent cells consume).
    TimeMajor,
}

/// The value a masked sum adds for each valid element `x` of a `[B, T]` array.
#[derive(Debug)]
pub enum MaskedTerm<'a, B: ?Sized, T> {
    /// `x`
    Value,
    /// `(x - mean) * (x - mean)`
    SquaredDeviation {
        /// The value subtracted.
        mean: T,
    },
    /// `(x - shift) * other`, with `other` a `[B, T]` array of the same layout.
    Product {
        /// The other factor.
        other: &'a B,
        /// The value subtracted from `x`.
        shift: T,
    },
}

impl<'a, B: ?Sized, T: Copy> MaskedTerm<'a, B, T> {
    /// The same term over other buffers (for example `Vec<T>` to `[T]`).
    pub fn map<C: ?Sized>(self, f: impl Fn(&'a B) -> &'a C) -> MaskedTerm<'a, C, T> {
        match self {
            Self::Value => MaskedTerm::Value,
            Self::SquaredDeviation { mean } => MaskedTerm::SquaredDeviation { mean },
            Self::Product { other, shift } => MaskedTerm::Product {
                other: f(other),
                shift,
            },
        }
    }
}

impl<B: ?Sized, T: Copy> Clone for MaskedTerm<'_, B, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B: ?Sized, T: Copy> Copy for MaskedTerm<'_, B, T> {}

/// What a masked map writes at each valid element `x` (padding gets `+0`).
#[derive(Debug)]
pub enum MaskedMap<'a, B: ?Sized, T> {
    /// `value`
    Fill(T),
    /// `values[b]`, a `[B]` array: one value per sequence.
    PerSequence(&'a B),
    /// `(x - shift) * scale`
    Scale {
        /// The value subtracted.
        shift: T,
        /// The factor.
        scale: T,
    },
    /// `(x - mean) / denominator`
    Standardize {
        /// The value subtracted.
        mean: T,
        /// The divisor.
        denominator: T,
    },
    /// `(grad - grad_mean) / denominator - (x - mean) * coefficient`, with `grad` a `[B, T]`
    /// array: the backward pass of a standardization.
    StandardizeBackward {
        /// The upstream gradient.
        grad: &'a B,
        /// Its masked mean.
        grad_mean: T,
        /// The mean of `x`.
        mean: T,
        /// `std + eps`.
        denominator: T,
        /// `sum(grad * (x - mean)) / ((N - ddof) * std * denominator^2)`.
        coefficient: T,
    },
}

impl<'a, B: ?Sized, T: Copy> MaskedMap<'a, B, T> {
    /// The same map over other buffers (for example `Vec<T>` to `[T]`).
    pub fn map<C: ?Sized>(self, f: impl Fn(&'a B) -> &'a C) -> MaskedMap<'a, C, T> {
        match self {
            Self::Fill(value) => MaskedMap::Fill(value),
            Self::PerSequence(values) => MaskedMap::PerSequence(f(values)),
            Self::Scale { shift, scale } => MaskedMap::Scale { shift, scale },
            Self::Standardize { mean, denominator } => MaskedMap::Standardize { mean, denominator },
            Self::StandardizeBackward {
                grad,
                grad_mean,
                mean,
                denominator,
                coefficient,
            } => MaskedMap::StandardizeBackward {
                grad: f(grad),
                grad_mean,
                mean,
                denominator,
                coefficient,
            },
        }
    }
}

impl<B: ?Sized, T: Copy> Clone for MaskedMap<'_, B, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B: ?Sized, T: Copy> Copy for MaskedMap<'_, B, T> {}

impl<B: ?Sized, T> MaskedMap<'_, B, T> {
    /// Whether the map reads `x` (all but `Fill` and `PerSequence` do).
    pub fn reads_x(&self) -> bool {
        !matches!(self, Self::Fill(_) | Self::PerSequence(_))
    }
}

impl<T: Float> MaskedMap<'_, [T], T> {
    /// The canonical value at a valid element `x` of sequence `b` at flat index `i`.
    #[inline(always)]
    pub(crate) fn apply(&self, x: T, b: usize, i: usize) -> T {
        match *self {
            Self::Fill(value) => value,
            Self::PerSequence(values) => values[b],
            Self::Scale { shift, scale } => (x - shift) * scale,
            Self::Standardize { mean, denominator } => (x - mean) / denominator,
            Self::StandardizeBackward {
                grad,
                grad_mean,
                mean,
                denominator,
                coefficient,
            } => (grad[i] - grad_mean) / denominator - (x - mean) * coefficient,
        }
    }
}

/// The ragged-sequence kernels. `[B, T]` arrays have `B * T` elements in batch-major
/// order; feature arrays have `features` values per step.
pub trait SequenceKernel<T: Float>: Device {
    /// Packed `[N, F]` to padded (zeros outside the valid steps).
    fn pad(
        &self,
        seqs: &Sequences,
        features: usize,
        order: PadOrder,
        flat: &Self::Buffer<T>,
        padded: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// Padded to packed `[N, F]`; padding is never read.
    fn unpad(
        &self,
        seqs: &Sequences,
        features: usize,
        order: PadOrder,
        padded: &Self::Buffer<T>,
        flat: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// The canonical sum of `term(x)` over the valid elements of the `[B, T]` array `x`.
    fn masked_sum(
        &self,
        seqs: &Sequences,
        x: &Self::Buffer<T>,
        term: MaskedTerm<'_, Self::Buffer<T>, T>,
    ) -> Result<T>;

    /// The canonical sum of each sequence's valid elements, into `sums` (`[B]`).
    fn sequence_sums(
        &self,
        seqs: &Sequences,
        x: &Self::Buffer<T>,
        sums: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// `out = map(x)` at the valid elements of the `[B, T]` arrays, `+0` at padding. `x`
    /// may be `None` for the maps that do not read it ([`MaskedMap::reads_x`]).
    fn masked_map(
        &self,
        seqs: &Sequences,
        x: Option<&Self::Buffer<T>>,
        map: MaskedMap<'_, Self::Buffer<T>, T>,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;
}
