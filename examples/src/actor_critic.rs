//! The TensorFlow actor-critic tutorial ("Playing CartPole with the Actor-Critic
//! method") on CartPole-v1.
//!
//! One network: a shared hidden layer (128 ReLU units), a policy head (2 logits) and a
//! value head, Keras' Glorot-uniform initialization. Each episode is played to its end
//! with actions sampled from the policy, then the network takes one Adam step (Keras
//! flavor, learning rate 0.01) on
//!
//! ```text
//! G = standardize(discounted_cumsum(rewards, 0.99), eps = f32::EPSILON, ddof = 0)
//! A = stop_gradient(G - V)
//! loss = -sum(log pi(a_t | s_t) A_t) + huber(V, G, delta = 1, reduction = sum)
//! ```
//!
//! The task is solved when the mean return of the last 100 episodes reaches 475 (the
//! tutorial's criterion). The episode is played with a non-recording tape, then the loss
//! runs once over the whole episode as one batch: the same values as the tutorial's
//! step-by-step recording, since the parameters do not change within an episode.

use rlgrad_autodiff::losses::{Reduction, huber_loss};
use rlgrad_autodiff::nn::{Forward, Init, Linear, Module};
use rlgrad_autodiff::{ApplyGradients, Param, Tape, Var};
use rlgrad_checkpoint::State;
use rlgrad_core::{Cpu, Result, Rng};
use rlgrad_distributions::Categorical;
use rlgrad_envs::{CartPole, VecEnv};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_returns::{discounted_cumsum, standardize};
use rlgrad_tensor::Tensor;

use crate::cli::Build;
use crate::device::TrainDevice;
use crate::run::{Agent, EpisodeLog, Logger, Options, Target};

/// The tutorial's hyper-parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Units of the shared hidden layer. Default 128.
    pub hidden: usize,
    /// Adam's learning rate (Keras flavor, eps 1e-7). Default 0.01.
    pub learning_rate: f64,
    /// The discount. Default 0.99.
    pub gamma: f32,
    /// Solved at a mean return of 475 over the last 100 episodes.
    pub target: Target,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            hidden: 128,
            learning_rate: 0.01,
            gamma: 0.99,
            target: Target {
                window: 100,
                threshold: 475.0,
            },
        }
    }
}

/// The network on device `D`: `common` (ReLU) feeding the policy head `actor` and the
/// value head `critic`.
#[derive(Debug, Clone)]
pub struct Network<D: TrainDevice = Cpu> {
    common: Linear<f32, D>,
    actor: Linear<f32, D>,
    critic: Linear<f32, D>,
}

impl Network {
    /// The tutorial's network for `observations` inputs and `actions` actions, drawn from
    /// `rng`, on the Cpu.
    pub fn new(observations: usize, actions: usize, hidden: usize, rng: &mut Rng) -> Result<Self> {
        Self::new_on(&Cpu::default(), observations, actions, hidden, rng)
    }
}

impl<D: TrainDevice> Network<D> {
    /// [`Network::new`]'s network on `device` (drawn on the host, then uploaded).
    pub fn new_on(
        device: &D,
        observations: usize,
        actions: usize,
        hidden: usize,
        rng: &mut Rng,
    ) -> Result<Self> {
        let layer = |name: &str, inputs, outputs, rng: &mut Rng| {
            Linear::new_on(device, name, inputs, outputs, Init::GlorotUniform, rng)
        };
        Ok(Self {
            common: layer("actor_critic/common", observations, hidden, rng)?,
            actor: layer("actor_critic/actor", hidden, actions, rng)?,
            critic: layer("actor_critic/critic", hidden, 1, rng)?,
        })
    }

    /// The action logits `[N, actions]` and values `[N, 1]` of observations `[N, obs]`.
    pub fn forward<'t>(
        &self,
        tape: &'t Tape<f32, D>,
        observations: &Var<'t, f32, D>,
    ) -> Result<(Var<'t, f32, D>, Var<'t, f32, D>)> {
        let hidden = self.common.forward(tape, observations)?.relu()?;
        Ok((
            self.actor.forward(tape, &hidden)?,
            self.critic.forward(tape, &hidden)?,
        ))
    }
}

impl<D: TrainDevice> Module<f32, D> for Network<D> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<f32, D>)) {
        self.common.visit(f);
        self.actor.visit(f);
        self.critic.visit(f);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<f32, D>)) {
        self.common.visit_mut(f);
        self.actor.visit_mut(f);
        self.critic.visit_mut(f);
    }
}

/// The agent: network and optimizer on device `D`, action stream, environment, and the
/// episode being played (on the host).
#[derive(Debug, State)]
pub struct ActorCritic<D: TrainDevice = Cpu> {
    #[state(skip)]
    config: Config,
    #[state(skip)]
    seed: u64,
    #[state(module)]
    network: Network<D>,
    adam: Optimizer<f32, D>,
    env: VecEnv<CartPole>,
    actions_rng: Rng,
    episodes: EpisodeLog,
    env_steps: u64,
    #[state(skip)]
    acting: Tape<f32, D>,
    #[state(skip)]
    tape: Tape<f32, D>,
    // The running episode's data: empty between episodes, where checkpoints are taken.
    #[state(skip)]
    observations: Vec<f32>,
    #[state(skip)]
    actions: Vec<usize>,
    #[state(skip)]
    rewards: Vec<f32>,
}

