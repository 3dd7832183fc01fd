//! Properties of padding, masked reductions, chopping and minibatching.

use proptest::prelude::*;
use rlgrad_core::{Cpu, Par, Rng, reduce};
use rlgrad_mask::*;
use rlgrad_testkit::strategies::{self, config, in_thread_pools};

/// Ragged lengths, a padded length at least the longest, a feature count and a seed.
fn ragged() -> impl Strategy<Value = (Vec<usize>, usize, usize, u64)> {
    (
        strategies::lengths(12, 20),
        0usize..4,
        1usize..4,
        any::<u64>(),
    )
        .prop_map(|(lengths, extra, features, seed)| {
            let longest = lengths.iter().copied().max().unwrap_or(0);
            (lengths, longest + extra, features, seed)
        })
}

fn values(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed, "mask-values");
    (0..n).map(|_| rng.normal(0.0, 2.0)).collect()
}

/// Whether each value of a padded `[B, T, F]` array belongs to a valid step.
fn valid_values(seqs: &Sequences, features: usize) -> Vec<bool> {
    let mask = seqs.mask().unwrap();
    mask.as_bools()
        .iter()
        .flat_map(|&valid| std::iter::repeat_n(valid, features))
        .collect()
}

/// Padded `[B, T, F]` data whose padding holds NaN: any arithmetic that touches it shows.
fn padded_with_nan(seqs: &Sequences, features: usize, seed: u64) -> Vec<f64> {
    let flat = values(seqs.total() * features, seed);
    let mut x = pad(seqs, &flat, features).unwrap();
    for (v, valid) in x.iter_mut().zip(valid_values(seqs, features)) {
        if !valid {
            *v = f64::NAN;
        }
    }
    x
}

/// Central finite differences of `f` at the valid entries of `x` (padding entries get 0).
fn numeric_gradient(
    seqs: &Sequences,
    features: usize,
    x: &[f64],
    f: impl Fn(&[f64]) -> f64,
) -> Vec<f64> {
    let valid = valid_values(seqs, features);
    let h = 1e-6;
    (0..x.len())
        .map(|i| {
            if !valid[i] {
                return 0.0;
            }
            let (mut up, mut down) = (x.to_vec(), x.to_vec());
            up[i] += h;
            down[i] -= h;
            (f(&up) - f(&down)) / (2.0 * h)
        })
        .collect()
}

