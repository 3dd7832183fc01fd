//! An autodiff model trained with Adam, interrupted at a random step, checkpointed
//! (module parameters, optimizer state, RNG stream) and resumed in fresh state from the
//! latest checkpoint, ends with the bits of a run that never stopped.

use proptest::prelude::*;
use rlgrad_autodiff::losses::{Reduction, mse_loss};
use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module};
use rlgrad_autodiff::{ApplyGradients, Tape};
use rlgrad_checkpoint::{Checkpoint, CheckpointManager, Restore};
use rlgrad_core::Rng;
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::strategies::config;

const STEPS: usize = 12;

/// The model, its optimizer and the minibatch stream of a run.
struct Run {
    model: Mlp,
    adam: Optimizer<f32>,
    batches: Rng,
}

impl Run {
    fn fresh(seed: u64) -> Self {
        let mut init = Rng::new(seed, "init");
        Self {
            model: Mlp::new(
                "model",
                &[3, 16, 1],
                Activation::Tanh,
                Activation::Identity,
                Init::TorchDefault,
                &mut init,
            )
            .unwrap(),
            adam: Optimizer::new(Adam::torch(), 1e-2).unwrap(),
            batches: Rng::new(seed, "batches"),
        }
    }

    /// One Adam step on a fresh minibatch: `y = x0 - 2 x1 + x2` plus the stream's noise.
    fn step(&mut self) {
        let x = Tensor::<f32>::rand_normal([8, 3], 0.0, 1.0, &mut self.batches).unwrap();
        let weights = Tensor::from_vec(vec![1.0f32, -2.0, 1.0], [3, 1]).unwrap();
        let y = x.matmul(&weights).unwrap();
        let tape = Tape::new();
        let prediction = self.model.forward(&tape, &tape.constant(&x)).unwrap();
        let loss = mse_loss(&prediction, &tape.constant(&y), Reduction::Mean).unwrap();
        let grads = tape.gradient(&loss, &[&self.model]).unwrap();
        self.adam.apply_gradients(&mut self.model, &grads).unwrap();
    }

    fn save(&self, manager: &CheckpointManager, number: u64) {
        let mut checkpoint = Checkpoint::new();
        checkpoint.put_module("model", &self.model).unwrap();
        checkpoint.put_optimizer("optim", &self.adam).unwrap();
        checkpoint.put_rng("rng/batches", &self.batches).unwrap();
        manager.save(number, &checkpoint).unwrap();
    }

    fn resume(seed: u64, manager: &CheckpointManager) -> (Self, u64) {
        let mut run = Self::fresh(seed ^ 0xdead);
        let mut plan = Restore::new();
        plan.module("model", &mut run.model)
            .optimizer("optim", &mut run.adam)
            .rng("rng/batches", &mut run.batches);
        let number = manager
            .restore_latest(plan)
            .unwrap()
            .expect("a checkpoint was saved");
        (run, number)
    }

    fn bits(&self) -> Vec<Vec<u32>> {
        let mut bits: Vec<Vec<u32>> = self
            .model
            .parameters()
            .iter()
            .map(|p| {
                p.value()
                    .to_vec()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect()
            })
            .collect();
        for p in self.model.parameters() {
            for slot in ["m", "v"] {
                let values = self.adam.slot_values(p.name(), slot).unwrap();
                bits.push(values.iter().map(|v| v.to_bits()).collect());
            }
        }
        bits.push(vec![self.adam.step_count() as u32]);
        bits
    }
}

proptest! {
    #![proptest_config(config(8))]

    #[test]
    fn prop_a_resumed_model_continues_bit_identically(seed in any::<u64>(), interruption in 1..STEPS) {
        let mut uninterrupted = Run::fresh(seed);
        for _ in 0..STEPS {
            uninterrupted.step();
        }

        let dir = tempfile::tempdir().unwrap();
        let manager = CheckpointManager::new(dir.path(), Some(2)).unwrap();
        let mut first = Run::fresh(seed);
        for step in 1..=interruption {
            first.step();
            first.save(&manager, step as u64);
        }
        drop(first);
        let (mut resumed, number) = Run::resume(seed, &manager);
        prop_assert_eq!(number, interruption as u64);
        for _ in interruption..STEPS {
            resumed.step();
        }
        prop_assert_eq!(resumed.bits(), uninterrupted.bits());
    }
}
