//! A training run interrupted at a random step, saved, and resumed in fresh state from the
//! latest checkpoint continues with exactly the bits of a run that never stopped.
//!
//! The model is linear least squares, `pred = X w + b`, with its gradient written out by
//! hand, trained by Adam on minibatches drawn from a named RNG stream: parameters,
//! optimizer slots and step counters, and the RNG position all have to come back for the
//! bits to match.

use proptest::prelude::*;
use rlgrad_checkpoint::{Checkpoint, CheckpointManager, Restore};
use rlgrad_core::Rng;
use rlgrad_optim::{Adam, Optimizer, Param};
use rlgrad_testkit::strategies::config;

use crate::slot_bits;

const FEATURES: usize = 3;
const EXAMPLES: usize = 40;

struct Data {
    x: Vec<f32>,
    y: Vec<f32>,
}

fn data(seed: u64) -> Data {
    let mut rng = Rng::new(seed, "data");
    let x: Vec<f32> = (0..EXAMPLES * FEATURES)
        .map(|_| rng.normal(0.0, 1.0))
        .collect();
    let y = x
        .chunks(FEATURES)
        .map(|row| 0.5 * row[0] - 2.0 * row[1] + row[2] + 0.3 + rng.normal::<f32>(0.0, 0.1))
        .collect();
    Data { x, y }
}

/// A run's parameters, optimizer step and slots (by parameter and slot name), as bits.
#[derive(Debug, PartialEq)]
struct Bits {
    w: Vec<u32>,
    b: Vec<u32>,
    optimizer_step: u64,
    slots: Vec<(String, String, Vec<u32>)>,
}

/// Everything a run carries from step to step.
struct Run {
    w: Vec<f32>,
    b: Vec<f32>,
    adam: Optimizer<f32>,
    minibatches: Rng,
    step: u64,
}

impl Run {
    fn fresh(init_seed: u64) -> Self {
        let mut init = Rng::new(init_seed, "init");
        Self {
            w: (0..FEATURES).map(|_| init.normal(0.0, 0.5)).collect(),
            b: vec![0.0],
            adam: Optimizer::new(Adam::torch(), 0.05).unwrap(),
            minibatches: Rng::new(init_seed, "minibatches"),
            step: 0,
        }
    }

    /// One Adam step on the mean squared error of a minibatch of `batch` rows.
    fn step(&mut self, data: &Data, batch: usize) {
        let mut grad_w = vec![0.0f32; FEATURES];
        let mut grad_b = vec![0.0f32];
        let scale = 2.0 / batch as f32;
        for _ in 0..batch {
            let i = self.minibatches.below(EXAMPLES as u64) as usize;
            let row = &data.x[i * FEATURES..(i + 1) * FEATURES];
            let pred = row.iter().zip(&self.w).map(|(x, w)| x * w).sum::<f32>() + self.b[0];
            let err = pred - data.y[i];
            for (g, x) in grad_w.iter_mut().zip(row) {
                *g += scale * err * x;
            }
            grad_b[0] += scale * err;
        }
        self.adam
            .step(&mut [
                Param {
                    name: "model/w",
                    value: &mut self.w,
                    grad: &grad_w,
                },
                Param {
                    name: "model/b",
                    value: &mut self.b,
                    grad: &grad_b,
                },
            ])
            .unwrap();
        self.step += 1;
    }

    fn checkpoint(&self) -> Checkpoint {
        let mut c = Checkpoint::new();
        c.put("model/w", &[FEATURES], &self.w).unwrap();
        c.put("model/b", &[1], &self.b).unwrap();
        c.put_optimizer("optim", &self.adam).unwrap();
        c.put_rng("rng/minibatches", &self.minibatches).unwrap();
        c.put_scalar("progress/step", self.step).unwrap();
        c
    }

    fn restore(&mut self, manager: &CheckpointManager) -> Option<u64> {
        let mut plan = Restore::new();
        plan.slice("model/w", &[FEATURES], &mut self.w)
            .slice("model/b", &[1], &mut self.b)
            .optimizer("optim", &mut self.adam)
            .rng("rng/minibatches", &mut self.minibatches)
            .scalar("progress/step", &mut self.step);
        manager.restore_latest(plan).unwrap()
    }

    fn bits(&self) -> Bits {
        let state = self.adam.state().unwrap();
        Bits {
            w: self.w.iter().map(|v| v.to_bits()).collect(),
            b: self.b.iter().map(|v| v.to_bits()).collect(),
            optimizer_step: state.step,
            slots: slot_bits(&state),
        }
    }
}

proptest! {
    #![proptest_config(config(24))]

    #[test]
    fn prop_a_resumed_run_continues_bit_identically(
        seed in 0u64..1000,
        total in 1u64..40,
        interrupt_fraction in 0.0f64..1.0,
        batch in 1usize..9,
    ) {
        let data = data(seed);
        let interrupt = (interrupt_fraction * total as f64) as u64;

        let mut uninterrupted = Run::fresh(seed);
        for _ in 0..total {
            uninterrupted.step(&data, batch);
        }

        let dir = tempfile::tempdir().unwrap();
        let manager = CheckpointManager::new(dir.path(), Some(2)).unwrap();
        let mut first = Run::fresh(seed);
        for _ in 0..interrupt {
            first.step(&data, batch);
            manager.save(first.step, &first.checkpoint()).unwrap();
        }
        drop(first);

        // A new process: different initial values and RNG streams, all overwritten.
        let mut resumed = Run::fresh(seed + 1);
        let restored = resumed.restore(&CheckpointManager::new(dir.path(), Some(2)).unwrap());
        prop_assert_eq!(restored, (interrupt > 0).then_some(interrupt));
        if interrupt == 0 {
            resumed = Run::fresh(seed);
        }
        prop_assert_eq!(resumed.step, interrupt);
        while resumed.step < total {
            resumed.step(&data, batch);
        }
        prop_assert_eq!(resumed.bits(), uninterrupted.bits());
        prop_assert_eq!(
            resumed.minibatches.next_u64(),
            uninterrupted.minibatches.next_u64()
        );
    }
}
