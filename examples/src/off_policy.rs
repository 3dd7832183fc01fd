//! What the off-policy agents on Pendulum-v1 (TD3, DDPG, SAC) share: their [`Common`]
//! hyper-parameters, [`Experience`] (the environment, the replay buffer it fills, the
//! episode log, the step counter and the exploration stream, checkpointed as one `State`),
//! and [`OffPolicy`], the loop of acting and learning around a [`Learner`] (an agent's
//! networks, optimizers and update) that makes it an [`Agent`].
//!
//! The learner's networks live on its device ([`Learner::Device`]); the environment and
//! the replay buffer stay on the host. A step uploads the observation and downloads the
//! action, an iteration uploads its sampled [`Batch`]: nothing else crosses, so an
//! update that logs nothing reads nothing back.

use std::fmt::Debug;

use rlgrad_checkpoint::State;
use rlgrad_core::{Error, Result, Rng, Step};
use rlgrad_envs::{ActionSpace, Pendulum, VecEnv};
use rlgrad_replay::{Config, ReplayBuffer, Transitions};
use rlgrad_tensor::Tensor;

use crate::device::TrainDevice;
use crate::run::{Agent, EpisodeLog, Logger, Target};

/// The hyper-parameters every off-policy agent here has.
#[derive(Debug, Clone, PartialEq)]
pub struct Common {
    /// The agent's short name (`td3`, `ddpg`, `sac`), for run directories and reports.
    pub name: &'static str,
    /// Hidden units of the actor and of each critic. Default `[256, 256]`.
    pub hidden: [usize; 2],
    /// The discount. Default 0.99.
    pub gamma: f32,
    /// Polyak coefficient of the target updates. Default 0.005.
    pub tau: f64,
    /// Steps of uniformly random actions before the policy acts and training starts.
    pub learning_starts: u64,
    /// Transitions per training iteration. Default 256.
    pub batch_size: usize,
    /// The replay buffer's capacity. Default 10^6.
    pub replay_capacity: usize,
    /// When the task counts as learned. Default: a mean return of -200 over the last 10
    /// episodes.
    pub target: Target,
}

impl Common {
    /// The defaults Fujimoto's TD3 and CleanRL's SAC share, with `learning_starts` random
    /// steps (Fujimoto: 25 000, CleanRL: 5 000).
    pub fn new(name: &'static str, learning_starts: u64) -> Self {
        Self {
            name,
            hidden: [256, 256],
            gamma: 0.99,
            tau: 0.005,
            learning_starts,
            batch_size: 256,
            replay_capacity: 1_000_000,
            target: Target {
                window: 10,
                threshold: -200.0,
            },
        }
    }
}

/// One Pendulum and the transitions it produced. Pendulum never terminates; its 200-step
/// time limit truncates, so every stored transition bootstraps (Fujimoto's `done_bool`,
/// CleanRL's `terminations`).
#[derive(Debug, State)]
pub struct Experience {
    env: VecEnv<Pendulum>,
    buffer: ReplayBuffer,
    episodes: EpisodeLog,
    env_steps: u64,
    explore: Rng,
    #[state(skip)]
    dims: Dims,
}

impl Experience {
    /// The environment reset with `seed`, an empty buffer of `capacity` transitions, and
    /// the exploration stream `explore` of `seed`.
    fn new(seed: u64, capacity: usize) -> Result<Self> {
        let mut env = VecEnv::from_fn(1, Pendulum::new)?;
        env.reset(Some(seed))?;
        let ActionSpace::Box(actions) = env.single_action_space() else {
            return Err(Error::value(
                "Experience::new",
                "env",
                "a Box action space",
                "a Discrete one",
            ));
        };
        let dims = Dims {
            observation: env.single_observation_space().dim(),
            action: actions.dim(),
            max_action: actions.high()[0],
        };
        Ok(Self {
            buffer: ReplayBuffer::new(Config::new(capacity, dims.observation, dims.action))?,
            env,
            episodes: EpisodeLog::default(),
            env_steps: 0,
            explore: Rng::new(seed, "explore"),
            dims,
        })
    }

    /// The observation to act on, `[1, obs_dim]`, on `device`.
    fn observation_on<D: TrainDevice>(&self, device: &D) -> Result<Tensor<f32, D>> {
        let observation = self.env.observations();
        Tensor::from_vec_on(device, observation.to_vec(), [1, observation.len()])
    }

