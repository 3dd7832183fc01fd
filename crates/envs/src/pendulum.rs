//! Pendulum-v1.

use std::f64::consts::PI;

use rlgrad_core::{Result, check};

use crate::seeding::{NumpyRng, reseed};
use crate::snapshot::{Snapshot, WordReader, WordWriter};
use crate::space::{ActionElement, ActionSpace, BoxSpace};
use crate::{Env, Step, TimeLimit, Trig, not_reset};

const MAX_SPEED: f64 = 8.0;
const MAX_TORQUE: f32 = 2.0;
const DT: f64 = 0.05;
const G: f64 = 10.0;
const M: f64 = 1.0;
const L: f64 = 1.0;
/// Reset angles are uniform in `[-pi, pi)`, angular velocities in `[-1, 1)`.
const RESET_HIGH: [f64; 2] = [PI, 1.0];

/// NumPy's float remainder (`npy_remainder`): `fmod`, moved into the divisor's sign.
fn python_remainder(a: f64, b: f64) -> f64 {
    let rem = a % b;
    if rem == 0.0 {
        0.0f64.copysign(b)
    } else if (b < 0.0) != (rem < 0.0) {
        rem + b
    } else {
        rem
    }
}

/// Gymnasium's `angle_normalize`: `((x + pi) % (2 pi)) - pi`, into `[-pi, pi)`.
fn angle_normalize(x: f64) -> f64 {
    python_remainder(x + PI, 2.0 * PI) - PI
}

/// Gymnasium's `Pendulum-v1`: swing a pendulum up and keep it upright with a torque.
///
/// - State `[theta, theta_dot]` (f64; `theta` = 0 is upright and is not wrapped);
///   observation `[cos theta, sin theta, theta_dot]` (f32), space
///   `Box([-1, -1, -8], [1, 1, 8])`; action space `Box([-2], [2])`, an action is `&[u]`.
/// - Reset: `theta` uniform in `[-pi, pi)`, `theta_dot` in `[-1, 1)` from NumPy's
///   generator, so `reset(Some(seed))` gives Gymnasium's initial state for the same seed.
/// - Step, in Gymnasium's order and types: `u = clip(action, -2, 2)` (f32);
///   `cost = angle_normalize(theta)^2 + 0.1 theta_dot^2 + f64(0.001f32 * u^2)` with the
///   torque term in f32 as NumPy computes it; reward `-cost`;
///   `theta_dot' = clip(theta_dot + (15 sin theta + f64(3f32 * u)) * 0.05, -8, 8)`,
///   `theta' = theta + theta_dot' * 0.05`. Never terminated; truncated from the 200th
///   step on.
/// - Torques outside `[-2, 2]`, infinities included, are clipped as in Gymnasium; a NaN
///   torque is an error (Gymnasium would carry the NaN into the state for good).
///
/// Sine and cosine come from the portable `libm` crate, and the squares in the cost are
/// products, where NumPy calls the C library's `pow` (not correctly rounded on glibc):
/// the crate docs measure both differences.
#[derive(Debug, Clone)]
pub struct Pendulum {
    state: Option<[f64; 2]>,
    observation: [f32; 3],
    rng: Option<NumpyRng>,
    time_limit: TimeLimit,
    observation_space: BoxSpace,
    action_space: ActionSpace,
    trig: Trig,
}

impl Default for Pendulum {
    fn default() -> Self {
        Self::new()
    }
}

impl Pendulum {
    /// `Pendulum-v1`: truncated at 200 steps, not reset yet.
    pub fn new() -> Self {
        Self {
            state: None,
            observation: [0.0; 3],
            rng: None,
            time_limit: TimeLimit::new(200),
            observation_space: BoxSpace::symmetric(&[1.0, 1.0, MAX_SPEED as f32]),
            action_space: ActionSpace::Box(BoxSpace::symmetric(&[MAX_TORQUE])),
            trig: Trig::PORTABLE,
        }
    }

    /// Pendulum with another step limit (`gym.make("Pendulum-v1", max_episode_steps=n)`);
    /// an error for 0.
    pub fn with_max_episode_steps(max_episode_steps: usize) -> Result<Self> {
        Ok(Self {
            time_limit: TimeLimit::checked("Pendulum::with_max_episode_steps", max_episode_steps)?,
            ..Self::new()
        })
    }

    /// The f64 state `[theta, theta_dot]`, `None` before the first reset.
    pub fn state(&self) -> Option<[f64; 2]> {
        self.state
    }

    /// Starts an episode from `state` instead of a random one (the generator is left
    /// alone); an error if a coordinate is not finite.
    pub fn reset_to_state(&mut self, state: [f64; 2]) -> Result<&[f32]> {
        check::finite("Pendulum::reset_to_state", "state", &state)?;
        Ok(self.begin_episode(state))
    }

    /// Steps taken in the current episode.
    pub fn elapsed_steps(&self) -> usize {
        self.time_limit.elapsed_steps
    }

    /// For the replay with the C library's trigonometry, which runs on x86-64 glibc only.
    #[cfg(all(test, target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
    pub(crate) fn with_trig(self, trig: Trig) -> Self {
        Self { trig, ..self }
    }

    fn begin_episode(&mut self, state: [f64; 2]) -> &[f32] {
        self.state = Some(state);
        self.time_limit.restart();
        self.observe(state);
        &self.observation
    }

