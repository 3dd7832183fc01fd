//! ppo_dist's checkpoints: saved by rank 0 after k updates on one number of workers,
//! resumed on another, the run ends on the parameters of the run that never stopped, bit
//! for bit (16 environments, so that 3 workers split them unevenly); a checkpoint of
//! another configuration is refused on every rank.

use std::path::Path;

use rlgrad_dist::{Collective, Local};
use rlgrad_examples::ppo_dist::{Config, DdPpo};

const UPDATES: u64 = 3;

/// The default network and environments, with short rollouts and two epochs: the
/// checkpoint holds the same state, and the nine runs stay quick in a debug build.
fn config() -> Config {
    Config {
        rollout_steps: 16,
        epochs: 2,
        ..Config::default()
    }
}

/// The fingerprint on every rank after `UPDATES` updates on `workers` workers, resumed
/// from `dir` when `resume`, saved to `dir` after `save_at` updates when given.
fn run(workers: usize, dir: &Path, resume: bool, save_at: Option<u64>) -> Vec<u64> {
    Local::run(workers, Local::DEFAULT_TIMEOUT, |comm| {
        let config = config();
        let mut agent = if resume {
            DdPpo::resume(config, comm, dir)?
        } else {
            DdPpo::new(config, comm)?
        };
        while agent.updates() < save_at.unwrap_or(UPDATES) {
            agent.update(comm)?;
        }
        if save_at.is_some() {
            agent.save(comm, dir)?;
        }
        while agent.updates() < UPDATES {
            agent.update(comm)?;
        }
        assert_eq!(comm.size(), workers);
        agent.fingerprint()
    })
    .unwrap()
}

#[test]
fn a_checkpoint_resumes_on_any_number_of_workers_with_the_same_bits() {
    let uninterrupted = run(2, Path::new("unused"), false, None)[0];
    for (saved_on, save_at, resumed_on) in [(1, 1, 4), (3, 2, 2), (4, 1, 3), (2, 2, 1)] {
        let dir = tempfile::tempdir().unwrap();
        let saved = run(saved_on, dir.path(), false, Some(save_at));
        assert!(saved.iter().all(|&p| p == uninterrupted));
        let files = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(files, 1, "one checkpoint file, written by rank 0 alone");
        for (rank, p) in run(resumed_on, dir.path(), true, None)
            .into_iter()
            .enumerate()
        {
            assert_eq!(
                p, uninterrupted,
                "saved on W={saved_on} after {save_at}, resumed on W={resumed_on}, rank {rank}: \
                 {p:016x} vs {uninterrupted:016x}"
            );
        }
    }
}

#[test]
fn another_configuration_or_no_checkpoint_is_refused_on_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    let err = Local::run(2, Local::DEFAULT_TIMEOUT, |comm| {
        DdPpo::resume(config(), comm, dir.path()).map(drop)
    })
    .unwrap_err();
    assert!(
        err.to_string().contains("a directory holding a checkpoint"),
        "{err}"
    );

    run(2, dir.path(), false, Some(1));
    let other = Config {
        hidden: 32,
        ..config()
    };
    let errors = Local::run(3, Local::DEFAULT_TIMEOUT, |comm| {
        let err = DdPpo::resume(other.clone(), comm, dir.path()).unwrap_err();
        assert_eq!(
            (err.function(), err.argument()),
            ("DdPpo::resume", Some("config"))
        );
        Ok(err.to_string())
    })
    .unwrap();
    assert!(
        errors[0].contains("hidden: 64") && errors[0].contains("hidden: 32"),
        "{}",
        errors[0]
    );

    let err = Local::run(2, Local::DEFAULT_TIMEOUT, |comm| {
        DdPpo::check_fresh(comm, dir.path())
    })
    .unwrap_err();
    assert!(err.to_string().contains("checkpoint 1 in"), "{err}");
}
