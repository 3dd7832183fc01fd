//! Lines of a buffer laid side by side, and back: the transposition shared by the GEMM's
//! packing (rows of `a`, columns of `b`) and the batch-major recurrences (columns of
//! `[B, T]` data staged time-major, [`super::recurrence`]).
//!
//! For `f32` both directions run in 16 x 16 blocks transposed in registers when the
//! instruction set is AVX-512 and in 8 x 8 blocks with AVX2, since the scalar copy (or the
//! scatter LLVM makes of it) costs a cycle or more per element; the blocks walk one group
//! of lines at a time through all its steps, so that a group's cache lines are read once
//! even when the lines lie a multiple of 4 KiB apart and share their cache sets. Other
//! types, other instruction sets and the edges copy element by element.

#[cfg(target_arch = "x86_64")]
use super::lanes::{as_f32, as_f32_mut};
use crate::cpu::simd::Isa;

/// Lines of `data` laid side by side: `steps[p * width + lane] = data[starts[lane] + p]`
/// for every step `p < steps.len() / width` and every `lane < starts.len()` (other lanes
/// are left as they are). `isa` must be one the CPU supports (callers pass
/// [`crate::cpu::simd::isa`]).
///
/// # Panics
///
/// When there are more lines than lanes, or a line does not hold `steps.len() / width`
/// elements.
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
pub(crate) fn interleave<E: Copy + 'static>(
    isa: Isa,
    data: &[E],
    starts: &[usize],
    steps: &mut [E],
    width: usize,
) {
    let count = check(data.len(), starts, steps.len(), width);
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut done = (0, 0);
    #[cfg(target_arch = "x86_64")]
    if let (Some(data), Some(steps)) = (as_f32(data), as_f32_mut(steps)) {
        done = x86_blocks(isa, starts.len(), count, |block, lane, p| {
            let dst = steps[p * width + lane..].as_mut_ptr();
            let rows = |i: usize| data[starts[lane + i] + p..].as_ptr();
            // SAFETY: `isa` is supported by the CPU (the caller's contract) and picked the
            // block size; lines `lane..lane + block` hold steps `p..p + block` (`check`),
            // and `steps` holds `block` steps of `width >= lane + block` lanes from step
            // `p` (`p + block <= count`, `lane + block <= starts.len() <= width`).
            unsafe { transpose(block, rows, dst, width) }
        });
    }
    let (done_lanes, done_steps) = done;
    for (lane, &start) in starts.iter().enumerate() {
        let first_step = if lane < done_lanes { done_steps } else { 0 };
        for (p, step) in steps.chunks_exact_mut(width).enumerate().skip(first_step) {
            step[lane] = data[start + p];
        }
    }
}

/// The inverse of [`interleave`] onto `lines` evenly spaced lines:
/// `data[first + lane * stride + p] = steps[p * width + lane]` for every step
/// `p < steps.len() / width` and every `lane < lines`.
///
/// # Panics
///
/// When there are more lines than lanes, or a line does not fit in `data`.
#[inline(always)]
#[cfg_attr(not(target_arch = "x86_64"), allow(unused_variables))]
pub(crate) fn deinterleave<E: Copy + 'static>(
    isa: Isa,
    steps: &[E],
    width: usize,
    data: &mut [E],
    first: usize,
    stride: usize,
    lines: usize,
) {
    let starts = |lane: usize| first + lane * stride;
    let count = steps.len() / width.max(1);
    assert!(lines <= width, "no more lines than lanes");
    assert!(
        count == 0 || lines == 0 || starts(lines - 1) + count <= data.len(),
        "the lines lie inside the data"
    );
    #[cfg_attr(not(target_arch = "x86_64"), allow(unused_mut))]
    let mut done = (0, 0);
    #[cfg(target_arch = "x86_64")]
    if let (Some(steps), Some(data)) = (as_f32(steps), as_f32_mut(data)) {
        done = x86_blocks(isa, lines, count, |block, lane, p| {
            let dst = data[starts(lane) + p..].as_mut_ptr();
            let rows = |i: usize| steps[(p + i) * width + lane..].as_ptr();
            // SAFETY: `isa` is supported by the CPU (the caller's contract) and picked the
            // block size; steps `p..p + block` hold lanes `lane..lane + block` (`p + block
            // <= count`, `lane + block <= lines <= width`), and lines `lane..lane + block`,
            // `stride` apart, hold steps `p..p + block` (asserted above).
            unsafe { transpose(block, rows, dst, stride) }
        });
    }
    let (done_lanes, done_steps) = done;
    for lane in 0..lines {
        let first_step = if lane < done_lanes { done_steps } else { 0 };
        for (p, step) in steps.chunks_exact(width).enumerate().skip(first_step) {
            data[starts(lane) + p] = step[lane];
        }
    }
}

