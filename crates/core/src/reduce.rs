//! Canonical reductions: the one order of floating-point operations every rlgrad sum,
//! mean, variance and norm follows, on every device and at every thread count.
//!
//! # The canonical order
//!
//! 1. The elements are split by index into *leaves* of [`LEAF_LEN`] = 64 consecutive
//!    elements (the last leaf may be shorter).
//! 2. Inside a leaf, element `k` is added to lane `k % LANES` ([`LANES`] = 16), in
//!    increasing `k`. Each lane starts at `-0.0`, the exact identity of addition, so a
//!    short last leaf behaves as if padded with `-0.0`.
//! 3. Leaves are combined lane by lane in a fixed binary tree over the leaf index: the sum
//!    of leaves `[lo, hi)` is `S(lo, p) + S(p, hi)` where `p - lo` is the largest power of
//!    two below `hi - lo` (a balanced tree when the count is a power of two).
//! 4. The 16 lanes of the root are folded by halving: `l[j] += l[j + 8]` for `j < 8`, then
//!    `l[j] += l[j + 4]`, `l[j] += l[j + 2]`, `l[0] += l[1]`.
//!
//! Nothing here depends on the thread count or on the memory alignment of the input:
//! [`Par`](crate::Par) only decides how many subtrees run concurrently. An element passes
//! through at most `3 + 4 + ceil(log2(leaves))` additions, about `ceil(log2(n)) + 1`, the
//! depth of plain pairwise summation, so the error bound is that of pairwise summation.
//! The 16 independent lanes make the inner loop vectorize, and the lane-wise tree costs
//! one vector add per leaf.
//!
//! An empty sum is `+0.0`. The mean is `sum / n` with `n` rounded to the element type; the
//! variance is two-pass: `sum((x - mean)^2) / (n - ddof)`, each sum canonical.
//! Min and max propagate NaN and use the same leaves (sequential inside a leaf) and tree.
//!
//! # The contract and the Cpu's implementation
//!
//! This module is the device-neutral contract: the order above, [`LEAF_LEN`] and
//! [`LANES`], the NaN and tie rules of [`min2`] and [`max2`], and the virtual indices of
//! segments laid end to end ([`segment_of`], [`for_each_segment`], [`fill_from_segments`])
//! over which the masked sums are canonical. Every device follows it (rlgrad-cuda's
//! `reduce.cu` builds the same leaves and tree), and so do the crates that combine
//! partial sums themselves (rlgrad-dist's tree and statistics).
//!
//! The functions over host slices ([`sum`], [`mean`], [`var`], [`sum_columns`],
//! [`sum_segments`], [`tree_reduce`], ...) are the Cpu device's implementation:
//! vectorized for each instruction set and parallel on [`Par`](crate::Par), in
//! `src/cpu/reduce/`.
//! They are re-exported here because they are the slice-level API of reductions and the
//! reference the other devices are tested against.
//!
//! ```
//! use rlgrad_core::{reduce, Par};
//! let x: Vec<f32> = (0..1000).map(|i| i as f32 * 0.1).collect();
//! let one = reduce::sum(&x, Par::Seq);
//! let four = reduce::sum(&x, Par::rayon(4));
//! assert_eq!(one.to_bits(), four.to_bits());
//! ```

use std::ops::Range;

use crate::Float;

pub use crate::cpu::reduce::slice::{
    max, mean, mean_var, min, sum, sum_columns, sum_gathered, sum_map, sum_segments,
    sum_segments_plain, tree_reduce, var,
};

/// Elements per leaf of the canonical tree.
pub const LEAF_LEN: usize = 64;
/// Independent accumulators inside a leaf.
pub const LANES: usize = 16;

/// The largest power of two strictly below `n` (`n >= 2`): where step 3 of the canonical
/// order splits `n` leaves.
pub(crate) fn split_point(n: usize) -> usize {
    debug_assert!(n >= 2);
    1 << (usize::BITS - 1 - (n - 1).leading_zeros())
}

/// NaN-propagating minimum of two values; the first wins a tie (so `min(-0, +0) = -0`).
#[inline(always)]
pub fn min2<T: Float>(a: T, b: T) -> T {
    if a.is_nan() {
        a
    } else if b.is_nan() || b < a {
        b
    } else {
        a
    }
}

/// NaN-propagating maximum of two values; the first wins a tie.
#[inline(always)]
pub fn max2<T: Float>(a: T, b: T) -> T {
    if a.is_nan() {
        a
    } else if b.is_nan() || b > a {
        b
    } else {
        a
    }
}

/// The segment holding virtual index `index` of segments laid end to end, segment `k`
/// spanning `offsets[k]..offsets[k + 1]` (non-decreasing `offsets` starting at 0); `None`
/// when no segment holds it (`index` at or past the last offset). Empty segments are
/// skipped.
///
/// ```
/// use rlgrad_core::reduce::segment_of;
/// let offsets = [0, 3, 3, 5]; // segments of 3, 0 and 2 elements
/// assert_eq!(segment_of(&offsets, 2), Some(0));
/// assert_eq!(segment_of(&offsets, 3), Some(2));
/// assert_eq!(segment_of(&offsets, 5), None);
/// ```
pub fn segment_of(offsets: &[usize], index: usize) -> Option<usize> {
    let after = offsets.partition_point(|&o| o <= index);
    (after > 0 && after < offsets.len()).then(|| after - 1)
}

