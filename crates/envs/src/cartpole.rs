//! CartPole-v1, and the partially observed CartPole that hides the velocities.

use std::f64::consts::PI;

use rlgrad_core::{Result, check};

use crate::seeding::{NumpyRng, reseed};
use crate::snapshot::{Snapshot, WordReader, WordWriter};
use crate::space::{ActionElement, ActionSpace, BoxSpace, Discrete};
use crate::{Env, Step, TimeLimit, Trig, not_reset};

const GRAVITY: f64 = 9.8;
const MASS_CART: f64 = 1.0;
const MASS_POLE: f64 = 0.1;
const TOTAL_MASS: f64 = MASS_POLE + MASS_CART;
/// Half the pole's length.
const LENGTH: f64 = 0.5;
const POLEMASS_LENGTH: f64 = MASS_POLE * LENGTH;
const FORCE_MAG: f64 = 10.0;
/// Seconds between state updates.
const TAU: f64 = 0.02;
/// 12 degrees, written as Gymnasium writes it so that the f64 is the same.
const THETA_THRESHOLD: f64 = 12.0 * 2.0 * PI / 360.0;
const X_THRESHOLD: f64 = 2.4;
/// Reset states are uniform in `[-RESET_BOUND, RESET_BOUND)`.
const RESET_BOUND: f64 = 0.05;

/// One Euler step of Gymnasium's cart-pole equations, in Gymnasium's order of operations
/// (state `[x, x_dot, theta, theta_dot]`, `push_right` is action 1):
///
/// ```text
/// temp     = (force + polemass_length * theta_dot^2 * sin) / total_mass
/// thetaacc = (g * sin - cos * temp) / (length * (4/3 - masspole * cos^2 / total_mass))
/// xacc     = temp - polemass_length * thetaacc * cos / total_mass
/// x' = x + tau x_dot,  x_dot' = x_dot + tau xacc,  theta' = theta + tau theta_dot,
/// theta_dot' = theta_dot + tau thetaacc
/// ```
fn dynamics(state: [f64; 4], push_right: bool, trig: Trig) -> [f64; 4] {
    let [x, x_dot, theta, theta_dot] = state;
    let force = if push_right { FORCE_MAG } else { -FORCE_MAG };
    let costheta = (trig.cos)(theta);
    let sintheta = (trig.sin)(theta);
    let temp = (force + POLEMASS_LENGTH * (theta_dot * theta_dot) * sintheta) / TOTAL_MASS;
    let thetaacc = (GRAVITY * sintheta - costheta * temp)
        / (LENGTH * (4.0 / 3.0 - MASS_POLE * (costheta * costheta) / TOTAL_MASS));
    let xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS;
    [
        x + TAU * x_dot,
        x_dot + TAU * xacc,
        theta + TAU * theta_dot,
        theta_dot + TAU * thetaacc,
    ]
}

/// Gymnasium's four comparisons: unlike `RangeInclusive::contains`, a NaN is not terminal.
#[allow(clippy::manual_range_contains)]
fn is_terminal(state: &[f64; 4]) -> bool {
    let [x, _, theta, _] = *state;
    x < -X_THRESHOLD || x > X_THRESHOLD || theta < -THETA_THRESHOLD || theta > THETA_THRESHOLD
}

/// Gymnasium's `CartPole-v1`: push a cart left (action 0) or right (action 1) to keep
/// its pole upright.
///
/// - Observation `[x, x_dot, theta, theta_dot]` (f32, the f64 state rounded), space
///   `Box([-4.8, -inf, -0.41887903, -inf], [4.8, inf, 0.41887903, inf])`; action space
///   `Discrete(2)`, an action is `&[0]` or `&[1]`.
/// - Reset: each state coordinate uniform in `[-0.05, 0.05)` from NumPy's generator,
///   so `reset(Some(seed))` gives Gymnasium's initial state for the same seed.
/// - Reward 1 for every step, the terminating one included. Terminated when `|x| > 2.4`
///   or `|theta| > 12 degrees`; truncated from the 500th step of the episode on (both
///   can hold at once).
/// - Stepping on after termination works as in Gymnasium: the first such step logs a
///   warning (`log::warn!`), every such step has reward 0, the state keeps moving.
///
/// The state is f64 throughout, in Gymnasium's order of operations; sine and cosine come
/// from the portable `libm` crate (the crate docs measure what that changes).
#[derive(Debug, Clone)]
pub struct CartPole {
    state: Option<[f64; 4]>,
    observation: [f32; 4],
    rng: Option<NumpyRng>,
    time_limit: TimeLimit,
    steps_beyond_terminated: Option<u64>,
    observation_space: BoxSpace,
    action_space: ActionSpace,
    trig: Trig,
}

