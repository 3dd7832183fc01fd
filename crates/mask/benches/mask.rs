//! The peers' W4 and W5 workloads: pad and unpad of ragged f32 sequences, and the masked
//! mean with its backward pass.
//!
//! - W4 seed: B = 100, lengths ~ U[10, 50), F = 10; W4 large: B = 1024, lengths ~ U[1, 200),
//!   F = 64. `pad` includes computing `max_len` and allocating the zeroed output (as the
//!   peers' timed pads do); `pad_into` writes into a preallocated buffer. Throughput counts
//!   the peers' bytes: pad `4 F (B T_max + N)`, unpad `8 F N`.
//! - W5: `x [256, 200]`, lengths ~ U[1, 200]: masked mean forward and backward, the mask
//!   built from the lengths inside the step.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rlgrad_core::{Par, Rng};
use rlgrad_mask::{
    PadOrder, Sequences, masked_mean, masked_mean_backward, pad, pad_into, unpad, unpad_into,
};

fn ragged(batch: usize, low: usize, high: usize, features: usize) -> (Vec<usize>, Vec<f32>) {
    let mut rng = Rng::new(2, "bench-mask");
    let lengths: Vec<usize> = (0..batch)
        .map(|_| low + rng.below((high - low) as u64) as usize)
        .collect();
    let rows: usize = lengths.iter().sum();
    let flat = (0..rows * features).map(|_| rng.normal(0.0, 1.0)).collect();
    (lengths, flat)
}

fn padding(c: &mut Criterion) {
    let cases = [("seed", 100, 10, 50, 10), ("large", 1024, 1, 200, 64)];
    for (name, batch, low, high, features) in cases {
        let (lengths, flat) = ragged(batch, low, high, features);
        let seqs = Sequences::new(&lengths, None).unwrap();
        let (n, t) = (seqs.total(), seqs.max_len());
        let mut padded = vec![0.0f32; batch * t * features];
        let mut unpadded = vec![0.0f32; n * features];
        let mut group = c.benchmark_group(format!("mask_f32/{name}"));
        group.throughput(Throughput::Bytes((4 * features * (batch * t + n)) as u64));
        group.bench_function("pad", |b| {
            b.iter(|| {
                let seqs = Sequences::new(black_box(&lengths), None).unwrap();
                pad(&seqs, black_box(&flat), features).unwrap()
            })
        });
        for threads in [1, 2] {
            group.bench_function(format!("pad_into/{threads}t"), |b| {
                b.iter(|| {
                    pad_into(
                        Par::rayon(threads),
                        &seqs,
                        black_box(&flat),
                        features,
                        PadOrder::BatchMajor,
                        &mut padded,
                    )
                    .unwrap()
                })
            });
        }
        group.throughput(Throughput::Bytes((8 * features * n) as u64));
        group.bench_function("unpad", |b| {
            b.iter(|| unpad(&seqs, black_box(&padded), features).unwrap())
        });
        for threads in [1, 2] {
            group.bench_function(format!("unpad_into/{threads}t"), |b| {
                b.iter(|| {
                    unpad_into(
                        Par::rayon(threads),
                        &seqs,
                        black_box(&padded),
                        features,
                        PadOrder::BatchMajor,
                        &mut unpadded,
                    )
                    .unwrap()
                })
            });
        }
        group.finish();
    }
}

fn masked_mean_step(c: &mut Criterion) {
    let (batch, steps) = (256, 200);
    let mut rng = Rng::new(5, "bench-masked-mean");
    let x: Vec<f32> = (0..batch * steps).map(|_| rng.normal(0.0, 1.0)).collect();
    let lengths: Vec<usize> = (0..batch)
        .map(|_| 1 + rng.below(steps as u64) as usize)
        .collect();
    c.bench_function("mask_f32/masked_mean_fwd_bwd_256x200", |b| {
        b.iter(|| {
            let seqs = Sequences::new(black_box(&lengths), Some(steps)).unwrap();
            let mean = masked_mean(&seqs, black_box(&x), 1).unwrap();
            let grad = masked_mean_backward(&seqs, 1, 1.0f32).unwrap();
            (mean, grad)
        })
    });
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = padding, masked_mean_step
}
criterion_main!(benches);
