//! The Cpu reverse-recurrence kernels on plain slices (the slice level of
//! `rlgrad-returns`), following the canonical formulas of
//! [`crate::kernels::recurrence`].
//!
//! Columns are split into chunks (at least 16 wide, so the inner loops vectorize across
//! adjacent columns) and the chunks run in parallel; each column is scanned sequentially
//! in `t`. Columns never interact, so every chunking gives the same bits.

use crate::grain::{Family, grain};
use std::ops::Range;

use rayon::prelude::*;

use crate::kernels::recurrence::{
    Episodes, FlagSlice, SliceEpisodes, TimeMajor, VtraceParams, cut,
};
use crate::{Error, Float, Par, Result, reduce};

/// The effective rewards and discounts `(r'_t, d_t)` of the steps, one implementation per
/// kind of [`Episodes`] so that each scan is compiled (and vectorized) for its kind.
trait Steps<T>: Sync {
    /// `(r', d)` of the `W` consecutive steps starting at flat index `start`.
    fn block<const W: usize>(&self, start: usize) -> ([T; W], [T; W]);
}

struct Constant<'a, T> {
    rewards: &'a [T],
    gamma: T,
}
impl<T: Float> Steps<T> for Constant<'_, T> {
    #[inline(always)]
    fn block<const W: usize>(&self, start: usize) -> ([T; W], [T; W]) {
        (block(self.rewards, start), [self.gamma; W])
    }
}

struct Discounts<'a, T> {
    rewards: &'a [T],
    discounts: &'a [T],
}
impl<T: Float> Steps<T> for Discounts<'_, T> {
    #[inline(always)]
    fn block<const W: usize>(&self, start: usize) -> ([T; W], [T; W]) {
        (block(self.rewards, start), block(self.discounts, start))
    }
}

/// A flag element: set when nonzero (floats: NaN included).
trait Flag: Copy + Sync {
    fn is_set(self) -> bool;
}
impl<T: Float> Flag for T {
    #[inline(always)]
    fn is_set(self) -> bool {
        self != T::zero()
    }
}
impl Flag for u8 {
    #[inline(always)]
    fn is_set(self) -> bool {
        self != 0
    }
}

/// Whether each of the `W` flags from `start` is set.
#[inline(always)]
fn flags_set<T: Float, const W: usize>(flags: FlagSlice<'_, T>, start: usize) -> [bool; W] {
    match flags {
        FlagSlice::Values(v) => block::<T, W>(v, start).map(Flag::is_set),
        FlagSlice::Bytes(b) => block::<u8, W>(b, start).map(Flag::is_set),
    }
}

/// Terminations only, one implementation per flag element so that the common case (no
/// truncation) carries no per-block dispatch.
struct Terminations<'a, T, F> {
    rewards: &'a [T],
    terminated: &'a [F],
    gamma: T,
}
impl<T: Float, F: Flag> Steps<T> for Terminations<'_, T, F> {
    #[inline(always)]
    fn block<const W: usize>(&self, start: usize) -> ([T; W], [T; W]) {
        let terminated: [F; W] = block(self.terminated, start);
        let discounts = terminated.map(|flag| if flag.is_set() { T::zero() } else { self.gamma });
        (block(self.rewards, start), discounts)
    }
}

struct Truncations<'a, T> {
    rewards: &'a [T],
    terminated: FlagSlice<'a, T>,
    truncated: FlagSlice<'a, T>,
    final_values: &'a [T],
    gamma: T,
}
impl<T: Float> Steps<T> for Truncations<'_, T> {
    #[inline(always)]
    fn block<const W: usize>(&self, start: usize) -> ([T; W], [T; W]) {
        let rewards: [T; W] = block(self.rewards, start);
        let terminated: [bool; W] = flags_set(self.terminated, start);
        let truncated: [bool; W] = flags_set(self.truncated, start);
        let final_values: [T; W] = block(self.final_values, start);
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
}

/// Runs `$body` with `$steps` bound to the [`Steps`] implementation of `$episodes`.
macro_rules! with_steps {
    ($rewards:expr, $episodes:expr, |$steps:ident| $body:expr) => {
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
                };
                $body
            }
        }
    };
}

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

