//! GAE advantages in `f32` at AVX2, written with intrinsics, for episodes whose discounts
//! are 0 or `gamma` with no truncation (termination flags of `f32` or bytes, or a constant
//! `gamma`): the common case of the generic scans, whose LLVM code spilled at AVX2's 16
//! registers. Time-major data: [`advantages`]; batch-major: [`rows_advantages`], the
//! steps of [`super::avx512::rows_gae`] with 8 columns.
//!
//! Time-major, a block of `W` columns keeps its `W / 8` accumulators in registers and reads `v_{t+1}`
//! again from the row it loaded one step before (an L1 hit) instead of carrying it. Each
//! step of each column is the generic scan's, with `d` two-valued:
//! `delta = (r + (live ? gamma * v_{t+1} : +0)) - v`, `A = delta + (live ? lg * A : +0)`,
//! `live = d != 0`, `lg = lambda * gamma` rounded once (the generic `lambda * d` at
//! `d = gamma`): the same bits. Flags are checked as the generic scans check them, `or`ed
//! lane by lane over the whole scan and tested once at its end.
//!
//! Measured (GAE advantages, one thread, f32 flags, this crate's AMD EPYC Zen 5 with the
//! instruction set capped at AVX2, best of 9 alternating processes, 2026-11-29):
//! `[2048, 64]` 34.7 us by the generic scan, 26.3 us here (AVX-512's scan: 23.7 us);
//! `[128, 1024]` 59.9 us, 40.3 us. The generic scan with the same formulas (`v_{t+1}`
//! read again, the two-valued select, 8 columns at a time) was no faster: LLVM kept
//! spilling its arrays.

use std::arch::x86_64::*;
use std::ops::Range;

use super::{ByteFlags, Flags, GaeF32, Lanes, NoFlags, Out, ValueFlags};
use crate::cpu::gemm::x86::transposed_8x8;

/// Most columns of a block: 16 vectors of accumulators.
const MOST_COLUMNS: usize = 128;

/// The advantages of columns `first..first + W` (a multiple of 8, at most 128) into
/// `advantages` (its block at `offset` for each step), the returns `A + v` into `returns`
/// where given, and whether a flag among them was neither 0 nor 1.
///
/// # Safety
///
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn advantages<const W: usize, T: 'static, R: Out<T>>(
    gae: &GaeF32<'_>,
    first: usize,
    offset: usize,
    advantages: &mut R,
    returns: Option<&mut R>,
) -> bool {
    // Checked once, so that the loads below stay inside the slices.
    assert!(
        gae.block_fits::<T>(first, W, 8, MOST_COLUMNS),
        "the caller checked the lengths"
    );
    // One loop per kind of flags, so that none decides per vector.
    // SAFETY: as this function's, with the lengths checked above.
    unsafe {
        match gae.flags {
            Flags::None => scan::<W, T, R, _>(gae, NoFlags, first, offset, advantages, returns),
            Flags::Values(flags) => {
                scan::<W, T, R, _>(gae, ValueFlags(flags), first, offset, advantages, returns)
            }
            Flags::Bytes(flags) => {
                scan::<W, T, R, _>(gae, ByteFlags(flags), first, offset, advantages, returns)
            }
        }
    }
}

impl Lanes<__m256> for NoFlags {
    type Seen = ();
    fn nothing_seen() {}
    #[inline(always)]
    unsafe fn live(self, _: usize, (): &mut ()) -> __m256 {
        // SAFETY: AVX2 (the caller's contract).
        unsafe { _mm256_castsi256_ps(_mm256_set1_epi32(-1)) }
    }
    unsafe fn invalid((): ()) -> bool {
        false
    }
}

