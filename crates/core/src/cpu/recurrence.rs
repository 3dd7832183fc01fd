//! The Cpu reverse-recurrence kernels on plain slices (the slice level of
//! `rlgrad-returns`), following the canonical formulas of
//! [`crate::kernels::recurrence`].
//!
//! Columns are split into chunks (time-major: at least 128 wide, in blocks of 128, 64 and
//! 16 columns so the inner loops vectorize across adjacent columns) and the chunks run in
//! parallel; each column is scanned sequentially in `t`. Columns never interact, so every
//! chunking gives the same bits. GAE in `f32` with termination flags or a constant gamma
//! runs kernels written with intrinsics where LLVM's code for the generic scans spilled:
//! time-major at AVX2 (`avx2.rs`), batch-major at AVX2 and AVX-512 (`avx2.rs`,
//! `avx512.rs`); the same bits.
//!
//! Data stored batch-major ([`SliceLayout::batch_major`]) are scanned where they lie by the
//! estimators whose recurrence is linear (returns, GAE, TD(lambda): `rows.rs`, a vector of
//! columns by a cache line of steps at a time, transposed in registers), and copied a tile
//! at a time into time-major order and scanned there by the time-major kernels otherwise
//! (`tiles.rs`); both orders give the same bits.

mod tiles;

use crate::cpu::grain::{Family, grain};
use crate::cpu::simd::Isa;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::kernels::recurrence::{
    Episodes, FlagSlice, SliceEpisodes, SliceLayout, TimeMajor, VtraceParams, cut,
};
use crate::{Error, Float, Par, Result, reduce};
use tiles::{Chunk, ChunkScan};

/// Where element `(t, j)` of time-major `[T, B]` data is: the `W` values of a step are
/// adjacent (one vector load).
#[derive(Clone, Copy)]
struct ByStep {
    b: usize,
}

impl ByStep {
    /// `x[t, j..j + W]`.
    #[inline(always)]
    fn load<T: Copy, const W: usize>(self, x: &[T], t: usize, j: usize) -> [T; W] {
        block(x, t * self.b + j)
    }
}

/// The effective rewards and discounts `(r'_t, d_t)` of the steps, one implementation per
/// kind of [`Episodes`] so that each scan is compiled (and vectorized) for its kind.
trait Steps<T>: Sync + Copy {
    /// `(r', d)` of step `t` in the `W` columns from `j`.
    fn block<const W: usize>(&self, order: ByStep, t: usize, j: usize) -> ([T; W], [T; W]);
    /// `gamma` when every discount is 0 or `gamma` (episodes given by flags or a constant
    /// gamma), `None` when they are the caller's.
    fn two_valued(&self) -> Option<T>;
    /// What the hand-written kernels read of episodes given by termination flags (of `f32`
    /// or bytes) or a constant gamma; `None` for the other kinds.
    #[cfg(target_arch = "x86_64")]
    fn plain(&self) -> Option<Plain<'_, T>> {
        None
    }
}

/// The flags of the episodes, as the hand-written kernels read them.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
enum Flags<'a> {
    /// No flags: every discount is `gamma` (`Episodes::Constant`).
    None,
    /// Termination flags as `f32`: set when nonzero (NaN included).
    Values(&'a [f32]),
    /// Termination flags as bytes: set when nonzero.
    Bytes(&'a [u8]),
}

#[cfg(target_arch = "x86_64")]
impl<'a> Flags<'a> {
    /// `flags` as the kernels read them: `f32` values or bytes, else `None`.
    fn of<F: 'static>(flags: &'a [F]) -> Option<Self> {
        let element = std::any::TypeId::of::<F>();
        // SAFETY: each arm reinterprets `flags` as a slice of its own element type.
        unsafe {
            if element == std::any::TypeId::of::<f32>() {
                Some(Flags::Values(std::slice::from_raw_parts(
                    flags.as_ptr().cast(),
                    flags.len(),
                )))
            } else if element == std::any::TypeId::of::<u8>() {
                Some(Flags::Bytes(std::slice::from_raw_parts(
                    flags.as_ptr().cast(),
                    flags.len(),
                )))
            } else {
                None
            }
        }
    }
}

/// `x` as `&mut [f32]` when `T` is `f32`.
#[cfg(target_arch = "x86_64")]
fn as_f32_mut<T: 'static>(x: &mut [T]) -> Option<&mut [f32]> {
    // SAFETY: `T` is `f32`, so the slice is already one of `f32`.
    (std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>())
        .then(|| unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast(), x.len()) })
}

/// `x` as `&[f32]` when `T` is `f32`.
#[cfg(target_arch = "x86_64")]
fn as_f32<T: 'static>(x: &[T]) -> Option<&[f32]> {
    // SAFETY: `T` is `f32`, so the slice is already one of `f32`.
    (std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>())
        .then(|| unsafe { std::slice::from_raw_parts(x.as_ptr().cast(), x.len()) })
}

/// The inputs of a GAE scan over `[t, b]` data in `f32` (time-major or batch-major, as the
/// kernel reading them says), for the kernels written with intrinsics.
#[cfg(target_arch = "x86_64")]
struct GaeF32<'a> {
    t: usize,
    b: usize,
    rewards: &'a [f32],
    values: &'a [f32],
    bootstrap: &'a [f32],
    flags: Flags<'a>,
    gamma: f32,
    lambda: f32,
}

#[cfg(target_arch = "x86_64")]
impl<'a> GaeF32<'a> {
    /// The inputs of GAE over `layout`'s data where `T` is `f32` and the episodes are
    /// given by termination flags or a constant gamma (`steps.plain()`, with the rewards),
    /// and where to record flags other than 0 or 1; `None` otherwise.
    fn of<T: Float, S: Steps<T>>(
        layout: TimeMajor,
        steps: &'a S,
        [values, bootstrap]: [&'a [T]; 2],
        lambda: T,
    ) -> Option<(Self, Option<&'a AtomicBool>)> {
        let plain = steps.plain()?;
        let gae = GaeF32 {
            t: layout.t,
            b: layout.b,
            rewards: as_f32(plain.rewards)?,
            values: as_f32(values)?,
            bootstrap: as_f32(bootstrap)?,
            flags: plain.flags,
            gamma: plain.gamma.as_f64() as f32,
            lambda: lambda.as_f64() as f32,
        };
        Some((gae, plain.invalid))
    }

    /// Whether a time-major kernel of `lanes` columns a vector and at most `most` a block
    /// takes the block of `width` columns from `first`, of `T` data: the assertion each
    /// makes once before its unchecked loads.
    fn block_fits<T: 'static>(
        &self,
        first: usize,
        width: usize,
        lanes: usize,
        most: usize,
    ) -> bool {
        self.t > 0
            && std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>()
            && width.is_multiple_of(lanes)
            && width <= most
            && first + width <= self.b
            && self.lengths_fit()
    }

    /// Whether a batch-major kernel of `lanes` columns a vector writes `columns` into
    /// `out` (of `out_len` elements) and the returns (of `returns_len`, where asked): the
    /// assertion each makes once, with its own shape test, before its unchecked loads and
    /// stores.
    fn rows_fit(
        &self,
        columns: &Range<usize>,
        lanes: usize,
        out_len: usize,
        returns_len: Option<usize>,
    ) -> bool {
        columns.len() >= lanes
            && columns.end <= self.b
            && out_len == columns.len() * self.t
            && returns_len.is_none_or(|len| len == out_len)
            && self.lengths_fit()
    }

    /// Whether every `[t, b]` array holds `t * b` elements and the bootstrap `b`: what the
    /// kernels check once before their unchecked loads.
    fn lengths_fit(&self) -> bool {
        let len = self.t * self.b;
        self.rewards.len() == len
            && self.values.len() == len
            && self.bootstrap.len() == self.b
            && match self.flags {
                Flags::None => true,
                Flags::Values(f) => f.len() == len,
                Flags::Bytes(f) => f.len() == len,
            }
    }
}

/// Records in `invalid` (where the episodes have flags) that a kernel saw a flag other
/// than 0 or 1 (`bad`), for [`check_flags`].
#[cfg(target_arch = "x86_64")]
fn record_invalid(bad: bool, invalid: Option<&AtomicBool>) {
    if let (true, Some(invalid)) = (bad, invalid) {
        invalid.store(true, Ordering::Relaxed);
    }
}

/// How a kind of flags tells a kernel written with intrinsics which lanes carry the
/// accumulator (`M`, its mask of a vector's lanes), and records flags that are neither 0
/// nor 1 as it goes, lane by lane, for one test at the end of the scan.
#[cfg(target_arch = "x86_64")]
trait Lanes<M>: Copy {
    /// What the flags seen so far say of their validity.
    type Seen: Copy;
    fn nothing_seen() -> Self::Seen;
    /// The lanes whose step (`at` and on) is not terminated, and `seen` updated.
    ///
    /// # Safety
    ///
    /// The kernel's instruction set, and a vector of flags at `at`.
    unsafe fn live(self, at: usize, seen: &mut Self::Seen) -> M;
    /// Whether a flag seen was neither 0 nor 1.
    ///
    /// # Safety
    ///
    /// The kernel's instruction set.
    unsafe fn invalid(seen: Self::Seen) -> bool;
}

