//! The Cpu's canonical reductions of host slices, in the order that [`crate::reduce`]
//! defines; that module re-exports the public functions here as the slice-level API.
//!
//! A subtree of leaves that one thread reduces is evaluated left to right by a binary
//! counter over complete power-of-two subtrees (`Counter`) rather than by the recursion
//! the order is written as: the same tree, with whole leaves added four at a time so that
//! their chains of additions overlap. The loops are `Vectorized` jobs, compiled for each
//! instruction set; the lanes and the order of the additions are the contract's, so every
//! vector width gives the same bits. Subtrees above the grain of `Family::Reduce` are
//! split over rayon tasks at the tree's own split points, so the thread count never
//! changes the tree either.

use crate::cpu::grain::{Family, grain};
use std::ops::Range;

use crate::reduce::{LANES, LEAF_LEN, fill_from_segments, max2, min2, segment_of, split_point};
use crate::{Error, Float, Par, Result};

/// The lane accumulators of one leaf (or of a subtree of leaves, lane by lane).
#[derive(Debug, Clone, Copy)]
struct Leaf<T> {
    lanes: [T; LANES],
}

impl<T: Float> Leaf<T> {
    fn combine(mut self, right: Self) -> Self {
        for (l, r) in self.lanes.iter_mut().zip(right.lanes) {
            *l = *l + r;
        }
        self
    }

    fn fold(mut self) -> T {
        let mut width = LANES / 2;
        while width > 0 {
            for j in 0..width {
                self.lanes[j] = self.lanes[j] + self.lanes[j + width];
            }
            width /= 2;
        }
        self.lanes[0]
    }
}

/// Reduces `leaf(i)` for `i` in `0..leaves` with `combine` in the canonical tree
/// (step 3 of [the canonical order](crate::reduce)). `None` when `leaves == 0`.
pub fn tree_reduce<V, L, C>(leaves: usize, par: Par, leaf: L, combine: C) -> Option<V>
where
    V: Send,
    L: Fn(usize) -> V + Sync,
    C: Fn(V, V) -> V + Sync,
{
    tree_reduce_with(
        leaves,
        par,
        |range| tree_sequential(range, &leaf, &combine),
        &combine,
    )
}

/// [`tree_reduce`] with the subtrees that run on one thread evaluated by `subtree`, which
/// must compute the canonical tree of its leaf range (a specialized loop may do that
/// faster than leaf-by-leaf calls).
fn tree_reduce_with<V, S, C>(leaves: usize, par: Par, subtree: S, combine: &C) -> Option<V>
where
    V: Send,
    S: Fn(Range<usize>) -> V + Sync,
    C: Fn(V, V) -> V + Sync,
{
    if leaves == 0 {
        return None;
    }
    // Leaves per task below which a subtree is not split further for parallelism.
    let fewest = (grain(Family::Reduce) / LEAF_LEN).max(1);
    let grain = leaves.div_ceil(2 * par.threads()).max(fewest);
    Some(tree_range(0..leaves, par, grain, &subtree, combine))
}

/// The canonical sum of `len` elements whose subtrees of leaves `subtree` computes: the
/// tree over the subtrees, then the fold of the root's lanes (`+0.0` when empty).
fn leaf_sum<T, S>(len: usize, par: Par, subtree: S) -> T
where
    T: Float,
    S: Fn(Range<usize>) -> Leaf<T> + Sync,
{
    let combine = |a: Leaf<T>, b: Leaf<T>| a.combine(b);
    tree_reduce_with(len.div_ceil(LEAF_LEN), par, subtree, &combine)
        .map_or_else(T::zero, Leaf::fold)
}

fn tree_range<V, S, C>(range: Range<usize>, par: Par, grain: usize, subtree: &S, combine: &C) -> V
where
    V: Send,
    S: Fn(Range<usize>) -> V + Sync,
    C: Fn(V, V) -> V + Sync,
{
    let n = range.len();
    if par.threads() == 1 || n <= grain {
        return subtree(range);
    }
    let mid = range.start + split_point(n);
    let (left, right) = par.join(
        || tree_range(range.start..mid, par, grain, subtree, combine),
        || tree_range(mid..range.end, par, grain, subtree, combine),
    );
    combine(left, right)
}

/// The canonical tree of `range`, evaluated left to right with a stack of complete
/// power-of-two subtrees (a binary counter): the same tree as the recursive definition.
fn tree_sequential<V, L, C>(range: Range<usize>, mut leaf: L, combine: &C) -> V
where
    L: FnMut(usize) -> V,
    C: Fn(V, V) -> V,
{
    let mut stack: smallvec::SmallVec<[V; 24]> = smallvec::SmallVec::new();
    for (done, i) in range.enumerate() {
        let mut value = leaf(i);
        let mut count = done + 1;
        while count & 1 == 0 {
            let left = stack.pop().expect("binary counter holds a left subtree");
            value = combine(left, value);
            count >>= 1;
        }
        stack.push(value);
    }
    let mut acc = stack.pop().expect("a non-empty range has a leaf");
    while let Some(left) = stack.pop() {
        acc = combine(left, acc);
    }
    acc
}

/// Leaves that [`slice_subtree`] adds side by side (a power of two: a complete subtree).
const QUAD: usize = 4;

/// The canonical tree evaluated left to right in a fixed array, for the vectorized loops:
/// a stack of complete power-of-two subtrees, merged by the carries of a binary counter
/// (the same tree as [`tree_sequential`]). Its depth never exceeds the bits of the leaf
/// count, which callers keep within `STACK`, a power of two.
struct Counter<V, const STACK: usize> {
    /// Entries below `depth` are written; the others are not read. (Initializing the
    /// whole stack would cost more than a short sum: an entry of [`sum_columns`] is a
    /// kibibyte.)
    stack: [std::mem::MaybeUninit<V>; STACK],
    depth: usize,
}

impl<V: Copy, const STACK: usize> Counter<V, STACK> {
    #[inline(always)]
    fn new() -> Self {
        Self {
            stack: [std::mem::MaybeUninit::uninit(); STACK],
            depth: 0,
        }
    }

