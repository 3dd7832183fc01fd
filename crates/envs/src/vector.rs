//! B environments stepped together, with auto-reset in the same step.

use rlgrad_core::cpu::alloc;
use rlgrad_core::{Error, Result, check};

use crate::snapshot::{Snapshot, WordReader, WordWriter};
use crate::space::{ActionElement, ActionSpace, BoxSpace};
use crate::{Env, not_reset};

/// One finished episode of a [`VecEnv`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Episode {
    /// The environment (row) it ran in.
    pub env: usize,
    /// The sum of its rewards, in f64 in step order.
    pub episode_return: f64,
    /// Its number of steps.
    pub length: usize,
    /// Whether it ended by termination (else by truncation only).
    pub terminated: bool,
}

/// What one [`VecEnv::step`] produced, borrowed from the wrapper's buffers.
#[derive(Debug, Clone, Copy)]
pub struct VecStep<'a> {
    /// `[B, obs_dim]`: the observations to act on next; the reset observation where an
    /// episode ended.
    pub observations: &'a [f32],
    /// `[B, obs_dim]`: the observations this step produced, before any reset: the final
    /// observation where an episode ended, else the same row as `observations`.
    /// `V(final_observations)` is the truncation bootstrap (`final_values`).
    pub final_observations: &'a [f32],
    /// `[B]`: the rewards, rounded to f32.
    pub rewards: &'a [f32],
    /// `[B]`: the episode terminated.
    pub terminated: &'a [bool],
    /// `[B]`: the episode hit the step limit (may hold together with `terminated`).
    pub truncated: &'a [bool],
    /// The episodes that ended in this step, in row order.
    pub finished: &'a [Episode],
}

/// `B` environments of one kind stepped together, with flat buffers and auto-reset.
///
/// - `reset(Some(seed))` resets environment `i` with seed `seed + i`, as Gymnasium's
///   vector environments do; `reset(None)` continues each one's generator.
/// - `step(actions)` takes `[B, action_len]` actions, checks all of them first (an error
///   leaves every environment untouched), steps the environments in row order, and
///   resets every environment whose episode ended *in the same step*, continuing its
///   generator. The step's `final_observations` keep what the finished episodes saw last.
///   This is Gymnasium 1.x's `AutoresetMode.SAME_STEP` (and Gymnasium 0.x's and
///   Stable-Baselines3's behaviour). Gymnasium 1.x's default, `NEXT_STEP`, instead returns
///   the final observation and resets at the *next* call, whose action is ignored and
///   whose reward is 0: a rollout of `NEXT_STEP` has one dummy transition after every
///   episode end to mask out, a rollout of this wrapper has none.
/// - Rewards are summed per environment (f64) into episode returns and lengths; the
///   episodes that ended in a step are listed in [`VecStep::finished`], and
///   [`VecEnv::episodes_finished`] counts them all.
///
/// Environment `i` gives bit for bit what it gives stepped alone with the same seed and
/// actions. Buffers are allocated once, in [`VecEnv::new`]; `reset` and `step` allocate
/// nothing.
#[derive(Debug, Clone)]
pub struct VecEnv<E: Env> {
    envs: Vec<E>,
    obs_dim: usize,
    action_len: usize,
    observations: Vec<f32>,
    final_observations: Vec<f32>,
    rewards: Vec<f32>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    episode_returns: Vec<f64>,
    episode_lengths: Vec<usize>,
    finished: Vec<Episode>,
    episodes_finished: u64,
    is_reset: bool,
}

