//! `cargo xtask calibrate`: where a second thread starts to pay, per kernel family.
//!
//! For each family of [`rlgrad_core::cpu::grain`], one representative kernel (the cheapest
//! per element of the family, so that a grain that suits it suits the rest) runs at
//! geometric sizes on one thread, and on two threads with the grain forced to 1 so that
//! it always splits, in a rayon pool whose workers are kept awake as in a training loop.
//! Each time is the fastest of 7 batches of calls. The crossover is the smallest
//! size from which two threads are at least 10% faster at every larger size; a split needs
//! two tasks, so the grain it suggests is half of it. The table and the JSON
//! (`--out FILE`) say the default grain beside the measurement; results never depend on
//! grains, only speed does.

use std::hint::black_box;

use rlgrad_core::cpu::grain::{self, Family};
use rlgrad_core::cpu::{cell, optim, recurrence, sequence};
use rlgrad_core::kernels::cell::LstmForward;
use rlgrad_core::kernels::optim::{Adam, AdamTorch, Update};
use rlgrad_core::kernels::recurrence::{SliceLayout, TimeMajor};
use rlgrad_core::kernels::sequence::{PadOrder, Sequences};
use rlgrad_core::kernels::{BinaryOp, ElementwiseKernel, MatmulKernel, ReduceKernel, ReduceOp};
use rlgrad_core::{Cpu, Layout, Par, Rng, Shape, View, keep_workers_awake};
use serde::Serialize;

/// Two threads are "faster" from this ratio of one thread's time to theirs.
const PAYS: f64 = 1.1;

#[derive(Serialize)]
struct Point {
    size: usize,
    one_thread_us: f64,
    two_threads_us: f64,
    speedup: f64,
}

#[derive(Serialize)]
struct FamilyResult {
    family: &'static str,
    unit: &'static str,
    kernel: &'static str,
    default_grain: usize,
    /// `None`: two threads never paid at the sizes measured.
    crossover: Option<usize>,
    suggested_grain: Option<usize>,
    points: Vec<Point>,
}

/// One family's kernel at a size: a closure that runs it once with the given `Par`.
type Kernel = Box<dyn FnMut(Par) + Send>;

fn random(len: usize, seed: u64) -> Vec<f32> {
    let mut rng = Rng::new(seed, "calibrate");
    (0..len).map(|_| rng.normal(0.0, 1.0)).collect()
}

/// The representative kernel of `family` with about `size` units of work, and its name.
fn kernel(family: Family, size: usize) -> (&'static str, Kernel) {
    match family {
        Family::Elementwise => {
            let (x, y) = (random(size, 1), random(size, 2));
            let layout = Layout::contiguous(Shape::from([size]));
            let mut out = vec![0.0f32; size];
            let run = move |par| {
                let (vx, vy) = (View::new(&x, &layout), View::new(&y, &layout));
                Cpu::new(par)
                    .binary(BinaryOp::Mul, vx, vy, &mut out)
                    .expect("valid views");
                black_box(&out);
            };
            ("x * y", Box::new(run))
        }
        Family::Reduce => {
            let x = random(size, 3);
            let layout = Layout::contiguous(Shape::from([size]));
            let mut out = vec![0.0f32; 1];
            let run = move |par| {
                Cpu::new(par)
                    .reduce(ReduceOp::Sum, View::new(&x, &layout), None, &mut out)
                    .expect("valid view");
                black_box(&out);
            };
            ("sum", Box::new(run))
        }
        Family::Matmul => {
            // A cube: m = n = k.
            let side = (size as f64).cbrt().round().max(1.0) as usize;
            let (a, b) = (random(side * side, 4), random(side * side, 5));
            let layout = Layout::contiguous(Shape::from([side, side]));
            let mut out = vec![0.0f32; side * side];
            let run = move |par| {
                Cpu::new(par)
                    .matmul(View::new(&a, &layout), View::new(&b, &layout), &mut out)
                    .expect("valid views");
                black_box(&out);
            };
            ("[s,s] @ [s,s]", Box::new(run))
        }
        Family::Recurrence => {
            let layout = TimeMajor::new(128, size.div_ceil(128));
            let len = layout.t * layout.b;
            let (x, c) = (random(len, 6), vec![0.99f32; len]);
            let init = random(layout.b, 7);
            let mut out = vec![0.0f32; len];
            let run = move |par| {
                recurrence::linear_recurrence(par, layout, &x, &c, &init, &mut out)
                    .expect("valid lengths");
                black_box(&out);
            };
            ("linear_recurrence [128, B]", Box::new(run))
        }
        Family::BatchMajor => {
            let layout = SliceLayout::batch_major(128, size.div_ceil(128));
            let len = layout.shape().t * layout.shape().b;
            let (x, c) = (random(len, 6), vec![0.99f32; len]);
            let init = random(layout.shape().b, 7);
            let mut out = vec![0.0f32; len];
            let run = move |par| {
                recurrence::linear_recurrence(par, layout, &x, &c, &init, &mut out)
                    .expect("valid lengths");
                black_box(&out);
            };
            ("linear_recurrence [B, 128]", Box::new(run))
        }
        Family::Sequence => {
            // Sequences of 32 steps of 32 features, padded to 48 steps.
            let (steps, features) = (32, 32);
            let batch = size.div_ceil(steps * features).max(1);
            let seqs = Sequences::new(&vec![steps; batch], Some(48)).expect("valid lengths");
            let padded = random(batch * 48 * features, 8);
            let mut flat = vec![0.0f32; batch * steps * features];
            let run = move |par| {
                sequence::unpad(
                    par,
                    &seqs,
                    features,
                    PadOrder::BatchMajor,
                    &padded,
                    &mut flat,
                )
                .expect("valid lengths");
                black_box(&flat);
            };
            ("unpad into [N, 32]", Box::new(run))
        }
        Family::Optim => {
            let grad = random(size, 9);
            let (mut param, mut m, mut v) = (random(size, 10), vec![0.0f32; size], vec![0.0; size]);
            let update = Update::Adam(Adam::Torch(AdamTorch {
                step_size: 1e-3,
                bias_correction2_sqrt: 0.1,
                one_minus_beta1: 0.1,
                beta2: 0.999,
                one_minus_beta2: 0.001,
                eps: 1e-8,
                weight_decay: 0.0,
                decoupled_keep: 1.0,
                amsgrad: false,
            }));
            let run = move |par| {
                optim::update(par, &update, &mut param, &grad, &mut [&mut m, &mut v])
                    .expect("valid lengths");
                black_box(&param);
            };
            ("Adam", Box::new(run))
        }
        Family::Cell => {
            let batch = 64;
            let hidden = size.div_ceil(batch).max(1);
            let gates = random(batch * 4 * hidden, 11);
            let c = random(batch * hidden, 12);
            let mut cache = vec![0.0f32; batch * 5 * hidden];
            let mut state = vec![0.0f32; 2 * batch * hidden];
            let run = move |par| {
                let buffers = LstmForward {
                    gates: gates.as_slice(),
                    c: c.as_slice(),
                    cache: cache.as_mut_slice(),
                    state: state.as_mut_slice(),
                };
                cell::lstm_cell(par, batch, hidden, buffers).expect("valid lengths");
                black_box(&state);
            };
            ("LSTM cell forward [64, H]", Box::new(run))
        }
    }
}

