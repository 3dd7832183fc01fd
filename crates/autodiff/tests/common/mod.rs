//! The training loop the tests share: an MLP with ReLU hidden layers trained by Adam
//! (lr 5e-4, PyTorch flavor) on 16 pre-made batches with the surrogate loss
//! `mean(model(x) * A)` (the seed model of the autodiff issue, at its own sizes).

use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module};
use rlgrad_autodiff::{ApplyGradients, Tape};
use rlgrad_core::{Cpu, Float, Par, Rng};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::Tensor;

pub struct Training {
    model: Mlp,
    adam: Optimizer<f32>,
    batches: Vec<(Tensor, Tensor)>,
    tape: Tape,
    step: usize,
}

impl Training {
    /// An MLP of `sizes` on batches of `batch` rows, on a device with `par`.
    pub fn new(par: Par, sizes: &[usize], batch: usize) -> Self {
        let cpu = Cpu::new(par);
        let mut rng = Rng::new(2026, "seed-mlp");
        let model = Mlp::new_on(
            &cpu,
            "model",
            sizes,
            Activation::Relu,
            Activation::Identity,
            Init::TorchDefault,
            &mut rng,
        )
        .unwrap();
        let (inputs, outputs) = (sizes[0], sizes[sizes.len() - 1]);
        let batches = (0..16)
            .map(|_| {
                (
                    Tensor::rand_normal_on(&cpu, [batch, inputs], 0.0, 1.0, &mut rng).unwrap(),
                    Tensor::rand_normal_on(&cpu, [batch, outputs], 0.0, 1.0, &mut rng).unwrap(),
                )
            })
            .collect();
        Self {
            model,
            adam: Optimizer::new_on(cpu, Adam::torch(), 5e-4).unwrap(),
            batches,
            tape: Tape::new_on(&cpu),
            step: 0,
        }
    }

    /// One training step on the next batch.
    pub fn step(&mut self) {
        let (x, advantages) = &self.batches[self.step % self.batches.len()];
        self.step += 1;
        self.tape.reset();
        let tape = &self.tape;
        let out = self.model.forward(tape, &tape.constant(x)).unwrap();
        let loss = out
            .mul(&tape.constant(advantages))
            .unwrap()
            .mean_all()
            .unwrap();
        let grads = tape.gradient(&loss, &[&self.model]).unwrap();
        self.adam.apply_gradients(&mut self.model, &grads).unwrap();
    }

    /// The parameters' bits.
    pub fn parameter_bits(&self) -> Vec<Vec<u64>> {
        module_bits(&self.model)
    }
}

/// The bits of every parameter of `module`, in its order.
pub fn module_bits<T: Float, M: Module<T>>(module: &M) -> Vec<Vec<u64>> {
    module
        .parameters()
        .iter()
        .map(|p| {
            p.value()
                .to_vec()
                .unwrap()
                .iter()
                .map(|v| v.to_bits_u64())
                .collect()
        })
        .collect()
}
