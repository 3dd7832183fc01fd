//! The generic code really is device-generic: `Tensor<f32, Cuda>` ops and a
//! `Tape<f32, Cuda>` training step of a small MLP with Adam compile (this file), and with
//! a GPU they give the Cpu's bits. Without a GPU the test prints that it was skipped (or fails, with
//! `RLGRAD_REQUIRE_GPU=1`).

use rlgrad_autodiff::losses::{Reduction, mse_loss};
use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module};
use rlgrad_autodiff::{ApplyGradients, NonFinite, Param, Tape};
use rlgrad_core::kernels::OptimKernel;
use rlgrad_core::{Cpu, Rng};
use rlgrad_cuda::Cuda;
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::common;
use common::same;

/// Results of a few tensor ops on `device`, as host vectors.
fn tensor_ops<D: TensorDevice<f32>>(device: &D) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(1, "cuda-generic-tensor");
    let a = Tensor::<f32, D>::rand_normal_on(device, [33, 17], 0.0, 1.0, &mut rng).unwrap();
    let b = Tensor::<f32, D>::rand_normal_on(device, [17, 9], 0.0, 1.0, &mut rng).unwrap();
    let bias = Tensor::<f32, D>::rand_normal_on(device, [9], 0.0, 1.0, &mut rng).unwrap();
    let y = (&a.matmul(&b).unwrap() + &bias).unwrap();
    vec![
        y.to_vec().unwrap(),
        y.tanh()
            .unwrap()
            .sum_axis(0, false)
            .unwrap()
            .to_vec()
            .unwrap(),
        vec![y.exp().unwrap().mean_all().unwrap()],
        a.transpose(0, 1)
            .unwrap()
            .contiguous()
            .unwrap()
            .to_vec()
            .unwrap(),
        y.max_axis(1, true).unwrap().to_vec().unwrap(),
    ]
}

/// Three Adam steps of a small MLP regression on `device`: the losses and the parameters.
fn training<D: TensorDevice<f32> + OptimKernel<f32>>(device: &D) -> Vec<Vec<f32>> {
    let mut rng = Rng::new(2, "cuda-generic-train");
    let mut model = Mlp::<f32, D>::new_on(
        device,
        "model",
        &[4, 32, 1],
        Activation::Tanh,
        Activation::Identity,
        Init::TorchDefault,
        &mut rng,
    )
    .unwrap();
    let mut adam = Optimizer::new_on(device.clone(), Adam::torch(), 1e-2).unwrap();
    let x = Tensor::<f32, D>::rand_normal_on(device, [64, 4], 0.0, 1.0, &mut rng).unwrap();
    let y = x.sum_axis(1, true).unwrap();
    let mut tape = Tape::new_on(device);
    let mut out = Vec::new();
    for _ in 0..3 {
        tape.reset();
        let prediction = model.forward(&tape, &tape.constant(&x)).unwrap();
        let loss = mse_loss(&prediction, &tape.constant(&y), Reduction::Mean).unwrap();
        out.push(loss.to_vec().unwrap());
        let grads = tape.gradient(&loss, &[&model]).unwrap();
        adam.apply_gradients(&mut model, &grads).unwrap();
    }
    for p in model.parameters() {
        out.push(p.value().to_vec().unwrap());
    }
    out
}

fn same_results(what: &str, cpu: &[Vec<f32>], gpu: &[Vec<f32>]) {
    assert_eq!(cpu.len(), gpu.len());
    for (k, (c, g)) in cpu.iter().zip(gpu).enumerate() {
        same(&format!("{what}: result {k}"), c, g);
    }
}

#[test]
fn tensors_and_a_training_step_on_the_gpu_give_the_cpus_bits() {
    let cpu = Cpu::seq();
    let (cpu_ops, cpu_training) = (tensor_ops(&cpu), training(&cpu));
    let Some(lock) = common::gpu() else { return };
    let gpu: &Cuda = &lock;
    same_results("tensor ops", &cpu_ops, &tensor_ops(gpu));
    same_results("training", &cpu_training, &training(gpu));
}

/// Asking for more memory than the GPU has (1 TiB, an H200 has 141 GB) is an error that
/// names the bytes, not a crash; the device stays usable: a training step after it still
/// gives the Cpu's bits.
#[test]
fn out_of_memory_is_an_error_naming_the_bytes_and_training_goes_on() {
    let cpu_training = training(&Cpu::seq());
    let Some(lock) = common::gpu() else { return };
    let gpu: &Cuda = &lock;
    let tebibyte = 1usize << 40;
    let refused =
        Tensor::<f32, Cuda>::zeros_on(gpu, [tebibyte / 4]).expect_err("1 TiB was allocated");
    let message = refused.to_string();
    assert!(message.contains(&tebibyte.to_string()), "{message}");
    same_results("training after the refusal", &cpu_training, &training(gpu));
}

/// A network whose second layer's output has an infinity (one weight is huge), on a tape
/// with the finite check on: the origin it names (its call site is the `forward` line
/// here, the same on every device).
fn first_non_finite<D: TensorDevice<f32>>(device: &D) -> NonFinite {
    let mut rng = Rng::new(3, "cuda-generic-finite");
    let model = Mlp::<f32, D>::new_on(
        device,
        "model",
        &[4, 8, 2],
        Activation::Tanh,
        Activation::Identity,
        Init::TorchDefault,
        &mut rng,
    )
    .unwrap();
    let mut huge = vec![0.5f32; 4];
    huge[2] = f32::MAX;
    let scale = Param::new("scale", Tensor::from_vec_on(device, huge, [2, 2]).unwrap()).unwrap();
    let x = Tensor::<f32, D>::rand_normal_on(device, [3, 4], 0.0, 1.0, &mut rng).unwrap();
    let tape = Tape::new_on(device).check_finite();
    let hidden = model.forward(&tape, &tape.constant(&x)).unwrap();
    let scaled = hidden.matmul(&tape.param(&scale)).unwrap();
    let _ = scaled.mul_scalar(4.0).unwrap();
    tape.first_non_finite().expect("f32::MAX times 4 overflows")
}

#[test]
fn the_finite_check_names_the_cpus_origin_on_the_gpu() {
    let cpu = first_non_finite(&Cpu::seq());
    let Some(lock) = common::gpu() else { return };
    let gpu: &Cuda = &lock;
    assert_eq!(first_non_finite(gpu), cpu);
}
