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
use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module, soft_update};
use rlgrad_autodiff::{ApplyGradients, Param, Tape, Var};
use rlgrad_checkpoint::{Checkpoint, Restore};
use rlgrad_core::{Error, Result, Rng};
use rlgrad_envs::{ActionSpace, Pendulum, Snapshot, VecEnv};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::Tensor;

use crate::replay::ReplayBuffer;
use crate::run::{Agent, EpisodeLog, Logger, Target};

/// Fujimoto's hyper-parameters (TD3), or DDPG's switches ([`Config::ddpg`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
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
            twin_critics: false,
            target_smoothing: None,
            policy_delay: 1,
            ..Self::td3()
        }
    }

    /// Whether this is DDPG's configuration of the three switches.
    pub fn is_ddpg(&self) -> bool {
        !self.twin_critics && self.target_smoothing.is_none() && self.policy_delay == 1
    }
}

/// The critics: `q1`, and `q2` when twin, each an MLP on `[state, action]`.
#[derive(Debug, Clone)]
pub struct Critic {
    q1: Mlp,
    q2: Option<Mlp>,
}

impl Critic {
    fn new(inputs: usize, hidden: [usize; 2], twin: bool, rng: &mut Rng) -> Result<Self> {
        let mut q = |name: &str| {
            Mlp::new(
                name,
                &[inputs, hidden[0], hidden[1], 1],
                Activation::Relu,
                Activation::Identity,
                Init::TorchDefault,
                rng,
            )
        };
        let q1 = q("critic/q1")?;
        let q2 = if twin { Some(q("critic/q2")?) } else { None };
        Ok(Self { q1, q2 })
    }

    /// `Q1(s, a)` and, when twin, `Q2(s, a)`, `[N, 1]` each.
    pub fn forward<'t>(
        &self,
        tape: &'t Tape,
        state: &Var<'t>,
        action: &Var<'t>,
    ) -> Result<(Var<'t>, Option<Var<'t>>)> {
        let input = Var::concat(&[state, action], 1)?;
        let q1 = self.q1.forward(tape, &input)?;
        let q2 = match &self.q2 {
            Some(q2) => Some(q2.forward(tape, &input)?),
            None => None,
        };
        Ok((q1, q2))
    }
}

impl Module for Critic {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param)) {
        self.q1.visit(f);
        if let Some(q2) = &self.q2 {
            q2.visit(f);
        }
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param)) {
        self.q1.visit_mut(f);
        if let Some(q2) = &mut self.q2 {
            q2.visit_mut(f);
        }
    }
}

/// The deterministic policy `max_action * tanh(mlp(s))`.
#[derive(Debug, Clone)]
pub struct Actor {
    mlp: Mlp,
    max_action: f32,
}

impl Actor {
    fn new(
        inputs: usize,
        hidden: [usize; 2],
        actions: usize,
        max_action: f32,
        rng: &mut Rng,
    ) -> Result<Self> {
        let mlp = Mlp::new(
            "actor",
            &[inputs, hidden[0], hidden[1], actions],
            Activation::Relu,
            Activation::Tanh,
            Init::TorchDefault,
            rng,
        )?;
        Ok(Self { mlp, max_action })
    }

    /// The actions `[N, actions]` for states `[N, inputs]`.
    pub fn forward<'t>(&self, tape: &'t Tape, state: &Var<'t>) -> Result<Var<'t>> {
        self.mlp.forward(tape, state)?.mul_scalar(self.max_action)
    }
}

impl Module for Actor {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param)) {
        self.mlp.visit(f);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param)) {
        self.mlp.visit_mut(f);
    }
}

/// The agent: actor, critics, their targets and optimizers, the replay buffer, the
/// environment and three random streams (`explore`: random and noisy actions; `replay`:
/// minibatch rows; `smoothing`: target policy noise).
#[derive(Debug)]
pub struct Td3 {
    config: Config,
    seed: u64,
    actor: Actor,
    actor_target: Actor,
    critic: Critic,
    critic_target: Critic,
    actor_adam: Optimizer<f32>,
    critic_adam: Optimizer<f32>,
    env: VecEnv<Pendulum>,
    buffer: ReplayBuffer,
    explore: Rng,
    replay: Rng,
    smoothing: Rng,
    episodes: EpisodeLog,
    env_steps: u64,
    iterations: u64,
    no_grad: Tape,
    tape: Tape,
}