fn assert_close(got: &[f64], want: &[f64], tol: f64) -> Result<(), TestCaseError> {
    prop_assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        prop_assert!(
            (g - w).abs() <= tol * (1.0 + w.abs()),
            "at {}: {} vs {}",
            i,
            g,
            w
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(96))]

    #[test]
    fn prop_unpad_of_pad_is_identity_and_padding_is_zero((lengths, max_len, f, seed) in ragged()) {
        let seqs = Sequences::new(&lengths, Some(max_len)).unwrap();
        let flat = values(seqs.total() * f, seed);
        let mask = sequence_mask(&lengths, Some(max_len)).unwrap();
        let batch_major = pad(&seqs, &flat, f).unwrap();
        prop_assert_eq!(unpad(&seqs, &batch_major, f).unwrap(), flat.clone());
        for (step, &valid) in mask.as_bools().iter().enumerate() {
            if !valid {
                prop_assert!(batch_major[step * f..(step + 1) * f].iter().all(|v| v.to_bits() == 0));
            }
        }
        let time_major = pad_time_major(&seqs, &flat, f).unwrap();
        prop_assert_eq!(unpad_time_major(&seqs, &time_major, f).unwrap(), flat);
        // Time-major is the batch-major array with its first two axes swapped.
        let (b, t) = (seqs.batch(), max_len);
        for s in 0..t {
            for j in 0..b {
                prop_assert_eq!(&time_major[(s * b + j) * f..(s * b + j + 1) * f], &batch_major[(j * t + s) * f..(j * t + s + 1) * f]);
            }
        }
    }

    #[test]
    fn prop_masked_mean_is_the_mean_of_the_unpadded_values((lengths, max_len, f, seed) in ragged()) {
        let seqs = Sequences::new(&lengths, Some(max_len)).unwrap();
        let x = padded_with_nan(&seqs, f, seed);
        let flat = unpad(&seqs, &x, f).unwrap();
        match masked_mean(&seqs, &x, f) {
            Ok(mean) => prop_assert_eq!(mean.to_bits(), reduce::mean(&flat, Par::Seq).unwrap().to_bits()),
            Err(_) => prop_assert_eq!(seqs.total(), 0),
        }
        prop_assert_eq!(masked_sum(&seqs, &x, f).unwrap().to_bits(), reduce::sum(&flat, Par::Seq).to_bits());
        if flat.len() > 1 {
            prop_assert_eq!(masked_var(&seqs, &x, f, 1).unwrap().to_bits(), reduce::var(&flat, 1, Par::Seq).unwrap().to_bits());
        }
        if lengths.iter().all(|&l| l > 0) {
            // Each sequence's mean is the mean of its own unpadded values.
            let means = sequence_means(&seqs, &x, f).unwrap();
            for (b, mean) in means.iter().enumerate() {
                let own = &flat[seqs.offsets()[b] * f..seqs.offsets()[b + 1] * f];
                prop_assert_eq!(mean.to_bits(), reduce::mean(own, Par::Seq).unwrap().to_bits());
            }
        }
    }

    #[test]
    fn prop_gradients_match_central_differences((lengths, max_len, f, seed) in ragged()) {
        let seqs = Sequences::new(&lengths, Some(max_len)).unwrap();
        prop_assume!(seqs.total() >= 3);
        let x = padded_with_nan(&seqs, f, seed);
        let upstream = values(seqs.padded_steps() * f, seed ^ 7);
        let check = |analytic: Vec<f64>, g: &dyn Fn(&[f64]) -> f64| assert_close(&analytic, &numeric_gradient(&seqs, f, &x, g), 1e-5);
        check(masked_mean_backward(&seqs, f, 0.7).unwrap(), &|y| 0.7 * masked_mean(&seqs, y, f).unwrap())?;
        check(masked_sum_backward(&seqs, f, -1.3).unwrap(), &|y| -1.3 * masked_sum(&seqs, y, f).unwrap())?;
        check(masked_var_backward(&seqs, &x, f, 1, 0.5).unwrap(), &|y| 0.5 * masked_var(&seqs, y, f, 1).unwrap())?;
        check(masked_std_backward(&seqs, &x, f, 0, 2.0).unwrap(), &|y| 2.0 * masked_std(&seqs, y, f, 0).unwrap())?;
        let valid = valid_values(&seqs, f);
        let dot = |a: &[f64]| -> f64 {
            a.iter().zip(&upstream).zip(&valid).filter(|(_, v)| **v).map(|((p, q), _)| p * q).sum()
        };
        check(
            masked_normalize_backward(&seqs, &x, f, 1e-3, 0, &upstream).unwrap(),
            &|y| dot(&masked_normalize(&seqs, y, f, 1e-3, 0).unwrap()),
        )?;
        if lengths.iter().all(|&l| l > 0) {
            let g: Vec<f64> = (0..lengths.len()).map(|b| 0.1 * b as f64 - 0.3).collect();
            check(sequence_means_backward(&seqs, f, &g).unwrap(), &|y| {
                sequence_means(&seqs, y, f).unwrap().iter().zip(&g).map(|(m, w)| m * w).sum()
            })?;
        }
    }

    #[test]
    fn prop_chop_then_unpad_returns_the_rows_in_order(
        episode_lengths in proptest::collection::vec(1usize..30, 0..12),
        max_seq_len in 1usize..12,
        dynamic_max in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let ids: Vec<i64> = episode_lengths.iter().enumerate().flat_map(|(e, &n)| std::iter::repeat_n(e as i64 * 3 + 1, n)).collect();
        let obs = values(ids.len() * 2, seed);
        let reward = values(ids.len(), seed ^ 1);
        let config = ChopConfig { max_seq_len, dynamic_max, require_contiguous_episodes: true };
        let batch = chop_into_sequences(&ids, &[Column { data: &obs, width: 2 }, Column { data: &reward, width: 1 }], config).unwrap();
        prop_assert_eq!(unpad(batch.seqs(), batch.column(0).unwrap(), 2).unwrap(), obs);
        prop_assert_eq!(unpad(batch.seqs(), batch.column(1).unwrap(), 1).unwrap(), reward);
        prop_assert!(batch.seqs().lengths().iter().all(|&l| (1..=max_seq_len).contains(&l)));
        for (s, &start) in batch.starts().iter().enumerate() {
            // A sequence never spans two episodes.
            let len = batch.seqs().lengths()[s];
            prop_assert!(ids[start..start + len].iter().all(|&id| id == ids[start]));
        }
    }

    #[test]
    fn prop_minibatches_partition_whole_sequences(
        episode_lengths in proptest::collection::vec(1usize..25, 1..20),
        count_pick in any::<usize>(),
        seed in any::<u64>(),
    ) {
        let ids: Vec<i64> = episode_lengths.iter().enumerate().flat_map(|(e, &n)| std::iter::repeat_n(e as i64, n)).collect();
        let x: Vec<f64> = (0..ids.len()).map(|r| r as f64).collect();
        let batch = chop_into_sequences(&ids, &[Column { data: &x, width: 1 }], ChopConfig::new(8)).unwrap();
        let sequences = batch.seqs().batch();
        let count = 1 + count_pick % sequences;
        let groups = batch.minibatches(count, &mut Rng::new(seed, "minibatch")).unwrap();
        prop_assert_eq!(groups.len(), count);
        let mut seen: Vec<usize> = groups.iter().flatten().copied().collect();
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..sequences).collect::<Vec<_>>());
        let total = batch.seqs().total();
        for group in &groups {
            prop_assert!(!group.is_empty());
            let sub = batch.select(group).unwrap();
            // Rows of each sequence stay together and in order: the packed row index x.
            let rows = unpad(sub.seqs(), sub.column(0).unwrap(), 1).unwrap();
            let mut at = 0;
            for (k, &s) in group.iter().enumerate() {
                let len = sub.seqs().lengths()[k];
                let start = batch.starts()[s] as f64;
                prop_assert!(rows[at..at + len].iter().enumerate().all(|(i, &r)| r == start + i as f64));
                at += len;
            }
            // Balanced: no group exceeds its share by more than one sequence.
            prop_assert!(sub.seqs().total() * count <= total + count * 8);
        }
        // The same seed gives the same minibatches.
        prop_assert_eq!(groups, batch.minibatches(count, &mut Rng::new(seed, "minibatch")).unwrap());
        // By size: a partition of whole sequences, each group within `size` unless it is a
        // single longer sequence, and no two neighbors that would have fitted together.
        let size = 1 + count_pick % 40;
        let by_size = batch.minibatches_of_size(size, &mut Rng::new(seed, "minibatch")).unwrap();
        let mut seen: Vec<usize> = by_size.iter().flatten().copied().collect();
        seen.sort_unstable();
        prop_assert_eq!(seen, (0..sequences).collect::<Vec<_>>());
        let steps = |g: &Vec<usize>| g.iter().map(|&s| batch.seqs().lengths()[s]).sum::<usize>();
        for (k, group) in by_size.iter().enumerate() {
            prop_assert!(steps(group) <= size || group.len() == 1);
            if let Some(next) = by_size.get(k + 1) {
                prop_assert!(steps(group) + batch.seqs().lengths()[next[0]] > size);
            }
        }
    }
}