/// Builds the actor-critic on any device: the example's `--device`.
impl Build for Config {
    type Agent<D: TrainDevice> = ActorCritic<D>;

    fn build<D: TrainDevice>(&self, options: &Options, device: &D) -> Result<ActorCritic<D>> {
        ActorCritic::new_on(device, self.clone(), options.seed)
    }
}

impl ActorCritic {
    /// A fresh agent on the Cpu: network drawn from stream `init` of `seed`, actions from
    /// stream `actions`, the environment reset with `seed` (Gymnasium's seeding).
    pub fn new(config: Config, seed: u64) -> Result<Self> {
        Self::new_on(&Cpu::default(), config, seed)
    }
}

impl<D: TrainDevice> ActorCritic<D> {
    /// [`ActorCritic::new`]'s agent on `device`, with its bits on every device.
    pub fn new_on(device: &D, config: Config, seed: u64) -> Result<Self> {
        let mut env = VecEnv::from_fn(1, CartPole::new)?;
        env.reset(Some(seed))?;
        let observations = env.single_observation_space().dim();
        let init = &mut Rng::new(seed, "init");
        let network = Network::new_on(device, observations, 2, config.hidden, init)?;
        let adam = Optimizer::new_on(device.clone(), Adam::keras(), config.learning_rate)?;
        Ok(Self {
            config,
            seed,
            network,
            adam,
            env,
            actions_rng: Rng::new(seed, "actions"),
            episodes: EpisodeLog::default(),
            env_steps: 0,
            acting: Tape::new_on(device).no_grad(),
            tape: Tape::new_on(device),
            observations: Vec::new(),
            actions: Vec::new(),
            rewards: Vec::new(),
        })
    }

    /// The network.
    pub fn network(&self) -> &Network<D> {
        &self.network
    }

    /// Plays one episode with the current policy into the episode buffers.
    fn play_episode(&mut self) -> Result<()> {
        self.observations.clear();
        self.actions.clear();
        self.rewards.clear();
        loop {
            let observation = self.env.observations();
            self.observations.extend_from_slice(observation);
            let device = self.acting.device();
            let x = Tensor::from_vec_on(device, observation.to_vec(), [1, observation.len()])?;
            let (logits, _) = self
                .network
                .forward(&self.acting, &self.acting.constant(&x))?;
            let action = Categorical::from_logits(&logits)?.sample(&mut self.actions_rng)?[0];
            let step = self.env.step(&[action])?;
            self.actions.push(action);
            self.rewards.push(step.rewards[0]);
            self.env_steps += 1;
            if let Some(episode) = step.finished.first() {
                self.episodes.push(self.env_steps, episode.episode_return);
                return Ok(());
            }
        }
    }

    /// One Adam step on the episode in the buffers; returns the actor and critic losses.
    fn learn(&mut self) -> Result<(f32, f32)> {
        let steps = self.rewards.len();
        let returns = standardize(
            &discounted_cumsum(&self.rewards, self.config.gamma)?,
            f32::EPSILON,
            0,
        )?;
        self.tape.reset();
        let tape = &self.tape;
        let dim = self.observations.len() / steps;
        let device = tape.device();
        let x = Tensor::from_vec_on(device, self.observations.clone(), [steps, dim])?;
        let x = tape.constant(&x);
        let (logits, values) = self.network.forward(tape, &x)?;
        let log_probs = logits
            .log_softmax(1)?
            .gather(1, &self.actions, [steps, 1])?;
        let returns = tape.constant(&Tensor::from_vec_on(device, returns, [steps, 1])?);
        let advantages = returns.sub(&values)?.stop_gradient();
        let actor_loss = log_probs.mul(&advantages)?.sum_all()?.neg()?;
        let critic_loss = huber_loss(&values, &returns, 1.0, Reduction::Sum)?;
        let loss = actor_loss.add(&critic_loss)?;
        let grads = tape.gradient(&loss, &[&self.network])?;
        self.adam.apply_gradients(&mut self.network, &grads)?;
        Ok((actor_loss.to_scalar()?, critic_loss.to_scalar()?))
    }
}

impl<D: TrainDevice> Agent for ActorCritic<D> {
    const UNIT: &'static str = "episodes";
    /// The tutorial's `max_episodes`.
    const DEFAULT_BUDGET: u64 = 10_000;
    const DEFAULT_CHECKPOINT_EVERY: u64 = 100;

    fn name(&self) -> &'static str {
        "actor_critic"
    }

    fn advance(&mut self, log: &mut Logger) -> Result<()> {
        self.play_episode()?;
        let (actor_loss, critic_loss) = self.learn()?;
        log.scalar("train/actor_loss", self.env_steps, f64::from(actor_loss))?;
        log.scalar("train/critic_loss", self.env_steps, f64::from(critic_loss))
    }

    fn units(&self) -> u64 {
        self.episodes.len() as u64
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
}
