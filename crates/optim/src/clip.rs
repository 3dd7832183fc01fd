//! Gradient clipping over all gradients of a step (not per tensor), and clipping by value.

use rlgrad_core::{Error, Float, Par, Result, check, reduce};

/// Elements per parallel piece.
const CHUNK: usize = 1 << 14;
/// Fewest elements worth a task.
const MIN_TASK: usize = 1 << 16;

/// The global L2 norm of `grads`, as one vector: the canonical sum of squares over the
/// gradients concatenated in the order given, then its square root. The same bits for
/// every thread count and however the parameters are split into tensors.
pub fn global_norm<T: Float>(grads: &[&[T]], par: Par) -> T {
    let total: usize = grads.iter().map(|g| g.len()).sum();
    let mut offsets = Vec::with_capacity(grads.len() + 1);
    offsets.push(0usize);
    for g in grads {
        offsets.push(offsets[offsets.len() - 1] + g.len());
    }
    reduce::sum_leaves_with(
        total,
        par,
        |first| reduce::segment_of(&offsets, first).unwrap_or(0),
        |tensor, range, leaf| {
            reduce::for_each_segment(&offsets, tensor, range, |k, local| {
                leaf.push_mapped(&grads[k][local], |g| g * g);
            });
        },
    )
    .sqrt()
}

/// Scales all gradients so that their global norm is at most `max_norm`, PyTorch's
/// `clip_grad_norm_`: `coef = max_norm / (norm + 1e-6)`, and every gradient is multiplied
/// by `coef` when it is below 1. Returns the norm before clipping. A non-finite norm scales
/// the gradients by NaN, as PyTorch does; the optimizer's finite check then refuses the
/// step. An error when `max_norm` is not finite and positive.
///
/// ```
/// use rlgrad_optim::clip_grad_norm;
/// let (mut a, mut b) = (vec![3.0f32], vec![4.0f32]);
/// let norm = clip_grad_norm(&mut [&mut a, &mut b], 1.0)?;
/// assert_eq!(norm, 5.0);
/// assert!((a[0] - 0.6).abs() < 1e-6 && (b[0] - 0.8).abs() < 1e-6);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn clip_grad_norm<T: Float>(grads: &mut [&mut [T]], max_norm: f64) -> Result<T> {
    clip_grad_norm_with(grads, max_norm, Par::auto())
}

/// [`clip_grad_norm`] with the given parallelism.
pub fn clip_grad_norm_with<T: Float>(grads: &mut [&mut [T]], max_norm: f64, par: Par) -> Result<T> {
    check::positive("clip_grad_norm", "max_norm", max_norm)?;
    let views: Vec<&[T]> = grads.iter().map(|g| &**g).collect();
    let norm = global_norm(&views, par);
    let coef = T::from_f64(max_norm) / (norm + T::from_f64(1e-6));
    // A NaN coefficient (non-finite norm) scales too, as in PyTorch.
    if coef < T::one() || coef.is_nan() {
        scale(grads, coef, par);
    }
    Ok(norm)
}

fn scale<T: Float>(grads: &mut [&mut [T]], factor: T, par: Par) {
    let total = grads.iter().map(|g| g.len()).sum();
    let chunks: Vec<&mut [T]> = grads.iter_mut().flat_map(|g| g.chunks_mut(CHUNK)).collect();
    par.for_work(total, MIN_TASK)
        .for_each_item(chunks, |chunk| {
            for g in chunk {
                *g = *g * factor;
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
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn polyak_update<T: Float>(target: &mut [T], source: &[T], tau: f64) -> Result<()> {
    check::unit_interval("polyak_update", "tau", tau)?;
    check::len("polyak_update", "source", target.len(), source.len())?;
    let (tau_t, keep) = (T::from_f64(tau), T::from_f64(1.0 - tau));
    let par = Par::auto().for_work(target.len(), MIN_TASK);
    par.for_each_chunk_mut(target, CHUNK, |ci, chunk| {
        for (t, &s) in chunk.iter_mut().zip(&source[ci * CHUNK..]) {
            *t = tau_t * s + keep * *t;
        }
    });
    Ok(())
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
