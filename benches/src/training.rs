//! The training workloads the benches time, written once over the device so that the Cpu
//! (criterion, `autodiff` bench) and a GPU (`rlgrad-gpu-train`) run the same code and a
//! GPU run can be checked against the Cpu's bits:
//!
//! - [`Td3`], the peers' W7: one TD3 iteration (Fujimoto 2018), actor 17-400-300-6 tanh,
//!   twin critics 23-400-300-1, batch 256 gathered from a 100k replay held on the device,
//!   gamma 0.99, tau 0.005, policy noise 0.2 clipped at 0.5, policy delay 2, Adam 3e-4
//!   (PyTorch flavor) for both.
//! - [`PpoUpdate`], `../shared/peers/gpu_train.py`'s PPO minibatch update: policy and value
//!   MLPs 8-64-64 (tanh) with 4 logits and 1 value, 8192 samples, advantages normalized in
//!   the step, the clipped surrogate (0.2), entropy 0.01, value loss 0.5, the global norm
//!   clipped at 0.5, one Adam step (3e-4, eps 1e-5) over both networks.
//!
//! Both start from the same values on every device: parameters, replay, samples and the
//! target policy's noise are [`Rng`] streams from fixed seeds, drawn where the tensors live
//! (`Tensor::rand_*_on`: on a GPU, by its random kernels with the host's bits). Sampling
//! indices are drawn on the host, as the W7 peers draw theirs.

use rlgrad_autodiff::losses::{Reduction, mse_loss};
use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module, soft_update};
use rlgrad_autodiff::{ApplyGradients, Tape, Var};
use rlgrad_core::kernels::OptimKernel;
use rlgrad_core::{Cpu, Float, Result, Rng};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::{Tensor, TensorDevice};

/// What a training workload needs of its device.
pub trait TrainDevice<T: Float>: TensorDevice<T> + OptimKernel<T> {}
impl<T: Float, D: TensorDevice<T> + OptimKernel<T>> TrainDevice<T> for D {}

const STATE: usize = 17;
const ACTION: usize = 6;
const TD3_BATCH: usize = 256;
const REPLAY: usize = 100_000;

/// Fujimoto's twin critics: `q1` and `q2`, each `[s, a]` -> 400 relu -> 300 relu -> 1.
#[derive(Debug, Clone, Module)]
struct Critic<T: Float, D: TrainDevice<T>> {
    q1: Mlp<T, D>,
    q2: Mlp<T, D>,
}

impl<T: Float, D: TrainDevice<T>> Critic<T, D> {
    fn both<'t>(
        &self,
        tape: &'t Tape<T, D>,
        s: &Var<'t, T, D>,
        a: &Var<'t, T, D>,
    ) -> Result<(Var<'t, T, D>, Var<'t, T, D>)> {
        let sa = Var::concat(&[s, a], 1)?;
        Ok((self.q1.forward(tape, &sa)?, self.q2.forward(tape, &sa)?))
    }
}

/// A replay buffer of random transitions on the device, as the peers' W7 fills it.
#[derive(Debug)]
struct Replay<T: Float, D: TrainDevice<T>> {
    state: Tensor<T, D>,
    action: Tensor<T, D>,
    next_state: Tensor<T, D>,
    reward: Tensor<T, D>,
    not_done: Tensor<T, D>,
    sampler: Rng,
}

/// W7's TD3 iteration on device `D`.
#[derive(Debug)]
pub struct Td3<T: Float, D: TrainDevice<T>> {
    actor: Mlp<T, D>,
    actor_target: Mlp<T, D>,
    critic: Critic<T, D>,
    critic_target: Critic<T, D>,
    actor_opt: Optimizer<T, D>,
    critic_opt: Optimizer<T, D>,
    replay: Replay<T, D>,
    noise: Rng,
    tape: Tape<T, D>,
    iteration: usize,
}

/// A `[rows, cols]` tensor of `rng`'s normal samples, drawn on `device`.
fn normal_on<T: Float, D: TrainDevice<T>>(
    device: &D,
    rows: usize,
    cols: usize,
    std: f64,
    rng: &mut Rng,
) -> Result<Tensor<T, D>> {
    Tensor::rand_normal_on(device, [rows, cols], 0.0, std, rng)
}

