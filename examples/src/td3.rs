//! TD3 (Fujimoto, van Hoof and Meger, 2018) on Pendulum-v1, with the hyper-parameters of
//! Fujimoto's `TD3.py` and `main.py`; DDPG is the same agent with TD3's three additions
//! switched off ([`Config::ddpg`]).
//!
//! - Actor `3 -> 256 -> 256 -> 1` (ReLU, then `max_action * tanh`); critics
//!   `(state, action) 4 -> 256 -> 256 -> 1` (ReLU), PyTorch's initialization; target
//!   copies of both, updated by Polyak averaging with `tau = 0.005`.
//! - The first 25 000 steps act uniformly at random, then `actor(s) + N(0, 0.1 max_action)`
//!   clipped to the action bounds; one training iteration per step from then on, on 256
//!   transitions drawn uniformly from a replay buffer of up to 10^6.
//! - Critic target `r + (1 - terminated) * 0.99 * min(Q1', Q2')(s', a')` with
//!   `a' = clip(actor'(s') + clip(N(0, 0.2 max_action), -0.5 max_action, 0.5 max_action))`
//!   (twin critics and target policy smoothing); critic loss `MSE(Q1) + MSE(Q2)`; the
//!   actor (`-mean Q1(s, actor(s))`) and the targets update every 2 iterations (delayed
//!   policy updates). Adam (PyTorch flavor), learning rate 3e-4, for both.
//! - DDPG: one critic, no target smoothing, actor and target updates every iteration.
//!
//! Pendulum never terminates; its 200-step time limit truncates, so every stored
//! transition bootstraps, as Fujimoto's `done_bool` does.

use rlgrad_autodiff::losses::{Reduction, mse_loss};
use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module};
use rlgrad_autodiff::{ApplyGradients, Tape, Var};
use rlgrad_checkpoint::State;
use rlgrad_core::{Result, Rng};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::Tensor;

use crate::off_policy::{Experience, OffPolicy};
use crate::run::{Logger, Target};

/// Fujimoto's hyper-parameters (TD3), or DDPG's switches ([`Config::ddpg`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `td3` or `ddpg`, for run directories and reports.
    pub name: &'static str,
    /// Hidden units of the actor and of each critic. Default `[256, 256]`.
    pub hidden: [usize; 2],
    /// Adam's learning rate for the actor and the critics. Default 3e-4.
    pub learning_rate: f64,
    /// The discount. Default 0.99.
    pub gamma: f32,
    /// Polyak coefficient of the target updates. Default 0.005.
    pub tau: f64,
    /// Exploration noise, a fraction of `max_action`. Default 0.1.
    pub exploration_noise: f64,
    /// Steps of uniformly random actions before the policy acts and training starts.
    /// Default 25 000.
    pub start_steps: u64,
    /// Transitions per training iteration. Default 256.
    pub batch_size: usize,
    /// The replay buffer's capacity. Default 10^6.
    pub replay_capacity: usize,
    /// Two critics, the target from the smaller (TD3); one critic (DDPG).
    pub twin_critics: bool,
    /// Target policy smoothing: the std and the clip of the target action's noise, as
    /// fractions of `max_action` (TD3: 0.2 and 0.5); `None` for DDPG.
    pub target_smoothing: Option<(f64, f64)>,
    /// Iterations between actor and target updates (TD3: 2, DDPG: 1).
    pub policy_delay: u64,
    /// Reached at a mean return of -200 over the last 10 episodes.
    pub target: Target,
}

impl Config {
    /// TD3 with Fujimoto's hyper-parameters.
    pub fn td3() -> Self {
        Self {
            name: "td3",
            hidden: [256, 256],
            learning_rate: 3e-4,
            gamma: 0.99,
            tau: 0.005,
            exploration_noise: 0.1,
            start_steps: 25_000,
            batch_size: 256,
            replay_capacity: 1_000_000,
            twin_critics: true,
            target_smoothing: Some((0.2, 0.5)),
            policy_delay: 2,
            target: Target {
                window: 10,
                threshold: -200.0,
            },
        }
    }