    /// Steps the environment with `action`, stores the transition and logs a finished
    /// episode.
    fn step(&mut self, action: f32) -> Result<()> {
        let obs = self.env.observations().to_vec();
        let step = self.env.step(&[action])?;
        self.buffer.push(Transitions {
            obs: &obs,
            actions: &[action],
            rewards: step.rewards,
            next_obs: step.final_observations,
            terminated: step.terminated,
            truncated: step.truncated,
        })?;
        self.env_steps += 1;
        if let Some(episode) = step.finished.first() {
            self.episodes.push(self.env_steps, episode.episode_return);
        }
        Ok(())
    }

    /// `batch_size` transitions drawn uniformly with `rng`, on `device`.
    fn sample_on<D: TrainDevice>(
        &self,
        batch_size: usize,
        rng: &mut Rng,
        device: &D,
    ) -> Result<Batch<D>> {
        let batch = self.buffer.sample(batch_size, rng)?;
        let rows = batch.len();
        let upload = |values, width| Tensor::from_vec_on(device, values, [rows, width]);
        let Dims {
            observation,
            action,
            ..
        } = self.dims;
        Ok(Batch {
            obs: upload(batch.obs, observation)?,
            actions: upload(batch.actions, action)?,
            rewards: upload(batch.rewards, 1)?,
            next_obs: upload(batch.next_obs, observation)?,
            not_dones: upload(batch.not_dones, 1)?,
        })
    }

    /// The environment steps taken.
    fn env_steps(&self) -> u64 {
        self.env_steps
    }

    /// The finished episodes.
    fn episodes(&self) -> &EpisodeLog {
        &self.episodes
    }
}

/// Transitions sampled from the replay buffer, on a learner's device: the columns an
/// update reads, each uploaded once per iteration (of the replay's `TensorBatch`, the
/// discounts and the weights, which no learner here reads, stay behind).
#[derive(Debug, Clone)]
pub struct Batch<D: TrainDevice> {
    /// `[len, obs_dim]`.
    pub obs: Tensor<f32, D>,
    /// `[len, action_dim]`.
    pub actions: Tensor<f32, D>,
    /// `[len, 1]`.
    pub rewards: Tensor<f32, D>,
    /// `[len, obs_dim]`.
    pub next_obs: Tensor<f32, D>,
    /// `[len, 1]`: 0 after a termination, else 1.
    pub not_dones: Tensor<f32, D>,
}

/// The observation size, the action size and the action bound (`[-max, max]`) of the
/// environment, which a [`Learner`] sizes its networks by.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dims {
    /// Observation features.
    pub observation: usize,
    /// Action dimensions.
    pub action: usize,
    /// Every action lies in `[-max_action, max_action]`.
    pub max_action: f32,
}

/// When an update happens: after environment step `step`, as training iteration
/// `iteration` (1 for the first, one a step once the learning started).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Environment steps taken, this one included.
    pub step: u64,
    /// Training iterations, this one included.
    pub iteration: u64,
}

/// What makes an off-policy agent itself: its networks, optimizers, random streams and
/// update. [`OffPolicy`] runs the environment, the replay buffer and the schedule around
/// it.
pub trait Learner: State {
    /// The default budget, in environment steps.
    const DEFAULT_BUDGET: u64;

    /// Where the networks, optimizers and tapes live.
    type Device: TrainDevice;

    /// The device.
    fn device(&self) -> &Self::Device;

    /// The policy's action for `observation` (`[1, obs_dim]`), exploration included, with
    /// any random draw taken from `explore`.
    fn act(&mut self, observation: &Tensor<f32, Self::Device>, explore: &mut Rng) -> Result<f32>;

    /// One training iteration on `batch` at `progress`. On the iterations that log (every
    /// [`LOG_EVERY`] steps) `scalars` is given, and the update pushes its losses and
    /// temperatures onto it by tag; the others read no value back from the tensors (a
    /// read waits for the computation, and would break a GPU graph's capture).
    fn update(
        &mut self,
        batch: &Batch<Self::Device>,
        progress: Progress,
        scalars: Option<&mut Scalars>,
    ) -> Result<()>;
}