    /// Pushes a complete subtree of `size` leaves (a power of two) that follows `done`
    /// leaves, a multiple of `size`: the carries from that level up, which is what
    /// pushing its leaves one by one would do.
    #[inline(always)]
    fn push(&mut self, done: usize, size: usize, mut value: V, add: impl Fn(&V, &V) -> V) {
        // Masking the index with STACK - 1 lets the compiler drop the bounds checks.
        let mut count = done / size + 1;
        while count & 1 == 0 {
            self.depth -= 1;
            // SAFETY: every entry below the depth before this decrement was written (a
            // carry pops only what an earlier push stored: `done / size` counts them).
            let left = unsafe { self.stack[self.depth & (STACK - 1)].assume_init_ref() };
            value = add(left, &value);
            count >>= 1;
        }
        self.stack[self.depth & (STACK - 1)].write(value);
        self.depth += 1;
    }

    /// [`Counter::push`] of one leaf after `done` leaves, for values too large to move: the
    /// leaf is built where it will lie (`fill` of `init`), and each carry adds the right
    /// subtree into the left one where it lies (`merge(left, right)` makes `left` the sum).
    #[inline(always)]
    fn push_in_place(
        &mut self,
        done: usize,
        init: V,
        fill: impl FnOnce(&mut V),
        merge: impl Fn(&mut V, &V),
    ) {
        fill(self.stack[self.depth].write(init));
        self.depth += 1;
        let mut count = done + 1;
        while count & 1 == 0 {
            self.merge_last(&merge);
            count >>= 1;
        }
    }

    /// [`Counter::finish`] for [`Counter::push_in_place`]: the subtrees merged from the right
    /// where they lie; the root stays in the counter (a large value is not moved).
    #[inline(always)]
    fn finish_in_place(&mut self, merge: impl Fn(&mut V, &V)) -> Option<&mut V> {
        if self.depth == 0 {
            return None;
        }
        while self.depth > 1 {
            self.merge_last(&merge);
        }
        // SAFETY: entry 0 was written by the first push.
        Some(unsafe { self.stack[0].assume_init_mut() })
    }

    /// The last two subtrees become one, in the place of the left one.
    #[inline(always)]
    fn merge_last(&mut self, merge: &impl Fn(&mut V, &V)) {
        let (left, right) = self.stack[..self.depth].split_at_mut(self.depth - 1);
        // SAFETY: the entries below `depth` were written by pushes or merges.
        let (left, right) = unsafe {
            (
                left.last_mut()
                    .expect("two subtrees to merge")
                    .assume_init_mut(),
                right[0].assume_init_ref(),
            )
        };
        merge(left, right);
        self.depth -= 1;
    }

    /// The root: the remaining subtrees merged from the right; `None` when empty.
    #[inline(always)]
    fn finish(self, add: impl Fn(&V, &V) -> V) -> Option<V> {
        let (last, rest) = self.stack[..self.depth].split_last()?;
        // SAFETY: the entries below `depth` were written by `push`.
        let last = unsafe { last.assume_init() };
        Some(rest.iter().rev().fold(last, |acc, left| {
            // SAFETY: as above.
            add(unsafe { left.assume_init_ref() }, &acc)
        }))
    }
}

/// The lane-wise sum of two leaves' accumulators.
#[inline(always)]
fn add_lanes<T: Float>(a: &[T; LANES], b: &[T; LANES]) -> [T; LANES] {
    std::array::from_fn(|j| a[j] + b[j])
}

/// The stack depth of [`slice_subtree`] for inputs of at most 128 leaves (8192 elements).
const SHORT_STACK: usize = 8;

/// The job of [`slice_subtree`], for [`crate::cpu::simd::widest`]: the lanes and the order
/// of additions are fixed by the canonical order, so SSE2, AVX2 and AVX-512 give the same
/// bits; only the number of lanes per instruction changes.
#[derive(Clone)]
struct SliceSubtree<'a, T, M> {
    x: &'a [T],
    leaves: Range<usize>,
    map: &'a M,
}

impl<T: Float, M: Fn(T) -> T> crate::cpu::simd::Vectorized for SliceSubtree<'_, T, M> {
    type Output = [T; LANES];
    #[inline(always)]
    fn run(self) -> [T; LANES] {
        // The stack holds one entry per bit of the leaf count: a short input gets a short
        // stack, so that small sums do not pay for initializing a deep one.
        if self.leaves.len() <= 1 << (SHORT_STACK - 1) {
            slice_subtree::<T, SHORT_STACK>(self.x, self.leaves, self.map)
        } else {
            slice_subtree::<T, { usize::BITS as usize }>(self.x, self.leaves, self.map)
        }
    }
}

/// The lanes of the canonical tree over the leaves `leaves` of a dense slice: the hot
/// loop of every slice sum. The same tree as [`tree_sequential`], with the stack in a
/// fixed array and full leaves added group by group so that the compiler vectorizes.
#[inline(always)]
fn slice_subtree<T: Float, const STACK: usize>(
    x: &[T],
    leaves: Range<usize>,
    map: &impl Fn(T) -> T,
) -> [T; LANES] {
    let mut tree = Counter::<[T; LANES], STACK>::new();
    let region = &x[leaves.start * LEAF_LEN..(leaves.end * LEAF_LEN).min(x.len())];
    let mut done = 0;
    // Four leaves at a time, a complete subtree: their four chains of additions are
    // independent, so they overlap instead of waiting on one another's latency.
    let mut quads = region.chunks_exact(QUAD * LEAF_LEN);
    for quad in &mut quads {
        let mut value = [[T::neg_zero(); LANES]; QUAD];
        for group in 0..LEAF_LEN / LANES {
            for (leaf, lanes) in value.iter_mut().enumerate() {
                let at = leaf * LEAF_LEN + group * LANES;
                for (lane, &v) in lanes.iter_mut().zip(&quad[at..at + LANES]) {
                    *lane = *lane + map(v);
                }
            }
        }
        let subtree = add_lanes(
            &add_lanes(&value[0], &value[1]),
            &add_lanes(&value[2], &value[3]),
        );
        tree.push(done, QUAD, subtree, add_lanes);
        done += QUAD;
    }
    let mut full = quads.remainder().chunks_exact(LEAF_LEN);
    for leaf in &mut full {
        let mut value = [T::neg_zero(); LANES];
        for group in leaf.chunks_exact(LANES) {
            for j in 0..LANES {
                value[j] = value[j] + map(group[j]);
            }
        }
        tree.push(done, 1, value, add_lanes);
        done += 1;
    }
    if !full.remainder().is_empty() {
        let mut value = [T::neg_zero(); LANES];
        for (k, &v) in full.remainder().iter().enumerate() {
            value[k % LANES] = value[k % LANES] + map(v);
        }
        tree.push(done, 1, value, add_lanes);
    }
    tree.finish(add_lanes).unwrap_or([T::neg_zero(); LANES])
}

