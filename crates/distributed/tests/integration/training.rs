//! Data-parallel training with autodiff and the optimizer engine: a few Adam steps on
//! W = 1, 2, 3, 4 workers give bit-identical parameters, equal to gradient accumulation on
//! one worker without any communicator.

use crate::common;

use std::time::Duration;

use common::{data, fingerprint, model, train_accumulating, train_distributed};
use rlgrad_dist::Local;

#[test]
fn training_on_1_to_4_workers_gives_the_parameters_of_accumulation() {
    let data = data();
    let expected = train_accumulating(&data).unwrap();
    let untrained = fingerprint(&model().unwrap()).unwrap();
    assert_ne!(expected, untrained, "the steps changed the parameters");
    for workers in 1..=4 {
        let prints = Local::run(workers, Duration::from_secs(60), |comm| {
            train_distributed(comm, &data)
        })
        .unwrap();
        for (rank, p) in prints.iter().enumerate() {
            assert_eq!(
                *p, expected,
                "W={workers} rank {rank}: {p:016x} vs {expected:016x}"
            );
        }
    }
}
