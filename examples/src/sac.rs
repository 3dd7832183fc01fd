//! SAC (Haarnoja et al., 2018, with the automatic entropy tuning of the second paper) on
//! Pendulum-v1, with the hyper-parameters of CleanRL's `sac_continuous_action.py`.
//!
//! - Actor `3 -> 256 -> 256` (ReLU) with two heads, the mean and `log_std` of a
//!   tanh-squashed Gaussian (`rlgrad_distributions::TanhNormal`); `log_std` is
//!   `tanh` of its head mapped to `[-5, 2]`, the action `max_action * tanh(u)`. Twin
//!   critics `(state, action) 4 -> 256 -> 256 -> 1` (ReLU) and their Polyak targets
//!   (`tau = 0.005`, every step). PyTorch's initialization.
//! - The first 5 000 steps act uniformly at random, then by sampling the policy; one
//!   training iteration per step from then on, on 256 transitions drawn uniformly from a
//!   replay buffer of up to 10^6.
//! - Critic target `r + (1 - terminated) * 0.99 * (min(Q1', Q2')(s', a') - alpha *
//!   log_pi(a'|s'))` with `a' ~ pi(s')`; critic loss `MSE(Q1) + MSE(Q2)`, Adam 1e-3. Every
//!   2 steps, 2 actor updates (CleanRL's delayed updates that keep the number of actor
//!   steps): `mean(alpha * log_pi(a|s) - min(Q1, Q2)(s, a))` with `a ~ pi(s)`
//!   reparameterized, Adam 3e-4, each followed by the temperature's:
//!   `mean(-exp(log_alpha) * (log_pi + target_entropy))` with `target_entropy = -A` and
//!   a fresh sample, Adam 1e-3 on `log_alpha` (from 0).
//! - The schedule counts environment steps from 1 (training after step 5 000, the actor
//!   on even steps), one step later than CleanRL's 0-based `global_step`; the twin
//!   counts as rlgrad does.
//! - The log-density of the squashed action uses the stable `ln(1 - tanh(u)^2) = 2 (ln 2 -
//!   u - softplus(-2u))` of `TanhNormal` and subtracts `ln(max_action)` per action
//!   dimension; CleanRL writes `ln(max_action * (1 - tanh(u)^2) + 1e-6)`. The PyTorch twin
//!   (`examples/python/sac.py`) computes it as rlgrad does.

use rlgrad_autodiff::prelude::*;
use rlgrad_checkpoint::State;
use rlgrad_core::Cpu;
use rlgrad_distributions::{TanhNormal, TanhSample};

use crate::cli::Build;
use crate::device::TrainDevice;
use crate::off_policy::{AgentConfig, Batch, Common, Learner, OffPolicy, Progress, Scalars};
use crate::run::Options;

/// CleanRL's hyper-parameters for SAC on continuous actions.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Networks, discount, Polyak, replay, the target; 5 000 random start steps.
    pub common: Common,
    /// The actor's Adam learning rate. Default 3e-4.
    pub policy_lr: f64,
    /// The critics' and the temperature's Adam learning rate. Default 1e-3.
    pub q_lr: f64,
    /// Steps between actor updates, each time that many of them. Default 2.
    pub policy_frequency: u64,
    /// The temperature: `None` tunes it (from `alpha = 1`, towards an entropy of `-A`),
    /// `Some(alpha)` keeps it fixed.
    pub fixed_alpha: Option<f32>,
}

impl AgentConfig for Config {
    fn common(&self) -> &Common {
        &self.common
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            common: Common::new("sac", 5_000),
            policy_lr: 3e-4,
            q_lr: 1e-3,
            policy_frequency: 2,
            fixed_alpha: None,
        }
    }
}

/// Builds SAC on any device: the examples' `--device`.
impl Build for Config {
    type Agent<D: TrainDevice> = OffPolicy<Sac<D>>;

    fn build<D: TrainDevice>(&self, options: &Options, device: &D) -> Result<OffPolicy<Sac<D>>> {
        Sac::new_on(device, self.clone(), options.seed)
    }
}

/// `log_std` is squashed into `[LOG_STD_MIN, LOG_STD_MAX]`, as CleanRL's actor does.
const LOG_STD_MIN: f32 = -5.0;
const LOG_STD_MAX: f32 = 2.0;

/// The squashed Gaussian policy on device `D`: a ReLU trunk and the mean and `log_std`
/// heads.
#[derive(Debug, Clone, Module)]
pub struct Actor<D: TrainDevice = Cpu> {
    trunk: Mlp<f32, D>,
    mean: Linear<f32, D>,
    log_std: Linear<f32, D>,
    #[module(skip)]
    max_action: f32,
}

