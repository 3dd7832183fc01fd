//! The peers' W6 and W7 workloads: whole training steps of rlgrad-autodiff (forward,
//! backward through the tape, Adam through `ApplyGradients`).
//!
//! - W6: the seed MLP 8 -> 64 relu -> 64 relu -> 1, batch 100, loss `mean(model(x) * A)`,
//!   Adam 5e-4 (PyTorch flavor), 16 pre-made batches used round-robin; `step` as users
//!   train, and `step_checked` with the finite checks on (the tape's `check_finite`, which
//!   names the first NaN's origin, and the optimizer's): their cost.
//! - W7: one TD3 iteration (Fujimoto 2018): actor 17-400-300-6 tanh, twin critics
//!   23-400-300-1, batch 256 gathered from a 100k replay, gamma 0.99, tau 0.005, policy
//!   noise 0.2 clipped at 0.5, policy delay 2, Adam 3e-4 for both. One timed routine is two
//!   iterations (one with the actor and Polyak updates) and is reported per iteration
//!   (criterion's time divided by two through `iter_custom`).
//!
//! Each is checked first against the same computation in float64 (same initial values and
//! data): the parameters after a few steps must agree within `1e-4` relative.

use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use rlgrad_autodiff::losses::{Reduction, mse_loss};
use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module, soft_update};
use rlgrad_autodiff::{ApplyGradients, Param, Tape, Var};
use rlgrad_benches::{Tolerance, check, thread_counts};
use rlgrad_core::{Cpu, Float, Par, Result, Rng};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::Tensor;

/// The parameters of `module`, widened to f64, one after the other.
fn flat_parameters<T: Float>(module: &impl Module<T>) -> Vec<f64> {
    module
        .parameters()
        .iter()
        .flat_map(|p| p.value().to_vec().unwrap())
        .map(Float::as_f64)
        .collect()
}

/// `twin`'s parameters set to the values of `source`'s, widened to f64.
fn widen_into(twin: &mut impl Module<f64>, source: &impl Module<f32>) {
    let values: Vec<Tensor<f64>> = source
        .parameters()
        .iter()
        .map(|p| widen(p.value()))
        .collect();
    let mut values = values.into_iter();
    twin.visit_mut(&mut |p| {
        p.set_value(values.next().expect("twins have the same parameters"))
            .unwrap()
    });
}

fn widen(t: &Tensor<f32>) -> Tensor<f64> {
    let data = t.to_vec().unwrap().into_iter().map(f64::from).collect();
    Tensor::from_vec(data, t.shape().clone()).unwrap()
}

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
        widen_into(&mut f64_run.model, &f32_run.model);
        f64_run.batches = f32_run
            .batches
            .iter()
            .map(|(x, a)| (widen(x), widen(a)))
            .collect();
        for _ in 0..5 {
            threads.install(|| f32_run.step()).unwrap();
            threads.install(|| checked.step()).unwrap();
            f64_run.step().unwrap();
        }
        let want = flat_parameters(&f64_run.model);
        let plain = flat_parameters(&f32_run.model);
        // The checks change no value: the checked run has the plain run's bits.
        let checked_id = format!("{group_name}/{}", threads.id("step_checked"));
        let same = flat_parameters(&checked.model) == plain;
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

const STATE: usize = 17;
const ACTION: usize = 6;
const BATCH: usize = 256;
const REPLAY: usize = 100_000;

/// Fujimoto's twin critics: `q1` and `q2`, each `[s, a]` -> 400 relu -> 300 relu -> 1.
#[derive(Clone)]
struct Critic<T: Float> {
    q1: Mlp<T>,
    q2: Mlp<T>,
}

impl<T: Float> Module<T> for Critic<T> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<T>)) {
        self.q1.visit(f);
        self.q2.visit(f);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<T>)) {
        self.q1.visit_mut(f);
        self.q2.visit_mut(f);
    }
}

impl<T: Float> Critic<T> {
    fn both<'t>(
        &self,
        tape: &'t Tape<T>,
        s: &Var<'t, T>,
        a: &Var<'t, T>,
    ) -> Result<(Var<'t, T>, Var<'t, T>)> {
        let sa = Var::concat(&[s, a], 1)?;
        Ok((self.q1.forward(tape, &sa)?, self.q2.forward(tape, &sa)?))
    }
}

/// A replay buffer of random transitions, as the peers' W7 fills it.
struct Replay<T: Float> {
    state: Tensor<T>,
    action: Tensor<T>,
    next_state: Tensor<T>,
    reward: Tensor<T>,
    not_done: Tensor<T>,
    sampler: Rng,
}

struct Td3<T: Float> {
    actor: Mlp<T>,
    actor_target: Mlp<T>,
    critic: Critic<T>,
    critic_target: Critic<T>,
    actor_opt: Optimizer<T>,
    critic_opt: Optimizer<T>,
    replay: Replay<T>,
    noise: Rng,
    tape: Tape<T>,
    iteration: usize,
}

