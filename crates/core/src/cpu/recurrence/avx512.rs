//! GAE in `f32` at AVX-512, written with intrinsics, for episodes given by termination
//! flags (of `f32` or bytes) or a constant gamma: time-major ([`advantages`], blocks of up
//! to 256 columns, which the generic scans do not reach), and batch-major with `T` a
//! multiple of 16 ([`rows_gae`]: the common case of [`super::rows`], whose generic code
//! LLVM compiled with bounds checks, reloads and spills around every cache line).
//!
//! Batch-major:
//!
//! The work is [`super::rows`]'s, specialised: 16 columns at a time, in stages of up to 8
//! cache lines (128 steps). First each column's elementwise work, line after line:
//! `delta = (r + (live ? gamma * v_{t+1} : +0)) - v` into a buffer, and a bit per step
//! saying whether it carries (`live = d != 0`). Then per line, from the last: the 16 x 16
//! square of `delta` transposed in registers, the chain
//! `A = delta + (live ? lg * A : +0)` (`lg = lambda * gamma` rounded once, the generic
//! `lambda * d` at `d = gamma`), the square of `A` transposed back and stored. The same
//! formulas, so the same bits; the flags are checked as the generic scans check them.
//!
//! Measured 2026-11-29: see [`rows_gae`].

use std::arch::x86_64::*;
use std::ops::Range;

use super::{ByteFlags, Flags, GaeF32, Lanes, NoFlags, Out, ValueFlags};
use crate::cpu::gemm::x86::transposed;

/// Steps of a cache line of `f32`, and columns of a vector.
const LANES: usize = 16;
/// Lines per stage: 128 steps, 8 KB of `delta` for 16 columns, which stays in L1.
const STAGE_LINES: usize = 8;

/// Whether [`rows_gae`] takes `[t, b]` data: whole cache lines of steps, a vector of
/// columns.
pub(super) fn takes(t: usize, b: usize) -> bool {
    t.is_multiple_of(LANES) && t > 0 && b >= LANES
}

/// The advantages of columns `columns` (at least 16) into `out`, which holds those
/// columns' `t` steps each (column `columns.start` first), the returns `A + v` into
/// `returns` (laid out alike) where given, and whether a flag among them was neither 0
/// nor 1.
///
/// One thread, f32 flags, data in `Vec`s (16 bytes past a cache line), this crate's AMD
/// EPYC Zen 5, criterion: `[2048, 64]` 81.0 us by [`super::rows`]'s generic code (the
/// day before), 58.4-59.8 us here (time-major 22.9-23.3 us); `[128, 1024]` 74.1 and
/// 47.2-47.9 us (time-major 40.7-42.7 us). Starting the lines on the data's cache lines instead
/// (masked loads and stores at each column's ends) was no faster at `[2048, 64]` and
/// 1.4x slower at `[128, 1024]` (9 lines a column instead of 8).
///
/// # Safety
///
/// The CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn rows_gae(
    gae: &GaeF32<'_>,
    columns: Range<usize>,
    out: &mut [f32],
    returns: Option<&mut [f32]>,
) -> bool {
    // Checked once, so that the loads and stores below stay inside the slices.
    assert!(
        takes(gae.t, gae.b)
            && gae.rows_fit(
                &columns,
                LANES,
                out.len(),
                returns.as_ref().map(|r| r.len())
            ),
        "the caller checked the lengths"
    );
    // SAFETY: as this function's, with the lengths checked above.
    unsafe {
        match gae.flags {
            Flags::None => scan(gae, NoFlags, columns, out, returns),
            Flags::Values(flags) => scan(gae, ValueFlags(flags), columns, out, returns),
            Flags::Bytes(flags) => scan(gae, ByteFlags(flags), columns, out, returns),
        }
    }
}

/// Most columns of a time-major block: 16 vectors of accumulators.
const MOST_COLUMNS: usize = 256;

