//! The portable `f32` transcendentals of [`crate::Float`] (`libm`'s `expf`, `expm1f`,
//! `tanhf`, and the sigmoid built on `expf`), [`LANES`] values at a time, bitwise equal to
//! the scalar functions.
//!
//! Each function is `libm`'s algorithm with its branches turned into per-lane selects:
//! every lane computes every case with the same operations in the same order, then keeps
//! the case its input selects, so a lane's result is the scalar function's to the bit (Rust
//! never contracts a multiply and an add, and the vector units round like the scalar ones).
//! Inputs outside the range where the cases are written out (huge, infinite or NaN) send
//! the whole group to the scalar function. The loops vectorize in
//! [`crate::cpu::simd::widest`] versions of their callers; the tests compare the results
//! with `libm` over a sweep of every exponent and many mantissas.

use std::any::TypeId;

/// Values per call.
pub(crate) const LANES: usize = 16;

/// `x` as `f32`s when `T` is `f32`: the lane functions are `f32`'s.
pub(crate) fn as_f32<T: 'static>(x: &[T]) -> Option<&[f32]> {
    // SAFETY: `T` is `f32` (the same type, so the same layout).
    (TypeId::of::<T>() == TypeId::of::<f32>())
        .then(|| unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<f32>(), x.len()) })
}

/// `x` as `f32`s when `T` is `f32`.
pub(crate) fn as_f32_mut<T: 'static>(x: &mut [T]) -> Option<&mut [f32]> {
    // SAFETY: `T` is `f32` (the same type, so the same layout).
    (TypeId::of::<T>() == TypeId::of::<f32>())
        .then(|| unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast::<f32>(), x.len()) })
}

/// `out[i] = f(x[i])` in groups of [`LANES`] (a last short group padded with zeros whose
/// results are dropped), for [`crate::cpu::simd::widest`].
pub(crate) struct LaneMap<'a, F> {
    pub(crate) f: F,
    pub(crate) x: &'a [f32],
    pub(crate) out: &'a mut [f32],
}

impl<F: Fn(&Lanes) -> Lanes> crate::cpu::simd::Vectorized for LaneMap<'_, F> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        for (out, x) in self.out.chunks_mut(LANES).zip(self.x.chunks(LANES)) {
            let mut values = [0.0; LANES];
            values[..x.len()].copy_from_slice(x);
            out.copy_from_slice(&(self.f)(&values)[..out.len()]);
        }
    }
}

type Lanes = [f32; LANES];

// libm's constants (expf.rs, expm1f.rs), by their bits.
const LN2_HI_EXP: f32 = f32::from_bits(0x3f317200);
const LN2_LO_EXP: f32 = f32::from_bits(0x35bfbe8e);
const INV_LN2: f32 = f32::from_bits(0x3fb8aa3b);
const EXP_P1: f32 = f32::from_bits(0x3e2aaa8f);
const EXP_P2: f32 = f32::from_bits(0xbb355215);

const LN2_HI_EXPM1: f32 = f32::from_bits(0x3f317180);
const LN2_LO_EXPM1: f32 = f32::from_bits(0x3717f7d1);
const EXPM1_Q1: f32 = f32::from_bits(0xbd088868);
const EXPM1_Q2: f32 = f32::from_bits(0x3acf3010);

/// `2^k` for `-126 <= k <= 127`.
#[inline(always)]
fn two_to(k: i32) -> f32 {
    f32::from_bits(((0x7f + k) as u32) << 23)
}

/// libm's `k` of the reduction `x = k ln2 + r`: `(x / ln2 +- 0.5) as i32` where the bits
/// of `|x|` exceed `general_above`, `+-1` down to 0.5 ln2, 0 below. For `|x| < 128` only
/// (the fast paths' range).
#[inline(always)]
fn reduction_index(v: f32, general_above: u32) -> i32 {
    let hx = v.to_bits() & 0x7fff_ffff;
    let negative = v.to_bits() >> 31 != 0;
    debug_assert!(v.abs() < 128.0);
    let scaled = INV_LN2 * v + if negative { -0.5 } else { 0.5 };
    // SAFETY: |scaled| < 186, finite and inside i32, where `as i32` truncates just the
    // same; the unchecked form lets the conversion vectorize (`as` saturates, which the
    // compiler does lane by lane).
    let truncated = unsafe { scaled.to_int_unchecked::<i32>() };
    if hx > general_above {
        truncated
    } else if hx > 0x3eb1_7218 {
        if negative { -1 } else { 1 }
    } else {
        0
    }
}