#[test]
fn reductions_and_copies_are_bitwise_equal_across_threads() {
    // Large enough that sums, pads and unpads are split between tasks.
    let mut rng = Rng::new(4, "threads");
    let lengths: Vec<usize> = (0..700).map(|_| 1 + rng.below(199) as usize).collect();
    let seqs = Sequences::new(&lengths, Some(200)).unwrap();
    let x = padded_with_nan(&seqs, 1, 9);
    let x3 = padded_with_nan(&seqs, 3, 11);
    let flat = values(seqs.total() * 3, 10);
    let run = |par: Par| {
        let cpu = Cpu::new(par);
        let mut bits: Vec<u64> = Vec::new();
        for (x, f) in [(&x, 1), (&x3, 3)] {
            bits.push(device::masked_mean(&cpu, &seqs, x, f).unwrap().to_bits());
            bits.push(device::masked_var(&cpu, &seqs, x, f, 1).unwrap().to_bits());
            bits.push(device::masked_std(&cpu, &seqs, x, f, 0).unwrap().to_bits());
            bits.extend(
                device::sequence_means(&cpu, &seqs, x, f)
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits()),
            );
            bits.extend(
                device::masked_normalize(&cpu, &seqs, x, f, 1e-8, 0)
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits()),
            );
            bits.extend(
                device::masked_normalize_backward(&cpu, &seqs, x, f, 1e-8, 0, x)
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits()),
            );
        }
        for order in [PadOrder::BatchMajor, PadOrder::TimeMajor] {
            let padded = device::pad(&cpu, &seqs, &flat, 3, order).unwrap();
            bits.extend(padded.iter().map(|v| v.to_bits()));
            bits.extend(
                device::unpad(&cpu, &seqs, &padded, 3, order)
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits()),
            );
        }
        bits
    };
    let reference = run(Par::Seq);
    for par in [Par::rayon(2), Par::rayon(4)] {
        assert!(run(par) == reference, "{par:?}");
    }
    for got in in_thread_pools(&[1, 2, 4], run) {
        assert!(got == reference);
    }
}

