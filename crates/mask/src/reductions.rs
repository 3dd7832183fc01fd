//! Masked reductions over padded `[B, T]` data, and their backward passes.
//!
//! With `N` the number of valid steps, `m` the masked mean and `s` the masked standard
//! deviation with `ddof` delta degrees of freedom:
//!
//! | function | value | gradient w.r.t. `x` at valid steps (0 at padding) |
//! |---|---|---|
//! | [`masked_sum`] | `S = sum x` | `g` |
//! | [`masked_mean`] | `S / N` | `g / N` |
//! | [`sequence_means`] | `sum_b / len_b` per sequence | `g_b / len_b` |
//! | [`masked_var`] | `sum (x - m)^2 / (N - ddof)` | `(x - m) * (2 g / (N - ddof))` |
//! | [`masked_std`] | `sqrt(var)` | `(x - m) * (g / (s (N - ddof)))` |
//! | [`masked_normalize`] | `(x - m) / (s + eps)` | `(g - mean(g)) / (s + eps) - (x - m) * sum(g (x - m)) / ((N - ddof) s (s + eps)^2)` |
//!
//! Sums are canonical over the valid values in packed order. Zero valid steps (for means)
//! and `N <= ddof` (for variances) are errors; a zero standard deviation makes the
//! gradients of `masked_std` and `masked_normalize` non-finite, as in PyTorch.

use rlgrad_core::{Float, Par, Result};

use crate::Sequences;
use crate::backend::Slices;

/// The math of every reduction, written once for any [`Backend`].
pub(crate) mod generic {
    use rlgrad_core::kernels::sequence::{MaskedMap, MaskedTerm};
    use rlgrad_core::{Error, Float, Result, check};

    use crate::Sequences;
    use crate::backend::Backend;

    fn check_x<T: Float, K: Backend<T>>(
        function: &'static str,
        k: &K,
        seqs: &Sequences,
        x: &K::Data,
    ) -> Result<()> {
        let got = k.len(x);
        if got == seqs.padded_steps() {
            Ok(())
        } else {
            Err(Error::shape(
                function,
                "x",
                format_args!(
                    "{} elements ([B, T] = [{}, {}])",
                    seqs.padded_steps(),
                    seqs.batch(),
                    seqs.max_len()
                ),
                format_args!("{got} elements"),
            ))
        }
    }

    fn valid_count<T: Float>(function: &'static str, seqs: &Sequences, needed: usize) -> Result<T> {
        if seqs.total() < needed {
            return Err(Error::empty(
                function,
                "seqs",
                format_args!("at least {needed} valid steps, got {}", seqs.total()),
            ));
        }
        Ok(T::from_usize(seqs.total()))
    }

    pub(crate) fn sum<T: Float, K: Backend<T>>(k: &K, seqs: &Sequences, x: &K::Data) -> Result<T> {
        check_x("masked_sum", k, seqs, x)?;
        k.sum(seqs, x, MaskedTerm::Value)
    }

    pub(crate) fn fill<T: Float, K: Backend<T>>(
        function: &'static str,
        k: &K,
        seqs: &Sequences,
        value: T,
    ) -> Result<K::Owned> {
        k.map(function, seqs, None, MaskedMap::Fill(value))
    }

    pub(crate) fn mean<T: Float, K: Backend<T>>(k: &K, seqs: &Sequences, x: &K::Data) -> Result<T> {
        check_x("masked_mean", k, seqs, x)?;
        let n = valid_count::<T>("masked_mean", seqs, 1)?;
        Ok(k.sum(seqs, x, MaskedTerm::Value)? / n)
    }

