//! Batch-major data scanned where they lie, a vector of `L` columns by a cache line of
//! steps at a time, for the estimators whose recurrence is linear:
//! `acc_t = x_t + cut(d_t, m_t * acc_{t+1})` (returns and the primitive, GAE, TD(lambda)).
//!
//! `L` is the vector width (AVX-512: 16 `f32` or 8 `f64`; AVX2: 8 or 4; else 4 or 2), and a
//! block of steps is a cache line of them (16 `f32`, 8 `f64`): `Q = line / L` squares of
//! `L x L`. Work goes in stages of [`STAGED`] blocks of a vector of columns:
//!
//! 1. The steps' elementwise work (effective rewards and discounts, GAE's `delta`,
//!    TD(lambda)'s bootstrapped reward) runs column by column on the data as stored, where
//!    `L` steps of one column are one vector, into a small buffer ([`Stage`]). Reading one
//!    column's lines one after the other matters where columns lie a multiple of 4 KiB
//!    apart (`T = 2048` in `f32`): a vector of columns' lines at one step then share an L1
//!    set, and reading them together evicted them before they were used. GAE in `f32` at
//!    `[2048, 64]`, data 16 bytes off the lines, on this crate's machine (AMD EPYC Zen 5,
//!    AVX-512): 135 us scanning block by block, 81 us staged.
//! 2. The recurrence then runs on the buffer: `x` is transposed in registers to `L` columns
//!    per vector, the accumulators run, and their squares are transposed back, finished
//!    (GAE's returns) and stored. Where every discount is 0 or `gamma` (flags, a constant
//!    gamma), `m` is 0 or `factor(gamma)` and the cut is `d == 0`, so one bit per step and
//!    column says all of it: the bits, not `m` and `d`, are transposed (one test per step
//!    instead of two square transposes). Otherwise `m` is transposed, and `d` too in a block
//!    where `m`'s zeros are not `d`'s (`lambda = 0` or an underflow).
//!
//! Each column goes through the operations of a time-major scan in the same order: the
//! same bits. [`super::tiles`] stays for V-trace, n-step returns and data narrower than a
//! vector or shorter than a line. GAE in `f32` with flags or a constant gamma takes the
//! kernels written with intrinsics instead where an estimator offers one
//! ([`Linear::written`]: `super::avx512`, `super::avx2`), the same steps without the
//! generic code's bounds checks, reloads and spills.

use std::ops::Range;
use std::sync::atomic::AtomicBool;

use super::{ByStep, Constant, Discounts, Steps, Terminations, Truncations};
use crate::cpu::lines::transposed_square;
use crate::cpu::simd::Isa;
use crate::kernels::recurrence::{Episodes, FlagSlice, SliceEpisodes, TimeMajor, cut};
use crate::{Float, Par};

/// The terms of `L` steps of one column.
pub(super) struct Row<T, const L: usize> {
    /// What a step adds: `x_t`.
    pub x: [T; L],
    /// The factor of the accumulator: `m_t`.
    pub m: [T; L],
    /// The discount whose zero cuts the accumulator: `d_t`.
    pub d: [T; L],
}

/// An estimator in the linear form, on batch-major `[B, T]` inputs (`t` steps per column).
pub(super) trait Linear<T: Float, const K: usize, const N: usize>: Sync + Copy {
    /// The accumulator after the last step of column `j`.
    fn init(&self, inputs: [&[T]; K], t: usize, j: usize) -> T;
    /// The factor `m` of a step whose discount is `d`.
    fn factor(&self, d: T) -> T;
    /// The terms of steps `t0..t0 + L` of column `j` (`steps` reads them at `(t0, j * t)`,
    /// [`ByStep::ALONG_COLUMNS`]). Loops, not closures: a closure is compiled for the
    /// baseline instruction set when it is not inlined.
    fn terms<S: Steps<T>, const L: usize>(
        &self,
        steps: &S,
        inputs: [&[T]; K],
        t: usize,
        j: usize,
        t0: usize,
    ) -> Row<T, L>;
    /// Runs a kernel written with intrinsics for this estimator at `isa` over `columns`
    /// (whose part of each output `outs` holds), where there is one for these episodes
    /// and data ([`super::avx512`]: GAE's advantages in `f32` at AVX-512); false where
    /// there is none.
    #[cfg(target_arch = "x86_64")]
    #[allow(clippy::too_many_arguments)]
    fn written<S: Steps<T>>(
        &self,
        isa: Isa,
        steps: &S,
        inputs: [&[T]; K],
        layout: TimeMajor,
        columns: Range<usize>,
        outs: &mut [&mut [T]; N],
    ) -> bool {
        let _ = (isa, steps, inputs, layout, columns, outs);
        false
    }
    /// Output `k` of steps `t0..t0 + L` of column `j` from its accumulators `acc`: the
    /// accumulators themselves unless the estimator says otherwise.
    #[inline(always)]
    fn output<const L: usize>(
        &self,
        k: usize,
        acc: &[T; L],
        inputs: [&[T]; K],
        t: usize,
        j: usize,
        t0: usize,
    ) -> [T; L] {
        let _ = (k, inputs, t, j, t0);
        *acc
    }
}