impl<E: Env> VecEnv<E> {
    /// Wraps `envs`; an error if there are none, their spaces differ, or observations or
    /// actions have no element.
    pub fn new(envs: Vec<E>) -> Result<Self> {
        const FUNCTION: &str = "VecEnv::new";
        let Some(first) = envs.first() else {
            return Err(Error::empty(FUNCTION, "envs", "at least one environment"));
        };
        if let Some(i) = envs.iter().position(|env| {
            env.observation_space() != first.observation_space()
                || env.action_space() != first.action_space()
        }) {
            return Err(Error::value(
                FUNCTION,
                "envs",
                "environments with the observation and action spaces of envs[0]",
                format_args!("different spaces at envs[{i}]"),
            ));
        }
        let b = envs.len();
        let obs_dim = first.observation_space().dim();
        let action_len = first.action_space().action_len();
        if obs_dim == 0 || action_len == 0 {
            return Err(Error::shape(
                FUNCTION,
                "envs",
                "observations and actions of at least one element",
                format_args!("{obs_dim}-element observations, {action_len}-element actions"),
            ));
        }
        let obs_len = check::product(FUNCTION, "envs", b, obs_dim)?;
        Ok(Self {
            envs,
            obs_dim,
            action_len,
            observations: alloc::try_zeroed(obs_len, FUNCTION, "envs")?,
            final_observations: alloc::try_zeroed(obs_len, FUNCTION, "envs")?,
            rewards: alloc::try_zeroed(b, FUNCTION, "envs")?,
            terminated: alloc::try_filled(b, false, FUNCTION, "envs")?,
            truncated: alloc::try_filled(b, false, FUNCTION, "envs")?,
            episode_returns: alloc::try_zeroed(b, FUNCTION, "envs")?,
            episode_lengths: alloc::try_filled(b, 0, FUNCTION, "envs")?,
            finished: alloc::try_with_capacity(b, FUNCTION, "envs")?,
            episodes_finished: 0,
            is_reset: false,
        })
    }

    /// `count` environments made by `make`; an error for `count = 0` or more than the host
    /// can allocate.
    pub fn from_fn(count: usize, mut make: impl FnMut() -> E) -> Result<Self> {
        let envs = alloc::try_from_fn(count, |_| make(), "VecEnv::from_fn", "count")?;
        Self::new(envs)
    }

    /// The number of environments `B`.
    pub fn num_envs(&self) -> usize {
        self.envs.len()
    }

    /// The environments.
    pub fn envs(&self) -> &[E] {
        &self.envs
    }

    /// One environment's observation space.
    pub fn single_observation_space(&self) -> &BoxSpace {
        self.envs[0].observation_space()
    }

    /// One environment's action space.
    pub fn single_action_space(&self) -> &ActionSpace {
        self.envs[0].action_space()
    }

    /// `[B, obs_dim]`: the observations to act on next (zeros before the first reset).
    pub fn observations(&self) -> &[f32] {
        &self.observations
    }

    /// How many episodes have ended since the wrapper was made.
    pub fn episodes_finished(&self) -> u64 {
        self.episodes_finished
    }

    /// Resets every environment: environment `i` with `seed + i`, or, for `None`,
    /// continuing its generator. An error if `seed + B - 1` overflows `u64` or an
    /// environment refuses (a first reset without a seed); returns `[B, obs_dim]`.
    pub fn reset(&mut self, seed: Option<u64>) -> Result<&[f32]> {
        const FUNCTION: &str = "VecEnv::reset";
        let last = self.envs.len() as u64 - 1;
        if let Some(seed) = seed
            && seed.checked_add(last).is_none()
        {
            return Err(Error::out_of_range(
                FUNCTION,
                "seed",
                format_args!("a seed <= u64::MAX - {last} (environment i gets seed + i)"),
                seed,
            ));
        }
        for (i, (env, row)) in self
            .envs
            .iter_mut()
            .zip(self.observations.chunks_exact_mut(self.obs_dim))
            .enumerate()
        {
            row.copy_from_slice(env.reset(seed.map(|s| s + i as u64))?);
        }
        self.episode_returns.fill(0.0);
        self.episode_lengths.fill(0);
        self.is_reset = true;
        Ok(&self.observations)
    }

