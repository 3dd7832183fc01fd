//! rlgrad-envs: Gymnasium's `CartPole-v1` and `Pendulum-v1` in Rust, with Gymnasium's
//! dynamics, rewards, spaces, seeding and terminated/truncated semantics, a CartPole
//! without velocities, and a vectorized wrapper with auto-reset.
//!
//! | environment | observation | action | episode end |
//! |---|---|---|---|
//! | [`CartPole`] | `[x, x_dot, theta, theta_dot]` | `Discrete(2)` | terminated at `\|x\| > 2.4` or `\|theta\| > 12°`, truncated at 500 steps |
//! | [`CartPoleNoVelocity`] | `[x, theta]` | `Discrete(2)` | as CartPole |
//! | [`Pendulum`] | `[cos theta, sin theta, theta_dot]` | `Box([-2], [2])` | truncated at 200 steps |
//!
//! Every environment implements [`Env`]: `reset(seed)` and `step(action)` return the
//! observation (f32) borrowed from the environment, `step` also the reward (f64) and the
//! `terminated` / `truncated` flags. An action is a slice: `&[usize]` of length 1 for a
//! discrete space, `&[f32]` of the box's dimension for a box. [`VecEnv`] steps `B`
//! environments into flat `[B, obs_dim]` buffers and resets finished episodes in the same
//! step, keeping their final observations for the truncation bootstrap. Every
//! environment and `VecEnv` implements [`Snapshot`]: its whole state as `u64` words for a
//! checkpoint, restored to continue bit for bit, mid-episode included.
//!
//! # Example: a random-policy CartPole episode
//!
//! ```
//! use rlgrad_core::Rng;
//! use rlgrad_envs::{CartPole, Env};
//!
//! let mut env = CartPole::new();
//! let mut policy = Rng::new(0, "policy");
//! let first = env.reset(Some(42))?.to_vec();
//! let (mut episode_return, mut steps) = (0.0, 0);
//! loop {
//!     let action = policy.below(2) as usize;
//!     let step = env.step(&[action])?;
//!     episode_return += step.reward;
//!     steps += 1;
//!     if step.terminated || step.truncated {
//!         break;
//!     }
//! }
//! assert_eq!(episode_return, steps as f64); // reward 1 per step, the last one included
//! // The same seed gives the same initial state (Gymnasium's, for seed 42).
//! assert_eq!(env.reset(Some(42))?, &first[..]);
//! assert!(env.step(&[2]).is_err()); // not an action of Discrete(2)
//! # Ok::<(), rlgrad_core::Error>(())
//! ```
//!
//! # Guarantees
//!
//! - **Seeding is Gymnasium's.** `reset(Some(seed))` builds NumPy's
//!   `np.random.default_rng(seed)` ([`NumpyRng`]: `SeedSequence` -> PCG64) and draws the
//!   initial state with `Generator.uniform`, so the initial state is Gymnasium's for the
//!   same seed, bit for bit (tested against 69 recorded seeds per environment, up to
//!   `2^64 - 1`). `reset(None)` continues the generator, as in Gymnasium; a first reset
//!   without a seed is an error (Gymnasium would draw OS entropy).
//! - **Dynamics are Gymnasium's formulas in Gymnasium's order of operations and types**
//!   (f64 state, f32 observations, NumPy's f32 promotions in Pendulum's torque terms), and
//!   the same on every platform. Two things differ from NumPy: sine and cosine come from
//!   the portable `libm` crate, NumPy's from the C library (on x86-64 glibc they differ in
//!   the last bit for up to 0.2% of angles below 0.05 rad and 1-8% of larger ones), and
//!   Pendulum's cost squares with products where NumPy calls `pow` (glibc's differs from
//!   `x * x` for about 0.09% of arguments). Against the recorded Gymnasium trajectories
//!   (`tests/integration/gymnasium.rs`), every CartPole step is bit-exact, and Pendulum's observations
//!   and flags are, with f64 states within 1.3e-14 and rewards within 3.0e-14 over whole
//!   episodes. With the C library's sine and cosine (a test-only switch), every recorded
//!   state, observation and flag is bit-exact on x86-64 glibc: the rest of the arithmetic
//!   is Gymnasium's exactly. The crate README has the table.
//! - **Episode ends are Gymnasium's**: `terminated` and `truncated` as its `TimeLimit`
//!   wrapper sets them (truncated from the limit-th step on, together with `terminated`
//!   when both hold), CartPole's reward 0 and one `log::warn!` after termination.
//! - **Errors, not panics**, for every input a caller can get wrong: a step before the
//!   first reset, an action of the wrong length, a discrete action out of range, a NaN
//!   torque, a non-finite state given to `reset_to_state`, a step limit of 0, a
//!   snapshot of the wrong length or with a flag other than 0/1. An error leaves the
//!   environment as it was.
//! - [`VecEnv`]'s environment `i` equals environment `i` stepped alone, bit for bit, and
//!   the wrapper allocates nothing after construction.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod cartpole;
mod pendulum;
mod seeding;
mod snapshot;
mod space;
#[cfg(feature = "checkpoint")]
mod state;
mod vector;

