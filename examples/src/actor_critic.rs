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
use rlgrad_core::{Result, Rng};
use rlgrad_distributions::Categorical;
use rlgrad_envs::{CartPole, VecEnv};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_returns::{discounted_cumsum, standardize};
use rlgrad_tensor::Tensor;

use crate::run::{Agent, EpisodeLog, Logger, Target};

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

/// The network: `common` (ReLU) feeding the policy head `actor` and the value head
/// `critic`.
#[derive(Debug, Clone)]
pub struct Network {
    common: Linear,
    actor: Linear,
    critic: Linear,
}

impl Network {
    /// The tutorial's network for `observations` inputs and `actions` actions, drawn from
    /// `rng`.
    pub fn new(observations: usize, actions: usize, hidden: usize, rng: &mut Rng) -> Result<Self> {
        let layer = |name: &str, inputs, outputs, rng: &mut Rng| {
            Linear::new(name, inputs, outputs, Init::GlorotUniform, rng)
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
        tape: &'t Tape,
        observations: &Var<'t>,
    ) -> Result<(Var<'t>, Var<'t>)> {
        let hidden = self.common.forward(tape, observations)?.relu()?;
        Ok((
            self.actor.forward(tape, &hidden)?,
            self.critic.forward(tape, &hidden)?,
        ))
    }
}

impl Module for Network {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param)) {
        self.common.visit(f);
        self.actor.visit(f);
        self.critic.visit(f);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param)) {
        self.common.visit_mut(f);
        self.actor.visit_mut(f);
        self.critic.visit_mut(f);
    }
}

/// The agent: network, optimizer, action stream, environment, and the episode being
/// played.
#[derive(Debug, State)]
pub struct ActorCritic {
    #[state(skip)]
    config: Config,
    #[state(skip)]
    seed: u64,
    #[state(module)]
    network: Network,
    adam: Optimizer<f32>,
    env: VecEnv<CartPole>,
    actions_rng: Rng,
    episodes: EpisodeLog,
    env_steps: u64,
    #[state(skip)]
    acting: Tape,
    #[state(skip)]
    tape: Tape,
    // The running episode's data: empty between episodes, where checkpoints are taken.
    #[state(skip)]
    observations: Vec<f32>,
    #[state(skip)]
    actions: Vec<usize>,
    #[state(skip)]
    rewards: Vec<f32>,
}

impl ActorCritic {
    /// A fresh agent: network drawn from stream `init` of `seed`, actions from stream
    /// `actions`, the environment reset with `seed` (Gymnasium's seeding).
    pub fn new(config: Config, seed: u64) -> Result<Self> {
        let mut env = VecEnv::from_fn(1, CartPole::new)?;
        env.reset(Some(seed))?;
        let observations = env.single_observation_space().dim();
        let network = Network::new(observations, 2, config.hidden, &mut Rng::new(seed, "init"))?;
        let adam = Optimizer::new(Adam::keras(), config.learning_rate)?;
        Ok(Self {
            config,
            seed,
            network,
            adam,
            env,
            actions_rng: Rng::new(seed, "actions"),
            episodes: EpisodeLog::default(),
            env_steps: 0,
            acting: Tape::new().no_grad(),
            tape: Tape::new(),
            observations: Vec::new(),
            actions: Vec::new(),
            rewards: Vec::new(),
        })
    }

    /// The network.
    pub fn network(&self) -> &Network {
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
            let x = Tensor::from_vec(observation.to_vec(), [1, observation.len()])?;
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
        let x = tape.constant(&Tensor::from_vec(self.observations.clone(), [steps, dim])?);
        let (logits, values) = self.network.forward(tape, &x)?;
        let log_probs = logits
            .log_softmax(1)?
            .gather(1, &self.actions, [steps, 1])?;
        let returns = tape.constant(&Tensor::from_vec(returns, [steps, 1])?);
        let advantages = returns.sub(&values)?.stop_gradient();
        let actor_loss = log_probs.mul(&advantages)?.sum_all()?.neg()?;
        let critic_loss = huber_loss(&values, &returns, 1.0, Reduction::Sum)?;
        let loss = actor_loss.add(&critic_loss)?;
        let grads = tape.gradient(&loss, &[&self.network])?;
        self.adam.apply_gradients(&mut self.network, &grads)?;
        Ok((actor_loss.to_scalar()?, critic_loss.to_scalar()?))
    }
}

impl Agent for ActorCritic {
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
