//! Each agent, trained briefly: the same seed gives bit-identical final parameters with 1
//! and 2 rayon threads, and a run paused at a checkpoint and resumed ends with the bits of
//! an uninterrupted one.
//!
//! The off-policy agents train 30 updates of 64-unit layers: enough for every part of an
//! update (the policy delay, Polyak averaging, the entropy tuning, a pause between the two
//! halves of a pair of steps) in an unoptimized test build. The kernels' bits across
//! thread counts at every size are the golden tests'.

use std::path::Path;

use rlgrad_core::Result;
use rlgrad_examples::actor_critic::{self, ActorCritic};
use rlgrad_examples::ppo::{self, Ppo};
use rlgrad_examples::run::{Agent, Options, Outcome, train};
use rlgrad_examples::sac::{self, Sac};
use rlgrad_examples::td3::{self, Td3};

/// A quiet run of `budget` units in `dir` with `threads` threads.
fn options<A: Agent>(dir: &Path, budget: u64, threads: usize) -> Options {
    Options {
        threads: Some(threads),
        run_dir: Some(dir.to_path_buf()),
        budget,
        checkpoint_every: budget / 4,
        stop_at_target: false,
        progress: false,
        ..Options::new::<A>(7)
    }
}

/// The whole final state's encoding and the episode returns as bits.
fn bits(outcome: &Outcome) -> (Vec<u8>, Vec<u64>) {
    let state = outcome.state.to_bytes().unwrap();
    let returns = outcome
        .episodes
        .returns()
        .iter()
        .map(|r| r.to_bits())
        .collect();
    (state, returns)
}

/// Trains `make`'s agent for `budget` units with 1 and with 2 threads, and paused at
/// `pause` then resumed (2 threads): all three end with the same bits.
fn check<A: Agent>(budget: u64, pause: u64, make: impl Fn(&Options) -> Result<A> + Sync) {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let one = options::<A>(dirs[0].path(), budget, 1);
    let one = train(&one, || make(&one)).unwrap();
    let two = options::<A>(dirs[1].path(), budget, 2);
    let two = train(&two, || make(&two)).unwrap();
    assert_eq!(bits(&one), bits(&two), "1 and 2 threads differ");
    assert!(one.state.names().any(|name| name.ends_with("weight")));

    let paused = Options {
        pause_at: Some(pause),
        ..options::<A>(dirs[2].path(), budget, 2)
    };
    let first = train(&paused, || make(&paused)).unwrap();
    assert!(
        first.summary.units < budget,
        "the pause came before the budget"
    );
    assert_ne!(bits(&first), bits(&two));
    let resumed = Options {
        resume: true,
        ..options::<A>(dirs[2].path(), budget, 2)
    };
    let resumed = train(&resumed, || make(&resumed)).unwrap();
    assert_eq!(bits(&resumed), bits(&two), "the resumed run differs");
    assert_eq!(resumed.summary.env_steps, two.summary.env_steps);
}

#[test]
fn actor_critic_is_deterministic_and_resumes_bit_for_bit() {
    check(24, 10, |o| {
        ActorCritic::new(actor_critic::Config::default(), o.seed)
    });
}

#[test]
fn td3_is_deterministic_and_resumes_bit_for_bit() {
    let mut config = td3::Config::td3();
    config.common.learning_starts = 300;
    config.common.hidden = [64, 64];
    check(330, 316, |o| Td3::new(config.clone(), o.seed));
}

#[test]
fn ddpg_is_deterministic_and_resumes_bit_for_bit() {
    let mut config = td3::Config::ddpg();
    config.common.learning_starts = 300;
    config.common.hidden = [64, 64];
    check(330, 316, |o| Td3::new(config.clone(), o.seed));
}

#[test]
fn sac_is_deterministic_and_resumes_bit_for_bit() {
    let mut config = sac::Config::default();
    config.common.learning_starts = 300;
    config.common.hidden = [64, 64];
    // Pauses on an odd step, between the two actor updates of a pair of steps.
    check(330, 315, |o| Sac::new(config.clone(), o.seed));
}

#[test]
fn recurrent_ppo_is_deterministic_and_resumes_bit_for_bit() {
    let config = ppo::Config {
        epochs: 2,
        minibatches: 2,
        ..ppo::Config::recurrent()
    };
    // Two updates of 256 steps, paused between them.
    check(512, 256, |o| Ppo::new(config.clone(), o.seed, o.budget));
}

#[test]
fn a_run_is_not_resumed_under_other_hyper_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let first = options::<ActorCritic>(dir.path(), 4, 1);
    train(&first, || {
        ActorCritic::new(actor_critic::Config::default(), 7)
    })
    .unwrap();
    let again = train(&first, || {
        ActorCritic::new(actor_critic::Config::default(), 7)
    });
    let error = again.unwrap_err().to_string();
    assert!(error.contains("without checkpoints"), "{error}");
    let other = actor_critic::Config {
        learning_rate: 0.02,
        ..actor_critic::Config::default()
    };
    let resumed = Options {
        resume: true,
        budget: 8,
        ..first.clone()
    };
    let error = train(&resumed, || ActorCritic::new(other, 7))
        .unwrap_err()
        .to_string();
    assert!(error.contains("learning_rate: 0.02"), "{error}");
    let fresh = tempfile::tempdir().unwrap();
    let nothing = Options {
        resume: true,
        ..options::<ActorCritic>(fresh.path(), 4, 1)
    };
    let error = train(&nothing, || {
        ActorCritic::new(actor_critic::Config::default(), 7)
    })
    .unwrap_err()
    .to_string();
    assert!(error.contains("a checkpoint in"), "{error}");
}