/// Leaves per block of [`sum_gathered`]: a power of two, so that every block is a
/// complete subtree of the canonical tree (the tree over blocks is then the tree over
/// leaves), and few enough that a block (4 KiB of f32) stays in L1 between its gather and
/// its sum.
const GATHER_LEAVES: usize = 16;
/// Elements per block of [`sum_gathered`].
const GATHER_LEN: usize = GATHER_LEAVES * LEAF_LEN;

/// The canonical sum of `len` virtual elements that are computed or gathered on the fly
/// (masked sums over ragged rows, squared norms over several buffers).
///
/// `gather(cursor, range, out)` must write the elements with indices `range` in order
/// into `out` (`out.len() == range.len() <= 1024`); the ranges come in increasing order
/// within a task. Each run of consecutive elements that one task reduces starts from the
/// cursor `start(first_index)`, so a gather can walk its index structure instead of
/// searching it for every block. The gathered blocks are summed by the vectorized loop of
/// [`sum`]: the result is bitwise the canonical sum of the elements laid end to end.
///
/// ```
/// use rlgrad_core::{reduce, Par};
/// // The squares of two buffers, as if concatenated.
/// let (a, b) = ([1.0f32, 2.0], [3.0f32; 100]);
/// let squares = reduce::sum_gathered(102, Par::Seq, |_| (), |_, range, out| {
///     for (i, o) in range.zip(out) {
///         let v = if i < 2 { a[i] } else { b[i - 2] };
///         *o = v * v;
///     }
/// });
/// assert_eq!(squares, 905.0);
/// ```
pub fn sum_gathered<T, S, I, G>(len: usize, par: Par, start: I, gather: G) -> T
where
    T: Float,
    I: Fn(usize) -> S + Sync,
    G: Fn(&mut S, Range<usize>, &mut [T]) + Sync,
{
    leaf_sum(len, par, |leaves| {
        crate::cpu::simd::widest(GatheredSubtree {
            len,
            leaves,
            start: &start,
            gather: &gather,
            types: std::marker::PhantomData,
        })
    })
}

/// The subtree of [`sum_gathered`] over `leaves`, for [`crate::cpu::simd::widest`]: the
/// gathers (often mapped copies) and the sums vectorize at the same width.
struct GatheredSubtree<'a, T, S, I, G> {
    len: usize,
    leaves: Range<usize>,
    start: &'a I,
    gather: &'a G,
    /// The element and cursor types, which only the closures name.
    types: std::marker::PhantomData<fn(S) -> T>,
}

impl<T, S, I, G> crate::cpu::simd::Vectorized for GatheredSubtree<'_, T, S, I, G>
where
    T: Float,
    I: Fn(usize) -> S,
    G: Fn(&mut S, Range<usize>, &mut [T]),
{
    type Output = Leaf<T>;
    #[inline(always)]
    fn run(self) -> Leaf<T> {
        // As in `SliceSubtree`: a short stack for the common short sums, whose
        // initialization would otherwise cost more than their blocks.
        let blocks = self.leaves.len().div_ceil(GATHER_LEAVES);
        if blocks <= 1 << (SHORT_STACK - 1) {
            self.tree::<SHORT_STACK>()
        } else {
            self.tree::<{ usize::BITS as usize }>()
        }
    }
}

impl<T, S, I, G> GatheredSubtree<'_, T, S, I, G>
where
    T: Float,
    I: Fn(usize) -> S,
    G: Fn(&mut S, Range<usize>, &mut [T]),
{
    /// The canonical tree of the blocks, each a complete subtree of [`GATHER_LEAVES`]
    /// leaves: one counter step per block.
    #[inline(always)]
    fn tree<const STACK: usize>(self) -> Leaf<T> {
        let Self {
            len,
            leaves,
            start,
            gather,
            types: _,
        } = self;
        let mut cursor = start(leaves.start * LEAF_LEN);
        let mut block = [T::neg_zero(); GATHER_LEN];
        let mut tree = Counter::<[T; LANES], STACK>::new();
        for first in leaves.clone().step_by(GATHER_LEAVES) {
            let last = (first + GATHER_LEAVES).min(leaves.end);
            let range = first * LEAF_LEN..(last * LEAF_LEN).min(len);
            let values = &mut block[..range.len()];
            gather(&mut cursor, range, values);
            let lanes = slice_subtree::<T, SHORT_STACK>(values, 0..last - first, &|v| v);
            tree.push(first - leaves.start, GATHER_LEAVES, lanes, add_lanes);
        }
        Leaf {
            lanes: tree.finish(add_lanes).unwrap_or([T::neg_zero(); LANES]),
        }
    }
}

/// The canonical sum of `map(a[i], b[i])` over the elements of strided segments laid end
/// to end: segment `k` is the `offsets[k + 1] - offsets[k]` elements at `k * stride..` of
/// `a` and of `b` (the valid steps of a padded `[B, T, F]` batch, with `stride = T * F`).
/// The mapped values are gathered block by block ([`sum_gathered`]), so the result is
/// bitwise the canonical sum of the mapped values laid end to end. Pass `a` again as `b`
/// when the map reads one buffer; [`sum_segments_plain`] is the faster plain sum.
///
/// An error when `offsets` does not start at 0, decreases, or holds a segment longer than
/// `stride` or reaching past the end of `a` or `b`.
///
/// ```
/// use rlgrad_core::{reduce, Par};
/// // Two rows of 4 with 3 and 1 valid values.
/// let x = [1.0f32, 2.0, 3.0, 9.0, 4.0, 9.0, 9.0, 9.0];
/// let squares = reduce::sum_segments(Par::Seq, &[0, 3, 4], 4, &x, &x, |v, _| v * v)?;
/// assert_eq!(squares, 30.0);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn sum_segments<T, M>(
    par: Par,
    offsets: &[usize],
    stride: usize,
    a: &[T],
    b: &[T],
    map: M,
) -> Result<T>
where
    T: Float,
    M: Fn(T, T) -> T + Sync,
{
    check_segments("reduce::sum_segments", offsets, stride, a, b)?;
    Ok(segments_sum(par, offsets, stride, a, b, map))
}

