//! GAE and discounted returns over f32 `[T, B]` batches at the peers' W2/W3 shapes:
//! `(T, B) = (2048, 64)` and `(128, 1024)`, episode ends `done ~ Bernoulli(0.05)` as 0/1
//! f32 flags, gamma 0.99, lambda 0.95, outputs preallocated. Throughput counts the bytes
//! the peers' bound uses: returns 12 B/elem (reward, done, return), GAE 16 B/elem (reward,
//! value, done, advantage) for the advantages alone as the peers compute them;
//! `gae_and_returns` also writes the value targets (4 B/elem more, not counted).
//!
//! `discounted_returns` (W2) and `gae` (W3) are checked against the peers' float64
//! formulas, with their tolerance (1e-3 absolute), before they are timed.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rlgrad_benches::{Tolerance, check, thread_counts};
use rlgrad_core::Rng;
use rlgrad_returns::{
    Episodes, SliceLayout, TimeMajor, discounted_returns_into, gae_into, transpose,
};

const GAMMA: f32 = 0.99;
const LAMBDA: f32 = 0.95;
/// The peer drivers' tolerance for W2 and W3.
const PEERS_TOLERANCE: Tolerance = Tolerance {
    abs: 1e-3,
    rel: 0.0,
};

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

/// W2 in float64: `G_t = r_t + gamma (1 - done_t) G_{t+1}`, `G_T = 0`.
fn reference_returns(data: &Batch) -> Vec<f64> {
    let b = data.layout.b;
    let mut out = vec![0.0; data.rewards.len()];
    let mut next = vec![0.0f64; b];
    for t in (0..data.layout.t).rev() {
        for (j, g) in next.iter_mut().enumerate() {
            let i = t * b + j;
            let not_done = 1.0 - f64::from(data.dones[i]);
            *g = f64::from(data.rewards[i]) + f64::from(GAMMA) * not_done * *g;
            out[i] = *g;
        }
    }
    out
}

/// W3 in float64: `delta_t = r_t + gamma (1 - d_t) V_{t+1} - V_t` with `V_T` the
/// bootstrap values, `A_t = delta_t + gamma lambda (1 - d_t) A_{t+1}`.
fn reference_advantages(data: &Batch) -> Vec<f64> {
    let (steps, b) = (data.layout.t, data.layout.b);
    let gamma = f64::from(GAMMA);
    let mut out = vec![0.0; data.rewards.len()];
    let mut next = vec![0.0f64; b];
    for t in (0..steps).rev() {
        for (j, a) in next.iter_mut().enumerate() {
            let i = t * b + j;
            let next_value = if t + 1 == steps {
                data.bootstrap[j]
            } else {
                data.values[i + b]
            };
            let not_done = 1.0 - f64::from(data.dones[i]);
            let delta = f64::from(data.rewards[i]) + gamma * not_done * f64::from(next_value)
                - f64::from(data.values[i]);
            *a = delta + gamma * f64::from(LAMBDA) * not_done * *a;
            out[i] = *a;
        }
    }
    out
}

fn estimators(c: &mut Criterion) {
    let thread_counts = thread_counts();
    for (t, b) in [(2048, 64), (128, 1024)] {
        let data = batch(t, b);
        let len = t * b;
        let episodes = Episodes::terminations(GAMMA, &data.dones);
        // The same batch stored batch-major ([B, T], TorchRL's layout), read in place.
        let by_column = |x: &[f32]| transpose(x, t, b, 1).unwrap();
        let (bm_rewards, bm_values, bm_dones) = (
            by_column(&data.rewards),
            by_column(&data.values),
            by_column(&data.dones),
        );
        let bm_episodes = Episodes::terminations(GAMMA, &bm_dones);
        let zeros = vec![0.0f32; b];
        let (mut out, mut out2) = (vec![0.0f32; len], vec![0.0f32; len]);
        let (want_returns, want_advantages) =
            (reference_returns(&data), reference_advantages(&data));
        let group_name = format!("returns_f32/{t}x{b}");
        let mut group = c.benchmark_group(&group_name);
        for threads in &thread_counts {
            let par = threads.par();
            let returns = |out: &mut [f32]| {
                discounted_returns_into(
                    par,
                    data.layout,
                    black_box(&data.rewards),
                    episodes,
                    &zeros,
                    out,
                )
                .unwrap()
            };
            let advantages = |out: &mut [f32], targets: Option<&mut [f32]>| {
                gae_into(
                    par,
                    data.layout,
                    black_box(&data.rewards),
                    &data.values,
                    &data.bootstrap,
                    episodes,
                    LAMBDA,
                    out,
                    targets,
                )
                .unwrap()
            };

            threads.install(|| returns(&mut out));
            let id = format!("{group_name}/{}", threads.id("discounted_returns"));
            group.throughput(Throughput::Bytes((12 * len) as u64));
            if check(&id, &out, &want_returns, PEERS_TOLERANCE) {
                threads.bench(&mut group, "discounted_returns", || returns(&mut out));
            }

            threads.install(|| advantages(&mut out, None));
            let id = format!("{group_name}/{}", threads.id("gae"));
            group.throughput(Throughput::Bytes((16 * len) as u64));
            if check(&id, &out, &want_advantages, PEERS_TOLERANCE) {
                threads.bench(&mut group, "gae", || advantages(&mut out, None));
            }
            threads.bench(&mut group, "gae_and_returns", || {
                advantages(&mut out, Some(&mut out2))
            });

            let batch_major = |out: &mut [f32]| {
                gae_into(
                    par,
                    SliceLayout::batch_major(t, b),
                    black_box(&bm_rewards),
                    &bm_values,
                    &data.bootstrap,
                    bm_episodes,
                    LAMBDA,
                    out,
                    None,
                )
                .unwrap()
            };
            threads.install(|| batch_major(&mut out));
            let id = format!("{group_name}/{}", threads.id("gae_batch_major"));
            let time_major = transpose(&out, b, t, 1).unwrap();
            if check(&id, &time_major, &want_advantages, PEERS_TOLERANCE) {
                threads.bench(&mut group, "gae_batch_major", || batch_major(&mut out));
            }
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = estimators
}
criterion_main!(benches);