impl<T: Float, D: TrainDevice<T>> Td3<T, D> {
    /// The networks, optimizers and replay on `device`, from fixed seeds.
    pub fn new_on(device: &D) -> Result<Self> {
        let mut rng = Rng::new(5, "w7");
        let mut mlp = |name: &str, sizes: &[usize], output| {
            Mlp::new_on(
                device,
                name,
                sizes,
                Activation::Relu,
                output,
                Init::TorchDefault,
                &mut rng,
            )
        };
        let actor = mlp("actor", &[STATE, 400, 300, ACTION], Activation::Tanh)?;
        let critic_sizes = [STATE + ACTION, 400, 300, 1];
        let critic = Critic {
            q1: mlp("critic/q1", &critic_sizes, Activation::Identity)?,
            q2: mlp("critic/q2", &critic_sizes, Activation::Identity)?,
        };
        let mut data = Rng::new(6, "w7-replay");
        let replay = Replay {
            state: normal_on(device, REPLAY, STATE, 1.0, &mut data)?,
            action: normal_on(device, REPLAY, ACTION, 1.0, &mut data)?
                .clamp(T::from_f64(-1.0), T::one())?,
            next_state: normal_on(device, REPLAY, STATE, 1.0, &mut data)?,
            reward: normal_on(device, REPLAY, 1, 1.0, &mut data)?,
            not_done: normal_on(device, REPLAY, 1, 1.0, &mut data)?.gt(&Tensor::full_on(
                device,
                [1],
                T::from_f64(-2.33),
            )?)?,
            sampler: Rng::new(7, "w7-sample"),
        };
        let adam = || Optimizer::new_on(device.clone(), Adam::torch(), 3e-4);
        Ok(Self {
            actor_target: actor.clone(),
            critic_target: critic.clone(),
            actor,
            critic,
            actor_opt: adam()?,
            critic_opt: adam()?,
            replay,
            noise: Rng::new(8, "w7-noise"),
            tape: Tape::new_on(device),
            iteration: 0,
        })
    }

