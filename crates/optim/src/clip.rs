//! Gradient clipping over all gradients of a step (not per tensor), and clipping by value.

use rlgrad_core::cpu::grain::{Family, grain};
pub use rlgrad_core::kernels::clip::{Clipping, plan_clip};
use rlgrad_core::kernels::clip::{Norm, norm_from};
use rlgrad_core::{Error, Float, Par, Result, check, reduce};

/// Elements per parallel piece.
const CHUNK: usize = 1 << 14;

/// The canonical sum of `(g * scale)^2` over the gradients concatenated in the order
/// given (`scale = 1` is the plain sum of squares).
fn sum_of_squares<T: Float>(grads: &[&[T]], scale: T, par: Par) -> T {
    let total: usize = grads.iter().map(|g| g.len()).sum();
    let mut offsets = Vec::with_capacity(grads.len() + 1);
    offsets.push(0usize);
    for g in grads {
        offsets.push(offsets[offsets.len() - 1] + g.len());
    }
    let one = scale == T::one();
    reduce::sum_gathered(
        total,
        par,
        |first| reduce::segment_of(&offsets, first).unwrap_or(0),
        |tensor, range, out| {
            reduce::fill_from_segments(&offsets, tensor, range, out, |k, local, squares| {
                let grads = &grads[k][local];
                if one {
                    for (o, &g) in squares.iter_mut().zip(grads) {
                        *o = g * g;
                    }
                } else {
                    for (o, &g) in squares.iter_mut().zip(grads) {
                        *o = (g * scale) * (g * scale);
                    }
                }
            });
        },
    )
}

/// The largest `|g|` over the slices (0 for none).
fn largest_magnitude<T: Float>(grads: &[&[T]]) -> T {
    grads
        .iter()
        .flat_map(|g| g.iter())
        .fold(T::zero(), |m, &g| reduce::max2(m, g.abs()))
}

/// The canonical global norm of slices (see [`global_norm`]).
fn norm<T: Float>(grads: &[&[T]], par: Par) -> Norm<T> {
    norm_from(
        |scale| Ok(sum_of_squares(grads, scale, par)),
        || Ok(largest_magnitude(grads)),
    )
    .expect("the sums over slices cannot fail")
}

/// The global L2 norm of `grads`, as one vector: the canonical sum of squares over the
/// gradients concatenated in the order given, then its square root. The same bits for
/// every thread count and however the parameters are split into tensors.
///
/// The norm cannot overflow for finite gradients: when the sum of squares does (a norm
/// above about `1.8e19` in f32), it is computed again, in the same canonical order, on
/// the gradients scaled by a power of two `2^-k` (`k` the exponent of the largest
/// gradient), and the root is scaled back, `sqrt(sum (g 2^-k)^2) * 2^k` (exact up to
/// the rounding of the sum: scaling by a power of two is exact for normal numbers). The
/// result is infinite only when the norm exceeds `T`'s range or a gradient is infinite,
/// and NaN when a gradient is NaN.
///
/// ```
/// use rlgrad_optim::{global_norm, Par};
/// assert_eq!(global_norm(&[&[3.0f32][..], &[4.0]], Par::Seq), 5.0);
/// let huge = global_norm(&[&[1e20f32, -1e20][..]], Par::Seq);
/// assert!((huge / 1e20 - 2f32.sqrt()).abs() < 1e-6);
/// ```
pub fn global_norm<T: Float>(grads: &[&[T]], par: Par) -> T {
    norm(grads, par).value()
}

/// Scales all gradients so that their global norm ([`global_norm`]) is at most
/// `max_norm`, PyTorch's `clip_grad_norm_`: `coef = max_norm / (norm + 1e-6)`, and every
/// gradient is multiplied by `coef` when it is below 1. Returns the norm before clipping.
/// An error when `max_norm` is not finite and positive.
///
/// Large finite gradients are clipped, never zeroed: when the norm needed its scaled form
/// `root 2^k` (see [`global_norm`]), the coefficient is computed in f64 from that form,
/// `c = max_norm / (root + 1e-6 2^-k)` (which is `coef 2^k`), and each gradient becomes
/// `(g 2^-k) * c` when `c < 2^k`. Non-finite gradients behave as in PyTorch: an infinite norm gives
/// `coef = 0` (infinite gradients become NaN, the others 0) and a NaN norm `coef = NaN`;
/// the optimizer's finite check then refuses the step.
///
/// ```
/// use rlgrad_optim::clip_grad_norm;
/// let (mut a, mut b) = (vec![3.0f32], vec![4.0f32]);
/// let norm = clip_grad_norm(&mut [&mut a, &mut b], 1.0)?;
/// assert_eq!(norm, 5.0);
/// assert!((a[0] - 0.6).abs() < 1e-6 && (b[0] - 0.8).abs() < 1e-6);
/// let mut huge = vec![1e20f32, -1e20];
/// clip_grad_norm(&mut [&mut huge], 1.0)?;
/// assert!((huge[0] - 0.5f32.sqrt()).abs() < 1e-6 && (huge[1] + 0.5f32.sqrt()).abs() < 1e-6);
/// # Ok::<(), rlgrad_optim::Error>(())
/// ```
pub fn clip_grad_norm<T: Float>(grads: &mut [&mut [T]], max_norm: f64) -> Result<T> {
    clip_grad_norm_with(grads, max_norm, Par::auto())
}