#[test]
fn bad_input_is_an_error_naming_the_argument() {
    let msg = |e: Error| e.to_string();
    assert!(msg(Sequences::new(&[3, 5], Some(4)).unwrap_err()).contains("`lengths`"));
    let seqs = Sequences::new(&[2, 1], None).unwrap();
    assert_eq!(
        msg(pad(&seqs, &[1.0f32; 4], 1).unwrap_err()),
        "pad: argument `flat` has the wrong shape: expected 3 elements ([N, F]), got 4 elements"
    );
    assert!(msg(unpad(&seqs, &[1.0f32; 5], 1).unwrap_err()).contains("`padded`"));
    assert!(msg(masked_mean(&seqs, &[1.0f32; 3], 1).unwrap_err()).contains("`x`"));
    assert_eq!(
        msg(masked_mean(&seqs, &[1.0f32; 4], 2).unwrap_err()),
        "masked_mean: argument `x` has the wrong shape: expected 8 elements ([B, T, F] = [2, 2, 2]), got 4 elements"
    );
    let empty = Sequences::new(&[0, 0], Some(3)).unwrap();
    assert!(msg(masked_mean(&empty, &[0.0f32; 6], 1).unwrap_err()).contains("is empty"));
    assert!(msg(masked_mean(&seqs, &[0.0f32; 0], 0).unwrap_err()).contains("is empty"));
    assert!(
        msg(masked_var(&seqs, &[0.0f32; 4], 1, 3).unwrap_err()).contains("at least 4 valid values")
    );
    assert!(
        msg(sequence_means(&Sequences::new(&[2, 0], None).unwrap(), &[0.0f32; 4], 1).unwrap_err())
            .contains("sequence 1")
    );
    assert!(msg(masked_normalize(&seqs, &[0.0f32; 4], 1, -1.0, 0).unwrap_err()).contains("`eps`"));
    let ids = [1i64, 1, 2, 1];
    let x = [0.0f32; 4];
    let strict = ChopConfig {
        require_contiguous_episodes: true,
        ..ChopConfig::new(4)
    };
    assert!(
        msg(chop_into_sequences(&ids, &[Column { data: &x, width: 1 }], strict).unwrap_err())
            .contains("episode 1 again at row 3")
    );
    assert_eq!(
        chop_into_sequences(&ids, &[Column { data: &x, width: 1 }], ChopConfig::new(4))
            .unwrap()
            .seqs()
            .lengths(),
        &[2, 1, 1]
    );
    assert!(
        msg(
            chop_into_sequences(&ids, &[Column { data: &x, width: 2 }], ChopConfig::new(4))
                .unwrap_err()
        )
        .contains("`columns`")
    );
    assert!(
        msg(
            chop_into_sequences(&ids, &[Column { data: &x, width: 1 }], ChopConfig::new(0))
                .unwrap_err()
        )
        .contains("max_seq_len")
    );
    let batch =
        chop_into_sequences(&ids, &[Column { data: &x, width: 1 }], ChopConfig::new(4)).unwrap();
    assert!(msg(batch.minibatches(4, &mut Rng::new(0, "m")).unwrap_err()).contains("`count`"));
    assert!(
        msg(batch
            .minibatches_of_size(0, &mut Rng::new(0, "m"))
            .unwrap_err())
        .contains("`size`")
    );
    assert!(msg(batch.select(&[3]).unwrap_err()).contains("`sequences`"));
}