/// The rows of one output that belong to one chunk of columns.
enum Rows<'a, T> {
    /// The whole `[T, B]` output, when one chunk holds every column.
    Dense { data: &'a mut [T], b: usize },
    /// One row segment per step, when the columns are split between tasks.
    Segments(Vec<&'a mut [T]>),
}

impl<T> Rows<'_, T> {
    /// The `W` entries of step `t` starting `offset` columns into the chunk.
    #[inline(always)]
    fn block<const W: usize>(&mut self, t: usize, offset: usize) -> &mut [T; W] {
        match self {
            Self::Dense { data, b } => block_mut(data, t * *b + offset),
            Self::Segments(rows) => block_mut(rows[t], offset),
        }
    }
}

/// The scan of one estimator over `W` adjacent columns and every step: the unit of work
/// the driver hands out. `rows[k]` holds output `k`'s part of the current chunk, in which
/// column `first` sits at `offset`.
trait ColumnScan<T, const N: usize>: Sync {
    /// Whether the scan keeps few enough values per column that blocks of
    /// [`WIDE_BLOCK`] columns stay in registers (measured: yes for one output, no for two).
    const WIDE: bool;
    fn scan<const W: usize>(&self, first: usize, offset: usize, rows: &mut [Rows<'_, T>; N]);
}

/// Runs `kernel` over the columns of one chunk in blocks of 128 (for [`ColumnScan::WIDE`]
/// scans), then 64, 16 and 1 columns, so that most of the work runs with fixed-size,
/// register-resident accumulators.
#[inline(always)]
fn scan_blocks<T, K: ColumnScan<T, N>, const N: usize>(
    kernel: &K,
    columns: Range<usize>,
    rows: &mut [Rows<'_, T>; N],
) {
    let mut offset = 0;
    while K::WIDE && offset + WIDE_BLOCK <= columns.len() {
        kernel.scan::<WIDE_BLOCK>(columns.start + offset, offset, rows);
        offset += WIDE_BLOCK;
    }
    while offset + BLOCK <= columns.len() {
        kernel.scan::<BLOCK>(columns.start + offset, offset, rows);
        offset += BLOCK;
    }
    while offset + SMALL_BLOCK <= columns.len() {
        kernel.scan::<SMALL_BLOCK>(columns.start + offset, offset, rows);
        offset += SMALL_BLOCK;
    }
    while offset < columns.len() {
        kernel.scan::<1>(columns.start + offset, offset, rows);
        offset += 1;
    }
}

/// The job of [`scan_blocks`], for [`crate::simd::widest`]: columns are independent and
/// Rust never contracts `a + b * c` into an FMA, so every instruction set gives the same
/// bits.
struct ScanBlocks<'k, 'r, 'a, T, K, const N: usize> {
    kernel: &'k K,
    columns: Range<usize>,
    rows: &'r mut [Rows<'a, T>; N],
}

impl<T, K: ColumnScan<T, N>, const N: usize> crate::simd::Vectorized
    for ScanBlocks<'_, '_, '_, T, K, N>
{
    type Output = ();
    #[inline(always)]
    fn run(self) {
        scan_blocks(self.kernel, self.columns, self.rows);
    }
}

fn scan_blocks_dispatch<T, K: ColumnScan<T, N>, const N: usize>(
    kernel: &K,
    columns: Range<usize>,
    rows: &mut [Rows<'_, T>; N],
) {
    crate::simd::widest(ScanBlocks {
        kernel,
        columns,
        rows,
    });
}

/// A task's columns and its row segments of every output.
type Chunk<'a, T, const N: usize> = (Range<usize>, [Vec<&'a mut [T]>; N]);

/// Splits the columns of the `[T, B]` outputs `outs` into one chunk per task, hands each
/// chunk its rows of every output, and runs `kernel` over the chunks in parallel. Chunks
/// are at least [`MIN_TASK_COLUMNS`] wide (narrower ones would share cache lines of the
/// outputs between threads) and a grain ([`crate::grain::Family::Recurrence`]) large.
fn run_columns<T, K, const N: usize>(par: Par, layout: TimeMajor, outs: [&mut [T]; N], kernel: &K)
where
    T: Send,
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
    let mut chunks: Vec<Chunk<'_, T, N>> = (0..layout.b)
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
    chunks.into_par_iter().for_each(|(columns, rows)| {
        scan_blocks_dispatch(kernel, columns, &mut rows.map(Rows::Segments));
    });
}