/// Walks the virtual indices `range` of segments laid end to end (see [`segment_of`]):
/// calls `visit(k, local)` for each piece, in order, where `local` indexes segment `k`.
/// `cursor` is a segment at or before the one holding `range.start` and is advanced, so a
/// run of leaves walks the segments once instead of searching them leaf by leaf (the
/// cursor of [`sum_gathered`] for sums over ragged data). The walk stops at the first
/// index that no segment at or after `cursor` holds.
#[inline(always)]
pub fn for_each_segment(
    offsets: &[usize],
    cursor: &mut usize,
    range: Range<usize>,
    mut visit: impl FnMut(usize, Range<usize>),
) {
    let mut i = range.start;
    while i < range.end {
        let (start, end) = loop {
            let Some(next) = cursor.checked_add(1) else {
                return;
            };
            match (offsets.get(*cursor), offsets.get(next)) {
                (Some(_), Some(&end)) if end <= i => *cursor = next,
                (Some(&start), Some(&end)) if start <= i => break (start, end),
                _ => return,
            }
        };
        let end = range.end.min(end);
        visit(*cursor, i - start..end - start);
        i = end;
    }
}

/// [`for_each_segment`] for a [`sum_gathered`] block: `out` holds the elements `range`,
/// and `fill(k, local, piece)` writes the `piece` of it that segment `k`'s elements
/// `local` occupy.
///
/// ```
/// use rlgrad_core::reduce::fill_from_segments;
/// let parts = [&[1.0f32, 2.0][..], &[3.0, 4.0, 5.0][..]];
/// let mut out = [0.0; 3];
/// fill_from_segments(&[0, 2, 5], &mut 0, 1..4, &mut out, |k, local, piece| {
///     piece.copy_from_slice(&parts[k][local]);
/// });
/// assert_eq!(out, [2.0, 3.0, 4.0]);
/// ```
#[inline(always)]
pub fn fill_from_segments<T>(
    offsets: &[usize],
    cursor: &mut usize,
    range: Range<usize>,
    out: &mut [T],
    mut fill: impl FnMut(usize, Range<usize>, &mut [T]),
) {
    let mut rest = out;
    for_each_segment(offsets, cursor, range, |k, local| {
        let (piece, tail) = std::mem::take(&mut rest).split_at_mut(local.len());
        rest = tail;
        fill(k, local, piece);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Par;

    /// The recursive definition of the module docs, written as plainly as possible.
    fn reference_sum(x: &[f32]) -> f32 {
        fn leaves(x: &[f32], lo: usize, hi: usize) -> [f32; LANES] {
            if hi - lo == 1 {
                let mut lanes = [-0.0f32; LANES];
                for (k, &v) in x[lo * LEAF_LEN..((lo + 1) * LEAF_LEN).min(x.len())]
                    .iter()
                    .enumerate()
                {
                    lanes[k % LANES] += v;
                }
                return lanes;
            }
            let mid = lo + split_point(hi - lo);
            let (l, r) = (leaves(x, lo, mid), leaves(x, mid, hi));
            std::array::from_fn(|j| l[j] + r[j])
        }
        if x.is_empty() {
            return 0.0;
        }
        let mut lanes = leaves(x, 0, x.len().div_ceil(LEAF_LEN));
        for width in [8, 4, 2, 1] {
            for j in 0..width {
                lanes[j] += lanes[j + width];
            }
        }
        lanes[0]
    }

    #[test]
    fn matches_the_written_definition() {
        let mut rng = crate::Rng::new(5, "reduce");
        for len in [0, 1, 15, 16, 17, 63, 64, 65, 1000, 4096, 4097, 70_001] {
            let x: Vec<f32> = (0..len).map(|_| rng.normal(0.0, 1e3)).collect();
            let want = reference_sum(&x).to_bits();
            for par in [Par::Seq, Par::rayon(2), Par::rayon(3), Par::rayon(4)] {
                assert_eq!(sum(&x, par).to_bits(), want, "len {len} par {par:?}");
            }
        }
    }

    #[test]
    fn split_points() {
        assert_eq!(split_point(2), 1);
        assert_eq!(split_point(4), 2);
        assert_eq!(split_point(5), 4);
        assert_eq!(split_point(8), 4);
        assert_eq!(split_point(9), 8);
    }

    #[test]
    fn segment_walks_survive_any_offsets() {
        assert_eq!(segment_of(&[], 0), None);
        assert_eq!(segment_of(&[0], 0), None);
        assert_eq!(segment_of(&[0, 3, 3, 5], 3), Some(2));
        assert_eq!(segment_of(&[0, 3, 3, 5], 9), None);
        let mut pieces = Vec::new();
        let mut cursor = 0;
        for_each_segment(&[0, 2, 5], &mut cursor, 1..9, |k, r| pieces.push((k, r)));
        assert_eq!(pieces, [(0, 1..2), (1, 0..3)]);
        for (offsets, mut cursor) in [(&[][..], 0), (&[0, 4][..], usize::MAX), (&[3, 1][..], 0)] {
            for_each_segment(offsets, &mut cursor, 0..4, |_, _| {});
        }
    }
}