    /// One iteration: the critics' update, and every second iteration the actor's and the
    /// Polyak updates of both targets.
    pub fn iterate(&mut self) -> Result<()> {
        let device = self.tape.device().clone();
        let replay = &mut self.replay;
        let index: Vec<usize> = (0..TD3_BATCH)
            .map(|_| replay.sampler.below(REPLAY as u64) as usize)
            .collect();
        let pick = |t: &Tensor<T, D>| t.index_select(0, &index);
        let (state, action, next_state) = (
            pick(&replay.state)?,
            pick(&replay.action)?,
            pick(&replay.next_state)?,
        );
        let (reward, not_done) = (pick(&replay.reward)?, pick(&replay.not_done)?);
        let noise = normal_on(&device, TD3_BATCH, ACTION, 0.2, &mut self.noise)?
            .clamp(T::from_f64(-0.5), T::from_f64(0.5))?;

        let target = {
            let tape = Tape::new_on(&device).no_grad();
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

    /// Every parameter of the actor, the critics and their targets, in a fixed order.
    pub fn parameters(&self) -> Vec<&Tensor<T, D>> {
        let mut out = Vec::new();
        self.actor.visit(&mut |p| out.push(p.value()));
        self.actor_target.visit(&mut |p| out.push(p.value()));
        self.critic.visit(&mut |p| out.push(p.value()));
        self.critic_target.visit(&mut |p| out.push(p.value()));
        out
    }

    /// The actor's parameters, widened to f64 and concatenated.
    pub fn actor_values(&self) -> Result<Vec<f64>> {
        flat_values(&self.actor)
    }
}

/// The parameters of `module`, widened to f64, one after the other.
pub fn flat_values<T: Float, D: TrainDevice<T>>(module: &impl Module<T, D>) -> Result<Vec<f64>> {
    let mut out = Vec::new();
    for p in module.parameters() {
        out.extend(p.value().to_vec()?.into_iter().map(Float::as_f64));
    }
    Ok(out)
}

/// `twin`'s parameters set to `source`'s values, widened to f64.
pub fn widen_into(twin: &mut impl Module<f64>, source: &impl Module<f32>) -> Result<()> {
    let values = source
        .parameters()
        .iter()
        .map(|p| widen(p.value()))
        .collect::<Result<Vec<_>>>()?;
    let mut values = values.into_iter();
    let mut outcome = Ok(());
    twin.visit_mut(&mut |p| {
        if let (Some(value), Ok(())) = (values.next(), &outcome) {
            outcome = p.set_value(value);
        }
    });
    outcome
}

/// `t` widened to f64, on the Cpu.
pub fn widen(t: &Tensor<f32>) -> Result<Tensor<f64>> {
    let data = t.to_vec()?.into_iter().map(f64::from).collect();
    Tensor::from_vec(data, t.shape().clone())
}

impl Td3<f64, Cpu> {
    /// The float64 twin of `source`: its initial parameters and replay, widened (the
    /// criterion bench checks the f32 run against it).
    pub fn twin_of(source: &Td3<f32, Cpu>) -> Result<Self> {
        let mut twin = Self::new_on(&Cpu::seq())?;
        widen_into(&mut twin.actor, &source.actor)?;
        widen_into(&mut twin.actor_target, &source.actor_target)?;
        widen_into(&mut twin.critic, &source.critic)?;
        widen_into(&mut twin.critic_target, &source.critic_target)?;
        let replay = &source.replay;
        twin.replay.state = widen(&replay.state)?;
        twin.replay.action = widen(&replay.action)?;
        twin.replay.next_state = widen(&replay.next_state)?;
        twin.replay.reward = widen(&replay.reward)?;
        twin.replay.not_done = widen(&replay.not_done)?;
        Ok(twin)
    }
}

const OBSERVATION: usize = 8;
const ACTIONS: usize = 4;
const HIDDEN: usize = 64;

/// The PPO update's policy (logits) and value networks, one module for one optimizer.
#[derive(Debug, Module)]
struct ActorCritic<T: Float, D: TrainDevice<T>> {
    policy: Mlp<T, D>,
    value: Mlp<T, D>,
}

/// `gpu_train.py`'s PPO minibatch update on device `D`, over one fixed minibatch.
#[derive(Debug)]
pub struct PpoUpdate<T: Float, D: TrainDevice<T>> {
    nets: ActorCritic<T, D>,
    adam: Optimizer<T, D>,
    observations: Tensor<T, D>,
    actions: Vec<usize>,
    old_log_probs: Tensor<T, D>,
    advantages: Tensor<T, D>,
    returns: Tensor<T, D>,
    tape: Tape<T, D>,
}

impl<T: Float, D: TrainDevice<T>> PpoUpdate<T, D> {
    /// The networks, Adam and a minibatch of `samples` on `device`, from fixed seeds.
    pub fn new_on(device: &D, samples: usize) -> Result<Self> {
        let mut rng = Rng::new(9, "ppo-update");
        let mut mlp = |name: &str, out: usize| {
            Mlp::new_on(
                device,
                name,
                &[OBSERVATION, HIDDEN, HIDDEN, out],
                Activation::Tanh,
                Activation::Identity,
                Init::TorchDefault,
                &mut rng,
            )
        };
        let nets = ActorCritic {
            policy: mlp("policy", ACTIONS)?,
            value: mlp("value", 1)?,
        };
        let adam = Adam {
            eps: 1e-5,
            ..Adam::torch()
        };
        let mut data = Rng::new(10, "ppo-update-data");
        let observations = normal_on(device, samples, OBSERVATION, 1.0, &mut data)?;
        let actions = (0..samples)
            .map(|_| data.below(ACTIONS as u64) as usize)
            .collect();
        let old_log_probs = (&normal_on(device, samples, 1, 0.1, &mut data)? - T::from_f64(1.4))?;
        let advantages = normal_on(device, samples, 1, 1.0, &mut data)?;
        let returns = normal_on(device, samples, 1, 1.0, &mut data)?;
        Ok(Self {
            nets,
            adam: Optimizer::new_on(device.clone(), adam, 3e-4)?,
            observations,
            actions,
            old_log_probs,
            advantages,
            returns,
            tape: Tape::new_on(device),
        })
    }

    /// One update: the loss, its gradient, the clip to a global norm of 0.5, Adam.
    pub fn update(&mut self) -> Result<()> {
        let samples = self.actions.len();
        let eps = T::from_f64(1e-8);
        let normalized = {
            let a = &self.advantages;
            let std = a.var_axis(0, 1, true)?.sqrt()?;
            (a - &a.mean_axis(0, true)?)?.div(&(&std + eps)?)?
        };
        self.tape.reset();
        let tape = &self.tape;
        let observations = tape.constant(&self.observations);
        let log_probs = self
            .nets
            .policy
            .forward(tape, &observations)?
            .log_softmax(1)?;
        let taken = log_probs.gather(1, &self.actions, [samples, 1])?;
        let ratio = taken.sub(&tape.constant(&self.old_log_probs))?.exp()?;
        let minus_advantages = tape.constant(&normalized.neg()?);
        let unclipped = minus_advantages.mul(&ratio)?;
        let clipped = minus_advantages.mul(&ratio.clamp(T::from_f64(0.8), T::from_f64(1.2))?)?;
        let surrogate = unclipped.maximum(&clipped)?.mean_all()?;
        let entropy = log_probs
            .exp()?
            .mul(&log_probs)?
            .sum(1, false)?
            .mean_all()?
            .neg()?;
        let values = self.nets.value.forward(tape, &observations)?;
        let value_loss = mse_loss(&values, &tape.constant(&self.returns), Reduction::Mean)?;
        let loss = surrogate
            .sub(&entropy.mul_scalar(T::from_f64(0.01))?)?
            .add(&value_loss.mul_scalar(T::from_f64(0.5))?)?;
        let mut grads = tape.gradient(&loss, &[&self.nets])?;
        self.tape.reset();
        // Decided on the device: nothing is read back, so the update can be recorded.
        grads.clip_global_norm_on_device(0.5)?;
        self.adam.apply_gradients(&mut self.nets, &grads)
    }

    /// Every parameter of the policy and value networks, in a fixed order.
    pub fn parameters(&self) -> Vec<&Tensor<T, D>> {
        let mut out = Vec::new();
        self.nets.visit(&mut |p| out.push(p.value()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlgrad_core::Par;

    fn bits(tensors: &[&Tensor<f32>]) -> Vec<u32> {
        tensors
            .iter()
            .flat_map(|t| t.to_vec().unwrap())
            .map(f32::to_bits)
            .collect()
    }

    /// Both workloads train (their parameters move and stay finite) and give the same bits
    /// at one and two threads: what `rlgrad-gpu-train` compares a GPU's run with. At two
    /// threads they run as captured steps ([`rlgrad_core::Step`]): neither reads the device
    /// inside its step (the Cpu checks the rule), so a GPU can record them, and the bits
    /// are those of running them as they come.
    #[test]
    fn the_workloads_train_as_captured_steps_and_their_bits_do_not_depend_on_threads() {
        let runs: Vec<(Vec<u32>, Vec<u32>, Vec<u32>)> = [Par::Seq, Par::rayon(2)]
            .into_iter()
            .map(|par| {
                let cpu = Cpu::new(par);
                let captured = par != Par::Seq;
                let mut step = rlgrad_core::Step::new(&cpu);
                let mut run = |work: &mut dyn FnMut() -> Result<()>| {
                    if captured {
                        step.run(work).unwrap();
                    } else {
                        work().unwrap();
                    }
                };
                let mut td3 = Td3::<f32, Cpu>::new_on(&cpu).unwrap();
                let before = bits(&td3.parameters());
                for _ in 0..3 {
                    run(&mut || td3.iterate());
                }
                let mut ppo = PpoUpdate::<f32, Cpu>::new_on(&cpu, 512).unwrap();
                let ppo_before = bits(&ppo.parameters());
                for _ in 0..3 {
                    run(&mut || ppo.update());
                }
                assert_ne!(bits(&ppo.parameters()), ppo_before, "PPO moved nothing");
                assert_ne!(bits(&td3.parameters()), before, "TD3 moved nothing");
                (before, bits(&td3.parameters()), bits(&ppo.parameters()))
            })
            .collect();
        for (_, td3, ppo) in &runs {
            assert!(
                td3.iter()
                    .chain(ppo)
                    .all(|&b| f32::from_bits(b).is_finite())
            );
        }
        assert_eq!(
            runs[0].1, runs[1].1,
            "TD3 at 1 thread and 2 as a captured step"
        );
        assert_eq!(
            runs[0].2, runs[1].2,
            "PPO at 1 thread and 2 as a captured step"
        );
    }

    /// A clip that decides on the host is a read inside the step, which the Cpu's step
    /// names.
    #[test]
    fn a_step_that_clips_on_the_host_names_the_read() {
        let cpu = Cpu::seq();
        let mut step = rlgrad_core::Step::new(&cpu);
        let mut grads = {
            let tape = Tape::<f32, Cpu>::new_on(&cpu);
            let w = rlgrad_autodiff::Param::new("w", Tensor::ones_on(&cpu, [2]).unwrap()).unwrap();
            let loss = tape.param(&w).sum_all().unwrap();
            tape.gradient(&loss, &[&w]).unwrap()
        };
        let refused = step.run(|| grads.clip_global_norm(0.5).map(drop));
        assert!(
            refused
                .unwrap_err()
                .to_string()
                .contains("clip_global_norm")
        );
    }
}
