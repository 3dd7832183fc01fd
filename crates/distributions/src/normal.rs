//! The diagonal normal distribution over `A`-dimensional continuous actions.

use rlgrad_autodiff::Var;
use rlgrad_core::{Cpu, Float, Result, Rng};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::check::{broadcast_to, matrix, same_shape, same_tape};

/// `ln(sqrt(2 pi))`, the normal log-density's constant.
pub(crate) const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// A batch of diagonal normal distributions (PyTorch's `Normal(mean, std)` with the
/// SB3/CleanRL reduction): each row `b` is `A` independent normals, and
/// [`Normal::log_prob`] and [`Normal::entropy`] sum over the action dimension (`[B]`);
/// [`Normal::log_prob_per_dim`] and [`Normal::entropy_per_dim`] keep it (`[B, A]`).
///
/// With `std = exp(log_std)`, per element, in this order of operations:
/// - `log_prob_per_dim(a) = -((a - mean)^2 / (2 * std^2)) - log_std - ln(sqrt(2 pi))`
///   (PyTorch's order; `log_std` is used as given, not recomputed as `ln(std)`);
/// - `entropy_per_dim = (0.5 + ln(sqrt(2 pi))) + log_std`;
/// - `rsample(eps) = mean + std * eps` (reparameterized: gradients reach `mean` and
///   `log_std`).
///
/// The sums over the action dimension are the canonical reduction of `rlgrad-tensor`.
///
/// ```
/// use rlgrad_autodiff::{Param, Tape};
/// use rlgrad_distributions::Normal;
/// use rlgrad_tensor::Tensor;
/// let mean = Param::new("mean", Tensor::from_vec(vec![0.0f64, 1.0], [1, 2])?)?;
/// let log_std = Param::new("log_std", Tensor::zeros([2])?)?; // state-independent, [A]
/// let tape = Tape::new();
/// let pi = Normal::from_log_std(&tape.param(&mean), &tape.param(&log_std))?;
/// let action = tape.constant(&Tensor::from_vec(vec![0.0, 1.0], [1, 2])?);
/// let log_prob = pi.log_prob(&action)?;
/// assert!((log_prob.to_scalar()? + (2.0 * std::f64::consts::PI).ln()).abs() < 1e-15);
/// let grads = tape.gradient(&log_prob.sum_all()?, &[&mean, &log_std])?;
/// assert_eq!(grads.get(&log_std)?.to_vec()?, [-1.0, -1.0]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Normal<'t, T: Float = f32, D: TensorDevice<T> = Cpu> {
    mean: Var<'t, T, D>,
    log_std: Var<'t, T, D>,
    std: Var<'t, T, D>,
}

impl<'t, T: Float, D: TensorDevice<T>> Normal<'t, T, D> {
    /// Normals of mean `mean` (`[B, A]`) and standard deviation `exp(log_std)`;
    /// `log_std` is `[B, A]` or broadcasts to it (`[A]`: a state-independent log-std
    /// parameter, as in PPO).
    pub fn from_log_std(mean: &Var<'t, T, D>, log_std: &Var<'t, T, D>) -> Result<Self> {
        let function = "Normal::from_log_std";
        matrix(function, "mean", mean)?;
        same_tape(function, "log_std", log_std, mean)?;
        let log_std = broadcast_to(function, "log_std", log_std, mean.dims())?;
        let std = log_std.exp().map_err(|e| e.in_function(function))?;
        Ok(Self {
            mean: mean.clone(),
            log_std,
            std,
        })
    }

    /// Normals of mean `mean` (`[B, A]`) and standard deviation `std` (`[B, A]` or
    /// broadcasting to it); `log_std = ln(std)`. A `std` of 0 gives `-inf`/NaN
    /// log-densities the IEEE way.
    pub fn from_std(mean: &Var<'t, T, D>, std: &Var<'t, T, D>) -> Result<Self> {
        let function = "Normal::from_std";
        matrix(function, "mean", mean)?;
        same_tape(function, "std", std, mean)?;
        let std = broadcast_to(function, "std", std, mean.dims())?;
        let log_std = std.log().map_err(|e| e.in_function(function))?;
        Ok(Self {
            mean: mean.clone(),
            log_std,
            std,
        })
    }