impl Td3 {
    /// A fresh agent: networks drawn from stream `init` of `seed`, the environment reset
    /// with `seed`.
    pub fn new(config: Config, seed: u64) -> Result<Self> {
        let mut env = VecEnv::from_fn(1, Pendulum::new)?;
        env.reset(Some(seed))?;
        let state_dim = env.single_observation_space().dim();
        let ActionSpace::Box(actions) = env.single_action_space() else {
            return Err(Error::value(
                "Td3::new",
                "env",
                "a Box action space",
                "a Discrete one",
            ));
        };
        let (action_dim, max_action) = (actions.dim(), actions.high()[0]);
        let mut init = Rng::new(seed, "init");
        let actor = Actor::new(state_dim, config.hidden, action_dim, max_action, &mut init)?;
        let critic = Critic::new(
            state_dim + action_dim,
            config.hidden,
            config.twin_critics,
            &mut init,
        )?;
        Ok(Self {
            actor_target: actor.clone(),
            critic_target: critic.clone(),
            actor_adam: Optimizer::new(Adam::torch(), config.learning_rate)?,
            critic_adam: Optimizer::new(Adam::torch(), config.learning_rate)?,
            actor,
            critic,
            buffer: ReplayBuffer::new(config.replay_capacity, state_dim, action_dim)?,
            env,
            explore: Rng::new(seed, "explore"),
            replay: Rng::new(seed, "replay"),
            smoothing: Rng::new(seed, "smoothing"),
            episodes: EpisodeLog::default(),
            env_steps: 0,
            iterations: 0,
            no_grad: Tape::new().no_grad(),
            tape: Tape::new(),
            config,
            seed,
        })
    }

    /// The action for the current observation: uniform during the start steps, then
    /// the actor's with Gaussian exploration noise, clipped to the bounds.
    fn act(&mut self) -> Result<f32> {
        let max_action = f64::from(self.actor.max_action);
        if self.env_steps < self.config.start_steps {
            return Ok(((2.0 * self.explore.uniform_f64() - 1.0) * max_action) as f32);
        }
        let observation = self.env.observations();
        let state = Tensor::from_vec(observation.to_vec(), [1, observation.len()])?;
        let action = self
            .actor
            .forward(&self.no_grad, &self.no_grad.constant(&state))?
            .to_scalar()?;
        let noise = self.explore.normal_f64() * max_action * self.config.exploration_noise;
        Ok((f64::from(action) + noise).clamp(-max_action, max_action) as f32)
    }

    /// One training iteration; returns the critic loss and, when the actor updated, its
    /// loss.
    fn train_iteration(&mut self) -> Result<(f32, Option<f32>)> {
        self.iterations += 1;
        let batch = self
            .buffer
            .sample(self.config.batch_size, &mut self.replay)?;
        let max_action = self.actor.max_action;
        let target = {
            let tape = &self.no_grad;
            let next_states = tape.constant(&batch.next_states);
            let mut next_actions = self.actor_target.forward(tape, &next_states)?;
            if let Some((std, clip)) = self.config.target_smoothing {
                let (std, clip) = (std * f64::from(max_action), clip * f64::from(max_action));
                let noise =
                    Tensor::rand_normal(next_actions.dims(), 0.0, std, &mut self.smoothing)?
                        .clamp(-clip as f32, clip as f32)?;
                next_actions = next_actions.add(&tape.constant(&noise))?;
            }
            let next_actions = next_actions.clamp(-max_action, max_action)?;
            let (q1, q2) = self
                .critic_target
                .forward(tape, &next_states, &next_actions)?;
            let q = match q2 {
                Some(q2) => q1.minimum(&q2)?,
                None => q1,
            };
            // Fujimoto's `reward + not_done * discount * target_Q`, left to right.
            let discounted = tape
                .constant(&batch.not_dones)
                .mul_scalar(self.config.gamma)?
                .mul(&q)?;
            tape.constant(&batch.rewards).add(&discounted)?.into_value()
        };

        let critic_loss = {
            self.tape.reset();
            let tape = &self.tape;
            let states = tape.constant(&batch.states);
            let target = tape.constant(&target);
            let (q1, q2) = self
                .critic
                .forward(tape, &states, &tape.constant(&batch.actions))?;
            let mut loss = mse_loss(&q1, &target, Reduction::Mean)?;
            if let Some(q2) = q2 {
                loss = loss.add(&mse_loss(&q2, &target, Reduction::Mean)?)?;
            }
            let grads = tape.gradient(&loss, &[&self.critic])?;
            self.critic_adam.apply_gradients(&mut self.critic, &grads)?;
            loss.to_scalar()?
        };
        if !self.iterations.is_multiple_of(self.config.policy_delay) {
            return Ok((critic_loss, None));
        }
        let actor_loss = {
            self.tape.reset();
            let tape = &self.tape;
            let states = tape.constant(&batch.states);
            let actions = self.actor.forward(tape, &states)?;
            let (q1, _) = self.critic.forward(tape, &states, &actions)?;
            let loss = q1.mean_all()?.neg()?;
            let grads = tape.gradient(&loss, &[&self.actor])?;
            self.actor_adam.apply_gradients(&mut self.actor, &grads)?;
            loss.to_scalar()?
        };
        soft_update(&mut self.critic_target, &self.critic, self.config.tau)?;
        soft_update(&mut self.actor_target, &self.actor, self.config.tau)?;
        Ok((critic_loss, Some(actor_loss)))
    }
}

