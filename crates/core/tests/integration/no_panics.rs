//! The public entry points of rlgrad-core that the algorithm crates stand on (host
//! allocation, argument checks, canonical reductions, sequences, episode descriptions, the
//! slice-level recurrence, sequence, optimizer and layout kernels, and the `Cpu` device
//! with its recurrence, sequence and optimizer kernel traits) with random sizes (zero,
//! small and huge, up to `usize::MAX`) and non-finite values: each call returns `Ok` or
//! `Err` (or a value), never panics or aborts, and a kernel that fails leaves its outputs
//! as they were.

use proptest::prelude::*;
use rlgrad_core::cpu::{alloc, layout, optim, recurrence, sequence};
use rlgrad_core::kernels::optim::{AdamTorch, Update};
use rlgrad_core::kernels::recurrence::{
    Episodes, FlagSlice, TimeMajor, Truncation, VtraceParams, cut, episode_step,
};
use rlgrad_core::kernels::sequence::{MaskedMap, MaskedTerm, PadOrder, Sequences, sequence_mask};
use rlgrad_core::kernels::{OptimKernel, RecurrenceKernel, SequenceKernel};
use rlgrad_core::{Cpu, Device, Par, check, reduce};
use rlgrad_testkit::strategies::{self, config};

/// Sizes that are zero, small, or far beyond any memory (so that no allocation of them
/// can succeed, whatever the machine's overcommit setting).
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        10 => 0usize..5,
        1 => proptest::sample::select(vec![usize::MAX, usize::MAX / 2, 1 << 48, 1 << 62]),
    ]
}

