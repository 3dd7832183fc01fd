//! Matmul GFLOP/s (criterion's "elements" are floating-point operations, 2mnk) at square
//! sizes 64, 256 and 1024, and at TD3's critic layer 256x400 @ 400x300 (the GEMM rate the
//! peers' W7 reports for torch).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rlgrad_core::{Cpu, Rng};
use rlgrad_tensor::Tensor;

fn matmul(c: &mut Criterion) {
    let thread_counts = rlgrad_benches::thread_counts();
    let mut group = c.benchmark_group("matmul_f32");
    let shapes = [
        (64, 64, 64),
        (256, 256, 256),
        (1024, 1024, 1024),
        (256, 400, 300),
    ];
    for (m, k, n) in shapes {
        group.throughput(Throughput::Elements((2 * m * k * n) as u64));
        for threads in &thread_counts {
            let cpu = Cpu::new(threads.par());
            let mut rng = Rng::new(1, "bench-matmul");
            let a = Tensor::<f32>::rand_normal([m, k], 0.0, 1.0, &mut rng).unwrap();
            let b = Tensor::<f32>::rand_normal([k, n], 0.0, 1.0, &mut rng).unwrap();
            let (a, b) = (
                Tensor::from_vec_on(&cpu, a.to_vec().unwrap(), [m, k]).unwrap(),
                Tensor::from_vec_on(&cpu, b.to_vec().unwrap(), [k, n]).unwrap(),
            );
            threads.bench(&mut group, &format!("{m}x{k}x{n}"), || {
                black_box(&a).matmul(black_box(&b)).unwrap()
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = rlgrad_benches::criterion();
    targets = matmul
}
criterion_main!(benches);
