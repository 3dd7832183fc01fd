//! Batch-major data staged in time-major tiles: for the estimators without a linear form
//! (V-trace, n-step returns) and for data narrower than a vector or shorter than a cache
//! line, which [`super::rows`] does not take.
//!
//! A column of batch-major `[B, T]` data is contiguous, so one step of a block of columns
//! lies `T` elements apart in each: read in place, a block's five or six streams thrash the
//! first-level cache, and they all fall in the same cache sets whenever `T` is a multiple
//! of 1024 (`[2048, 64]` GAE in f32: 1.1 ms in place against 25 us time-major). Instead each
//! block of [`COLUMNS`] columns is copied, [`STEPS`] steps at a time from the last, into
//! time-major tiles (16 x 16 or 8 x 8 register transposes for `f32` where the CPU has
//! them, [`crate::cpu::lines`]), scanned there by the time-major kernels, and its outputs
//! copied back. Each chunk's scan starts from the accumulators the chunk after it ended
//! with (the result of `ColumnScan::scan`), so every column goes through the operations of
//! a time-major scan in the same order: the same bits.

use std::ops::Range;

use super::Rows;
use crate::cpu::lines::{deinterleave, interleave};
use crate::cpu::simd::Isa;
use crate::kernels::recurrence::{Episodes, FlagSlice, SliceEpisodes, TimeMajor, Truncation};
use crate::{Float, Par};

/// Columns per tile: the width of the time-major scans' blocks ([`super::BLOCK`]), or of
/// their narrow blocks ([`super::SMALL_BLOCK`]) for data of fewer columns, or 8 for data of
/// at most 8: narrower data would pay more for the tiles' padding than for their columns
/// (`[2048, 7]` GAE in f32: 47 us in tiles of 16, 40 us in tiles of 8).
const COLUMNS: usize = super::BLOCK;
const NARROW_COLUMNS: usize = super::SMALL_BLOCK;
const NARROWEST_COLUMNS: usize = 8;
/// Steps per chunk: a tile of `f32` is 8 KiB, so that a scan's five to eight tiles stay in
/// the first-level cache between their copy and their scan.
const STEPS: usize = 32;

/// One chunk of steps of one block of columns, staged time-major.
pub(super) struct Chunk<'t, T, const K: usize, const W: usize> {
    /// The estimator's `[T, B]` inputs, `layout.t` steps of `W` columns each.
    pub inputs: [&'t [T]; K],
    /// The episodes, staged the same way.
    pub episodes: SliceEpisodes<'t, T>,
    /// The chunk's steps (with the steps after it that the scan reads, for n-step returns)
    /// by `W`.
    pub layout: TimeMajor,
    /// The accumulators the scan of the steps after this chunk ended with; `None` for the
    /// chunk that ends at the last step.
    pub carry: Option<&'t [T; W]>,
    /// The inputs at the step after the chunk (the first step of the chunk after it, kept
    /// from its tiles), for [`Chunk::step_after`].
    after: &'t [[T; W]; K],
    /// The first column of the block in the data, and how many of the tiles' columns are
    /// data (the others hold zeros).
    first: usize,
    columns: usize,
}

impl<T: Float, const K: usize, const W: usize> Chunk<'_, T, K, W> {
    /// `per_column[first..]` of the block's columns (a `[B]` input such as `bootstrap`),
    /// zeros past them.
    pub fn columns_of(&self, per_column: &[T]) -> [T; W] {
        let mut out = [T::zero(); W];
        out[..self.columns].copy_from_slice(&per_column[self.first..self.first + self.columns]);
        out
    }

    /// Input `input` at the step after the chunk, for the block's columns: what a scan
    /// reads as `v_{t+1}` at the chunk's last step (zeros for the chunk that ends at the
    /// last step, which has none).
    pub fn step_after(&self, input: usize) -> [T; W] {
        self.after[input]
    }
}

