//! Standardization of returns or advantages.

use rlgrad_core::{Error, Float, Par, Result, check, reduce};

/// `(x - mean(x)) / (std(x) + eps)` with `std = sqrt(sum((x - mean)^2) / (n - ddof))`, the
/// mean and the sum in the canonical order of [`rlgrad_core::reduce`] (bitwise equal at
/// every thread count).
///
/// `ddof` picks the standard deviation. PyTorch's `Tensor.std()` is the unbiased one
/// (`ddof = 1`), so the advantage normalization of PyTorch code, CleanRL and
/// Stable-Baselines3, `(adv - adv.mean()) / (adv.std() + 1e-8)`, is
/// `standardize(adv, 1e-8, 1)`. NumPy's `np.std` and TensorFlow's `tf.math.reduce_std`
/// default to the population one (`ddof = 0`): the seed notebook's `(G - mean) / std` is
/// `standardize(g, 0.0, 0)`, the TF actor-critic tutorial's `(G - mean) / (std + eps)` is
/// `standardize(g, f32::EPSILON, 0)`.
///
/// ```
/// use rlgrad_returns::standardize;
/// let adv = [1.0f64, 2.0, 4.0];
/// // torch: (adv - adv.mean()) / (adv.std() + 1e-8), adv.std() unbiased
/// let std = ((1.0f64 - 7.0 / 3.0).powi(2) + (2.0f64 - 7.0 / 3.0).powi(2) + (4.0f64 - 7.0 / 3.0).powi(2)) / 2.0;
/// let torch = standardize(&adv, 1e-8, 1)?;
/// assert!((torch[2] - (4.0 - 7.0 / 3.0) / (std.sqrt() + 1e-8)).abs() < 1e-12);
/// # Ok::<(), rlgrad_returns::Error>(())
/// ```
///
/// An empty `x` gives an empty result. A single element with `eps = 0` gives NaN (`0 / 0`),
/// as NumPy and TensorFlow do. Errors: `eps` negative or not finite; `n <= ddof` for a
/// non-empty `x` (no variance).
pub fn standardize<T: Float>(x: &[T], eps: T, ddof: usize) -> Result<Vec<T>> {
    check::non_negative("standardize", "eps", eps.as_f64())?;
    if x.is_empty() {
        return Ok(Vec::new());
    }
    if x.len() <= ddof {
        return Err(Error::empty(
            "standardize",
            "x",
            format_args!("more than ddof = {ddof} elements, got {}", x.len()),
        ));
    }
    let par = Par::auto();
    let (mean, var) = reduce::mean_var(x, ddof, par)?;
    let std = var.sqrt();
    let denominator = std + eps;
    let mut out = rlgrad_core::cpu::alloc::try_with_capacity(x.len(), "standardize", "x")?;
    out.extend(x.iter().map(|&v| (v - mean) / denominator));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn population_and_sample_conventions() {
        let x = [1.0f64, 2.0, 3.0, 4.0];
        let pop = standardize(&x, 0.0, 0).unwrap();
        let std = 1.25f64.sqrt();
        assert_eq!(pop, [-1.5 / std, -0.5 / std, 0.5 / std, 1.5 / std]);
        let sample = standardize(&x, 0.0, 1).unwrap();
        assert!((sample[0] + 1.5 / (5.0f64 / 3.0).sqrt()).abs() < 1e-15);
        assert!(standardize(&[1.0f32], 0.0, 0).unwrap()[0].is_nan());
        assert!(standardize::<f32>(&[], 0.0, 0).unwrap().is_empty());
        assert!(standardize(&[1.0f32], 0.0, 1).is_err());
        assert!(standardize(&[1.0f32, 2.0], -1.0, 0).is_err());
    }
}