/// The columns per vector at `isa` for `T`: the rows' `L`.
fn vector_lanes<T>(isa: Isa) -> usize {
    let bytes = match isa {
        Isa::Avx512 => 64,
        Isa::Avx2 => 32,
        Isa::Baseline => 16,
    };
    bytes / size_of::<T>()
}

/// Elements of `T` in a cache line: the steps of a block ([`Blocks`]).
fn line<T>() -> usize {
    64 / size_of::<T>()
}

/// Whether [`run`] takes `layout`'s data at `isa`: at least a vector of columns and a
/// cache line of steps.
pub(super) fn fits<T>(isa: Isa, layout: TimeMajor) -> bool {
    layout.t >= line::<T>() && layout.b >= vector_lanes::<T>(isa)
}

/// Runs `linear` over batch-major data (`layout`, which [`fits`]): `inputs` (the first the
/// rewards) and `episodes` read, `outs` written, the columns split between `par`'s
/// threads; flags other than 0 or 1 set `invalid`.
#[allow(clippy::too_many_arguments)]
pub(super) fn run<T: Float, const K: usize, const N: usize, E: Linear<T, K, N>>(
    par: Par,
    isa: Isa,
    layout: TimeMajor,
    inputs: [&[T]; K],
    episodes: SliceEpisodes<'_, T>,
    outs: [&mut [T]; N],
    linear: &E,
    invalid: &AtomicBool,
) {
    debug_assert!(fits::<T>(isa, layout));
    let lanes = vector_lanes::<T>(isa);
    let tasks = par
        .for_work(
            layout.t.saturating_mul(layout.b),
            crate::cpu::grain::grain(crate::cpu::grain::Family::BatchMajor),
        )
        .threads()
        .min(layout.b / lanes);
    // Each task's columns are a whole number of vectors but the last task's, which holds
    // at least one (its last vector overlaps the one before).
    let width = (layout.b / lanes).div_ceil(tasks) * lanes;
    let mut ranges = Vec::new();
    let mut first = 0;
    while first < layout.b {
        let last = if layout.b - first < width + lanes {
            layout.b
        } else {
            first + width
        };
        ranges.push(first..last);
        first = last;
    }
    super::for_column_ranges(par, layout.t, ranges, outs, |columns, mut outs| {
        with_steps!(inputs[0], episodes, invalid, |steps| {
            scan_columns(isa, linear, &steps, inputs, layout, columns, &mut outs)
        })
    });
}

/// The columns `columns` (whose part of each output `outs` holds), a vector of them at a
/// time, in the version of the code compiled for `isa`.
fn scan_columns<T: Float, const K: usize, const N: usize, E: Linear<T, K, N>, S: Steps<T>>(
    isa: Isa,
    linear: &E,
    steps: &S,
    inputs: [&[T]; K],
    layout: TimeMajor,
    columns: Range<usize>,
    outs: &mut [&mut [T]; N],
) {
    #[cfg(target_arch = "x86_64")]
    if linear.written(isa, steps, inputs, layout, columns.clone(), outs) {
        return;
    }
    let job = Columns {
        isa,
        linear,
        steps,
        inputs,
        layout,
        columns,
        outs,
    };
    #[cfg(target_arch = "x86_64")]
    match isa {
        // SAFETY: `isa` is one the CPU supports (the callers pass `simd::isa` or a
        // supported one).
        Isa::Avx512 => return unsafe { avx512(job) },
        // SAFETY: as above.
        Isa::Avx2 => return unsafe { avx2(job) },
        Isa::Baseline => {}
    }
    // 16-byte vectors: 4 `f32` or 2 `f64`, a line in 4 squares.
    if size_of::<T>() == 4 {
        job.run::<4, 4>();
    } else {
        job.run::<2, 4>();
    }
}