impl Lanes<__m256> for ValueFlags<'_> {
    type Seen = __m256;
    fn nothing_seen() -> __m256 {
        // SAFETY: only called where AVX2 is on (in `scan`).
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn live(self, at: usize, seen: &mut __m256) -> __m256 {
        // SAFETY: 8 flags at `at`, AVX2 (the caller's contract).
        unsafe {
            let f = _mm256_loadu_ps(self.0.as_ptr().add(at));
            let product = _mm256_mul_ps(f, _mm256_sub_ps(f, _mm256_set1_ps(1.0)));
            let magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
            *seen = _mm256_or_ps(*seen, _mm256_and_ps(product, magnitude));
            _mm256_cmp_ps::<_CMP_EQ_OQ>(f, _mm256_setzero_ps())
        }
    }
    unsafe fn invalid(seen: __m256) -> bool {
        // SAFETY: AVX2 (the caller's contract).
        unsafe { _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_NEQ_UQ>(seen, _mm256_setzero_ps())) != 0 }
    }
}

impl Lanes<__m256> for ByteFlags<'_> {
    type Seen = u64;
    fn nothing_seen() -> u64 {
        0
    }
    #[inline(always)]
    unsafe fn live(self, at: usize, seen: &mut u64) -> __m256 {
        // SAFETY: 8 flags at `at`, AVX2 (the caller's contract).
        unsafe {
            let bytes = self.0.as_ptr().add(at).cast::<u64>().read_unaligned();
            *seen |= bytes;
            let lanes = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(bytes as i64));
            _mm256_castsi256_ps(_mm256_cmpeq_epi32(lanes, _mm256_setzero_si256()))
        }
    }
    unsafe fn invalid(seen: u64) -> bool {
        seen & 0xfefe_fefe_fefe_fefe != 0
    }
}

/// [`advantages`] with the flags read by `lanes`.
///
/// # Safety
///
/// AVX2, and the lengths [`advantages`] checks.
#[target_feature(enable = "avx2")]
unsafe fn scan<const W: usize, T, R: Out<T>, L: Lanes<__m256>>(
    gae: &GaeF32<'_>,
    lanes: L,
    first: usize,
    offset: usize,
    advantages: &mut R,
    mut returns: Option<&mut R>,
) -> bool {
    let (t, b) = (gae.t, gae.b);
    let zero = _mm256_setzero_ps();
    let gamma = _mm256_set1_ps(gae.gamma);
    let lg = _mm256_set1_ps(gae.lambda * gae.gamma);
    // `d = gamma` is zero (and cuts) where gamma is: every lane dead.
    let gamma_live = _mm256_cmp_ps::<_CMP_NEQ_UQ>(gamma, zero);
    let (r, v) = (gae.rewards.as_ptr(), gae.values.as_ptr());
    let mut seen = L::nothing_seen();
    let mut acc = [zero; MOST_COLUMNS / 8];
    // This step's values, for the returns `A + v`.
    let mut values = [zero; MOST_COLUMNS / 8];
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
        for (k, acc) in acc.iter_mut().enumerate().take(W / 8) {
            let at = row + 8 * k;
            // SAFETY: every load and store is of 8 lanes at `at + 8 <= (step + 1) * b`, or
            // at `next_at + 8 * k + 8`, inside the values or the bootstrap (the lengths
            // [`advantages`] checked); AVX2 is on.
            unsafe {
                let live = _mm256_and_ps(lanes.live(at, &mut seen), gamma_live);
                let v_next = _mm256_loadu_ps(next.add(next_at + 8 * k));
                let value = _mm256_loadu_ps(v.add(at));
                let carried = _mm256_and_ps(live, _mm256_mul_ps(gamma, v_next));
                let delta =
                    _mm256_sub_ps(_mm256_add_ps(_mm256_loadu_ps(r.add(at)), carried), value);
                *acc = _mm256_add_ps(delta, _mm256_and_ps(live, _mm256_mul_ps(lg, *acc)));
                _mm256_storeu_ps(out.add(8 * k), *acc);
                values[k] = value;
            }
        }
        advantages.flush::<W>(step, offset);
        if let Some(returns) = returns.as_mut() {
            let out: *mut f32 = returns.block::<W>(step, offset).as_mut_ptr().cast();
            for (k, (acc, value)) in acc.iter().zip(&values).enumerate().take(W / 8) {
                // SAFETY: 8 lanes of the block of `W` at `8 * k < W`; AVX2 is on.
                unsafe { _mm256_storeu_ps(out.add(8 * k), _mm256_add_ps(*acc, *value)) };
            }
            returns.flush::<W>(step, offset);
        }
    }
    // SAFETY: AVX2 is on.
    unsafe { L::invalid(seen) }
}

