//! One optimizer step on one flat f32 parameter of 1M and 16M elements (the peers' W1):
//! Adam (PyTorch flavor, lr 1e-3, betas 0.9 / 0.999, eps 1e-8), AdamW and SGD with
//! momentum 0.9. Throughput counts W1's 28 bytes per parameter for Adam and AdamW (read
//! p, g, m, v; write p, m, v) and 20 for momentum (read p, g, buf; write p, buf).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rlgrad_core::cpu::alloc;
use rlgrad_core::{Par, Rng};
use rlgrad_optim::{Adam, AdamW, Momentum, MomentumFlavor, Optimizer, Param, Rule};

fn steps(c: &mut Criterion) {
    for (label, n) in [("1M", 1usize << 20), ("16M", 16 << 20)] {
        let mut rng = Rng::new(6, "bench-optim");
        // Buffers from rlgrad's own allocator, as a Tensor or an optimizer slot gets them.
        let mut grad = alloc::try_zeroed::<f32>(n, "bench", "n").unwrap();
        grad.iter_mut().for_each(|g| *g = rng.normal(0.0, 0.01));
        let mut group = c.benchmark_group(format!("optim_f32/{label}"));
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
            let mut opt = Optimizer::<f32>::new(rule, 1e-3).unwrap();
            let mut param = alloc::try_zeroed::<f32>(n, "bench", "n").unwrap();
            param.fill(0.5);
            group.throughput(Throughput::Bytes((bytes * n) as u64));
            for threads in [1, 2] {
                opt.set_par(Par::rayon(threads));
                group.bench_function(format!("{name}/{threads}t"), |b| {
                    b.iter(|| {
                        opt.step(&mut [Param {
                            name: "p",
                            value: &mut param,
                            grad: black_box(&grad),
                        }])
                        .unwrap()
                    })
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