/// Microseconds per call of `run(par)` ([`rlgrad_benches::seconds_per_call`]).
fn time(run: &mut (dyn FnMut(Par) + Send), par: Par) -> f64 {
    rlgrad_benches::seconds_per_call(|| run(par)) * 1e6
}

/// The sizes measured for `family`.
fn sizes(family: Family, quick: bool) -> Vec<usize> {
    let (low, high) = match family {
        Family::Matmul => (12, 24),
        Family::Recurrence | Family::Sequence => (14, 23),
        Family::BatchMajor => (11, 23),
        _ => (10, 22),
    };
    let step = if quick { 2 } else { 1 };
    (low..=high).step_by(step).map(|p| 1usize << p).collect()
}

fn calibrate(family: Family, pool: &rayon::ThreadPool, quick: bool) -> FamilyResult {
    let mut name = "";
    let points: Vec<Point> = sizes(family, quick)
        .into_iter()
        .map(|size| {
            let (kernel_name, mut run) = kernel(family, size);
            name = kernel_name;
            let one = time(&mut run, Par::Seq);
            grain::set_grain(family, Some(1));
            let two = pool.install(|| keep_workers_awake(|| time(&mut run, Par::rayon(2))));
            grain::set_grain(family, None);
            Point {
                size,
                one_thread_us: one,
                two_threads_us: two,
                speedup: one / two,
            }
        })
        .collect();
    // The first size from which every measured size pays.
    let crossover = (0..points.len())
        .find(|&i| points[i..].iter().all(|p| p.speedup >= PAYS))
        .map(|i| points[i].size);
    FamilyResult {
        family: family.name(),
        unit: family.unit(),
        kernel: name,
        default_grain: grain::default_grain(family),
        crossover,
        suggested_grain: crossover.map(|c| c / 2),
        points,
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut quick, mut out, mut only) = (false, None, None);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--quick" => quick = true,
            "--out" => out = args.next(),
            "--only" => only = args.next(),
            other => {
                eprintln!(
                    "calibrate: unknown argument `{other}` (--quick, --only FAMILY, --out FILE)"
                );
                std::process::exit(2);
            }
        }
    }
    let families: Vec<Family> = Family::ALL
        .into_iter()
        .filter(|f| {
            only.as_deref()
                .is_none_or(|o| o.split(',').any(|n| n == f.name()))
        })
        .collect();
    if families.is_empty() {
        eprintln!("calibrate: --only names no family");
        std::process::exit(2);
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(2)
        .build()
        .expect("a pool of 2 threads");
    println!(
        "calibrate: 1 thread vs 2 (forced to split), ISA {}",
        rlgrad_core::cpu::simd::isa()
    );
    let mut results = Vec::new();
    for family in families {
        let result = calibrate(family, &pool, quick);
        println!("\n{} ({}, {}):", result.family, result.kernel, result.unit);
        println!(
            "{:>10} {:>12} {:>12} {:>8}",
            "size", "1t us", "2t us", "speedup"
        );
        for p in &result.points {
            println!(
                "{:>10} {:>12.2} {:>12.2} {:>7.2}x",
                p.size, p.one_thread_us, p.two_threads_us, p.speedup
            );
        }
        let measured = result.crossover.map_or_else(
            || "two threads never paid".to_owned(),
            |c| format!("crossover {c}, suggested grain {}", c / 2),
        );
        println!("default grain {}; {measured}", result.default_grain);
        results.push(result);
    }
    if let Some(path) = out {
        let json = serde_json::to_string_pretty(&results).expect("the results serialize");
        if let Err(e) = std::fs::write(&path, json) {
            eprintln!("calibrate: cannot write {path}: {e}");
            std::process::exit(1);
        }
        println!("\nJSON: {path}");
    }
}
