//! Ragged sequences in padded batches: the kernels behind `rlgrad-mask`.
//!
//! A batch of `B` sequences of lengths `l_b` is stored either packed (`[N, F]`, `N = sum l_b`,
//! sequence after sequence) or padded to `T` steps (`[B, T, F]` batch-major or
//! `[T, B, F]` time-major, zeros outside the valid steps). [`Sequences`] holds the lengths
//! and their prefix sums (`offsets[b]` is the packed row where sequence `b` starts), so
//! pad and unpad are gather/scatter copies.
//!
//! Masked reductions and maps read batch-major `[B, T, F]` arrays (`[B, T]` is `F = 1`):
//! the `F` values of step `t` of sequence `b` sit at `(b * T + t) * F ..`, and every value
//! of a valid step is valid.
//!
//! # Canonical orders
//!
//! - Masked sums run over the valid values of a `[B, T, F]` array in *packed order*
//!   (sequence by sequence, step by step, feature by feature: the order of the unpadded
//!   `[N, F]` rows), with the canonical reduction of [`crate::reduce`] over that sequence
//!   of values: a masked sum equals, bit for bit, the plain sum of the unpadded values.
//!   Padding is never read, so NaN in padding is harmless.
//! - Per-sequence sums are the canonical sum of each sequence's valid values.
//! - Masked maps write `map(x)` at valid values and `+0` at padding.

use crate::cpu::alloc;
use crate::{Device, Error, Float, Result, check};

/// Lengths of `B` sequences padded to `max_len` steps, with their prefix sums.
///
/// **Padding never matters:** every rlgrad op that takes `Sequences` (masked reductions,
/// normalization, pad/unpad, the GRU and LSTM runners, `Var::zero_padding`) selects
/// padded positions out, in the forward and the backward, and never multiplies them by a
/// zero mask, so whatever they hold (NaN, ±inf, stale values), every output and every
/// gradient is bitwise what it is with zero padding (property-tested with NaN, ±inf,
/// ±1e30 and random bits).
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
        // One pass builds the offsets and finds the longest length and any overflow; the
        // errors are located afterwards, off the common path.
        let mut offsets = alloc::try_with_capacity(lengths.len() + 1, "Sequences::new", "lengths")?;
        let (mut total, mut overflow, mut longest) = (0usize, false, 0usize);
        offsets.push(0usize);
        offsets.extend(lengths.iter().map(|&len| {
            let (next, wrapped) = total.overflowing_add(len);
            (total, overflow, longest) = (next, overflow | wrapped, longest.max(len));
            next
        }));
        let max_len = max_len.unwrap_or(longest);
        if longest > max_len {
            let (b, len) = lengths
                .iter()
                .enumerate()
                .find(|&(_, &l)| l > max_len)
                .expect("a length above max_len exists");
            return Err(Error::out_of_range(
                "Sequences::new",
                "lengths",
                format_args!("lengths <= max_len = {max_len}"),
                format_args!("length {len} at index {b}"),
            ));
        }
        if overflow {
            return Err(Error::shape(
                "Sequences::new",
                "lengths",
                "a total length that fits in usize",
                "an overflowing sum",
            ));
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
            lengths: alloc::try_copy(lengths, "Sequences::new", "lengths")?,
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

    /// The `[B, T]` validity mask of these sequences; an error when the host cannot
    /// allocate it.
    ///
    /// ```
    /// use rlgrad_core::kernels::sequence::Sequences;
    /// let seqs = Sequences::new(&[1, 2], Some(3))?;
    /// assert_eq!(seqs.mask()?.as_bools(), [true, false, false, true, true, false]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn mask(&self) -> Result<SequenceMask> {
        sequence_mask(&self.lengths, Some(self.max_len))
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

/// A `[B, T]` mask: `mask[b, t] = t < lengths[b]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SequenceMask {
    batch: usize,
    max_len: usize,
    valid: Vec<bool>,
}