/// A constant gamma: every lane carries.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct NoFlags;

/// `f32` flags, set when nonzero (NaN included); `|f (f - 1)|` is 0 only for 0 and 1.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct ValueFlags<'a>(&'a [f32]);

/// Byte flags, set when nonzero; valid when no bit but the lowest is set.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct ByteFlags<'a>(&'a [u8]);

/// Episodes without truncation whose discounts are 0 or `gamma`, as [`avx2`] reads them.
#[cfg(target_arch = "x86_64")]
struct Plain<'a, T> {
    rewards: &'a [T],
    flags: Flags<'a>,
    gamma: T,
    /// Where a flag other than 0 or 1 is recorded (`None`: no flags).
    invalid: Option<&'a AtomicBool>,
}

#[derive(Clone, Copy)]
struct Constant<'a, T> {
    rewards: &'a [T],
    gamma: T,
}
impl<T: Float> Steps<T> for Constant<'_, T> {
    #[inline(always)]
    fn block<const W: usize>(&self, order: ByStep, t: usize, j: usize) -> ([T; W], [T; W]) {
        (order.load(self.rewards, t, j), [self.gamma; W])
    }
    fn two_valued(&self) -> Option<T> {
        Some(self.gamma)
    }
    #[cfg(target_arch = "x86_64")]
    fn plain(&self) -> Option<Plain<'_, T>> {
        Some(Plain {
            rewards: self.rewards,
            flags: Flags::None,
            gamma: self.gamma,
            invalid: None,
        })
    }
}

#[derive(Clone, Copy)]
struct Discounts<'a, T> {
    rewards: &'a [T],
    discounts: &'a [T],
}
impl<T: Float> Steps<T> for Discounts<'_, T> {
    #[inline(always)]
    fn block<const W: usize>(&self, order: ByStep, t: usize, j: usize) -> ([T; W], [T; W]) {
        (
            order.load(self.rewards, t, j),
            order.load(self.discounts, t, j),
        )
    }
    fn two_valued(&self) -> Option<T> {
        None
    }
}

/// A flag element: 0 or 1, set when nonzero.
trait Flag: Copy + Sync + 'static {
    fn is_set(self) -> bool;
    /// Zero exactly when the flag is 0 or 1: 32-bit integers, whose `or` over a block of
    /// 16 `f32` LLVM reduces in one vector (an `or` of `bool` compares or of 64-bit words
    /// it split into 8 + 4 + 2 + 1 + 1 lanes, loading the flags in those pieces, which cost
    /// batch-major GAE a third of its time).
    fn invalid_bits(self) -> u32;
}
impl<T: Float> Flag for T {
    #[inline(always)]
    fn is_set(self) -> bool {
        self != T::zero()
    }
    /// `|f * (f - 1)|`: 0 for 0, -0 and 1, and for anything else a nonzero magnitude, an
    /// infinity or a NaN (tiny `f` give about `-f`, never 0: `f - 1` rounds to -1).
    #[inline(always)]
    fn invalid_bits(self) -> u32 {
        let sign = T::from_f64(-0.0).to_bits_u64();
        let bits = (self * (self - T::one())).to_bits_u64() & !sign;
        // The high half is 0 for `f32`, and the `or` keeps every bit of an `f64`'s.
        (bits as u32) | (bits >> 32) as u32
    }
}
impl Flag for u8 {
    #[inline(always)]
    fn is_set(self) -> bool {
        self != 0
    }
    #[inline(always)]
    fn invalid_bits(self) -> u32 {
        u32::from(self >> 1)
    }
}

/// Records in `invalid` that a block of flags holds a value other than 0 or 1, for
/// [`check_flags`] once the scan is done: the kernel reads every flag anyway, so the check
/// costs a few vector operations per block and no pass of its own.
#[inline(always)]
fn note_invalid<F: Flag, const W: usize>(flags: &[F; W], invalid: &AtomicBool) {
    if flags.iter().fold(0, |bad, f| bad | f.invalid_bits()) != 0 {
        invalid.store(true, Ordering::Relaxed);
    }
}

/// Whether each of the `W` flags of step `t` from column `j` is set.
#[inline(always)]
fn flags_set<T: Float, const W: usize>(
    flags: FlagSlice<'_, T>,
    invalid: &AtomicBool,
    order: ByStep,
    t: usize,
    j: usize,
) -> [bool; W] {
    fn set<F: Flag, const W: usize>(flags: [F; W], invalid: &AtomicBool) -> [bool; W] {
        note_invalid(&flags, invalid);
        flags.map(Flag::is_set)
    }
    match flags {
        FlagSlice::Values(v) => set(order.load::<T, W>(v, t, j), invalid),
        FlagSlice::Bytes(b) => set(order.load::<u8, W>(b, t, j), invalid),
    }
}

/// Terminations only, one implementation per flag element so that the common case (no
/// truncation) carries no per-block dispatch.
#[derive(Clone, Copy)]
struct Terminations<'a, T, F> {
    rewards: &'a [T],
    terminated: &'a [F],
    gamma: T,
    invalid: &'a AtomicBool,
}
impl<T: Float, F: Flag> Steps<T> for Terminations<'_, T, F> {
    #[inline(always)]
    fn block<const W: usize>(&self, order: ByStep, t: usize, j: usize) -> ([T; W], [T; W]) {
        let terminated: [F; W] = order.load(self.terminated, t, j);
        note_invalid(&terminated, self.invalid);
        let discounts = terminated.map(|flag| if flag.is_set() { T::zero() } else { self.gamma });
        (order.load(self.rewards, t, j), discounts)
    }
    fn two_valued(&self) -> Option<T> {
        Some(self.gamma)
    }
    #[cfg(target_arch = "x86_64")]
    fn plain(&self) -> Option<Plain<'_, T>> {
        Some(Plain {
            rewards: self.rewards,
            flags: Flags::of(self.terminated)?,
            gamma: self.gamma,
            invalid: Some(self.invalid),
        })
    }
}

#[derive(Clone, Copy)]
struct Truncations<'a, T> {
    rewards: &'a [T],
    terminated: FlagSlice<'a, T>,
    truncated: FlagSlice<'a, T>,
    final_values: &'a [T],
    gamma: T,
    invalid: &'a AtomicBool,
}
impl<T: Float> Steps<T> for Truncations<'_, T> {
    #[inline(always)]
    fn block<const W: usize>(&self, order: ByStep, t: usize, j: usize) -> ([T; W], [T; W]) {
        let rewards: [T; W] = order.load(self.rewards, t, j);
        let terminated: [bool; W] = flags_set(self.terminated, self.invalid, order, t, j);
        let truncated: [bool; W] = flags_set(self.truncated, self.invalid, order, t, j);
        let final_values: [T; W] = order.load(self.final_values, t, j);
        let mut out = ([T::zero(); W], [T::zero(); W]);
        for k in 0..W {
            (out.0[k], out.1[k]) = crate::kernels::recurrence::episode_step(
                rewards[k],
                self.gamma,
                terminated[k],
                Some((truncated[k], final_values[k])),
            );
        }
        out
    }
    fn two_valued(&self) -> Option<T> {
        Some(self.gamma)
    }
}

/// Runs `$body` with `$steps` bound to the [`Steps`] implementation of `$episodes`, whose
/// flags record in `$invalid` (an `AtomicBool`) any value other than 0 or 1.
macro_rules! with_steps {
    ($rewards:expr, $episodes:expr, $invalid:expr, |$steps:ident| $body:expr) => {
        match $episodes {
            Episodes::Constant { gamma } => {
                let $steps = Constant {
                    rewards: $rewards,
                    gamma,
                };
                $body
            }
            Episodes::Discounts(discounts) => {
                let $steps = Discounts {
                    rewards: $rewards,
                    discounts,
                };
                $body
            }
            Episodes::Flags {
                gamma,
                terminated: FlagSlice::Values(terminated),
                truncation: None,
            } => {
                let $steps = Terminations {
                    rewards: $rewards,
                    terminated,
                    gamma,
                    invalid: $invalid,
                };
                $body
            }
            Episodes::Flags {
                gamma,
                terminated: FlagSlice::Bytes(terminated),
                truncation: None,
            } => {
                let $steps = Terminations {
                    rewards: $rewards,
                    terminated,
                    gamma,
                    invalid: $invalid,
                };
                $body
            }
            Episodes::Flags {
                gamma,
                terminated,
                truncation: Some(tr),
            } => {
                let $steps = Truncations {
                    rewards: $rewards,
                    terminated,
                    truncated: tr.truncated,
                    final_values: tr.final_values,
                    gamma,
                    invalid: $invalid,
                };
                $body
            }
        }
    };
}

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod rows;
#[cfg(all(test, target_arch = "x86_64"))]
mod written_tests;

