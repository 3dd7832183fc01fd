//! The x86-64 microkernels of the blocked product, on AVX-512F and AVX2 with FMA, and
//! the register transposes that the packing of `B` and the matrix-vector product use.
//!
//! A microkernel keeps its tile of the output in registers while it walks `k`: `f32`
//! tiles of 8 x 32 (AVX-512) and 6 x 16 (AVX2), 4-row ones for products of at most
//! `SHORT_ROWS` rows, `f64` tiles of 6 x 16 and 6 x 8. Each output is the canonical
//! chain: `fmadd` rounds once like `mul_add` and NEON's `vfmaq`, over `k` in increasing
//! order from `-0` (or from the tile, for a later `k` block), so the bits are those of
//! every other instruction set. Nothing here checks the CPU: the callers in the parent
//! module run these functions only at a level that `crate::cpu::simd::isa` allows.

use std::any::TypeId;
use std::arch::x86_64::*;

use super::{ARows, BPanel, GEMV_ROWS, Microkernel, Operands, SHORT_ROWS, blocked};
use crate::Float;

/// Whether `T` is `U`.
fn same<T: 'static, U: 'static>() -> bool {
    TypeId::of::<T>() == TypeId::of::<U>()
}

/// `operands` as operands of `U`, which `T` is.
fn cast<'a, T: 'static, U: 'static>(operands: Operands<'a, T>) -> Operands<'a, U> {
    assert!(same::<T, U>(), "cast between different element types");
    // (`transmute` cannot see that the sizes match: the epilogue's activation holds a
    // `T`; the original is not dropped, so nothing is owned twice.)
    let operands = std::mem::ManuallyDrop::new(operands);
    // SAFETY: `T` and `U` are the same type (same TypeId, asserted just above), so the
    // two structs are one layout and every reference keeps its referent's type, length
    // and lifetime.
    unsafe { std::mem::transmute_copy::<Operands<'a, T>, Operands<'a, U>>(&operands) }
}

/// `c` as a slice of `U` when `T` is `U`.
fn cast_out<T: 'static, U: 'static>(c: &mut [T]) -> &mut [U] {
    assert_eq!(
        TypeId::of::<T>(),
        TypeId::of::<U>(),
        "the element type was checked by cast"
    );
    // SAFETY: `T` and `U` are the same type, checked just above.
    unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr().cast::<U>(), c.len()) }
}

/// An FMA microkernel with `ROWS` rows of `VECS` vectors, from the instruction set's
/// load, store, broadcast and fused multiply-add.
macro_rules! fma_kernel {
    ($name:ident, $t:ty, $vec:ty, $lanes:literal, $rows:literal, $vecs:literal,
     $zero:ident, $load:ident, $store:ident, $broadcast:ident, $fma:ident) => {
        struct $name;

        impl Microkernel<$t, $rows, { $lanes * $vecs }> for $name {
            #[inline(always)]
            fn run(
                kc: usize,
                a: ARows<'_, $t, $rows>,
                b: BPanel<'_, $t>,
                c: &mut [$t],
                stride: usize,
                first: bool,
            ) {
                const NR: usize = $lanes * $vecs;
                assert!(b.holds(kc, NR) && c.len() >= ($rows - 1) * stride + NR);
                // SAFETY: the caller runs this only where the CPU has the kernel's
                // instruction set (inside a `#[target_feature]` function checked at
                // run time); every pointer below stays inside `c` or `b`, whose lengths
                // were asserted just above, or inside `a`'s rows, which `ARows::new`
                // checked for `kc` steps.
                unsafe {
                    let out: [*mut $t; $rows] =
                        std::array::from_fn(|i| c.as_mut_ptr().add(i * stride));
                    let mut acc = [[$zero(); $vecs]; $rows];
                    for (row, &o) in acc.iter_mut().zip(&out) {
                        for (v, x) in row.iter_mut().enumerate() {
                            *x = if first {
                                $broadcast(-0.0)
                            } else {
                                $load(o.add(v * $lanes))
                            };
                        }
                    }
                    let mut rows: [*const $t; $rows] =
                        a.starts.map(|start| a.data.as_ptr().add(start));
                    for p in 0..kc {
                        let bp = b.data.as_ptr().add(p * b.step);
                        let bv: [$vec; $vecs] = std::array::from_fn(|v| $load(bp.add(v * $lanes)));
                        for (row, ap) in acc.iter_mut().zip(&mut rows) {
                            let ai = $broadcast(**ap);
                            *ap = ap.wrapping_add(a.step);
                            for (x, &bj) in row.iter_mut().zip(&bv) {
                                *x = $fma(ai, bj, *x);
                            }
                        }
                    }
                    for (row, &o) in acc.iter().zip(&out) {
                        for (v, x) in row.iter().enumerate() {
                            $store(o.add(v * $lanes), *x);
                        }
                    }
                }
            }
        }
    };
}