#[cfg(test)]
#[path = "../tests/support/recorded.rs"]
mod recorded;
#[cfg(test)]
mod replay_with_c_library_trig;

pub use cartpole::{CartPole, CartPoleNoVelocity};
pub use pendulum::Pendulum;
pub use rlgrad_core::{Error, Result};
pub use seeding::{NumpyRng, NumpyRngState};
pub use snapshot::Snapshot;
pub use space::{ActionElement, ActionSpace, BoxSpace, Discrete};
pub use vector::{Episode, VecEnv, VecStep};

/// A reinforcement-learning environment in Gymnasium's shape.
pub trait Env {
    /// The element type of an action: `usize` for a discrete space (actions are
    /// `&[a]`), `f32` for a box (actions have the box's dimension).
    type Action: ActionElement;

    /// The space the observations lie in.
    fn observation_space(&self) -> &BoxSpace;

    /// The space of actions.
    fn action_space(&self) -> &ActionSpace;

    /// The step from which `truncated` is set.
    fn max_episode_steps(&self) -> usize;

    /// Starts an episode: with `Some(seed)`, from a generator seeded with `seed`;
    /// with `None`, continuing the current generator. Returns the first observation.
    fn reset(&mut self, seed: Option<u64>) -> Result<&[f32]>;

    /// Applies `action`, returning the observation, reward and episode flags. An error,
    /// with nothing changed, before the first reset or for an action outside the
    /// action space.
    fn step(&mut self, action: &[Self::Action]) -> Result<Step<'_>>;
}

/// The outcome of [`Env::step`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step<'a> {
    /// The observation after the step, borrowed from the environment.
    pub observation: &'a [f32],
    /// The reward, in f64 as Gymnasium returns it.
    pub reward: f64,
    /// The episode reached a terminal state (do not bootstrap).
    pub terminated: bool,
    /// The episode hit its step limit (bootstrap from the observation's value).
    pub truncated: bool,
}

/// Gymnasium's `TimeLimit` wrapper: `truncated` once `max_episode_steps` steps were taken.
#[derive(Debug, Clone)]
struct TimeLimit {
    max_episode_steps: usize,
    elapsed_steps: usize,
}

impl TimeLimit {
    /// A limit known to be positive.
    fn new(max_episode_steps: usize) -> Self {
        Self {
            max_episode_steps,
            elapsed_steps: 0,
        }
    }

    /// A caller's limit: an error for 0.
    fn checked(function: &'static str, max_episode_steps: usize) -> Result<Self> {
        if max_episode_steps == 0 {
            return Err(Error::value(
                function,
                "max_episode_steps",
                "a step limit >= 1",
                0,
            ));
        }
        Ok(Self::new(max_episode_steps))
    }

    fn restart(&mut self) {
        self.elapsed_steps = 0;
    }

    /// Counts a step; whether the episode is truncated.
    fn tick(&mut self) -> bool {
        self.elapsed_steps += 1;
        self.elapsed_steps >= self.max_episode_steps
    }
}

/// The sine and cosine an environment calls.
#[derive(Debug, Clone, Copy)]
struct Trig {
    sin: fn(f64) -> f64,
    cos: fn(f64) -> f64,
}

impl Trig {
    /// The portable `libm` crate's: the same bits on every platform.
    const PORTABLE: Self = Self {
        sin: libm::sin,
        cos: libm::cos,
    };
}

/// The error of a step before the first reset.
fn not_reset(function: &'static str) -> Error {
    Error::value(
        function,
        "self",
        "an environment that was reset before its first step",
        "no reset yet",
    )
}

/// The README's examples, compiled and run as doctests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
