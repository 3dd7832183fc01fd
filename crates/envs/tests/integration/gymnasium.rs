//! The environments against trajectories recorded from Gymnasium 1.4.0 / NumPy 2.4.6
//! (`scripts/record_gymnasium.py`, data in `tests/data/`), with the portable `libm`
//! sine and cosine that the environments use.
//!
//! Bit-exact: NumPy's generator, every reset, every CartPole step (from the seed and from
//! each recorded state), Pendulum's observations and flags, and both vector runs.
//! Within a tolerance, with the worst difference printed (`--nocapture`): Pendulum's f64
//! states, where `libm`'s sine differs from the C library's, and its rewards, where
//! NumPy's `x**2` is the C library's `pow`.

#[path = "../support/recorded.rs"]
mod recorded;

use recorded::{
    EpisodeFile, RecordedEpisode, ResetFile, RngFile, VectorFile, VectorRun, load, ulps_f64,
};
use rlgrad_envs::{CartPole, CartPoleNoVelocity, Env, NumpyRng, Pendulum, VecEnv};

/// Pendulum rewards may differ by one f32 ulp of the torque cost `0.001 u^2` (at most
/// `0.001 * 4 * 2^-22 < 1e-9`, where glibc's `powf(u, 2)` is not `u * u`), plus f64 ulps
/// of the cost, plus what a state that drifted by a few ulps changes.
const REWARD_TOLERANCE: f64 = 1e-9;

/// Pendulum states replayed over a whole episode drift from Gymnasium's where a `libm`
/// sine differs from glibc's in the last bit; the drift stays far below f32 resolution.
const STATE_TOLERANCE: f64 = 1e-9;

