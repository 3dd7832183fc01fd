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

use rlgrad_autodiff::losses::{Reduction, mse_loss};
use rlgrad_autodiff::nn::{Activation, Forward, Init, Linear, Mlp, Module};
use rlgrad_autodiff::{ApplyGradients, Param, Tape, Var};
use rlgrad_checkpoint::State;
use rlgrad_core::{Result, Rng};
use rlgrad_distributions::{TanhNormal, TanhSample};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::Tensor;

use crate::off_policy::{Experience, OffPolicy};
use crate::run::{Logger, Target};

/// CleanRL's hyper-parameters for SAC on continuous actions.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Hidden units of the actor and of each critic. Default `[256, 256]`.
    pub hidden: [usize; 2],
    /// The actor's Adam learning rate. Default 3e-4.
    pub policy_lr: f64,
    /// The critics' and the temperature's Adam learning rate. Default 1e-3.
    pub q_lr: f64,
    /// The discount. Default 0.99.
    pub gamma: f32,
    /// Polyak coefficient of the target updates. Default 0.005.
    pub tau: f64,
    /// Steps of uniformly random actions before the policy acts and training starts.
    /// Default 5 000.
    pub learning_starts: u64,
    /// Transitions per training iteration. Default 256.
    pub batch_size: usize,
    /// The replay buffer's capacity. Default 10^6.
    pub replay_capacity: usize,
    /// Steps between actor updates, each time that many of them. Default 2.
    pub policy_frequency: u64,
    /// The temperature: `None` tunes it (from `alpha = 1`, towards an entropy of `-A`),
    /// `Some(alpha)` keeps it fixed.
    pub fixed_alpha: Option<f32>,
    /// Reached at a mean return of -200 over the last 10 episodes.
    pub target: Target,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            hidden: [256, 256],
            policy_lr: 3e-4,
            q_lr: 1e-3,
            gamma: 0.99,
            tau: 0.005,
            learning_starts: 5_000,
            batch_size: 256,
            replay_capacity: 1_000_000,
            policy_frequency: 2,
            fixed_alpha: None,
            target: Target {
                window: 10,
                threshold: -200.0,
            },
        }
    }
}

/// `log_std` is squashed into `[LOG_STD_MIN, LOG_STD_MAX]`, as CleanRL's actor does.
const LOG_STD_MIN: f32 = -5.0;
const LOG_STD_MAX: f32 = 2.0;

/// The squashed Gaussian policy: a ReLU trunk and the mean and `log_std` heads.
#[derive(Debug, Clone, Module)]
pub struct Actor {
    trunk: Mlp,
    mean: Linear,
    log_std: Linear,
    #[module(skip)]
    max_action: f32,
}

