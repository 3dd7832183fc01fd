//! Training steps end to end (forward, backward, optimizer), the peers' W6 and W7:
//!
//! - `w6_seed_mlp`: the seed MLP 8 -> 64 relu -> 64 relu -> 1, batch 100, loss
//!   `mean(model(x) * A)`, Adam 5e-4 (PyTorch flavor), 16 pre-made batches round-robin;
//! - `w7_td3`: one TD3 iteration (Fujimoto 2018): actor 17-400-300-6 tanh, twin critics
//!   23-400-300-1, batch 256 gathered from a 100k replay, gamma 0.99, tau 0.005, policy
//!   noise 0.2 clipped at 0.5, policy delay 2, Adam 3e-4; one bench iteration is two TD3
//!   iterations (one with the actor and Polyak updates), so the per-iteration time is half
//!   of the reported one.
//!
//! Each runs at 1 and 2 threads (`Par::Seq` and `Par::rayon(2)`).

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use rlgrad_autodiff::losses::{Reduction, mse_loss};
use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module, soft_update};
use rlgrad_autodiff::{ApplyGradients, Param, Tape, Var};
use rlgrad_core::{Cpu, Par, Result, Rng};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::Tensor;

fn pars() -> [(&'static str, Par); 2] {
    [("1t", Par::Seq), ("2t", Par::rayon(2))]
}

fn w6_seed_mlp(c: &mut Criterion) {
    let mut group = c.benchmark_group("autodiff_f32/w6_seed_mlp");
    for (label, par) in pars() {
        let cpu = Cpu::new(par);
        let mut rng = Rng::new(4, "w6");
        let mut model = Mlp::<f32>::new_on(
            &cpu,
            "model",
            &[8, 64, 64, 1],
            Activation::Relu,
            Activation::Identity,
            Init::TorchDefault,
            &mut rng,
        )
        .unwrap();
        let mut adam = Optimizer::new_on(cpu, Adam::torch(), 5e-4).unwrap();
        let batches: Vec<(Tensor<f32>, Tensor<f32>)> = (0..16)
            .map(|_| {
                (
                    Tensor::rand_normal_on(&cpu, [100, 8], 0.0, 1.0, &mut rng).unwrap(),
                    Tensor::rand_normal_on(&cpu, [100], 0.0, 1.0, &mut rng).unwrap(),
                )
            })
            .collect();
        let mut tape = Tape::new_on(&cpu);
        let mut i = 0;
        group.bench_function(label, |b| {
            b.iter(|| {
                let (x, advantages) = &batches[i % batches.len()];
                i += 1;
                tape.reset();
                let out = model.forward(&tape, &tape.constant(x)).unwrap();
                let loss = out
                    .reshape([100])
                    .and_then(|o| o.mul(&tape.constant(advantages)))
                    .and_then(|o| o.mean_all())
                    .unwrap();
                let grads = tape.gradient(&loss, &[&model]).unwrap();
                adam.apply_gradients(&mut model, &grads).unwrap();
            })
        });
    }
    group.finish();
}

const STATE: usize = 17;
const ACTION: usize = 6;
const BATCH: usize = 256;
const REPLAY: usize = 100_000;

/// Fujimoto's twin critics: `q1` and `q2`, each `[s, a]` -> 400 relu -> 300 relu -> 1.
#[derive(Clone)]
struct Critic {
    q1: Mlp,
    q2: Mlp,
}

impl Module for Critic {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param)) {
        self.q1.visit(f);
        self.q2.visit(f);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param)) {
        self.q1.visit_mut(f);
        self.q2.visit_mut(f);
    }
}

impl Critic {
    fn both<'t>(&self, tape: &'t Tape, s: &Var<'t>, a: &Var<'t>) -> Result<(Var<'t>, Var<'t>)> {
        let sa = Var::concat(&[s, a], 1)?;
        Ok((self.q1.forward(tape, &sa)?, self.q2.forward(tape, &sa)?))
    }
}

struct Replay {
    state: Tensor,
    action: Tensor,
    next_state: Tensor,
    reward: Tensor,
    not_done: Tensor,
    rng: Rng,
}

struct Td3 {
    actor: Mlp,
    actor_target: Mlp,
    critic: Critic,
    critic_target: Critic,
    actor_opt: Optimizer<f32>,
    critic_opt: Optimizer<f32>,
    replay: Replay,
    noise_rng: Rng,
    tape: Tape,
    iteration: usize,
}