impl<D: TrainDevice> Actor<D> {
    /// `pi(.|s)` for states `[N, obs]`: a sample `u`, the action `max_action * tanh(u)`
    /// and its log-density `[N, 1]` (drawing `N * A` normals from `rng` on the host).
    fn sample<'t>(
        &self,
        tape: &'t Tape<f32, D>,
        s: &Var<'t, f32, D>,
        rng: &mut Rng,
    ) -> Result<TanhSample<'t, f32, D>> {
        let h = self.trunk.forward(tape, s)?;
        let log_std = self.log_std.forward(tape, &h)?.tanh()?.add_scalar(1.0)?;
        let log_std = log_std.mul_scalar(0.5 * (LOG_STD_MAX - LOG_STD_MIN))?;
        let pi = TanhNormal::from_log_std(
            &self.mean.forward(tape, &h)?,
            &log_std.add_scalar(LOG_STD_MIN)?,
        )?;
        let mut sample = pi.rsample_rng(rng)?;
        let scale_log_det = self.max_action.ln() * pi.action_dim() as f32;
        sample.log_prob = sample.log_prob.add_scalar(-scale_log_det)?.unsqueeze(1)?;
        sample.action = sample.action.mul_scalar(self.max_action)?;
        Ok(sample)
    }
}

/// The twin critics `Q_i(s, a) = mlp_i([s, a])` on device `D`.
#[derive(Debug, Clone, Module)]
pub struct Critics<D: TrainDevice = Cpu> {
    q1: Mlp<f32, D>,
    q2: Mlp<f32, D>,
}

impl<D: TrainDevice> Critics<D> {
    /// `min(Q1, Q2)(s, a)` and, for the critic loss, both.
    fn q<'t>(
        &self,
        tape: &'t Tape<f32, D>,
        s: &Var<'t, f32, D>,
        a: &Var<'t, f32, D>,
    ) -> Result<[Var<'t, f32, D>; 3]> {
        let input = Var::concat(&[s, a], 1)?;
        let (q1, q2) = (
            self.q1.forward(tape, &input)?,
            self.q2.forward(tape, &input)?,
        );
        Ok([q1.minimum(&q2)?, q1, q2])
    }
}

/// The learner on device `D`: actor, critics and their targets, the temperature, three
/// optimizers and the random stream `policy` of the losses' samples; all of it
/// checkpointed by `#[derive(State)]`.
#[derive(Debug, State)]
pub struct Sac<D: TrainDevice = Cpu> {
    #[state(skip)]
    config: Config,
    #[state(module)]
    actor: Actor<D>,
    #[state(module)]
    critics: Critics<D>,
    #[state(module)]
    targets: Critics<D>,
    #[state(module)]
    log_alpha: Param<f32, D>,
    /// A fixed temperature, uploaded once.
    #[state(skip)]
    fixed_alpha: Option<Tensor<f32, D>>,
    actor_adam: Optimizer<f32, D>,
    critic_adam: Optimizer<f32, D>,
    alpha_adam: Optimizer<f32, D>,
    policy: Rng,
    #[state(skip)]
    no_grad: Tape<f32, D>,
    #[state(skip)]
    tape: Tape<f32, D>,
}

impl Sac {
    /// A fresh agent on the Cpu: networks drawn from stream `init` of `seed` (actor, then
    /// critics), the environment reset with `seed`.
    pub fn new(config: Config, seed: u64) -> Result<OffPolicy<Self>> {
        Self::new_on(&Cpu::default(), config, seed)
    }
}

impl<D: TrainDevice> Sac<D> {
    /// A fresh agent on `device`: the bits of [`Sac::new`]'s on every device (the
    /// networks are drawn on the host, then uploaded).
    pub fn new_on(device: &D, config: Config, seed: u64) -> Result<OffPolicy<Self>> {
        OffPolicy::new(seed, &config, |dims, rng| {
            let (obs, actions, max_action) = (dims.observation, dims.action, dims.max_action);
            let [h1, h2] = config.common.hidden;
            let (relu, init) = (Activation::Relu, Init::TorchDefault);
            let trunk = Mlp::new_on(device, "actor", &[obs, h1, h2], relu, relu, init, rng)?;
            let mean = Linear::new_on(device, "actor/mean", h2, actions, init, rng)?;
            let log_std = Linear::new_on(device, "actor/log_std", h2, actions, init, rng)?;
            let (sizes, identity) = ([obs + actions, h1, h2, 1], Activation::Identity);
            let mut critic = |name| Mlp::new_on(device, name, &sizes, relu, identity, init, rng);
            let critics = Critics {
                q1: critic("critic/q1")?,
                q2: critic("critic/q2")?,
            };
            let adam = |lr| Optimizer::new_on(device.clone(), Adam::torch(), lr);
            Ok(Self {
                actor: Actor {
                    trunk,
                    mean,
                    log_std,
                    max_action,
                },
                targets: critics.clone(),
                critics,
                log_alpha: Param::new("log_alpha", Tensor::zeros_on(device, [1])?)?,
                fixed_alpha: (config.fixed_alpha)
                    .map(|alpha| Tensor::full_on(device, [1], alpha))
                    .transpose()?,
                actor_adam: adam(config.policy_lr)?,
                critic_adam: adam(config.q_lr)?,
                alpha_adam: adam(config.q_lr)?,
                policy: Rng::new(seed, "policy"),
                no_grad: Tape::new_on(device).no_grad(),
                tape: Tape::new_on(device),
                config: config.clone(),
            })
        })
    }