/// An `f32` [`fma_kernel`] of AVX-512's or AVX2's intrinsics.
macro_rules! f32_kernel {
    (avx512, $name:ident, $rows:literal, $vecs:literal) => {
        fma_kernel!(
            $name,
            f32,
            __m512,
            16,
            $rows,
            $vecs,
            _mm512_setzero_ps,
            _mm512_loadu_ps,
            _mm512_storeu_ps,
            _mm512_set1_ps,
            _mm512_fmadd_ps
        );
    };
    (avx2, $name:ident, $rows:literal, $vecs:literal) => {
        fma_kernel!(
            $name,
            f32,
            __m256,
            8,
            $rows,
            $vecs,
            _mm256_setzero_ps,
            _mm256_loadu_ps,
            _mm256_storeu_ps,
            _mm256_set1_ps,
            _mm256_fmadd_ps
        );
    };
}

f32_kernel!(avx512, Avx512F32, 8, 2);
f32_kernel!(avx512, Avx512F32Short, 4, 4);
f32_kernel!(avx2, Avx2F32, 6, 2);
f32_kernel!(avx2, Avx2F32Short, 4, 2);
fma_kernel!(
    Avx512F64,
    f64,
    __m512d,
    8,
    6,
    2,
    _mm512_setzero_pd,
    _mm512_loadu_pd,
    _mm512_storeu_pd,
    _mm512_set1_pd,
    _mm512_fmadd_pd
);
fma_kernel!(
    Avx2F64,
    f64,
    __m256d,
    4,
    6,
    2,
    _mm256_setzero_pd,
    _mm256_loadu_pd,
    _mm256_storeu_pd,
    _mm256_set1_pd,
    _mm256_fmadd_pd
);

/// A 16 x 16 block of `f32` transposed in registers: element `j` of result `i` is
/// element `i` of `r[j]` (pairs of elements, then of pairs, then 128-bit quarters).
#[target_feature(enable = "avx512f")]
#[inline]
pub(in crate::cpu) fn transposed(r: [__m512; 16]) -> [__m512; 16] {
    {
        let t: [__m512; 16] = std::array::from_fn(|i| {
            let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
            if i % 2 == 0 {
                _mm512_unpacklo_ps(a, b)
            } else {
                _mm512_unpackhi_ps(a, b)
            }
        });
        let r: [__m512; 16] = std::array::from_fn(|i| {
            let group = i / 4 * 4;
            let (a, b) = (
                _mm512_castps_pd(t[group + (i % 4) / 2]),
                _mm512_castps_pd(t[group + (i % 4) / 2 + 2]),
            );
            _mm512_castpd_ps(if i % 2 == 0 {
                _mm512_unpacklo_pd(a, b)
            } else {
                _mm512_unpackhi_pd(a, b)
            })
        });
        let t: [__m512; 16] = std::array::from_fn(|i| {
            let (half, q) = (i / 8 * 8, i % 4);
            let (a, b) = (r[half + q], r[half + 4 + q]);
            if i % 8 < 4 {
                _mm512_shuffle_f32x4::<0x88>(a, b)
            } else {
                _mm512_shuffle_f32x4::<0xdd>(a, b)
            }
        });
        std::array::from_fn(|j| {
            let (a, b) = (t[j % 8], t[8 + j % 8]);
            if j < 8 {
                _mm512_shuffle_f32x4::<0x88>(a, b)
            } else {
                _mm512_shuffle_f32x4::<0xdd>(a, b)
            }
        })
    }
}