/// The steps per line, after checking that every line holds them and that the lines fit
/// the lanes.
fn check(data_len: usize, starts: &[usize], steps_len: usize, width: usize) -> usize {
    let count = steps_len / width.max(1);
    assert!(starts.len() <= width, "no more lines than lanes");
    for &start in starts {
        assert!(
            count == 0 || start + count <= data_len,
            "the lines lie inside the data"
        );
    }
    count
}

/// Calls `transpose(block, lane, p)` for the whole `block x block` blocks of `lines`
/// lines of `count` steps, lines outermost, when `isa` has a register transpose; returns
/// the lanes and steps they covered. The loops run in a function compiled for the
/// instruction set, so that each block's transpose is inlined.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn x86_blocks(
    isa: Isa,
    lines: usize,
    count: usize,
    transpose: impl FnMut(usize, usize, usize),
) -> (usize, usize) {
    /// The loops of [`x86_blocks`] for blocks of `block`.
    #[inline(always)]
    fn blocks(
        block: usize,
        lines: usize,
        count: usize,
        mut transpose: impl FnMut(usize, usize, usize),
    ) -> (usize, usize) {
        let (done_lanes, done_steps) = (lines / block * block, count / block * block);
        for lane in (0..done_lanes).step_by(block) {
            for p in (0..done_steps).step_by(block) {
                transpose(block, lane, p);
            }
        }
        (done_lanes, done_steps)
    }
    #[target_feature(enable = "avx512f")]
    fn avx512(
        lines: usize,
        count: usize,
        transpose: impl FnMut(usize, usize, usize),
    ) -> (usize, usize) {
        blocks(16, lines, count, transpose)
    }
    #[target_feature(enable = "avx2")]
    fn avx2(
        lines: usize,
        count: usize,
        transpose: impl FnMut(usize, usize, usize),
    ) -> (usize, usize) {
        blocks(8, lines, count, transpose)
    }
    match isa {
        // SAFETY: `isa` is one the CPU supports (the callers' contract).
        Isa::Avx512 => unsafe { avx512(lines, count, transpose) },
        // SAFETY: as above.
        Isa::Avx2 => unsafe { avx2(lines, count, transpose) },
        Isa::Baseline => (0, 0),
    }
}

/// `dst[j * dst_stride + i] = rows(i)[j]` for `i, j < block`, by the register transpose of
/// `block` (16: AVX-512, 8: AVX2).
///
/// # Safety
///
/// The CPU supports the instruction set of `block`'s transpose; each `rows(i)` points at
/// `block` readable `f32`, and `dst + j * dst_stride` at `block` writable `f32` for every
/// `j < block`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn transpose(
    block: usize,
    rows: impl Fn(usize) -> *const f32,
    dst: *mut f32,
    dst_stride: usize,
) {
    use super::gemm::x86;
    // SAFETY: the caller's contract, for the transpose `block` picks.
    unsafe {
        if block == 16 {
            x86::transpose_16x16(std::array::from_fn(rows), dst, dst_stride);
        } else {
            x86::transpose_8x8(std::array::from_fn(rows), dst, dst_stride);
        }
    }
}

