//! The canonical sum of 64M f32 beside a plain `iter().sum()`, the fastest unordered
//! read of the same data (the read bandwidth ceiling) and the bandwidth of a copy of the
//! same size (throughput in bytes: the sums read 4 B per element, the copy moves 8).
//!
//! The copy is also the rlgrad side of the peers' W0 (their `copyto` / `copy_` of 64M
//! floats): not an rlgrad kernel, but the bandwidth a Rust loop reaches beside theirs.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rlgrad_benches::{Tolerance, check, parallel_copy, read_ceiling, thread_counts};
use rlgrad_core::{Rng, reduce};

const LEN: usize = 64 << 20;

fn sum_64m(c: &mut Criterion) {
    let thread_counts = thread_counts();
    let mut rng = Rng::new(0, "bench-sum");
    let x: Vec<f32> = (0..LEN).map(|_| rng.uniform_f32()).collect();
    let mut dst = vec![0.0f32; LEN];
    let mut group = c.benchmark_group("sum_64m_f32");
    group.throughput(Throughput::Bytes((LEN * 4) as u64));
    for threads in &thread_counts {
        let par = threads.par();
        threads.bench(&mut group, "canonical", || reduce::sum(black_box(&x), par));
        threads.bench(&mut group, "read_ceiling", || {
            read_ceiling(black_box(&x), threads.count())
        });
    }
    if thread_counts.iter().any(|threads| threads.count() == 1) {
        group.bench_function("iter_sum/1t", |b| {
            b.iter(|| black_box(&x).iter().sum::<f32>())
        });
    }
    group.throughput(Throughput::Bytes((LEN * 8) as u64));
    for threads in &thread_counts {
        let copy = |dst: &mut [f32]| parallel_copy(black_box(dst), black_box(&x), threads.count());
        dst.fill(f32::NAN);
        threads.install(|| copy(&mut dst));
        let id = format!("sum_64m_f32/{}", threads.id("copy"));
        if check(&id, &dst, &x, Tolerance::EXACT) {
            threads.bench(&mut group, "copy", || copy(&mut dst));
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = rlgrad_benches::criterion();
    targets = sum_64m
}
criterion_main!(benches);