/// The mask of `lengths` over `max_len` steps (`None`: the longest length), as
/// `tf.sequence_mask` computes it: a `max_len` below some lengths truncates those rows.
/// An error when `B * max_len` does not fit in `usize` or the host cannot allocate it.
///
/// ```
/// use rlgrad_core::kernels::sequence::sequence_mask;
/// let mask = sequence_mask(&[1, 3, 0], None)?;
/// assert_eq!(mask.to_u8()?, [1, 0, 0, 1, 1, 1, 0, 0, 0]);
/// assert_eq!(mask.to_float::<f32>()?[..3], [1.0, 0.0, 0.0]);
/// assert_eq!((mask.batch(), mask.max_len()), (3, 3));
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn sequence_mask(lengths: &[usize], max_len: Option<usize>) -> Result<SequenceMask> {
    let max_len = max_len.unwrap_or_else(|| lengths.iter().copied().max().unwrap_or(0));
    let len = check::product("sequence_mask", "max_len", lengths.len(), max_len)?;
    let mut valid = alloc::try_with_capacity(len, "sequence_mask", "max_len")?;
    for &l in lengths {
        valid.extend((0..max_len).map(|t| t < l));
    }
    Ok(SequenceMask {
        batch: lengths.len(),
        max_len,
        valid,
    })
}

impl SequenceMask {
    /// `B`.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// `T`.
    pub fn max_len(&self) -> usize {
        self.max_len
    }

    /// The mask as booleans, `[B, T]` row-major.
    pub fn as_bools(&self) -> &[bool] {
        &self.valid
    }

    /// The mask as 0/1 bytes; an error when the host cannot allocate them.
    pub fn to_u8(&self) -> Result<Vec<u8>> {
        self.to_numbers("SequenceMask::to_u8", 1)
    }

    /// The mask as 0/1 floats; an error when the host cannot allocate them.
    pub fn to_float<T: Float>(&self) -> Result<Vec<T>> {
        self.to_numbers("SequenceMask::to_float", T::one())
    }

    fn to_numbers<E: crate::Element>(&self, function: &'static str, one: E) -> Result<Vec<E>> {
        let mut out = alloc::try_zeroed(self.valid.len(), function, "self")?;
        for (o, &v) in out.iter_mut().zip(&self.valid) {
            if v {
                *o = one;
            }
        }
        Ok(out)
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

/// The value a masked sum adds for each valid value `x` of a `[B, T, F]` array.
#[derive(Debug)]
pub enum MaskedTerm<'a, B: ?Sized, T> {
    /// `x`
    Value,
    /// `(x - mean) * (x - mean)`
    SquaredDeviation {
        /// The value subtracted.
        mean: T,
    },
    /// `(x - shift) * other`, with `other` a `[B, T, F]` array of the same layout.
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

/// What a masked map writes at each valid value `x` (padding gets `+0`).
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
    /// `(grad - grad_mean) / denominator - (x - mean) * coefficient`, with `grad` a
    /// `[B, T, F]` array: the backward pass of a standardization.
    StandardizeBackward {
        /// The upstream gradient.
        grad: &'a B,
        /// Its masked mean.
        grad_mean: T,
        /// The mean of `x`.
        mean: T,
        /// `std + eps`.
        denominator: T,
        /// `sum(grad * (x - mean)) / ((N F - ddof) * std * denominator^2)`.
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
    /// The canonical value at a valid value `x` of sequence `b` at flat index `i`.
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

/// The ragged-sequence kernels. Padded arrays have `features` values per step (`F`):
/// `[B, T, F]` batch-major (`B * T * F` elements) unless the method takes a [`PadOrder`].
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

    /// The canonical sum of `term(x)` over the valid values of the `[B, T, F]` array `x`.
    fn masked_sum(
        &self,
        seqs: &Sequences,
        features: usize,
        x: &Self::Buffer<T>,
        term: MaskedTerm<'_, Self::Buffer<T>, T>,
    ) -> Result<T>;

    /// The canonical sum of each sequence's valid values of the `[B, T, F]` array `x`,
    /// into `sums` (`[B]`).
    fn sequence_sums(
        &self,
        seqs: &Sequences,
        features: usize,
        x: &Self::Buffer<T>,
        sums: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// `out = map(x)` at the valid values of the `[B, T, F]` arrays, `+0` at padding. `x`
    /// may be `None` for the maps that do not read it ([`MaskedMap::reads_x`]).
    fn masked_map(
        &self,
        seqs: &Sequences,
        features: usize,
        x: Option<&Self::Buffer<T>>,
        map: MaskedMap<'_, Self::Buffer<T>, T>,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;
}