/// Columns per block of the scans written with intrinsics that take them
/// ([`ColumnScan::scan_widest`]): twice [`WIDE_BLOCK`]'s lines in flight.
const WIDEST_BLOCK: usize = 256;
/// Columns per vectorized block when a chunk is wide enough: twice the loads in flight per
/// step of the column block, which matters when rows are far apart (B = 1024 puts them
/// 4 KiB apart, where a 64-column block runs at two thirds of the speed).
const WIDE_BLOCK: usize = 128;
/// Columns per vectorized block: the scans keep `BLOCK` accumulators in registers.
const BLOCK: usize = 64;
/// Narrower blocks for the columns left over.
const SMALL_BLOCK: usize = 16;
/// Fewest columns a parallel task gets.
const MIN_TASK_COLUMNS: usize = 128;

/// Where a scan writes the entries of one step of one output, in its chunk of columns:
/// it fills [`Out::block`], then calls [`Out::flush`].
trait Out<T> {
    /// The `W` entries of step `t` starting `offset` columns into the chunk.
    fn block<const W: usize>(&mut self, t: usize, offset: usize) -> &mut [T; W];
    /// Writes the block filled for step `t` where it belongs, if it is not already there.
    fn flush<const W: usize>(&mut self, t: usize, offset: usize);
}

/// The rows of one time-major output that belong to one chunk of columns.
enum Rows<'a, T> {
    /// The whole `[T, B]` output, when one chunk holds every column.
    Dense { data: &'a mut [T], b: usize },
    /// One row segment per step, when the columns are split between tasks.
    Segments(Vec<&'a mut [T]>),
}

impl<T> Out<T> for Rows<'_, T> {
    #[inline(always)]
    fn block<const W: usize>(&mut self, t: usize, offset: usize) -> &mut [T; W] {
        match self {
            Self::Dense { data, b } => block_mut(data, t * *b + offset),
            Self::Segments(rows) => block_mut(rows[t], offset),
        }
    }

    /// Nothing: the block is the output itself.
    #[inline(always)]
    fn flush<const W: usize>(&mut self, _: usize, _: usize) {}
}

/// The scan of one estimator over `W` adjacent columns and every step: the unit of work
/// the driver hands out. `rows[k]` holds output `k`'s part of the current chunk, in which
/// column `first` sits at `offset`.
trait ColumnScan<T, const N: usize>: Sync {
    /// The narrowest instruction set from which the scan runs in blocks of [`WIDE_BLOCK`]
    /// columns, `None` for never (measured, one thread, `[128, 1024]` f32: returns gain at
    /// every width; GAE's advantages only with AVX-512's 32 registers, 76 against 62 us at
    /// AVX2; scans with two outputs never).
    const WIDE_FROM: Option<Isa>;
    /// Scans the columns `first..first + W` over every step, writing the outputs. With
    /// `CARRY` (the batch-major driver's chunks, see `tiles.rs`) it starts from the
    /// kernel's `init` where it has one and returns the accumulators it ended with: the
    /// state from which a scan of the steps before continues. Without, it returns zeros,
    /// so that the time-major scans keep their accumulators in registers.
    fn scan<const W: usize, const CARRY: bool, R: Out<T>>(
        &self,
        first: usize,
        offset: usize,
        rows: &mut [R; N],
    ) -> [T; W];
    /// Whether the scan runs in blocks of [`WIDE_BLOCK`] columns at `isa`: from
    /// [`ColumnScan::WIDE_FROM`] on, unless the scan says otherwise.
    fn wide(&self, isa: Isa) -> bool {
        Self::WIDE_FROM.is_some_and(|from| isa >= from)
    }
    /// Scans columns `first..first + WIDEST_BLOCK` as [`ColumnScan::scan`] would, where the
    /// scan has a kernel for blocks that wide; false (nothing done) where it has none.
    fn scan_widest<R: Out<T>>(&self, first: usize, offset: usize, rows: &mut [R; N]) -> bool {
        let _ = (first, offset, rows);
        false
    }
}

/// `acc` when a scan carries its accumulators (`CARRY`), zeros otherwise.
#[inline(always)]
fn carried<T: Float, const W: usize, const CARRY: bool>(acc: [T; W]) -> [T; W] {
    if CARRY { acc } else { [T::zero(); W] }
}

/// The accumulators a scan starts from: `init`'s when it carries them (`CARRY`) and has
/// some, `otherwise` else.
#[inline(always)]
fn initial<T: Float, const W: usize, const CARRY: bool>(
    init: Option<&[T]>,
    first: usize,
    otherwise: impl FnOnce() -> [T; W],
) -> [T; W] {
    match init {
        Some(init) if CARRY => block(init, first),
        _ => otherwise(),
    }
}

/// Runs `kernel` over the columns of one chunk in blocks of 128 (for scans with
/// [`ColumnScan::WIDE_FROM`] at this instruction set), then 64 and 16 columns, the few
/// left in one more block overlapping the last (1 column at a time only in a chunk
/// narrower than a block), so that the work runs with fixed-size, register-resident
/// accumulators.
#[inline(always)]
fn scan_blocks<T, K: ColumnScan<T, N>, R: Out<T>, const N: usize>(
    kernel: &K,
    columns: Range<usize>,
    rows: &mut [R; N],
) {
    let mut offset = 0;
    while offset + WIDEST_BLOCK <= columns.len()
        && kernel.scan_widest(columns.start + offset, offset, rows)
    {
        offset += WIDEST_BLOCK;
    }
    let wide = kernel.wide(crate::cpu::simd::isa());
    while wide && offset + WIDE_BLOCK <= columns.len() {
        kernel.scan::<WIDE_BLOCK, false, R>(columns.start + offset, offset, rows);
        offset += WIDE_BLOCK;
    }
    while offset + BLOCK <= columns.len() {
        kernel.scan::<BLOCK, false, R>(columns.start + offset, offset, rows);
        offset += BLOCK;
    }
    if ends_in_one_block::<T, K, R, N, BLOCK>(kernel, &columns, offset, rows) {
        return;
    }
    while offset + SMALL_BLOCK <= columns.len() {
        kernel.scan::<SMALL_BLOCK, false, R>(columns.start + offset, offset, rows);
        offset += SMALL_BLOCK;
    }
    if ends_in_one_block::<T, K, R, N, SMALL_BLOCK>(kernel, &columns, offset, rows) {
        return;
    }
    while offset < columns.len() {
        kernel.scan::<1, false, R>(columns.start + offset, offset, rows);
        offset += 1;
    }
}

/// Scans the columns left from `offset` as one block of `W` ending at the chunk's end, when
/// some are left and the chunk is that wide; returns whether it did. The block scans again
/// columns already done: they are independent, so the second scan writes the same bits,
/// and one more full block costs less than narrower, latency-bound scans of the rest
/// (measured, `[2048, 63]` GAE time-major: 145 us with the last 15 columns one at a time).
#[inline(always)]
fn ends_in_one_block<T, K: ColumnScan<T, N>, R: Out<T>, const N: usize, const W: usize>(
    kernel: &K,
    columns: &Range<usize>,
    offset: usize,
    rows: &mut [R; N],
) -> bool {
    let done = offset >= columns.len() || columns.len() < W;
    if !done {
        let last = columns.len() - W;
        kernel.scan::<W, false, R>(columns.start + last, last, rows);
    }
    !done
}

/// The job of [`scan_blocks`], for [`crate::cpu::simd::widest`]: columns are independent
/// and Rust never contracts `a + b * c` into an FMA, so every instruction set gives the
/// same bits.
struct ScanBlocks<'k, 'r, T, K, R, const N: usize> {
    kernel: &'k K,
    columns: Range<usize>,
    rows: &'r mut [R; N],
    element: PhantomData<fn() -> T>,
}

impl<T, K: ColumnScan<T, N>, R: Out<T>, const N: usize> crate::cpu::simd::Vectorized
    for ScanBlocks<'_, '_, T, K, R, N>
{
    type Output = ();
    #[inline(always)]
    fn run(self) {
        scan_blocks(self.kernel, self.columns, self.rows);
    }
}

fn scan_blocks_dispatch<T, K: ColumnScan<T, N>, R: Out<T>, const N: usize>(
    kernel: &K,
    columns: Range<usize>,
    rows: &mut [R; N],
) {
    crate::cpu::simd::widest(ScanBlocks {
        kernel,
        columns,
        rows,
        element: PhantomData,
    });
}

/// A task's columns and its row segments of every output.
type Segments<'a, T, const N: usize> = (Range<usize>, [Vec<&'a mut [T]>; N]);