/// Iterations between logged losses.
const LOG_EVERY: u64 = 100;

impl Agent for Td3 {
    const UNIT: &'static str = "steps";
    const DEFAULT_BUDGET: u64 = 100_000;
    const DEFAULT_CHECKPOINT_EVERY: u64 = 10_000;

    fn name(&self) -> &'static str {
        if self.config.is_ddpg() { "ddpg" } else { "td3" }
    }

    /// One environment step, then one training iteration once the start steps are over.
    fn advance(&mut self, log: &mut Logger) -> Result<()> {
        let action = self.act()?;
        let state = self.env.observations().to_vec();
        let step = self.env.step(&[action])?;
        self.buffer.push(
            &state,
            &[action],
            step.final_observations,
            step.rewards[0],
            step.terminated[0],
        );
        self.env_steps += 1;
        if let Some(episode) = step.finished.first() {
            self.episodes.push(self.env_steps, episode.episode_return);
        }
        if self.env_steps > self.config.start_steps {
            let (critic_loss, actor_loss) = self.train_iteration()?;
            if self.iterations.is_multiple_of(LOG_EVERY) {
                log.scalar("train/critic_loss", self.env_steps, f64::from(critic_loss))?;
                if let Some(actor_loss) = actor_loss {
                    log.scalar("train/actor_loss", self.env_steps, f64::from(actor_loss))?;
                }
            }
        }
        Ok(())
    }

    fn units(&self) -> u64 {
        self.env_steps
    }

    fn env_steps(&self) -> u64 {
        self.env_steps
    }

    fn episodes(&self) -> &EpisodeLog {
        &self.episodes
    }

    fn target(&self) -> Target {
        self.config.target
    }

    fn describe(&self) -> String {
        format!("{:?}, seed {}", self.config, self.seed)
    }

    fn save(&self, checkpoint: &mut Checkpoint) -> Result<()> {
        checkpoint.put_module("", &self.actor)?;
        checkpoint.put_module("", &self.critic)?;
        checkpoint.put_module("target", &self.actor_target)?;
        checkpoint.put_module("target", &self.critic_target)?;
        checkpoint.put_optimizer("optim/actor", &self.actor_adam)?;
        checkpoint.put_optimizer("optim/critic", &self.critic_adam)?;
        checkpoint.put_rng("rng/explore", &self.explore)?;
        checkpoint.put_rng("rng/replay", &self.replay)?;
        checkpoint.put_rng("rng/smoothing", &self.smoothing)?;
        self.buffer.save("replay", checkpoint)?;
        let env = self.env.snapshot();
        checkpoint.put("env", &[env.len()], &env)?;
        checkpoint.put_scalar("progress/env_steps", self.env_steps)?;
        checkpoint.put_scalar("progress/iterations", self.iterations)?;
        self.episodes.save(checkpoint)
    }

    fn restore(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        let mut env = vec![0u64; self.env.snapshot().len()];
        let mut next = 0u64;
        let mut plan = Restore::new();
        plan.module("", &mut self.actor)
            .module("", &mut self.critic)
            .module("target", &mut self.actor_target)
            .module("target", &mut self.critic_target)
            .optimizer("optim/actor", &mut self.actor_adam)
            .optimizer("optim/critic", &mut self.critic_adam)
            .rng("rng/explore", &mut self.explore)
            .rng("rng/replay", &mut self.replay)
            .rng("rng/smoothing", &mut self.smoothing)
            .slice("env", &[env.len()], &mut env)
            .scalar("progress/env_steps", &mut self.env_steps)
            .scalar("progress/iterations", &mut self.iterations);
        self.buffer
            .restore("replay", checkpoint, &mut plan, &mut next)?;
        self.episodes.restore(checkpoint, &mut plan)?;
        checkpoint.restore(plan)?;
        self.buffer.set_next(next)?;
        self.env.restore(&env)
    }

    fn parameters(&self) -> Result<Vec<(String, Vec<f32>)>> {
        let mut all = crate::named_values(&self.actor)?;
        all.extend(crate::named_values(&self.critic)?);
        for (name, values) in crate::named_values(&self.actor_target)?
            .into_iter()
            .chain(crate::named_values(&self.critic_target)?)
        {
            all.push((format!("target/{name}"), values));
        }
        Ok(all)
    }
}