/// `x[start..start + W]` as an array, so loops over it have a constant trip count.
#[inline(always)]
fn block<T: Copy, const W: usize>(x: &[T], start: usize) -> [T; W] {
    x[start..start + W]
        .try_into()
        .expect("a slice of W elements converts to [T; W]")
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

fn episode_lengths<T: Float>(episodes: &SliceEpisodes<'_, T>) -> Vec<(&'static str, usize)> {
    episodes.lengths(<[T]>::len, |flags| flags.len())
}

/// `G_t = r'_t + cut(d_t, d_t * G_{t+1})`, `G_T = bootstrap`: returns, and the primitive
/// itself.
struct ReturnsScan<'a, T, S> {
    layout: TimeMajor,
    steps: &'a S,
    bootstrap: &'a [T],
}

impl<T: Float, S: Steps<T>> ColumnScan<T, 1> for ReturnsScan<'_, T, S> {
    const WIDE: bool = true;
    #[inline(always)]
    fn scan<const W: usize>(&self, first: usize, offset: usize, [rows]: &mut [Rows<'_, T>; 1]) {
        let mut acc: [T; W] = block(self.bootstrap, first);
        for t in (0..self.layout.t).rev() {
            let (r, d) = self.steps.block::<W>(t * self.layout.b + first);
            let out = rows.block::<W>(t, offset);
            for k in 0..W {
                acc[k] = r[k] + cut(d[k], d[k] * acc[k]);
                out[k] = acc[k];
            }
        }
    }
}

/// The primitive `out[t] = x[t] + cut(c[t], c[t] * out[t+1])`, `out[T] = init`.
pub fn linear_recurrence<T: Float>(
    par: Par,
    layout: TimeMajor,
    x: &[T],
    c: &[T],
    init: &[T],
    out: &mut [T],
) -> Result<()> {
    check_lengths(
        "linear_recurrence",
        layout,
        &[("x", x.len()), ("c", c.len()), ("out", out.len())],
        &[("init", init.len())],
    )?;
    // `x + c * y` is the returns step with r' = x and d = c.
    let steps = Discounts {
        rewards: x,
        discounts: c,
    };
    let scan = ReturnsScan {
        layout,
        steps: &steps,
        bootstrap: init,
    };
    run_columns(par, layout, [out], &scan);
    Ok(())
}

/// Discounted returns `G_t = r'_t + cut(d_t, d_t * G_{t+1})`, `G_T = bootstrap`.
pub fn discounted_returns<T: Float>(
    par: Par,
    layout: TimeMajor,
    rewards: &[T],
    episodes: SliceEpisodes<'_, T>,
    bootstrap: &[T],
    returns: &mut [T],
) -> Result<()> {
    let mut lengths = vec![("rewards", rewards.len()), ("returns", returns.len())];
    lengths.extend(episode_lengths(&episodes));
    check_lengths(
        "discounted_returns",
        layout,
        &lengths,
        &[("bootstrap", bootstrap.len())],
    )?;
    with_steps!(rewards, episodes, |steps| {
        let scan = ReturnsScan {
            layout,
            steps: &steps,
            bootstrap,
        };
        run_columns(par, layout, [returns], &scan);
    });
    Ok(())
}

struct GaeScan<'a, T, S> {
    layout: TimeMajor,
    steps: &'a S,
    values: &'a [T],
    bootstrap: &'a [T],
    lambda: T,
}

impl<T: Float, S: Steps<T>> GaeScan<'_, T, S> {
    #[inline(always)]
    fn scan_into<const W: usize>(
        &self,
        first: usize,
        offset: usize,
        advantages: &mut Rows<'_, T>,
        mut returns: Option<&mut Rows<'_, T>>,
    ) {
        let (steps, b) = (self.layout.t, self.layout.b);
        let mut acc = [T::zero(); W];
        let mut v_next: [T; W] = block(self.bootstrap, first);
        for t in (0..steps).rev() {
            let base = t * b + first;
            let (r, d) = self.steps.block::<W>(base);
            let v: [T; W] = block(self.values, base);
            let adv = advantages.block::<W>(t, offset);
            for k in 0..W {
                let delta = (r[k] + cut(d[k], d[k] * v_next[k])) - v[k];
                acc[k] = delta + cut(d[k], (self.lambda * d[k]) * acc[k]);
                adv[k] = acc[k];
            }
            if let Some(returns) = returns.as_mut() {
                let ret = returns.block::<W>(t, offset);
                for k in 0..W {
                    ret[k] = acc[k] + v[k];
                }
            }
            v_next = v;
        }
    }
}