/// Splits the columns of the time-major `[T, B]` outputs `outs` into one chunk per task,
/// hands each chunk its part of every output, and runs `kernel` over the chunks in
/// parallel. Chunks are a grain ([`crate::cpu::grain::Family::Recurrence`]) large and at least
/// [`MIN_TASK_COLUMNS`] wide (narrower ones would share cache lines of the outputs between
/// threads).
fn run_columns<T, K, const N: usize>(par: Par, layout: TimeMajor, outs: [&mut [T]; N], kernel: &K)
where
    T: Send + Copy + Default,
    K: ColumnScan<T, N>,
{
    if layout.is_empty() {
        return;
    }
    let tasks = par
        .for_work(layout.t.saturating_mul(layout.b), grain(Family::Recurrence))
        .threads();
    let width = layout
        .b
        .div_ceil(tasks)
        .next_multiple_of(SMALL_BLOCK)
        .max(MIN_TASK_COLUMNS);
    if width >= layout.b {
        let mut rows = outs.map(|data| Rows::Dense { data, b: layout.b });
        scan_blocks_dispatch(kernel, 0..layout.b, &mut rows);
        return;
    }
    let mut chunks: Vec<Segments<'_, T, N>> = (0..layout.b)
        .step_by(width)
        .map(|start| {
            (
                start..(start + width).min(layout.b),
                std::array::from_fn(|_| Vec::with_capacity(layout.t)),
            )
        })
        .collect();
    for (k, out) in outs.into_iter().enumerate() {
        for row in out.chunks_mut(layout.b) {
            let mut rest = row;
            for (columns, rows) in &mut chunks {
                let (segment, tail) = rest.split_at_mut(columns.len());
                rows[k].push(segment);
                rest = tail;
            }
        }
    }
    par.split(|| {
        chunks.into_par_iter().for_each(|(columns, rows)| {
            scan_blocks_dispatch(kernel, columns, &mut rows.map(Rows::Segments));
        })
    });
}

/// Splits batch-major outputs `outs` (`t` steps per column) at the consecutive column
/// `ranges` (from 0 to the last column) and runs `task` on each range with its part of
/// every output: inline for one range, split between `par`'s threads for several.
fn for_column_ranges<T: Send, const N: usize>(
    par: Par,
    t: usize,
    ranges: Vec<Range<usize>>,
    outs: [&mut [T]; N],
    task: impl Fn(Range<usize>, [&mut [T]; N]) + Sync,
) {
    let mut rest = outs.map(Some);
    let parts: Vec<(Range<usize>, [&mut [T]; N])> = ranges
        .into_iter()
        .map(|columns| {
            let part = std::array::from_fn(|k| {
                let (mine, after) = rest[k]
                    .take()
                    .expect("each output is split in order")
                    .split_at_mut(columns.len() * t);
                rest[k] = Some(after);
                mine
            });
            (columns, part)
        })
        .collect();
    if parts.len() == 1 {
        parts
            .into_iter()
            .for_each(|(columns, outs)| task(columns, outs));
    } else {
        par.split(|| {
            parts
                .into_par_iter()
                .for_each(|(columns, outs)| task(columns, outs))
        });
    }
}

/// `x[start..start + W]` as an array, so loops over it have a constant trip count.
#[inline(always)]
fn block<T: Copy, const W: usize>(x: &[T], start: usize) -> [T; W] {
    let elements: &[T; W] = x[start..start + W]
        .try_into()
        .expect("a slice of W elements converts to [T; W]");
    *elements
}

/// `&mut x[offset..offset + W]` as an array.
#[inline(always)]
fn block_mut<T, const W: usize>(x: &mut [T], offset: usize) -> &mut [T; W] {
    (&mut x[offset..offset + W])
        .try_into()
        .expect("a slice of W elements converts to [T; W]")
}

/// Checks that `t * b` fits in usize, every `[T, B]` buffer of `steps` has `t * b`
/// elements and every `[B]` one of `columns` has `b` (`(argument, length)` pairs); returns
/// `t * b`.
pub fn check_lengths(
    function: &'static str,
    layout: TimeMajor,
    steps: &[(&'static str, usize)],
    columns: &[(&'static str, usize)],
) -> Result<usize> {
    let len = layout.len().ok_or_else(|| {
        Error::shape(
            function,
            "layout",
            "t * b that fits in usize",
            format_args!("{} x {}", layout.t, layout.b),
        )
    })?;
    for &(name, got) in steps {
        if got != len {
            return Err(Error::shape(
                function,
                name,
                format_args!("{len} elements ([T, B] = [{}, {}])", layout.t, layout.b),
                format_args!("{got} elements"),
            ));
        }
    }
    for &(name, got) in columns {
        if got != layout.b {
            return Err(Error::shape(
                function,
                name,
                format_args!("{} elements ([B])", layout.b),
                format_args!("{got} elements"),
            ));
        }
    }
    Ok(len)
}

/// `Ok` unless the scan recorded in `invalid` a flag of `episodes` other than 0 or 1: then
/// an [`Error::Value`] naming the argument and the step and column of the first such
/// flag (found by [`FlagSlice::first_invalid`]; the outputs hold what the scan wrote).
fn check_flags<T: Float>(
    function: &'static str,
    storage: SliceLayout,
    episodes: SliceEpisodes<'_, T>,
    invalid: &AtomicBool,
) -> Result<()> {
    if !invalid.load(Ordering::Relaxed) {
        return Ok(());
    }
    let Episodes::Flags {
        terminated,
        truncation,
        ..
    } = episodes
    else {
        unreachable!("only flags record invalid values");
    };
    let flags = [
        ("terminated", Some(terminated)),
        ("truncated", truncation.map(|t| t.truncated)),
    ];
    let (argument, i, value) = flags
        .into_iter()
        .find_map(|(argument, flags)| {
            let (i, value) = flags?.first_invalid()?;
            Some((argument, i, value))
        })
        .expect("the scan recorded an invalid flag, which a search finds");
    Err(storage.invalid_flag(function, argument, i, value))
}

fn episode_lengths<T: Float>(episodes: &SliceEpisodes<'_, T>) -> Vec<(&'static str, usize)> {
    episodes.lengths(<[T]>::len, |flags| flags.len())
}

/// `G_t = r'_t + cut(d_t, d_t * G_{t+1})`, `G_T = bootstrap`: returns, and the primitive
/// itself.
struct ReturnsScan<'a, T, S> {
    layout: TimeMajor,
    order: ByStep,
    steps: &'a S,
    bootstrap: &'a [T],
}

impl<T: Float, S: Steps<T>> ColumnScan<T, 1> for ReturnsScan<'_, T, S> {
    const WIDE_FROM: Option<Isa> = Some(Isa::Baseline);
    #[inline(always)]
    fn scan<const W: usize, const CARRY: bool, R: Out<T>>(
        &self,
        first: usize,
        offset: usize,
        [rows]: &mut [R; 1],
    ) -> [T; W] {
        let mut acc: [T; W] = block(self.bootstrap, first);
        for t in (0..self.layout.t).rev() {
            let (r, d) = self.steps.block::<W>(self.order, t, first);
            let out = rows.block::<W>(t, offset);
            for k in 0..W {
                acc[k] = r[k] + cut(d[k], d[k] * acc[k]);
                out[k] = acc[k];
            }
            rows.flush::<W>(t, offset);
        }
        carried::<T, W, CARRY>(acc)
    }
}

/// The primitive `out[t] = x[t] + cut(c[t], c[t] * out[t+1])`, `out[T] = init`.
pub fn linear_recurrence<T: Float>(
    par: Par,
    layout: impl Into<SliceLayout>,
    x: &[T],
    c: &[T],
    init: &[T],
    out: &mut [T],
) -> Result<()> {
    let storage = layout.into();
    let layout = storage.shape();
    check_lengths(
        "linear_recurrence",
        layout,
        &[("x", x.len()), ("c", c.len()), ("out", out.len())],
        &[("init", init.len())],
    )?;
    // `x + c * y` is the returns step with r' = x and d = c; no flags, so nothing to check.
    let invalid = AtomicBool::new(false);
    let returns = Returns { bootstrap: init };
    run_estimator(
        par,
        storage,
        [x],
        Episodes::Discounts(c),
        [out],
        &returns,
        &invalid,
    );
    Ok(())
}

/// Discounted returns `G_t = r'_t + cut(d_t, d_t * G_{t+1})`, `G_T = bootstrap`.
pub fn discounted_returns<T: Float>(
    par: Par,
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    episodes: SliceEpisodes<'_, T>,
    bootstrap: &[T],
    returns: &mut [T],
) -> Result<()> {
    estimate(
        "discounted_returns",
        par,
        layout.into(),
        [("rewards", rewards)],
        episodes,
        [("returns", returns)],
        &[("bootstrap", bootstrap.len())],
        &Returns { bootstrap },
    )
}

struct GaeScan<'a, T, S> {
    layout: TimeMajor,
    order: ByStep,
    steps: &'a S,
    values: &'a [T],
    bootstrap: &'a [T],
    lambda: T,
    /// `A` after the last step, when a scan of later steps left one (else 0).
    init: Option<&'a [T]>,
}

impl<T: Float, S: Steps<T>> GaeScan<'_, T, S> {
    #[inline(always)]
    fn scan_into<const W: usize, const CARRY: bool, R: Out<T>>(
        &self,
        first: usize,
        offset: usize,
        advantages: &mut R,
        mut returns: Option<&mut R>,
    ) -> [T; W] {
        let mut acc = initial::<T, W, CARRY>(self.init, first, || [T::zero(); W]);
        let mut v_next: [T; W] = block(self.bootstrap, first);
        for t in (0..self.layout.t).rev() {
            let (r, d) = self.steps.block::<W>(self.order, t, first);
            let v: [T; W] = self.order.load(self.values, t, first);
            let adv = advantages.block::<W>(t, offset);
            for k in 0..W {
                let delta = (r[k] + cut(d[k], d[k] * v_next[k])) - v[k];
                acc[k] = delta + cut(d[k], (self.lambda * d[k]) * acc[k]);
                adv[k] = acc[k];
            }
            advantages.flush::<W>(t, offset);
            if let Some(returns) = returns.as_mut() {
                let ret = returns.block::<W>(t, offset);
                for k in 0..W {
                    ret[k] = acc[k] + v[k];
                }
                returns.flush::<W>(t, offset);
            }
            v_next = v;
        }
        carried::<T, W, CARRY>(acc)
    }
}