// Each instruction set's version names its own `L` and `Q` (vector and line by the element
// size, as [`vector_lanes`] and [`line`] say), so that only those are compiled into it.

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
fn avx512<T: Float, const K: usize, const N: usize, E: Linear<T, K, N>, S: Steps<T>>(
    job: Columns<'_, '_, T, E, S, K, N>,
) {
    if size_of::<T>() == 4 {
        job.run::<16, 1>();
    } else {
        job.run::<8, 1>();
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn avx2<T: Float, const K: usize, const N: usize, E: Linear<T, K, N>, S: Steps<T>>(
    job: Columns<'_, '_, T, E, S, K, N>,
) {
    if size_of::<T>() == 4 {
        job.run::<8, 2>();
    } else {
        job.run::<4, 2>();
    }
}

/// The work of [`scan_columns`].
struct Columns<'a, 'o, T, E, S, const K: usize, const N: usize> {
    isa: Isa,
    linear: &'a E,
    steps: &'a S,
    inputs: [&'a [T]; K],
    layout: TimeMajor,
    columns: Range<usize>,
    outs: &'a mut [&'o mut [T]; N],
}

/// Blocks of a vector of columns whose elementwise work runs before their scans: 16 cache
/// lines of steps, whose `x` (16 KB at AVX-512 in `f32`) stays in L1 beside the data. GAE
/// in f32, data 16 bytes off the cache lines, best of 9 processes on this crate's machine
/// (AMD EPYC Zen 5, AVX-512): `[2048, 64]` 81, 86 and 87 us with 16, 8 and 4 lines;
/// `[128, 1024]` 74, 79 and 87 us.
const STAGED: usize = 16;

/// What the elementwise work of up to [`STAGED`] blocks leaves for their scans: for block
/// `b` and square `q`, row `i` of `x[b][q]` (and of `m` and `d`, where the discounts are not
/// two-valued) holds the `L` steps of column `i`; bit `s` of `live[b][q][i]` says whether
/// step `s` of column `i` has a nonzero discount (where they are).
struct Stage<T, const L: usize, const Q: usize> {
    x: [[[[T; L]; L]; Q]; STAGED],
    m: [[[[T; L]; L]; Q]; STAGED],
    d: [[[[T; L]; L]; Q]; STAGED],
    live: [[[u32; L]; Q]; STAGED],
    /// Whether `m`'s zeros are `d`'s in every square of block `b`.
    separated: [bool; STAGED],
}

impl<T: Float, const L: usize, const Q: usize> Stage<T, L, Q> {
    fn new() -> Box<Self> {
        let square = [[[T::zero(); L]; L]; Q];
        Box::new(Self {
            x: [square; STAGED],
            m: [square; STAGED],
            d: [square; STAGED],
            live: [[[0; L]; Q]; STAGED],
            separated: [true; STAGED],
        })
    }
}

impl<T: Float, const K: usize, const N: usize, E: Linear<T, K, N>, S: Steps<T>>
    Columns<'_, '_, T, E, S, K, N>
{
    /// Every vector of `L` columns, the last overlapping the one before when the columns
    /// are not a multiple of `L` (columns are independent, so it writes the same bits).
    #[inline(always)]
    fn run<const L: usize, const Q: usize>(mut self) {
        let count = self.columns.len();
        // One buffer for the task's vectors (each stage fills what it reads of it).
        let mut stage = Stage::<T, L, Q>::new();
        let mut offset = 0;
        while offset < count {
            let start = offset.min(count - L);
            self.scan_vector::<L, Q>(start, &mut stage);
            offset = start + L;
        }
    }

    /// Columns `offset..offset + L` of the task's, over every step from the last, in
    /// blocks of `Q` squares of `L` steps ([`Blocks`]), [`STAGED`] blocks at a time.
    #[inline(always)]
    fn scan_vector<const L: usize, const Q: usize>(
        &mut self,
        offset: usize,
        stage: &mut Stage<T, L, Q>,
    ) {
        // Copies of the kernel's parts, where a flag's atomic store cannot change them (the
        // slices behind a reference were read again after every store).
        let (linear, steps) = (*self.linear, *self.steps);
        let (linear, steps) = (&linear, &steps);
        let Self {
            isa,
            inputs,
            layout,
            ..
        } = *self;
        let t = layout.t;
        let first = self.columns.start + offset;
        let mut acc: [T; L] = std::array::from_fn(|i| linear.init(inputs, t, first + i));
        // Discounts of 0 and gamma have factors of 0 and `factor(gamma)`.
        let two_valued = steps.two_valued().map(|gamma| linear.factor(gamma));
        let mut out = [[[T::zero(); L]; L]; Q];
        debug_assert!(L == vector_lanes::<T>(isa) && L * Q == line::<T>());
        let mut blocks = Blocks::new(t, L * Q, &inputs[0][first * t..]);
        loop {
            let mut staged: [Block; STAGED] = Default::default();
            let mut count = 0;
            for (slot, block) in staged.iter_mut().zip(blocks.by_ref()) {
                *slot = block;
                count += 1;
            }
            if count == 0 {
                return;
            }
            let staged = &staged[..count];
            // The blocks' first steps by index (an index from a walk over `Block`s was a
            // division by their size).
            let mut starts = [0; STAGED];
            for (start, block) in starts.iter_mut().zip(staged) {
                *start = block.t0;
            }
            stage.separated = [true; STAGED];
            // A column's blocks in the data's order, so that its lines are read one after
            // the other; a loop per kind of discounts, so that the two-valued one stores
            // only `x` and the bits (`m`, `d` and their zeros' check are the other kind's).
            if two_valued.is_some() {
                for i in 0..L {
                    for b in (0..count).rev() {
                        for q in 0..Q {
                            let row = linear.terms::<S, L>(
                                steps,
                                inputs,
                                t,
                                first + i,
                                starts[b] + q * L,
                            );
                            stage.x[b][q][i] = row.x;
                            stage.live[b][q][i] = nonzero_bits(isa, &row.d);
                        }
                    }
                }
            } else {
                for i in 0..L {
                    for b in (0..count).rev() {
                        for q in 0..Q {
                            let row = linear.terms::<S, L>(
                                steps,
                                inputs,
                                t,
                                first + i,
                                starts[b] + q * L,
                            );
                            stage.separated[b] &= zeros_agree(&row.m, &row.d);
                            (stage.x[b][q][i], stage.m[b][q][i], stage.d[b][q][i]) =
                                (row.x, row.m, row.d);
                        }
                    }
                }
            }
            for (b, block) in staged.iter().enumerate() {
                let Block { t0, steps: scanned } = block;
                for q in (0..Q).rev() {
                    let within = scanned.start.max(q * L)..scanned.end.min(q * L + L);
                    if within.is_empty() {
                        continue;
                    }
                    let within = within.start - q * L..within.end - q * L;
                    let x = transposed_square(isa, stage.x[b][q]);
                    let out = &mut out[q];
                    match two_valued {
                        Some(factor) => {
                            let live = &stage.live[b][q];
                            // A whole square's loop has a constant trip count, so that it
                            // unrolls and its vectors stay in registers.
                            if within.len() == L {
                                for s in (0..L).rev() {
                                    step_two_valued(&mut acc, &mut out[s], &x[s], live, s, factor);
                                }
                            } else {
                                // The same unrolled loop, each step behind a test: a loop
                                // over a range known at run time read `x` by gathers.
                                for s in (0..L).rev() {
                                    if within.contains(&s) {
                                        step_two_valued(
                                            &mut acc,
                                            &mut out[s],
                                            &x[s],
                                            live,
                                            s,
                                            factor,
                                        );
                                    }
                                }
                            }
                        }
                        None => {
                            let m = transposed_square(isa, stage.m[b][q]);
                            let cuts;
                            let d = if stage.separated[b] {
                                &m
                            } else {
                                cuts = transposed_square(isa, stage.d[b][q]);
                                &cuts
                            };
                            if within.len() == L {
                                for s in (0..L).rev() {
                                    step(&mut acc, &mut out[s], &x[s], &m[s], &d[s]);
                                }
                            } else {
                                for s in (0..L).rev() {
                                    if within.contains(&s) {
                                        step(&mut acc, &mut out[s], &x[s], &m[s], &d[s]);
                                    }
                                }
                            }
                        }
                    }
                }
                for (q, out) in out.iter().enumerate() {
                    let within = scanned.start.max(q * L)..scanned.end.min(q * L + L);
                    if within.is_empty() {
                        continue;
                    }
                    let within = within.start - q * L..within.end - q * L;
                    let accumulators = transposed_square(isa, *out);
                    for (i, acc) in accumulators.iter().enumerate() {
                        let at = (offset + i) * t + t0 + q * L;
                        for (k, out) in self.outs.iter_mut().enumerate() {
                            let values =
                                linear.output::<L>(k, acc, inputs, t, first + i, t0 + q * L);
                            store(&mut out[at..at + L], &values, &within);
                        }
                    }
                }
            }
        }
    }
}

/// The blocks of steps a vector of columns is scanned in, from the last: each reads the
/// `len` steps from `t0` and scans `steps` of them (relative to `t0`). `len` is a cache
/// line of them. Where the columns share their alignment (`len` divides `T`), blocks start
/// on the data's cache lines, so that a block never splits a line whose rest a later block
/// reads, after other columns' lines may have evicted it (`[2048, 64]` GAE in f32 with the
/// data 16 bytes past a line: 175 against 123 us); the last block and the first are then
/// short. Otherwise only the first is.
struct Blocks {
    t: usize,
    len: usize,
    /// The end of the next block.
    end: usize,
    /// The steps from which blocks start: `phase + k * len`.
    phase: usize,
}

/// A block of [`Blocks`].
#[derive(Default)]
struct Block {
    t0: usize,
    steps: Range<usize>,
}

impl Blocks {
    /// The blocks of `len` of `t >= len` steps of the columns whose first starts at
    /// `column`.
    fn new<T>(t: usize, len: usize, column: &[T]) -> Self {
        let bytes = len * size_of::<T>();
        let phase = if t.is_multiple_of(len) {
            (bytes - column.as_ptr() as usize % bytes) % bytes / size_of::<T>()
        } else {
            t % len
        };
        Self {
            t,
            len,
            end: t,
            phase,
        }
    }
}

impl Iterator for Blocks {
    type Item = Block;

    fn next(&mut self) -> Option<Block> {
        let end = self.end;
        if end == 0 {
            return None;
        }
        // The last block start before `end`, or 0.
        let start = if end > self.phase {
            end - 1 - (end - 1 - self.phase) % self.len
        } else {
            0
        };
        let t0 = start.min(self.t - self.len);
        self.end = start;
        Some(Block {
            t0,
            steps: start - t0..end - t0,
        })
    }
}

/// `values[steps]` into `out[steps]`, `out` a block of `L`: one vector store for a whole
/// block, a masked one for part of a block where the instruction set has them (a copy of
/// a length known only at run time is a call to `memcpy`, which took 8% of `[128, 1024]`
/// GAE with data off the cache lines, two blocks in nine partial).
#[inline(always)]
fn store<T: Copy + 'static, const L: usize>(out: &mut [T], values: &[T; L], steps: &Range<usize>) {
    let whole: &mut [T; L] = out.try_into().expect("a block holds L steps");
    if *steps == (0..L) {
        *whole = *values;
        return;
    }
    assert!(steps.end <= L, "the steps lie in the block");
    #[cfg(target_arch = "x86_64")]
    if x86::store_steps(whole, values, steps) {
        return;
    }
    whole[steps.clone()].copy_from_slice(&values[steps.clone()]);
}

/// Whether `m` and `d` are zero in the same places (an integer reduction, which LLVM
/// vectorizes; see [`nonzero_bits`]).
#[inline(always)]
fn zeros_agree<T: Float, const L: usize>(m: &[T; L], d: &[T; L]) -> bool {
    let mut differ = 0u32;
    for s in 0..L {
        differ |= u32::from((m[s] == T::zero()) != (d[s] == T::zero()));
    }
    differ == 0
}

/// One step of the recurrence for `L` columns: `acc = x + cut(d, m * acc)`, into `out`.
#[inline(always)]
fn step<T: Float, const L: usize>(
    acc: &mut [T; L],
    out: &mut [T; L],
    x: &[T; L],
    m: &[T; L],
    d: &[T; L],
) {
    for i in 0..L {
        acc[i] = x[i] + cut(d[i], m[i] * acc[i]);
        out[i] = acc[i];
    }
}

/// [`step`] where every discount is 0 or `gamma`: `m` is `factor` where step `s` of a
/// column has a nonzero discount (bit `s` of its `live` word) and the cut is 0 elsewhere.
#[inline(always)]
fn step_two_valued<T: Float, const L: usize>(
    acc: &mut [T; L],
    out: &mut [T; L],
    x: &[T; L],
    live: &[u32; L],
    s: usize,
    factor: T,
) {
    let bit = 1 << s;
    for i in 0..L {
        let carried = if live[i] & bit != 0 {
            factor * acc[i]
        } else {
            T::zero()
        };
        acc[i] = x[i] + carried;
        out[i] = acc[i];
    }
}

/// Bit `s` set where `d[s]` is not zero, for a vector of `L` `T`s at `isa`: a vector compare
/// and its mask (LLVM makes a shift and an `or` per element of a loop, and where that loop
/// was compiled beside the compare, it loaded the flags in pieces).
#[inline(always)]
fn nonzero_bits<T: Float, const L: usize>(isa: Isa, d: &[T; L]) -> u32 {
    debug_assert_eq!(L, vector_lanes::<T>(isa));
    #[cfg(target_arch = "x86_64")]
    {
        x86::nonzero_bits(d)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let mut bits = 0;
        for (s, &d) in d.iter().enumerate() {
            bits |= u32::from(d != T::zero()) << s;
        }
        bits
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::any::TypeId;
    use std::arch::x86_64::*;

    /// [`super::nonzero_bits`] by a compare to a mask. `L` picks the instruction set: the
    /// rows' code for `L` lanes of `T` runs only in the version compiled for the set whose
    /// vectors hold them ([`super::vector_lanes`]), which the CPU supports.
    #[inline(always)]
    pub(super) fn nonzero_bits<T: 'static, const L: usize>(d: &[T; L]) -> u32 {
        let element = TypeId::of::<T>();
        let (f32, f64) = (
            element == TypeId::of::<f32>(),
            element == TypeId::of::<f64>(),
        );
        let at = d.as_ptr();
        // SAFETY: the CPU supports the instruction set of each arm (above), and each arm
        // reads `L` elements of `T` from `d`, which holds them.
        unsafe {
            match L {
                16 if f32 => u32::from(f32x16(at.cast())),
                8 if f64 => u32::from(f64x8(at.cast())),
                8 if f32 => f32x8(at.cast()),
                4 if f64 => f64x4(at.cast()),
                4 if f32 => {
                    _mm_movemask_ps(_mm_cmpneq_ps(_mm_loadu_ps(at.cast()), _mm_setzero_ps())) as u32
                }
                2 if f64 => {
                    _mm_movemask_pd(_mm_cmpneq_pd(_mm_loadu_pd(at.cast()), _mm_setzero_pd())) as u32
                }
                _ => unreachable!("no vector of {L} elements of this type"),
            }
        }
    }

    /// `values[steps]` into `out[steps]` by a masked store where the instruction set of `L`
    /// `T`s has one (AVX-512 and AVX2 vectors); false where it has none.
    #[inline(always)]
    pub(super) fn store_steps<T: 'static, const L: usize>(
        out: &mut [T; L],
        values: &[T; L],
        steps: &std::ops::Range<usize>,
    ) -> bool {
        let element = TypeId::of::<T>();
        let (f32, f64) = (
            element == TypeId::of::<f32>(),
            element == TypeId::of::<f64>(),
        );
        // Bit `s` set for the steps in `steps` (`steps.end <= L <= 16`).
        let mask = ((1u32 << steps.end) - 1) & !((1u32 << steps.start) - 1);
        let (to, from) = (out.as_mut_ptr(), values.as_ptr());
        // SAFETY: the CPU supports the instruction set of each arm ([`nonzero_bits`]), and
        // each arm reads `L` elements of `T` from `values` and writes some of `out`'s `L`.
        unsafe {
            match L {
                16 if f32 => masked_f32x16(to.cast(), from.cast(), mask as u16),
                8 if f64 => masked_f64x8(to.cast(), from.cast(), mask as u8),
                8 if f32 => masked_f32x8(to.cast(), from.cast(), mask),
                4 if f64 => masked_f64x4(to.cast(), from.cast(), mask),
                _ => return false,
            }
        }
        true
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn masked_f32x16(to: *mut f32, from: *const f32, mask: u16) {
        // SAFETY: `from` holds and `to` has room for 16 `f32` (the caller's contract).
        unsafe { _mm512_mask_storeu_ps(to, mask, _mm512_loadu_ps(from)) }
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn masked_f64x8(to: *mut f64, from: *const f64, mask: u8) {
        // SAFETY: as above, for 8 `f64`.
        unsafe { _mm512_mask_storeu_pd(to, mask, _mm512_loadu_pd(from)) }
    }

    /// The lanes whose bit of `mask` is set, as AVX2's masked stores take them: the sign
    /// bit of each 32-bit (`WIDE` false) or 64-bit lane.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn lane_mask<const WIDE: bool>(mask: u32) -> __m256i {
        if WIDE {
            let bits = _mm256_setr_epi64x(1, 2, 4, 8);
            _mm256_cmpeq_epi64(
                _mm256_and_si256(_mm256_set1_epi64x(mask.into()), bits),
                bits,
            )
        } else {
            let bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
            _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32(mask as i32), bits), bits)
        }
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn masked_f32x8(to: *mut f32, from: *const f32, mask: u32) {
        // SAFETY: as above, for 8 `f32`.
        unsafe { _mm256_maskstore_ps(to, lane_mask::<false>(mask), _mm256_loadu_ps(from)) }
    }

    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn masked_f64x4(to: *mut f64, from: *const f64, mask: u32) {
        // SAFETY: as above, for 4 `f64`.
        unsafe { _mm256_maskstore_pd(to, lane_mask::<true>(mask), _mm256_loadu_pd(from)) }
    }

    // Unordered compares: a NaN discount is not zero, as `!=` says.

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn f32x16(at: *const f32) -> u16 {
        // SAFETY: `at` holds 16 `f32` (the caller's contract).
        let v = unsafe { _mm512_loadu_ps(at) };
        _mm512_cmp_ps_mask::<_CMP_NEQ_UQ>(v, _mm512_setzero_ps())
    }

    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn f64x8(at: *const f64) -> u8 {
        // SAFETY: `at` holds 8 `f64` (the caller's contract).
        let v = unsafe { _mm512_loadu_pd(at) };
        _mm512_cmp_pd_mask::<_CMP_NEQ_UQ>(v, _mm512_setzero_pd())
    }

    #[target_feature(enable = "avx")]
    #[inline]
    unsafe fn f32x8(at: *const f32) -> u32 {
        // SAFETY: `at` holds 8 `f32` (the caller's contract).
        let v = unsafe { _mm256_loadu_ps(at) };
        _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_NEQ_UQ>(v, _mm256_setzero_ps())) as u32
    }

    #[target_feature(enable = "avx")]
    #[inline]
    unsafe fn f64x4(at: *const f64) -> u32 {
        // SAFETY: `at` holds 4 `f64` (the caller's contract).
        let v = unsafe { _mm256_loadu_pd(at) };
        _mm256_movemask_pd(_mm256_cmp_pd::<_CMP_NEQ_UQ>(v, _mm256_setzero_pd())) as u32
    }
}