impl Actor {
    /// `pi(.|s)` for states `[N, obs]`: a sample `u`, the action `max_action * tanh(u)`
    /// and its log-density `[N, 1]` (drawing `N * A` normals from `rng`).
    fn sample<'t>(&self, tape: &'t Tape, s: &Var<'t>, rng: &mut Rng) -> Result<TanhSample<'t>> {
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

/// The twin critics `Q_i(s, a) = mlp_i([s, a])`.
#[derive(Debug, Clone, Module)]
pub struct Critics {
    q1: Mlp,
    q2: Mlp,
}

impl Critics {
    /// `min(Q1, Q2)(s, a)` and, for the critic loss, both.
    fn q<'t>(&self, tape: &'t Tape, s: &Var<'t>, a: &Var<'t>) -> Result<[Var<'t>; 3]> {
        let input = Var::concat(&[s, a], 1)?;
        let (q1, q2) = (
            self.q1.forward(tape, &input)?,
            self.q2.forward(tape, &input)?,
        );
        Ok([q1.minimum(&q2)?, q1, q2])
    }
}

/// The agent: actor, critics and their targets, the temperature, three optimizers, the
/// experience (with the stream `explore` of the actions taken), and two random streams
/// (`replay`: minibatch rows; `policy`: the samples of the losses).
#[derive(Debug, State)]
pub struct Sac {
    #[state(skip)]
    config: Config,
    #[state(skip)]
    seed: u64,
    #[state(module)]
    actor: Actor,
    #[state(module)]
    critics: Critics,
    #[state(module)]
    targets: Critics,
    #[state(module)]
    log_alpha: Param,
    actor_adam: Optimizer<f32>,
    critic_adam: Optimizer<f32>,
    alpha_adam: Optimizer<f32>,
    experience: Experience,
    replay: Rng,
    policy: Rng,
    #[state(skip)]
    no_grad: Tape,
    #[state(skip)]
    tape: Tape,
}

impl Sac {
    /// A fresh agent: networks drawn from stream `init` of `seed` (actor, then critics),
    /// the environment reset with `seed`.
    pub fn new(config: Config, seed: u64) -> Result<Self> {
        let experience = Experience::new(seed, config.replay_capacity)?;
        let (obs, actions, max_action) = experience.dims();
        let [h1, h2] = config.hidden;
        let rng = &mut Rng::new(seed, "init");
        let relu = Activation::Relu;
        let trunk = Mlp::new("actor", &[obs, h1, h2], relu, relu, Init::TorchDefault, rng)?;
        let mean = Linear::new("actor/mean", h2, actions, Init::TorchDefault, rng)?;
        let log_std = Linear::new("actor/log_std", h2, actions, Init::TorchDefault, rng)?;
        let mut critic = |name| {
            let sizes = [obs + actions, h1, h2, 1];
            Mlp::new(
                name,
                &sizes,
                relu,
                Activation::Identity,
                Init::TorchDefault,
                rng,
            )
        };
        let critics = Critics {
            q1: critic("critic/q1")?,
            q2: critic("critic/q2")?,
        };
        let adam = |lr| Optimizer::new(Adam::torch(), lr);
        Ok(Self {
            actor: Actor {
                trunk,
                mean,
                log_std,
                max_action,
            },
            targets: critics.clone(),
            critics,
            log_alpha: Param::new("log_alpha", Tensor::zeros([1])?)?,
            actor_adam: adam(config.policy_lr)?,
            critic_adam: adam(config.q_lr)?,
            alpha_adam: adam(config.q_lr)?,
            experience,
            replay: Rng::new(seed, "replay"),
            policy: Rng::new(seed, "policy"),
            no_grad: Tape::new().no_grad(),
            tape: Tape::new(),
            config,
            seed,
        })
    }

    /// The temperature `alpha`.
    fn alpha(&self) -> Result<f32> {
        match self.config.fixed_alpha {
            Some(alpha) => Ok(alpha),
            None => Ok(self.log_alpha.value().to_vec()?[0].exp()),
        }
    }

    /// One training iteration; returns the critic loss and, when the actor updated, its
    /// last loss and the temperature.
    fn train_iteration(&mut self) -> Result<(f32, Option<(f32, f32)>)> {
        let batch = self
            .experience
            .sample(self.config.batch_size, &mut self.replay)?;
        let alpha = self.alpha()?;
        let target = {
            let tape = &self.no_grad;
            let next_states = tape.constant(&batch.next_obs);
            let next = self.actor.sample(tape, &next_states, &mut self.policy)?;
            let [min_q, ..] = self.targets.q(tape, &next_states, &next.action)?;
            let soft_value = min_q.sub(&next.log_prob.mul_scalar(alpha)?)?;
            let not_dones = tape
                .constant(&batch.not_dones)
                .mul_scalar(self.config.gamma)?;
            tape.constant(&batch.rewards)
                .add(&not_dones.mul(&soft_value)?)?
                .into_value()
        };
        self.tape.reset();
        let tape = &self.tape;
        let (states, target) = (tape.constant(&batch.obs), tape.constant(&target));
        let [_, q1, q2] = self
            .critics
            .q(tape, &states, &tape.constant(&batch.actions))?;
        let critic_loss = mse_loss(&q1, &target, Reduction::Mean)?.add(&mse_loss(
            &q2,
            &target,
            Reduction::Mean,
        )?)?;
        let grads = tape.gradient(&critic_loss, &[&self.critics])?;
        self.critic_adam
            .apply_gradients(&mut self.critics, &grads)?;
        let critic_loss = critic_loss.to_scalar()?;
        let steps = self.experience.env_steps();
        let mut actor_update = None;
        if steps.is_multiple_of(self.config.policy_frequency) {
            for _ in 0..self.config.policy_frequency {
                actor_update = Some(self.update_actor_and_alpha(&batch.obs)?);
            }
        }
        self.targets
            .soft_update_from(&self.critics, self.config.tau)?;
        Ok((critic_loss, actor_update))
    }

