//! The decision of a global-norm clip (PyTorch's `clip_grad_norm_`, with a norm that does
//! not overflow) from the sums over the gradients: scalar formulas that every device runs
//! on its own sums, so that the clip has the same bits everywhere. `rlgrad_optim` clips
//! slices with them; `rlgrad_autodiff`'s `Gradients` clips on any device, reading the norm
//! back ([`plan_clip`]) or deciding on the device ([`clip_factors`], which the
//! [`OptimKernel`](super::OptimKernel)s `clip_scale` and `clip_plan` run) for a step that
//! reads nothing back.
//!
//! The norm is `sqrt(sum g^2)` in the canonical order; where the sum of squares overflows
//! (finite gradients, a norm above about `1.8e19` in f32) it is `sqrt(sum (g 2^-k)^2) 2^k`,
//! `k` the binary exponent of the largest `|g|` ([`down_scale`]); see
//! `rlgrad_optim::global_norm`.

use crate::{Float, Result, check};

/// The global norm as `root * 2^exponent`, so that it exists even where `T` cannot hold
/// it; `exponent` 0 is the plain form.
#[derive(Debug, Clone, Copy)]
pub struct Norm<T> {
    /// The root of the (scaled) sum of squares.
    pub root: T,
    /// `k` of the scaled form; 0 for the plain one.
    pub exponent: i32,
}

impl<T: Float> Norm<T> {
    /// The norm in `T`: infinite when it exceeds `T`'s range.
    pub fn value(self) -> T {
        if self.exponent == 0 {
            self.root
        } else {
            T::from_f64(self.root.as_f64() * 2f64.powi(self.exponent))
        }
    }
}

/// The exponent `e` of `x = m * 2^e` with `m` in `[0.5, 1)` (`x` finite and nonzero).
fn binary_exponent<T: Float>(x: T) -> i32 {
    let (mantissa, exponent, _) = x.integer_decode();
    i32::from(exponent) + (u64::BITS - mantissa.leading_zeros()) as i32
}

/// The canonical global norm (see `rlgrad_optim::global_norm`) of the gradients whose canonical sums
/// of `(g * scale)^2` are `sum_of_squares(scale)` and whose largest magnitude is
/// `largest_magnitude()` (asked only when the plain sum overflows).
pub fn norm_from<T: Float>(
    mut sum_of_squares: impl FnMut(T) -> Result<T>,
    largest_magnitude: impl FnOnce() -> Result<T>,
) -> Result<Norm<T>> {
    let sum = sum_of_squares(T::one())?;
    if !sum.is_infinite() {
        // Finite, or NaN from a NaN gradient: the plain sum of squares.
        return Ok(Norm {
            root: sum.sqrt(),
            exponent: 0,
        });
    }
    // No NaN (the sum would be NaN): either an infinite gradient, or squares that overflow.
    let largest = largest_magnitude()?;
    if largest.is_infinite() {
        return Ok(Norm {
            root: largest,
            exponent: 0,
        });
    }
    // Scale by 2^-k, k the exponent of the largest gradient (at most two below T's
    // largest, so that 2^-k stays a normal number): the scaled squares are at most 16.
    Ok(Norm {
        root: sum_of_squares(down_scale(largest))?.sqrt(),
        exponent: scale_exponent(largest),
    })
}

/// How a global-norm clip rescales a step's gradients ([`plan_clip`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Clipping<T> {
    /// The global norm before clipping (`rlgrad_optim::global_norm`).
    pub norm: T,
    /// `Some((first, second))` when the gradients are clipped: each `g` becomes
    /// `(g * first) * second`, or `g * second` when `first` is 1; `None` when they stay.
    pub scale: Option<(T, T)>,
}

/// The decision of `rlgrad_optim::clip_grad_norm`, from sums that the caller computes where its gradients
/// are (a GPU's, say): `sum_of_squares(scale)` must return the canonical sum of
/// `(g * scale) * (g * scale)` over the gradients concatenated in order (`g * g` when
/// `scale` is 1), and `largest_magnitude()` the largest `|g|`, asked only when the plain
/// sum overflows. With the Cpu's sums this is exactly `clip_grad_norm`'s norm and
/// scaling, so a device that computes the same canonical sums clips to the same bits.
/// An error when `max_norm` is not finite and positive (named as `function`'s), or one
/// that a sum returned.
///
/// ```
/// use rlgrad_core::kernels::clip::plan_clip;
/// // Gradients [3, 4]: sums of squares 25 (scale 1).
/// let clipping = plan_clip("example", 1.0, |_| Ok(25.0f32), || Ok(4.0))?;
/// assert_eq!(clipping.norm, 5.0);
/// let (first, second) = clipping.scale.unwrap();
/// assert_eq!(first, 1.0);
/// assert!((3.0 * second - 0.6).abs() < 1e-6);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn plan_clip<T: Float>(
    function: &'static str,
    max_norm: f64,
    sum_of_squares: impl FnMut(T) -> Result<T>,
    largest_magnitude: impl FnOnce() -> Result<T>,
) -> Result<Clipping<T>> {
    check::positive(function, "max_norm", max_norm)?;
    let norm = norm_from(sum_of_squares, largest_magnitude)?;
    let scale = if norm.exponent == 0 {
        let coef = T::from_f64(max_norm) / (norm.root + T::from_f64(1e-6));
        // A NaN coefficient (non-finite norm) scales too, as in PyTorch.
        (coef < T::one() || coef.is_nan()).then_some((T::one(), coef))
    } else {
        // coef = max_norm / (root 2^k + 1e-6), applied as (g 2^-k) (coef 2^k) so that
        // neither factor leaves T's normal range.
        let down = 0.5f64.powi(norm.exponent);
        let coef_up = max_norm / (norm.root.as_f64() + 1e-6 * down);
        (coef_up < 2f64.powi(norm.exponent)).then(|| (T::from_f64(down), T::from_f64(coef_up)))
    };
    Ok(Clipping {
        norm: norm.value(),
        scale,
    })
}

