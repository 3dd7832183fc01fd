//! The ppo_dist example's promise: the same final parameters, bit for bit, on 1, 2, 3 and
//! 4 workers (16 environments: 3 workers split them unevenly) and with gradient
//! accumulation in groups, and training changes them.

use rlgrad_dist::{Collective, Local};
use rlgrad_examples::ppo_dist::{Config, DdPpo};

fn fingerprints(workers: usize, updates: usize) -> Vec<u64> {
    accumulated(workers, 1, updates)
}

fn accumulated(workers: usize, groups: usize, updates: usize) -> Vec<u64> {
    Local::run(workers, Local::DEFAULT_TIMEOUT, |comm| {
        let mut agent = DdPpo::new(Config::default(), comm)?.with_accumulation(groups)?;
        for _ in 0..updates {
            let report = agent.update(comm)?;
            assert_eq!(comm.size(), workers);
            assert!(report.mean_return.is_none_or(|m| m.is_finite()));
        }
        agent.fingerprint()
    })
    .unwrap()
}

#[test]
fn ppo_dist_parameters_are_the_same_bits_on_1_to_4_workers() {
    let initial = fingerprints(1, 0)[0];
    let one = fingerprints(1, 3);
    assert_ne!(one[0], initial, "the updates changed the parameters");
    for workers in 2..=4 {
        for (rank, p) in fingerprints(workers, 3).into_iter().enumerate() {
            assert_eq!(
                p, one[0],
                "W={workers} rank {rank}: {p:016x} vs {:016x}",
                one[0]
            );
        }
    }
}

#[test]
fn accumulation_in_groups_gives_the_bits_of_every_worker_count() {
    let one = fingerprints(1, 2)[0];
    assert_eq!(fingerprints(4, 2), [one; 4]);
    for (workers, groups) in [(1, 4), (1, 3), (2, 3)] {
        for (rank, p) in accumulated(workers, groups, 2).into_iter().enumerate() {
            assert_eq!(
                p, one,
                "W={workers} --accumulate {groups} rank {rank}: {p:016x} vs {one:016x}"
            );
        }
    }
}