/// [`sum_segments`] of segments that callers have already checked (a [`Sequences`]'s
/// offsets over buffers of its padded length).
///
/// [`Sequences`]: crate::kernels::sequence::Sequences
pub(crate) fn segments_sum<T, M>(
    par: Par,
    offsets: &[usize],
    stride: usize,
    a: &[T],
    b: &[T],
    map: M,
) -> T
where
    T: Float,
    M: Fn(T, T) -> T + Sync,
{
    sum_gathered(
        offsets.last().copied().unwrap_or(0),
        par,
        // Blocks start below the last offset, where a segment always holds the value.
        |first| segment_of(offsets, first).unwrap_or(0),
        |cursor, range, out| {
            fill_from_segments(offsets, cursor, range, out, |k, local, values| {
                let run = k * stride + local.start..k * stride + local.end;
                for ((o, &v), &w) in values.iter_mut().zip(&a[run.clone()]).zip(&b[run]) {
                    *o = map(v, w);
                }
            });
        },
    )
}

/// The checks of [`sum_segments`]: every segment inside both buffers.
fn check_segments<T>(
    function: &'static str,
    offsets: &[usize],
    stride: usize,
    a: &[T],
    b: &[T],
) -> Result<()> {
    if offsets.first().is_some_and(|&o| o != 0) {
        return Err(Error::value(
            function,
            "offsets",
            "offsets starting at 0",
            format_args!("{}", offsets[0]),
        ));
    }
    // Segment `k` ends by `(k + 1) * stride`, so every segment is inside a buffer when
    // the segments fit their strides and the last one is inside: one cheap pass, then one
    // bound.
    let fits = |pair: &[usize]| pair[0] <= pair[1] && pair[1] - pair[0] <= stride;
    if let Some(k) = offsets.windows(2).position(|pair| !fits(pair)) {
        let (start, end) = (offsets[k], offsets[k + 1]);
        return Err(if end < start {
            Error::value(
                function,
                "offsets",
                "non-decreasing offsets",
                format_args!("{end} after {start} at index {}", k + 1),
            )
        } else {
            Error::out_of_range(
                function,
                "offsets",
                format_args!("segments of at most stride = {stride} elements"),
                format_args!("{} elements in segment {k}", end - start),
            )
        });
    }
    if let [.., start, end] = *offsets {
        let k = offsets.len() - 2;
        let len = end - start;
        let last_end = k
            .checked_mul(stride)
            .and_then(|first| first.checked_add(len));
        if let Some((name, buffer)) = [("a", a), ("b", b)]
            .into_iter()
            .find(|(_, buffer)| last_end.is_none_or(|last_end| last_end > buffer.len()))
        {
            return Err(Error::out_of_range(
                function,
                name,
                format_args!("segment {k} ({len} elements at {k} * {stride}) inside"),
                format_args!("{} elements", buffer.len()),
            ));
        }
    }
    Ok(())
}

/// [`sum_segments`] of the values of `x` themselves: the sum of every masked mean. With
/// AVX-512 the `f32` version loads each group with one masked load straight from `x`
/// (the lanes outside the segment come in as `-0.0`), whatever its alignment to the
/// segment edges; the bits are those of [`sum_segments`] (and of [`sum`] over the gathered
/// values) on every CPU.
///
/// ```
/// use rlgrad_core::{reduce, Par};
/// let x = [1.0f32, 2.0, 3.0, 9.0, 4.0, 9.0, 9.0, 9.0];
/// assert_eq!(reduce::sum_segments_plain(Par::Seq, &[0, 3, 4], 4, &x)?, 10.0);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn sum_segments_plain<T: Float>(
    par: Par,
    offsets: &[usize],
    stride: usize,
    x: &[T],
) -> Result<T> {
    check_segments("reduce::sum_segments_plain", offsets, stride, x, x)?;
    Ok(plain_segments_sum(par, offsets, stride, x))
}

/// [`sum_segments_plain`] of segments that callers have already checked.
pub(crate) fn plain_segments_sum<T: Float>(
    par: Par,
    offsets: &[usize],
    stride: usize,
    x: &[T],
) -> T {
    #[cfg(target_arch = "x86_64")]
    if let Some(xs) = crate::cpu::lanes::as_f32(x)
        && crate::cpu::simd::enabled(crate::cpu::simd::Isa::Avx512)
    {
        let len = offsets.last().copied().unwrap_or(0);
        // SAFETY: the CPU has AVX-512F (`enabled` implies it) and the segments were checked.
        let sum: f32 = leaf_sum(len, par, |leaves| unsafe {
            segments_avx512::subtree(offsets, stride, xs, leaves)
        });
        return T::from_f64(f64::from(sum));
    }
    segments_sum(par, offsets, stride, x, x, |v, _| v)
}

/// The AVX-512 kernel of [`sum_segments_plain`] for `f32`.
#[cfg(target_arch = "x86_64")]
mod segments_avx512 {
    use std::arch::x86_64::{
        __m512, _mm512_add_ps, _mm512_loadu_ps, _mm512_mask_loadu_ps, _mm512_set1_ps,
    };
    use std::ops::Range;

    use super::{Counter, LANES, LEAF_LEN, Leaf, SHORT_STACK, add_lanes, segment_of};