/// Data of `want` elements when that is small, else of any small length.
fn data(want: Option<usize>, values: &[f32], pick: usize) -> Vec<f32> {
    let n = match want {
        Some(n) if n <= values.len() && !pick.is_multiple_of(4) => n,
        _ => pick % (values.len() + 1),
    };
    values[..n].to_vec()
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

/// Runs `kernel` on a copy of `out` and checks that an error left the copy alone, unless
/// it is a flag other than 0 or 1, which the recurrences find while they write (as their
/// docs say).
fn unchanged_on_error(
    out: &[f32],
    kernel: impl FnOnce(&mut [f32]) -> rlgrad_core::Result<()>,
) -> bool {
    let mut copy = out.to_vec();
    match kernel(&mut copy) {
        Ok(()) => true,
        Err(rlgrad_core::Error::Value {
            argument: "terminated" | "truncated",
            ..
        }) => true,
        Err(_) => bits(&copy) == bits(out),
    }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn prop_allocation_checks_and_reductions(
        len in size(),
        values in strategies::vec(strategies::any_value::<f32>(), 0..300),
        offsets in strategies::vec(size(), 0..5),
        (index, start, end, cursor) in (size(), size(), size(), size()),
        ddof in size(),
        threads in 1usize..4,
    ) {
        let par = Par::rayon(threads);
        prop_assert_eq!(alloc::try_zeroed::<f64>(len, "t", "len").is_ok(), len < 1 << 20);
        prop_assert_eq!(alloc::try_with_capacity::<u8>(len, "t", "len").is_ok(), len < 1 << 20);
        let _ = alloc::try_copy(&values, "t", "values");
        let _ = check::product("t", "len", len, index);
        let _ = check::len("t", "x", len, values.len());
        for v in &values {
            let v = f64::from(*v);
            let _ = (check::unit_interval("t", "v", v), check::unit_interval_open("t", "v", v));
            let _ = (check::non_negative("t", "v", v), check::positive("t", "v", v));
        }
        let _ = reduce::sum(&values, par);
        let _ = reduce::sum_map(&values, par, |v| v * v);
        let _ = reduce::mean(&values, par);
        let _ = reduce::var(&values, ddof, par);
        let _ = reduce::mean_var(&values, ddof, par);
        let _ = (reduce::min(&values, par), reduce::max(&values, par));
        let _ = reduce::segment_of(&offsets, index);
        let _ = reduce::sum_segments(par, &offsets, ddof, &values, &values, |v, w| v * w);
        let _ = reduce::sum_segments_plain(par, &offsets, ddof, &values);
        let mut cursor = cursor;
        reduce::for_each_segment(&offsets, &mut cursor, start.min(end)..end, |_, _| {});
        prop_assert_eq!(cut(0.0f32, f32::NAN).to_bits(), 0);
    }

    #[test]
    fn prop_recurrence_kernels(
        (t, b) in (size(), size()),
        values in strategies::vec(strategies::any_value::<f32>(), 0..40),
        picks in strategies::vec(any::<usize>(), 12),
        (gamma, lambda, n) in (strategies::any_value::<f32>(), strategies::any_value::<f32>(), size()),
        kind in 0u8..5,
        threads in 1usize..4,
    ) {
        let tm = TimeMajor::new(t, b);
        let len = tm.len();
        let d = |k: usize| data(len, &values, picks[k]);
        let (rewards, vals, flags, fv, rhos) = (d(0), d(1), d(2), d(3), d(4));
        let boot = data(Some(b), &values, picks[5]);
        let bytes: Vec<u8> = flags.iter().map(|f| u8::from(*f > 0.0)).collect();
        let episodes = match kind {
            0 => Episodes::Constant { gamma },
            1 => Episodes::Discounts(&flags[..]),
            2 => Episodes::Flags { gamma, terminated: FlagSlice::Bytes(&bytes), truncation: None },
            3 => Episodes::Flags { gamma, terminated: FlagSlice::Values(&flags[..]), truncation: None },
            _ => Episodes::Flags {
                gamma,
                terminated: FlagSlice::Values(&flags[..]),
                truncation: Some(Truncation { truncated: FlagSlice::Bytes(&bytes[..]), final_values: &fv[..] }),
            },
        };
        let params = VtraceParams { lambda, clip_rho: gamma, clip_pg_rho: lambda };
        let par = Par::rayon(threads);
        let out = d(6);
        let out2 = d(7);
        prop_assert!(unchanged_on_error(&out, |o| recurrence::linear_recurrence(par, tm, &rewards, &vals, &boot, o)));
        prop_assert!(unchanged_on_error(&out, |o| recurrence::discounted_returns(par, tm, &rewards, episodes, &boot, o)));
        prop_assert!(unchanged_on_error(&out, |o| recurrence::gae(par, tm, &rewards, &vals, &boot, episodes, lambda, o, None)));
        let with_returns = unchanged_on_error(&out, |o| {
            let mut second = out2.clone();
            recurrence::gae(par, tm, &rewards, &vals, &boot, episodes, lambda, o, Some(&mut second))
        });
        prop_assert!(with_returns);
        prop_assert!(unchanged_on_error(&out, |o| recurrence::lambda_returns(par, tm, &rewards, &vals, episodes, lambda, o)));
        prop_assert!(unchanged_on_error(&out, |o| recurrence::n_step_returns(par, tm, &rewards, &vals, episodes, n, o)));
        let vtrace = unchanged_on_error(&out, |o| {
            let mut second = out2.clone();
            recurrence::vtrace(par, tm, &rewards, &vals, &boot, &rhos, episodes, params, o, &mut second)
        });
        prop_assert!(vtrace);
        // The same through the kernel trait of the Cpu device.
        let cpu = Cpu::new(par);
        let on_device = Episodes::Flags { gamma, terminated: &flags, truncation: Some(Truncation { truncated: &flags, final_values: &fv }) };
        let mut o = out.clone();
        let _ = cpu.discounted_returns(tm, &rewards, on_device, &boot, &mut o);
        let _ = cpu.gae(tm, &rewards, &vals, &boot, on_device, lambda, &mut o, None);
        let _ = cpu.n_step_returns(tm, &rewards, &vals, on_device, n, &mut o);
        let _ = episode_step(gamma, lambda, kind > 2, Some((kind > 3, gamma)));
        let _ = layout::transpose(&values, t, b, n);
    }

    #[test]
    fn prop_sequence_kernels(
        lengths in strategies::vec(size(), 0..5),
        max_len in proptest::option::of(size()),
        features in prop_oneof![4 => 0usize..4, 1 => size()],
        values in strategies::vec(strategies::any_value::<f32>(), 0..80),
        picks in strategies::vec(any::<usize>(), 8),
        (shift, scale) in (strategies::any_value::<f32>(), strategies::any_value::<f32>()),
        threads in 1usize..4,
    ) {
        let _ = sequence_mask(&lengths, max_len);
        let Ok(seqs) = Sequences::new(&lengths, max_len) else {
            return Ok(());
        };
        let _ = seqs.mask();
        let _ = seqs.sequence_of(picks[0]);
        let par = Par::rayon(threads);
        let packed = seqs.total().checked_mul(features);
        let padded = seqs.padded_steps().checked_mul(features);
        let flat = data(packed, &values, picks[1]);
        let x = data(padded, &values, picks[2]);
        let other = data(padded, &values, picks[3]);
        let per_sequence = data(Some(seqs.batch()), &values, picks[4]);
        for order in [PadOrder::BatchMajor, PadOrder::TimeMajor] {
            let _ = sequence::pad_new(par, &seqs, features, order, &flat);
            let _ = sequence::unpad_new(par, &seqs, features, order, &x);
            prop_assert!(unchanged_on_error(&x, |o| sequence::pad(par, &seqs, features, order, &flat, o)));
            prop_assert!(unchanged_on_error(&flat, |o| sequence::unpad(par, &seqs, features, order, &x, o)));
        }
        for term in [
            MaskedTerm::Value,
            MaskedTerm::SquaredDeviation { mean: shift },
            MaskedTerm::Product { other: &other[..], shift },
        ] {
            let _ = sequence::masked_sum(par, &seqs, features, &x, term);
        }
        prop_assert!(unchanged_on_error(&per_sequence, |o| sequence::sequence_sums(par, &seqs, features, &x, o)));
        for map in [
            MaskedMap::Fill(shift),
            MaskedMap::PerSequence(&per_sequence[..]),
            MaskedMap::Scale { shift, scale },
            MaskedMap::Standardize { mean: shift, denominator: scale },
            MaskedMap::StandardizeBackward { grad: &other[..], grad_mean: shift, mean: scale, denominator: shift, coefficient: scale },
        ] {
            for input in [Some(&x[..]), None] {
                prop_assert!(unchanged_on_error(&other, |o| sequence::masked_map(par, &seqs, features, input, map, o)));
            }
        }
        let cpu = Cpu::new(par);
        let (xv, mut o) = (x.clone(), other.clone());
        let _ = SequenceKernel::masked_sum(&cpu, &seqs, features, &xv, MaskedTerm::Value);
        let _ = cpu.masked_map(&seqs, features, Some(&xv), MaskedMap::Fill(shift), &mut o);
    }

    #[test]
    fn prop_optimizer_kernels_and_the_cpu_device(
        len in size(),
        param in strategies::vec(strategies::any_value::<f32>(), 0..6),
        grad in strategies::vec(strategies::any_value::<f32>(), 0..6),
        slots in strategies::vec(strategies::vec(strategies::any_value::<f32>(), 0..6), 0..4),
        amsgrad in any::<bool>(),
        threads in 1usize..4,
    ) {
        let cpu = Cpu::new(Par::rayon(threads));
        prop_assert_eq!(cpu.alloc_zeros::<f32>(len).is_ok(), len < 1 << 20);
        let buffer = cpu.upload(&param).unwrap();
        prop_assert_eq!(bits(&cpu.download(&buffer).unwrap()), bits(&param));
        prop_assert_eq!(cpu.buffer_len(&buffer), param.len());
        let update = Update::Adam(rlgrad_core::kernels::optim::Adam::Torch(AdamTorch {
            step_size: 1e-3,
            bias_correction2_sqrt: 0.1,
            one_minus_beta1: 0.1,
            beta2: 0.999,
            one_minus_beta2: 0.001,
            eps: 1e-8,
            weight_decay: 0.0,
            decoupled_keep: 1.0,
            amsgrad,
        }));
        let (mut p, mut s) = (param.clone(), slots.clone());
        let result = optim::update(Par::rayon(threads), &update, &mut p, &grad, &mut s.iter_mut().map(Vec::as_mut_slice).collect::<Vec<_>>());
        if result.is_err() {
            prop_assert_eq!(bits(&p), bits(&param));
            prop_assert!(s.iter().zip(&slots).all(|(a, b)| bits(a) == bits(b)));
        }
        let (mut p, mut s) = (param.clone(), slots.clone());
        let mut refs: Vec<&mut Vec<f32>> = s.iter_mut().collect();
        if cpu.update(&update, &mut p, &grad, &mut refs).is_err() {
            prop_assert_eq!(bits(&p), bits(&param));
        }
    }
}