/// Time-major GAE (the scans take it for blocks of 256 columns): the advantages of columns
/// `first..first + W` (a multiple of 16, at most 256) into `advantages` (its block at
/// `offset` for each step), the returns `A + v` into `returns` where given, and whether a
/// flag among them was neither 0 nor 1: the steps of
/// [`super::avx2::advantages`] with 16 lanes and mask registers. 256 columns keep twice
/// the lines of 128 in flight, which is what rows 4 KiB apart need (`[128, 1024]`, one
/// thread: see the returns README).
///
/// # Safety
///
/// The CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn advantages<const W: usize, T: 'static, R: Out<T>>(
    gae: &GaeF32<'_>,
    first: usize,
    offset: usize,
    advantages: &mut R,
    returns: Option<&mut R>,
) -> bool {
    // Checked once, so that the loads below stay inside the slices.
    assert!(
        gae.block_fits::<T>(first, W, LANES, MOST_COLUMNS),
        "the caller checked the lengths"
    );
    // One loop per kind of flags, so that none decides per vector.
    // SAFETY: as this function's, with the lengths checked above.
    unsafe {
        match gae.flags {
            Flags::None => steps::<W, T, R, _>(gae, NoFlags, first, offset, advantages, returns),
            Flags::Values(flags) => {
                steps::<W, T, R, _>(gae, ValueFlags(flags), first, offset, advantages, returns)
            }
            Flags::Bytes(flags) => {
                steps::<W, T, R, _>(gae, ByteFlags(flags), first, offset, advantages, returns)
            }
        }
    }
}

/// [`advantages`] with the flags read by `lanes`.
///
/// # Safety
///
/// AVX-512F, and the lengths [`advantages`] checks.
#[target_feature(enable = "avx512f")]
unsafe fn steps<const W: usize, T, R: Out<T>, L: Lanes<__mmask16>>(
    gae: &GaeF32<'_>,
    lanes: L,
    first: usize,
    offset: usize,
    advantages: &mut R,
    mut returns: Option<&mut R>,
) -> bool {
    let (t, b) = (gae.t, gae.b);
    let zero = _mm512_setzero_ps();
    let gamma = _mm512_set1_ps(gae.gamma);
    let lg = _mm512_set1_ps(gae.lambda * gae.gamma);
    // `d = gamma` is zero (and cuts) where gamma is: no lane carries.
    let gamma_live: __mmask16 = if gae.gamma != 0.0 { 0xffff } else { 0 };
    let (r, v) = (gae.rewards.as_ptr(), gae.values.as_ptr());
    let mut seen = L::nothing_seen();
    let mut acc = [zero; MOST_COLUMNS / LANES];
    // This step's values, for the returns `A + v`.
    let mut values = [zero; MOST_COLUMNS / LANES];
    for step in (0..t).rev() {
        let row = step * b + first;
        // `T` is `f32` ([`advantages`] checked).
        let out: *mut f32 = advantages.block::<W>(step, offset).as_mut_ptr().cast();
        // The value of the step after, or the bootstrap after the last step.
        let (next, next_at) = if step + 1 < t {
            (v, row + b)
        } else {
            (gae.bootstrap.as_ptr(), first)
        };
        for (k, acc) in acc.iter_mut().enumerate().take(W / LANES) {
            let at = row + LANES * k;
            // SAFETY: every load and store is of 16 lanes at `at + 16 <= (step + 1) * b`,
            // or at `next_at + 16 * k + 16`, inside the values or the bootstrap (the
            // lengths [`advantages`] checked); AVX-512F is on.
            unsafe {
                let carries = lanes.live(at, &mut seen) & gamma_live;
                let v_next = _mm512_loadu_ps(next.add(next_at + LANES * k));
                let value = _mm512_loadu_ps(v.add(at));
                let carried = _mm512_maskz_mul_ps(carries, gamma, v_next);
                let delta =
                    _mm512_sub_ps(_mm512_add_ps(_mm512_loadu_ps(r.add(at)), carried), value);
                *acc = _mm512_add_ps(delta, _mm512_maskz_mul_ps(carries, lg, *acc));
                _mm512_storeu_ps(out.add(LANES * k), *acc);
                values[k] = value;
            }
        }
        advantages.flush::<W>(step, offset);
        if let Some(returns) = returns.as_mut() {
            let out: *mut f32 = returns.block::<W>(step, offset).as_mut_ptr().cast();
            for (k, (acc, value)) in acc.iter().zip(&values).enumerate().take(W / LANES) {
                // SAFETY: 16 lanes of the block of `W` at `16 * k < W`; AVX-512F is on.
                unsafe { _mm512_storeu_ps(out.add(LANES * k), _mm512_add_ps(*acc, *value)) };
            }
            returns.flush::<W>(step, offset);
        }
    }
    // SAFETY: AVX-512F is on.
    unsafe { L::invalid(seen) }
}