/// [`clip_grad_norm`] with the given parallelism.
pub fn clip_grad_norm_with<T: Float>(grads: &mut [&mut [T]], max_norm: f64, par: Par) -> Result<T> {
    let views: Vec<&[T]> = grads.iter().map(|g| &**g).collect();
    let clipping = plan_clip(
        "clip_grad_norm",
        max_norm,
        |scale| Ok(sum_of_squares(&views, scale, par)),
        || Ok(largest_magnitude(&views)),
    )?;
    if let Some((first, second)) = clipping.scale {
        scale(grads, first, second, par);
    }
    Ok(clipping.norm)
}

/// `g = (g * first) * second` (`first = 1` skips the first product).
fn scale<T: Float>(grads: &mut [&mut [T]], first: T, second: T, par: Par) {
    let total = grads.iter().map(|g| g.len()).sum();
    let chunks: Vec<&mut [T]> = grads.iter_mut().flat_map(|g| g.chunks_mut(CHUNK)).collect();
    let one = first == T::one();
    par.for_work(total, grain(Family::Optim))
        .for_each_item(chunks, |chunk| {
            if one {
                chunk.iter_mut().for_each(|g| *g = *g * second);
            } else {
                chunk.iter_mut().for_each(|g| *g = (*g * first) * second);
            }
        });
}

/// Clamps every gradient element to `[-clip, clip]` (`clip_grad_value_`); NaN stays NaN.
/// An error when `clip` is not finite and positive.
pub fn clip_grad_value<T: Float>(grads: &mut [&mut [T]], clip: f64) -> Result<()> {
    check::positive("clip_grad_value", "clip", clip)?;
    let (high, low) = (T::from_f64(clip), T::from_f64(-clip));
    for g in grads.iter_mut().flat_map(|g| g.iter_mut()) {
        if *g > high {
            *g = high;
        } else if *g < low {
            *g = low;
        }
    }
    Ok(())
}

/// Polyak averaging of a target network: `target = tau * source + (1 - tau) * target`
/// elementwise, with `1 - tau` computed in f64 (TD3's and DDPG's soft update; `tau` in
/// `[0, 1]`). An error for mismatched lengths or `tau` outside `[0, 1]`.
///
/// ```
/// use rlgrad_optim::polyak_update;
/// let mut target = vec![0.0f64, 10.0];
/// polyak_update(&mut target, &[1.0, 0.0], 0.5)?;
/// assert_eq!(target, [0.5, 5.0]);
/// # Ok::<(), rlgrad_optim::Error>(())
/// ```
pub fn polyak_update<T: Float>(target: &mut [T], source: &[T], tau: f64) -> Result<()> {
    check::unit_interval("polyak_update", "tau", tau)?;
    check::len("polyak_update", "source", target.len(), source.len())?;
    let (tau_t, keep) = (T::from_f64(tau), T::from_f64(1.0 - tau));
    rlgrad_core::cpu::optim::polyak(Par::auto(), tau_t, keep, target, source)
}