/// Steps of a cache line of `f32`: two vectors of 8.
const LINE: usize = 16;
/// Lines per stage of the batch-major scan: 128 steps, 4 KB of `delta` for 8 columns.
const STAGE_LINES: usize = 8;

/// Whether [`rows_advantages`] takes batch-major `[t, b]` data: whole cache lines of steps,
/// a vector of columns.
pub(super) fn rows_take(t: usize, b: usize) -> bool {
    t.is_multiple_of(LINE) && t > 0 && b >= 8
}

/// Batch-major GAE advantages of columns `columns` (at least 8) into `out`, which holds
/// those columns' `t` steps each (column `columns.start` first), the returns `A + v` into
/// `returns` (laid out alike) where given, and whether a flag among them was neither 0
/// nor 1: [`super::avx512::rows_gae`]'s work with 8 columns and 8 x 8
/// squares (two per cache line of steps), the same steps in the same order, so the same
/// bits.
///
/// One thread, f32 flags, data in `Vec`s, this crate's AMD EPYC Zen 5 capped at AVX2,
/// criterion: `[2048, 64]` 108.7 us by the generic code (the day before), 78.1 us here;
/// `[128, 1024]` 116.4 and 60.1 us.
///
/// # Safety
///
/// The CPU has AVX2.
#[target_feature(enable = "avx2")]
pub(super) unsafe fn rows_advantages(
    gae: &GaeF32<'_>,
    columns: Range<usize>,
    out: &mut [f32],
    returns: Option<&mut [f32]>,
) -> bool {
    // Checked once, so that the loads and stores below stay inside the slices.
    assert!(
        rows_take(gae.t, gae.b)
            && gae.rows_fit(&columns, 8, out.len(), returns.as_ref().map(|r| r.len())),
        "the caller checked the lengths"
    );
    // SAFETY: as this function's, with the lengths checked above.
    unsafe {
        match gae.flags {
            Flags::None => rows_scan(gae, NoFlags, columns, out, returns),
            Flags::Values(flags) => rows_scan(gae, ValueFlags(flags), columns, out, returns),
            Flags::Bytes(flags) => rows_scan(gae, ByteFlags(flags), columns, out, returns),
        }
    }
}

/// A stage's `delta`, row `i` holding column `i`'s steps, each line 64-byte aligned.
#[repr(align(64))]
struct Stage([[f32; LINE * STAGE_LINES]; 8]);