impl Lanes<__mmask16> for NoFlags {
    type Seen = ();
    fn nothing_seen() {}
    #[inline(always)]
    unsafe fn live(self, _: usize, (): &mut ()) -> __mmask16 {
        0xffff
    }
    unsafe fn invalid((): ()) -> bool {
        false
    }
}

impl Lanes<__mmask16> for ValueFlags<'_> {
    type Seen = __m512i;
    fn nothing_seen() -> __m512i {
        // SAFETY: only called where AVX-512F is on (in `scan`).
        unsafe { _mm512_setzero_si512() }
    }
    #[inline(always)]
    unsafe fn live(self, at: usize, seen: &mut __m512i) -> __mmask16 {
        // SAFETY: 16 flags at `at`, AVX-512F (the caller's contract).
        unsafe {
            let f = _mm512_loadu_ps(self.0.as_ptr().add(at));
            let product = _mm512_mul_ps(f, _mm512_sub_ps(f, _mm512_set1_ps(1.0)));
            let magnitude =
                _mm512_and_si512(_mm512_castps_si512(product), _mm512_set1_epi32(0x7fff_ffff));
            *seen = _mm512_or_si512(*seen, magnitude);
            _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(f, _mm512_setzero_ps())
        }
    }
    unsafe fn invalid(seen: __m512i) -> bool {
        // SAFETY: AVX-512F (the caller's contract).
        unsafe { _mm512_test_epi32_mask(seen, seen) != 0 }
    }
}

impl Lanes<__mmask16> for ByteFlags<'_> {
    type Seen = u128;
    fn nothing_seen() -> u128 {
        0
    }
    #[inline(always)]
    unsafe fn live(self, at: usize, seen: &mut u128) -> __mmask16 {
        // SAFETY: 16 flags at `at`, AVX-512F (the caller's contract).
        unsafe {
            let bytes = self.0.as_ptr().add(at).cast::<u128>().read_unaligned();
            *seen |= bytes;
            let lanes = _mm512_cvtepu8_epi32(_mm_loadu_si128(self.0.as_ptr().add(at).cast()));
            _mm512_cmpeq_epi32_mask(lanes, _mm512_setzero_si512())
        }
    }
    unsafe fn invalid(seen: u128) -> bool {
        seen & 0xfefe_fefe_fefe_fefe_fefe_fefe_fefe_fefe != 0
    }
}

/// A stage's `delta`, row `i` holding column `i`'s steps, each line 64-byte aligned.
#[repr(align(64))]
struct Stage([[f32; LANES * STAGE_LINES]; LANES]);