impl Td3 {
    fn new(cpu: Cpu) -> Self {
        let mut rng = Rng::new(5, "w7");
        let mlp = |name: &str, sizes: &[usize], output, rng: &mut Rng| {
            Mlp::new_on(
                &cpu,
                name,
                sizes,
                Activation::Relu,
                output,
                Init::TorchDefault,
                rng,
            )
            .unwrap()
        };
        let actor = mlp(
            "actor",
            &[STATE, 400, 300, ACTION],
            Activation::Tanh,
            &mut rng,
        );
        let critic = Critic {
            q1: mlp(
                "critic/q1",
                &[STATE + ACTION, 400, 300, 1],
                Activation::Identity,
                &mut rng,
            ),
            q2: mlp(
                "critic/q2",
                &[STATE + ACTION, 400, 300, 1],
                Activation::Identity,
                &mut rng,
            ),
        };
        let mut normal =
            |cols: usize| Tensor::rand_normal_on(&cpu, [REPLAY, cols], 0.0, 1.0, &mut rng).unwrap();
        let replay = Replay {
            state: normal(STATE),
            action: normal(ACTION).clamp(-1.0, 1.0).unwrap(),
            next_state: normal(STATE),
            reward: normal(1),
            not_done: normal(1).gt(&Tensor::scalar(-2.3)).unwrap(),
            rng: Rng::new(6, "w7-sample"),
        };
        Self {
            actor_target: actor.clone(),
            critic_target: critic.clone(),
            actor,
            critic,
            actor_opt: Optimizer::new_on(cpu, Adam::torch(), 3e-4).unwrap(),
            critic_opt: Optimizer::new_on(cpu, Adam::torch(), 3e-4).unwrap(),
            replay,
            noise_rng: Rng::new(7, "w7-noise"),
            tape: Tape::new_on(&cpu),
            iteration: 0,
        }
    }

    fn iterate(&mut self) -> Result<()> {
        let cpu = *self.tape.device();
        let replay = &mut self.replay;
        let index: Vec<usize> = (0..BATCH)
            .map(|_| replay.rng.below(REPLAY as u64) as usize)
            .collect();
        let pick = |t: &Tensor| t.index_select(0, &index);
        let (state, action, next_state) = (
            pick(&replay.state)?,
            pick(&replay.action)?,
            pick(&replay.next_state)?,
        );
        let (reward, not_done) = (pick(&replay.reward)?, pick(&replay.not_done)?);
        let noise = Tensor::rand_normal_on(&cpu, [BATCH, ACTION], 0.0, 0.2, &mut self.noise_rng)?
            .clamp(-0.5, 0.5)?;

        let target = {
            let tape = Tape::new_on(&cpu).no_grad();
            let next_state = tape.constant(&next_state);
            let next_action = self
                .actor_target
                .forward(&tape, &next_state)?
                .add(&tape.constant(&noise))?
                .clamp(-1.0, 1.0)?;
            let (tq1, tq2) = self.critic_target.both(&tape, &next_state, &next_action)?;
            let discount = (&tape.constant(&not_done) * 0.99)?.mul(&tq1.minimum(&tq2)?)?;
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
        self.critic_opt.apply_gradients(&mut self.critic, &grads)?;

        if self.iteration.is_multiple_of(2) {
            self.tape.reset();
            let tape = &self.tape;
            let s = tape.constant(&state);
            let q = self.critic.q1.forward(
                tape,
                &Var::concat(&[&s, &self.actor.forward(tape, &s)?], 1)?,
            )?;
            let actor_loss = q.mean_all()?.neg()?;
            let grads = tape.gradient(&actor_loss, &[&self.actor])?;
            self.actor_opt.apply_gradients(&mut self.actor, &grads)?;
            soft_update(&mut self.critic_target, &self.critic, 0.005)?;
            soft_update(&mut self.actor_target, &self.actor, 0.005)?;
        }
        self.iteration += 1;
        Ok(())
    }
}

fn w7_td3(c: &mut Criterion) {
    let mut group = c.benchmark_group("autodiff_f32/w7_td3_two_iterations");
    group.sample_size(20);
    for (label, par) in pars() {
        let mut td3 = Td3::new(Cpu::new(par));
        group.bench_function(label, |b| {
            b.iter(|| {
                td3.iterate().unwrap();
                td3.iterate().unwrap();
                black_box(&td3.actor);
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3));
    targets = w6_seed_mlp, w7_td3
}
criterion_main!(benches);