/// [`rows_advantages`] with the flags read by `lanes`.
///
/// # Safety
///
/// AVX2, and the lengths [`rows_advantages`] checks.
#[target_feature(enable = "avx2")]
unsafe fn rows_scan<L: Lanes<__m256>>(
    gae: &GaeF32<'_>,
    lanes: L,
    columns: Range<usize>,
    out: &mut [f32],
    mut returns: Option<&mut [f32]>,
) -> bool {
    let t = gae.t;
    let zero = _mm256_setzero_ps();
    let gamma = _mm256_set1_ps(gae.gamma);
    let lg = _mm256_set1_ps(gae.lambda * gae.gamma);
    // `d = gamma` is zero (and cuts) where gamma is: every lane dead.
    let gamma_live = _mm256_cmp_ps::<_CMP_NEQ_UQ>(gamma, zero);
    // The last of a column's steps takes the bootstrap as `v_{t+1}`: 7 lanes loaded.
    let but_last = _mm256_setr_epi32(-1, -1, -1, -1, -1, -1, -1, 0);
    let (r, v, o) = (gae.rewards.as_ptr(), gae.values.as_ptr(), out.as_mut_ptr());
    let mut seen = L::nothing_seen();
    let mut stage = Stage([[0.0; LINE * STAGE_LINES]; 8]);
    // The stage's values too where the returns `A + v` are asked (see the AVX-512 kernel).
    let mut values = Stage([[0.0; LINE * STAGE_LINES]; 8]);
    // Bit `s` of `live[l][i]`: step `s` of line `l` of column `i` carries.
    let mut live = [[0u32; 8]; STAGE_LINES];
    let mut offset = 0;
    while offset < columns.len() {
        // The last vector overlaps the one before when the columns are not a multiple of
        // 8: columns are independent, so it writes the same bits again.
        let start = offset.min(columns.len() - 8);
        let first = columns.start + start;
        let mut acc = zero;
        let mut end = t;
        while end > 0 {
            let lines = (end / LINE).min(STAGE_LINES);
            let from = end - lines * LINE;
            for (i, (row, values)) in stage.0.iter_mut().zip(&mut values.0).enumerate() {
                let column = (first + i) * t;
                for (l, live) in live.iter_mut().enumerate().take(lines) {
                    live[i] = 0;
                    for half in 0..2 {
                        let step = from + l * LINE + 8 * half;
                        let at = column + step;
                        // SAFETY: 8 steps at `at`, inside column `first + i` of `[b, t]`
                        // arrays (the lengths `rows_advantages` checked); `v_{t+1}` at
                        // `at + 1`, its last lane masked off at the column's end; AVX2.
                        unsafe {
                            let value = _mm256_loadu_ps(v.add(at));
                            let v_next = if step + 8 < t {
                                _mm256_loadu_ps(v.add(at + 1))
                            } else {
                                let loaded = _mm256_maskload_ps(v.add(at + 1), but_last);
                                let after = _mm256_set1_ps(gae.bootstrap[first + i]);
                                _mm256_blend_ps::<0x80>(loaded, after)
                            };
                            let carries = _mm256_and_ps(lanes.live(at, &mut seen), gamma_live);
                            live[i] |= (_mm256_movemask_ps(carries) as u32) << (8 * half);
                            let carried = _mm256_and_ps(carries, _mm256_mul_ps(gamma, v_next));
                            let delta = _mm256_sub_ps(
                                _mm256_add_ps(_mm256_loadu_ps(r.add(at)), carried),
                                value,
                            );
                            let within = l * LINE + 8 * half;
                            _mm256_store_ps(row.as_mut_ptr().add(within), delta);
                            if returns.is_some() {
                                _mm256_store_ps(values.as_mut_ptr().add(within), value);
                            }
                        }
                    }
                }
            }
            for l in (0..lines).rev() {
                // SAFETY: 8 `u32` of `live[l]`; AVX2 is on.
                let words = unsafe { _mm256_loadu_si256(live[l].as_ptr().cast()) };
                for half in (0..2).rev() {
                    let step = from + l * LINE + 8 * half;
                    // SAFETY: the stage's half line of each row, and 8 steps of each of the
                    // 8 columns in `out` (`out` holds `columns.len() * t`); AVX2 is on.
                    unsafe {
                        let x = transposed_8x8(std::array::from_fn(|i| {
                            _mm256_load_ps(stage.0[i].as_ptr().add(l * LINE + 8 * half))
                        }));
                        let mut a = [zero; 8];
                        for s in (0..8).rev() {
                            let bit = _mm256_set1_epi32(1 << (8 * half + s));
                            let carries = _mm256_castsi256_ps(_mm256_cmpeq_epi32(
                                _mm256_and_si256(words, bit),
                                bit,
                            ));
                            acc =
                                _mm256_add_ps(x[s], _mm256_and_ps(carries, _mm256_mul_ps(lg, acc)));
                            a[s] = acc;
                        }
                        for (i, row) in transposed_8x8(a).into_iter().enumerate() {
                            let at = (start + i) * t + step;
                            _mm256_storeu_ps(o.add(at), row);
                            if let Some(returns) = returns.as_mut() {
                                let within = l * LINE + 8 * half;
                                let value = _mm256_load_ps(values.0[i].as_ptr().add(within));
                                let target = returns.as_mut_ptr().add(at);
                                _mm256_storeu_ps(target, _mm256_add_ps(row, value));
                            }
                        }
                    }
                }
            }
            end = from;
        }
        offset = start + 8;
    }
    // SAFETY: AVX2 is on.
    unsafe { L::invalid(seen) }
}