impl Default for CartPole {
    fn default() -> Self {
        Self::new()
    }
}

impl CartPole {
    /// `CartPole-v1`: truncated at 500 steps, not reset yet.
    pub fn new() -> Self {
        let high = [
            (X_THRESHOLD * 2.0) as f32,
            f32::INFINITY,
            (THETA_THRESHOLD * 2.0) as f32,
            f32::INFINITY,
        ];
        Self {
            state: None,
            observation: [0.0; 4],
            rng: None,
            time_limit: TimeLimit::new(500),
            steps_beyond_terminated: None,
            observation_space: BoxSpace::symmetric(&high),
            action_space: ActionSpace::Discrete(Discrete::new(2).expect("2 actions")),
            trig: Trig::PORTABLE,
        }
    }

    /// CartPole with another step limit (`gym.make("CartPole-v1", max_episode_steps=n)`);
    /// an error for 0.
    pub fn with_max_episode_steps(max_episode_steps: usize) -> Result<Self> {
        Ok(Self {
            time_limit: TimeLimit::checked("CartPole::with_max_episode_steps", max_episode_steps)?,
            ..Self::new()
        })
    }

    /// The f64 state `[x, x_dot, theta, theta_dot]`, `None` before the first reset.
    pub fn state(&self) -> Option<[f64; 4]> {
        self.state
    }

    /// Starts an episode from `state` instead of a random one (the generator is left
    /// alone); an error if a coordinate is not finite.
    pub fn reset_to_state(&mut self, state: [f64; 4]) -> Result<&[f32]> {
        check::finite("CartPole::reset_to_state", "state", &state)?;
        Ok(self.begin_episode(state))
    }

    /// Steps taken since the episode terminated: `None` while it has not, then 0, 1, ...
    pub fn steps_beyond_terminated(&self) -> Option<u64> {
        self.steps_beyond_terminated
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

    fn begin_episode(&mut self, state: [f64; 4]) -> &[f32] {
        self.state = Some(state);
        self.steps_beyond_terminated = None;
        self.time_limit.restart();
        self.observation = state.map(|v| v as f32);
        &self.observation
    }
}

impl Env for CartPole {
    type Action = usize;

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
        self.reset_named("CartPole::reset", seed)
    }

    fn step(&mut self, action: &[usize]) -> Result<Step<'_>> {
        self.step_named("CartPole::step", action)
    }
}

/// The work of `reset` and `step`, with the public function to name in errors.
impl CartPole {
    fn reset_named(&mut self, function: &'static str, seed: Option<u64>) -> Result<&[f32]> {
        let rng = reseed(&mut self.rng, function, seed)?;
        let state = std::array::from_fn(|_| rng.uniform(-RESET_BOUND, RESET_BOUND));
        Ok(self.begin_episode(state))
    }

    fn step_named(&mut self, function: &'static str, action: &[usize]) -> Result<Step<'_>> {
        let state = self.state.ok_or_else(|| not_reset(function))?;
        usize::check(&self.action_space, function, action)?;
        let state = dynamics(state, action[0] == 1, self.trig);
        self.state = Some(state);
        let terminated = is_terminal(&state);
        let reward = match (terminated, self.steps_beyond_terminated) {
            (false, _) => 1.0,
            (true, None) => {
                self.steps_beyond_terminated = Some(0);
                1.0
            }
            (true, Some(beyond)) => {
                if beyond == 0 {
                    log::warn!(
                        "CartPole::step called after the episode terminated; reset once a \
                         step returns terminated = true (further steps have reward 0)"
                    );
                }
                self.steps_beyond_terminated = Some(beyond + 1);
                0.0
            }
        };
        let truncated = self.time_limit.tick();
        self.observation = state.map(|v| v as f32);
        Ok(Step {
            observation: &self.observation,
            reward,
            terminated,
            truncated,
        })
    }
}

/// The words of a CartPole snapshot: the state (flag and 4), the elapsed steps, the steps
/// beyond termination (flag and count) and the generator (flag, seed, draws).
const CARTPOLE_SNAPSHOT_WORDS: usize = 5 + 1 + 2 + 3;

/// The state, the step counters and the generator's position.
impl Snapshot for CartPole {
    fn snapshot(&self) -> Vec<u64> {
        let mut out = WordWriter::default();
        out.option(self.state);
        out.usize(self.time_limit.elapsed_steps);
        out.flag(self.steps_beyond_terminated.is_some());
        out.word(self.steps_beyond_terminated.unwrap_or(0));
        out.rng(self.rng.as_ref());
        out.finish()
    }