impl ByStep {
    /// Batch-major data seen so that `load(x, t, j * T)` reads the steps from `t` of
    /// column `j`: for the elementwise work of [`Steps`], which does not care whether a
    /// block is a step's columns or a column's steps.
    pub(super) const ALONG_COLUMNS: ByStep = ByStep { b: 1 };
}

#[cfg(test)]
mod tests {
    use super::super::{Gae, Lambda, Returns};
    use super::*;
    use crate::kernels::recurrence::Truncation;

    /// One rollout's arrays, in one storage order.
    struct Arrays<T> {
        rewards: Vec<T>,
        values: Vec<T>,
        next_values: Vec<T>,
        final_values: Vec<T>,
        flags: Vec<T>,
        bytes: Vec<u8>,
        truncated: Vec<T>,
        discounts: Vec<T>,
    }

    impl<T: Float> Arrays<T> {
        fn new(t: usize, b: usize) -> Self {
            let len = t * b;
            let mut rng = crate::Rng::new((t * 1000 + b) as u64, "rows");
            let mut values = |scale: f64| -> Vec<T> {
                (0..len)
                    .map(|_| T::from_f64(scale * (rng.uniform_f64() - 0.5)))
                    .collect()
            };
            let (rewards, mut values_now, next_values, final_values) =
                (values(2.0), values(4.0), values(4.0), values(4.0));
            let flag = |v: Vec<T>, above: f64| -> Vec<T> {
                v.iter()
                    .map(|&x| T::from_f64(f64::from(u8::from(x.as_f64() > above))))
                    .collect()
            };
            let flags = flag(values(1.0), 0.3);
            let truncated = flag(values(1.0), 0.4);
            // What lies after a termination never reaches the steps before it: poison some.
            for i in 0..len.saturating_sub(b) {
                if flags[i] != T::zero() && i % 3 == 0 {
                    values_now[i + b] = T::nan();
                }
            }
            let bytes = flags.iter().map(|&f| u8::from(f != T::zero())).collect();
            let discounts = flags
                .iter()
                .map(|&f| T::from_f64(0.99) * (T::one() - f))
                .collect();
            Self {
                rewards,
                values: values_now,
                next_values,
                final_values,
                flags,
                bytes,
                truncated,
                discounts,
            }
        }

