//! The cross-ISA golden test of training: a small MLP and a small LSTM over padded
//! sequences, trained a few steps through the public autodiff, nn and optim API, in `f32`
//! and `f64`, with the bits of every parameter afterwards (in name order) hashed into one
//! value per model and element type. The hashes are committed below ([`GOLDEN`]) and must
//! come out the same at every instruction set this CPU supports
//! ([`rlgrad_core::cpu::simd::Isa::ALL`], through the process-wide cap
//! [`rlgrad_core::cpu::simd::set_max_isa`]), at `Par::Seq` and `Par::rayon(3)`, and on
//! every platform the suite runs on (x86-64 at SSE2, AVX2 and AVX-512; aarch64 NEON under
//! qemu). Every forward op, backward rule and optimizer update has one canonical order, so
//! a training run is the same bits everywhere. The golden test of rlgrad-core checks the
//! kernels one by one; this one checks them strung together the way a user does.
//!
//! # When a hash differs
//!
//! A mismatch names the model, the element type, the instruction set and the thread
//! setting, with the hash it got and the one committed.
//!
//! - **Nobody meant to change results: it is a determinism bug.** Some kernel, backward
//!   rule or optimizer step took another order at one instruction set, thread count or
//!   platform. Do not update the constant; the kernel golden test
//!   (`cargo test -p rlgrad-core --test golden`) usually names the family.
//! - **A canonical order, a formula, a backward rule, an initialization or the test's
//!   training itself was changed on purpose**: update the constants. Run
//!   `cargo test -p rlgrad-autodiff --test golden -- --nocapture`, which prints one
//!   `golden <model> <dtype>: <hex>` line per model, copy the new values into [`GOLDEN`],
//!   and say in the commit what changed and why.
//!
//! The test is one `#[test]` function because the instruction-set cap is process-wide: a
//! second test in this binary, running in parallel, would change the cap under it.

use rlgrad_autodiff::losses::{Reduction, mse_loss};
use rlgrad_autodiff::nn::{Activation, Forward, Init, Linear, Lstm, Mlp, Module};
use rlgrad_autodiff::{ApplyGradients, Sequences, Tape};
use rlgrad_core::{Cpu, Float, Par, Rng};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::golden::BitsHash;
use rlgrad_testkit::strategies;

/// The committed hashes: `(model, dtype, hash)`.
const GOLDEN: &[(&str, &str, u64)] = &[
    ("mlp", "f32", 0x395b944d751b275d),
    ("mlp", "f64", 0x9d5f4c9067bad9b0),
    ("lstm", "f32", 0x9774fdfd76f5d807),
    ("lstm", "f64", 0xe69469f9d3731723),
];

/// The hash of every parameter of `module`, in name order. Every value must be finite:
/// trained parameters are, unless something is broken (NaN's sign and payload would also
/// be the hardware's, not rlgrad's).
fn parameter_hash<T: Float>(module: &impl Module<T>) -> u64 {
    let mut params: Vec<(String, Vec<T>)> = module
        .parameters()
        .iter()
        .map(|p| (p.name().to_owned(), p.value().to_vec().unwrap()))
        .collect();
    params.sort_by(|a, b| a.0.cmp(&b.0));
    let mut hash = BitsHash::new();
    for (name, values) in &params {
        assert!(
            values.iter().all(|v| v.is_finite()),
            "`{name}` is not finite after training"
        );
        hash.values(values);
    }
    hash.finish()
}

/// A 5 -> 33 -> 17 -> 3 tanh MLP (odd widths: no vector width divides them) trained 20
/// steps with PyTorch's Adam on the mean squared error to fixed targets.
fn mlp<T: Float>(par: Par) -> u64 {
    let cpu = Cpu::new(par);
    let mut rng = Rng::new(23, "golden mlp");
    let mut model = Mlp::<T>::new_on(
        &cpu,
        "mlp",
        &[5, 33, 17, 3],
        Activation::Tanh,
        Activation::Identity,
        Init::TorchDefault,
        &mut rng,
    )
    .unwrap();
    let x = Tensor::rand_normal_on(&cpu, [61, 5], 0.0, 2.0, &mut rng).unwrap();
    let y = Tensor::rand_normal_on(&cpu, [61, 3], 0.5, 1.0, &mut rng).unwrap();
    let mut adam = Optimizer::new_on(cpu, Adam::torch(), 1e-2).unwrap();
    let mut tape = Tape::new_on(&cpu);
    for _ in 0..20 {
        tape.reset();
        let prediction = model.forward(&tape, &tape.constant(&x)).unwrap();
        let loss = mse_loss(&prediction, &tape.constant(&y), Reduction::Mean).unwrap();
        let grads = tape.gradient(&loss, &[&model]).unwrap();
        adam.apply_gradients(&mut model, &grads).unwrap();
    }
    parameter_hash(&model)
}