impl<T: Float, S: Steps<T>> ColumnScan<T, 1> for GaeScan<'_, T, S> {
    const WIDE: bool = true;
    #[inline(always)]
    fn scan<const W: usize>(&self, first: usize, offset: usize, [adv]: &mut [Rows<'_, T>; 1]) {
        self.scan_into::<W>(first, offset, adv, None);
    }
}

impl<T: Float, S: Steps<T>> ColumnScan<T, 2> for GaeScan<'_, T, S> {
    const WIDE: bool = false;
    #[inline(always)]
    fn scan<const W: usize>(&self, first: usize, offset: usize, [adv, ret]: &mut [Rows<'_, T>; 2]) {
        self.scan_into::<W>(first, offset, adv, Some(ret));
    }
}

/// GAE: `delta_t = (r'_t + cut(d_t, d_t * v_{t+1})) - v_t`,
/// `A_t = delta_t + cut(d_t, (lambda * d_t) * A_{t+1})`, and, when `returns` is given,
/// `returns = A + v` (rlax and TorchRL compute advantages
/// only; leaving the returns out saves a quarter of the memory traffic).
#[allow(clippy::too_many_arguments)]
pub fn gae<T: Float>(
    par: Par,
    layout: TimeMajor,
    rewards: &[T],
    values: &[T],
    bootstrap: &[T],
    episodes: SliceEpisodes<'_, T>,
    lambda: T,
    advantages: &mut [T],
    returns: Option<&mut [T]>,
) -> Result<()> {
    let mut lengths = vec![
        ("rewards", rewards.len()),
        ("values", values.len()),
        ("advantages", advantages.len()),
    ];
    if let Some(returns) = &returns {
        lengths.push(("returns", returns.len()));
    }
    lengths.extend(episode_lengths(&episodes));
    check_lengths("gae", layout, &lengths, &[("bootstrap", bootstrap.len())])?;
    with_steps!(rewards, episodes, |steps| {
        let scan = GaeScan {
            layout,
            steps: &steps,
            values,
            bootstrap,
            lambda,
        };
        match returns {
            Some(returns) => run_columns(par, layout, [advantages, returns], &scan),
            None => run_columns(par, layout, [advantages], &scan),
        }
    });
    Ok(())
}

struct LambdaScan<'a, T, S> {
    layout: TimeMajor,
    steps: &'a S,
    next_values: &'a [T],
    lambda: T,
}

impl<T: Float, S: Steps<T>> ColumnScan<T, 1> for LambdaScan<'_, T, S> {
    const WIDE: bool = true;
    #[inline(always)]
    fn scan<const W: usize>(&self, first: usize, offset: usize, [rows]: &mut [Rows<'_, T>; 1]) {
        let b = self.layout.b;
        let one_minus_lambda = T::one() - self.lambda;
        let mut acc: [T; W] = block(self.next_values, (self.layout.t - 1) * b + first);
        for t in (0..self.layout.t).rev() {
            let base = t * b + first;
            let (r, d) = self.steps.block::<W>(base);
            let nv: [T; W] = block(self.next_values, base);
            let out = rows.block::<W>(t, offset);
            for k in 0..W {
                acc[k] = (r[k] + cut(d[k], d[k] * (one_minus_lambda * nv[k])))
                    + cut(d[k], (d[k] * self.lambda) * acc[k]);
                out[k] = acc[k];
            }
        }
    }
}

/// TD(lambda): `G_t = (r'_t + cut(d_t, d_t * ((1 - lambda) * nv_t)))
/// + cut(d_t, (d_t * lambda) * G_{t+1})`, `G_T = nv_{T-1}`.
pub fn lambda_returns<T: Float>(
    par: Par,
    layout: TimeMajor,
    rewards: &[T],
    next_values: &[T],
    episodes: SliceEpisodes<'_, T>,
    lambda: T,
    returns: &mut [T],
) -> Result<()> {
    let mut lengths = vec![
        ("rewards", rewards.len()),
        ("next_values", next_values.len()),
        ("returns", returns.len()),
    ];
    lengths.extend(episode_lengths(&episodes));
    check_lengths("lambda_returns", layout, &lengths, &[])?;
    with_steps!(rewards, episodes, |steps| {
        let scan = LambdaScan {
            layout,
            steps: &steps,
            next_values,
            lambda,
        };
        run_columns(par, layout, [returns], &scan);
    });
    Ok(())
}

struct NStepScan<'a, T, S> {
    layout: TimeMajor,
    steps: &'a S,
    next_values: &'a [T],
    n: usize,
}