        /// The same arrays batch-major.
        fn batch_major(&self, t: usize, b: usize) -> Self {
            fn order<E: Copy>(v: &[E], t: usize, b: usize) -> Vec<E> {
                (0..t * b).map(|i| v[(i % t) * b + i / t]).collect()
            }
            Self {
                rewards: order(&self.rewards, t, b),
                values: order(&self.values, t, b),
                next_values: order(&self.next_values, t, b),
                final_values: order(&self.final_values, t, b),
                flags: order(&self.flags, t, b),
                bytes: order(&self.bytes, t, b),
                truncated: order(&self.truncated, t, b),
                discounts: order(&self.discounts, t, b),
            }
        }

        fn episodes(&self) -> [SliceEpisodes<'_, T>; 5] {
            let gamma = T::from_f64(0.99);
            [
                Episodes::terminations(gamma, &self.flags[..]),
                Episodes::terminations(gamma, &self.bytes[..]),
                Episodes::Discounts(&self.discounts),
                Episodes::Constant { gamma },
                Episodes::Flags {
                    gamma,
                    terminated: FlagSlice::Bytes(&self.bytes),
                    truncation: Some(Truncation {
                        truncated: FlagSlice::Values(&self.truncated),
                        final_values: &self.final_values,
                    }),
                },
            ]
        }
    }