/// The exponent `k` that scales a clip whose sum of squares overflows: the binary exponent
/// of the largest `|g|`, at most two below `T`'s largest (so that `2^-k` stays normal).
fn scale_exponent<T: Float>(largest: T) -> i32 {
    binary_exponent(largest).min(binary_exponent(T::max_value()) - 2)
}

/// `2^-k` for the largest `|g|` `largest` (`k` its binary exponent, at most two below
/// `T`'s largest), rounded to `T`: what the gradients are multiplied by before the second
/// sum of squares where the first overflows; 1 where `largest` is zero or not finite
/// (that sum is then not used).
pub fn down_scale<T: Float>(largest: T) -> T {
    if largest == T::zero() || !largest.is_finite() {
        return T::one();
    }
    T::from_f64(0.5f64.powi(scale_exponent(largest)))
}

/// [`plan_clip`]'s decision from all three sums at once, as a device computes them without
/// reading anything back: `sum` of `g * g`, the `largest` `|g|`, and `scaled_sum` of
/// `(g * s) * (g * s)` with `s = down_scale(largest)` (used only where `sum` overflows).
/// Returns `[norm, first, second]`: the gradients become `(g * first) * second`, with
/// `first = second = 1` where they stay (multiplying by 1 keeps every bit, so this is
/// [`plan_clip`]'s clip, with one product skipped there). An error when `max_norm` is not
/// finite and positive.
///
/// ```
/// use rlgrad_core::kernels::clip::clip_factors;
/// // Gradients [3, 4]: norm 5, clipped to 1.
/// let [norm, first, second] = clip_factors(1.0, 25.0f32, 4.0, 25.0)?;
/// assert_eq!((norm, first), (5.0, 1.0));
/// assert!((3.0 * second - 0.6).abs() < 1e-6);
/// // Below the limit they stay.
/// assert_eq!(clip_factors(10.0, 25.0f32, 4.0, 25.0)?, [5.0, 1.0, 1.0]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn clip_factors<T: Float>(max_norm: f64, sum: T, largest: T, scaled_sum: T) -> Result<[T; 3]> {
    let mut sums = [sum, scaled_sum].into_iter();
    let clipping = plan_clip(
        "clip_factors",
        max_norm,
        |_| Ok(sums.next().unwrap_or(scaled_sum)),
        || Ok(largest),
    )?;
    let (first, second) = clipping.scale.unwrap_or((T::one(), T::one()));
    Ok([clipping.norm, first, second])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decision from three sums is the lazy one's: every case of the plan (plain,
    /// below the limit, NaN, an infinite gradient, overflowing squares, a norm beyond
    /// `f32`), with the scale the lazy plan asked for.
    #[test]
    fn clip_factors_decide_as_plan_clip() {
        let cases: [(f32, f32, f64); 7] = [
            (25.0, 4.0, 1.0),
            (25.0, 4.0, 10.0),
            (f32::NAN, 1.0, 1.0),
            (f32::INFINITY, f32::INFINITY, 1.0),
            (f32::INFINITY, 1e20, 1.0),
            (f32::INFINITY, 3e38, 1.0),
            (f32::INFINITY, 1e20, 1e30),
        ];
        for (sum, largest, max_norm) in cases {
            // A plausible second sum: the squares of two gradients of the largest size.
            let s = down_scale(largest);
            let scaled = (largest * s) * (largest * s) * 2.0;
            let mut asked = Vec::new();
            let lazy = plan_clip(
                "test",
                max_norm,
                |scale| {
                    asked.push(scale);
                    Ok(if asked.len() == 1 { sum } else { scaled })
                },
                || Ok(largest),
            )
            .unwrap();
            if asked.len() == 2 {
                assert_eq!(asked[1].to_bits(), s.to_bits(), "the scale of {largest}");
            }
            let [norm, first, second] = clip_factors(max_norm, sum, largest, scaled).unwrap();
            let (want_first, want_second) = lazy.scale.unwrap_or((1.0, 1.0));
            let bits = |x: f32| x.to_bits();
            assert_eq!(
                (bits(norm), bits(first), bits(second)),
                (bits(lazy.norm), bits(want_first), bits(want_second)),
                "{sum} {largest} {max_norm}"
            );
        }
        assert!(clip_factors(0.0, 1.0f32, 1.0, 1.0).is_err());
        assert_eq!(down_scale(0.0f32), 1.0);
        assert_eq!(down_scale(f32::INFINITY), 1.0);
        assert_eq!(down_scale(1e20f64), 0.5f64.powi(67));
    }
}