    /// The canonical subtree of `leaves`, as [`super::sum_segments`] computes it.
    ///
    /// # Safety
    ///
    /// The CPU supports AVX-512F, and `offsets`, `stride` and `x` pass `check_segments`.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn subtree(
        offsets: &[usize],
        stride: usize,
        x: &[f32],
        leaves: Range<usize>,
    ) -> Leaf<f32> {
        if leaves.len() <= 1 << (SHORT_STACK - 1) {
            tree::<SHORT_STACK>(offsets, stride, x, leaves)
        } else {
            tree::<{ usize::BITS as usize }>(offsets, stride, x, leaves)
        }
    }

    #[target_feature(enable = "avx512f")]
    fn tree<const STACK: usize>(
        offsets: &[usize],
        stride: usize,
        x: &[f32],
        leaves: Range<usize>,
    ) -> Leaf<f32> {
        let len = offsets.last().copied().unwrap_or(0);
        let end = (leaves.end * LEAF_LEN).min(len);
        let neg_zero = _mm512_set1_ps(-0.0);
        let mut tree = Counter::<[f32; LANES], STACK>::new();
        let mut lanes = neg_zero;
        let mut pushed = 0;
        let mut push = |lanes: __m512| {
            // SAFETY: `__m512` is 16 `f32`s.
            let lanes: [f32; LANES] = unsafe { std::mem::transmute(lanes) };
            tree.push(pushed, 1, lanes, add_lanes);
            pushed += 1;
        };
        let mut index = leaves.start * LEAF_LEN;
        let mut k = segment_of(offsets, index).unwrap_or(0);
        while index < end {
            while offsets[k + 1] <= index {
                k += 1;
            }
            let piece_end = offsets[k + 1].min(end);
            // Virtual index `v` of segment `k` sits at `v + shift` of `x`.
            let shift = (k * stride).wrapping_sub(offsets[k]);
            let at = |v: usize| x.as_ptr().wrapping_add(v.wrapping_add(shift));
            // The group the piece starts inside, when it does not start one: lanes from
            // `index % LANES` to the piece's end or the group's.
            if !index.is_multiple_of(LANES) || piece_end - index < LANES {
                let group_start = index - index % LANES;
                let hi = (piece_end - group_start).min(LANES);
                // SAFETY: lanes `index % LANES..hi` lie in segment `k`, inside `x`.
                let values = unsafe { masked_group(at(group_start), index - group_start, hi) };
                lanes = _mm512_add_ps(lanes, values);
                index = group_start + hi;
                if index.is_multiple_of(LEAF_LEN) {
                    push(lanes);
                    lanes = neg_zero;
                }
            }
            // Whole groups: up to the end of the leaf, whole leaves, then what is left.
            while !index.is_multiple_of(LEAF_LEN) && index + LANES <= piece_end {
                // SAFETY: the whole group lies in segment `k`, inside `x`.
                lanes = _mm512_add_ps(lanes, unsafe { _mm512_loadu_ps(at(index)) });
                index += LANES;
                if index.is_multiple_of(LEAF_LEN) {
                    push(lanes);
                    lanes = neg_zero;
                }
            }
            while index + LEAF_LEN <= piece_end {
                let mut leaf = neg_zero;
                for group in 0..LEAF_LEN / LANES {
                    // SAFETY: the whole leaf lies in segment `k`, inside `x`.
                    let values = unsafe { _mm512_loadu_ps(at(index + group * LANES)) };
                    leaf = _mm512_add_ps(leaf, values);
                }
                push(leaf);
                index += LEAF_LEN;
            }
            while index + LANES <= piece_end {
                // SAFETY: the whole group lies in segment `k`, inside `x`.
                lanes = _mm512_add_ps(lanes, unsafe { _mm512_loadu_ps(at(index)) });
                index += LANES;
            }
            // The piece's last values start a group that the next piece completes.
            if index < piece_end {
                // SAFETY: lanes `..piece_end - index` lie in segment `k`, inside `x`.
                let values = unsafe { masked_group(at(index), 0, piece_end - index) };
                lanes = _mm512_add_ps(lanes, values);
                index = piece_end;
            }
        }
        if !end.is_multiple_of(LEAF_LEN) {
            push(lanes);
        }
        Leaf {
            lanes: tree.finish(add_lanes).unwrap_or([-0.0; LANES]),
        }
    }

    /// Lanes `lo..hi` of the group at `group`, `-0.0` in the others. The other lanes are
    /// not read: a masked load touches no memory in its masked lanes, so `group` may
    /// point before or past the segment.
    ///
    /// # Safety
    ///
    /// `lo <= hi <= 16`, and `group + lo..group + hi` are readable `f32`s.
    #[target_feature(enable = "avx512f")]
    unsafe fn masked_group(group: *const f32, lo: usize, hi: usize) -> __m512 {
        let keep = ((1u32 << hi) - 1) >> lo << lo;
        // SAFETY: the caller guarantees the kept lanes.
        unsafe { _mm512_mask_loadu_ps(_mm512_set1_ps(-0.0), keep as u16, group) }
    }
}

/// The canonical sum of `map(x[i])`.
pub fn sum_map<T, F>(x: &[T], par: Par, map: F) -> T
where
    T: Float,
    F: Fn(T) -> T + Sync,
{
    leaf_sum(x.len(), par, |range| Leaf {
        lanes: crate::cpu::simd::widest(SliceSubtree {
            x,
            leaves: range,
            map: &map,
        }),
    })
}

/// The canonical sum of `x`.
pub fn sum<T: Float>(x: &[T], par: Par) -> T {
    sum_map(x, par, |v| v)
}

/// The canonical mean, `sum(x) / len`. An error when `x` is empty.
pub fn mean<T: Float>(x: &[T], par: Par) -> Result<T> {
    if x.is_empty() {
        return Err(Error::empty("reduce::mean", "x", "at least one element"));
    }
    Ok(sum(x, par) / T::from_usize(x.len()))
}

/// The canonical two-pass variance `sum((x - mean)^2) / (len - ddof)`.
/// An error when `len <= ddof` (the divisor would be zero or negative).
pub fn var<T: Float>(x: &[T], ddof: usize, par: Par) -> Result<T> {
    Ok(mean_var(x, ddof, par)?.1)
}

