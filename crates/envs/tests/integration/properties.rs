//! Properties of the environments and the vector wrapper: the wrapper equals the
//! environments stepped alone (bit for bit), seeds reproduce trajectories, auto-reset
//! boundaries are right, and no action input panics.

use proptest::prelude::*;
use rlgrad_core::Rng;
use rlgrad_envs::{CartPole, CartPoleNoVelocity, Env, Episode, Pendulum, Snapshot, VecEnv};
use rlgrad_testkit::strategies::config;

/// Everything one step of B environments returns, as bits.
#[derive(Debug, Clone, PartialEq)]
struct StepRecord {
    observations: Vec<u32>,
    final_observations: Vec<u32>,
    rewards: Vec<u32>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    finished: Vec<(usize, u64, usize, bool)>,
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn episode_bits(e: &Episode) -> (usize, u64, usize, bool) {
    (e.env, e.episode_return.to_bits(), e.length, e.terminated)
}

/// `[T][B * action_len]` actions: CartPole's 0/1, or Pendulum torques in [-3, 3) with
/// out-of-range and infinite ones mixed in.
trait RandomActions: Env {
    fn random_action(rng: &mut Rng) -> Self::Action;
}

impl RandomActions for CartPole {
    fn random_action(rng: &mut Rng) -> usize {
        rng.below(2) as usize
    }
}

impl RandomActions for CartPoleNoVelocity {
    fn random_action(rng: &mut Rng) -> usize {
        rng.below(2) as usize
    }
}

impl RandomActions for Pendulum {
    fn random_action(rng: &mut Rng) -> f32 {
        match rng.below(20) {
            0 => f32::INFINITY,
            1 => -1e30,
            _ => 6.0 * rng.uniform_f32() - 3.0,
        }
    }
}

fn random_actions<E: RandomActions>(steps: usize, b: usize, seed: u64) -> Vec<Vec<E::Action>> {
    let mut rng = Rng::new(seed, "actions");
    (0..steps)
        .map(|_| (0..b).map(|_| E::random_action(&mut rng)).collect())
        .collect()
}

fn run_vector<E: Env>(
    mut envs: VecEnv<E>,
    seed: u64,
    actions: &[Vec<E::Action>],
) -> Vec<StepRecord> {
    envs.reset(Some(seed)).unwrap();
    actions
        .iter()
        .map(|a| {
            let step = envs.step(a).unwrap();
            StepRecord {
                observations: bits(step.observations),
                final_observations: bits(step.final_observations),
                rewards: bits(step.rewards),
                terminated: step.terminated.to_vec(),
                truncated: step.truncated.to_vec(),
                finished: step.finished.iter().map(episode_bits).collect(),
            }
        })
        .collect()
}

/// The reference: each environment stepped alone over the whole run (seed `seed + i`,
/// reset without a seed when its episode ends), then the rows put side by side.
fn run_alone<E: Env>(
    make: impl Fn() -> E,
    seed: u64,
    actions: &[Vec<E::Action>],
) -> Vec<StepRecord> {
    let b = actions.first().map_or(0, Vec::len);
    let mut records = vec![
        StepRecord {
            observations: Vec::new(),
            final_observations: Vec::new(),
            rewards: Vec::new(),
            terminated: Vec::new(),
            truncated: Vec::new(),
            finished: Vec::new(),
        };
        actions.len()
    ];
    for i in 0..b {
        let mut env = make();
        env.reset(Some(seed + i as u64)).unwrap();
        let (mut episode_return, mut length) = (0.0f64, 0);
        for (t, record) in records.iter_mut().enumerate() {
            let step = env.step(&actions[t][i..=i]).unwrap();
            let (last, reward) = (bits(step.observation), step.reward);
            let (terminated, truncated) = (step.terminated, step.truncated);
            episode_return += reward;
            length += 1;
            record.final_observations.extend(&last);
            record.rewards.push((reward as f32).to_bits());
            record.terminated.push(terminated);
            record.truncated.push(truncated);
            if terminated || truncated {
                let episode = Episode {
                    env: i,
                    episode_return,
                    length,
                    terminated,
                };
                record.finished.push(episode_bits(&episode));
                (episode_return, length) = (0.0, 0);
                record.observations.extend(bits(env.reset(None).unwrap()));
            } else {
                record.observations.extend(&last);
            }
        }
    }
    records
}

fn check_vector_equals_alone<E: RandomActions + Clone>(
    make: impl Fn() -> E,
    b: usize,
    steps: usize,
    seed: u64,
) -> Result<(), TestCaseError> {
    let actions = random_actions::<E>(steps, b, seed);
    let vector = run_vector(VecEnv::from_fn(b, &make).unwrap(), seed, &actions);
    let alone = run_alone(make, seed, &actions);
    prop_assert_eq!(vector, alone);
    Ok(())
}

/// Runs `actions` from a reset with `seed`; at step `cut`, the wrapper is snapshotted and
/// the rest runs in a fresh wrapper restored from it. Returns the records after the cut.
fn run_resumed<E: Env + Snapshot>(
    make: impl Fn() -> E,
    b: usize,
    seed: u64,
    actions: &[Vec<E::Action>],
    cut: usize,
) -> Vec<StepRecord> {
    let mut first = VecEnv::from_fn(b, &make).unwrap();
    first.reset(Some(seed)).unwrap();
    for a in &actions[..cut] {
        first.step(a).unwrap();
    }
    let mut resumed = VecEnv::from_fn(b, &make).unwrap();
    resumed.restore(&first.snapshot()).unwrap();
    assert_eq!(bits(resumed.observations()), bits(first.observations()));
    actions[cut..]
        .iter()
        .map(|a| {
            let step = resumed.step(a).unwrap();
            StepRecord {
                observations: bits(step.observations),
                final_observations: bits(step.final_observations),
                rewards: bits(step.rewards),
                terminated: step.terminated.to_vec(),
                truncated: step.truncated.to_vec(),
                finished: step.finished.iter().map(episode_bits).collect(),
            }
        })
        .collect()
}

fn check_resume_equals_uninterrupted<E: RandomActions + Snapshot>(
    make: impl Fn() -> E,
    b: usize,
    steps: usize,
    seed: u64,
    cut: usize,
) -> Result<(), TestCaseError> {
    let actions = random_actions::<E>(steps, b, seed);
    let cut = cut % (steps + 1);
    let whole = run_vector(VecEnv::from_fn(b, &make).unwrap(), seed, &actions);
    let resumed = run_resumed(make, b, seed, &actions, cut);
    prop_assert_eq!(&whole[cut..], &resumed[..]);
    Ok(())
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn prop_snapshot_resumes_bit_for_bit(
        b in 1usize..5,
        steps in 1usize..300,
        seed in 0u64..u64::MAX - 8,
        cut in any::<usize>(),
        limit in 1usize..60,
    ) {
        check_resume_equals_uninterrupted(CartPole::new, b, steps, seed, cut)?;
        check_resume_equals_uninterrupted(|| CartPole::with_max_episode_steps(limit).unwrap(), b, steps, seed, cut)?;
        check_resume_equals_uninterrupted(CartPoleNoVelocity::new, b, steps, seed, cut)?;
        check_resume_equals_uninterrupted(|| Pendulum::with_max_episode_steps(limit).unwrap(), b, steps, seed, cut)?;
    }

    #[test]
    fn prop_vector_env_equals_envs_stepped_alone(
        b in 1usize..6,
        steps in 1usize..400,
        seed in 0u64..u64::MAX - 8,
        limit in 1usize..60,
    ) {
        check_vector_equals_alone(CartPole::new, b, steps, seed)?;
        check_vector_equals_alone(|| CartPole::with_max_episode_steps(limit).unwrap(), b, steps, seed)?;
        check_vector_equals_alone(CartPoleNoVelocity::new, b, steps, seed)?;
        check_vector_equals_alone(|| Pendulum::with_max_episode_steps(limit).unwrap(), b, steps, seed)?;
    }

    #[test]
    fn prop_same_seed_same_trajectory(seed in any::<u64>(), other in any::<u64>(), steps in 1usize..300) {
        let actions: Vec<usize> = random_actions::<CartPole>(steps, 1, seed).concat();
        let torques: Vec<f32> = random_actions::<Pendulum>(steps, 1, seed).concat();
        let cartpole = |warm_up: Option<u64>| {
            let mut env = CartPole::new();
            if let Some(warm_up) = warm_up {
                env.reset(Some(warm_up)).unwrap();
                env.step(&[1]).unwrap();
            }
            let mut trace = bits(env.reset(Some(seed)).unwrap());
            for &a in &actions {
                let step = env.step(&[a]).unwrap();
                trace.extend(bits(step.observation));
                trace.push(u32::from(step.terminated) | u32::from(step.truncated) << 1);
                if step.terminated || step.truncated {
                    trace.extend(bits(env.reset(None).unwrap()));
                }
            }
            trace
        };
        let pendulum = |warm_up: Option<u64>| {
            let mut env = Pendulum::new();
            if let Some(warm_up) = warm_up {
                env.reset(Some(warm_up)).unwrap();
                env.step(&[1.0]).unwrap();
            }
            let mut trace = bits(env.reset(Some(seed)).unwrap());
            for &u in &torques {
                let step = env.step(&[u]).unwrap();
                trace.extend(bits(step.observation));
                trace.extend([step.reward.to_bits() as u32, (step.reward.to_bits() >> 32) as u32]);
            }
            trace
        };
        prop_assert_eq!(cartpole(None), cartpole(None));
        prop_assert_eq!(cartpole(None), cartpole(Some(other)));
        prop_assert_eq!(pendulum(None), pendulum(None));
        prop_assert_eq!(pendulum(None), pendulum(Some(other)));
    }

    #[test]
    fn prop_auto_reset_boundaries(
        b in 1usize..5,
        steps in 1usize..300,
        seed in 0u64..1 << 40,
        limit in 1usize..40,
    ) {
        let mut envs = VecEnv::from_fn(b, || CartPole::with_max_episode_steps(limit).unwrap()).unwrap();
        envs.reset(Some(seed)).unwrap();
        let mut lengths = vec![0usize; b];
        let mut finished_steps = 0;
        for actions in random_actions::<CartPole>(steps, b, seed) {
            let step = envs.step(&actions).unwrap();
            let mut ended = Vec::new();
            for (i, length) in lengths.iter_mut().enumerate() {
                *length += 1;
                let row = &step.observations[i * 4..(i + 1) * 4];
                let last = &step.final_observations[i * 4..(i + 1) * 4];
                // Truncated exactly at the step limit: the episode ends there.
                prop_assert_eq!(step.truncated[i], *length == limit);
                if step.terminated[i] || step.truncated[i] {
                    ended.push(i);
                    let episode = step.finished.iter().find(|e| e.env == i).unwrap();
                    prop_assert_eq!(episode.length, *length);
                    prop_assert_eq!(episode.episode_return, *length as f64);
                    prop_assert_eq!(episode.terminated, step.terminated[i]);
                    // A fresh episode: every coordinate of the reset state in [-0.05, 0.05).
                    prop_assert!(row.iter().all(|v| v.abs() <= 0.05), "{:?}", row);
                    finished_steps += *length;
                    *length = 0;
                } else {
                    prop_assert_eq!(row, last);
                }
            }
            let listed: Vec<usize> = step.finished.iter().map(|e| e.env).collect();
            prop_assert_eq!(listed, ended);
        }
        prop_assert_eq!(finished_steps + lengths.iter().sum::<usize>(), steps * b);
    }

    #[test]
    fn prop_no_action_panics_and_bad_ones_change_nothing(
        discrete in proptest::collection::vec(any::<usize>(), 0..3),
        torques in proptest::collection::vec(any::<u32>().prop_map(f32::from_bits), 0..3),
        seed in any::<u64>(),
    ) {
        let mut cartpole = CartPole::new();
        prop_assert!(cartpole.step(&discrete).is_err());
        cartpole.reset(Some(seed)).unwrap();
        let before = cartpole.clone();
        match cartpole.step(&discrete) {
            Ok(_) => prop_assert!(discrete.len() == 1 && discrete[0] < 2),
            Err(_) => {
                prop_assert!(discrete.len() != 1 || discrete[0] >= 2);
                prop_assert_eq!(cartpole.state(), before.state());
                prop_assert_eq!(cartpole.elapsed_steps(), before.elapsed_steps());
            }
        }

        let mut pendulum = Pendulum::new();
        prop_assert!(pendulum.step(&torques).is_err());
        pendulum.reset(Some(seed)).unwrap();
        let before = pendulum.state();
        let space = pendulum.observation_space().clone();
        let valid = torques.len() == 1 && !torques[0].is_nan();
        match pendulum.step(&torques) {
            Ok(step) => {
                prop_assert!(valid);
                prop_assert!(space.contains(step.observation));
                prop_assert!(step.reward.is_finite() && step.reward <= 0.0);
            }
            Err(_) => {
                prop_assert!(!valid);
                prop_assert_eq!(pendulum.state(), before);
            }
        }

        let mut envs = VecEnv::from_fn(2, Pendulum::new).unwrap();
        prop_assert!(envs.step(&[0.0, 0.0]).is_err());
        envs.reset(Some(seed % (u64::MAX - 1))).unwrap();
        let mut untouched = envs.clone();
        let mut pair = torques.clone();
        pair.push(0.5);
        if envs.step(&pair).is_err() {
            let a = bits(envs.step(&[0.25, -0.25]).unwrap().observations);
            let b = bits(untouched.step(&[0.25, -0.25]).unwrap().observations);
            prop_assert_eq!(a, b);
        }
    }
}

#[test]
fn vector_env_errors() {
    assert!(VecEnv::<CartPole>::new(Vec::new()).is_err());
    assert!(VecEnv::from_fn(0, CartPole::new).is_err());
    let mixed = vec![
        CartPole::new(),
        CartPole::with_max_episode_steps(10).unwrap(),
    ];
    let mut envs = VecEnv::new(mixed).unwrap();
    assert_eq!(envs.num_envs(), 2);
    let err = envs.reset(Some(u64::MAX)).unwrap_err();
    assert_eq!(err.function(), "VecEnv::reset");
    assert!(envs.reset(None).is_err());
    envs.reset(Some(u64::MAX - 1)).unwrap();
    assert_eq!(envs.step(&[0]).unwrap_err().argument(), Some("actions"));
    assert_eq!(envs.step(&[0, 2]).unwrap_err().argument(), Some("action"));
    assert_eq!(envs.envs()[0].elapsed_steps(), 0);
    let step = envs.step(&[0, 1]).unwrap();
    assert_eq!(step.observations.len(), 8);
    assert_eq!(envs.observations().len(), 8);
    assert_eq!(envs.single_action_space().action_len(), 1);
}

#[test]
fn snapshots_refuse_what_they_cannot_mean_and_change_nothing() {
    let mut cartpole = CartPole::new();
    cartpole.reset(Some(3)).unwrap();
    let saved = cartpole.snapshot();
    let mut fresh = CartPole::new();
    assert_eq!(
        fresh.restore(&saved[..3]).unwrap_err().argument(),
        Some("snapshot")
    );
    let mut bad_flag = saved.clone();
    bad_flag[0] = 2;
    let err = fresh.restore(&bad_flag).unwrap_err();
    assert!(err.to_string().contains("0/1 flag at word 0"), "{err}");
    assert_eq!(fresh.state(), None);
    assert!(fresh.step(&[0]).is_err(), "still not reset");
    assert!(Pendulum::new().restore(&saved).is_err());

    // Before any reset, a snapshot restores "not reset yet".
    let mut reset_one = CartPole::new();
    reset_one.reset(Some(1)).unwrap();
    reset_one.restore(&CartPole::new().snapshot()).unwrap();
    assert!(reset_one.step(&[0]).is_err());
    assert!(reset_one.reset(None).is_err());

    // A wrapper refuses another number of environments, and a bad environment snapshot
    // leaves every environment as it was.
    let mut envs = VecEnv::from_fn(2, CartPole::new).unwrap();
    envs.reset(Some(5)).unwrap();
    envs.step(&[1, 0]).unwrap();
    let two = envs.snapshot();
    let mut three = VecEnv::from_fn(3, CartPole::new).unwrap();
    assert!(three.restore(&two).is_err());
    let mut other = VecEnv::from_fn(2, CartPole::new).unwrap();
    other.reset(Some(9)).unwrap();
    let before = other.snapshot();
    let mut broken = two.clone();
    let last_env_flag = broken.len() - CartPole::new().snapshot().len();
    broken[last_env_flag] = 7;
    assert!(other.restore(&broken).is_err());
    assert_eq!(other.snapshot(), before);
}
