//! One optimizer step on one flat f32 parameter of 1M and 16M elements (the peers' W1):
//! Adam (PyTorch flavor, lr 1e-3, betas 0.9 / 0.999, eps 1e-8), AdamW and SGD with
//! momentum 0.9. Throughput counts W1's 28 bytes per parameter for Adam and AdamW (read
//! p, g, m, v; write p, m, v) and 20 for momentum (read p, g, buf; write p, buf).
//!
//! Adam, the step the peers time, is checked first: three steps of a fresh optimizer
//! against PyTorch's formula in float64.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rlgrad_benches::{Threads, Tolerance, check, thread_counts};
use rlgrad_core::Rng;
use rlgrad_core::cpu::alloc;
use rlgrad_optim::{Adam, AdamW, Momentum, MomentumFlavor, Optimizer, Param, Rule};

const LR: f64 = 1e-3;
const INITIAL: f32 = 0.5;
const CHECKED_STEPS: u32 = 3;

/// `CHECKED_STEPS` of `torch.optim.Adam` (betas 0.9 / 0.999, eps 1e-8 outside the square
/// root) from `INITIAL`, in float64.
fn reference_adam(grad: &[f32]) -> Vec<f64> {
    let (beta1, beta2, eps) = (0.9f64, 0.999f64, 1e-8f64);
    grad.iter()
        .map(|&g| {
            let g = f64::from(g);
            let (mut p, mut m, mut v) = (f64::from(INITIAL), 0.0, 0.0);
            for t in 1..=CHECKED_STEPS {
                m = beta1 * m + (1.0 - beta1) * g;
                v = beta2 * v + (1.0 - beta2) * g * g;
                let corrected_v = v / (1.0 - beta2.powi(t as i32));
                p -= LR / (1.0 - beta1.powi(t as i32)) * m / (corrected_v.sqrt() + eps);
            }
            p
        })
        .collect()
}

/// Whether `CHECKED_STEPS` of Adam at `threads` match PyTorch's formula; prints the
/// `compare-check` line of bench `id`.
fn check_adam(id: &str, threads: &Threads, grad: &[f32]) -> bool {
    let mut opt = Optimizer::<f32>::new(Adam::torch(), LR).unwrap();
    opt.set_par(threads.par());
    let mut param = alloc::try_zeroed::<f32>(grad.len(), "bench", "n").unwrap();
    param.fill(INITIAL);
    threads.install(|| {
        for _ in 0..CHECKED_STEPS {
            opt.step(&mut [Param {
                name: "p",
                value: &mut param,
                grad,
            }])
            .unwrap();
        }
    });
    let tolerance = Tolerance {
        abs: 1e-6,
        rel: 0.0,
    };
    check(id, &param, &reference_adam(grad), tolerance)
}

fn steps(c: &mut Criterion) {
    let thread_counts = thread_counts();
    for (label, n) in [("1M", 1usize << 20), ("16M", 16 << 20)] {
        let mut rng = Rng::new(6, "bench-optim");
        // Buffers from rlgrad's own allocator, as a Tensor or an optimizer slot gets them.
        let mut grad = alloc::try_zeroed::<f32>(n, "bench", "n").unwrap();
        grad.iter_mut().for_each(|g| *g = rng.normal(0.0, 0.01));
        let group_name = format!("optim_f32/{label}");
        let mut group = c.benchmark_group(&group_name);
        if n > 1 << 20 {
            group.sample_size(10);
        }
        let rules: [(&str, Box<dyn Rule<f32>>, usize); 3] = [
            ("adam", Box::new(Adam::torch()), 28),
            ("adamw", Box::new(AdamW::default()), 28),
            (
                "momentum",
                Box::new(Momentum::new(MomentumFlavor::Torch)),
                20,
            ),
        ];
        for (name, rule, bytes) in rules {
            let mut opt = Optimizer::<f32>::new(rule, LR).unwrap();
            let mut param = alloc::try_zeroed::<f32>(n, "bench", "n").unwrap();
            param.fill(INITIAL);
            group.throughput(Throughput::Bytes((bytes * n) as u64));
            for threads in &thread_counts {
                let id = format!("{group_name}/{}", threads.id(name));
                if name == "adam" && !check_adam(&id, threads, &grad) {
                    continue;
                }
                opt.set_par(threads.par());
                threads.bench(&mut group, name, || {
                    opt.step(&mut [Param {
                        name: "p",
                        value: &mut param,
                        grad: black_box(&grad),
                    }])
                    .unwrap()
                });
            }
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = steps
}
criterion_main!(benches);