    /// DDPG: TD3 without twin critics, target policy smoothing and delayed updates.
    pub fn ddpg() -> Self {
        Self {
            name: "ddpg",
            twin_critics: false,
            target_smoothing: None,
            policy_delay: 1,
            ..Self::td3()
        }
    }
}

/// The actor `max_action * tanh(mlp(s))` and the critics `Q_i(s, a) = mlp_i([s, a])`
/// (one, or two when twin), with their target copies in a second `Nets`.
#[derive(Debug, Clone, Module)]
pub struct Nets {
    actor: Mlp,
    critics: Vec<Mlp>,
    #[module(skip)]
    max_action: f32,
}

impl Nets {
    fn new(state: usize, action: usize, config: &Config, max: f32, rng: &mut Rng) -> Result<Self> {
        let [h1, h2] = config.hidden;
        let mut mlp = |name: String, sizes: &[usize], out: Activation| {
            Mlp::new(&name, sizes, Activation::Relu, out, Init::TorchDefault, rng)
        };
        let actor = mlp("actor".into(), &[state, h1, h2, action], Activation::Tanh)?;
        let critics = (1..=1 + usize::from(config.twin_critics))
            .map(|i| {
                mlp(
                    format!("critic/q{i}"),
                    &[state + action, h1, h2, 1],
                    Activation::Identity,
                )
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            actor,
            critics,
            max_action: max,
        })
    }

    /// The actions `[N, actions]` for states `[N, inputs]`.
    pub fn act<'t>(&self, tape: &'t Tape, state: &Var<'t>) -> Result<Var<'t>> {
        self.actor.forward(tape, state)?.mul_scalar(self.max_action)
    }

    /// `Q_i(s, a)`, `[N, 1]` each.
    pub fn q<'t>(&self, tape: &'t Tape, s: &Var<'t>, a: &Var<'t>) -> Result<Vec<Var<'t>>> {
        let input = Var::concat(&[s, a], 1)?;
        self.critics
            .iter()
            .map(|q| q.forward(tape, &input))
            .collect()
    }
}

/// The agent: networks and their targets, optimizers, the experience (environment,
/// replay buffer, and the stream `explore` of random and noisy actions), and two random
/// streams (`replay`: minibatch rows; `smoothing`: target policy noise); all of it
/// checkpointed by `#[derive(State)]`.
#[derive(Debug, State)]
pub struct Td3 {
    #[state(skip)]
    config: Config,
    #[state(skip)]
    seed: u64,
    #[state(module)]
    nets: Nets,
    #[state(module)]
    targets: Nets,
    actor_adam: Optimizer<f32>,
    critic_adam: Optimizer<f32>,
    experience: Experience,
    replay: Rng,
    smoothing: Rng,
    iterations: u64,
    #[state(skip)]
    no_grad: Tape,
    #[state(skip)]
    tape: Tape,
}

impl Td3 {
    /// A fresh agent: networks drawn from stream `init` of `seed`, the environment reset
    /// with `seed`.
    pub fn new(config: Config, seed: u64) -> Result<Self> {
        let experience = Experience::new(seed, config.replay_capacity)?;
        let (state_dim, action_dim, max_action) = experience.dims();
        let mut init = Rng::new(seed, "init");
        let nets = Nets::new(state_dim, action_dim, &config, max_action, &mut init)?;
        Ok(Self {
            targets: nets.clone(),
            nets,
            actor_adam: Optimizer::new(Adam::torch(), config.learning_rate)?,
            critic_adam: Optimizer::new(Adam::torch(), config.learning_rate)?,
            experience,
            replay: Rng::new(seed, "replay"),
            smoothing: Rng::new(seed, "smoothing"),
            iterations: 0,
            no_grad: Tape::new().no_grad(),
            tape: Tape::new(),
            config,
            seed,
        })
    }

