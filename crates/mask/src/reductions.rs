//! Masked reductions over padded `[B, T, F]` data (`[B, T]` is `F = 1`), and their
//! backward passes. Every value of a valid step counts: `x[mask]` in PyTorch terms, with
//! the mask broadcast over the features.
//!
//! With `N` the number of valid steps, `n = N F` the number of valid values, `m` the
//! masked mean and `s` the masked standard deviation with `ddof` delta degrees of freedom:
//!
//! | function | value | gradient w.r.t. `x` at valid values (0 at padding) |
//! |---|---|---|
//! | [`masked_sum`] | `S = sum x` | `g` |
//! | [`masked_mean`] | `S / n` | `g / n` |
//! | [`sequence_means`] | `sum_b / (len_b F)` per sequence | `g_b / (len_b F)` |
//! | [`masked_var`] | `sum (x - m)^2 / (n - ddof)` | `(x - m) * (2 g / (n - ddof))` |
//! | [`masked_std`] | `sqrt(var)` | `(x - m) * (g / (s (n - ddof)))` |
//! | [`masked_normalize`] | `(x - m) / (s + eps)` | `(g - mean(g)) / (s + eps) - (x - m) * sum(g (x - m)) / ((n - ddof) s (s + eps)^2)` |
//!
//! Sums are canonical over the valid values in packed order. No valid value (for means)
//! and `n <= ddof` (for variances) are errors; a zero standard deviation makes the
//! gradients of `masked_std` and `masked_normalize` non-finite, as in PyTorch.
//!
//! ```
//! use rlgrad_mask::{masked_mean, masked_normalize, Sequences};
//! // Two sequences of 2 and 1 steps, padded to 2 steps, 3 features per step: [2, 2, 3].
//! let seqs = Sequences::new(&[2, 1], None)?;
//! let x = [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, f32::NAN, f32::NAN, f32::NAN];
//! assert_eq!(masked_mean(&seqs, &x, 3)?, 5.0); // 45 / 9 valid values
//! let normalized = masked_normalize(&seqs, &x, 3, 0.0, 0)?;
//! assert_eq!(normalized[9..], [0.0; 3]); // padding stays 0
//! # Ok::<(), rlgrad_mask::Error>(())
//! ```

use rlgrad_core::{Float, Par, Result};

use crate::Sequences;
use crate::backend::Slices;

/// The math of every reduction, written once for any [`Backend`].
pub(crate) mod generic {
    use rlgrad_core::kernels::sequence::{MaskedMap, MaskedTerm};
    use rlgrad_core::{Error, Float, Result, check};

    use crate::Sequences;
    use crate::backend::Backend;

    /// `B * T * F`, the length of every padded array of the call.
    fn padded_len(function: &'static str, seqs: &Sequences, features: usize) -> Result<usize> {
        check::product(function, "features", seqs.padded_steps(), features)
    }

    fn check_padded<T: Float, K: Backend<T>>(
        function: &'static str,
        argument: &'static str,
        k: &K,
        seqs: &Sequences,
        features: usize,
        x: &K::Data,
    ) -> Result<()> {
        let want = padded_len(function, seqs, features)?;
        let got = k.len(x);
        if got == want {
            Ok(())
        } else {
            Err(Error::shape(
                function,
                argument,
                format_args!(
                    "{want} elements ([B, T, F] = [{}, {}, {features}])",
                    seqs.batch(),
                    seqs.max_len()
                ),
                format_args!("{got} elements"),
            ))
        }
    }

    /// The number of valid values `N * F`, at least `needed`, as `T`.
    fn valid_count<T: Float>(
        function: &'static str,
        seqs: &Sequences,
        features: usize,
        needed: usize,
    ) -> Result<(usize, T)> {
        let count = check::product(function, "features", seqs.total(), features)?;
        if count < needed {
            return Err(Error::empty(
                function,
                "seqs",
                format_args!("at least {needed} valid values (steps times features), got {count}"),
            ));
        }
        Ok((count, T::from_usize(count)))
    }

