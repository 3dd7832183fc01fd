//! Captured steps (`rlgrad_core::Step`) on the GPU: a training step recorded once as a
//! CUDA graph and replayed gives the bits of the same step run eagerly (and the Cpu's),
//! over many iterations, with every kernel launched by the graph; a host read inside a
//! step is named and the step still runs; a step whose work changes is recorded again; a
//! refused allocation inside a step is an error and training goes on. Without a GPU each
//! test prints that it was skipped (or fails, with `RLGRAD_REQUIRE_GPU=1`).

use rlgrad_autodiff::losses::{Reduction, mse_loss};
use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module, soft_update};
use rlgrad_autodiff::{ApplyGradients, Tape};
use rlgrad_core::kernels::OptimKernel;
use rlgrad_core::{Cpu, Device, Result, Rng, Step};
use rlgrad_cuda::Cuda;
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::common::{exclusive_gpu, same};

const DATA: usize = 4096;

/// A regression trained as an off-policy learner trains: a minibatch sampled on the host
/// from data on the device (an upload of indices per step), noise drawn on the device (a
/// random stream's position per step), Adam (step scalars per step), a Polyak target.
struct Learner<D: TensorDevice<f32> + OptimKernel<f32>> {
    model: Mlp<f32, D>,
    target: Mlp<f32, D>,
    adam: Optimizer<f32, D>,
    x: Tensor<f32, D>,
    y: Tensor<f32, D>,
    sampler: Rng,
    noise: Rng,
    tape: Tape<f32, D>,
}

impl<D: TensorDevice<f32> + OptimKernel<f32>> Learner<D> {
    fn new(device: &D) -> Self {
        let mut rng = Rng::new(11, "cuda-capture");
        let model = Mlp::new_on(
            device,
            "model",
            &[8, 64, 64, 1],
            Activation::Tanh,
            Activation::Identity,
            Init::TorchDefault,
            &mut rng,
        )
        .unwrap();
        let x = Tensor::rand_normal_on(device, [DATA, 8], 0.0, 1.0, &mut rng).unwrap();
        let y = x.tanh().unwrap().sum_axis(1, true).unwrap();
        Self {
            target: model.clone(),
            model,
            adam: Optimizer::new_on(device.clone(), Adam::torch(), 1e-3).unwrap(),
            x,
            y,
            sampler: Rng::new(12, "cuda-capture-sample"),
            noise: Rng::new(13, "cuda-capture-noise"),
            tape: Tape::new_on(device),
        }
    }

    /// One step on a batch of `batch` samples; no host read.
    fn step(&mut self, batch: usize) -> Result<()> {
        let device = self.tape.device().clone();
        let index: Vec<usize> = (0..batch)
            .map(|_| self.sampler.below(DATA as u64) as usize)
            .collect();
        let noise = Tensor::rand_normal_on(&device, [batch, 1], 0.0, 0.1, &mut self.noise)?;
        let (x, y) = (
            self.x.index_select(0, &index)?,
            self.y.index_select(0, &index)?,
        );
        let y = (&y + &noise)?;
        self.tape.reset();
        let tape = &self.tape;
        let prediction = self.model.forward(tape, &tape.constant(&x))?;
        let loss = mse_loss(&prediction, &tape.constant(&y), Reduction::Mean)?;
        let grads = tape.gradient(&loss, &[&self.model])?;
        self.tape.reset();
        self.adam.apply_gradients(&mut self.model, &grads)?;
        soft_update(&mut self.target, &self.model, 0.01)
    }

    fn values(&self) -> Vec<f32> {
        let mut out = Vec::new();
        for module in [&self.model, &self.target] {
            module.visit(&mut |p| out.extend(p.value().to_vec().unwrap()));
        }
        out
    }
}

/// 60 steps: the first (Adam's slots created) and the second (the steady work, seen
/// once) eager, the third recorded, the rest replayed: the eager step's bits on the GPU
/// and the Cpu's; the replays launch one graph each and no kernel one by one, upload once
/// (the staged indices) and download nothing.
#[test]
fn a_replayed_step_gives_the_eager_bits_over_many_iterations() {
    let steps = 60;
    let cpu = Cpu::seq();
    let mut on_cpu = Learner::new(&cpu);
    for _ in 0..steps {
        on_cpu.step(256).unwrap();
    }
    let Some(lock) = exclusive_gpu() else { return };
    let gpu: &Cuda = &lock;
    let (mut eager, mut captured) = (Learner::new(gpu), Learner::new(gpu));
    let mut step = Step::new(gpu);
    for _ in 0..3 {
        step.run(|| captured.step(256)).unwrap();
    }
    let before = gpu.activity();
    for _ in 3..steps {
        step.run(|| captured.step(256)).unwrap();
    }
    let replays = gpu.activity().since(before);
    for _ in 0..steps {
        eager.step(256).unwrap();
    }
    same("captured vs eager", &eager.values(), &captured.values());
    same("captured vs Cpu", &on_cpu.values(), &captured.values());
    let stats = step.recordings().stats();
    println!("{stats:?}, replays' activity {replays:?}");
    assert_eq!(
        (stats.runs, stats.recorded, stats.eager),
        (steps as u64, 1, 2)
    );
    let replayed = (steps - 3) as u64;
    assert_eq!(stats.replayed, replayed);
    assert_eq!(replays.graph_launches, replayed);
    assert_eq!((replays.launches, replays.downloads), (0, 0));
    assert_eq!(replays.uploads, replayed, "one staging upload per replay");
}

