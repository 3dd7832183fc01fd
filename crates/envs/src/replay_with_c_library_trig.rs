//! Replays the recorded Gymnasium trajectories with the C library's `sin` and `cos` (the
//! ones NumPy calls) in place of `libm`'s: then states, observations and flags agree bit
//! for bit, which shows that every other operation is Gymnasium's, in its order and
//! precision. Recorded on x86-64 glibc, so checked there only. Pendulum's rewards still
//! differ where glibc's `pow(x, 2)` is not `x * x` (see the crate docs); the integration
//! tests bound that.

#![cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]

use crate::recorded::{EpisodeFile, VectorFile, load};
use crate::{CartPole, Env, Pendulum, Trig, VecEnv};

const C_LIBRARY: Trig = Trig {
    sin: f64::sin,
    cos: f64::cos,
};

fn bits64(values: &[f64]) -> Vec<u64> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn bits32(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn cartpole_episodes_are_bit_exact() {
    let file: EpisodeFile<usize> = load("cartpole.json");
    for episode in &file.episodes {
        let mut env = CartPole::new().with_trig(C_LIBRARY);
        let observation = env.reset(Some(episode.seed)).unwrap();
        assert_eq!(bits32(observation), bits32(&episode.reset_observation));
        for (t, &action) in episode.actions.iter().enumerate() {
            let step = env.step(&[action]).unwrap();
            let at = format!("seed {} step {t}", episode.seed);
            assert_eq!(
                bits32(step.observation),
                bits32(&episode.observations[t]),
                "{at}"
            );
            assert_eq!(step.reward.to_bits(), episode.rewards[t].to_bits(), "{at}");
            assert_eq!(step.terminated, episode.terminated[t], "{at}");
            assert_eq!(step.truncated, episode.truncated[t], "{at}");
            assert_eq!(
                bits64(&env.state().unwrap()),
                bits64(&episode.states[t]),
                "{at}"
            );
        }
    }
}

#[test]
fn pendulum_states_observations_and_flags_are_bit_exact() {
    let file: EpisodeFile<f32> = load("pendulum.json");
    for episode in &file.episodes {
        let mut env = Pendulum::new().with_trig(C_LIBRARY);
        let observation = env.reset(Some(episode.seed)).unwrap();
        assert_eq!(bits32(observation), bits32(&episode.reset_observation));
        for (t, &action) in episode.actions.iter().enumerate() {
            let step = env.step(&[action]).unwrap();
            let at = format!("seed {} step {t}", episode.seed);
            assert_eq!(
                bits32(step.observation),
                bits32(&episode.observations[t]),
                "{at}"
            );
            assert_eq!(step.truncated, episode.truncated[t], "{at}");
            assert!(!step.terminated);
            assert_eq!(
                bits64(&env.state().unwrap()),
                bits64(&episode.states[t]),
                "{at}"
            );
        }
    }
}

#[test]
fn vector_runs_are_bit_exact() {
    let file: VectorFile = load("vector.json");
    for run in &file.runs {
        match run.env.as_str() {
            "CartPole-v1" => {
                let envs = VecEnv::from_fn(run.num_envs, || CartPole::new().with_trig(C_LIBRARY));
                let actions = |row: &[f64]| row.iter().map(|&a| a as usize).collect::<Vec<_>>();
                compare_vector_run(envs.unwrap(), run, actions, true);
            }
            "Pendulum-v1" => {
                let envs = VecEnv::from_fn(run.num_envs, || Pendulum::new().with_trig(C_LIBRARY));
                let actions = |row: &[f64]| row.iter().map(|&a| a as f32).collect::<Vec<_>>();
                compare_vector_run(envs.unwrap(), run, actions, false);
            }
            other => panic!("unknown environment {other}"),
        }
    }
}

fn compare_vector_run<E: Env>(
    mut envs: VecEnv<E>,
    run: &crate::recorded::VectorRun,
    actions: impl Fn(&[f64]) -> Vec<E::Action>,
    exact_rewards: bool,
) {
    let obs_dim = envs.single_observation_space().dim();
    let observations = envs.reset(Some(run.seed)).unwrap();
    assert_eq!(
        bits32(observations),
        bits32(&run.reset_observations.concat())
    );
    for t in 0..run.actions.len() {
        let step = envs.step(&actions(&run.actions[t])).unwrap();
        let at = format!("{} step {t}", run.env);
        assert_eq!(
            bits32(step.observations),
            bits32(&run.observations[t].concat()),
            "{at}"
        );
        assert_eq!(step.terminated, &run.terminated[t][..], "{at}");
        assert_eq!(step.truncated, &run.truncated[t][..], "{at}");
        if exact_rewards {
            let expected: Vec<f32> = run.rewards[t].iter().map(|&r| r as f32).collect();
            assert_eq!(step.rewards, &expected[..], "{at}");
        }
        for last in &run.final_observations[t] {
            let row = &step.final_observations[last.env * obs_dim..(last.env + 1) * obs_dim];
            assert_eq!(bits32(row), bits32(&last.observation), "{at}");
        }
    }
}
