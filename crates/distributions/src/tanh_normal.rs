//! SAC's squashed Gaussian: a diagonal normal followed by `tanh`.

use rlgrad_autodiff::Var;
use rlgrad_core::{Cpu, Float, Result, Rng};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::check::same_shape;
use crate::normal::Normal;
use crate::softplus::softplus;

/// A batch of tanh-squashed diagonal normals (SAC's policy): `u ~ Normal(mean, std)`,
/// `action = tanh(u)` in `(-1, 1)^A`.
///
/// The log-density of the action is the normal's log-density of `u` minus the log of the
/// Jacobian of `tanh`, per element, summed over the action dimension:
///
/// `log_prob = sum_j [N(u_j; mean_j, std_j) - 2 * (ln 2 - u_j - softplus(-2 u_j))]`
///
/// where the second term is `ln(1 - tanh(u)^2)` in its stable form: no `1e-6` epsilon
/// (SB3's and the SAC paper's code add one, which biases the density near the bounds),
/// and no `-inf` or NaN deep in the tails (`u = 6` gives a correction of about
/// `-10.6`, not `ln(0)`). `softplus` is [`crate::softplus`]. The log-density is
/// computed from `u`, never from the action by `atanh` (which loses everything near
/// ±1), so [`TanhNormal::rsample`] returns both.
///
/// There is no closed-form entropy; SAC estimates it by `-log_prob` of a sample.
///
/// ```
/// use rlgrad_autodiff::{Param, Tape};
/// use rlgrad_distributions::TanhNormal;
/// use rlgrad_tensor::Tensor;
/// let mean = Param::new("mean", Tensor::from_vec(vec![4.0f32], [1, 1])?)?;
/// let log_std = Param::new("log_std", Tensor::from_vec(vec![0.0f32], [1, 1])?)?;
/// let tape = Tape::new();
/// let pi = TanhNormal::from_log_std(&tape.param(&mean), &tape.param(&log_std))?;
/// let eps = Tensor::from_vec(vec![2.0f32], [1, 1])?; // u = 6
/// let sample = pi.rsample(&eps)?;
/// let log_prob = sample.log_prob.to_scalar()?;
/// assert!((log_prob - 7.69).abs() < 0.01); // -2.92 + 10.61, finite
/// let grads = tape.gradient(&sample.log_prob.sum_all()?, &[&mean, &log_std])?;
/// assert!(grads.get(&mean)?.to_vec()?[0].is_finite());
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct TanhNormal<'t, T: Float = f32, D: TensorDevice<T> = Cpu> {
    normal: Normal<'t, T, D>,
}

/// A reparameterized sample of a [`TanhNormal`]: the pre-squash value, the action and
/// its log-density, all differentiable with respect to the distribution's parameters.
#[derive(Debug, Clone)]
pub struct TanhSample<'t, T: Float = f32, D: TensorDevice<T> = Cpu> {
    /// `u = mean + std * eps`, `[B, A]`.
    pub pre_tanh: Var<'t, T, D>,
    /// `tanh(u)`, `[B, A]`.
    pub action: Var<'t, T, D>,
    /// The log-density of `action`, summed over the action dimension, `[B]`.
    pub log_prob: Var<'t, T, D>,
}

impl<'t, T: Float, D: TensorDevice<T>> TanhNormal<'t, T, D> {
    /// `tanh` of normals of mean `mean` (`[B, A]`) and standard deviation
    /// `exp(log_std)`, `log_std` `[B, A]` or broadcasting to it
    /// ([`Normal::from_log_std`]).
    pub fn from_log_std(mean: &Var<'t, T, D>, log_std: &Var<'t, T, D>) -> Result<Self> {
        Normal::from_log_std(mean, log_std)
            .map(|normal| Self { normal })
            .map_err(|e| e.in_function("TanhNormal::from_log_std"))
    }