    /// Steps environment `i` with `actions[i * action_len..(i + 1) * action_len]` and
    /// auto-resets the ones whose episode ended. An error, with nothing stepped, before
    /// the first reset, for `actions.len() != B * action_len`, or for an action outside
    /// the action space (see [`ActionElement`]).
    pub fn step(&mut self, actions: &[E::Action]) -> Result<VecStep<'_>> {
        const FUNCTION: &str = "VecEnv::step";
        if !self.is_reset {
            return Err(not_reset(FUNCTION));
        }
        check::len(
            FUNCTION,
            "actions",
            self.envs.len() * self.action_len,
            actions.len(),
        )?;
        let space = self.envs[0].action_space();
        for action in actions.chunks_exact(self.action_len) {
            E::Action::check(space, FUNCTION, action)?;
        }
        self.finished.clear();
        for (i, (env, action)) in self
            .envs
            .iter_mut()
            .zip(actions.chunks_exact(self.action_len))
            .enumerate()
        {
            let rows = i * self.obs_dim..(i + 1) * self.obs_dim;
            let step = env.step(action)?;
            self.final_observations[rows.clone()].copy_from_slice(step.observation);
            self.rewards[i] = step.reward as f32;
            self.terminated[i] = step.terminated;
            self.truncated[i] = step.truncated;
            self.episode_returns[i] += step.reward;
            self.episode_lengths[i] += 1;
            if step.terminated || step.truncated {
                self.finished.push(Episode {
                    env: i,
                    episode_return: self.episode_returns[i],
                    length: self.episode_lengths[i],
                    terminated: step.terminated,
                });
                self.episode_returns[i] = 0.0;
                self.episode_lengths[i] = 0;
                self.observations[rows].copy_from_slice(env.reset(None)?);
            } else {
                let last = &self.final_observations[rows.clone()];
                self.observations[rows].copy_from_slice(last);
            }
        }
        self.episodes_finished += self.finished.len() as u64;
        Ok(VecStep {
            observations: &self.observations,
            final_observations: &self.final_observations,
            rewards: &self.rewards,
            terminated: &self.terminated,
            truncated: &self.truncated,
            finished: &self.finished,
        })
    }
}

/// Every environment's snapshot, with the wrapper's own state: whether it was reset, the
/// episodes finished, and per environment the running episode's return and length and
/// the observation to act on next. Words: `[reset flag, episodes finished]`, then per
/// environment `[return bits, length, observation (obs_dim f32 bits), n, n words of its
/// snapshot]`. What the last step returned (final observations, rewards, flags) is not
/// kept: the next step does not depend on it.
impl<E: Env + Snapshot> Snapshot for VecEnv<E> {
    fn snapshot(&self) -> Vec<u64> {
        let mut out = WordWriter::default();
        out.flag(self.is_reset);
        out.word(self.episodes_finished);
        for (i, env) in self.envs.iter().enumerate() {
            out.f64s(&[self.episode_returns[i]]);
            out.usize(self.episode_lengths[i]);
            out.f32s(&self.observations[i * self.obs_dim..(i + 1) * self.obs_dim]);
            let words = env.snapshot();
            out.usize(words.len());
            out.words(&words);
        }
        out.finish()
    }

