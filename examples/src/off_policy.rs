//! What the off-policy agents on Pendulum-v1 (TD3, DDPG, SAC) share: the environment,
//! the replay buffer it fills, the episode log and the step counter, checkpointed as one
//! `State`.

use rlgrad_checkpoint::State;
use rlgrad_core::{Error, Result, Rng};
use rlgrad_envs::{ActionSpace, Pendulum, VecEnv};
use rlgrad_replay::{Config, ReplayBuffer, TensorBatch, Transitions};
use rlgrad_tensor::Tensor;

use crate::run::EpisodeLog;

/// One Pendulum and the transitions it produced. Pendulum never terminates; its 200-step
/// time limit truncates, so every stored transition bootstraps (Fujimoto's `done_bool`,
/// CleanRL's `terminations`).
#[derive(Debug, State)]
pub struct Experience {
    env: VecEnv<Pendulum>,
    buffer: ReplayBuffer,
    episodes: EpisodeLog,
    env_steps: u64,
    #[state(skip)]
    dims: (usize, usize, f32),
}

impl Experience {
    /// The environment reset with `seed`, and an empty buffer of `capacity` transitions.
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

    /// The environment steps taken.
    pub fn env_steps(&self) -> u64 {
        self.env_steps
    }

    /// The finished episodes.
    pub fn episodes(&self) -> &EpisodeLog {
        &self.episodes
    }
}
