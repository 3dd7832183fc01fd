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

use rlgrad_autodiff::prelude::*;
use rlgrad_checkpoint::State;
use rlgrad_core::Cpu;

use crate::cli::Build;
use crate::device::TrainDevice;
use crate::off_policy::{AgentConfig, Batch, Common, Dims, Learner, OffPolicy, Progress, Scalars};
use crate::run::Options;

/// Fujimoto's hyper-parameters (TD3), or DDPG's switches ([`Config::ddpg`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Networks, discount, Polyak, replay, the target; 25 000 random start steps.
    pub common: Common,
    /// Adam's learning rate for the actor and the critics. Default 3e-4.
    pub learning_rate: f64,
    /// Exploration noise, a fraction of `max_action`. Default 0.1.
    pub exploration_noise: f64,
    /// Two critics, the target from the smaller (TD3); one critic (DDPG).
    pub twin_critics: bool,
    /// Target policy smoothing: the std and the clip of the target action's noise, as
    /// fractions of `max_action` (TD3: 0.2 and 0.5); `None` for DDPG.
    pub target_smoothing: Option<(f64, f64)>,
    /// Iterations between actor and target updates (TD3: 2, DDPG: 1).
    pub policy_delay: u64,
}

impl AgentConfig for Config {
    fn common(&self) -> &Common {
        &self.common
    }
}

impl Config {
    /// TD3 with Fujimoto's hyper-parameters.
    pub fn td3() -> Self {
        Self {
            common: Common::new("td3", 25_000),
            learning_rate: 3e-4,
            exploration_noise: 0.1,
            twin_critics: true,
            target_smoothing: Some((0.2, 0.5)),
            policy_delay: 2,
        }
    }

    /// DDPG: TD3 without twin critics, target policy smoothing and delayed updates.
    pub fn ddpg() -> Self {
        Self {
            common: Common::new("ddpg", 25_000),
            twin_critics: false,
            target_smoothing: None,
            policy_delay: 1,
            ..Self::td3()
        }
    }
}

/// Builds TD3 or DDPG on any device: the examples' `--device`.
impl Build for Config {
    type Agent<D: TrainDevice> = OffPolicy<Td3<D>>;

    fn build<D: TrainDevice>(&self, options: &Options, device: &D) -> Result<OffPolicy<Td3<D>>> {
        Td3::new_on(device, self.clone(), options.seed)
    }
}

/// The actor `max_action * tanh(mlp(s))` and the critics `Q_i(s, a) = mlp_i([s, a])`
/// (one, or two when twin), with their target copies in a second `Nets`, on device `D`.
#[derive(Debug, Clone, Module)]
pub struct Nets<D: TrainDevice = Cpu> {
    actor: Mlp<f32, D>,
    critics: Vec<Mlp<f32, D>>,
    #[module(skip)]
    max_action: f32,
}

impl<D: TrainDevice> Nets<D> {
    fn new_on(device: &D, dims: Dims, config: &Config, rng: &mut Rng) -> Result<Self> {
        let [h1, h2] = config.common.hidden;
        let mut mlp = |name: &str, sizes: &[usize], out: Activation| {
            Mlp::new_on(
                device,
                name,
                sizes,
                Activation::Relu,
                out,
                Init::TorchDefault,
                rng,
            )
        };
        let (obs, actions) = (dims.observation, dims.action);
        let actor = mlp("actor", &[obs, h1, h2, actions], Activation::Tanh)?;
        let critic = [obs + actions, h1, h2, 1];
        let critics = (1..=1 + usize::from(config.twin_critics))
            .map(|i| mlp(&format!("critic/q{i}"), &critic, Activation::Identity))
            .collect::<Result<_>>()?;
        Ok(Self {
            actor,
            critics,
            max_action: dims.max_action,
        })
    }

    /// The actions `[N, actions]` for states `[N, inputs]`.
    pub fn act<'t>(
        &self,
        tape: &'t Tape<f32, D>,
        state: &Var<'t, f32, D>,
    ) -> Result<Var<'t, f32, D>> {
        self.actor.forward(tape, state)? * self.max_action
    }

    /// `Q_i(s, a)`, `[N, 1]` each.
    pub fn q<'t>(
        &self,
        tape: &'t Tape<f32, D>,
        s: &Var<'t, f32, D>,
        a: &Var<'t, f32, D>,
    ) -> Result<Vec<Var<'t, f32, D>>> {
        let sa = Var::concat(&[s, a], 1)?;
        self.critics.iter().map(|q| q.forward(tape, &sa)).collect()
    }
}

/// The learner of TD3 and DDPG on device `D`: networks and their targets, optimizers and
/// the random stream `smoothing` of the target policy noise; all of it checkpointed by
/// `#[derive(State)]`.
#[derive(Debug, State)]
pub struct Td3<D: TrainDevice = Cpu> {
    #[state(skip)]
    config: Config,
    #[state(module)]
    nets: Nets<D>,
    #[state(module)]
    targets: Nets<D>,
    actor_adam: Optimizer<f32, D>,
    critic_adam: Optimizer<f32, D>,
    smoothing: Rng,
    #[state(skip)]
    no_grad: Tape<f32, D>,
    #[state(skip)]
    tape: Tape<f32, D>,
}