    fn restore(&mut self, snapshot: &[u64]) -> Result<()> {
        const FUNCTION: &str = "VecEnv::restore";
        let before: Vec<Vec<u64>> = self.envs.iter().map(Snapshot::snapshot).collect();
        let expected = 2 + before
            .iter()
            .map(|words| 3 + self.obs_dim + words.len())
            .sum::<usize>();
        let kind = format!("{} environments like these", self.envs.len());
        let mut words = WordReader::new(FUNCTION, snapshot, expected, &kind)?;
        let is_reset = words.flag()?;
        let episodes_finished = words.word();
        let mut rows = Vec::with_capacity(self.envs.len());
        for own in &before {
            let [episode_return] = words.f64s();
            let length = words.usize()?;
            let observation = words.f32s(self.obs_dim)?;
            if words.usize()? != own.len() {
                return Err(Error::shape(
                    FUNCTION,
                    "snapshot",
                    format_args!("{kind}: environment snapshots of {} words", own.len()),
                    "another length",
                ));
            }
            rows.push((episode_return, length, observation, words.words(own.len())));
        }
        for (i, row) in rows.iter().enumerate() {
            if let Err(error) = self.envs[i].restore(row.3) {
                for (env, words) in self.envs.iter_mut().zip(&before).take(i) {
                    env.restore(words)
                        .expect("an environment takes back its own snapshot");
                }
                return Err(error.in_function(FUNCTION));
            }
        }
        for (i, (episode_return, length, observation, _)) in rows.into_iter().enumerate() {
            self.episode_returns[i] = episode_return;
            self.episode_lengths[i] = length;
            self.observations[i * self.obs_dim..(i + 1) * self.obs_dim]
                .copy_from_slice(&observation);
        }
        self.is_reset = is_reset;
        self.episodes_finished = episodes_finished;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Step;
    use crate::space::Discrete;

    /// A user-defined environment: observes how many steps it took, ends after `len`.
    #[derive(Debug, Clone)]
    struct Counter {
        observation_space: BoxSpace,
        action_space: ActionSpace,
        len: usize,
        count: [f32; 1],
    }

    impl Counter {
        fn new(dim: usize, len: usize) -> Self {
            Self {
                observation_space: BoxSpace::new(vec![0.0; dim], vec![f32::MAX; dim]).unwrap(),
                action_space: ActionSpace::Discrete(Discrete::new(1).unwrap()),
                len,
                count: [0.0],
            }
        }
    }

    impl Env for Counter {
        type Action = usize;
        fn observation_space(&self) -> &BoxSpace {
            &self.observation_space
        }
        fn action_space(&self) -> &ActionSpace {
            &self.action_space
        }
        fn max_episode_steps(&self) -> usize {
            self.len
        }
        fn reset(&mut self, _seed: Option<u64>) -> Result<&[f32]> {
            self.count = [0.0];
            Ok(&self.count)
        }
        fn step(&mut self, _action: &[usize]) -> Result<Step<'_>> {
            self.count[0] += 1.0;
            Ok(Step {
                observation: &self.count,
                reward: 0.5,
                terminated: false,
                truncated: self.count[0] as usize >= self.len,
            })
        }
    }

    #[test]
    fn user_environments_are_wrapped_and_reset_on_their_last_step() {
        let mut envs = VecEnv::new(vec![Counter::new(1, 2), Counter::new(1, 3)]).unwrap();
        envs.reset(None).unwrap();
        envs.step(&[0, 0]).unwrap();
        let step = envs.step(&[0, 0]).unwrap();
        assert_eq!(step.observations, [0.0, 2.0]);
        assert_eq!(step.final_observations, [2.0, 2.0]);
        assert_eq!(step.truncated, [true, false]);
        assert_eq!(step.rewards, [0.5, 0.5]);
        let finished = [Episode {
            env: 0,
            episode_return: 1.0,
            length: 2,
            terminated: false,
        }];
        assert_eq!(step.finished, finished);
        let step = envs.step(&[0, 0]).unwrap();
        assert_eq!(step.finished[0].env, 1);
        assert_eq!(envs.episodes_finished(), 2);
    }

    #[test]
    fn spaces_must_agree_and_have_elements() {
        let err = VecEnv::new(vec![Counter::new(1, 2), Counter::new(2, 2)]).unwrap_err();
        assert!(err.to_string().contains("envs[1]"), "{err}");
        assert!(VecEnv::new(vec![Counter::new(0, 2)]).is_err());
    }

    #[test]
    fn a_count_the_host_cannot_allocate_is_an_error() {
        let err = VecEnv::from_fn(1 << 60, || Counter::new(1, 2)).unwrap_err();
        let message = err.to_string();
        assert!(message.contains("VecEnv::from_fn"), "{message}");
        assert!(
            message.contains("1152921504606846976 elements"),
            "{message}"
        );
    }
}