/// `m` transposed, `out[s][i] = m[i][s]`: in registers where `isa` has a transpose of
/// `L x L` blocks of `T` (AVX-512: 16 `f32` or 8 `f64`; AVX2: 8 `f32` or 4 `f64`), element
/// by element otherwise. `isa` must be one the CPU supports, and the caller compiled for it
/// (so that the register transpose inlines).
#[inline(always)]
pub(crate) fn transposed_square<T: Copy + 'static, const L: usize>(
    isa: Isa,
    m: [[T; L]; L],
) -> [[T; L]; L] {
    #[cfg(target_arch = "x86_64")]
    if let Some(transposed) = x86_square(isa, &m) {
        return transposed;
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = isa;
    std::array::from_fn(|s| std::array::from_fn(|i| m[i][s]))
}

/// [`transposed_square`] by a register transpose, where `isa` has one for `L x L` blocks of
/// `T`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn x86_square<T: Copy + 'static, const L: usize>(isa: Isa, m: &[[T; L]; L]) -> Option<[[T; L]; L]> {
    use super::gemm::x86;
    use std::any::TypeId;
    use std::arch::x86_64::{__m256, __m256d, __m512, __m512d};
    let element = TypeId::of::<T>();
    let (f32, f64) = (
        element == TypeId::of::<f32>(),
        element == TypeId::of::<f64>(),
    );
    // SAFETY: each arm's instruction set is `isa`, which the CPU supports (the caller's
    // contract), and its vectors hold exactly `L x L` elements of `T` (`as_vectors`).
    unsafe {
        Some(match (isa, L) {
            (Isa::Avx512, 16) if f32 => {
                from_vectors(x86::transposed(as_vectors::<T, L, __m512, 16>(m)))
            }
            (Isa::Avx512, 8) if f64 => {
                from_vectors(transposed_f64_8x8(as_vectors::<T, L, __m512d, 8>(m)))
            }
            (Isa::Avx2 | Isa::Avx512, 8) if f32 => {
                from_vectors(x86::transposed_8x8(as_vectors::<T, L, __m256, 8>(m)))
            }
            (Isa::Avx2 | Isa::Avx512, 4) if f64 => {
                from_vectors(transposed_f64_4x4(as_vectors::<T, L, __m256d, 4>(m)))
            }
            _ => return None,
        })
    }
}

/// The rows of `m` as `M` vectors.
///
/// # Safety
///
/// `[V; M]` has the size of `[[T; L]; L]` and every bit pattern of it is a valid `V`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn as_vectors<T, const L: usize, V, const M: usize>(m: &[[T; L]; L]) -> [V; M] {
    assert_eq!(size_of::<[[T; L]; L]>(), size_of::<[V; M]>());
    // SAFETY: the sizes agree (asserted), the read is unaligned, and any bits are a `V`
    // (the caller's contract).
    unsafe { std::ptr::read_unaligned((m as *const [[T; L]; L]).cast::<[V; M]>()) }
}

/// The inverse of [`as_vectors`].
///
/// # Safety
///
/// `[V; M]` has the size of `[[T; L]; L]`, and its bits are `L x L` valid `T`s.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn from_vectors<T, const L: usize, V, const M: usize>(v: [V; M]) -> [[T; L]; L] {
    assert_eq!(size_of::<[[T; L]; L]>(), size_of::<[V; M]>());
    // SAFETY: as above.
    unsafe { std::ptr::read_unaligned((&v as *const [V; M]).cast::<[[T; L]; L]>()) }
}

/// An 8 x 8 block of `f64` transposed in registers: element `j` of result `i` is element
/// `i` of `r[j]` (pairs of elements, then 128-bit pairs, then halves).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
fn transposed_f64_8x8(r: [std::arch::x86_64::__m512d; 8]) -> [std::arch::x86_64::__m512d; 8] {
    use std::arch::x86_64::*;
    // t[2p]: rows 2p, 2p + 1 at the even columns; t[2p + 1]: at the odd ones.
    let t: [__m512d; 8] = std::array::from_fn(|i| {
        let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
        if i % 2 == 0 {
            _mm512_unpacklo_pd(a, b)
        } else {
            _mm512_unpackhi_pd(a, b)
        }
    });
    // u[4h + 2e + q]: rows 4h..4h + 4 of columns (2q + e) and (2q + e) + 4 for the parity e.
    let u: [__m512d; 8] = std::array::from_fn(|i| {
        let (h, e, q) = (i / 4, (i / 2) % 2, i % 2);
        let (a, b) = (t[4 * h + e], t[4 * h + 2 + e]);
        if q == 0 {
            _mm512_shuffle_f64x2::<0x88>(a, b)
        } else {
            _mm512_shuffle_f64x2::<0xdd>(a, b)
        }
    });
    std::array::from_fn(|j| {
        // Column j: parity e = j % 2, pair q = (j / 2) % 2, half = j / 4.
        let (e, q) = (j % 2, (j / 2) % 2);
        let (a, b) = (u[2 * e + q], u[4 + 2 * e + q]);
        if j < 4 {
            _mm512_shuffle_f64x2::<0x88>(a, b)
        } else {
            _mm512_shuffle_f64x2::<0xdd>(a, b)
        }
    })
}