/// An LSTM (3 inputs, 7 units) and a linear head, as one module for the optimizer.
#[derive(Debug, Clone, rlgrad_autodiff::Module)]
struct Recurrent<T: Float> {
    lstm: Lstm<T>,
    head: Linear<T>,
}

/// The LSTM and its head trained 5 steps with Keras' Adam on the masked mean squared error
/// of a padded batch of 4 sequences of lengths 6, 2, 5 and 1 (padded to 7 steps). The
/// padded steps of the inputs hold NaN, which the LSTM selects out (a leak would make
/// every parameter NaN); those of the targets hold 1000, which the masked mean never
/// reads. (NaN there would reach the gradients through the loss's own `sub` and
/// `square`, whose backward multiplies the zero gradient of a padded step by it, as in
/// any framework.)
fn lstm<T: Float>(par: Par) -> u64 {
    let cpu = Cpu::new(par);
    let mut rng = Rng::new(23, "golden lstm");
    let mut model = Recurrent::<T> {
        lstm: Lstm::new_on(&cpu, "lstm", 3, 7, &mut rng).unwrap(),
        head: Linear::new_on(&cpu, "head", 7, 1, Init::GlorotUniform, &mut rng).unwrap(),
    };
    let lengths = [6, 2, 5, 1];
    let (batch, steps) = (lengths.len(), 7);
    let seqs = Sequences::new(&lengths, Some(steps)).unwrap();
    let mask = seqs.mask().unwrap();
    let padded = |values: Vec<T>, features: usize, padding: T| -> Vec<T> {
        values
            .chunks(features)
            .zip(mask.as_bools())
            .flat_map(|(step, &valid)| step.iter().map(move |&v| if valid { v } else { padding }))
            .collect()
    };
    let x = Tensor::rand_normal_on(&cpu, [batch, steps, 3], 0.0, 1.5, &mut rng).unwrap();
    let x = padded(x.to_vec().unwrap(), 3, T::nan());
    let x = Tensor::from_vec_on(&cpu, x, [batch, steps, 3]).unwrap();
    let y = Tensor::rand_normal_on(&cpu, [batch, steps], 0.0, 1.0, &mut rng).unwrap();
    let y = padded(y.to_vec().unwrap(), 1, T::from_f64(1000.0));
    let y = Tensor::from_vec_on(&cpu, y, [batch, steps]).unwrap();
    let mut adam = Optimizer::new_on(cpu, Adam::keras(), 3e-2).unwrap();
    let mut tape = Tape::new_on(&cpu);
    for _ in 0..5 {
        tape.reset();
        let (outputs, _) = model
            .lstm
            .run(&tape, &tape.constant(&x), Some(&seqs), None)
            .unwrap();
        let prediction = model
            .head
            .forward(&tape, &outputs)
            .unwrap()
            .reshape([batch, steps])
            .unwrap();
        let loss = prediction
            .sub(&tape.constant(&y))
            .unwrap()
            .square()
            .unwrap()
            .masked_mean(&seqs)
            .unwrap();
        let grads = tape.gradient(&loss, &[&model]).unwrap();
        adam.apply_gradients(&mut model, &grads).unwrap();
    }
    parameter_hash(&model)
}

#[test]
fn training_gives_the_committed_bits_at_every_isa_and_thread_count() {
    strategies::assert_golden_hashes(GOLDEN, |par| {
        vec![
            ("mlp", "f32", mlp::<f32>(par)),
            ("mlp", "f64", mlp::<f64>(par)),
            ("lstm", "f32", lstm::<f32>(par)),
            ("lstm", "f64", lstm::<f64>(par)),
        ]
    });
}
