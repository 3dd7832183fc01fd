//! Validity masks.

use rlgrad_core::cpu::alloc;
use rlgrad_core::{Element, Float, Result, check};

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
/// use rlgrad_mask::sequence_mask;
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

    fn to_numbers<E: Element>(&self, function: &'static str, one: E) -> Result<Vec<E>> {
        let mut out = alloc::try_zeroed(self.valid.len(), function, "self")?;
        for (o, &v) in out.iter_mut().zip(&self.valid) {
            if v {
                *o = one;
            }
        }
        Ok(out)
    }
}