    /// The outputs of GAE (advantages and returns), returns and TD(lambda): time-major by
    /// the time-major scans (`isa: None`), batch-major by [`run`] at `isa` with the rewards
    /// `shift` elements past where their buffer starts (which moves the blocks' starts).
    fn outputs<T: Float>(
        arrays: &Arrays<T>,
        layout: TimeMajor,
        isa: Option<Isa>,
        shift: usize,
        lambda: T,
    ) -> Vec<Vec<T>> {
        let mut shifted = vec![T::zero(); shift];
        shifted.extend(&arrays.rewards);
        let rewards = &shifted[shift..];
        let len = layout.t * layout.b;
        let bootstrap: Vec<T> = (0..layout.b)
            .map(|j| T::from_f64(j as f64 * 0.25 - 1.0))
            .collect();
        let invalid = AtomicBool::new(false);
        let mut all = Vec::new();
        for episodes in arrays.episodes() {
            let (mut advantages, mut returns) = (vec![T::zero(); len], vec![T::zero(); len]);
            let mut discounted = vec![T::zero(); len];
            let mut td = vec![T::zero(); len];
            let gae = Gae {
                bootstrap: &bootstrap,
                lambda,
            };
            let gae_inputs = [rewards, &arrays.values];
            let lambda_inputs = [rewards, &arrays.next_values];
            match isa {
                Some(isa) => {
                    let par = Par::rayon(2);
                    let outs = [&mut advantages[..], &mut returns];
                    run(par, isa, layout, gae_inputs, episodes, outs, &gae, &invalid);
                    let returns_estimator = Returns {
                        bootstrap: &bootstrap,
                    };
                    let (inputs, outs) = ([rewards], [&mut discounted[..]]);
                    run(
                        par,
                        isa,
                        layout,
                        inputs,
                        episodes,
                        outs,
                        &returns_estimator,
                        &invalid,
                    );
                    let outs = [&mut td[..]];
                    let estimator = Lambda { lambda };
                    run(
                        par,
                        isa,
                        layout,
                        lambda_inputs,
                        episodes,
                        outs,
                        &estimator,
                        &invalid,
                    );
                }
                None => {
                    let par = Par::Seq;
                    super::super::gae(
                        par,
                        layout,
                        gae_inputs[0],
                        gae_inputs[1],
                        &bootstrap,
                        episodes,
                        lambda,
                        &mut advantages,
                        Some(&mut returns),
                    )
                    .unwrap();
                    super::super::discounted_returns(
                        par,
                        layout,
                        rewards,
                        episodes,
                        &bootstrap,
                        &mut discounted,
                    )
                    .unwrap();
                    super::super::lambda_returns(
                        par,
                        layout,
                        rewards,
                        &arrays.next_values,
                        episodes,
                        lambda,
                        &mut td,
                    )
                    .unwrap();
                }
            }
            all.extend([advantages, returns, discounted, td]);
        }
        all
    }