/// A 4 x 4 block of `f64` transposed in registers: element `j` of result `i` is element
/// `i` of `r[j]`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn transposed_f64_4x4(r: [std::arch::x86_64::__m256d; 4]) -> [std::arch::x86_64::__m256d; 4] {
    use std::arch::x86_64::*;
    let t = [
        _mm256_unpacklo_pd(r[0], r[1]),
        _mm256_unpackhi_pd(r[0], r[1]),
        _mm256_unpacklo_pd(r[2], r[3]),
        _mm256_unpackhi_pd(r[2], r[3]),
    ];
    [
        _mm256_permute2f128_pd::<0x20>(t[0], t[2]),
        _mm256_permute2f128_pd::<0x20>(t[1], t[3]),
        _mm256_permute2f128_pd::<0x31>(t[0], t[2]),
        _mm256_permute2f128_pd::<0x31>(t[1], t[3]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Float;

    /// Every element of [`interleave`] and [`deinterleave`] against their definitions,
    /// over line and step counts around the 8 x 8 and 16 x 16 blocks, in f32 (the
    /// register transposes of every instruction set the CPU has), f64 and bytes.
    fn check<T: Float>() {
        for isa in Isa::ALL.into_iter().filter(|isa| isa.is_supported()) {
            check_in::<T>(isa);
        }
    }

    fn check_in<T: Float>(isa: Isa) {
        let data: Vec<T> = (0..5000).map(|i| T::from_usize(i)).collect();
        let width = 32;
        for lanes in [1, 7, 8, 9, 15, 16, 17, 32] {
            for count in [1, 7, 8, 9, 15, 16, 17, 40] {
                let starts: Vec<usize> = (0..lanes).map(|l| 7 + l * 113).collect();
                let mut steps = vec![T::nan(); count * width];
                interleave(isa, &data, &starts, &mut steps, width);
                for p in 0..count {
                    for lane in 0..width {
                        let got = steps[p * width + lane];
                        if lane < lanes {
                            let want = data[starts[lane] + p];
                            assert_eq!(
                                got.to_bits_u64(),
                                want.to_bits_u64(),
                                "{isa:?}: {lanes} lines, {count} steps, step {p}, lane {lane}"
                            );
                        } else {
                            assert!(got.is_nan(), "lane {lane} past the lines was written");
                        }
                    }
                }
                let mut back = vec![T::nan(); data.len()];
                deinterleave(isa, &steps, width, &mut back, 7, 113, lanes);
                for (i, (got, want)) in back.iter().zip(&data).enumerate() {
                    let written =
                        (0..lanes).any(|l| (7 + l * 113..7 + l * 113 + count).contains(&i));
                    if written {
                        assert_eq!(
                            got.to_bits_u64(),
                            want.to_bits_u64(),
                            "{isa:?}: element {i}"
                        );
                    } else {
                        assert!(
                            got.is_nan(),
                            "{isa:?}: element {i} outside the lines was written"
                        );
                    }
                }
            }
        }
    }

    /// [`transposed_square`] of every size the recurrences use, at every instruction set
    /// this CPU has (the register transposes where the size is the set's), against the
    /// definition.
    #[test]
    fn squares_transpose_at_every_instruction_set() {
        fn check<T: Float, const L: usize>(isa: Isa) {
            let m: [[T; L]; L] =
                std::array::from_fn(|i| std::array::from_fn(|s| T::from_usize(i * 100 + s)));
            let got = transposed_square(isa, m);
            for s in 0..L {
                for i in 0..L {
                    assert_eq!(
                        got[s][i].to_bits_u64(),
                        m[i][s].to_bits_u64(),
                        "{isa:?}, {L} x {L}: [{s}][{i}]"
                    );
                }
            }
        }
        for isa in Isa::ALL.into_iter().filter(|isa| isa.is_supported()) {
            check::<f32, 16>(isa);
            check::<f32, 8>(isa);
            check::<f32, 4>(isa);
            check::<f64, 8>(isa);
            check::<f64, 4>(isa);
            check::<f64, 2>(isa);
        }
    }

    #[test]
    fn interleaving_is_the_transposition_and_deinterleaving_undoes_it() {
        check::<f32>();
        check::<f64>();
        let bytes: Vec<u8> = (0..=255).collect();
        let mut steps = vec![0; 3 * 4];
        interleave(Isa::Baseline, &bytes, &[0, 10, 20], &mut steps, 4);
        assert_eq!(steps, [0, 10, 20, 0, 1, 11, 21, 0, 2, 12, 22, 0]);
    }
}
