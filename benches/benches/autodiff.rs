//! The peers' W6 and W7 workloads: whole training steps of rlgrad-autodiff (forward,
//! backward through the tape, Adam through `ApplyGradients`).
//!
//! - W6: the seed MLP 8 -> 64 relu -> 64 relu -> 1, batch 100, loss `mean(model(x) * A)`,
//!   Adam 5e-4 (PyTorch flavor), 16 pre-made batches used round-robin; `step` as users
//!   train, and `step_checked` with the finite checks on (the tape's `check_finite`, which
//!   names the first NaN's origin, and the optimizer's): their cost.
//! - W7: one TD3 iteration ([`rlgrad_benches::training::Td3`], which `rlgrad-gpu-train`
//!   runs on a GPU): actor 17-400-300-6 tanh, twin critics 23-400-300-1, batch 256
//!   gathered from a 100k replay, gamma 0.99, tau 0.005, policy noise 0.2 clipped at 0.5,
//!   policy delay 2, Adam 3e-4 for both. One timed routine is two
//!   iterations (one with the actor and Polyak updates) and is reported per iteration
//!   (criterion's time divided by two through `iter_custom`).
//!
//! Each is checked first against the same computation in float64 (same initial values and
//! data): the parameters after a few steps must agree within `1e-4` relative.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp};
use rlgrad_autodiff::{ApplyGradients, Tape};
use rlgrad_benches::training::{Td3, flat_values, widen, widen_into};
use rlgrad_benches::{Tolerance, check, thread_counts};
use rlgrad_core::{Cpu, Float, Par, Result, Rng};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::Tensor;

/// Where the check of the float64 twin allows the f32 run to be.
const AGREEMENT: Tolerance = Tolerance {
    abs: 1e-6,
    rel: 1e-4,
};

/// The seed MLP with Adam and its 16 batches.
struct SeedMlp<T: Float> {
    model: Mlp<T>,
    adam: Optimizer<T>,
    batches: Vec<(Tensor<T>, Tensor<T>)>,
    tape: Tape<T>,
    step: usize,
}

impl<T: Float> SeedMlp<T> {
    /// With `check_finite`, the tape and the optimizer check every value.
    fn new(par: Par, check_finite: bool) -> Self {
        let cpu = Cpu::new(par);
        let mut rng = Rng::new(4, "w6");
        let model = Mlp::new_on(
            &cpu,
            "model",
            &[8, 64, 64, 1],
            Activation::Relu,
            Activation::Identity,
            Init::TorchDefault,
            &mut rng,
        )
        .unwrap();
        let batches = (0..16)
            .map(|_| {
                (
                    Tensor::rand_normal_on(&cpu, [100, 8], 0.0, 1.0, &mut rng).unwrap(),
                    Tensor::rand_normal_on(&cpu, [100], 0.0, 1.0, &mut rng).unwrap(),
                )
            })
            .collect();
        let mut adam = Optimizer::new_on(cpu, Adam::torch(), 5e-4).unwrap();
        adam.check_finite(check_finite);
        let tape = Tape::new_on(&cpu);
        Self {
            model,
            adam,
            batches,
            tape: if check_finite {
                tape.check_finite()
            } else {
                tape
            },
            step: 0,
        }
    }

    fn step(&mut self) -> Result<()> {
        let (x, advantages) = &self.batches[self.step % self.batches.len()];
        self.step += 1;
        self.tape.reset();
        let tape = &self.tape;
        let out = self.model.forward(tape, &tape.constant(x))?;
        let loss = out
            .reshape([100])?
            .mul(&tape.constant(advantages))?
            .mean_all()?;
        let grads = tape.gradient(&loss, &[&self.model])?;
        self.adam.apply_gradients(&mut self.model, &grads)
    }
}

fn w6_seed_mlp(c: &mut Criterion) {
    let group_name = "autodiff_f32/w6_seed_mlp";
    let mut group = c.benchmark_group(group_name);
    for threads in &thread_counts() {
        let mut f32_run = SeedMlp::<f32>::new(threads.par(), false);
        let mut checked = SeedMlp::<f32>::new(threads.par(), true);
        let mut f64_run = SeedMlp::<f64>::new(Par::Seq, false);
        widen_into(&mut f64_run.model, &f32_run.model).unwrap();
        f64_run.batches = f32_run
            .batches
            .iter()
            .map(|(x, a)| (widen(x).unwrap(), widen(a).unwrap()))
            .collect();
        for _ in 0..5 {
            threads.install(|| f32_run.step()).unwrap();
            threads.install(|| checked.step()).unwrap();
            f64_run.step().unwrap();
        }
        let want = flat_values(&f64_run.model).unwrap();
        let plain = flat_values(&f32_run.model).unwrap();
        // The checks change no value: the checked run has the plain run's bits.
        let checked_id = format!("{group_name}/{}", threads.id("step_checked"));
        let same = flat_values(&checked.model).unwrap() == plain;
        assert!(same, "{checked_id}: the finite checks changed a value");
        let id = format!("{group_name}/{}", threads.id("step"));
        if check(&id, &to_f32(&plain), &want, AGREEMENT) {
            threads.bench(&mut group, "step", || f32_run.step().unwrap());
        }
        if check(&checked_id, &to_f32(&plain), &want, AGREEMENT) {
            threads.bench(&mut group, "step_checked", || {
                checked.step().unwrap();
                assert!(checked.tape.first_non_finite().is_none());
            });
        }
    }
    group.finish();
}

fn to_f32(values: &[f64]) -> Vec<f32> {
    values.iter().map(|&v| v as f32).collect()
}

fn w7_td3(c: &mut Criterion) {
    let group_name = "autodiff_f32/w7_td3";
    let mut group = c.benchmark_group(group_name);
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(6));
    for threads in &thread_counts() {
        let mut f32_run = Td3::<f32, Cpu>::new_on(&Cpu::new(threads.par())).unwrap();
        let mut f64_run = Td3::twin_of(&f32_run).unwrap();
        for _ in 0..4 {
            threads.install(|| f32_run.iterate()).unwrap();
            f64_run.iterate().unwrap();
        }
        let id = format!("{group_name}/{}", threads.id("iteration"));
        let agrees = check(
            &id,
            &to_f32(&f32_run.actor_values().unwrap()),
            &f64_run.actor_values().unwrap(),
            AGREEMENT,
        );
        if agrees {
            group.bench_function(threads.id("iteration"), |b| {
                b.iter_custom(|pairs| {
                    threads.install(|| {
                        let start = Instant::now();
                        for _ in 0..pairs {
                            f32_run.iterate().unwrap();
                            f32_run.iterate().unwrap();
                        }
                        start.elapsed() / 2
                    })
                })
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = rlgrad_benches::criterion();
    targets = w6_seed_mlp, w7_td3
}
criterion_main!(benches);
