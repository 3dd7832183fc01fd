//! The aarch64 microkernels of the blocked product, on NEON's fused multiply-add.
//!
//! NEON is part of the aarch64 baseline, so there is nothing to detect at run time. Its
//! 32 128-bit registers hold a tile of 6 rows of 4 vectors (24 accumulators), the 4
//! vectors of a step of `B` and a broadcast of `A`: 6 x 16 for `f32`, 6 x 8 for `f64`
//! (`MR` divides `MC`, `NR` divides 32 and `NC`). Each output is the canonical chain:
//! `vfmaq` rounds once like `mul_add` and the x86 kernels' `fmadd`, over `k` in increasing
//! order from `-0` (or from the tile, for a later `k` block), so the bits are theirs.

use std::any::TypeId;
use std::arch::aarch64::{
    float32x4_t, float64x2_t, vdupq_n_f32, vdupq_n_f64, vfmaq_f32, vfmaq_f64, vld1q_f32, vld1q_f64,
    vst1q_f32, vst1q_f64,
};

use super::{ARows, BPanel, Microkernel, Operands};
use crate::{DType, Float};

/// Rows of a tile.
const ROWS: usize = 6;
/// Vectors per row of a tile.
const VECS: usize = 4;

/// The blocked product with the NEON microkernel of `T`.
pub(super) fn blocked<T: Float>(operands: Operands<'_, T>, c: &mut [T]) {
    if T::DTYPE == DType::F32 {
        super::blocked::<T, F32Kernel, ROWS, { 4 * VECS }>(operands, c);
    } else {
        super::blocked::<T, F64Kernel, ROWS, { 2 * VECS }>(operands, c);
    }
}

/// `x` as a slice of `U`, which `T` is (checked: a kernel runs on its own type only).
fn same<T: 'static, U: 'static>(x: &[T]) -> &[U] {
    assert_eq!(
        TypeId::of::<T>(),
        TypeId::of::<U>(),
        "a kernel of another type"
    );
    // SAFETY: `T` and `U` are the same type (checked just above).
    unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<U>(), x.len()) }
}

/// `x` as a slice of `U`, which `T` is (checked).
fn same_mut<T: 'static, U: 'static>(x: &mut [T]) -> &mut [U] {
    assert_eq!(
        TypeId::of::<T>(),
        TypeId::of::<U>(),
        "a kernel of another type"
    );
    // SAFETY: `T` and `U` are the same type (checked just above).
    unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast::<U>(), x.len()) }
}

/// A microkernel of [`ROWS`] rows of [`VECS`] vectors of `$t` (`$lanes` to a vector),
/// from NEON's broadcast, load, store and `$fma(acc, b, a) = acc + b * a` (one rounding).
/// It implements the trait for every `T` so that [`blocked`] can pick it by `T`'s
/// [`DType`]; it runs on `$t` only.
macro_rules! neon_kernel {
    ($name:ident, $t:ty, $vec:ty, $lanes:literal,
     $splat:ident, $load:ident, $store:ident, $fma:ident) => {
        struct $name;

        impl<T: Float> Microkernel<T, ROWS, { $lanes * VECS }> for $name {
            #[inline(always)]
            fn run(
                kc: usize,
                a: ARows<'_, T, ROWS>,
                b: BPanel<'_, T>,
                c: &mut [T],
                stride: usize,
                first: bool,
            ) {
                const NR: usize = $lanes * VECS;
                let (a_data, b_data, c) = (
                    same::<T, $t>(a.data),
                    same::<T, $t>(b.data),
                    same_mut::<T, $t>(c),
                );
                assert!(b.holds(kc, NR) && c.len() >= (ROWS - 1) * stride + NR);
                // SAFETY: NEON is in the aarch64 baseline; every pointer below stays inside
                // `c` or `b`, whose lengths were asserted just above, or inside `a`'s rows,
                // which `ARows::new` checked for `kc` steps.
                unsafe {
                    let out: [*mut $t; ROWS] =
                        std::array::from_fn(|i| c.as_mut_ptr().add(i * stride));
                    let mut acc: [[$vec; VECS]; ROWS] = std::array::from_fn(|i| {
                        std::array::from_fn(|v| {
                            if first {
                                $splat(-0.0)
                            } else {
                                $load(out[i].add(v * $lanes))
                            }
                        })
                    });
                    let mut rows: [*const $t; ROWS] =
                        a.starts.map(|start| a_data.as_ptr().add(start));
                    for p in 0..kc {
                        let bp = b_data.as_ptr().add(p * b.step);
                        let bv: [$vec; VECS] = std::array::from_fn(|v| $load(bp.add(v * $lanes)));
                        for (row, ap) in acc.iter_mut().zip(&mut rows) {
                            let ai = $splat(**ap);
                            *ap = ap.wrapping_add(a.step);
                            for (x, &bj) in row.iter_mut().zip(&bv) {
                                *x = $fma(*x, bj, ai);
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

neon_kernel!(
    F32Kernel,
    f32,
    float32x4_t,
    4,
    vdupq_n_f32,
    vld1q_f32,
    vst1q_f32,
    vfmaq_f32
);
neon_kernel!(
    F64Kernel,
    f64,
    float64x2_t,
    2,
    vdupq_n_f64,
    vld1q_f64,
    vst1q_f64,
    vfmaq_f64
);