    fn restore(&mut self, snapshot: &[u64]) -> Result<()> {
        self.restore_named("CartPole::restore", snapshot)
    }
}

impl CartPole {
    fn restore_named(&mut self, function: &'static str, snapshot: &[u64]) -> Result<()> {
        let mut words = WordReader::new(function, snapshot, CARTPOLE_SNAPSHOT_WORDS, "a CartPole")?;
        let state = words.option::<4>()?;
        let elapsed_steps = words.usize()?;
        let beyond_terminated = words.flag()?;
        let beyond = words.word();
        let rng = words.rng()?;
        self.state = state;
        self.observation = state.map_or([0.0; 4], |s| s.map(|v| v as f32));
        self.time_limit.elapsed_steps = elapsed_steps;
        self.steps_beyond_terminated = beyond_terminated.then_some(beyond);
        self.rng = rng;
        Ok(())
    }
}

/// CartPole-v1 without the velocities: the observation is `[x, theta]`, so a policy has
/// to infer motion from its history (RL Zoo's `CartPoleNoVel-v1`). Dynamics, rewards,
/// seeding and episode ends are [`CartPole`]'s, bit for bit.
#[derive(Debug, Clone)]
pub struct CartPoleNoVelocity {
    cartpole: CartPole,
    observation: [f32; 2],
    observation_space: BoxSpace,
}

impl Default for CartPoleNoVelocity {
    fn default() -> Self {
        Self::new()
    }
}

impl CartPoleNoVelocity {
    /// Truncated at 500 steps, not reset yet.
    pub fn new() -> Self {
        Self::around(CartPole::new())
    }

    /// Another step limit; an error for 0.
    pub fn with_max_episode_steps(max_episode_steps: usize) -> Result<Self> {
        let function = "CartPoleNoVelocity::with_max_episode_steps";
        Ok(Self::around(CartPole {
            time_limit: TimeLimit::checked(function, max_episode_steps)?,
            ..CartPole::new()
        }))
    }

    fn around(cartpole: CartPole) -> Self {
        let high = cartpole.observation_space.high();
        let observation_space = BoxSpace::symmetric(&[high[0], high[2]]);
        Self {
            cartpole,
            observation: [0.0; 2],
            observation_space,
        }
    }

    /// The full CartPole underneath (its state has the velocities).
    pub fn cartpole(&self) -> &CartPole {
        &self.cartpole
    }

    /// Starts an episode from a full `[x, x_dot, theta, theta_dot]` state.
    pub fn reset_to_state(&mut self, state: [f64; 4]) -> Result<&[f32]> {
        check::finite("CartPoleNoVelocity::reset_to_state", "state", &state)?;
        self.cartpole.begin_episode(state);
        Ok(self.hide_velocities())
    }

    fn hide_velocities(&mut self) -> &[f32] {
        let full = &self.cartpole.observation;
        self.observation = [full[0], full[2]];
        &self.observation
    }
}

impl Env for CartPoleNoVelocity {
    type Action = usize;

    fn observation_space(&self) -> &BoxSpace {
        &self.observation_space
    }

    fn action_space(&self) -> &ActionSpace {
        self.cartpole.action_space()
    }

    fn max_episode_steps(&self) -> usize {
        self.cartpole.max_episode_steps()
    }

    fn reset(&mut self, seed: Option<u64>) -> Result<&[f32]> {
        self.cartpole
            .reset_named("CartPoleNoVelocity::reset", seed)?;
        Ok(self.hide_velocities())
    }

    fn step(&mut self, action: &[usize]) -> Result<Step<'_>> {
        let step = self
            .cartpole
            .step_named("CartPoleNoVelocity::step", action)?;
        let (reward, terminated, truncated) = (step.reward, step.terminated, step.truncated);
        Ok(Step {
            observation: self.hide_velocities(),
            reward,
            terminated,
            truncated,
        })
    }
}

/// A CartPole's snapshot: the observation follows from the state.
impl Snapshot for CartPoleNoVelocity {
    fn snapshot(&self) -> Vec<u64> {
        self.cartpole.snapshot()
    }

    fn restore(&mut self, snapshot: &[u64]) -> Result<()> {
        self.cartpole
            .restore_named("CartPoleNoVelocity::restore", snapshot)?;
        self.hide_velocities();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;

    thread_local! {
        static WARNINGS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    }

    /// Collects each test thread's warnings, so that parallel tests do not mix them.
    struct ThreadLogger;

    impl log::Log for ThreadLogger {
        fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
            metadata.level() <= log::Level::Warn
        }
        fn log(&self, record: &log::Record<'_>) {
            WARNINGS.with(|w| w.borrow_mut().push(record.args().to_string()));
        }
        fn flush(&self) {}
    }

