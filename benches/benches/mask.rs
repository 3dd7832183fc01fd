//! The peers' W4 and W5 workloads: pad and unpad of ragged f32 sequences, and the masked
//! mean with its backward pass.
//!
//! - W4 seed: B = 100, lengths ~ U[10, 50), F = 10; W4 large: B = 1024, lengths ~ U[1, 200),
//!   F = 64. `pad` and `unpad` include building the sequences from the lengths (`max_len`
//!   and offsets) and allocating the output, as the peers' timed calls do; `pad_into` and
//!   `unpad_into` write into preallocated buffers. Throughput counts the peers' bytes: pad
//!   `4 F (B T_max + N)`, unpad `8 F N`.
//! - W5: `x [256, 200]`, lengths ~ U[1, 200]: masked mean forward and backward, the mask
//!   built from the lengths inside the step.
//!
//! The calls the peers time are checked first: pad and unpad must equal a plain copy loop
//! exactly (as the peers' `array_equal`), the masked mean and its gradient must match float64 within the peers'
//! tolerance (1e-5 relative).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rlgrad_benches::{Tolerance, check, thread_counts};
use rlgrad_core::Rng;
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

/// `[B, T_max, F]`, zeros after each sequence's end, by a plain copy loop.
fn reference_pad(lengths: &[usize], flat: &[f32], features: usize) -> Vec<f32> {
    let max_len = lengths.iter().copied().max().unwrap_or(0);
    let mut out = vec![0.0; lengths.len() * max_len * features];
    let mut rows = flat.chunks_exact(features);
    for (b, &len) in lengths.iter().enumerate() {
        for t in 0..len {
            let start = (b * max_len + t) * features;
            let row = rows.next().expect("the lengths sum to the packed rows");
            out[start..start + features].copy_from_slice(row);
        }
    }
    out
}

fn padding(c: &mut Criterion) {
    let thread_counts = thread_counts();
    let cases = [("seed", 100, 10, 50, 10), ("large", 1024, 1, 200, 64)];
    for (name, batch, low, high, features) in cases {
        let (lengths, flat) = ragged(batch, low, high, features);
        let seqs = Sequences::new(&lengths, None).unwrap();
        let (n, t) = (seqs.total(), seqs.max_len());
        let want_padded = reference_pad(&lengths, &flat, features);
        let mut padded = vec![0.0f32; batch * t * features];
        let mut unpadded = vec![0.0f32; n * features];
        let group_name = format!("mask_f32/{name}");
        let mut group = c.benchmark_group(&group_name);
        let fresh_pad = || {
            let seqs = Sequences::new(black_box(&lengths), None).unwrap();
            pad(&seqs, black_box(&flat), features).unwrap()
        };
        for threads in &thread_counts {
            let id = |bench: &str| format!("{group_name}/{}", threads.id(bench));
            group.throughput(Throughput::Bytes((4 * features * (batch * t + n)) as u64));
            if check(
                &id("pad"),
                &threads.install(fresh_pad),
                &want_padded,
                Tolerance::EXACT,
            ) {
                threads.bench(&mut group, "pad", fresh_pad);
            }
            let pad_preallocated = |padded: &mut [f32]| {
                pad_into(
                    threads.par(),
                    &seqs,
                    black_box(&flat),
                    features,
                    PadOrder::BatchMajor,
                    padded,
                )
                .unwrap()
            };
            padded.fill(f32::NAN);
            threads.install(|| pad_preallocated(&mut padded));
            if check(&id("pad_into"), &padded, &want_padded, Tolerance::EXACT) {
                threads.bench(&mut group, "pad_into", || pad_preallocated(&mut padded));
            }

            group.throughput(Throughput::Bytes((8 * features * n) as u64));
            let fresh_unpad = || {
                let seqs = Sequences::new(black_box(&lengths), None).unwrap();
                unpad(&seqs, black_box(&padded), features).unwrap()
            };
            if check(
                &id("unpad"),
                &threads.install(fresh_unpad),
                &flat,
                Tolerance::EXACT,
            ) {
                threads.bench(&mut group, "unpad", fresh_unpad);
            }
            threads.bench(&mut group, "unpad_into", || {
                unpad_into(
                    threads.par(),
                    &seqs,
                    black_box(&padded),
                    features,
                    PadOrder::BatchMajor,
                    &mut unpadded,
                )
                .unwrap()
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
    // The mean, then the gradient of each element: the check compares both at once.
    let valid: usize = lengths.iter().sum();
    let mut want = vec![0.0f64];
    for (row, &len) in x.chunks_exact(steps).zip(&lengths) {
        want[0] += row[..len].iter().copied().map(f64::from).sum::<f64>();
        want.extend((0..steps).map(|t| if t < len { 1.0 / valid as f64 } else { 0.0 }));
    }
    want[0] /= valid as f64;

    let step = || {
        let seqs = Sequences::new(black_box(&lengths), Some(steps)).unwrap();
        let mean = masked_mean(&seqs, black_box(&x), 1).unwrap();
        let grad = masked_mean_backward(&seqs, 1, 1.0f32).unwrap();
        (mean, grad)
    };
    let group_name = "mask_f32/masked_mean";
    let mut group = c.benchmark_group(group_name);
    for threads in &thread_counts() {
        let name = "fwd_bwd_256x200";
        let (mean, grad) = threads.install(step);
        let got: Vec<f32> = std::iter::once(mean).chain(grad).collect();
        let tolerance = Tolerance {
            abs: 1e-9,
            rel: 1e-5,
        };
        if check(
            &format!("{group_name}/{}", threads.id(name)),
            &got,
            &want,
            tolerance,
        ) {
            threads.bench(&mut group, name, step);
        }
    }
    group.finish();
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