    pub(crate) fn sum<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        features: usize,
        x: &K::Data,
    ) -> Result<T> {
        check_padded("masked_sum", "x", k, seqs, features, x)?;
        k.sum(seqs, features, x, MaskedTerm::Value)
    }

    pub(crate) fn fill<T: Float, K: Backend<T>>(
        function: &'static str,
        k: &K,
        seqs: &Sequences,
        features: usize,
        value: T,
    ) -> Result<K::Owned> {
        k.map(function, seqs, features, None, MaskedMap::Fill(value))
    }

    pub(crate) fn mean<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        features: usize,
        x: &K::Data,
    ) -> Result<T> {
        check_padded("masked_mean", "x", k, seqs, features, x)?;
        let (_, n) = valid_count::<T>("masked_mean", seqs, features, 1)?;
        Ok(k.sum(seqs, features, x, MaskedTerm::Value)? / n)
    }

    pub(crate) fn mean_backward<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        features: usize,
        grad: T,
    ) -> Result<K::Owned> {
        let (_, n) = valid_count::<T>("masked_mean_backward", seqs, features, 1)?;
        fill("masked_mean_backward", k, seqs, features, grad / n)
    }

    /// `len_b * F` of every sequence, each nonzero.
    fn sequence_counts(
        function: &'static str,
        seqs: &Sequences,
        features: usize,
    ) -> Result<Vec<usize>> {
        // Every `len_b * F` is at most `N * F`, which must fit.
        check::product(function, "features", seqs.total(), features)?;
        match seqs.lengths().iter().position(|&l| l * features == 0) {
            Some(b) => Err(Error::empty(
                function,
                "seqs",
                format_args!("every sequence to have a valid value, sequence {b} has none"),
            )),
            None => Ok(seqs.lengths().iter().map(|&l| l * features).collect()),
        }
    }

    pub(crate) fn sequence_means<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        features: usize,
        x: &K::Data,
    ) -> Result<Vec<T>> {
        check_padded("sequence_means", "x", k, seqs, features, x)?;
        let counts = sequence_counts("sequence_means", seqs, features)?;
        let sums = k.sequence_sums("sequence_means", seqs, features, x)?;
        Ok(sums
            .iter()
            .zip(counts)
            .map(|(&s, count)| s / T::from_usize(count))
            .collect())
    }

    pub(crate) fn sequence_means_backward<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        features: usize,
        grad: &[T],
    ) -> Result<K::Owned> {
        let counts = sequence_counts("sequence_means_backward", seqs, features)?;
        check::len("sequence_means_backward", "grad", seqs.batch(), grad.len())?;
        let per_sequence = k.upload(
            grad.iter()
                .zip(counts)
                .map(|(&g, count)| g / T::from_usize(count))
                .collect(),
        )?;
        k.map(
            "sequence_means_backward",
            seqs,
            features,
            None,
            MaskedMap::PerSequence(k.borrow(&per_sequence)),
        )
    }

    /// The masked mean, the variance with `ddof` and the divisor `N F - ddof`.
    fn moments<T: Float, K: Backend<T>>(
        function: &'static str,
        k: &K,
        seqs: &Sequences,
        features: usize,
        x: &K::Data,
        ddof: usize,
    ) -> Result<(T, T, T)> {
        check_padded(function, "x", k, seqs, features, x)?;
        let (count, n) = valid_count::<T>(function, seqs, features, ddof.saturating_add(1))?;
        let mean = k.sum(seqs, features, x, MaskedTerm::Value)? / n;
        let divisor = T::from_usize(count - ddof);
        let var = k.sum(seqs, features, x, MaskedTerm::SquaredDeviation { mean })? / divisor;
        Ok((mean, var, divisor))
    }

    pub(crate) fn var<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        features: usize,
        x: &K::Data,
        ddof: usize,
    ) -> Result<T> {
        Ok(moments("masked_var", k, seqs, features, x, ddof)?.1)
    }

    pub(crate) fn var_backward<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        features: usize,
        x: &K::Data,
        ddof: usize,
        grad: T,
    ) -> Result<K::Owned> {
        let function = "masked_var_backward";
        let (mean, _, divisor) = moments(function, k, seqs, features, x, ddof)?;
        let scale = (T::from_f64(2.0) * grad) / divisor;
        let map = MaskedMap::Scale { shift: mean, scale };
        k.map(function, seqs, features, Some(x), map)
    }

    pub(crate) fn std<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        features: usize,
        x: &K::Data,
        ddof: usize,
    ) -> Result<T> {
        Ok(moments("masked_std", k, seqs, features, x, ddof)?.1.sqrt())
    }

    pub(crate) fn std_backward<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        features: usize,
        x: &K::Data,
        ddof: usize,
        grad: T,
    ) -> Result<K::Owned> {
        let function = "masked_std_backward";
        let (mean, var, divisor) = moments(function, k, seqs, features, x, ddof)?;
        let scale = grad / (var.sqrt() * divisor);
        let map = MaskedMap::Scale { shift: mean, scale };
        k.map(function, seqs, features, Some(x), map)
    }

    pub(crate) fn normalize<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        features: usize,
        x: &K::Data,
        eps: T,
        ddof: usize,
    ) -> Result<K::Owned> {
        let function = "masked_normalize";
        check::non_negative(function, "eps", eps.as_f64())?;
        let (mean, var, _) = moments(function, k, seqs, features, x, ddof)?;
        let denominator = var.sqrt() + eps;
        let map = MaskedMap::Standardize { mean, denominator };
        k.map(function, seqs, features, Some(x), map)
    }

    pub(crate) fn normalize_backward<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        features: usize,
        x: &K::Data,
        eps: T,
        ddof: usize,
        grad: &K::Data,
    ) -> Result<K::Owned> {
        let function = "masked_normalize_backward";
        check::non_negative(function, "eps", eps.as_f64())?;
        check_padded(function, "grad", k, seqs, features, grad)?;
        let (mean, var, divisor) = moments(function, k, seqs, features, x, ddof)?;
        let std = var.sqrt();
        let denominator = std + eps;
        let (_, n) = valid_count::<T>(function, seqs, features, 1)?;
        let grad_mean = k.sum(seqs, features, grad, MaskedTerm::Value)? / n;
        let covariance = k.sum(
            seqs,
            features,
            x,
            MaskedTerm::Product {
                other: grad,
                shift: mean,
            },
        )?;
        let coefficient = covariance / (divisor * std * denominator * denominator);
        k.map(
            function,
            seqs,
            features,
            Some(x),
            MaskedMap::StandardizeBackward {
                grad,
                grad_mean,
                mean,
                denominator,
                coefficient,
            },
        )
    }
}