fn bits64(values: &[f64]) -> Vec<u64> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn bits32(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn max_abs_diff(a: &[f64], b: &[f64]) -> f64 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn numpy_rng_reproduces_recorded_streams() {
    let file: RngFile = load("rng.json");
    assert!(file.streams.iter().any(|s| s.seed > u64::from(u32::MAX)));
    for stream in &file.streams {
        let mut rng = NumpyRng::new(stream.seed);
        let raw: Vec<u64> = stream.raw.iter().map(|_| rng.next_u64()).collect();
        assert_eq!(raw, stream.raw, "seed {}", stream.seed);
        let mut rng = NumpyRng::new(stream.seed);
        let uniform: Vec<f64> = stream
            .uniform_pm005
            .iter()
            .map(|_| rng.uniform(-0.05, 0.05))
            .collect();
        assert_eq!(bits64(&uniform), bits64(&stream.uniform_pm005));
    }
}

/// `reset(Some(seed))` and the `reset(None)` after it, against Gymnasium's.
fn check_resets<E: Env>(mut env: E, state: impl Fn(&E) -> Vec<f64>, env_id: &str) -> usize {
    let file: ResetFile = load("resets.json");
    let cases: Vec<_> = file.cases.iter().filter(|c| c.env == env_id).collect();
    for case in &cases {
        let at = format!("{env_id} seed {}", case.seed);
        let observation = env.reset(Some(case.seed)).unwrap();
        assert_eq!(bits32(observation), bits32(&case.observation), "{at}");
        assert_eq!(bits64(&state(&env)), bits64(&case.state), "{at}");
        let observation = env.reset(None).unwrap();
        assert_eq!(
            bits32(observation),
            bits32(&case.next_reset_observation),
            "{at}"
        );
        assert_eq!(bits64(&state(&env)), bits64(&case.next_reset_state), "{at}");
    }
    cases.len()
}

#[test]
fn resets_reproduce_gymnasium_initial_states() {
    let cartpole = check_resets(
        CartPole::new(),
        |e| e.state().unwrap().to_vec(),
        "CartPole-v1",
    );
    let pendulum = check_resets(
        Pendulum::new(),
        |e| e.state().unwrap().to_vec(),
        "Pendulum-v1",
    );
    assert_eq!((cartpole, pendulum), (69, 69));
}

fn recorded_state<const N: usize>(episode: &RecordedEpisode<impl Sized>, t: usize) -> [f64; N] {
    episode
        .state_before(t)
        .try_into()
        .expect("recorded state length")
}

#[test]
fn cartpole_episodes_replay_bit_exact_from_the_seed() {
    let file: EpisodeFile<usize> = load("cartpole.json");
    let ends = |flags: &[bool]| flags.iter().any(|&f| f);
    assert!(file.episodes.iter().any(|e| ends(&e.truncated)));
    assert!(file.episodes.iter().any(|e| ends(&e.terminated)));
    for episode in &file.episodes {
        let mut env = CartPole::with_max_episode_steps(file.max_episode_steps).unwrap();
        let mut hidden = CartPoleNoVelocity::new();
        let observation = env.reset(Some(episode.seed)).unwrap();
        assert_eq!(bits32(observation), bits32(&episode.reset_observation));
        hidden.reset(Some(episode.seed)).unwrap();
        for (t, &action) in episode.actions.iter().enumerate() {
            let at = format!("seed {} step {t}", episode.seed);
            let step = env.step(&[action]).unwrap();
            let recorded = &episode.observations[t];
            assert_eq!(bits32(step.observation), bits32(recorded), "{at}");
            assert_eq!(step.reward.to_bits(), episode.rewards[t].to_bits(), "{at}");
            assert_eq!(step.terminated, episode.terminated[t], "{at}");
            assert_eq!(step.truncated, episode.truncated[t], "{at}");
            let outcome = (step.reward, step.terminated, step.truncated);
            assert_eq!(
                bits64(&env.state().unwrap()),
                bits64(&episode.states[t]),
                "{at}"
            );
            let partial = hidden.step(&[action]).unwrap();
            assert_eq!(
                bits32(partial.observation),
                bits32(&[recorded[0], recorded[2]])
            );
            assert_eq!(
                (partial.reward, partial.terminated, partial.truncated),
                outcome
            );
        }
    }
}

#[test]
fn cartpole_steps_from_recorded_states_are_bit_exact() {
    let file: EpisodeFile<usize> = load("cartpole.json");
    for episode in &file.episodes {
        for (t, &action) in episode.actions.iter().enumerate() {
            let at = format!("seed {} step {t}", episode.seed);
            let mut env = CartPole::new();
            env.reset_to_state(recorded_state(episode, t)).unwrap();
            let step = env.step(&[action]).unwrap();
            assert_eq!(
                bits32(step.observation),
                bits32(&episode.observations[t]),
                "{at}"
            );
            assert_eq!(step.terminated, episode.terminated[t], "{at}");
            assert_eq!(
                bits64(&env.state().unwrap()),
                bits64(&episode.states[t]),
                "{at}"
            );
        }
    }
}

#[test]
fn pendulum_steps_from_recorded_states() {
    let file: EpisodeFile<f32> = load("pendulum.json");
    let (mut steps, mut states_off, mut worst_state_ulps, mut worst_reward) = (0, 0, 0, 0.0f64);
    for episode in &file.episodes {
        for (t, &action) in episode.actions.iter().enumerate() {
            let at = format!("seed {} step {t}", episode.seed);
            let mut env = Pendulum::new();
            env.reset_to_state(recorded_state(episode, t)).unwrap();
            let step = env.step(&[action]).unwrap();
            assert_eq!(
                bits32(step.observation),
                bits32(&episode.observations[t]),
                "{at}"
            );
            assert!(!step.terminated);
            worst_reward = worst_reward.max((step.reward - episode.rewards[t]).abs());
            let state = env.state().unwrap();
            let ulps = (0..2)
                .map(|i| ulps_f64(state[i], episode.states[t][i]))
                .max()
                .unwrap();
            states_off += usize::from(ulps > 0);
            worst_state_ulps = worst_state_ulps.max(ulps);
            steps += 1;
        }
    }
    println!(
        "Pendulum, one step from each of {steps} recorded states: {states_off} next states \
         differ (worst {worst_state_ulps} ulp), worst reward difference {worst_reward:e}"
    );
    assert!(worst_state_ulps <= 1, "{worst_state_ulps} ulps");
    assert!(worst_reward <= REWARD_TOLERANCE, "{worst_reward:e}");
}

#[test]
fn pendulum_episodes_replay_from_the_seed() {
    let file: EpisodeFile<f32> = load("pendulum.json");
    let (mut worst_state, mut worst_reward) = (0.0f64, 0.0f64);
    for episode in &file.episodes {
        let mut env = Pendulum::with_max_episode_steps(file.max_episode_steps).unwrap();
        let observation = env.reset(Some(episode.seed)).unwrap();
        assert_eq!(bits32(observation), bits32(&episode.reset_observation));
        for (t, &action) in episode.actions.iter().enumerate() {
            let at = format!("seed {} step {t}", episode.seed);
            let step = env.step(&[action]).unwrap();
            assert_eq!(
                bits32(step.observation),
                bits32(&episode.observations[t]),
                "{at}"
            );
            assert_eq!(step.truncated, episode.truncated[t], "{at}");
            assert!(!step.terminated);
            worst_reward = worst_reward.max((step.reward - episode.rewards[t]).abs());
            worst_state = worst_state.max(max_abs_diff(&env.state().unwrap(), &episode.states[t]));
        }
    }
    println!(
        "Pendulum episodes from the seed: worst state difference {worst_state:e}, worst \
         reward difference {worst_reward:e}; observations bit-exact"
    );
    assert!(worst_state <= STATE_TOLERANCE, "{worst_state:e}");
    assert!(worst_reward <= REWARD_TOLERANCE, "{worst_reward:e}");
}

/// Replays a `SyncVectorEnv` run (same-step autoreset) through `VecEnv`: observations,
/// final observations, flags and f32 rewards bit-exact, and the finished episodes'
/// lengths and returns those of the recorded rewards (returns within the reward tolerance
/// per step).
fn check_vector_run<E: Env>(
    mut envs: VecEnv<E>,
    run: &VectorRun,
    action: impl Fn(f64) -> E::Action,
) -> usize {
    let obs_dim = envs.single_observation_space().dim();
    let observations = envs.reset(Some(run.seed)).unwrap();
    assert_eq!(
        bits32(observations),
        bits32(&run.reset_observations.concat())
    );
    let mut returns = vec![0.0f64; run.num_envs];
    let mut lengths = vec![0usize; run.num_envs];
    let mut episodes = 0;
    for t in 0..run.actions.len() {
        let at = format!("{} step {t}", run.env);
        let actions: Vec<E::Action> = run.actions[t].iter().map(|&a| action(a)).collect();
        let step = envs.step(&actions).unwrap();
        assert_eq!(
            bits32(step.observations),
            bits32(&run.observations[t].concat()),
            "{at}"
        );
        assert_eq!(step.terminated, &run.terminated[t][..], "{at}");
        assert_eq!(step.truncated, &run.truncated[t][..], "{at}");
        let rewards: Vec<f32> = run.rewards[t].iter().map(|&r| r as f32).collect();
        assert_eq!(bits32(step.rewards), bits32(&rewards), "{at}");
        let ended: Vec<usize> = run.final_observations[t].iter().map(|f| f.env).collect();
        let finished: Vec<usize> = step.finished.iter().map(|e| e.env).collect();
        assert_eq!(finished, ended, "{at}");
        for (last, episode) in run.final_observations[t].iter().zip(step.finished) {
            let row = &step.final_observations[last.env * obs_dim..(last.env + 1) * obs_dim];
            assert_eq!(bits32(row), bits32(&last.observation), "{at}");
            let i = last.env;
            returns[i] += run.rewards[t][i];
            lengths[i] += 1;
            assert_eq!(episode.length, lengths[i], "{at}");
            let tolerance = episode.length as f64 * REWARD_TOLERANCE;
            assert!(
                (episode.episode_return - returns[i]).abs() <= tolerance,
                "{at}"
            );
            assert_eq!(episode.terminated, run.terminated[t][i], "{at}");
            (returns[i], lengths[i]) = (0.0, 0);
        }
        for i in (0..run.num_envs).filter(|i| !ended.contains(i)) {
            returns[i] += run.rewards[t][i];
            lengths[i] += 1;
            let row = i * obs_dim..(i + 1) * obs_dim;
            assert_eq!(step.final_observations[row.clone()], step.observations[row]);
        }
        episodes += step.finished.len();
    }
    assert_eq!(envs.episodes_finished(), episodes as u64);
    episodes
}

#[test]
fn vector_env_reproduces_sync_vector_env_with_same_step_autoreset() {
    let file: VectorFile = load("vector.json");
    for run in &file.runs {
        let episodes = match run.env.as_str() {
            "CartPole-v1" => {
                let envs = VecEnv::from_fn(run.num_envs, CartPole::new).unwrap();
                check_vector_run(envs, run, |a| a as usize)
            }
            "Pendulum-v1" => {
                let envs = VecEnv::from_fn(run.num_envs, Pendulum::new).unwrap();
                check_vector_run(envs, run, |a| a as f32)
            }
            other => panic!("unknown environment {other}"),
        };
        assert!(episodes >= run.num_envs, "{}: {episodes} episodes", run.env);
    }
}
