//! GAE and discounted returns over f32 `[T, B]` batches at the peers' W2/W3 shapes:
//! `(T, B) = (2048, 64)` and `(128, 1024)`, episode ends `done ~ Bernoulli(0.05)` as 0/1
//! f32 flags, gamma 0.99, lambda 0.95, outputs preallocated. Throughput counts the bytes
//! the peers' bound uses: returns 12 B/elem (reward, done, return), GAE 16 B/elem (reward,
//! value, done, advantage) for the advantages alone as the peers compute them;
//! `gae_and_returns` also writes the value targets (4 B/elem more, not counted).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rlgrad_core::{Par, Rng};
use rlgrad_returns::{Episodes, TimeMajor, discounted_returns_into, gae_into};

struct Batch {
    layout: TimeMajor,
    rewards: Vec<f32>,
    values: Vec<f32>,
    dones: Vec<f32>,
    bootstrap: Vec<f32>,
}

fn batch(t: usize, b: usize) -> Batch {
    let mut rng = Rng::new(2, "bench-returns");
    let len = t * b;
    Batch {
        layout: TimeMajor::new(t, b),
        rewards: (0..len).map(|_| rng.normal(0.0, 1.0)).collect(),
        values: (0..len).map(|_| rng.normal(0.0, 1.0)).collect(),
        dones: (0..len)
            .map(|_| f32::from(u8::from(rng.uniform_f32() < 0.05)))
            .collect(),
        bootstrap: (0..b).map(|_| rng.normal(0.0, 1.0)).collect(),
    }
}

fn estimators(c: &mut Criterion) {
    for (t, b) in [(2048, 64), (128, 1024)] {
        let data = batch(t, b);
        let len = t * b;
        let episodes = Episodes::terminations(0.99f32, &data.dones);
        let zeros = vec![0.0f32; b];
        let (mut out, mut out2) = (vec![0.0f32; len], vec![0.0f32; len]);
        let mut group = c.benchmark_group(format!("returns_f32/{t}x{b}"));
        for threads in [1, 2] {
            let par = Par::rayon(threads);
            group.throughput(Throughput::Bytes((12 * len) as u64));
            group.bench_function(format!("discounted_returns/{threads}t"), |bench| {
                bench.iter(|| {
                    discounted_returns_into(
                        par,
                        data.layout,
                        black_box(&data.rewards),
                        episodes,
                        &zeros,
                        &mut out,
                    )
                    .unwrap()
                })
            });
            group.throughput(Throughput::Bytes((16 * len) as u64));
            group.bench_function(format!("gae/{threads}t"), |bench| {
                bench.iter(|| {
                    gae_into(
                        par,
                        data.layout,
                        black_box(&data.rewards),
                        &data.values,
                        &data.bootstrap,
                        episodes,
                        0.95,
                        &mut out,
                        None,
                    )
                    .unwrap()
                })
            });
            group.bench_function(format!("gae_and_returns/{threads}t"), |bench| {
                bench.iter(|| {
                    gae_into(
                        par,
                        data.layout,
                        black_box(&data.rewards),
                        &data.values,
                        &data.bootstrap,
                        episodes,
                        0.95,
                        &mut out,
                        Some(&mut out2),
                    )
                    .unwrap()
                })
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = estimators
}
criterion_main!(benches);