    /// The temperature `alpha` as a one-element tensor: a tuned one is `exp(log_alpha)`
    /// on the device (the portable libm's `exp`, the same bits on every device), so that an
    /// update reads nothing back and a GPU can record it as a CUDA graph.
    fn alpha(&self) -> Result<Tensor<f32, D>> {
        match &self.fixed_alpha {
            Some(alpha) => Ok(alpha.clone()),
            None => self.log_alpha.value().exp(),
        }
    }

    /// One actor step with temperature `alpha` (the current one) and, when tuned, one
    /// temperature step; the actor's loss (left on the device, read only when logged).
    fn update_actor_and_alpha(
        &mut self,
        obs: &Tensor<f32, D>,
        alpha: &Tensor<f32, D>,
    ) -> Result<Tensor<f32, D>> {
        let tape = self.tape.reset();
        let states = tape.constant(obs);
        let pi = self.actor.sample(tape, &states, &mut self.policy)?;
        let [min_q, ..] = self.critics.q(tape, &states, &pi.action)?;
        let actor_loss = (pi.log_prob.mul(&tape.constant(alpha))? - min_q)?.mean_all()?;
        self.actor_adam.minimize(&actor_loss, &mut self.actor)?;
        let actor_loss = actor_loss.into_value();
        if self.config.fixed_alpha.is_none() {
            let tape = &self.no_grad;
            let log_pi = self
                .actor
                .sample(tape, &tape.constant(obs), &mut self.policy)?
                .log_prob
                .into_value();
            let target_entropy = -(self.actor.mean.outputs() as f32);
            let tape = self.tape.reset();
            let gap = (tape.constant(&log_pi) + target_entropy)?;
            let alpha_loss = ((-tape.param(&self.log_alpha).exp()?)? * gap)?.mean_all()?;
            self.alpha_adam.minimize(&alpha_loss, &mut self.log_alpha)?;
        }
        Ok(actor_loss)
    }
}

impl<D: TrainDevice> Learner for Sac<D> {
    const DEFAULT_BUDGET: u64 = 50_000;

    type Device = D;

    fn device(&self) -> &D {
        self.tape.device()
    }

    /// A sample of the policy.
    fn act(&mut self, observation: &Tensor<f32, D>, explore: &mut Rng) -> Result<f32> {
        let tape = &self.no_grad;
        let state = tape.constant(observation);
        self.actor.sample(tape, &state, explore)?.action.to_scalar()
    }

    /// One training iteration: the critics; on every `policy_frequency`-th step that many
    /// actor (and temperature) steps; the targets. Logs the critic loss and, when the
    /// actor updated, its last loss and the temperature.
    fn update(
        &mut self,
        batch: &Batch<D>,
        at: Progress,
        mut scalars: Option<&mut Scalars>,
    ) -> Result<()> {
        let alpha = self.alpha()?;
        let target = {
            let tape = &self.no_grad;
            let next_states = tape.constant(&batch.next_obs);
            let next = self.actor.sample(tape, &next_states, &mut self.policy)?;
            let [min_q, ..] = self.targets.q(tape, &next_states, &next.action)?;
            let soft_value = (min_q - next.log_prob.mul(&tape.constant(&alpha))?)?;
            let not_dones = (tape.constant(&batch.not_dones) * self.config.common.gamma)?;
            (tape.constant(&batch.rewards) + (not_dones * soft_value)?)?.into_value()
        };
        let tape = self.tape.reset();
        let (states, target) = (tape.constant(&batch.obs), tape.constant(&target));
        let [_, q1, q2] = self
            .critics
            .q(tape, &states, &tape.constant(&batch.actions))?;
        let critic_loss =
            (mse_loss(&q1, &target, Reduction::Mean)? + mse_loss(&q2, &target, Reduction::Mean)?)?;
        self.critic_adam.minimize(&critic_loss, &mut self.critics)?;
        if let Some(scalars) = scalars.as_deref_mut() {
            scalars.push(("train/critic_loss", critic_loss.to_scalar()?));
        }
        if at.step.is_multiple_of(self.config.policy_frequency) {
            // The critics' temperature serves the first actor step; a tuned one changes
            // with each temperature step after it.
            let (mut alpha, mut last) = (alpha, None);
            for i in 0..self.config.policy_frequency {
                if i > 0 && self.fixed_alpha.is_none() {
                    alpha = self.alpha()?;
                }
                last = Some((
                    self.update_actor_and_alpha(&batch.obs, &alpha)?,
                    alpha.clone(),
                ));
            }
            if let (Some(scalars), Some((actor_loss, alpha))) = (scalars, last) {
                scalars.push(("train/actor_loss", actor_loss.to_scalar()?));
                scalars.push(("train/alpha", alpha.to_scalar()?));
            }
        }
        self.targets
            .soft_update_from(&self.critics, self.config.common.tau)?;
        Ok(())
    }
}