/// A step that reads the device inside runs to its end with the eager bits, and `run`
/// names the read; the work without the read, once seen, is recorded and replayed.
#[test]
fn a_host_read_inside_a_step_is_named_and_the_step_still_runs() {
    let Some(lock) = exclusive_gpu() else { return };
    let gpu: &Cuda = &lock;
    let (mut eager, mut captured) = (Learner::new(gpu), Learner::new(gpu));
    let mut step = Step::new(gpu);
    let refused = step.run(|| {
        captured.step(128)?;
        captured.model.visit(&mut |p| drop(p.value().to_vec()));
        captured.step(128)
    });
    let message = refused.unwrap_err().to_string();
    assert!(message.contains("Device::download"), "{message}");
    for _ in 0..3 {
        step.run(|| captured.step(128)).unwrap();
    }
    for _ in 0..5 {
        eager.step(128).unwrap();
    }
    same("after the read", &eager.values(), &captured.values());
    let stats = step.recordings().stats();
    assert_eq!((stats.eager, stats.recorded, stats.replayed), (2, 1, 1));
}

/// Steps whose work alternates (two batch sizes, as TD3's delayed actor update alternates)
/// keep a recording each once seen twice, and each replay takes its own.
#[test]
fn a_step_whose_work_changes_is_recorded_again_and_each_recording_replays() {
    let Some(lock) = exclusive_gpu() else { return };
    let gpu: &Cuda = &lock;
    let (mut eager, mut captured) = (Learner::new(gpu), Learner::new(gpu));
    let mut step = Step::new(gpu);
    for i in 0..10 {
        let batch = if i % 2 == 0 { 256 } else { 96 };
        step.run(|| captured.step(batch)).unwrap();
        eager.step(batch).unwrap();
    }
    same("alternating batches", &eager.values(), &captured.values());
    let stats = step.recordings().stats();
    // Eager: the first (Adam's slots), then each size's first sight.
    assert_eq!((stats.recorded, stats.replayed, stats.eager), (2, 5, 3));
    assert_eq!(step.recordings().recorded_launches().len(), 2);
}

/// An allocation the GPU refuses inside a step (1 TiB) is the step's error naming the
/// bytes; the work logged before it runs, and training goes on with the eager bits.
#[test]
fn out_of_memory_inside_a_step_is_an_error_and_training_goes_on() {
    let Some(lock) = exclusive_gpu() else { return };
    let gpu: &Cuda = &lock;
    let (mut eager, mut captured) = (Learner::new(gpu), Learner::new(gpu));
    let mut step = Step::new(gpu);
    let tebibyte = 1usize << 40;
    let refused = step.run(|| {
        captured.step(64)?;
        Tensor::<f32, Cuda>::zeros_on(gpu, [tebibyte / 4]).map(drop)
    });
    let message = refused.unwrap_err().to_string();
    assert!(message.contains(&tebibyte.to_string()), "{message}");
    eager.step(64).unwrap();
    for _ in 0..4 {
        step.run(|| captured.step(64)).unwrap();
        eager.step(64).unwrap();
    }
    same("after the refusal", &eager.values(), &captured.values());
}

/// While a step runs, another thread's work on the device (an upload, a step of its own) is
/// an error that names the rule (it could read an upload that is only logged; waiting
/// could deadlock); after the step, that thread works again.
#[test]
fn another_threads_work_during_a_step_is_an_error_naming_the_rule() {
    let Some(lock) = exclusive_gpu() else { return };
    let gpu: &Cuda = &lock;
    let mut learner = Learner::new(gpu);
    let mut step = Step::new(gpu);
    let refused = step
        .run(|| {
            learner.step(32)?;
            let (other, other_step) = std::thread::scope(|s| {
                let upload = s.spawn(|| gpu.upload(&[1.0f32])).join();
                let step = s.spawn(|| Step::new(gpu).run(|| Ok(()))).join();
                (upload, step)
            });
            let other_step = other_step.expect("the other thread returns").unwrap_err();
            assert!(
                other_step.to_string().contains("another thread runs"),
                "{other_step}"
            );
            Ok(other.expect("the other thread returns"))
        })
        .unwrap();
    let message = refused.unwrap_err().to_string();
    assert!(
        message.contains("another thread runs a training step"),
        "{message}"
    );
    let after = std::thread::scope(|s| s.spawn(|| gpu.upload(&[1.0f32])).join());
    assert!(after.expect("the other thread returns").is_ok());
}

/// A step that panics after some work has that work launched as it unwinds; the device
/// then runs steps as before, with the bits of a learner that ran the same work eagerly.
#[test]
fn a_panicking_step_leaves_the_device_usable_with_the_eager_bits() {
    let Some(lock) = exclusive_gpu() else { return };
    let gpu: &Cuda = &lock;
    let (mut eager, mut captured) = (Learner::new(gpu), Learner::new(gpu));
    let mut step = Step::new(gpu);
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        step.run(|| -> rlgrad_core::Result<()> {
            captured.step(64)?;
            panic!("the step's own panic");
        })
    }));
    assert!(panicked.is_err());
    eager.step(64).unwrap();
    for _ in 0..4 {
        step.run(|| captured.step(64)).unwrap();
        eager.step(64).unwrap();
    }
    same("after the panic", &eager.values(), &captured.values());
}