/// `libm::expf` of each lane.
#[inline(always)]
pub(crate) fn expf(x: &Lanes) -> Lanes {
    // Below 0x42aeac50 (|x| < 87.34) the result is a normal number or a subnormal from one
    // final scaling; above, overflow, underflow, infinities and NaN take libm's branches.
    if x.iter().any(|v| v.to_bits() & 0x7fff_ffff >= 0x42ae_ac50) {
        return x.map(libm::expf);
    }
    let mut out = [0.0; LANES];
    for j in 0..LANES {
        let v = x[j];
        let hx = v.to_bits() & 0x7fff_ffff;
        // libm's three reductions, as one: k = 0 gives hi = x and lo = 0 exactly.
        let k = reduction_index(v, 0x3f85_1592);
        let kf = k as f32;
        let hi = v - kf * LN2_HI_EXP;
        let lo = kf * LN2_LO_EXP;
        let r = hi - lo;
        let rr = r * r;
        let c = r - rr * (EXP_P1 + rr * EXP_P2);
        let y = 1.0 + (r * c / (2.0 - c) - lo + hi);
        // scalbnf(y, k) is one multiplication for these k; y * 2^0 = y.
        let scaled = y * two_to(k);
        out[j] = if hx > 0x3900_0000 { scaled } else { 1.0 + v };
    }
    out
}

/// `libm::expm1f` of each lane.
#[inline(always)]
pub(crate) fn expm1f(x: &Lanes) -> Lanes {
    // Below 27 ln2 every case is written out below; above, libm's branches.
    if x.iter().any(|v| v.to_bits() & 0x7fff_ffff >= 0x4195_b844) {
        return x.map(libm::expm1f);
    }
    let mut out = [0.0; LANES];
    for j in 0..LANES {
        let v = x[j];
        let hx = v.to_bits() & 0x7fff_ffff;
        // libm's reductions as one: k = +-1 gives hi = x -+ ln2_hi and lo = +-ln2_lo, and
        // k = 0 gives hi = x, lo = 0, c = 0 exactly. (Its test is `hx >= 0x3f851592`.)
        let k = reduction_index(v, 0x3f85_1591);
        let t = k as f32;
        let hi = v - t * LN2_HI_EXPM1;
        let lo = t * LN2_LO_EXPM1;
        let r = hi - lo;
        let c = (hi - r) - lo;
        let hfx = 0.5 * r;
        let hxs = r * hfx;
        let r1 = 1.0 + hxs * (EXPM1_Q1 + hxs * EXPM1_Q2);
        let t3 = 3.0 - r1 * hfx;
        let e0 = hxs * ((r1 - t3) / (6.0 - r * t3));
        let at_zero = r - (r * e0 - hxs);
        let e = r * (e0 - c) - c - hxs;
        let at_minus_one = 0.5 * (r - e) - 0.5;
        let at_one = if r < -0.25 {
            -2.0 * (e - (r + 0.5))
        } else {
            1.0 + 2.0 * (r - e)
        };
        // |k| <= 27 here, so 2^k and 2^-k are normal.
        let two_k = two_to(k);
        let two_minus_k = two_to(-k);
        let outside = (r - e + 1.0) * two_k - 1.0;
        let below_23 = (r - e + (1.0 - two_minus_k)) * two_k;
        let from_23 = (r - (e + two_minus_k) + 1.0) * two_k;
        let general = if k < 0 {
            outside
        } else if k < 23 {
            below_23
        } else {
            from_23
        };
        let value = match k {
            0 => at_zero,
            -1 => at_minus_one,
            1 => at_one,
            _ => general,
        };
        out[j] = if hx < 0x3300_0000 { v } else { value };
    }
    out
}