impl<T: Float, S: Steps<T>> ColumnScan<T, 1> for NStepScan<'_, T, S> {
    const WIDE: bool = false;
    #[inline(always)]
    fn scan<const W: usize>(&self, first: usize, offset: usize, [rows]: &mut [Rows<'_, T>; 1]) {
        let b = self.layout.b;
        for t in 0..self.layout.t {
            let last = t.saturating_add(self.n - 1).min(self.layout.t - 1);
            let mut acc: [T; W] = block(self.next_values, last * b + first);
            for j in (t..=last).rev() {
                let (r, d) = self.steps.block::<W>(j * b + first);
                for k in 0..W {
                    acc[k] = r[k] + cut(d[k], d[k] * acc[k]);
                }
            }
            *rows.block::<W>(t, offset) = acc;
        }
    }
}

/// n-step returns: `acc = nv_k` with `k = min(t + n - 1, T - 1)`, then
/// `acc = r'_j + cut(d_j, d_j * acc)` for `j = k, ..., t`.
pub fn n_step_returns<T: Float>(
    par: Par,
    layout: TimeMajor,
    rewards: &[T],
    next_values: &[T],
    episodes: SliceEpisodes<'_, T>,
    n: usize,
    returns: &mut [T],
) -> Result<()> {
    if n == 0 {
        return Err(Error::value("n_step_returns", "n", "n >= 1", n));
    }
    let mut lengths = vec![
        ("rewards", rewards.len()),
        ("next_values", next_values.len()),
        ("returns", returns.len()),
    ];
    lengths.extend(episode_lengths(&episodes));
    check_lengths("n_step_returns", layout, &lengths, &[])?;
    with_steps!(rewards, episodes, |steps| {
        let scan = NStepScan {
            layout,
            steps: &steps,
            next_values,
            n,
        };
        run_columns(par, layout, [returns], &scan);
    });
    Ok(())
}

struct VtraceScan<'a, T, S> {
    layout: TimeMajor,
    steps: &'a S,
    values: &'a [T],
    bootstrap: &'a [T],
    rhos: &'a [T],
    params: VtraceParams<T>,
}

impl<T: Float, S: Steps<T>> ColumnScan<T, 2> for VtraceScan<'_, T, S> {
    const WIDE: bool = false;
    #[inline(always)]
    fn scan<const W: usize>(
        &self,
        first: usize,
        offset: usize,
        [vs_rows, pg_rows]: &mut [Rows<'_, T>; 2],
    ) {
        let b = self.layout.b;
        let VtraceParams {
            lambda,
            clip_rho,
            clip_pg_rho,
        } = self.params;
        let one_minus_lambda = T::one() - lambda;
        // acc holds e_{t+1} at the top of each step.
        let mut acc = [T::zero(); W];
        let mut v_next: [T; W] = block(self.bootstrap, first);
        for t in (0..self.layout.t).rev() {
            let base = t * b + first;
            let (r, d) = self.steps.block::<W>(base);
            let v: [T; W] = block(self.values, base);
            let rho: [T; W] = block(self.rhos, base);
            let has_next = t + 1 < self.layout.t;
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
            v_next = v;
        }
    }
}

/// V-trace value targets and policy-gradient advantages (formulas in
/// [`crate::kernels::recurrence`]).
#[allow(clippy::too_many_arguments)]
pub fn vtrace<T: Float>(
    par: Par,
    layout: TimeMajor,
    rewards: &[T],
    values: &[T],
    bootstrap: &[T],
    rhos: &[T],
    episodes: SliceEpisodes<'_, T>,
    params: VtraceParams<T>,
    vs: &mut [T],
    pg_advantages: &mut [T],
) -> Result<()> {
    let mut lengths = vec![
        ("rewards", rewards.len()),
        ("values", values.len()),
        ("rhos", rhos.len()),
        ("vs", vs.len()),
        ("pg_advantages", pg_advantages.len()),
    ];
    lengths.extend(episode_lengths(&episodes));
    check_lengths(
        "vtrace",
        layout,
        &lengths,
        &[("bootstrap", bootstrap.len())],
    )?;
    with_steps!(rewards, episodes, |steps| {
        let scan = VtraceScan {
            layout,
            steps: &steps,
            values,
            bootstrap,
            rhos,
            params,
        };
        run_columns(par, layout, [vs, pg_advantages], &scan);
    });
    Ok(())
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
