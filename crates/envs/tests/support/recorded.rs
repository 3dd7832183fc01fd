//! The trajectories recorded from Gymnasium by `scripts/record_gymnasium.py`
//! (`tests/data/*.json`), and the distances the replay tests measure.

// Each test target uses a different part of this module.
#![allow(dead_code)]

use std::path::Path;

use serde::Deserialize;
use serde::de::DeserializeOwned;

/// Reads `tests/data/<name>`.
pub fn load<T: DeserializeOwned>(name: &str) -> T {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()))
}

/// `rng.json`: raw outputs and `uniform(-0.05, 0.05)` draws of `np.random.default_rng(seed)`.
#[derive(Debug, Deserialize)]
pub struct RngFile {
    pub streams: Vec<RngStream>,
}

#[derive(Debug, Deserialize)]
pub struct RngStream {
    pub seed: u64,
    pub raw: Vec<u64>,
    pub uniform_pm005: Vec<f64>,
}

/// `resets.json`: the state and observation after `reset(seed=seed)`, then after a second
/// `reset()` without a seed.
#[derive(Debug, Deserialize)]
pub struct ResetFile {
    pub cases: Vec<ResetCase>,
}

#[derive(Debug, Deserialize)]
pub struct ResetCase {
    pub env: String,
    pub seed: u64,
    pub state: Vec<f64>,
    pub observation: Vec<f32>,
    pub next_reset_state: Vec<f64>,
    pub next_reset_observation: Vec<f32>,
}

/// `cartpole.json` (actions `usize`) and `pendulum.json` (actions `f32`).
#[derive(Debug, Deserialize)]
pub struct EpisodeFile<A> {
    pub max_episode_steps: usize,
    pub episodes: Vec<RecordedEpisode<A>>,
}

/// One episode: `reset(seed=seed)`, then for each action the state after the step (the
/// unwrapped environment's float64 state) and what `step` returned.
#[derive(Debug, Deserialize)]
pub struct RecordedEpisode<A> {
    pub seed: u64,
    pub reset_state: Vec<f64>,
    pub reset_observation: Vec<f32>,
    pub actions: Vec<A>,
    pub states: Vec<Vec<f64>>,
    pub observations: Vec<Vec<f32>>,
    pub rewards: Vec<f64>,
    pub terminated: Vec<bool>,
    pub truncated: Vec<bool>,
}

impl<A> RecordedEpisode<A> {
    /// The state before step `t`.
    pub fn state_before(&self, t: usize) -> &[f64] {
        if t == 0 {
            &self.reset_state
        } else {
            &self.states[t - 1]
        }
    }
}

/// `vector.json`: `SyncVectorEnv` runs in `AutoresetMode.SAME_STEP`.
#[derive(Debug, Deserialize)]
pub struct VectorFile {
    pub runs: Vec<VectorRun>,
}

/// Per step `t`: `[B]` actions (integers for CartPole, f32 torques for Pendulum), `[B]`
/// observation rows, rewards and flags, and the final observations of the rows that ended.
#[derive(Debug, Deserialize)]
pub struct VectorRun {
    pub env: String,
    pub num_envs: usize,
    pub seed: u64,
    pub reset_observations: Vec<Vec<f32>>,
    pub actions: Vec<Vec<f64>>,
    pub observations: Vec<Vec<Vec<f32>>>,
    pub rewards: Vec<Vec<f64>>,
    pub terminated: Vec<Vec<bool>>,
    pub truncated: Vec<Vec<bool>>,
    pub final_observations: Vec<Vec<FinalObservation>>,
}

#[derive(Debug, Deserialize)]
pub struct FinalObservation {
    pub env: usize,
    pub observation: Vec<f32>,
}

/// How many representable f64 lie between `a` and `b` (0 when the bits are equal).
pub fn ulps_f64(a: f64, b: f64) -> u64 {
    let ordered = |x: f64| {
        let bits = x.to_bits() as i64;
        if bits < 0 { i64::MIN - bits } else { bits }
    };
    ordered(a).abs_diff(ordered(b))
}

/// How many representable f32 lie between `a` and `b`.
pub fn ulps_f32(a: f32, b: f32) -> u64 {
    let ordered = |x: f32| {
        let bits = x.to_bits() as i32;
        i64::from(if bits < 0 { i32::MIN - bits } else { bits })
    };
    ordered(a).abs_diff(ordered(b))
}