/// Training scalars by tag, as [`Learner::update`] logs them.
pub type Scalars = Vec<(&'static str, f32)>;

/// The hyper-parameters of an off-policy agent: its own, and the [`Common`] ones among
/// them.
pub trait AgentConfig: Debug {
    /// The hyper-parameters every off-policy agent has.
    fn common(&self) -> &Common;
}

/// Steps between logged training scalars.
pub const LOG_EVERY: u64 = 100;

/// An off-policy agent: it acts uniformly at random (stream `explore` of the seed) until
/// `learning_starts` steps are stored, then by its [`Learner`]'s policy; after each later
/// step it draws `batch_size` transitions uniformly from the replay buffer (stream
/// `replay`) and updates the learner once on them, logging the update's scalars every
/// 100 steps. It is an [`Agent`] whose unit is an environment step, and its whole state
/// (the learner's, the experience's and the replay stream) is one [`State`].
#[derive(Debug, State)]
pub struct OffPolicy<L: Learner> {
    #[state(skip)]
    common: Common,
    #[state(skip)]
    description: String,
    experience: Experience,
    replay: Rng,
    learner: L,
    /// The last logged update's scalars (a buffer kept from one log to the next).
    #[state(skip)]
    scalars: Scalars,
    /// The updates that log nothing, as one captured step: on a GPU, recorded once as
    /// CUDA graphs and replayed with the same bits ([`Step`]).
    #[state(skip)]
    update: Step<L::Device>,
}

impl<L: Learner> OffPolicy<L> {
    /// The agent of the learner that `learner` builds for the environment's [`Dims`] with
    /// the stream `init` of `seed`, the environment reset with `seed`, and an empty replay
    /// buffer. `config` holds every hyper-parameter of the agent: a checkpoint made under
    /// another `config` (its `Debug` text) or seed is not resumed.
    pub fn new(
        seed: u64,
        config: &impl AgentConfig,
        learner: impl FnOnce(Dims, &mut Rng) -> Result<L>,
    ) -> Result<Self> {
        let common = config.common();
        let experience = Experience::new(seed, common.replay_capacity)?;
        let learner = learner(experience.dims, &mut Rng::new(seed, "init"))?;
        Ok(Self {
            update: Step::new(learner.device()),
            learner,
            experience,
            replay: Rng::new(seed, "replay"),
            common: common.clone(),
            description: format!("{config:?}, seed {seed}"),
            scalars: Scalars::new(),
        })
    }

    /// The learner.
    pub fn learner(&self) -> &L {
        &self.learner
    }
}

impl<L: Learner> Agent for OffPolicy<L> {
    const UNIT: &'static str = "steps";
    const DEFAULT_BUDGET: u64 = L::DEFAULT_BUDGET;
    const DEFAULT_CHECKPOINT_EVERY: u64 = 10_000;

    fn name(&self) -> &'static str {
        self.common.name
    }

    /// One environment step, then one training iteration once the learning started.
    fn advance(&mut self, log: &mut Logger) -> Result<()> {
        let Common {
            learning_starts,
            batch_size,
            ..
        } = self.common;
        let experience = &mut self.experience;
        let action = if experience.env_steps() < learning_starts {
            let u = experience.explore.uniform_f64();
            ((2.0 * u - 1.0) * f64::from(experience.dims.max_action)) as f32
        } else {
            let observation = experience.observation_on(self.learner.device())?;
            self.learner.act(&observation, &mut experience.explore)?
        };
        experience.step(action)?;
        let step = experience.env_steps();
        if step > learning_starts {
            let batch =
                experience.sample_on(batch_size, &mut self.replay, self.learner.device())?;
            let progress = Progress {
                step,
                iteration: step - learning_starts,
            };
            self.scalars.clear();
            if step.is_multiple_of(LOG_EVERY) {
                // Reads the losses back: not a step a GPU could record.
                (self.learner).update(&batch, progress, Some(&mut self.scalars))?;
            } else {
                let learner = &mut self.learner;
                self.update.run(|| learner.update(&batch, progress, None))?;
            }
            for &(tag, value) in &self.scalars {
                log.scalar(tag, step, f64::from(value))?;
            }
        }
        Ok(())
    }

    fn env_steps(&self) -> u64 {
        self.experience.env_steps()
    }

    fn episodes(&self) -> &EpisodeLog {
        self.experience.episodes()
    }

    fn target(&self) -> Target {
        self.common.target
    }

    fn describe(&self) -> String {
        self.description.clone()
    }
}