/// Advantages, and returns too when there is a second output.
impl<T: Float, S: Steps<T>, const N: usize> ColumnScan<T, N> for GaeScan<'_, T, S> {
    const WIDE_FROM: Option<Isa> = if N == 1 { Some(Isa::Avx512) } else { None };
    #[inline(always)]
    fn scan<const W: usize, const CARRY: bool, R: Out<T>>(
        &self,
        first: usize,
        offset: usize,
        rows: &mut [R; N],
    ) -> [T; W] {
        let (advantages, returns) = rows.split_first_mut().expect("GAE writes advantages");
        #[cfg(target_arch = "x86_64")]
        if !CARRY
            && self.written_advantages::<W, R>(
                crate::cpu::simd::isa(),
                first,
                offset,
                advantages,
                returns.first_mut(),
            )
        {
            return [T::zero(); W];
        }
        self.scan_into::<W, CARRY, R>(first, offset, advantages, returns.first_mut())
    }

    /// Also in blocks of 128 columns where [`avx2`] takes the scan: 40 against 57 us at
    /// `[128, 1024]` in blocks of 64 (one thread, f32 flags, this crate's machine capped at
    /// AVX2; `[2048, 64]`, one block of 64 either way, 26.5 us).
    fn wide(&self, isa: Isa) -> bool {
        #[cfg(target_arch = "x86_64")]
        if isa == Isa::Avx2 && self.written_gae(isa).is_some() {
            return true;
        }
        <Self as ColumnScan<T, N>>::WIDE_FROM.is_some_and(|from| isa >= from)
    }

    /// Blocks of 256 columns where [`avx512::advantages`] takes the scan: 35.7 against
    /// 44.7 us at `[128, 1024]` (one thread, f32 flags, best of 9 alternating processes).
    fn scan_widest<R: Out<T>>(&self, first: usize, offset: usize, rows: &mut [R; N]) -> bool {
        #[cfg(target_arch = "x86_64")]
        if crate::cpu::simd::isa() == Isa::Avx512 {
            let (advantages, returns) = rows.split_first_mut().expect("GAE writes advantages");
            return self.written_advantages::<WIDEST_BLOCK, R>(
                Isa::Avx512,
                first,
                offset,
                advantages,
                returns.first_mut(),
            );
        }
        let _ = (first, offset, rows);
        false
    }
}

#[cfg(target_arch = "x86_64")]
impl<T: Float, S: Steps<T>> GaeScan<'_, T, S> {
    /// The inputs of [`avx2::advantages`] or [`avx512::advantages`], when one takes this
    /// scan at `isa`: `f32`, episodes given by termination flags or a constant gamma.
    fn written_gae(&self, isa: Isa) -> Option<(GaeF32<'_>, Option<&AtomicBool>)> {
        if isa == Isa::Baseline {
            return None;
        }
        let inputs = [self.values, self.bootstrap];
        GaeF32::of(self.layout, self.steps, inputs, self.lambda)
    }

    /// [`avx2::advantages`] or [`avx512::advantages`] (by `isa`, which the CPU has) on columns
    /// `first..first + W`, where [`Self::written_gae`] says one takes the scan and `W` is
    /// a whole number of its vectors; false (nothing done) elsewhere.
    #[inline(always)]
    fn written_advantages<const W: usize, R: Out<T>>(
        &self,
        isa: Isa,
        first: usize,
        offset: usize,
        advantages: &mut R,
        returns: Option<&mut R>,
    ) -> bool {
        // Narrower blocks stay with the generic scan at AVX-512: at `[2048, 64]` its 64
        // columns took 24.1 us, the kernel's 26.6 us (one thread, f32 flags). Decided
        // before the inputs are gathered: every block of every scan asks.
        let takes = match isa {
            Isa::Avx512 => W == WIDEST_BLOCK,
            Isa::Avx2 => W.is_multiple_of(8),
            Isa::Baseline => false,
        };
        let Some((gae, invalid)) = takes.then(|| self.written_gae(isa)).flatten() else {
            return false;
        };
        // SAFETY: `isa` is one the CPU has (the callers pass `simd::isa`).
        let bad = unsafe {
            if isa == Isa::Avx512 {
                avx512::advantages::<W, T, R>(&gae, first, offset, advantages, returns)
            } else {
                avx2::advantages::<W, T, R>(&gae, first, offset, advantages, returns)
            }
        };
        record_invalid(bad, invalid);
        true
    }
}

/// GAE: `delta_t = (r'_t + cut(d_t, d_t * v_{t+1})) - v_t`,
/// `A_t = delta_t + cut(d_t, (lambda * d_t) * A_{t+1})`, and, when `returns` is given,
/// `returns = A + v` (rlax and TorchRL compute advantages
/// only; leaving the returns out saves a quarter of the memory traffic).
#[allow(clippy::too_many_arguments)]
pub fn gae<T: Float>(
    par: Par,
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    values: &[T],
    bootstrap: &[T],
    episodes: SliceEpisodes<'_, T>,
    lambda: T,
    advantages: &mut [T],
    returns: Option<&mut [T]>,
) -> Result<()> {
    let storage = layout.into();
    let inputs = [("rewards", rewards), ("values", values)];
    let columns = [("bootstrap", bootstrap.len())];
    let estimator = Gae { bootstrap, lambda };
    let advantages = ("advantages", advantages);
    match returns {
        Some(returns) => {
            let outs = [advantages, ("returns", returns)];
            estimate(
                "gae", par, storage, inputs, episodes, outs, &columns, &estimator,
            )
        }
        None => estimate(
            "gae",
            par,
            storage,
            inputs,
            episodes,
            [advantages],
            &columns,
            &estimator,
        ),
    }
}

struct LambdaScan<'a, T, S> {
    layout: TimeMajor,
    order: ByStep,
    steps: &'a S,
    next_values: &'a [T],
    lambda: T,
    /// `G` after the last step, when a scan of later steps left one (else `nv_{T-1}`).
    init: Option<&'a [T]>,
}

impl<T: Float, S: Steps<T>> ColumnScan<T, 1> for LambdaScan<'_, T, S> {
    const WIDE_FROM: Option<Isa> = Some(Isa::Baseline);
    #[inline(always)]
    fn scan<const W: usize, const CARRY: bool, R: Out<T>>(
        &self,
        first: usize,
        offset: usize,
        [rows]: &mut [R; 1],
    ) -> [T; W] {
        let one_minus_lambda = T::one() - self.lambda;
        let mut acc: [T; W] = initial::<T, W, CARRY>(self.init, first, || {
            self.order.load(self.next_values, self.layout.t - 1, first)
        });
        for t in (0..self.layout.t).rev() {
            let (r, d) = self.steps.block::<W>(self.order, t, first);
            let nv: [T; W] = self.order.load(self.next_values, t, first);
            let out = rows.block::<W>(t, offset);
            for k in 0..W {
                acc[k] = (r[k] + cut(d[k], d[k] * (one_minus_lambda * nv[k])))
                    + cut(d[k], (d[k] * self.lambda) * acc[k]);
                out[k] = acc[k];
            }
            rows.flush::<W>(t, offset);
        }
        carried::<T, W, CARRY>(acc)
    }
}

/// TD(lambda): `G_t = (r'_t + cut(d_t, d_t * ((1 - lambda) * nv_t)))
/// + cut(d_t, (d_t * lambda) * G_{t+1})`, `G_T = nv_{T-1}`.
pub fn lambda_returns<T: Float>(
    par: Par,
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    next_values: &[T],
    episodes: SliceEpisodes<'_, T>,
    lambda: T,
    returns: &mut [T],
) -> Result<()> {
    estimate(
        "lambda_returns",
        par,
        layout.into(),
        [("rewards", rewards), ("next_values", next_values)],
        episodes,
        [("returns", returns)],
        &[],
        &Lambda { lambda },
    )
}

struct NStepScan<'a, T, S> {
    layout: TimeMajor,
    order: ByStep,
    steps: &'a S,
    next_values: &'a [T],
    n: usize,
}