/// [`rows_gae`] with the flags read by `lanes`.
///
/// # Safety
///
/// AVX-512F, and the lengths [`rows_gae`] checks.
#[target_feature(enable = "avx512f")]
unsafe fn scan<L: Lanes<__mmask16>>(
    gae: &GaeF32<'_>,
    lanes: L,
    columns: Range<usize>,
    out: &mut [f32],
    mut returns: Option<&mut [f32]>,
) -> bool {
    let t = gae.t;
    let zero = _mm512_setzero_ps();
    let gamma = _mm512_set1_ps(gae.gamma);
    let lg = _mm512_set1_ps(gae.lambda * gae.gamma);
    // `d = gamma` is zero (and cuts) where gamma is: no step carries.
    let gamma_live: __mmask16 = if gae.gamma != 0.0 { 0xffff } else { 0 };
    let (r, v, o) = (gae.rewards.as_ptr(), gae.values.as_ptr(), out.as_mut_ptr());
    let mut seen = L::nothing_seen();
    let mut stage = Stage([[0.0; LANES * STAGE_LINES]; LANES]);
    // The stage's values too where the returns `A + v` are asked: read again from the
    // columns, 16 lines a multiple of 4 KiB apart would share an L1 set (`[2048, 64]`
    // with the returns: 197 against 152 us by the generic code).
    let mut values = Stage([[0.0; LANES * STAGE_LINES]; LANES]);
    let mut live = [[0u32; LANES]; STAGE_LINES];
    let mut offset = 0;
    while offset < columns.len() {
        // The last vector overlaps the one before when the columns are not a multiple of
        // 16: columns are independent, so it writes the same bits again.
        let start = offset.min(columns.len() - LANES);
        let first = columns.start + start;
        let mut acc = zero;
        let mut end = t;
        while end > 0 {
            let lines = (end / LANES).min(STAGE_LINES);
            let from = end - lines * LANES;
            for (i, (row, values)) in stage.0.iter_mut().zip(&mut values.0).enumerate() {
                let column = (first + i) * t;
                for (l, live) in live.iter_mut().enumerate().take(lines) {
                    let at = column + from + l * LANES;
                    // SAFETY: 16 steps at `at`, inside column `first + i` of `[b, t]`
                    // arrays (the lengths `rows_gae` checked); `v_{t+1}` at `at + 1` only
                    // where the line is not the column's last; AVX-512F is on.
                    unsafe {
                        let value = _mm512_loadu_ps(v.add(at));
                        let v_next = if from + l * LANES + LANES < t {
                            _mm512_loadu_ps(v.add(at + 1))
                        } else {
                            let after = _mm512_set1_ps(gae.bootstrap[first + i]);
                            _mm512_castsi512_ps(_mm512_alignr_epi32::<1>(
                                _mm512_castps_si512(after),
                                _mm512_castps_si512(value),
                            ))
                        };
                        let carries = lanes.live(at, &mut seen) & gamma_live;
                        live[i] = u32::from(carries);
                        let carried = _mm512_maskz_mul_ps(carries, gamma, v_next);
                        let delta = _mm512_sub_ps(
                            _mm512_add_ps(_mm512_loadu_ps(r.add(at)), carried),
                            value,
                        );
                        _mm512_store_ps(row.as_mut_ptr().add(l * LANES), delta);
                        if returns.is_some() {
                            _mm512_store_ps(values.as_mut_ptr().add(l * LANES), value);
                        }
                    }
                }
            }
            for l in (0..lines).rev() {
                // SAFETY: the stage's line `l` of each row, and 16 steps of each of the 16
                // columns in `out` (`out` holds `columns.len() * t`); AVX-512F is on.
                unsafe {
                    let x = transposed(std::array::from_fn(|i| {
                        _mm512_load_ps(stage.0[i].as_ptr().add(l * LANES))
                    }));
                    let words = _mm512_loadu_si512(live[l].as_ptr().cast());
                    let mut a = [zero; LANES];
                    for s in (0..LANES).rev() {
                        let carries = _mm512_test_epi32_mask(words, _mm512_set1_epi32(1 << s));
                        acc = _mm512_add_ps(x[s], _mm512_maskz_mul_ps(carries, lg, acc));
                        a[s] = acc;
                    }
                    for (i, row) in transposed(a).into_iter().enumerate() {
                        let at = (start + i) * t + from + l * LANES;
                        _mm512_storeu_ps(o.add(at), row);
                        if let Some(returns) = returns.as_mut() {
                            let value = _mm512_load_ps(values.0[i].as_ptr().add(l * LANES));
                            _mm512_storeu_ps(
                                returns.as_mut_ptr().add(at),
                                _mm512_add_ps(row, value),
                            );
                        }
                    }
                }
            }
            end = from;
        }
        offset = start + LANES;
    }
    // SAFETY: AVX-512F is on.
    unsafe { L::invalid(seen) }
}