/// `dst[j * dst_stride + i] = rows[i][j]` for `i, j < 16`: a 16 x 16 block of `f32`
/// transposed in registers.
///
/// # Safety
///
/// The CPU supports AVX-512F; each `rows[i]` points at 16 readable `f32`, and
/// `dst + j * dst_stride` at 16 writable `f32` for every `j < 16`.
#[target_feature(enable = "avx512f")]
#[inline]
pub(in crate::cpu) unsafe fn transpose_16x16(
    rows: [*const f32; 16],
    dst: *mut f32,
    dst_stride: usize,
) {
    // SAFETY: the caller's contract covers every load and store.
    unsafe {
        let columns = transposed(std::array::from_fn(|i| _mm512_loadu_ps(rows[i])));
        for (j, column) in columns.into_iter().enumerate() {
            _mm512_storeu_ps(dst.add(j * dst_stride), column);
        }
    }
}

/// `dst[j * dst_stride + i] = rows[i][j]` for `i, j < 8`: an 8 x 8 block of `f32`
/// transposed in registers.
///
/// # Safety
///
/// The CPU supports AVX2; each `rows[i]` points at 8 readable `f32`, and
/// `dst + j * dst_stride` at 8 writable `f32` for every `j < 8`.
#[target_feature(enable = "avx2")]
#[inline]
pub(in crate::cpu) unsafe fn transpose_8x8(
    rows: [*const f32; 8],
    dst: *mut f32,
    dst_stride: usize,
) {
    // SAFETY: the caller's contract covers every load and store.
    unsafe {
        let columns = transposed_8x8(std::array::from_fn(|i| _mm256_loadu_ps(rows[i])));
        for (j, column) in columns.into_iter().enumerate() {
            _mm256_storeu_ps(dst.add(j * dst_stride), column);
        }
    }
}

/// The first `count < 16` floats at `p`, zeros in the other lanes.
///
/// # Safety
///
/// `p` points at `count` readable floats (the others are not accessed).
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn load_first_avx512(p: *const f32, count: usize) -> __m512 {
    // SAFETY: the mask reads only the first `count` floats (the caller's contract).
    unsafe { _mm512_maskz_loadu_ps(((1u32 << count) - 1) as u16, p) }
}

/// The first `count < 8` floats at `p`, zeros in the other lanes.
///
/// # Safety
///
/// `p` points at `count` readable floats (the others are not accessed).
#[target_feature(enable = "avx2")]
#[inline]
unsafe fn load_first_avx2(p: *const f32, count: usize) -> __m256 {
    let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(count as i32), lanes);
    // SAFETY: the mask reads only the first `count` floats (the caller's contract).
    unsafe { _mm256_maskload_ps(p, mask) }
}

/// `out[r] = a[r, ..] @ x` for the [`GEMV_ROWS`] rows of a row-major `f32` matrix
/// starting at `starts[r]` in `data`, each the canonical chain (fused multiply-adds
/// over `x` in order from `-0`), from the instruction set's load, store, broadcast,
/// fused multiply-add and register transpose of a `LANES x LANES` block. `LANES`
/// steps of `LANES` rows are transposed in registers and multiplied at once, so that
/// nothing is stored between the transposition and the chains; the groups of rows are
/// independent chains.
///
/// # Panics
///
/// When a row (`starts[r]..starts[r] + x.len()`) is not inside `data`.
macro_rules! row_major_gemv {
    ($name:ident, $features:literal, $vec:ty, $lanes:literal, $transpose:ident,
     $load:ident, $load_first:ident, $store:ident, $broadcast:ident, $fma:ident) => {
        #[target_feature(enable = $features)]
        pub(super) fn $name(
            data: &[f32],
            starts: &[usize; GEMV_ROWS],
            x: &[f32],
        ) -> [f32; GEMV_ROWS] {
            const LANES: usize = $lanes;
            const GROUPS: usize = GEMV_ROWS / LANES;
            let k = x.len();
            for &start in starts {
                assert!(start + k <= data.len(), "the rows lie inside the data");
            }
            let mut acc: [$vec; GROUPS] = [$broadcast(-0.0); GROUPS];
            let whole = k / LANES * LANES;
            for p in (0..whole).step_by(LANES) {
                for (g, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: `p + LANES <= k`: those elements of every row are in
                    // `data` (asserted above).
                    let columns = $transpose(std::array::from_fn(|i| unsafe {
                        $load(data.as_ptr().add(starts[g * LANES + i] + p))
                    }));
                    for (q, column) in columns.into_iter().enumerate() {
                        *acc = $fma(column, $broadcast(x[p + q]), *acc);
                    }
                }
            }
            if whole < k {
                let rest = k - whole;
                for (g, acc) in acc.iter_mut().enumerate() {
                    // SAFETY: every row holds its `rest` last elements from `whole`
                    // (asserted above), and only those are read.
                    let columns = $transpose(std::array::from_fn(|i| unsafe {
                        $load_first(data.as_ptr().add(starts[g * LANES + i] + whole), rest)
                    }));
                    for (q, column) in columns.into_iter().take(rest).enumerate() {
                        *acc = $fma(column, $broadcast(x[whole + q]), *acc);
                    }
                }
            }
            let mut out = [0.0; GEMV_ROWS];
            for (lanes, acc) in out.chunks_exact_mut(LANES).zip(acc) {
                // SAFETY: `lanes` is `LANES` writable `f32`.
                unsafe { $store(lanes.as_mut_ptr(), acc) };
            }
            out
        }
    };
}

