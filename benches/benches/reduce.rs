//! The canonical sum of 64M f32 beside a plain `iter().sum()`, the fastest unordered
//! read of the same data (the read bandwidth ceiling) and the bandwidth of a copy of the
//! same size (throughput in bytes: the sums read 4 B per element, the copy moves 8).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rlgrad_benches::{parallel_copy, read_ceiling};
use rlgrad_core::{Par, Rng, reduce};

const LEN: usize = 64 << 20;

fn sum_64m(c: &mut Criterion) {
    let mut rng = Rng::new(0, "bench-sum");
    let x: Vec<f32> = (0..LEN).map(|_| rng.uniform_f32()).collect();
    let mut dst = vec![0.0f32; LEN];
    let mut group = c.benchmark_group("sum_64m_f32");
    group.throughput(Throughput::Bytes((LEN * 4) as u64));
    for threads in [1, 2] {
        let par = Par::rayon(threads);
        group.bench_function(format!("canonical/{threads}t"), |b| {
            b.iter(|| reduce::sum(black_box(&x), par))
        });
    }
    group.bench_function("iter_sum/1t", |b| {
        b.iter(|| black_box(&x).iter().sum::<f32>())
    });
    for threads in [1, 2] {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        group.bench_function(format!("read_ceiling/{threads}t"), |b| {
            b.iter(|| pool.install(|| read_ceiling(black_box(&x), threads)))
        });
    }
    group.throughput(Throughput::Bytes((LEN * 8) as u64));
    for threads in [1, 2] {
        group.bench_function(format!("copy/{threads}t"), |b| {
            b.iter(|| parallel_copy(black_box(&mut dst), black_box(&x), threads))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = rlgrad_benches::criterion();
    targets = sum_64m
}
criterion_main!(benches);