    /// Pushes right from `seed`'s initial state until the pole falls; the step count.
    fn steps_to_fall(seed: u64) -> usize {
        let mut env = CartPole::new();
        env.reset(Some(seed)).unwrap();
        (1..).find(|_| env.step(&[1]).unwrap().terminated).unwrap()
    }

    #[test]
    fn steps_after_termination_pay_zero_and_warn_once() {
        static LOGGER: ThreadLogger = ThreadLogger;
        log::set_logger(&LOGGER).expect("no other test of this binary sets a logger");
        log::set_max_level(log::LevelFilter::Warn);
        let fall = steps_to_fall(5);
        let mut env = CartPole::new();
        env.reset(Some(5)).unwrap();
        let rewards: Vec<f64> = (0..fall + 3)
            .map(|_| env.step(&[1]).unwrap().reward)
            .collect();
        assert_eq!(rewards[..fall], vec![1.0; fall][..]);
        assert_eq!(rewards[fall..], [0.0; 3]);
        assert_eq!(env.steps_beyond_terminated(), Some(3));
        let warnings = WARNINGS.with(|w| w.borrow().clone());
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("after the episode terminated"));
        env.reset(None).unwrap();
        assert_eq!(env.steps_beyond_terminated(), None);
        assert_eq!(env.elapsed_steps(), 0);
    }

    #[test]
    fn truncation_and_termination_can_coincide_and_truncation_persists() {
        let fall = steps_to_fall(9);
        let mut env = CartPole::with_max_episode_steps(fall).unwrap();
        env.reset(Some(9)).unwrap();
        for _ in 1..fall {
            let step = env.step(&[1]).unwrap();
            assert!(!step.terminated && !step.truncated);
        }
        let last = env.step(&[1]).unwrap();
        assert!(last.terminated && last.truncated);
        assert!(env.step(&[1]).unwrap().truncated);
        assert_eq!(env.max_episode_steps(), fall);
    }

    #[test]
    fn bad_input_is_an_error_and_changes_nothing() {
        let mut env = CartPole::new();
        let err = env.step(&[0]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "CartPole::step: argument `self` is invalid: expected an environment that was \
             reset before its first step, got no reset yet"
        );
        assert_eq!(env.reset(None).unwrap_err().argument(), Some("seed"));
        env.reset(Some(1)).unwrap();
        let before = (env.state(), env.elapsed_steps());
        assert_eq!(env.step(&[2]).unwrap_err().argument(), Some("action"));
        assert!(env.step(&[]).is_err());
        assert!(env.step(&[0, 1]).is_err());
        assert!(env.reset_to_state([0.0, f64::NAN, 0.0, 0.0]).is_err());
        assert_eq!((env.state(), env.elapsed_steps()), before);
        assert!(CartPole::with_max_episode_steps(0).is_err());
        assert!(CartPoleNoVelocity::with_max_episode_steps(0).is_err());
        let mut hidden = CartPoleNoVelocity::new();
        assert_eq!(
            hidden.step(&[0]).unwrap_err().function(),
            "CartPoleNoVelocity::step"
        );
    }

    #[test]
    fn spaces_are_gymnasiums() {
        let env = CartPole::new();
        let high = env.observation_space().high();
        assert_eq!(high, [4.8, f32::INFINITY, 0.41887903, f32::INFINITY]);
        assert_eq!(env.observation_space().low()[2], -0.41887903);
        assert_eq!(
            env.action_space(),
            &ActionSpace::Discrete(Discrete::new(2).unwrap())
        );
        assert_eq!(env.max_episode_steps(), 500);
        let hidden = CartPoleNoVelocity::new();
        assert_eq!(hidden.observation_space().high(), [4.8, 0.41887903]);
        assert_eq!(hidden.observation_space().low(), [-4.8, -0.41887903]);
    }

    #[test]
    fn hidden_velocities_follow_the_full_state() {
        let mut hidden = CartPoleNoVelocity::new();
        let observation = hidden.reset_to_state([0.5, 1.0, -0.1, 2.0]).unwrap();
        assert_eq!(observation, [0.5, -0.1]);
        hidden.step(&[0]).unwrap();
        let state = hidden.cartpole().state().unwrap();
        let observation = hidden.reset(Some(3)).unwrap().to_vec();
        assert_ne!(state, hidden.cartpole().state().unwrap());
        let full = hidden.cartpole().state().unwrap();
        assert_eq!(observation, [full[0] as f32, full[2] as f32]);
    }
}