    pub(crate) fn mean_backward<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        grad: T,
    ) -> Result<K::Owned> {
        let n = valid_count::<T>("masked_mean_backward", seqs, 1)?;
        fill("masked_mean_backward", k, seqs, grad / n)
    }

    pub(crate) fn sequence_means<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        x: &K::Data,
    ) -> Result<Vec<T>> {
        check_x("sequence_means", k, seqs, x)?;
        check_no_empty_sequence("sequence_means", seqs)?;
        let sums = k.sequence_sums("sequence_means", seqs, x)?;
        Ok(sums
            .iter()
            .zip(seqs.lengths())
            .map(|(&s, &len)| s / T::from_usize(len))
            .collect())
    }

    fn check_no_empty_sequence(function: &'static str, seqs: &Sequences) -> Result<()> {
        match seqs.lengths().iter().position(|&l| l == 0) {
            Some(b) => Err(Error::empty(
                function,
                "seqs",
                format_args!("every sequence to have a valid step, sequence {b} has none"),
            )),
            None => Ok(()),
        }
    }

    pub(crate) fn sequence_means_backward<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        grad: &[T],
    ) -> Result<K::Owned> {
        check_no_empty_sequence("sequence_means_backward", seqs)?;
        check::len("sequence_means_backward", "grad", seqs.batch(), grad.len())?;
        let per_sequence = k.upload(
            grad.iter()
                .zip(seqs.lengths())
                .map(|(&g, &len)| g / T::from_usize(len))
                .collect(),
        )?;
        k.map(
            "sequence_means_backward",
            seqs,
            None,
            MaskedMap::PerSequence(k.borrow(&per_sequence)),
        )
    }

    /// The masked mean, the variance with `ddof` and the divisor `N - ddof`.
    fn moments<T: Float, K: Backend<T>>(
        function: &'static str,
        k: &K,
        seqs: &Sequences,
        x: &K::Data,
        ddof: usize,
    ) -> Result<(T, T, T)> {
        check_x(function, k, seqs, x)?;
        let n = valid_count::<T>(function, seqs, ddof.saturating_add(1))?;
        let mean = k.sum(seqs, x, MaskedTerm::Value)? / n;
        let divisor = T::from_usize(seqs.total() - ddof);
        let var = k.sum(seqs, x, MaskedTerm::SquaredDeviation { mean })? / divisor;
        Ok((mean, var, divisor))
    }

    pub(crate) fn var<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        x: &K::Data,
        ddof: usize,
    ) -> Result<T> {
        Ok(moments("masked_var", k, seqs, x, ddof)?.1)
    }

    pub(crate) fn var_backward<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        x: &K::Data,
        ddof: usize,
        grad: T,
    ) -> Result<K::Owned> {
        let (mean, _, divisor) = moments("masked_var_backward", k, seqs, x, ddof)?;
        let scale = (T::from_f64(2.0) * grad) / divisor;
        let map = MaskedMap::Scale { shift: mean, scale };
        k.map("masked_var_backward", seqs, Some(x), map)
    }

    pub(crate) fn std<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        x: &K::Data,
        ddof: usize,
    ) -> Result<T> {
        Ok(moments("masked_std", k, seqs, x, ddof)?.1.sqrt())
    }

    pub(crate) fn std_backward<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        x: &K::Data,
        ddof: usize,
        grad: T,
    ) -> Result<K::Owned> {
        let (mean, var, divisor) = moments("masked_std_backward", k, seqs, x, ddof)?;
        let scale = grad / (var.sqrt() * divisor);
        let map = MaskedMap::Scale { shift: mean, scale };
        k.map("masked_std_backward", seqs, Some(x), map)
    }

    pub(crate) fn normalize<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        x: &K::Data,
        eps: T,
        ddof: usize,
    ) -> Result<K::Owned> {
        check::non_negative("masked_normalize", "eps", eps.as_f64())?;
        let (mean, var, _) = moments("masked_normalize", k, seqs, x, ddof)?;
        let denominator = var.sqrt() + eps;
        let map = MaskedMap::Standardize { mean, denominator };
        k.map("masked_normalize", seqs, Some(x), map)
    }

    pub(crate) fn normalize_backward<T: Float, K: Backend<T>>(
        k: &K,
        seqs: &Sequences,
        x: &K::Data,
        eps: T,
        ddof: usize,
        grad: &K::Data,
    ) -> Result<K::Owned> {
        check::non_negative("masked_normalize_backward", "eps", eps.as_f64())?;
        if k.len(grad) != seqs.padded_steps() {
            return Err(Error::shape(
                "masked_normalize_backward",
                "grad",
                format_args!("{} elements ([B, T])", seqs.padded_steps()),
                format_args!("{} elements", k.len(grad)),
            ));
        }
        let (mean, var, divisor) = moments("masked_normalize_backward", k, seqs, x, ddof)?;
        let std = var.sqrt();
        let denominator = std + eps;
        let n = T::from_usize(seqs.total());
        let grad_mean = k.sum(seqs, grad, MaskedTerm::Value)? / n;
        let covariance = k.sum(
            seqs,
            x,
            MaskedTerm::Product {
                other: grad,
                shift: mean,
            },
        )?;
        let coefficient = covariance / (divisor * std * denominator * denominator);
        k.map(
            "masked_normalize_backward",
            seqs,
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

/// The sum of the valid steps of the padded `[B, T]` array `x`, canonical in packed order.
pub fn masked_sum<T: Float>(seqs: &Sequences, x: &[T]) -> Result<T> {
    generic::sum(&Slices(Par::auto()), seqs, x)
}

/// The gradient of [`masked_sum`]: `grad` at valid steps, 0 at padding (`[B, T]`).
pub fn masked_sum_backward<T: Float>(seqs: &Sequences, grad: T) -> Result<Vec<T>> {
    generic::fill("masked_sum_backward", &Slices(Par::auto()), seqs, grad)
}

/// The mean over the valid steps only (RLlib's `reduce_mean_valid`): the sum of the valid
/// values divided by their number `N`, bitwise equal to the mean of the unpadded values.
/// An error when no step is valid.
pub fn masked_mean<T: Float>(seqs: &Sequences, x: &[T]) -> Result<T> {
    generic::mean(&Slices(Par::auto()), seqs, x)
}

/// The gradient of [`masked_mean`]: `grad / N` at valid steps, 0 at padding.
pub fn masked_mean_backward<T: Float>(seqs: &Sequences, grad: T) -> Result<Vec<T>> {
    generic::mean_backward(&Slices(Par::auto()), seqs, grad)
}

/// The mean of each sequence's valid steps (`[B]`); an error when a sequence is empty.
pub fn sequence_means<T: Float>(seqs: &Sequences, x: &[T]) -> Result<Vec<T>> {
    generic::sequence_means(&Slices(Par::auto()), seqs, x)
}

/// The gradient of [`sequence_means`] for upstream gradients `grad` (`[B]`).
pub fn sequence_means_backward<T: Float>(seqs: &Sequences, grad: &[T]) -> Result<Vec<T>> {
    generic::sequence_means_backward(&Slices(Par::auto()), seqs, grad)
}

/// The variance of the valid steps with `ddof` delta degrees of freedom (two-pass,
/// canonical sums); an error when `N <= ddof`.
pub fn masked_var<T: Float>(seqs: &Sequences, x: &[T], ddof: usize) -> Result<T> {
    generic::var(&Slices(Par::auto()), seqs, x, ddof)
}

/// The gradient of [`masked_var`] for the upstream gradient `grad`.
pub fn masked_var_backward<T: Float>(
    seqs: &Sequences,
    x: &[T],
    ddof: usize,
    grad: T,
) -> Result<Vec<T>> {
    generic::var_backward(&Slices(Par::auto()), seqs, x, ddof, grad)
}

/// The standard deviation of the valid steps; an error when `N <= ddof`.
pub fn masked_std<T: Float>(seqs: &Sequences, x: &[T], ddof: usize) -> Result<T> {
    generic::std(&Slices(Par::auto()), seqs, x, ddof)
}

/// The gradient of [`masked_std`] for the upstream gradient `grad`.
pub fn masked_std_backward<T: Float>(
    seqs: &Sequences,
    x: &[T],
    ddof: usize,
    grad: T,
) -> Result<Vec<T>> {
    generic::std_backward(&Slices(Par::auto()), seqs, x, ddof, grad)
}

/// Advantage normalization over the valid steps only: `(x - m) / (s + eps)` at valid
/// steps, 0 at padding. Errors: `eps` negative or not finite, `N <= ddof`.
///
/// ```
/// use rlgrad_mask::{masked_normalize, Sequences};
/// let seqs = Sequences::new(&[2, 1], Some(3))?;
/// let advantages = [1.0f64, 3.0, 9e9, 5.0, f64::NAN, 0.0]; // padding holds junk
/// let normalized = masked_normalize(&seqs, &advantages, 0.0, 0)?;
/// let s = (8.0f64 / 3.0).sqrt();
/// assert_eq!(normalized, [-2.0 / s, 0.0, 0.0, 2.0 / s, 0.0, 0.0]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn masked_normalize<T: Float>(
    seqs: &Sequences,
    x: &[T],
    eps: T,
    ddof: usize,
) -> Result<Vec<T>> {
    generic::normalize(&Slices(Par::auto()), seqs, x, eps, ddof)
}

/// The gradient of [`masked_normalize`] for upstream gradients `grad` (`[B, T]`; padding
/// ignored).
pub fn masked_normalize_backward<T: Float>(
    seqs: &Sequences,
    x: &[T],
    eps: T,
    ddof: usize,
    grad: &[T],
) -> Result<Vec<T>> {
    generic::normalize_backward(&Slices(Par::auto()), seqs, x, eps, ddof, grad)
}