/// `libm::tanhf` of each lane.
#[inline(always)]
pub(crate) fn tanhf(x: &Lanes) -> Lanes {
    // Up to |x| = 9 the argument of expm1f stays below 27 ln2; above, libm's branches.
    if x.iter().any(|v| v.to_bits() & 0x7fff_ffff > 0x4110_0000) {
        return x.map(libm::tanhf);
    }
    let mut argument = [0.0; LANES];
    for j in 0..LANES {
        let w = x[j].to_bits() & 0x7fff_ffff;
        let magnitude = f32::from_bits(w);
        argument[j] = if w > 0x3e82_c578 {
            2.0 * magnitude
        } else {
            -2.0 * magnitude
        };
    }
    let t = expm1f(&argument);
    let mut out = [0.0; LANES];
    for j in 0..LANES {
        let w = x[j].to_bits() & 0x7fff_ffff;
        let tt = if w > 0x3f0c_9f54 {
            1.0 - 2.0 / (t[j] + 2.0)
        } else if w > 0x3e82_c578 {
            t[j] / (t[j] + 2.0)
        } else if w >= 0x0080_0000 {
            -t[j] / (t[j] + 2.0)
        } else {
            f32::from_bits(w)
        };
        out[j] = if x[j].to_bits() >> 31 != 0 { -tt } else { tt };
    }
    out
}

/// [`crate::kernels::UnaryOp::Sigmoid`] of each lane: `1 / (1 + e^-x)` for `x >= 0`,
/// `e^x / (1 + e^x)` otherwise, both from one `expf(-|x|)`.
#[inline(always)]
pub(crate) fn sigmoid(x: &Lanes) -> Lanes {
    let e = expf(&x.map(|v| -v.abs()));
    let mut out = [0.0; LANES];
    for j in 0..LANES {
        out[j] = if x[j] >= 0.0 {
            1.0 / (1.0 + e[j])
        } else {
            e[j] / (1.0 + e[j])
        };
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::UnaryOp;

    /// Every exponent and sign with a spread of mantissas (about 4.2 million inputs), and
    /// the edges of each function's cases, in groups of LANES with one odd value mixed
    /// in to exercise the fallback.
    fn sweep(check: impl Fn(&Lanes)) {
        let mut group = [0.0f32; LANES];
        let mut fill = 0;
        let mut push = |v: f32| {
            group[fill] = v;
            fill += 1;
            if fill == LANES {
                check(&group);
                fill = 0;
            }
        };
        for bits in (0..=u32::MAX).step_by(1021) {
            push(f32::from_bits(bits));
        }
        let edges: [u32; 12] = [
            0x42ae_ac50,
            0x3f85_1592,
            0x3eb1_7218,
            0x3900_0000,
            0x4195_b844,
            0x3300_0000,
            0x4110_0000,
            0x3f0c_9f54,
            0x3e82_c578,
            0x0080_0000,
            0x4120_0000,
            0x42b1_7218,
        ];
        for edge in edges {
            for delta in 0..64u32 {
                for bits in [edge - delta, edge + delta] {
                    push(f32::from_bits(bits));
                    push(-f32::from_bits(bits));
                }
            }
        }
    }

    fn same(name: &str, x: &Lanes, got: Lanes, want: impl Fn(f32) -> f32) {
        for j in 0..LANES {
            let w = want(x[j]);
            assert!(
                got[j].to_bits() == w.to_bits() || (got[j].is_nan() && w.is_nan()),
                "{name}({:e} = {:#x}): {:e} instead of {:e}",
                x[j],
                x[j].to_bits(),
                got[j],
                w
            );
        }
    }

    #[test]
    fn every_function_is_libms_to_the_bit() {
        sweep(|x| {
            same("expf", x, expf(x), libm::expf);
            same("expm1f", x, expm1f(x), libm::expm1f);
            same("tanhf", x, tanhf(x), libm::tanhf);
            same("sigmoid", x, sigmoid(x), |v| UnaryOp::Sigmoid.apply(v));
        });
    }
}