/// The sum of the valid values of the padded `[B, T, F]` array `x`, canonical in packed
/// order.
pub fn masked_sum<T: Float>(seqs: &Sequences, x: &[T], features: usize) -> Result<T> {
    generic::sum(&Slices(Par::auto()), seqs, features, x)
}

/// The gradient of [`masked_sum`]: `grad` at valid values, 0 at padding (`[B, T, F]`).
pub fn masked_sum_backward<T: Float>(seqs: &Sequences, features: usize, grad: T) -> Result<Vec<T>> {
    generic::fill(
        "masked_sum_backward",
        &Slices(Par::auto()),
        seqs,
        features,
        grad,
    )
}

/// The mean over the valid values only (RLlib's `reduce_mean_valid`, PyTorch's
/// `x[mask].mean()`): the sum of the valid values divided by their number `N F`, bitwise
/// equal to the mean of the unpadded values. An error when no value is valid.
pub fn masked_mean<T: Float>(seqs: &Sequences, x: &[T], features: usize) -> Result<T> {
    generic::mean(&Slices(Par::auto()), seqs, features, x)
}

/// The gradient of [`masked_mean`]: `grad / (N F)` at valid values, 0 at padding.
pub fn masked_mean_backward<T: Float>(
    seqs: &Sequences,
    features: usize,
    grad: T,
) -> Result<Vec<T>> {
    generic::mean_backward(&Slices(Par::auto()), seqs, features, grad)
}