    /// GAE (with returns), returns and TD(lambda) over batch-major data at every
    /// instruction set this CPU has give the time-major scans' bits: columns and steps
    /// around the vector widths (an overlapping last vector, a short first block, columns
    /// split between two tasks, several stages), every kind of episodes, `lambda = 0` (where `m` does not
    /// tell the cuts), and poisoned values behind terminations.
    fn check<T: Float>() {
        for (t, b) in [
            (16, 16),
            (37, 21),
            (8, 9),
            (64, 40),
            (48, 8),
            (100, 2),
            (2, 100),
            // More blocks than a stage holds, and a last stage of one block and a bit.
            (STAGED * 16 + 20, 17),
        ] {
            let layout = TimeMajor::new(t, b);
            let time_major = Arrays::<T>::new(t, b);
            let batch_major = time_major.batch_major(t, b);
            for lambda in [0.95, 0.0].map(T::from_f64) {
                let want = outputs(&time_major, layout, None, 0, lambda);
                for isa in Isa::ALL.into_iter().filter(|isa| isa.is_supported()) {
                    if !fits::<T>(isa, layout) {
                        continue;
                    }
                    for shift in [0, 1, line::<T>() - 1] {
                        let got = outputs(&batch_major, layout, Some(isa), shift, lambda);
                        for (k, (got, want)) in got.iter().zip(&want).enumerate() {
                            let got: Vec<u64> = (0..t * b)
                                .map(|i| got[(i % b) * t + i / b].to_bits_u64())
                                .collect();
                            let want: Vec<u64> = want.iter().map(|x| x.to_bits_u64()).collect();
                            assert!(
                                got == want,
                                "{isa:?} [{t}, {b}] rewards {shift} elements in, lambda \
                                 {lambda:?}: output {k} differs"
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn rows_give_the_bits_of_time_major_at_every_instruction_set() {
        check::<f32>();
        check::<f64>();
    }
}
