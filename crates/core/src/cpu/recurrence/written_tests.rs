//! The GAE kernels written with intrinsics against the generic scans: time-major
//! ([`super::avx2::advantages`], [`super::avx512::advantages`]) and batch-major
//! ([`super::avx512::rows_gae`], [`super::avx2::rows_advantages`]).

use std::sync::atomic::{AtomicBool, Ordering};

use super::{
    ByStep, Constant, Flags, GaeF32, GaeScan, Rows, Steps, Terminations, avx2, avx512, gae,
};
use crate::Par;
use crate::Rng;
use crate::cpu::simd::Isa;
use crate::kernels::recurrence::{Episodes, FlagSlice, TimeMajor};

/// `[t, b]` time-major data laid out batch-major.
fn batch_major<E: Copy>(x: &[E], t: usize, b: usize) -> Vec<E> {
    (0..t * b).map(|i| x[(i % t) * b + i / t]).collect()
}

/// A batch-major kernel: `(data, columns, advantages, returns) -> invalid flags seen`.
type Kernel =
    unsafe fn(&GaeF32<'_>, std::ops::Range<usize>, &mut [f32], Option<&mut [f32]>) -> bool;

/// `kernel`'s advantages of columns `columns` against the time-major generic scan's, bit
/// for bit, and both verdicts on the flags.
#[allow(clippy::too_many_arguments)]
fn check(
    kernel: Kernel,
    t: usize,
    b: usize,
    flags: &[f32],
    kind: &str,
    gamma: f32,
    lambda: f32,
    columns: std::ops::Range<usize>,
    rng: &mut Rng,
) {
    let mut draw =
        |n: usize| -> Vec<f32> { (0..n).map(|_| rng.uniform_f32() * 4.0 - 2.0).collect() };
    let (rewards, mut values, bootstrap) = (draw(t * b), draw(t * b), draw(b));
    // What follows a termination never reaches the steps before it: poison some.
    for i in b..t * b {
        if flags[i - b] == 1.0 && i % 3 == 0 {
            values[i] = f32::NAN;
        }
    }
    let bytes: Vec<u8> = flags
        .iter()
        .map(|&f| {
            if f == 1.0 {
                1
            } else if f == 0.0 {
                0
            } else {
                2
            }
        })
        .collect();
    let episodes = match kind {
        "values" => Episodes::terminations(gamma, flags),
        "bytes" => Episodes::Flags {
            gamma,
            terminated: FlagSlice::Bytes(&bytes),
            truncation: None,
        },
        _ => Episodes::Constant { gamma },
    };
    let (mut want, mut want_returns) = (vec![0.0f32; t * b], vec![0.0f32; t * b]);
    let verdict = gae(
        Par::Seq,
        TimeMajor::new(t, b),
        &rewards,
        &values,
        &bootstrap,
        episodes,
        lambda,
        &mut want,
        Some(&mut want_returns),
    );
    let (flags_bm, bytes_bm) = (batch_major(flags, t, b), batch_major(&bytes, t, b));
    let (rewards_bm, values_bm) = (batch_major(&rewards, t, b), batch_major(&values, t, b));
    // The rewards `shift` elements into their buffer, so that their lines and the values'
    // split differently.
    let shift = rng.below(16) as usize;
    let mut shifted = vec![0.0f32; shift];
    shifted.extend(&rewards_bm);
    let rows = GaeF32 {
        t,
        b,
        rewards: &shifted[shift..],
        values: &values_bm,
        bootstrap: &bootstrap,
        flags: match kind {
            "values" => Flags::Values(&flags_bm),
            "bytes" => Flags::Bytes(&bytes_bm),
            _ => Flags::None,
        },
        gamma,
        lambda,
    };
    // Advantages alone, then with the returns: the same advantages, and `A + v`.
    for with_returns in [false, true] {
        let mut out = vec![0.0f32; columns.len() * t];
        let mut returns = vec![0.0f32; columns.len() * t];
        let returned = with_returns.then_some(&mut returns[..]);
        // SAFETY: the test runs each kernel only where the CPU has its instruction set.
        let bad = unsafe { kernel(&rows, columns.clone(), &mut out, returned) };
        let what = format!(
            "[{t}, {b}] {kind} flags, gamma {gamma}, lambda {lambda}, {columns:?}, \
             rewards {shift} in, returns {with_returns}"
        );
        assert_eq!(bad, verdict.is_err(), "{what}: the flags' verdict");
        if bad {
            return;
        }
        let bits_of = |x: &[f32], columns: std::ops::Range<usize>| -> Vec<u32> {
            let x = batch_major(x, t, b);
            x[columns.start * t..columns.end * t]
                .iter()
                .map(|x| x.to_bits())
                .collect()
        };
        let got: Vec<u32> = out.iter().map(|x| x.to_bits()).collect();
        assert!(got == bits_of(&want, columns.clone()), "{what}: advantages");
        if with_returns {
            let got: Vec<u32> = returns.iter().map(|x| x.to_bits()).collect();
            assert!(
                got == bits_of(&want_returns, columns.clone()),
                "{what}: returns"
            );
        }
    }
}

/// Each batch-major kernel (AVX-512: 16 columns, AVX2: 8) gives the generic scan's bits:
/// one line of steps and stages of 8 lines with a short first one, a vector of columns and
/// more (the last vector overlapping), a range of columns inside the data, the rewards at
/// every alignment; `f32` flags (1, 0, -0), bytes and a constant gamma; gamma 0 and -0,
/// lambda 0; and it refuses flags of 0.5, NaN, 2 and -1 (and bytes of 2) as the generic
/// scan does.
#[test]
fn the_batch_major_gae_kernels_give_the_generic_scans_bits() {
    let kernels: [(Isa, usize, Kernel); 2] = [
        (Isa::Avx512, 16, avx512::rows_gae),
        (Isa::Avx2, 8, avx2::rows_advantages),
    ];
    for (isa, lanes, kernel) in kernels {
        if isa.is_supported() {
            check_kernel(kernel, lanes);
        }
    }
}

fn check_kernel(kernel: Kernel, lanes: usize) {
    let mut rng = Rng::new(46, "batch-major kernels");
    for (t, b) in [
        (16, lanes),
        (32, 17),
        (288, 40),
        (128, 33),
        (160, 64),
        (48, 9),
    ] {
        if b < lanes {
            continue;
        }
        let mut flags: Vec<f32> = (0..t * b)
            .map(|i| match (rng.uniform_f32() > 0.8, i % 2) {
                (true, _) => 1.0,
                (false, 0) => 0.0,
                (false, _) => -0.0,
            })
            .collect();
        for kind in ["values", "bytes", "constant"] {
            for (gamma, lambda) in [(0.99, 0.95), (0.0, 0.95), (-0.0, 0.5), (0.9, 0.0)] {
                check(kernel, t, b, &flags, kind, gamma, lambda, 0..b, &mut rng);
                if b > lanes {
                    check(kernel, t, b, &flags, kind, gamma, lambda, 1..b, &mut rng);
                }
            }
        }
        for bad in [0.5, f32::NAN, 2.0, -1.0] {
            let at = (t * b) / 2 + 5;
            let kept = flags[at];
            flags[at] = bad;
            for kind in ["values", "bytes"] {
                check(kernel, t, b, &flags, kind, 0.99, 0.95, 0..b, &mut rng);
            }
            flags[at] = kept;
        }
    }
}

/// One rollout: rewards, values (NaN behind some terminations, which must never
/// reach the steps before them), bootstrap, and flags as `f32` and as bytes.
struct Rollout {
    t: usize,
    b: usize,
    rewards: Vec<f32>,
    values: Vec<f32>,
    bootstrap: Vec<f32>,
    flags: Vec<f32>,
    bytes: Vec<u8>,
}

impl Rollout {
    fn new(t: usize, b: usize) -> Self {
        let mut rng = Rng::new((t * 1000 + b) as u64, "avx2-gae");
        let mut draw =
            |n: usize| -> Vec<f32> { (0..n).map(|_| rng.uniform_f32() * 4.0 - 2.0).collect() };
        let (rewards, mut values, bootstrap, coins) =
            (draw(t * b), draw(t * b), draw(b), draw(t * b));
        // Flags of 1, 0 and -0 (both clear).
        let flags: Vec<f32> = coins
            .iter()
            .enumerate()
            .map(|(i, &c)| match (c > 1.2, i % 2) {
                (true, _) => 1.0,
                (false, 0) => 0.0,
                (false, _) => -0.0,
            })
            .collect();
        for i in b..t * b {
            if flags[i - b] == 1.0 && i % 3 == 0 {
                values[i] = f32::NAN;
            }
        }
        let bytes = flags.iter().map(|&f| u8::from(f == 1.0)).collect();
        Self {
            t,
            b,
            rewards,
            values,
            bootstrap,
            flags,
            bytes,
        }
    }
}

/// Columns `first..first + W` by the generic scan (with `steps[0]`) and by
/// `isa`'s kernel (with `steps[1]`, through `written_advantages`), advantages alone
/// and with the returns: the outputs' bits, and whether each recorded an invalid flag
/// in `records`.
fn both<const W: usize, S: Steps<f32>>(
    isa: Isa,
    rollout: &Rollout,
    steps: [S; 2],
    records: &[AtomicBool; 2],
    lambda: f32,
    first: usize,
) -> [(Vec<u32>, bool); 2] {
    let (t, b) = (rollout.t, rollout.b);
    let run = |steps: &S, invalid: &AtomicBool, fast: bool| {
        let scan = GaeScan {
            layout: TimeMajor::new(t, b),
            order: ByStep { b },
            steps,
            values: &rollout.values,
            bootstrap: &rollout.bootstrap,
            lambda,
            init: None,
        };
        // Advantages alone, then with the returns.
        let mut bits = Vec::new();
        for with_returns in [false, true] {
            let (mut advantages, mut returns) = (vec![0.0f32; t * b], vec![0.0f32; t * b]);
            let mut rows = Rows::Dense {
                data: &mut advantages,
                b,
            };
            let mut returned = Rows::Dense {
                data: &mut returns,
                b,
            };
            let returned = with_returns.then_some(&mut returned);
            if fast {
                assert!(scan.written_advantages::<W, _>(isa, first, first, &mut rows, returned));
            } else {
                scan.scan_into::<W, false, _>(first, first, &mut rows, returned);
            }
            let outs = if with_returns {
                vec![advantages, returns]
            } else {
                vec![advantages]
            };
            for out in outs {
                bits.extend(
                    (0..t)
                        .flat_map(|s| out[s * b + first..s * b + first + W].to_vec())
                        .map(f32::to_bits),
                );
            }
        }
        (bits, invalid.load(Ordering::Relaxed))
    };
    [
        run(&steps[0], &records[0], false),
        run(&steps[1], &records[1], true),
    ]
}

fn check_time_major<const W: usize>(isa: Isa, rollout: &Rollout, gamma: f32, lambda: f32) {
    if rollout.b < W {
        return;
    }
    for first in [0, rollout.b - W] {
        let what = format!(
            "{isa} [{}, {}] W {W} from {first}, gamma {gamma}, lambda {lambda}",
            rollout.t, rollout.b
        );
        let records = [AtomicBool::new(false), AtomicBool::new(false)];
        let terminations = |k: usize| Terminations {
            rewards: &rollout.rewards[..],
            terminated: &rollout.flags[..],
            gamma,
            invalid: &records[k],
        };
        let steps = [terminations(0), terminations(1)];
        let [want, got] = both::<W, _>(isa, rollout, steps, &records, lambda, first);
        assert!(want == got, "f32 flags, {what}");
        let records = [AtomicBool::new(false), AtomicBool::new(false)];
        let bytes = |k: usize| Terminations {
            rewards: &rollout.rewards[..],
            terminated: &rollout.bytes[..],
            gamma,
            invalid: &records[k],
        };
        let steps = [bytes(0), bytes(1)];
        let [want, got] = both::<W, _>(isa, rollout, steps, &records, lambda, first);
        assert!(want == got, "byte flags, {what}");
        let constant = Constant {
            rewards: &rollout.rewards[..],
            gamma,
        };
        let records = [AtomicBool::new(false), AtomicBool::new(false)];
        let [want, got] = both::<W, _>(isa, rollout, [constant; 2], &records, lambda, first);
        assert!(want == got, "constant gamma, {what}");
    }
}

/// Each time-major kernel (AVX2: blocks of 8 to 128 columns; AVX-512: of 256) gives
/// the generic scan's bits on every width it takes, at the first and the last columns,
/// for one step and many, with `f32` flags (1, 0 and -0), bytes and a constant gamma,
/// gamma 0 (every step cut), `lambda` 0, advantages alone and with the returns; and it
/// records a flag of 0.5, NaN, 2 or -1 (and a byte of 2) as the generic scan does.
#[test]
fn the_time_major_gae_kernels_give_the_generic_scans_bits() {
    for (t, b) in [
        (1, 16),
        (2, 16),
        (37, 64),
        (5, 72),
        (9, 300),
        (3, 256),
        (2, 512),
    ] {
        let mut rollout = Rollout::new(t, b);
        for (gamma, lambda) in [(0.99, 0.95), (0.0, 0.95), (-0.0, 0.5), (0.9, 0.0)] {
            if Isa::Avx2.is_supported() {
                check_time_major::<8>(Isa::Avx2, &rollout, gamma, lambda);
                check_time_major::<64>(Isa::Avx2, &rollout, gamma, lambda);
                check_time_major::<128>(Isa::Avx2, &rollout, gamma, lambda);
            }
            if Isa::Avx512.is_supported() {
                check_time_major::<256>(Isa::Avx512, &rollout, gamma, lambda);
            }
        }
        for bad in [0.5, f32::NAN, 2.0, -1.0] {
            let at = (t * b) / 2 + 3;
            let (flag, byte) = (rollout.flags[at], rollout.bytes[at]);
            rollout.flags[at] = bad;
            rollout.bytes[at] = 2;
            if Isa::Avx2.is_supported() {
                check_time_major::<8>(Isa::Avx2, &rollout, 0.99, 0.95);
                check_time_major::<64>(Isa::Avx2, &rollout, 0.99, 0.95);
            }
            if Isa::Avx512.is_supported() {
                check_time_major::<256>(Isa::Avx512, &rollout, 0.99, 0.95);
            }
            (rollout.flags[at], rollout.bytes[at]) = (flag, byte);
        }
    }
}