    /// The batch size `B`.
    pub fn batch(&self) -> usize {
        self.mean.dims()[0]
    }

    /// The action dimension `A`.
    pub fn action_dim(&self) -> usize {
        self.mean.dims()[1]
    }

    /// The means, `[B, A]` (also the mode).
    pub fn mean(&self) -> &Var<'t, T, D> {
        &self.mean
    }

    /// The log standard deviations, `[B, A]`.
    pub fn log_std(&self) -> &Var<'t, T, D> {
        &self.log_std
    }

    /// The standard deviations, `[B, A]`.
    pub fn std(&self) -> &Var<'t, T, D> {
        &self.std
    }

    /// The log-density of `actions` (`[B, A]`) per element, `[B, A]`.
    pub fn log_prob_per_dim(&self, actions: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        let function = "Normal::log_prob_per_dim";
        same_shape(function, "actions", actions, &self.mean)?;
        self.density(actions).map_err(|e| e.in_function(function))
    }

    pub(crate) fn density(&self, x: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        let two_var = self.std.square()?.mul_scalar(T::from_f64(2.0))?;
        let log_density = x
            .sub(&self.mean)?
            .square()?
            .div(&two_var)?
            .neg()?
            .sub(&self.log_std)?;
        &log_density - T::from_f64(LN_SQRT_2PI)
    }

    /// The log-density of `actions` (`[B, A]`) summed over the action dimension, `[B]`.
    pub fn log_prob(&self, actions: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        let function = "Normal::log_prob";
        same_shape(function, "actions", actions, &self.mean)?;
        self.density(actions)
            .and_then(|lp| lp.sum(1, false))
            .map_err(|e| e.in_function(function))
    }

    /// The entropy per element, `[B, A]`.
    pub fn entropy_per_dim(&self) -> Result<Var<'t, T, D>> {
        self.log_std
            .add_scalar(T::from_f64(0.5 + LN_SQRT_2PI))
            .map_err(|e| e.in_function("Normal::entropy_per_dim"))
    }

    /// The entropy summed over the action dimension, `[B]`.
    pub fn entropy(&self) -> Result<Var<'t, T, D>> {
        self.entropy_per_dim()
            .and_then(|h| h.sum(1, false))
            .map_err(|e| e.in_function("Normal::entropy"))
    }

    /// The reparameterized sample `mean + std * eps` for standard-normal noise `eps`
    /// (`[B, A]`, a constant), `[B, A]`.
    pub fn rsample(&self, eps: &Tensor<T, D>) -> Result<Var<'t, T, D>> {
        let function = "Normal::rsample";
        let eps = self.mean.tape().constant(eps);
        same_shape(function, "eps", &eps, &self.mean)?;
        self.std
            .mul(&eps)
            .and_then(|s| self.mean.add(&s))
            .map_err(|e| e.in_function(function))
    }

    /// [`Normal::rsample`] with `eps` drawn from `rng`: `B * A` draws of
    /// [`Rng::normal`] in row-major order.
    pub fn rsample_rng(&self, rng: &mut Rng) -> Result<Var<'t, T, D>> {
        let eps = self.noise(rng)?;
        self.rsample(&eps)
    }

    pub(crate) fn noise(&self, rng: &mut Rng) -> Result<Tensor<T, D>> {
        Tensor::rand_normal_on(
            self.mean.tape().device(),
            self.mean.shape().clone(),
            0.0,
            1.0,
            rng,
        )
    }

    /// A sample without gradient (the value of [`Normal::rsample_rng`]), `[B, A]`.
    pub fn sample(&self, rng: &mut Rng) -> Result<Tensor<T, D>> {
        let function = "Normal::sample";
        let eps = self.noise(rng)?;
        self.std
            .value()
            .mul(&eps)
            .and_then(|s| self.mean.value().add(&s))
            .map_err(|e| e.in_function(function))
    }
}