    fn observe(&mut self, [theta, theta_dot]: [f64; 2]) {
        self.observation = [
            (self.trig.cos)(theta) as f32,
            (self.trig.sin)(theta) as f32,
            theta_dot as f32,
        ];
    }
}

impl Env for Pendulum {
    type Action = f32;

    fn observation_space(&self) -> &BoxSpace {
        &self.observation_space
    }

    fn action_space(&self) -> &ActionSpace {
        &self.action_space
    }

    fn max_episode_steps(&self) -> usize {
        self.time_limit.max_episode_steps
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<&[f32]> {
        let rng = reseed(&mut self.rng, "Pendulum::reset", seed)?;
        let state = RESET_HIGH.map(|high| rng.uniform(-high, high));
        Ok(self.begin_episode(state))
    }

    fn step(&mut self, action: &[f32]) -> Result<Step<'_>> {
        const FUNCTION: &str = "Pendulum::step";
        let [theta, theta_dot] = self.state.ok_or_else(|| not_reset(FUNCTION))?;
        f32::check(&self.action_space, FUNCTION, action)?;
        let u = action[0].clamp(-MAX_TORQUE, MAX_TORQUE);
        // NumPy (NEP 50) keeps `python_float * float32` in float32.
        let torque_cost = f64::from(0.001f64 as f32 * (u * u));
        let angle = angle_normalize(theta);
        let cost = angle * angle + 0.1 * (theta_dot * theta_dot) + torque_cost;
        let gravity_term = 3.0 * G / (2.0 * L) * (self.trig.sin)(theta);
        let torque_term = f64::from((3.0 / (M * L * L)) as f32 * u);
        let new_theta_dot =
            (theta_dot + (gravity_term + torque_term) * DT).clamp(-MAX_SPEED, MAX_SPEED);
        let state = [theta + new_theta_dot * DT, new_theta_dot];
        self.state = Some(state);
        self.observe(state);
        Ok(Step {
            observation: &self.observation,
            reward: -cost,
            terminated: false,
            truncated: self.time_limit.tick(),
        })
    }
}

/// The words of a Pendulum snapshot: the state (flag and 2), the elapsed steps and the
/// generator (flag, seed, draws).
const PENDULUM_SNAPSHOT_WORDS: usize = 3 + 1 + 3;

/// The state, the step counter and the generator's position.
impl Snapshot for Pendulum {
    fn snapshot(&self) -> Vec<u64> {
        let mut out = WordWriter::default();
        out.option(self.state);
        out.usize(self.time_limit.elapsed_steps);
        out.rng(self.rng.as_ref());
        out.finish()
    }

    fn restore(&mut self, snapshot: &[u64]) -> Result<()> {
        let mut words = WordReader::new(
            "Pendulum::restore",
            snapshot,
            PENDULUM_SNAPSHOT_WORDS,
            "a Pendulum",
        )?;
        let state = words.option::<2>()?;
        let elapsed_steps = words.usize()?;
        let rng = words.rng()?;
        self.state = state;
        match state {
            Some(state) => self.observe(state),
            None => self.observation = [0.0; 3],
        }
        self.time_limit.elapsed_steps = elapsed_steps;
        self.rng = rng;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remainder_follows_python() {
        assert_eq!(python_remainder(5.0, 3.0), 2.0);
        assert_eq!(python_remainder(-1.0, 3.0), 2.0);
        assert_eq!(python_remainder(1.0, -3.0), -2.0);
        assert_eq!(python_remainder(-6.0, 3.0).to_bits(), 0.0f64.to_bits());
        assert_eq!(python_remainder(6.0, -3.0).to_bits(), (-0.0f64).to_bits());
        assert_eq!(angle_normalize(0.0), 0.0);
        assert!((angle_normalize(3.0 * PI / 2.0) + PI / 2.0).abs() < 1e-15);
    }

    #[test]
    fn spaces_and_errors_are_gymnasiums() {
        let mut env = Pendulum::new();
        assert_eq!(env.observation_space().high(), [1.0, 1.0, 8.0]);
        assert_eq!(env.observation_space().low(), [-1.0, -1.0, -8.0]);
        assert_eq!(
            env.action_space(),
            &ActionSpace::Box(BoxSpace::new(vec![-2.0], vec![2.0]).unwrap())
        );
        assert_eq!(env.max_episode_steps(), 200);
        assert!(env.step(&[0.0]).is_err());
        assert!(env.reset(None).is_err());
        assert!(Pendulum::with_max_episode_steps(0).is_err());
        env.reset(Some(0)).unwrap();
        assert!(env.step(&[]).is_err());
        assert!(env.step(&[0.0, 0.0]).is_err());
        assert!(env.reset_to_state([f64::INFINITY, 0.0]).is_err());
        assert_eq!(env.elapsed_steps(), 0);
    }

    #[test]
    fn torque_is_clipped_and_nan_refused() {
        let mut pendulum = Pendulum::new();
        pendulum.reset_to_state([0.5, 0.25]).unwrap();
        let clipped = pendulum.clone().step(&[2.0]).unwrap().reward;
        for beyond in [2.5, 1e30, f32::INFINITY] {
            let mut other = pendulum.clone();
            assert_eq!(
                other.step(&[beyond]).unwrap().reward.to_bits(),
                clipped.to_bits()
            );
        }
        let before = pendulum.state();
        let err = pendulum.step(&[f32::NAN]).unwrap_err();
        assert_eq!(err.function(), "Pendulum::step");
        assert_eq!(pendulum.state(), before);
    }
}