    /// One actor step and, when tuned, one temperature step; the actor's loss and the
    /// temperature it used.
    fn update_actor_and_alpha(&mut self, obs: &Tensor) -> Result<(f32, f32)> {
        let alpha = self.alpha()?;
        self.tape.reset();
        let tape = &self.tape;
        let states = tape.constant(obs);
        let pi = self.actor.sample(tape, &states, &mut self.policy)?;
        let [min_q, ..] = self.critics.q(tape, &states, &pi.action)?;
        let actor_loss = pi.log_prob.mul_scalar(alpha)?.sub(&min_q)?.mean_all()?;
        let grads = tape.gradient(&actor_loss, &[&self.actor])?;
        self.actor_adam.apply_gradients(&mut self.actor, &grads)?;
        let actor_loss = actor_loss.to_scalar()?;
        if self.config.fixed_alpha.is_none() {
            let tape = &self.no_grad;
            let log_pi = self
                .actor
                .sample(tape, &tape.constant(obs), &mut self.policy)?
                .log_prob
                .into_value();
            let target_entropy = -(self.actor.mean.outputs() as f32);
            self.tape.reset();
            let tape = &self.tape;
            let log_alpha = tape.param(&self.log_alpha);
            let gap = tape.constant(&log_pi).add_scalar(target_entropy)?;
            let alpha_loss = log_alpha.exp()?.neg()?.mul(&gap)?.mean_all()?;
            let grads = tape.gradient(&alpha_loss, &[&self.log_alpha])?;
            self.alpha_adam
                .apply_gradients(&mut self.log_alpha, &grads)?;
        }
        Ok((actor_loss, alpha))
    }
}

/// Iterations between logged losses.
const LOG_EVERY: u64 = 100;

impl OffPolicy for Sac {
    const DEFAULT_BUDGET: u64 = 50_000;

    fn name(&self) -> &'static str {
        "sac"
    }

    fn experience(&self) -> &Experience {
        &self.experience
    }

    fn experience_mut(&mut self) -> &mut Experience {
        &mut self.experience
    }

    fn learning_starts(&self) -> u64 {
        self.config.learning_starts
    }

    /// A sample of the policy.
    fn policy_action(&mut self) -> Result<f32> {
        let tape = &self.no_grad;
        let state = tape.constant(&self.experience.observation()?);
        let explore = self.experience.explore();
        self.actor.sample(tape, &state, explore)?.action.to_scalar()
    }

    fn train(&mut self, step: u64, log: &mut Logger) -> Result<()> {
        let (critic_loss, actor_update) = self.train_iteration()?;
        if step.is_multiple_of(LOG_EVERY) {
            log.scalar("train/critic_loss", step, f64::from(critic_loss))?;
            if let Some((actor_loss, alpha)) = actor_update {
                log.scalar("train/actor_loss", step, f64::from(actor_loss))?;
                log.scalar("train/alpha", step, f64::from(alpha))?;
            }
        }
        Ok(())
    }

    fn target(&self) -> Target {
        self.config.target
    }

    fn describe(&self) -> String {
        format!("{:?}, seed {}", self.config, self.seed)
    }

    fn parameters(&self) -> Result<Vec<(String, Vec<f32>)>> {
        let mut all = crate::named_values("", &self.actor)?;
        all.extend(crate::named_values("", &self.critics)?);
        all.extend(crate::named_values("target", &self.targets)?);
        all.extend(crate::named_values("", &self.log_alpha)?);
        Ok(all)
    }
}