    /// One training iteration; returns the critic loss and, when the actor updated, its
    /// loss.
    fn train_iteration(&mut self) -> Result<(f32, Option<f32>)> {
        self.iterations += 1;
        let batch = self
            .experience
            .sample(self.config.batch_size, &mut self.replay)?;
        let max_action = self.nets.max_action;
        let target = {
            let tape = &self.no_grad;
            let next_states = tape.constant(&batch.next_obs);
            let mut next_actions = self.targets.act(tape, &next_states)?;
            if let Some((std, clip)) = self.config.target_smoothing {
                let (std, clip) = (std * f64::from(max_action), clip * f64::from(max_action));
                let noise =
                    Tensor::rand_normal(next_actions.dims(), 0.0, std, &mut self.smoothing)?;
                next_actions =
                    next_actions.add(&tape.constant(&noise.clamp(-clip as f32, clip as f32)?))?;
            }
            let next_actions = next_actions.clamp(-max_action, max_action)?;
            let qs = self.targets.q(tape, &next_states, &next_actions)?;
            let q = qs[1..]
                .iter()
                .try_fold(qs[0].clone(), |q, other| q.minimum(other))?;
            // Fujimoto's `reward + not_done * discount * target_Q`, left to right.
            let not_dones = tape
                .constant(&batch.not_dones)
                .mul_scalar(self.config.gamma)?;
            tape.constant(&batch.rewards)
                .add(&not_dones.mul(&q)?)?
                .into_value()
        };
        self.tape.reset();
        let tape = &self.tape;
        let (states, target) = (tape.constant(&batch.obs), tape.constant(&target));
        let qs = self.nets.q(tape, &states, &tape.constant(&batch.actions))?;
        let mut critic_loss = mse_loss(&qs[0], &target, Reduction::Mean)?;
        for q in &qs[1..] {
            critic_loss = critic_loss.add(&mse_loss(q, &target, Reduction::Mean)?)?;
        }
        let grads = tape.gradient(&critic_loss, &[&self.nets.critics])?;
        self.critic_adam
            .apply_gradients(&mut self.nets.critics, &grads)?;
        let critic_loss = critic_loss.to_scalar()?;
        if !self.iterations.is_multiple_of(self.config.policy_delay) {
            return Ok((critic_loss, None));
        }
        self.tape.reset();
        let tape = &self.tape;
        let states = tape.constant(&batch.obs);
        let actions = self.nets.act(tape, &states)?;
        let actor_loss = self.nets.q(tape, &states, &actions)?[0].mean_all()?.neg()?;
        let grads = tape.gradient(&actor_loss, &[&self.nets.actor])?;
        self.actor_adam
            .apply_gradients(&mut self.nets.actor, &grads)?;
        self.targets.soft_update_from(&self.nets, self.config.tau)?;
        Ok((critic_loss, Some(actor_loss.to_scalar()?)))
    }
}

/// Iterations between logged losses.
const LOG_EVERY: u64 = 100;

impl OffPolicy for Td3 {
    const DEFAULT_BUDGET: u64 = 100_000;

    fn name(&self) -> &'static str {
        self.config.name
    }

    fn experience(&self) -> &Experience {
        &self.experience
    }

    fn experience_mut(&mut self) -> &mut Experience {
        &mut self.experience
    }

    fn learning_starts(&self) -> u64 {
        self.config.start_steps
    }

    /// The actor's action with Gaussian exploration noise, clipped to the bounds.
    fn policy_action(&mut self) -> Result<f32> {
        let max_action = f64::from(self.nets.max_action);
        let tape = &self.no_grad;
        let state = tape.constant(&self.experience.observation()?);
        let action = self.nets.act(tape, &state)?.to_scalar()?;
        let noise = self.experience.explore().normal_f64() * max_action;
        let noise = noise * self.config.exploration_noise;
        Ok((f64::from(action) + noise).clamp(-max_action, max_action) as f32)
    }

    fn train(&mut self, step: u64, log: &mut Logger) -> Result<()> {
        let (critic_loss, actor_loss) = self.train_iteration()?;
        if self.iterations.is_multiple_of(LOG_EVERY) {
            log.scalar("train/critic_loss", step, f64::from(critic_loss))?;
            if let Some(actor_loss) = actor_loss {
                log.scalar("train/actor_loss", step, f64::from(actor_loss))?;
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
        let mut all = crate::named_values("", &self.nets)?;
        all.extend(crate::named_values("target", &self.targets)?);
        Ok(all)
    }
}