/// An estimator's scan of one staged chunk: builds its time-major kernel over the chunk's
/// tiles and runs it on their `W` columns, returning the kernel's accumulators.
pub(super) trait ChunkScan<T, const K: usize, const N: usize>: Sync {
    /// The steps after a chunk that its scan reads (n-step returns: `n - 1`).
    fn lookahead(&self) -> usize {
        0
    }
    fn scan<const W: usize>(
        &self,
        chunk: &Chunk<'_, T, K, W>,
        outputs: &mut [Rows<'_, T>; N],
    ) -> [T; W];
}

/// Runs `chunks` over batch-major `[T, B]` data (`layout`): `inputs` and `episodes` are
/// read, `outs` written, in blocks of [`COLUMNS`] columns split between `par`'s threads.
pub(super) fn run<T, const K: usize, const N: usize, C>(
    par: Par,
    layout: TimeMajor,
    inputs: [&[T]; K],
    episodes: SliceEpisodes<'_, T>,
    outs: [&mut [T]; N],
    chunks: &C,
) where
    T: Float,
    C: ChunkScan<T, K, N>,
{
    if layout.is_empty() {
        return;
    }
    if layout.b >= COLUMNS {
        run_tiles::<T, K, N, C, COLUMNS>(par, layout, inputs, episodes, outs, chunks);
    } else if layout.b > NARROWEST_COLUMNS {
        run_tiles::<T, K, N, C, NARROW_COLUMNS>(par, layout, inputs, episodes, outs, chunks);
    } else {
        run_tiles::<T, K, N, C, NARROWEST_COLUMNS>(par, layout, inputs, episodes, outs, chunks);
    }
}

/// [`run`] in tiles of `W` columns.
fn run_tiles<T, const K: usize, const N: usize, C, const W: usize>(
    par: Par,
    layout: TimeMajor,
    inputs: [&[T]; K],
    episodes: SliceEpisodes<'_, T>,
    outs: [&mut [T]; N],
    chunks: &C,
) where
    T: Float,
    C: ChunkScan<T, K, N>,
{
    let blocks = layout.b.div_ceil(W);
    let tasks = par
        .for_work(
            layout.t.saturating_mul(layout.b),
            crate::cpu::grain::grain(crate::cpu::grain::Family::BatchMajor),
        )
        .threads()
        .min(blocks);
    // A task's columns are one contiguous range of each output.
    let width = blocks.div_ceil(tasks) * W;
    let ranges = (0..layout.b)
        .step_by(width)
        .map(|first| first..(first + width).min(layout.b))
        .collect();
    super::for_column_ranges(par, layout.t, ranges, outs, |columns, outs| {
        Task::<T, K, N, C, W> {
            chunks,
            inputs,
            episodes,
            layout,
            columns,
            outs,
        }
        .run()
    });
}

/// One task of [`run`]: its blocks, one after the other (the copies run in the register
/// transposes of [`crate::cpu::lines`], each chunk's scan in the instruction set's
/// version of its kernel).
struct Task<'a, 'o, T, const K: usize, const N: usize, C, const W: usize> {
    chunks: &'a C,
    inputs: [&'a [T]; K],
    episodes: SliceEpisodes<'a, T>,
    layout: TimeMajor,
    columns: Range<usize>,
    /// The task's columns of each output.
    outs: [&'o mut [T]; N],
}

impl<T: Float, const K: usize, const N: usize, C: ChunkScan<T, K, N>, const W: usize>
    Task<'_, '_, T, K, N, C, W>
{
    fn run(self) {
        let Self {
            chunks,
            inputs,
            episodes,
            layout,
            columns,
            mut outs,
        } = self;
        let isa = crate::cpu::simd::isa();
        // The chunk's steps and those after it that the scan reads.
        let lookahead = chunks.lookahead().min(layout.t);
        let rows = STEPS + lookahead;
        let mut tiles = Tiles::new(K, &episodes, rows * W);
        let mut out_tiles: [Vec<T>; N] = std::array::from_fn(|_| vec![T::zero(); rows * W]);
        for first in columns.clone().step_by(W) {
            let block = first..(first + W).min(columns.end);
            let mut carry: Option<[T; W]> = None;
            let mut after = [[T::zero(); W]; K];
            let mut end = layout.t;
            while end > 0 {
                let start = end.saturating_sub(STEPS);
                let staged = start..(end + lookahead).min(layout.t);
                let (inputs, episodes) =
                    tiles.stage(isa, W, layout.t, &block, &staged, inputs, episodes);
                let previous = carry.take();
                let chunk = Chunk {
                    inputs,
                    episodes,
                    layout: TimeMajor::new(staged.len(), W),
                    carry: previous.as_ref(),
                    after: &after,
                    first: block.start,
                    columns: block.len(),
                };
                let mut rows_out = out_tiles.each_mut().map(|tile| Rows::Dense {
                    data: &mut tile[..staged.len() * W],
                    b: W,
                });
                let next = chunks.scan(&chunk, &mut rows_out);
                after = chunk.inputs.map(|tile| block_row(tile));
                for (out, tile) in outs.iter_mut().zip(&out_tiles) {
                    let first = (block.start - columns.start) * layout.t + start;
                    let steps = &tile[..(end - start) * W];
                    deinterleave(isa, steps, W, out, first, layout.t, block.len());
                }
                carry = Some(next);
                end = start;
            }
        }
    }
}

/// The first step of a tile.
fn block_row<T: Copy, const W: usize>(tile: &[T]) -> [T; W] {
    tile[..W]
        .try_into()
        .expect("a tile holds a step of W values")
}

/// The staging buffers of one task: a tile per input and per stream of the episodes.
struct Tiles<T> {
    inputs: Vec<Vec<T>>,
    values: [Vec<T>; 3],
    bytes: [Vec<u8>; 2],
    line_starts: Vec<usize>,
}

impl<T: Float> Tiles<T> {
    /// Buffers of `size` elements for `inputs` inputs and the streams `episodes` has.
    fn new(inputs: usize, episodes: &SliceEpisodes<'_, T>, size: usize) -> Self {
        let (mut values, mut bytes) = (0, 0);
        let mut count = |flags: &FlagSlice<'_, T>| match flags {
            FlagSlice::Values(_) => values += 1,
            FlagSlice::Bytes(_) => bytes += 1,
        };
        match episodes {
            Episodes::Constant { .. } => {}
            Episodes::Discounts(_) => values += 1,
            Episodes::Flags {
                terminated,
                truncation,
                ..
            } => {
                count(terminated);
                if let Some(truncation) = truncation {
                    count(&truncation.truncated);
                    values += 1;
                }
            }
        }
        Self {
            inputs: (0..inputs).map(|_| vec![T::zero(); size]).collect(),
            values: std::array::from_fn(|i| vec![T::zero(); if i < values { size } else { 0 }]),
            bytes: std::array::from_fn(|i| vec![0; if i < bytes { size } else { 0 }]),
            line_starts: Vec::with_capacity(COLUMNS),
        }
    }

    /// Copies steps `steps` of columns `block` of every input and of the episodes into
    /// tiles `width` columns wide, zeros in the columns past the block, and returns them
    /// as slices.
    #[allow(clippy::too_many_arguments)]
    fn stage<'t, const K: usize>(
        &'t mut self,
        isa: Isa,
        width: usize,
        t: usize,
        block: &Range<usize>,
        steps: &Range<usize>,
        inputs: [&[T]; K],
        episodes: SliceEpisodes<'_, T>,
    ) -> ([&'t [T]; K], SliceEpisodes<'t, T>) {
        self.line_starts.clear();
        self.line_starts
            .extend(block.clone().map(|j| j * t + steps.start));
        let size = steps.len() * width;
        let lines = &self.line_starts;
        let copy = |x: &[T], tile: &mut Vec<T>| {
            let tile = &mut tile[..size];
            if block.len() < width {
                tile.fill(T::zero());
            }
            interleave(isa, x, lines, tile, width);
        };
        for (x, tile) in inputs.iter().zip(&mut self.inputs) {
            copy(x, tile);
        }
        let [v0, v1, v2] = &mut self.values;
        let [b0, b1] = &mut self.bytes;
        let mut values = [v0, v1, v2].into_iter();
        let mut bytes = [b0, b1].into_iter();
        let mut flags = |flags: FlagSlice<'_, T>| -> FlagSlice<'t, T> {
            match flags {
                FlagSlice::Values(x) => {
                    let tile = values.next().expect("a tile per stream (Tiles::new)");
                    copy(x, tile);
                    FlagSlice::Values(&tile[..size])
                }
                FlagSlice::Bytes(x) => {
                    let tile = &mut bytes.next().expect("a tile per stream (Tiles::new)")[..size];
                    if block.len() < width {
                        tile.fill(0);
                    }
                    interleave(isa, x, lines, tile, width);
                    FlagSlice::Bytes(tile)
                }
            }
        };
        let episodes = match episodes {
            Episodes::Constant { gamma } => Episodes::Constant { gamma },
            Episodes::Discounts(x) => match flags(FlagSlice::Values(x)) {
                FlagSlice::Values(tile) => Episodes::Discounts(tile),
                FlagSlice::Bytes(_) => unreachable!("values stage as values"),
            },
            Episodes::Flags {
                gamma,
                terminated,
                truncation,
            } => {
                let terminated = flags(terminated);
                let truncation = truncation.map(|truncation| {
                    let truncated = flags(truncation.truncated);
                    let final_values = match flags(FlagSlice::Values(truncation.final_values)) {
                        FlagSlice::Values(tile) => tile,
                        FlagSlice::Bytes(_) => unreachable!("values stage as values"),
                    };
                    Truncation {
                        truncated,
                        final_values,
                    }
                });
                Episodes::Flags {
                    gamma,
                    terminated,
                    truncation,
                }
            }
        };
        let inputs = std::array::from_fn(|k| &self.inputs[k][..size]);
        (inputs, episodes)
    }
}
