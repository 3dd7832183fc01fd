//! Independent Bernoulli distributions (binary and multi-binary actions) from logits.

use rlgrad_autodiff::Var;
use rlgrad_core::{Cpu, Error, Float, Result, Rng, check};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::check::{matrix, same_shape};
use crate::softplus::softplus;

/// A batch of `A` independent Bernoulli distributions per row, from logits `[B, A]`
/// (PyTorch's `Bernoulli(logits=...)`; SB3's multi-binary distribution sums over `A`).
/// A single binary action is `A = 1`.
///
/// With `p = sigmoid(x)`, per element, in stable forms (no `ln(0)` for any finite
/// logit):
/// - `log_prob_per_dim(a) = a * x - softplus(x)` (minus PyTorch's
///   `binary_cross_entropy_with_logits`);
/// - `entropy_per_dim = softplus(x) - x * p`.
///
/// [`Bernoulli::log_prob`] and [`Bernoulli::entropy`] sum over the action dimension.
///
/// ```
/// use rlgrad_autodiff::{Param, Tape};
/// use rlgrad_distributions::Bernoulli;
/// use rlgrad_tensor::Tensor;
/// let logits = Param::new("logits", Tensor::from_vec(vec![0.0f64, 40.0], [1, 2])?)?;
/// let tape = Tape::new();
/// let pi = Bernoulli::from_logits(&tape.param(&logits))?;
/// let actions = tape.constant(&Tensor::from_vec(vec![1.0, 0.0], [1, 2])?);
/// let log_prob = pi.log_prob_per_dim(&actions)?.to_vec()?;
/// assert_eq!(log_prob, [-std::f64::consts::LN_2, -40.0]); // not ln(0)
/// assert_eq!(pi.mode()?.to_vec()?, [0.0, 1.0]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Bernoulli<'t, T: Float = f32, D: TensorDevice<T> = Cpu> {
    logits: Var<'t, T, D>,
}

impl<'t, T: Float, D: TensorDevice<T>> Bernoulli<'t, T, D> {
    /// The distributions of logits `logits`, `[B, A]` with `A >= 1`.
    pub fn from_logits(logits: &Var<'t, T, D>) -> Result<Self> {
        matrix("Bernoulli::from_logits", "logits", logits)?;
        Ok(Self {
            logits: logits.clone(),
        })
    }

    /// The batch size `B`.
    pub fn batch(&self) -> usize {
        self.logits.dims()[0]
    }

    /// The action dimension `A`.
    pub fn action_dim(&self) -> usize {
        self.logits.dims()[1]
    }

    /// The logits, `[B, A]`.
    pub fn logits(&self) -> &Var<'t, T, D> {
        &self.logits
    }

    /// The probabilities of 1, `sigmoid(logits)`, `[B, A]`.
    pub fn probs(&self) -> Result<Var<'t, T, D>> {
        self.logits
            .sigmoid()
            .map_err(|e| e.in_function("Bernoulli::probs"))
    }

    /// The log-probability of `actions` (`[B, A]`, each 0 or 1) per element, `[B, A]`.
    /// An error for another shape or a value other than 0 and 1.
    pub fn log_prob_per_dim(&self, actions: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        let function = "Bernoulli::log_prob_per_dim";
        self.check_actions(function, actions)?;
        self.density(actions).map_err(|e| e.in_function(function))
    }

    /// The log-probability of `actions` summed over the action dimension, `[B]`.
    pub fn log_prob(&self, actions: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        let function = "Bernoulli::log_prob";
        self.check_actions(function, actions)?;
        self.density(actions)
            .and_then(|lp| lp.sum(1, false))
            .map_err(|e| e.in_function(function))
    }

    /// `Ok` when `actions` has the logits' shape and holds only 0 and 1.
    pub(crate) fn check_actions(
        &self,
        function: &'static str,
        actions: &Var<'t, T, D>,
    ) -> Result<()> {
        same_shape(function, "actions", actions, &self.logits)?;
        let values = actions.to_vec()?;
        if let Some(i) =
            (0..values.len()).find(|&i| values[i] != T::zero() && values[i] != T::one())
        {
            return Err(Error::value(
                function,
                "actions",
                "0 or 1 everywhere",
                format_args!("{} at flat index {i}", values[i]),
            ));
        }
        Ok(())
    }

    pub(crate) fn density(&self, actions: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        actions.mul(&self.logits)?.sub(&softplus(&self.logits)?)
    }

    /// The entropy per element, `[B, A]`.
    pub fn entropy_per_dim(&self) -> Result<Var<'t, T, D>> {
        self.entropy_elements()
            .map_err(|e| e.in_function("Bernoulli::entropy_per_dim"))
    }

    fn entropy_elements(&self) -> Result<Var<'t, T, D>> {
        softplus(&self.logits)?.sub(&self.logits.mul(&self.logits.sigmoid()?)?)
    }

    /// The entropy summed over the action dimension, `[B]`.
    pub fn entropy(&self) -> Result<Var<'t, T, D>> {
        self.entropy_elements()
            .and_then(|h| h.sum(1, false))
            .map_err(|e| e.in_function("Bernoulli::entropy"))
    }

    /// The most likely outcome of each element: 1 where the logit is above 0, else 0
    /// (ties at `p = 0.5` give 0), `[B, A]`.
    pub fn mode(&self) -> Result<Tensor<T, D>> {
        let zero = Tensor::zeros_on(self.logits.tape().device(), [1])?;
        self.logits
            .value()
            .gt(&zero)
            .map_err(|e| e.in_function("Bernoulli::mode"))
    }

    /// One outcome per element drawn from `rng`, `[B, A]`: element by element in
    /// row-major order, 1 when `rng.uniform_f64()` is below `p = sigmoid(x)` (rounded to
    /// `T`, compared in f64), else 0. An error for a NaN logit.
    pub fn sample(&self, rng: &mut Rng) -> Result<Tensor<T, D>> {
        let function = "Bernoulli::sample";
        let p = self.logits.value().sigmoid()?.to_vec()?;
        check::finite(function, "logits", &p)?;
        let draws = p
            .iter()
            .map(|&p| {
                if rng.uniform_f64() < p.as_f64() {
                    T::one()
                } else {
                    T::zero()
                }
            })
            .collect();
        Tensor::from_vec_on(
            self.logits.tape().device(),
            draws,
            self.logits.shape().clone(),
        )
    }
}