/// The canonical mean and two-pass variance together (the mean is computed once): bitwise
/// `(mean(x), var(x, ddof))`. An error when `len <= ddof`.
pub fn mean_var<T: Float>(x: &[T], ddof: usize, par: Par) -> Result<(T, T)> {
    if x.len() <= ddof {
        return Err(Error::empty(
            "reduce::var",
            "x",
            format_args!("more than ddof = {ddof} elements, got {}", x.len()),
        ));
    }
    let mean = sum(x, par) / T::from_usize(x.len());
    let var = sum_map(x, par, |v| (v - mean) * (v - mean)) / T::from_usize(x.len() - ddof);
    Ok((mean, var))
}

/// Columns per block of [`sum_columns`]: one AVX-512 register of f32 per lane.
const COLUMN_BLOCK: usize = 16;

/// The canonical sum of every column of the row-major `[rows, cols]` matrix `x` (row `r`
/// at `x[r * cols..]`): `out[c]` is bitwise [`sum_map`] of `map(x[r * cols + c], c)` over
/// `r` in order. Columns are reduced side by side (the additions of a leaf lane run
/// across a block of columns), so a bias gradient `[batch, features] -> [features]` is one
/// pass over the matrix instead of a gather per column.
pub fn sum_columns<T, F>(x: &[T], rows: usize, cols: usize, par: Par, map: F, out: &mut [T])
where
    T: Float,
    F: Fn(T, usize) -> T + Sync,
{
    debug_assert_eq!(x.len(), rows * cols);
    debug_assert_eq!(out.len(), cols);
    let par = par.for_work(rows * cols, grain(Family::Reduce));
    let leaves = rows.div_ceil(LEAF_LEN);
    par.for_each_chunk_mut(out, COLUMN_BLOCK, |block, sums| {
        let columns = BlockColumns {
            x,
            rows,
            cols,
            first: block * COLUMN_BLOCK,
            map: &map,
        };
        let job_leaves = |i: usize| i * COLUMN_SUBTREE..((i + 1) * COLUMN_SUBTREE).min(leaves);
        let (mut tree, mut combined) = (Counter::new(), None);
        let root = match leaves.div_ceil(COLUMN_SUBTREE) {
            0 => return sums.fill(T::zero()),
            // Up to 512 rows (most bias gradients): one job, its root left where it lies.
            1 => column_subtree(columns, job_leaves(0), &mut tree),
            jobs => combined.insert(
                tree_reduce(
                    jobs,
                    Par::Seq,
                    |i| *column_subtree(columns, job_leaves(i), &mut Counter::new()),
                    |mut left, right| {
                        add_lanes_in_place(&mut left, &right);
                        left
                    },
                )
                .expect("at least one job"),
            ),
        };
        let mut width = LANES / 2;
        while width > 0 {
            for j in 0..width {
                root[j] = add_block_rows(&root[j], &root[j + width]);
            }
            width /= 2;
        }
        sums.copy_from_slice(&root[0][..sums.len()]);
    });
}

/// Leaves per [`ColumnSubtree`] job (a power of two, so that the jobs are complete
/// subtrees of the canonical tree).
const COLUMN_SUBTREE: usize = 8;
/// The depth of a job's binary counter: the bits of [`COLUMN_SUBTREE`], rounded up to the
/// power of two [`Counter`] takes.
const COLUMN_STACK: usize = (COLUMN_SUBTREE.ilog2() as usize + 1).next_power_of_two();

/// The values of one row of a block, or the accumulators of one lane for every column of
/// a block.
type BlockRow<T> = [T; COLUMN_BLOCK];
/// The lane accumulators of a leaf (or of a subtree, lane by lane) for a block of columns.
type BlockLanes<T> = [BlockRow<T>; LANES];

/// The lane accumulators of the canonical subtree of a range of at most
/// [`COLUMN_SUBTREE`] leaves of a block of up to [`COLUMN_BLOCK`] columns, for
/// [`crate::cpu::simd::widest`].
struct ColumnSubtree<'a, 'b, T, F> {
    block: BlockColumns<'b, T, F>,
    leaves: Range<usize>,
    tree: &'a mut Counter<BlockLanes<T>, COLUMN_STACK>,
}

/// The [`ColumnSubtree`] job of `leaves` of a block, its root left in `tree`.
fn column_subtree<'a, T: Float, F: Fn(T, usize) -> T>(
    block: BlockColumns<'_, T, F>,
    leaves: Range<usize>,
    tree: &'a mut Counter<BlockLanes<T>, COLUMN_STACK>,
) -> &'a mut BlockLanes<T> {
    crate::cpu::simd::widest(ColumnSubtree {
        block,
        leaves,
        tree,
    })
}

/// A block of up to [`COLUMN_BLOCK`] columns of the row-major `[rows, cols]` matrix `x`,
/// from column `first`, mapped by `map`.
struct BlockColumns<'a, T, F> {
    x: &'a [T],
    rows: usize,
    cols: usize,
    first: usize,
    map: &'a F,
}

// By hand: a derive would ask `T` and `F` to be `Clone`, where only references are copied.
impl<T, F> Clone for BlockColumns<'_, T, F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, F> Copy for BlockColumns<'_, T, F> {}

impl<'a, T: Float, F: Fn(T, usize) -> T> crate::cpu::simd::Vectorized
    for ColumnSubtree<'a, '_, T, F>
{
    type Output = &'a mut BlockLanes<T>;

    /// The same binary-counter walk over the leaves as [`slice_subtree`], with every
    /// value a block of columns: each addition of the canonical order of one column is
    /// done for the whole block at once (one vector addition when the block fills a
    /// register), and every leaf is summed and merged where it lies in the counter (`tree`,
    /// empty, the caller's, so that the root is not moved either).
    #[inline(always)]
    fn run(self) -> &'a mut BlockLanes<T> {
        let Self {
            block,
            leaves,
            tree,
        } = self;
        debug_assert!(!leaves.is_empty() && leaves.len() <= COLUMN_SUBTREE);
        for (done, leaf) in leaves.enumerate() {
            tree.push_in_place(
                done,
                [[T::neg_zero(); COLUMN_BLOCK]; LANES],
                |lanes| block.add_leaf(lanes, leaf),
                add_lanes_in_place,
            );
        }
        tree.finish_in_place(add_lanes_in_place)
            .expect("a job has at least one leaf")
    }
}