impl Td3 {
    /// A fresh agent on the Cpu: networks drawn from stream `init` of `seed`, the
    /// environment reset with `seed`.
    pub fn new(config: Config, seed: u64) -> Result<OffPolicy<Self>> {
        Self::new_on(&Cpu::default(), config, seed)
    }
}

impl<D: TrainDevice> Td3<D> {
    /// A fresh agent on `device`: the bits of [`Td3::new`]'s on every device (the
    /// networks are drawn on the host, then uploaded).
    pub fn new_on(device: &D, config: Config, seed: u64) -> Result<OffPolicy<Self>> {
        OffPolicy::new(seed, &config, |dims, init| {
            let nets = Nets::new_on(device, dims, &config, init)?;
            let adam = || Optimizer::new_on(device.clone(), Adam::torch(), config.learning_rate);
            Ok(Self {
                targets: nets.clone(),
                nets,
                actor_adam: adam()?,
                critic_adam: adam()?,
                smoothing: Rng::new(seed, "smoothing"),
                no_grad: Tape::new_on(device).no_grad(),
                tape: Tape::new_on(device),
                config: config.clone(),
            })
        })
    }
}

impl<D: TrainDevice> Learner for Td3<D> {
    const DEFAULT_BUDGET: u64 = 100_000;

    type Device = D;

    fn device(&self) -> &D {
        self.tape.device()
    }

    /// The actor's action with Gaussian exploration noise, clipped to the bounds.
    fn act(&mut self, observation: &Tensor<f32, D>, explore: &mut Rng) -> Result<f32> {
        let (tape, max_action) = (&self.no_grad, f64::from(self.nets.max_action));
        let action = self
            .nets
            .act(tape, &tape.constant(observation))?
            .to_scalar()?;
        let noise = explore.normal_f64() * max_action * self.config.exploration_noise;
        Ok((f64::from(action) + noise).clamp(-max_action, max_action) as f32)
    }

    /// One training iteration: the critics, then every `policy_delay` iterations the actor
    /// and the targets; logs the critic loss and, when the actor updated, its loss.
    fn update(
        &mut self,
        batch: &Batch<D>,
        at: Progress,
        mut scalars: Option<&mut Scalars>,
    ) -> Result<()> {
        let max_action = self.nets.max_action;
        let target = {
            let tape = &self.no_grad;
            let next_states = tape.constant(&batch.next_obs);
            let mut next_actions = self.targets.act(tape, &next_states)?;
            if let Some((std, clip)) = self.config.target_smoothing {
                let (std, clip) = (std * f64::from(max_action), clip * f64::from(max_action));
                let noise = Tensor::rand_normal_on(
                    tape.device(),
                    next_actions.dims(),
                    0.0,
                    std,
                    &mut self.smoothing,
                )?;
                next_actions =
                    (next_actions + tape.constant(&noise.clamp(-clip as f32, clip as f32)?))?;
            }
            let next_actions = next_actions.clamp(-max_action, max_action)?;
            let qs = self.targets.q(tape, &next_states, &next_actions)?;
            let q = qs[1..]
                .iter()
                .try_fold(qs[0].clone(), |q, other| q.minimum(other))?;
            // Fujimoto's `reward + not_done * discount * target_Q`, left to right.
            let not_dones = (tape.constant(&batch.not_dones) * self.config.common.gamma)?;
            (tape.constant(&batch.rewards) + (not_dones * q)?)?.into_value()
        };
        let tape = self.tape.reset();
        let (states, target) = (tape.constant(&batch.obs), tape.constant(&target));
        let qs = self.nets.q(tape, &states, &tape.constant(&batch.actions))?;
        let mut critic_loss = mse_loss(&qs[0], &target, Reduction::Mean)?;
        for q in &qs[1..] {
            critic_loss = (critic_loss + mse_loss(q, &target, Reduction::Mean)?)?;
        }
        self.critic_adam
            .minimize(&critic_loss, &mut self.nets.critics)?;
        if let Some(scalars) = scalars.as_deref_mut() {
            scalars.push(("train/critic_loss", critic_loss.to_scalar()?));
        }
        if at.iteration.is_multiple_of(self.config.policy_delay) {
            let tape = self.tape.reset();
            let states = tape.constant(&batch.obs);
            let actions = self.nets.act(tape, &states)?;
            let actor_loss = (-self.nets.q(tape, &states, &actions)?[0].mean_all()?)?;
            self.actor_adam
                .minimize(&actor_loss, &mut self.nets.actor)?;
            self.targets
                .soft_update_from(&self.nets, self.config.common.tau)?;
            if let Some(scalars) = scalars {
                scalars.push(("train/actor_loss", actor_loss.to_scalar()?));
            }
        }
        Ok(())
    }
}