impl<T: Float, S: Steps<T>> ColumnScan<T, 1> for NStepScan<'_, T, S> {
    const WIDE_FROM: Option<Isa> = None;
    #[inline(always)]
    /// Returns zeros: n-step returns carry nothing from later steps (the batch-major
    /// driver stages the `n - 1` steps after a chunk with it instead).
    fn scan<const W: usize, const CARRY: bool, R: Out<T>>(
        &self,
        first: usize,
        offset: usize,
        [rows]: &mut [R; 1],
    ) -> [T; W] {
        for t in 0..self.layout.t {
            let last = t.saturating_add(self.n - 1).min(self.layout.t - 1);
            let mut acc: [T; W] = self.order.load(self.next_values, last, first);
            for j in (t..=last).rev() {
                let (r, d) = self.steps.block::<W>(self.order, j, first);
                for k in 0..W {
                    acc[k] = r[k] + cut(d[k], d[k] * acc[k]);
                }
            }
            *rows.block::<W>(t, offset) = acc;
            rows.flush::<W>(t, offset);
        }
        [T::zero(); W]
    }
}

/// n-step returns: `acc = nv_k` with `k = min(t + n - 1, T - 1)`, then
/// `acc = r'_j + cut(d_j, d_j * acc)` for `j = k, ..., t`.
pub fn n_step_returns<T: Float>(
    par: Par,
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    next_values: &[T],
    episodes: SliceEpisodes<'_, T>,
    n: usize,
    returns: &mut [T],
) -> Result<()> {
    if n == 0 {
        return Err(Error::value("n_step_returns", "n", "n >= 1", n));
    }
    estimate(
        "n_step_returns",
        par,
        layout.into(),
        [("rewards", rewards), ("next_values", next_values)],
        episodes,
        [("returns", returns)],
        &[],
        &NStep { n },
    )
}

struct VtraceScan<'a, T, S> {
    layout: TimeMajor,
    order: ByStep,
    steps: &'a S,
    values: &'a [T],
    bootstrap: &'a [T],
    rhos: &'a [T],
    params: VtraceParams<T>,
    /// `e` after the last step, when a scan of later steps left one (else 0; the last step
    /// then has no next one).
    init: Option<&'a [T]>,
}

impl<T: Float, S: Steps<T>> ColumnScan<T, 2> for VtraceScan<'_, T, S> {
    const WIDE_FROM: Option<Isa> = None;
    #[inline(always)]
    fn scan<const W: usize, const CARRY: bool, R: Out<T>>(
        &self,
        first: usize,
        offset: usize,
        [vs_rows, pg_rows]: &mut [R; 2],
    ) -> [T; W] {
        let VtraceParams {
            lambda,
            clip_rho,
            clip_pg_rho,
        } = self.params;
        let one_minus_lambda = T::one() - lambda;
        // acc holds e_{t+1} at the top of each step.
        let mut acc = initial::<T, W, CARRY>(self.init, first, || [T::zero(); W]);
        let mut v_next: [T; W] = block(self.bootstrap, first);
        for t in (0..self.layout.t).rev() {
            let (r, d) = self.steps.block::<W>(self.order, t, first);
            let v: [T; W] = self.order.load(self.values, t, first);
            let rho: [T; W] = self.order.load(self.rhos, t, first);
            let has_next = t + 1 < self.layout.t || (CARRY && self.init.is_some());
            let vs = vs_rows.block::<W>(t, offset);
            let pg = pg_rows.block::<W>(t, offset);
            for k in 0..W {
                let (r, d) = (r[k], d[k]);
                let q = if has_next {
                    let vs_next = v_next[k] + acc[k];
                    r + cut(d, d * (lambda * vs_next + one_minus_lambda * v_next[k]))
                } else {
                    r + cut(d, d * v_next[k])
                };
                let td = reduce::min2(clip_rho, rho[k]) * ((r + cut(d, d * v_next[k])) - v[k]);
                let trace = cut(d, (d * (reduce::min2(T::one(), rho[k]) * lambda)) * acc[k]);
                acc[k] = td + trace;
                vs[k] = v[k] + acc[k];
                pg[k] = reduce::min2(clip_pg_rho, rho[k]) * (q - v[k]);
            }
            vs_rows.flush::<W>(t, offset);
            pg_rows.flush::<W>(t, offset);
            v_next = v;
        }
        carried::<T, W, CARRY>(acc)
    }
}

/// V-trace value targets and policy-gradient advantages (formulas in
/// [`crate::kernels::recurrence`]).
#[allow(clippy::too_many_arguments)]
pub fn vtrace<T: Float>(
    par: Par,
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    values: &[T],
    bootstrap: &[T],
    rhos: &[T],
    episodes: SliceEpisodes<'_, T>,
    params: VtraceParams<T>,
    vs: &mut [T],
    pg_advantages: &mut [T],
) -> Result<()> {
    estimate(
        "vtrace",
        par,
        layout.into(),
        [("rewards", rewards), ("values", values), ("rhos", rhos)],
        episodes,
        [("vs", vs), ("pg_advantages", pg_advantages)],
        &[("bootstrap", bootstrap.len())],
        &Vtrace { bootstrap, params },
    )
}

/// The job of [`scan_tile`], for [`crate::cpu::simd::widest`].
struct ScanTile<'k, 'r, 'o, T, K, const N: usize, const W: usize> {
    kernel: &'k K,
    rows: &'r mut [Rows<'o, T>; N],
}

impl<T, K: ColumnScan<T, N>, const N: usize, const W: usize> crate::cpu::simd::Vectorized
    for ScanTile<'_, '_, '_, T, K, N, W>
{
    type Output = [T; W];
    #[inline(always)]
    fn run(self) -> [T; W] {
        self.kernel.scan::<W, true, _>(0, 0, self.rows)
    }
}