impl<T: Float, F: Fn(T, usize) -> T> BlockColumns<'_, T, F> {
    /// Adds the mapped values of leaf `leaf`'s rows in the block's columns to `lanes` (row
    /// `k` of the leaf to lane `k % LANES`; the columns past the last one, whose sums are
    /// not kept, get nothing).
    #[inline(always)]
    fn add_leaf(&self, lanes: &mut BlockLanes<T>, leaf: usize) {
        let rows = &self.x[leaf * LEAF_LEN * self.cols..]
            [..(LEAF_LEN.min(self.rows - leaf * LEAF_LEN)) * self.cols];
        let columns = self.first..(self.first + COLUMN_BLOCK).min(self.cols);
        for group in rows.chunks(LANES * self.cols) {
            for (lane, row) in lanes.iter_mut().zip(group.chunks_exact(self.cols)) {
                if let Ok(values) = <&BlockRow<T>>::try_from(&row[columns.clone()]) {
                    let mapped: BlockRow<T> =
                        std::array::from_fn(|j| (self.map)(values[j], self.first + j));
                    *lane = add_block_rows(lane, &mapped);
                } else {
                    for (j, (acc, &v)) in lane.iter_mut().zip(&row[columns.clone()]).enumerate() {
                        *acc = *acc + (self.map)(v, self.first + j);
                    }
                }
            }
        }
    }
}

/// `left += right`, lane by lane and column by column (`left` is the left operand).
#[inline(always)]
fn add_lanes_in_place<T: Float>(left: &mut BlockLanes<T>, right: &BlockLanes<T>) {
    for (l, &r) in left.as_flattened_mut().iter_mut().zip(right.as_flattened()) {
        *l = *l + r;
    }
}

/// The column-by-column sum of two rows of a block.
#[inline(always)]
fn add_block_rows<T: Float>(a: &BlockRow<T>, b: &BlockRow<T>) -> BlockRow<T> {
    std::array::from_fn(|j| a[j] + b[j])
}

fn extremum<T: Float>(x: &[T], par: Par, pick: fn(T, T) -> T) -> Option<T> {
    tree_reduce(
        x.len().div_ceil(LEAF_LEN),
        par,
        |i| {
            let leaf = &x[i * LEAF_LEN..((i + 1) * LEAF_LEN).min(x.len())];
            leaf[1..].iter().fold(leaf[0], |acc, &v| pick(acc, v))
        },
        pick,
    )
}

/// The minimum (NaN if any element is NaN). An error when `x` is empty.
pub fn min<T: Float>(x: &[T], par: Par) -> Result<T> {
    extremum(x, par, min2).ok_or_else(|| Error::empty("reduce::min", "x", "at least one element"))
}