impl<T: Float> Td3<T> {
    fn new(par: Par) -> Self {
        let cpu = Cpu::new(par);
        let mut rng = Rng::new(5, "w7");
        let mut mlp = |name: &str, sizes: &[usize], output| {
            Mlp::new_on(
                &cpu,
                name,
                sizes,
                Activation::Relu,
                output,
                Init::TorchDefault,
                &mut rng,
            )
            .unwrap()
        };
        let actor = mlp("actor", &[STATE, 400, 300, ACTION], Activation::Tanh);
        let critic = Critic {
            q1: mlp(
                "critic/q1",
                &[STATE + ACTION, 400, 300, 1],
                Activation::Identity,
            ),
            q2: mlp(
                "critic/q2",
                &[STATE + ACTION, 400, 300, 1],
                Activation::Identity,
            ),
        };
        let mut data = Rng::new(6, "w7-replay");
        let mut normal = |cols: usize| {
            Tensor::rand_normal_on(&cpu, [REPLAY, cols], 0.0, 1.0, &mut data).unwrap()
        };
        let replay = Replay {
            state: normal(STATE),
            action: normal(ACTION).clamp(T::from_f64(-1.0), T::one()).unwrap(),
            next_state: normal(STATE),
            reward: normal(1),
            not_done: normal(1).gt(&Tensor::scalar(T::from_f64(-2.33))).unwrap(),
            sampler: Rng::new(7, "w7-sample"),
        };
        Self {
            actor_target: actor.clone(),
            critic_target: critic.clone(),
            actor,
            critic,
            actor_opt: Optimizer::new_on(cpu, Adam::torch(), 3e-4).unwrap(),
            critic_opt: Optimizer::new_on(cpu, Adam::torch(), 3e-4).unwrap(),
            replay,
            noise: Rng::new(8, "w7-noise"),
            tape: Tape::new_on(&cpu),
            iteration: 0,
        }
    }

    fn iterate(&mut self) -> Result<()> {
        let cpu = *self.tape.device();
        let replay = &mut self.replay;
        let index: Vec<usize> = (0..BATCH)
            .map(|_| replay.sampler.below(REPLAY as u64) as usize)
            .collect();
        let pick = |t: &Tensor<T>| t.index_select(0, &index);
        let (state, action, next_state) = (
            pick(&replay.state)?,
            pick(&replay.action)?,
            pick(&replay.next_state)?,
        );
        let (reward, not_done) = (pick(&replay.reward)?, pick(&replay.not_done)?);
        let noise = Tensor::rand_normal_on(&cpu, [BATCH, ACTION], 0.0, 0.2, &mut self.noise)?
            .clamp(T::from_f64(-0.5), T::from_f64(0.5))?;

        let target = {
            let tape = Tape::new_on(&cpu).no_grad();
            let next_state = tape.constant(&next_state);
            let next_action = self
                .actor_target
                .forward(&tape, &next_state)?
                .add(&tape.constant(&noise))?
                .clamp(-T::one(), T::one())?;
            let (tq1, tq2) = self.critic_target.both(&tape, &next_state, &next_action)?;
            let discount =
                (&tape.constant(&not_done) * T::from_f64(0.99))?.mul(&tq1.minimum(&tq2)?)?;
            tape.constant(&reward).add(&discount)?.into_value()
        };
        self.tape.reset();
        let tape = &self.tape;
        let (s, a) = (tape.constant(&state), tape.constant(&action));
        let target = tape.constant(&target);
        let (q1, q2) = self.critic.both(tape, &s, &a)?;
        let critic_loss = mse_loss(&q1, &target, Reduction::Mean)?.add(&mse_loss(
            &q2,
            &target,
            Reduction::Mean,
        )?)?;
        let grads = tape.gradient(&critic_loss, &[&self.critic])?;
        self.tape.reset();
        self.critic_opt.apply_gradients(&mut self.critic, &grads)?;

        if self.iteration.is_multiple_of(2) {
            let tape = &self.tape;
            let s = tape.constant(&state);
            let sa = Var::concat(&[&s, &self.actor.forward(tape, &s)?], 1)?;
            let actor_loss = self.critic.q1.forward(tape, &sa)?.mean_all()?.neg()?;
            let grads = tape.gradient(&actor_loss, &[&self.actor])?;
            self.tape.reset();
            self.actor_opt.apply_gradients(&mut self.actor, &grads)?;
            soft_update(&mut self.critic_target, &self.critic, 0.005)?;
            soft_update(&mut self.actor_target, &self.actor, 0.005)?;
        }
        self.iteration += 1;
        Ok(())
    }
}

fn w7_td3(c: &mut Criterion) {
    let group_name = "autodiff_f32/w7_td3";
    let mut group = c.benchmark_group(group_name);
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(6));
    for threads in &thread_counts() {
        let mut f32_run = Td3::<f32>::new(threads.par());
        let mut f64_run = Td3::<f64>::new(Par::Seq);
        for (twin, source) in [
            (&mut f64_run.actor, &f32_run.actor),
            (&mut f64_run.actor_target, &f32_run.actor_target),
        ] {
            widen_into(twin, source);
        }
        for (twin, source) in [
            (&mut f64_run.critic, &f32_run.critic),
            (&mut f64_run.critic_target, &f32_run.critic_target),
        ] {
            widen_into(twin, source);
        }
        let replay = &f32_run.replay;
        f64_run.replay.state = widen(&replay.state);
        f64_run.replay.action = widen(&replay.action);
        f64_run.replay.next_state = widen(&replay.next_state);
        f64_run.replay.reward = widen(&replay.reward);
        f64_run.replay.not_done = widen(&replay.not_done);
        for _ in 0..4 {
            threads.install(|| f32_run.iterate()).unwrap();
            f64_run.iterate().unwrap();
        }
        let id = format!("{group_name}/{}", threads.id("iteration"));
        let agrees = check(
            &id,
            &to_f32(&flat_parameters(&f32_run.actor)),
            &flat_parameters(&f64_run.actor),
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