row_major_gemv!(
    row_major_matrix_vector,
    "avx512f,fma",
    __m512,
    16,
    transposed,
    _mm512_loadu_ps,
    load_first_avx512,
    _mm512_storeu_ps,
    _mm512_set1_ps,
    _mm512_fmadd_ps
);
row_major_gemv!(
    row_major_matrix_vector_avx2,
    "avx2,fma",
    __m256,
    8,
    transposed_8x8,
    _mm256_loadu_ps,
    load_first_avx2,
    _mm256_storeu_ps,
    _mm256_set1_ps,
    _mm256_fmadd_ps
);

/// An 8 x 8 block of `f32` transposed in registers: element `j` of result `i` is
/// element `i` of `r[j]` (pairs, then pairs of pairs, then 128-bit halves).
#[target_feature(enable = "avx2")]
#[inline]
pub(in crate::cpu) fn transposed_8x8(r: [__m256; 8]) -> [__m256; 8] {
    let t: [__m256; 8] = std::array::from_fn(|i| {
        let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
        if i % 2 == 0 {
            _mm256_unpacklo_ps(a, b)
        } else {
            _mm256_unpackhi_ps(a, b)
        }
    });
    // s[4h + q]: rows 4h..4h + 4 of columns q and q + 4 (low and high halves).
    let s: [__m256; 8] = std::array::from_fn(|i| {
        let (base, q) = (i / 4 * 4, i % 4);
        let (a, b) = (t[base + q / 2], t[base + q / 2 + 2]);
        if q % 2 == 0 {
            _mm256_shuffle_ps::<0x44>(a, b)
        } else {
            _mm256_shuffle_ps::<0xee>(a, b)
        }
    });
    std::array::from_fn(|j| {
        let (a, b) = (s[j % 4], s[4 + j % 4]);
        if j < 4 {
            _mm256_permute2f128_ps::<0x20>(a, b)
        } else {
            _mm256_permute2f128_ps::<0x31>(a, b)
        }
    })
}

#[target_feature(enable = "avx512f,fma")]
pub(super) fn avx512<T: Float>(operands: Operands<'_, T>, c: &mut [T]) {
    if same::<T, f32>() && operands.m <= SHORT_ROWS {
        avx512_short(cast(operands), cast_out(c));
    } else if same::<T, f32>() {
        blocked::<f32, Avx512F32, 8, 32>(cast(operands), cast_out(c));
    } else {
        blocked::<f64, Avx512F64, 6, 16>(cast(operands), cast_out(c));
    }
}

#[target_feature(enable = "avx2,fma")]
pub(super) fn avx2<T: Float>(operands: Operands<'_, T>, c: &mut [T]) {
    if same::<T, f32>() && operands.m <= SHORT_ROWS {
        avx2_short(cast(operands), cast_out(c));
    } else if same::<T, f32>() {
        blocked::<f32, Avx2F32, 6, 16>(cast(operands), cast_out(c));
    } else {
        blocked::<f64, Avx2F64, 6, 8>(cast(operands), cast_out(c));
    }
}

// The short tiles are functions of their own, never inlined, so that the main tile's
// function is compiled as it was without them (inlining both into one function made
// AVX2's `[256, 3] @ [3, 400]` a third slower).
#[target_feature(enable = "avx512f,fma")]
#[inline(never)]
fn avx512_short(operands: Operands<'_, f32>, c: &mut [f32]) {
    blocked::<f32, Avx512F32Short, 4, 64>(operands, c);
}

#[target_feature(enable = "avx2,fma")]
#[inline(never)]
fn avx2_short(operands: Operands<'_, f32>, c: &mut [f32]) {
    blocked::<f32, Avx2F32Short, 4, 16>(operands, c);
}