#[test]
fn huge_sizes_are_errors_naming_the_size() {
    let err = sequence_mask(&[usize::MAX], None).unwrap_err();
    assert!(err.to_string().contains("elements of bool"), "{err}");
    for max_len in [usize::MAX / 2, 1 << 50] {
        let seqs = Sequences::new(&[1], Some(max_len)).unwrap();
        let err = pad(&seqs, &[1.0f32], 1).unwrap_err();
        assert!(
            err.to_string()
                .contains(&format!("{max_len} elements of f32")),
            "{err}"
        );
        assert!(pad_time_major(&seqs, &[1.0f64], 1).is_err());
        assert!(masked_mean_backward(&seqs, 1, 1.0f32).is_err());
        assert!(masked_sum_backward(&seqs, 2, 1.0f64).is_err());
        assert!(seqs.sequence_of(1).is_none());
    }
    // B * T * F overflows usize: a shape error, not an allocation.
    let seqs = Sequences::new(&[1, 1], Some(usize::MAX / 2)).unwrap();
    assert!(pad(&seqs, &[0.0f32; 6], 3).is_err());
    // No rows but a huge padded length: nothing to pad, no overflow.
    let none = Sequences::new(&[], Some(usize::MAX)).unwrap();
    assert!(pad(&none, &[0.0f32; 0], 5).unwrap().is_empty());
}

#[test]
fn the_mask_of_sequences_is_their_sequence_mask() {
    let seqs = Sequences::new(&[3, 0, 1], Some(4)).unwrap();
    let mask = seqs.mask().unwrap();
    assert_eq!(mask, sequence_mask(&[3, 0, 1], Some(4)).unwrap());
    assert_eq!((mask.batch(), mask.max_len()), (3, 4));
    assert_eq!(mask.to_u8().unwrap(), [1, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0]);
}

#[test]
fn transpose_converts_time_major_rollouts_with_features() {
    // [T, B, F] = [2, 3, 2] to [B, T, F] and back.
    let time_major: Vec<f32> = (0..12).map(|v| v as f32).collect();
    let batch_major = transpose(&time_major, 2, 3, 2).unwrap();
    assert_eq!(batch_major[..4], [0.0, 1.0, 6.0, 7.0]); // env 0 at t = 0, then t = 1
    assert_eq!(transpose(&batch_major, 3, 2, 2).unwrap(), time_major);
    assert!(transpose(&time_major, 2, 3, 3).is_err());
}

#[test]
fn accessors_past_the_end_are_none() {
    let seqs = Sequences::new(&[2, 0, 1], None).unwrap();
    assert_eq!(
        (0..4).map(|row| seqs.sequence_of(row)).collect::<Vec<_>>(),
        [Some(0), Some(0), Some(2), None]
    );
    let ids = [4i64, 4, 5];
    let x = [1.0f32, 2.0, 3.0];
    let batch =
        chop_into_sequences(&ids, &[Column { data: &x, width: 1 }], ChopConfig::new(2)).unwrap();
    assert_eq!(batch.column(0), Some(&[1.0, 2.0, 3.0, 0.0][..]));
    assert_eq!((batch.width(0), batch.width(1)), (Some(1), None));
    assert!(batch.column(1).is_none());
}

/// `x` with the padded values replaced, in turn, by `garbage`.
fn with_garbage(seqs: &Sequences, features: usize, x: &[f64], garbage: &[f64]) -> Vec<f64> {
    let mut fill = garbage.iter().copied().cycle();
    x.iter()
        .zip(valid_values(seqs, features))
        .map(|(&v, valid)| if valid { v } else { fill.next().unwrap() })
        .collect()
}

