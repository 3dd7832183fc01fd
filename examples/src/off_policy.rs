//! What the off-policy agents on Pendulum-v1 (TD3, DDPG, SAC) share: [`Experience`] (the
//! environment, the replay buffer it fills, the episode log, the step counter and the
//! exploration stream, checkpointed as one `State`), and [`OffPolicy`], the loop of acting
//! and learning that makes such an agent an [`Agent`].

use rlgrad_checkpoint::State;
use rlgrad_core::{Error, Result, Rng};
use rlgrad_envs::{ActionSpace, Pendulum, VecEnv};
use rlgrad_replay::{Config, ReplayBuffer, TensorBatch, Transitions};
use rlgrad_tensor::Tensor;

use crate::run::{Agent, EpisodeLog, Logger, Target};

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
    dims: (usize, usize, f32),
}

impl Experience {
    /// The environment reset with `seed`, an empty buffer of `capacity` transitions, and
    /// the exploration stream `explore` of `seed`.
    pub fn new(seed: u64, capacity: usize) -> Result<Self> {
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
        let dims = (
            env.single_observation_space().dim(),
            actions.dim(),
            actions.high()[0],
        );
        Ok(Self {
            buffer: ReplayBuffer::new(Config::new(capacity, dims.0, dims.1))?,
            env,
            episodes: EpisodeLog::default(),
            env_steps: 0,
            explore: Rng::new(seed, "explore"),
            dims,
        })
    }

    /// The observation and action sizes, and the action bound (`[-max, max]`).
    pub fn dims(&self) -> (usize, usize, f32) {
        self.dims
    }

    /// The observation to act on, `[1, obs_dim]`.
    pub fn observation(&self) -> Result<Tensor> {
        let observation = self.env.observations();
        Tensor::from_vec(observation.to_vec(), [1, observation.len()])
    }

    /// Steps the environment with `action`, stores the transition and logs a finished
    /// episode.
    pub fn step(&mut self, action: f32) -> Result<()> {
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

    /// `batch_size` transitions drawn uniformly with `rng`, as tensors.
    pub fn sample(&self, batch_size: usize, rng: &mut Rng) -> Result<TensorBatch> {
        self.buffer.sample(batch_size, rng)?.into_tensors()
    }

    /// The stream of the actions taken: the random ones and the policy's noise.
    pub fn explore(&mut self) -> &mut Rng {
        &mut self.explore
    }

    /// The environment steps taken.
    pub fn env_steps(&self) -> u64 {
        self.env_steps
    }

    /// The finished episodes.
    pub fn episodes(&self) -> &EpisodeLog {
        &self.episodes
    }
}

/// An off-policy agent: it acts uniformly at random until [`OffPolicy::learning_starts`]
/// steps are stored, then by its policy, and after each later step trains once on its
/// [`Experience`]. Every such agent is an [`Agent`] whose unit is an environment step.
pub trait OffPolicy: State {
    /// The default budget, in environment steps.
    const DEFAULT_BUDGET: u64;

    /// The short name of the agent (`td3`, `ddpg`, `sac`).
    fn name(&self) -> &'static str;

    /// The experience it acts in and learns from.
    fn experience(&self) -> &Experience;

    /// The same, mutably.
    fn experience_mut(&mut self) -> &mut Experience;

    /// Steps of random actions before the policy acts and the training starts.
    fn learning_starts(&self) -> u64;

    /// The policy's action for the current observation, exploration included.
    fn policy_action(&mut self) -> Result<f32>;

    /// One training iteration after environment step `step`; scalars go to `log`.
    fn train(&mut self, step: u64, log: &mut Logger) -> Result<()>;

    /// When the task counts as learned.
    fn target(&self) -> Target;

    /// The hyper-parameters and seed, as text.
    fn describe(&self) -> String;

    /// Every trained parameter (and target network) by name.
    fn parameters(&self) -> Result<Vec<(String, Vec<f32>)>>;
}

impl<A: OffPolicy> Agent for A {
    const UNIT: &'static str = "steps";
    const DEFAULT_BUDGET: u64 = <A as OffPolicy>::DEFAULT_BUDGET;
    const DEFAULT_CHECKPOINT_EVERY: u64 = 10_000;

    fn name(&self) -> &'static str {
        OffPolicy::name(self)
    }

    /// One environment step, then one training iteration once the learning started.
    fn advance(&mut self, log: &mut Logger) -> Result<()> {
        let action = if self.experience().env_steps() < self.learning_starts() {
            let (_, _, max_action) = self.experience().dims();
            let u = self.experience_mut().explore().uniform_f64();
            ((2.0 * u - 1.0) * f64::from(max_action)) as f32
        } else {
            self.policy_action()?
        };
        self.experience_mut().step(action)?;
        let step = self.experience().env_steps();
        if step > self.learning_starts() {
            self.train(step, log)?;
        }
        Ok(())
    }

    fn env_steps(&self) -> u64 {
        self.experience().env_steps()
    }

    fn episodes(&self) -> &EpisodeLog {
        self.experience().episodes()
    }

    fn target(&self) -> Target {
        OffPolicy::target(self)
    }

    fn describe(&self) -> String {
        OffPolicy::describe(self)
    }

    fn parameters(&self) -> Result<Vec<(String, Vec<f32>)>> {
        OffPolicy::parameters(self)
    }
}