/// The mean of each sequence's valid values (`[B]`); an error when a sequence has none.
pub fn sequence_means<T: Float>(seqs: &Sequences, x: &[T], features: usize) -> Result<Vec<T>> {
    generic::sequence_means(&Slices(Par::auto()), seqs, features, x)
}

/// The gradient of [`sequence_means`] for upstream gradients `grad` (`[B]`).
pub fn sequence_means_backward<T: Float>(
    seqs: &Sequences,
    features: usize,
    grad: &[T],
) -> Result<Vec<T>> {
    generic::sequence_means_backward(&Slices(Par::auto()), seqs, features, grad)
}

/// The variance of the valid values with `ddof` delta degrees of freedom (two-pass,
/// canonical sums); an error when `N F <= ddof`.
pub fn masked_var<T: Float>(seqs: &Sequences, x: &[T], features: usize, ddof: usize) -> Result<T> {
    generic::var(&Slices(Par::auto()), seqs, features, x, ddof)
}

/// The gradient of [`masked_var`] for the upstream gradient `grad`.
pub fn masked_var_backward<T: Float>(
    seqs: &Sequences,
    x: &[T],
    features: usize,
    ddof: usize,
    grad: T,
) -> Result<Vec<T>> {
    generic::var_backward(&Slices(Par::auto()), seqs, features, x, ddof, grad)
}

/// The standard deviation of the valid values; an error when `N F <= ddof`.
pub fn masked_std<T: Float>(seqs: &Sequences, x: &[T], features: usize, ddof: usize) -> Result<T> {
    generic::std(&Slices(Par::auto()), seqs, features, x, ddof)
}

/// The gradient of [`masked_std`] for the upstream gradient `grad`.
pub fn masked_std_backward<T: Float>(
    seqs: &Sequences,
    x: &[T],
    features: usize,
    ddof: usize,
    grad: T,
) -> Result<Vec<T>> {
    generic::std_backward(&Slices(Par::auto()), seqs, features, x, ddof, grad)
}

/// Advantage normalization over the valid values only: `(x - m) / (s + eps)` at valid
/// values, 0 at padding. PyTorch code (CleanRL, SB3) divides by the unbiased `adv.std()`:
/// `ddof = 1`, `eps = 1e-8`. Errors: `eps` negative or not finite, `N F <= ddof`.
///
/// ```
/// use rlgrad_mask::{masked_normalize, Sequences};
/// let seqs = Sequences::new(&[2, 1], Some(3))?;
/// let advantages = [1.0f64, 3.0, 9e9, 5.0, f64::NAN, 0.0]; // padding holds junk
/// let normalized = masked_normalize(&seqs, &advantages, 1, 0.0, 0)?;
/// let s = (8.0f64 / 3.0).sqrt();
/// assert_eq!(normalized, [-2.0 / s, 0.0, 0.0, 2.0 / s, 0.0, 0.0]);
/// # Ok::<(), rlgrad_mask::Error>(())
/// ```
pub fn masked_normalize<T: Float>(
    seqs: &Sequences,
    x: &[T],
    features: usize,
    eps: T,
    ddof: usize,
) -> Result<Vec<T>> {
    generic::normalize(&Slices(Par::auto()), seqs, features, x, eps, ddof)
}

/// The gradient of [`masked_normalize`] for upstream gradients `grad` (`[B, T, F]`;
/// padding ignored).
pub fn masked_normalize_backward<T: Float>(
    seqs: &Sequences,
    x: &[T],
    features: usize,
    eps: T,
    ddof: usize,
    grad: &[T],
) -> Result<Vec<T>> {
    generic::normalize_backward(&Slices(Par::auto()), seqs, features, x, eps, ddof, grad)
}