/// Every slice-level function that reads a padded batch (its data or an upstream
/// gradient), as bits: the values it returns, or its error.
fn padded_readers(
    seqs: &Sequences,
    f: usize,
    x: &[f64],
    upstream: &[f64],
) -> Vec<Result<Vec<u64>, String>> {
    let scalar = |r: Result<f64, Error>| r.map(|v| vec![v.to_bits()]).map_err(|e| e.to_string());
    let vector = |r: Result<Vec<f64>, Error>| {
        r.map(|v| v.iter().map(|x| x.to_bits()).collect())
            .map_err(|e| e.to_string())
    };
    let mut into = vec![7.0; seqs.total() * f];
    let unpadded_into =
        unpad_into(Par::Seq, seqs, x, f, PadOrder::BatchMajor, &mut into).map(|()| into);
    let time_major = transpose(x, seqs.batch(), seqs.max_len(), f).unwrap();
    vec![
        scalar(masked_sum(seqs, x, f)),
        scalar(masked_mean(seqs, x, f)),
        scalar(masked_var(seqs, x, f, 1)),
        scalar(masked_std(seqs, x, f, 0)),
        vector(sequence_means(seqs, x, f)),
        vector(masked_var_backward(seqs, x, f, 1, 0.5)),
        vector(masked_std_backward(seqs, x, f, 0, 2.0)),
        vector(masked_normalize(seqs, x, f, 1e-8, 1)),
        vector(masked_normalize_backward(seqs, x, f, 1e-8, 1, upstream)),
        vector(unpad(seqs, x, f)),
        vector(unpadded_into),
        vector(unpad_time_major(seqs, &time_major, f)),
    ]
}

proptest! {
    #![proptest_config(config(96))]

    /// Garbage (NaN, ±inf, ±1e30, extreme and random values) in every padded position of
    /// the data and of the upstream gradient changes no bit of any result.
    #[test]
    fn prop_garbage_in_padding_changes_no_bit(
        (lengths, max_len, f, seed) in ragged(),
        garbage in strategies::vec(strategies::garbage::<f64>(), 1..24),
        upstream_garbage in strategies::vec(strategies::garbage::<f64>(), 1..24),
    ) {
        let seqs = Sequences::new(&lengths, Some(max_len)).unwrap();
        let x = pad(&seqs, &values(seqs.total() * f, seed), f).unwrap();
        let upstream = pad(&seqs, &values(seqs.total() * f, seed ^ 3), f).unwrap();
        let zeros = padded_readers(&seqs, f, &x, &upstream);
        let dirty = padded_readers(
            &seqs,
            f,
            &with_garbage(&seqs, f, &x, &garbage),
            &with_garbage(&seqs, f, &upstream, &upstream_garbage),
        );
        prop_assert_eq!(zeros, dirty);
    }

    /// Chopped columns are zero-padded (`+0`, every bit), whatever the rows hold.
    #[test]
    fn prop_chopped_padding_is_positive_zero(
        episode_lengths in proptest::collection::vec(1usize..20, 1..8),
        max_seq_len in 1usize..8,
        rows in strategies::vec(strategies::garbage::<f64>(), 1..24),
    ) {
        let ids: Vec<i64> = episode_lengths.iter().enumerate().flat_map(|(e, &n)| std::iter::repeat_n(e as i64, n)).collect();
        let data: Vec<f64> = rows.iter().copied().cycle().take(ids.len() * 2).collect();
        let batch = chop_into_sequences(&ids, &[Column { data: &data, width: 2 }], ChopConfig::new(max_seq_len)).unwrap();
        let column = batch.column(0).unwrap();
        for (value, valid) in column.iter().zip(valid_values(batch.seqs(), 2)) {
            if !valid {
                prop_assert_eq!(value.to_bits(), 0);
            }
        }
        let unpadded: Vec<u64> = unpad(batch.seqs(), column, 2).unwrap().iter().map(|v| v.to_bits()).collect();
        prop_assert_eq!(unpadded, data.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    }
}