/// `kernel` over the `W` columns of a staged chunk, in a function of its own per
/// kernel and kind of episodes: inlined into one function with the staging and the other
/// kinds, LLVM kept the accumulators in memory (stored by scatters at every step, which
/// made the scan twice as slow as a time-major one).
fn scan_tile<T, K: ColumnScan<T, N>, const N: usize, const W: usize>(
    kernel: &K,
    rows: &mut [Rows<'_, T>; N],
) -> [T; W] {
    crate::cpu::simd::widest(ScanTile::<T, K, N, W> { kernel, rows })
}

/// One estimator, as the Cpu runs it: its kernel built over any inputs of its layout, so
/// that the time-major scans ([`run_columns`]) and the batch-major driver's chunks
/// ([`tiles`]) run the same kernel from one definition.
trait Estimator<T: Float, const K: usize, const N: usize>: Sync {
    /// The steps after a chunk its kernel reads (n-step returns: `n - 1`).
    fn lookahead(&self) -> usize {
        0
    }
    /// The `[B]` input that starts a scan of every step (`bootstrap`), if it takes one.
    fn bootstrap(&self) -> &[T] {
        &[]
    }
    /// What starts the scan of `chunk` in place of [`Estimator::bootstrap`]: its columns
    /// of it for the chunk that ends at the last step, what the chunk after it left
    /// otherwise.
    fn chunk_bootstrap<const W: usize>(&self, chunk: &Chunk<'_, T, K, W>) -> [T; W] {
        let _ = chunk;
        [T::zero(); W]
    }
    /// Runs the estimator over batch-major data (`layout`): staged in time-major tiles
    /// ([`tiles`]), unless it has a linear form ([`run_linear`]).
    fn batch_major(
        &self,
        par: Par,
        layout: TimeMajor,
        inputs: [&[T]; K],
        episodes: SliceEpisodes<'_, T>,
        outs: [&mut [T]; N],
        invalid: &AtomicBool,
    ) where
        Self: Sized,
    {
        let chunks = Chunked {
            estimator: self,
            invalid,
        };
        tiles::run(par, layout, inputs, episodes, outs, &chunks);
    }
    /// The kernel over `inputs` (`[T, B]` as `layout` says), with `steps` formed from
    /// `inputs[0]` and the episodes, starting from `bootstrap` and `init`.
    fn kernel<'k, S: Steps<T> + 'k>(
        &'k self,
        inputs: [&'k [T]; K],
        steps: &'k S,
        layout: TimeMajor,
        bootstrap: &'k [T],
        init: Option<&'k [T]>,
    ) -> impl ColumnScan<T, N> + 'k;
}

/// What every estimator's slice-level function does, named as `function`'s: checks the
/// lengths of the `[T, B]` arrays (the named `inputs`, then `outs`, then the episodes') and
/// of the `[B]` ones (`columns`), runs `estimator` with `par` on data stored as the
/// layout says, and refuses flags other than 0 or 1.
#[allow(clippy::too_many_arguments)]
fn estimate<T: Float, const K: usize, const N: usize, E: Estimator<T, K, N>>(
    function: &'static str,
    par: Par,
    storage: SliceLayout,
    inputs: [(&'static str, &[T]); K],
    episodes: SliceEpisodes<'_, T>,
    outs: [(&'static str, &mut [T]); N],
    columns: &[(&'static str, usize)],
    estimator: &E,
) -> Result<()> {
    let mut lengths: Vec<(&'static str, usize)> =
        inputs.iter().map(|(name, x)| (*name, x.len())).collect();
    lengths.extend(outs.iter().map(|(name, x)| (*name, x.len())));
    lengths.extend(episode_lengths(&episodes));
    check_lengths(function, storage.shape(), &lengths, columns)?;
    let invalid = AtomicBool::new(false);
    run_estimator(
        par,
        storage,
        inputs.map(|(_, x)| x),
        episodes,
        outs.map(|(_, x)| x),
        estimator,
        &invalid,
    );
    check_flags(function, storage, episodes, &invalid)
}

/// Runs `estimator` over `[T, B]` data stored as `storage` says: `inputs` (the first the
/// rewards) and `episodes` read, `outs` written; flags other than 0 or 1 set `invalid`.
fn run_estimator<T: Float, const K: usize, const N: usize, E: Estimator<T, K, N>>(
    par: Par,
    storage: SliceLayout,
    inputs: [&[T]; K],
    episodes: SliceEpisodes<'_, T>,
    outs: [&mut [T]; N],
    estimator: &E,
    invalid: &AtomicBool,
) {
    let layout = storage.shape();
    if storage.is_batch_major() {
        estimator.batch_major(par, layout, inputs, episodes, outs, invalid);
    } else {
        with_steps!(inputs[0], episodes, invalid, |steps| {
            let kernel = estimator.kernel(inputs, &steps, layout, estimator.bootstrap(), None);
            run_columns(par, layout, outs, &kernel);
        });
    }
}

/// An [`Estimator`] run a staged chunk at a time ([`tiles`]).
struct Chunked<'a, E> {
    estimator: &'a E,
    invalid: &'a AtomicBool,
}

impl<T: Float, const K: usize, const N: usize, E: Estimator<T, K, N>> ChunkScan<T, K, N>
    for Chunked<'_, E>
{
    fn lookahead(&self) -> usize {
        self.estimator.lookahead()
    }

    #[inline(always)]
    fn scan<const W: usize>(
        &self,
        chunk: &Chunk<'_, T, K, W>,
        outputs: &mut [Rows<'_, T>; N],
    ) -> [T; W] {
        let bootstrap = self.estimator.chunk_bootstrap(chunk);
        let init = chunk.carry.map(|carry| &carry[..]);
        with_steps!(chunk.inputs[0], chunk.episodes, self.invalid, |steps| {
            let kernel =
                self.estimator
                    .kernel(chunk.inputs, &steps, chunk.layout, &bootstrap, init);
            scan_tile(&kernel, outputs)
        })
    }
}

/// The [`Estimator::batch_major`] of an estimator with a linear form, `K` inputs and `N`
/// outputs: [`run_linear`].
macro_rules! linear_batch_major {
    ($k:tt, $n:tt) => {
        fn batch_major(
            &self,
            par: Par,
            layout: TimeMajor,
            inputs: [&[T]; $k],
            episodes: SliceEpisodes<'_, T>,
            outs: [&mut [T]; $n],
            invalid: &AtomicBool,
        ) {
            run_linear(self, par, layout, inputs, episodes, outs, invalid);
        }
    };
}

/// [`Estimator::batch_major`] for an estimator with a linear form: its batch-major data
/// scanned where they lie ([`rows`]) when they are at least a vector wide and long, in
/// tiles otherwise.
fn run_linear<T, const K: usize, const N: usize, E>(
    estimator: &E,
    par: Par,
    layout: TimeMajor,
    inputs: [&[T]; K],
    episodes: SliceEpisodes<'_, T>,
    outs: [&mut [T]; N],
    invalid: &AtomicBool,
) where
    T: Float,
    E: Estimator<T, K, N> + rows::Linear<T, K, N>,
{
    let isa = crate::cpu::simd::isa();
    if rows::fits::<T>(isa, layout) {
        rows::run(par, isa, layout, inputs, episodes, outs, estimator, invalid);
    } else {
        let chunks = Chunked { estimator, invalid };
        tiles::run(par, layout, inputs, episodes, outs, &chunks);
    }
}

/// The returns recurrence (and the primitive, with `x` as rewards and `c` as discounts).
#[derive(Clone, Copy)]
struct Returns<'a, T> {
    bootstrap: &'a [T],
}

impl<T: Float> Estimator<T, 1, 1> for Returns<'_, T> {
    linear_batch_major!(1, 1);

    fn bootstrap(&self) -> &[T] {
        self.bootstrap
    }

    /// The returns after the chunk: its accumulators.
    fn chunk_bootstrap<const W: usize>(&self, chunk: &Chunk<'_, T, 1, W>) -> [T; W] {
        chunk
            .carry
            .copied()
            .unwrap_or_else(|| chunk.columns_of(self.bootstrap))
    }

    fn kernel<'k, S: Steps<T> + 'k>(
        &'k self,
        _: [&'k [T]; 1],
        steps: &'k S,
        layout: TimeMajor,
        bootstrap: &'k [T],
        _: Option<&'k [T]>,
    ) -> impl ColumnScan<T, 1> + 'k {
        ReturnsScan {
            layout,
            order: ByStep { b: layout.b },
            steps,
            bootstrap,
        }
    }
}

impl<T: Float> rows::Linear<T, 1, 1> for Returns<'_, T> {
    fn init(&self, _: [&[T]; 1], _: usize, j: usize) -> T {
        self.bootstrap[j]
    }

    #[inline(always)]
    fn factor(&self, d: T) -> T {
        d
    }

    /// `x = r'`, `m = d`.
    #[inline(always)]
    fn terms<S: Steps<T>, const L: usize>(
        &self,
        steps: &S,
        _: [&[T]; 1],
        t: usize,
        j: usize,
        t0: usize,
    ) -> rows::Row<T, L> {
        let (r, d) = steps.block::<L>(ByStep::ALONG_COLUMNS, t0, j * t);
        rows::Row { x: r, m: d, d }
    }
}

/// `v_{t+1}` at a chunk's last step: the values' step after it, or `bootstrap`'s columns
/// for the chunk that ends at the last step.
fn next_values<T: Float, const K: usize, const W: usize>(
    chunk: &Chunk<'_, T, K, W>,
    bootstrap: &[T],
) -> [T; W] {
    match chunk.carry {
        Some(_) => chunk.step_after(1),
        None => chunk.columns_of(bootstrap),
    }
}

#[derive(Clone, Copy)]
struct Gae<'a, T> {
    bootstrap: &'a [T],
    lambda: T,
}

impl<T: Float, const N: usize> Estimator<T, 2, N> for Gae<'_, T> {
    linear_batch_major!(2, N);

    fn bootstrap(&self) -> &[T] {
        self.bootstrap
    }

    fn chunk_bootstrap<const W: usize>(&self, chunk: &Chunk<'_, T, 2, W>) -> [T; W] {
        next_values(chunk, self.bootstrap)
    }

    fn kernel<'k, S: Steps<T> + 'k>(
        &'k self,
        [_, values]: [&'k [T]; 2],
        steps: &'k S,
        layout: TimeMajor,
        bootstrap: &'k [T],
        init: Option<&'k [T]>,
    ) -> impl ColumnScan<T, N> + 'k {
        GaeScan {
            layout,
            order: ByStep { b: layout.b },
            steps,
            values,
            bootstrap,
            lambda: self.lambda,
            init,
        }
    }
}

impl<T: Float, const N: usize> rows::Linear<T, 2, N> for Gae<'_, T> {
    fn init(&self, _: [&[T]; 2], _: usize, _: usize) -> T {
        T::zero()
    }

    #[inline(always)]
    fn factor(&self, d: T) -> T {
        self.lambda * d
    }

    /// GAE's advantages, and its returns where asked ([`avx512::rows_gae`],
    /// [`avx2::rows_advantages`]), at AVX-512 or AVX2, `f32`, episodes given by termination
    /// flags or a constant gamma, whole cache lines of steps.
    #[cfg(target_arch = "x86_64")]
    fn written<S: Steps<T>>(
        &self,
        isa: Isa,
        steps: &S,
        [_, values]: [&[T]; 2],
        layout: TimeMajor,
        columns: Range<usize>,
        outs: &mut [&mut [T]; N],
    ) -> bool {
        let kernel = match isa {
            Isa::Avx512 if avx512::takes(layout.t, layout.b) => avx512::rows_gae,
            Isa::Avx2 if avx2::rows_take(layout.t, layout.b) => avx2::rows_advantages,
            _ => return false,
        };
        let inputs = [values, self.bootstrap];
        let Some((gae, invalid)) = GaeF32::of(layout, steps, inputs, self.lambda) else {
            return false;
        };
        // `T` is `f32` (`GaeF32::of` answered), so the outputs are too.
        let (advantages, returns) = outs.split_first_mut().expect("GAE writes advantages");
        let advantages = as_f32_mut(advantages).expect("the outputs are f32");
        let returns = returns
            .first_mut()
            .map(|r| as_f32_mut(r).expect("the outputs are f32"));
        // SAFETY: the CPU has the kernel's instruction set (`isa` is one it supports).
        let bad = unsafe { kernel(&gae, columns, advantages, returns) };
        record_invalid(bad, invalid);
        true
    }

    /// `x = delta`, `m = lambda * d`.
    #[inline(always)]
    fn terms<S: Steps<T>, const L: usize>(
        &self,
        steps: &S,
        [_, values]: [&[T]; 2],
        t: usize,
        j: usize,
        t0: usize,
    ) -> rows::Row<T, L> {
        let (r, d) = steps.block::<L>(ByStep::ALONG_COLUMNS, t0, j * t);
        let v: [T; L] = ByStep::ALONG_COLUMNS.load(values, t0, j * t);
        // One vector load either way: from the column where the next step lies in it
        // (every block but the last), else from a copy of the block's last steps and the
        // bootstrap value. (A vector shifted by one element in registers became loads of
        // pieces and shuffles.)
        let mut last = [T::zero(); L];
        let v_next: [T; L] = if t0 + L < t {
            ByStep::ALONG_COLUMNS.load(values, t0 + 1, j * t)
        } else {
            last[..L - 1].copy_from_slice(&v[1..]);
            last[L - 1] = self.bootstrap[j];
            last
        };
        let (mut x, mut m) = ([T::zero(); L], [T::zero(); L]);
        for s in 0..L {
            x[s] = (r[s] + cut(d[s], d[s] * v_next[s])) - v[s];
            m[s] = rows::Linear::<T, 2, N>::factor(self, d[s]);
        }
        rows::Row { x, m, d }
    }

    /// The advantages (output 0), and the returns `A + v` (output 1).
    #[inline(always)]
    fn output<const L: usize>(
        &self,
        k: usize,
        acc: &[T; L],
        [_, values]: [&[T]; 2],
        t: usize,
        j: usize,
        t0: usize,
    ) -> [T; L] {
        if k == 0 {
            return *acc;
        }
        let v: [T; L] = ByStep::ALONG_COLUMNS.load(values, t0, j * t);
        let mut returns = [T::zero(); L];
        for s in 0..L {
            returns[s] = acc[s] + v[s];
        }
        returns
    }
}

#[derive(Clone, Copy)]
struct Lambda<T> {
    lambda: T,
}

impl<T: Float> Estimator<T, 2, 1> for Lambda<T> {
    linear_batch_major!(2, 1);

    fn kernel<'k, S: Steps<T> + 'k>(
        &'k self,
        [_, next_values]: [&'k [T]; 2],
        steps: &'k S,
        layout: TimeMajor,
        _: &'k [T],
        init: Option<&'k [T]>,
    ) -> impl ColumnScan<T, 1> + 'k {
        LambdaScan {
            layout,
            order: ByStep { b: layout.b },
            steps,
            next_values,
            lambda: self.lambda,
            init,
        }
    }
}

impl<T: Float> rows::Linear<T, 2, 1> for Lambda<T> {
    fn init(&self, [_, next_values]: [&[T]; 2], t: usize, j: usize) -> T {
        next_values[j * t + t - 1]
    }

    #[inline(always)]
    fn factor(&self, d: T) -> T {
        d * self.lambda
    }

    /// `x = r' + cut(d, d * ((1 - lambda) * nv))`, `m = d * lambda`.
    #[inline(always)]
    fn terms<S: Steps<T>, const L: usize>(
        &self,
        steps: &S,
        [_, next_values]: [&[T]; 2],
        t: usize,
        j: usize,
        t0: usize,
    ) -> rows::Row<T, L> {
        let one_minus_lambda = T::one() - self.lambda;
        let (r, d) = steps.block::<L>(ByStep::ALONG_COLUMNS, t0, j * t);
        let nv: [T; L] = ByStep::ALONG_COLUMNS.load(next_values, t0, j * t);
        let (mut x, mut m) = ([T::zero(); L], [T::zero(); L]);
        for s in 0..L {
            x[s] = r[s] + cut(d[s], d[s] * (one_minus_lambda * nv[s]));
            m[s] = rows::Linear::<T, 2, 1>::factor(self, d[s]);
        }
        rows::Row { x, m, d }
    }
}

struct NStep {
    n: usize,
}

impl<T: Float> Estimator<T, 2, 1> for NStep {
    fn lookahead(&self) -> usize {
        self.n - 1
    }

    fn kernel<'k, S: Steps<T> + 'k>(
        &'k self,
        [_, next_values]: [&'k [T]; 2],
        steps: &'k S,
        layout: TimeMajor,
        _: &'k [T],
        _: Option<&'k [T]>,
    ) -> impl ColumnScan<T, 1> + 'k {
        NStepScan {
            layout,
            order: ByStep { b: layout.b },
            steps,
            next_values,
            n: self.n,
        }
    }
}

struct Vtrace<'a, T> {
    bootstrap: &'a [T],
    params: VtraceParams<T>,
}

impl<T: Float> Estimator<T, 3, 2> for Vtrace<'_, T> {
    fn bootstrap(&self) -> &[T] {
        self.bootstrap
    }

    fn chunk_bootstrap<const W: usize>(&self, chunk: &Chunk<'_, T, 3, W>) -> [T; W] {
        next_values(chunk, self.bootstrap)
    }

    fn kernel<'k, S: Steps<T> + 'k>(
        &'k self,
        [_, values, rhos]: [&'k [T]; 3],
        steps: &'k S,
        layout: TimeMajor,
        bootstrap: &'k [T],
        init: Option<&'k [T]>,
    ) -> impl ColumnScan<T, 2> + 'k {
        VtraceScan {
            layout,
            order: ByStep { b: layout.b },
            steps,
            values,
            bootstrap,
            rhos,
            params: self.params,
            init,
        }
    }
}

mod device {
    use super::super::Cpu;
    use crate::kernels::recurrence::{
        Episodes, FlagSlice, RecurrenceKernel, SliceEpisodes, TimeMajor, VtraceParams,
    };
    use crate::{Float, Result};

    fn slices<'a, T: Float>(episodes: Episodes<'a, Vec<T>, T>) -> SliceEpisodes<'a, T> {
        episodes.map(Vec::as_slice, |flags| FlagSlice::Values(flags))
    }

    impl<T: Float> RecurrenceKernel<T> for Cpu {
        fn linear_recurrence(
            &self,
            layout: TimeMajor,
            x: &Vec<T>,
            c: &Vec<T>,
            init: &Vec<T>,
            out: &mut Vec<T>,
        ) -> Result<()> {
            super::linear_recurrence(self.par(), layout, x, c, init, out)
        }

        fn discounted_returns(
            &self,
            layout: TimeMajor,
            rewards: &Vec<T>,
            episodes: Episodes<'_, Vec<T>, T>,
            bootstrap: &Vec<T>,
            returns: &mut Vec<T>,
        ) -> Result<()> {
            super::discounted_returns(
                self.par(),
                layout,
                rewards,
                slices(episodes),
                bootstrap,
                returns,
            )
        }

        fn gae(
            &self,
            layout: TimeMajor,
            rewards: &Vec<T>,
            values: &Vec<T>,
            bootstrap: &Vec<T>,
            episodes: Episodes<'_, Vec<T>, T>,
            lambda: T,
            advantages: &mut Vec<T>,
            returns: Option<&mut Vec<T>>,
        ) -> Result<()> {
            super::gae(
                self.par(),
                layout,
                rewards,
                values,
                bootstrap,
                slices(episodes),
                lambda,
                advantages,
                returns.map(Vec::as_mut_slice),
            )
        }

        fn lambda_returns(
            &self,
            layout: TimeMajor,
            rewards: &Vec<T>,
            next_values: &Vec<T>,
            episodes: Episodes<'_, Vec<T>, T>,
            lambda: T,
            returns: &mut Vec<T>,
        ) -> Result<()> {
            super::lambda_returns(
                self.par(),
                layout,
                rewards,
                next_values,
                slices(episodes),
                lambda,
                returns,
            )
        }

        fn n_step_returns(
            &self,
            layout: TimeMajor,
            rewards: &Vec<T>,
            next_values: &Vec<T>,
            episodes: Episodes<'_, Vec<T>, T>,
            n: usize,
            returns: &mut Vec<T>,
        ) -> Result<()> {
            super::n_step_returns(
                self.par(),
                layout,
                rewards,
                next_values,
                slices(episodes),
                n,
                returns,
            )
        }

        fn vtrace(
            &self,
            layout: TimeMajor,
            rewards: &Vec<T>,
            values: &Vec<T>,
            bootstrap: &Vec<T>,
            rhos: &Vec<T>,
            episodes: Episodes<'_, Vec<T>, T>,
            params: VtraceParams<T>,
            vs: &mut Vec<T>,
            pg_advantages: &mut Vec<T>,
        ) -> Result<()> {
            super::vtrace(
                self.par(),
                layout,
                rewards,
                values,
                bootstrap,
                rhos,
                slices(episodes),
                params,
                vs,
                pg_advantages,
            )
        }
    }
}
