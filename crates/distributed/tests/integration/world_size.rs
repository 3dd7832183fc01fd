//! The promise of the crate: the same bits for every world size, equal to the
//! single-worker computation, for the microbatch all-reduce and for the statistics.

use std::time::Duration;

use proptest::prelude::*;
use rlgrad_core::{Par, reduce};
use rlgrad_dist::{
    Collective, Local, all_reduce, global_explained_variance, global_mean, global_mean_var,
    global_standardize, global_sum, owned_range,
};
use rlgrad_testkit::strategies::config;

use crate::common;

use common::{accumulate, bits32, value};

const TIMEOUT: Duration = Duration::from_secs(60);

#[test]
fn all_reduce_is_the_same_for_w_1_to_8_and_equals_accumulation() {
    // M a power of two, M not one, W dividing M and not; long vectors take the sharded
    // route, short ones the replicated one.
    for (microbatches, len) in [(8, 5000), (12, 3000), (13, 40), (1, 9000), (6, 20000)] {
        let leaf = |i: usize| -> Vec<f32> { (0..len).map(|j| value(i as u64, j)).collect() };
        let expected = bits32(&accumulate(microbatches, leaf));
        for workers in 1..=8 {
            let out = Local::run(workers, TIMEOUT, |comm| {
                all_reduce(comm, microbatches, len, |i| Ok(leaf(i)))
            })
            .unwrap();
            for (rank, got) in out.iter().enumerate() {
                assert_eq!(
                    bits32(got),
                    expected,
                    "M={microbatches} len={len} W={workers} rank {rank}"
                );
            }
        }
    }
}

proptest! {
    #![proptest_config(config(24))]

    #[test]
    fn prop_all_reduce_bits_do_not_depend_on_world_size(
        microbatches in 1usize..40,
        len in 1usize..3000,
        workers in 1usize..=8,
        seed in any::<u64>(),
    ) {
        let leaf = |i: usize| -> Vec<f32> {
            (0..len).map(|j| value(seed ^ i as u64, j)).collect()
        };
        let expected = bits32(&accumulate(microbatches, leaf));
        let out = Local::run(workers, TIMEOUT, |comm| all_reduce(comm, microbatches, len, |i| Ok(leaf(i)))).unwrap();
        for got in out {
            prop_assert_eq!(bits32(&got), expected.clone());
        }
    }

    #[test]
    fn prop_statistics_equal_the_single_process_ones_for_any_cuts(
        data in proptest::collection::vec(-1e3f64..1e3, 0..700),
        workers in 1usize..=8,
        cut_seed in any::<u64>(),
    ) {
        // Random cuts (ranks may hold nothing, cuts need not fall on leaf boundaries).
        let n = data.len();
        let mut cuts: Vec<usize> = (0..workers - 1)
            .map(|k| (value(cut_seed, k).to_bits() as usize) % (n + 1))
            .collect();
        cuts.push(0);
        cuts.push(n);
        cuts.sort_unstable();
        let part = |rank: usize| &data[cuts[rank]..cuts[rank + 1]];
        let predicted: Vec<f64> = data.iter().map(|v| v * 0.9 + 1.0).collect();
        let ppart = |rank: usize| &predicted[cuts[rank]..cuts[rank + 1]];
        let out = Local::run(workers, TIMEOUT, |comm| {
            let r = comm.rank();
            let sum = global_sum(comm, part(r))?;
            let mean_var = global_mean_var(comm, part(r), 0).ok();
            let standardized = global_standardize(comm, part(r), 1e-8, 1).ok();
            let ev = global_explained_variance(comm, ppart(r), part(r)).ok();
            Ok((sum, mean_var, standardized, ev))
        }).unwrap();
        let sum = reduce::sum(&data, Par::Seq);
        let mean_var = reduce::mean_var(&data, 0, Par::Seq).ok();
        let standardized = rlgrad_returns::standardize(&data, 1e-8, 1).ok();
        let ev = mean_var.map(|(_, var_t)| {
            let diff: Vec<f64> = data.iter().zip(&predicted).map(|(t, p)| t - p).collect();
            let var_d = reduce::var(&diff, 0, Par::Seq).unwrap();
            if var_t == 0.0 { f64::NAN } else { 1.0 - var_d / var_t }
        });
        let mut parts = Vec::new();
        for (rank, (s, mv, st, e)) in out.into_iter().enumerate() {
            prop_assert_eq!(s.to_bits(), sum.to_bits());
            prop_assert_eq!(mv.map(|(m, v)| (m.to_bits(), v.to_bits())), mean_var.map(|(m, v)| (m.to_bits(), v.to_bits())));
            prop_assert_eq!(e.map(f64::to_bits), ev.map(f64::to_bits));
            if let Some(st) = st {
                prop_assert_eq!(st.len(), part(rank).len());
                parts.extend(st);
            }
        }
        if let Some(standardized) = standardized {
            prop_assert_eq!(
                parts.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                standardized.iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn statistics_of_a_large_array_are_the_same_for_w_1_to_8() {
    // Long enough for many leaves and for core's vectorized and parallel paths.
    let data: Vec<f32> = (0..100_003).map(|i| value(3, i)).collect();
    let (mean, var) = reduce::mean_var(&data, 1, Par::rayon(2)).unwrap();
    for workers in 1..=8 {
        let out = Local::run(workers, TIMEOUT, |comm| {
            let mine = owned_range(data.len(), comm.size(), comm.rank())?;
            let local = &data[mine];
            Ok((global_mean(comm, local)?, global_mean_var(comm, local, 1)?))
        })
        .unwrap();
        for (m, (m2, v)) in out {
            assert_eq!(m.to_bits(), mean.to_bits(), "W={workers}");
            assert_eq!(
                (m2.to_bits(), v.to_bits()),
                (mean.to_bits(), var.to_bits()),
                "W={workers}"
            );
        }
    }
}

#[test]
fn episode_return_means_spread_unevenly() {
    // Episodes finished per environment differ; ranks hold contiguous environments.
    let returns_of_env =
        |env: usize| -> Vec<f32> { (0..env % 5).map(|k| value(env as u64, k) * 100.0).collect() };
    let all: Vec<f32> = (0..16).flat_map(returns_of_env).collect();
    let expected = reduce::mean(&all, Par::Seq).unwrap();
    for workers in 1..=5 {
        let out = Local::run(workers, TIMEOUT, |comm| {
            let envs = owned_range(16, comm.size(), comm.rank())?;
            let mine: Vec<f32> = envs.flat_map(returns_of_env).collect();
            global_mean(comm, &mine)
        })
        .unwrap();
        assert!(
            out.iter().all(|m| m.to_bits() == expected.to_bits()),
            "W={workers}"
        );
    }
    let err = Local::run(2, TIMEOUT, |comm| global_mean::<f32, _>(comm, &[])).unwrap_err();
    assert_eq!(err.argument(), Some("local"));
}