    /// `tanh` of normals of mean `mean` and standard deviation `std`
    /// ([`Normal::from_std`]).
    pub fn from_std(mean: &Var<'t, T, D>, std: &Var<'t, T, D>) -> Result<Self> {
        Normal::from_std(mean, std)
            .map(|normal| Self { normal })
            .map_err(|e| e.in_function("TanhNormal::from_std"))
    }

    /// The normal before the squash.
    pub fn normal(&self) -> &Normal<'t, T, D> {
        &self.normal
    }

    /// The batch size `B`.
    pub fn batch(&self) -> usize {
        self.normal.batch()
    }

    /// The action dimension `A`.
    pub fn action_dim(&self) -> usize {
        self.normal.action_dim()
    }

    /// The deterministic action `tanh(mean)`, `[B, A]` (SAC's evaluation action).
    pub fn mode(&self) -> Result<Var<'t, T, D>> {
        self.normal
            .mean()
            .tanh()
            .map_err(|e| e.in_function("TanhNormal::mode"))
    }

    /// The log-density of the action `tanh(pre_tanh)` per element, from the pre-squash
    /// value `pre_tanh` (`[B, A]`): `N(u) - 2 * (ln 2 - u - softplus(-2u))`, `[B, A]`.
    pub fn log_prob_per_dim(&self, pre_tanh: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        let function = "TanhNormal::log_prob_per_dim";
        same_shape(function, "pre_tanh", pre_tanh, self.normal.mean())?;
        self.squashed_density(pre_tanh)
            .map_err(|e| e.in_function(function))
    }

    /// The log-density of the action `tanh(pre_tanh)` summed over the action
    /// dimension, `[B]`.
    pub fn log_prob(&self, pre_tanh: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        let function = "TanhNormal::log_prob";
        same_shape(function, "pre_tanh", pre_tanh, self.normal.mean())?;
        self.squashed_density(pre_tanh)
            .and_then(|lp| lp.sum(1, false))
            .map_err(|e| e.in_function(function))
    }

    fn squashed_density(&self, u: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        let ln_2 = T::from_f64(std::f64::consts::LN_2);
        // 2 * ((ln 2 - u) - softplus(-2u)) = ln(1 - tanh(u)^2)
        let log_det = u
            .neg()?
            .add_scalar(ln_2)?
            .sub(&softplus(&u.mul_scalar(T::from_f64(-2.0))?)?)?
            .mul_scalar(T::from_f64(2.0))?;
        self.normal.density(u)?.sub(&log_det)
    }

    /// A reparameterized sample for standard-normal noise `eps` (`[B, A]`): `u = mean +
    /// std * eps`, `action = tanh(u)` and the action's log-density (summed over the
    /// action dimension), with gradients through `u` and through the density's mean
    /// and standard deviation.
    pub fn rsample(&self, eps: &Tensor<T, D>) -> Result<TanhSample<'t, T, D>> {
        let function = "TanhNormal::rsample";
        let pre_tanh = self
            .normal
            .rsample(eps)
            .map_err(|e| e.in_function(function))?;
        let action = pre_tanh.tanh().map_err(|e| e.in_function(function))?;
        let log_prob = self
            .squashed_density(&pre_tanh)
            .and_then(|lp| lp.sum(1, false))
            .map_err(|e| e.in_function(function))?;
        Ok(TanhSample {
            pre_tanh,
            action,
            log_prob,
        })
    }

    /// [`TanhNormal::rsample`] with `eps` drawn from `rng` (`B * A` draws of
    /// [`Rng::normal`], row-major).
    pub fn rsample_rng(&self, rng: &mut Rng) -> Result<TanhSample<'t, T, D>> {
        let eps = self.normal.noise(rng)?;
        self.rsample(&eps)
    }

    /// An action without gradient, `tanh` of [`Normal::sample`], `[B, A]`.
    pub fn sample(&self, rng: &mut Rng) -> Result<Tensor<T, D>> {
        self.normal
            .sample(rng)
            .and_then(|u| u.tanh())
            .map_err(|e| e.in_function("TanhNormal::sample"))
    }
}