/// Copies `source` into `target` (a hard target-network update). An error for mismatched
/// lengths.
pub fn hard_update<T: Float>(target: &mut [T], source: &[T]) -> Result<()> {
    if target.len() != source.len() {
        return Err(Error::shape(
            "hard_update",
            "source",
            format_args!("{} elements", target.len()),
            source.len(),
        ));
    }
    target.copy_from_slice(source);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clipping() {
        let mut g = vec![3.0f64, -4.0];
        assert_eq!(clip_grad_norm(&mut [&mut g], 10.0).unwrap(), 5.0);
        assert_eq!(g, [3.0, -4.0]); // below the limit: untouched
        clip_grad_value(&mut [&mut g], 3.5).unwrap();
        assert_eq!(g, [3.0, -3.5]);
        assert!(clip_grad_norm(&mut [&mut g], 0.0).is_err());
        assert!(clip_grad_value(&mut [&mut g], f64::NAN).is_err());
        let mut h = vec![f64::NAN];
        assert!(clip_grad_norm(&mut [&mut h], 1.0).unwrap().is_nan());
    }

    /// The canonical sum of squares of the concatenation, written plainly.
    fn plain_norm(grads: &[Vec<f32>], par: Par) -> f32 {
        let all: Vec<f32> = grads.concat();
        reduce::sum_map(&all, par, |g| g * g).sqrt()
    }

    #[test]
    fn the_norm_is_the_canonical_norm_of_the_concatenation_at_any_thread_count() {
        let mut rng = rlgrad_core::Rng::new(11, "clip");
        let grads: Vec<Vec<f32>> = [70_001usize, 3, 0, 40_000]
            .iter()
            .map(|&n| (0..n).map(|_| rng.normal(0.0, 1.0)).collect())
            .collect();
        let views: Vec<&[f32]> = grads.iter().map(Vec::as_slice).collect();
        let want = plain_norm(&grads, Par::Seq).to_bits();
        for par in [Par::Seq, Par::rayon(2), Par::rayon(4)] {
            assert_eq!(global_norm(&views, par).to_bits(), want);
        }
        // Overflowing squares: the scaled form, the same bits at every thread count.
        let huge: Vec<Vec<f32>> = grads
            .iter()
            .map(|g| g.iter().map(|v| v * 1e25).collect())
            .collect();
        let views: Vec<&[f32]> = huge.iter().map(Vec::as_slice).collect();
        let scaled = global_norm(&views, Par::Seq);
        assert!(scaled.is_finite());
        assert!((scaled / 1e25 / f32::from_bits(want) - 1.0).abs() < 1e-5);
        for par in [Par::rayon(2), Par::rayon(4)] {
            assert_eq!(global_norm(&views, par).to_bits(), scaled.to_bits());
        }
    }

    #[test]
    fn large_finite_gradients_are_clipped_not_zeroed() {
        let mut g = vec![1e20f32, -1e20];
        let norm = clip_grad_norm(&mut [&mut g], 1.0).unwrap();
        assert!((norm / 1e20 - 2f32.sqrt()).abs() < 1e-6, "{norm}");
        let half = 0.5f32.sqrt();
        assert!(
            (g[0] - half).abs() < 1e-6 && (g[1] + half).abs() < 1e-6,
            "{g:?}"
        );
        let mut g = vec![1e200f64, 1e200, -1e200];
        clip_grad_norm(&mut [&mut g], 3.0).unwrap();
        assert!(
            g.iter().all(|v| (v.abs() - 3f64.sqrt()).abs() < 1e-12),
            "{g:?}"
        );
        // A norm beyond f32's range is infinite, yet the gradients are clipped.
        let mut g = vec![3e38f32, 3e38];
        assert_eq!(clip_grad_norm(&mut [&mut g], 1.0).unwrap(), f32::INFINITY);
        assert!(g.iter().all(|v| (v - half).abs() < 1e-6), "{g:?}");
        // A huge max_norm leaves them alone.
        let mut g = vec![1e20f32, -1e20];
        clip_grad_norm(&mut [&mut g], 1e30).unwrap();
        assert_eq!(g, [1e20, -1e20]);
        // Truly non-finite gradients keep PyTorch's behavior.
        let mut g = vec![f32::INFINITY, 1.0];
        assert_eq!(clip_grad_norm(&mut [&mut g], 1.0).unwrap(), f32::INFINITY);
        assert!(g[0].is_nan() && g[1] == 0.0);
        let mut g = vec![f32::NAN, 1.0];
        assert!(clip_grad_norm(&mut [&mut g], 1.0).unwrap().is_nan());
        assert!(g.iter().all(|v| v.is_nan()));
    }

    #[test]
    fn target_updates() {
        let mut t = vec![1.0f32; 3];
        assert!(polyak_update(&mut t, &[0.0; 2], 0.1).is_err());
        assert!(polyak_update(&mut t, &[0.0; 3], 1.5).is_err());
        hard_update(&mut t, &[2.0, 3.0, 4.0]).unwrap();
        assert_eq!(t, [2.0, 3.0, 4.0]);
        assert!(hard_update(&mut t, &[1.0]).is_err());
    }
}