/// The maximum (NaN if any element is NaN). An error when `x` is empty.
pub fn max<T: Float>(x: &[T], par: Par) -> Result<T> {
    extremum(x, par, max2).ok_or_else(|| Error::empty("reduce::max", "x", "at least one element"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_column_sums<T: Float>(name: &str) {
        let mut rng = crate::Rng::new(3, name);
        // Row counts around the leaf (64 rows) and the job (512 rows) boundaries, and past
        // many jobs; column counts inside, at and around the block of 16.
        for rows in [0, 1, 63, 64, 65, 511, 512, 513, 1000, 9000] {
            for cols in [1, 5, 16, 17, 40] {
                let x: Vec<T> = (0..rows * cols)
                    .map(|_| T::from_f64(rng.normal(0.0, 1.0)))
                    .collect();
                let scale = |v: T, c: usize| v * T::from_usize(c + 1);
                for par in [Par::Seq, Par::rayon(3)] {
                    let mut out = vec![T::nan(); cols];
                    sum_columns(&x, rows, cols, par, scale, &mut out);
                    for (c, got) in out.iter().enumerate() {
                        let column: Vec<T> = (0..rows).map(|r| x[r * cols + c]).collect();
                        let want = sum_map(&column, Par::Seq, |v| scale(v, c));
                        assert_eq!(
                            got.to_bits_u64(),
                            want.to_bits_u64(),
                            "{name}: {rows} x {cols}, column {c}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn column_sums_are_the_canonical_sums_of_the_columns() {
        check_column_sums::<f32>("columns f32");
        check_column_sums::<f64>("columns f64");
    }

    #[test]
    fn every_instruction_set_gives_the_same_bits() {
        let mut rng = crate::Rng::new(8, "isa");
        let x: Vec<f32> = (0..10_007).map(|_| rng.normal(0.0, 1.0)).collect();
        let square = |v: f32| v * v;
        let job = SliceSubtree {
            x: &x,
            leaves: 0..x.len().div_ceil(LEAF_LEN),
            map: &square,
        };
        let versions = crate::cpu::simd::every_version(job);
        let (_, baseline) = versions.last().expect("the baseline always runs");
        for (name, lanes) in &versions {
            assert_eq!(
                lanes.map(f32::to_bits),
                baseline.map(f32::to_bits),
                "{name}"
            );
        }
    }

    #[test]
    fn signed_zeros_and_empty() {
        assert_eq!(sum::<f32>(&[], Par::Seq).to_bits(), 0.0f32.to_bits());
        assert_eq!(sum(&[-0.0f32], Par::Seq).to_bits(), (-0.0f32).to_bits());
        assert_eq!(sum(&[-0.0f32, 0.0], Par::Seq).to_bits(), 0.0f32.to_bits());
    }

    #[test]
    fn mean_var_min_max() {
        let x = [1.0f64, 2.0, 3.0, 4.0];
        assert_eq!(mean(&x, Par::Seq).unwrap(), 2.5);
        assert_eq!(var(&x, 0, Par::Seq).unwrap(), 1.25);
        assert_eq!(var(&x, 1, Par::Seq).unwrap(), 5.0 / 3.0);
        assert!(var(&x, 4, Par::Seq).is_err());
        assert!(mean::<f32>(&[], Par::Seq).is_err());
        assert_eq!(min(&x, Par::Seq).unwrap(), 1.0);
        assert_eq!(max(&x, Par::Seq).unwrap(), 4.0);
        assert!(max(&[1.0, f64::NAN, 3.0], Par::Seq).unwrap().is_nan());
        assert!(min(&[f64::NAN, 1.0], Par::Seq).unwrap().is_nan());
        assert!(min::<f32>(&[], Par::Seq).is_err());
        assert_eq!(min2(-0.0f32, 0.0).to_bits(), (-0.0f32).to_bits());
    }

    /// Segment lengths of every kind: empty, shorter than a group, straddling groups and
    /// leaves, whole rows (so that the merged loads meet both ends of the buffer).
    fn ragged_lengths(rng: &mut crate::Rng, batch: usize, stride: usize) -> Vec<usize> {
        (0..batch)
            .map(|b| match b % 5 {
                0 => 0,
                1 => rng.below(LANES.min(stride + 1) as u64) as usize,
                2 => stride,
                _ => rng.below(stride as u64 + 1) as usize,
            })
            .collect()
    }

    #[test]
    fn segment_sums_equal_the_sum_of_the_gathered_values() {
        let mut rng = crate::Rng::new(11, "segments");
        for (batch, stride) in [(1, 1), (3, 5), (7, 16), (40, 33), (64, 200), (300, 300)] {
            let lengths = ragged_lengths(&mut rng, batch, stride);
            let mut offsets = vec![0];
            for &len in &lengths {
                offsets.push(offsets[offsets.len() - 1] + len);
            }
            let a: Vec<f64> = (0..batch * stride).map(|_| rng.normal(0.0, 1e3)).collect();
            let b: Vec<f64> = (0..batch * stride).map(|_| rng.normal(1.0, 1.0)).collect();
            let map = |v: f64, w: f64| (v - 0.5) * w;
            let gathered: Vec<f64> = lengths
                .iter()
                .enumerate()
                .flat_map(|(k, &len)| (k * stride..k * stride + len).map(|i| map(a[i], b[i])))
                .collect();
            let want = sum(&gathered, Par::Seq).to_bits();
            for par in [Par::Seq, Par::rayon(2), Par::rayon(3)] {
                let got = sum_segments(par, &offsets, stride, &a, &b, map).unwrap();
                assert_eq!(got.to_bits(), want, "{batch} x {stride}, {par:?}");
            }
        }
    }

    #[test]
    fn plain_segment_sums_equal_the_sum_of_the_gathered_values() {
        // The f32 sum has its own AVX-512 loop: leaves and groups split by segment edges
        // at every offset, whole leaves inside segments, and tasks over several threads.
        let mut rng = crate::Rng::new(12, "plain segments");
        for (batch, stride) in [(1, 1), (5, 7), (9, 16), (40, 65), (256, 200), (600, 300)] {
            for _ in 0..3 {
                let lengths = ragged_lengths(&mut rng, batch, stride);
                let mut offsets = vec![0];
                for &len in &lengths {
                    offsets.push(offsets[offsets.len() - 1] + len);
                }
                let x: Vec<f32> = (0..batch * stride).map(|_| rng.normal(0.0, 1e2)).collect();
                let gathered: Vec<f32> = lengths
                    .iter()
                    .enumerate()
                    .flat_map(|(k, &len)| x[k * stride..k * stride + len].iter().copied())
                    .collect();
                let want = sum(&gathered, Par::Seq).to_bits();
                for par in [Par::Seq, Par::rayon(2), Par::rayon(3)] {
                    let got = sum_segments_plain(par, &offsets, stride, &x).unwrap();
                    assert_eq!(got.to_bits(), want, "{batch} x {stride}, {par:?}");
                }
            }
        }
    }

    #[test]
    fn segment_sums_refuse_offsets_that_do_not_fit() {
        let x = [1.0f32; 8];
        let refused = |offsets: &[usize], stride: usize, b: &[f32]| {
            let err = sum_segments(Par::Seq, offsets, stride, &x, b, |v, _| v).unwrap_err();
            assert!(err.to_string().contains("reduce::sum_segments"), "{err}");
            err.argument()
        };
        assert_eq!(refused(&[1, 2], 4, &x), Some("offsets"));
        assert_eq!(refused(&[0, 3, 2], 4, &x), Some("offsets"));
        assert_eq!(refused(&[0, 5], 4, &x), Some("offsets"));
        assert_eq!(refused(&[0, 4, 8, 9], 4, &x), Some("a"));
        assert_eq!(refused(&[0, 4, 8], 4, &x[..7]), Some("b"));
        assert_eq!(refused(&[0, 1, 2], usize::MAX, &x), Some("a"));
        assert_eq!(
            sum_segments(Par::Seq, &[], 4, &x, &x, |v, _| v).unwrap(),
            0.0
        );
        assert_eq!(
            sum_segments(Par::Seq, &[0, 0], 0, &x, &x, |v, _| v).unwrap(),
            0.0
        );
    }

    #[test]
    fn gathered_sums_equal_the_sum_of_the_gathered_values() {
        // Sizes around the leaf and block edges, and enough leaves for several tasks.
        for len in [
            0,
            1,
            63,
            64,
            65,
            1023,
            1024,
            1025,
            3000,
            64 * 1024 + 7,
            200_001,
        ] {
            let x: Vec<f32> = (0..len)
                .map(|i| ((i * 7919) % 1013) as f32 * 0.37 - 150.0)
                .collect();
            let want = sum(&x, Par::Seq).to_bits();
            for par in [Par::Seq, Par::rayon(2), Par::rayon(3)] {
                let starts = std::sync::Mutex::new(Vec::new());
                let got = sum_gathered(
                    len,
                    par,
                    |first| {
                        starts.lock().unwrap().push(first);
                        first
                    },
                    |next: &mut usize, range, out: &mut [f32]| {
                        assert_eq!(*next, range.start, "ranges come in order from the cursor");
                        out.copy_from_slice(&x[range.clone()]);
                        *next = range.end;
                    },
                );
                assert_eq!(got.to_bits(), want, "len {len}, {par:?}");
                assert!(starts.lock().unwrap().iter().all(|s| s % LEAF_LEN == 0));
            }
        }
    }
}
