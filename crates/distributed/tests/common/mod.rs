//! Helpers shared by the test binaries: the microbatch data and the training run that
//! the Local tests (`training.rs`, `world_size.rs`) and the MPI test (`mpi.rs`) check.
// Each test binary uses a part of these helpers.
#![allow(dead_code)]

use rlgrad_autodiff::losses::{Reduction, mse_loss};
use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module};
use rlgrad_autodiff::{Tape, Tensor};
use rlgrad_core::{Par, Result, Rng, reduce};
use rlgrad_dist::{Collective, GradientReducer, ParamSpec, Scale, params_fingerprint};
use rlgrad_optim::{Adam, Optimizer, Param};

pub fn bits32(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

/// Values over many magnitudes, so that a different order of additions shows in the bits.
pub fn value(seed: u64, i: usize) -> f32 {
    let h =
        (seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let unit = (h >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
    unit * 10f32.powi(((h >> 8) % 9) as i32 - 4)
}

/// Single-worker gradient accumulation in the canonical order, written with rlgrad-core's
/// tree reduction.
pub fn accumulate(microbatches: usize, leaf: impl Fn(usize) -> Vec<f32> + Sync) -> Vec<f32> {
    reduce::tree_reduce(microbatches, Par::Seq, leaf, |mut a, b| {
        for (x, y) in a.iter_mut().zip(b) {
            *x += y;
        }
        a
    })
    .unwrap()
}

pub const SAMPLES: usize = 35;
pub const MICROBATCH: usize = 5; // 7 microbatches: no W in 2..=4 divides them
pub const STEPS: usize = 4;

pub fn data() -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng::new(11, "data");
    let x: Vec<f32> = (0..SAMPLES * 3)
        .map(|_| rng.normal::<f32>(0.0, 1.0))
        .collect();
    let y: Vec<f32> = x
        .chunks(3)
        .map(|r| (r[0] - 2.0 * r[1]).tanh() + 0.3 * r[2])
        .collect();
    (x, y)
}

pub fn model() -> Result<Mlp<f32>> {
    Mlp::new(
        "net",
        &[3, 16, 1],
        Activation::Tanh,
        Activation::Identity,
        Init::TorchDefault,
        &mut Rng::new(5, "init"),
    )
}

/// The gradients of microbatch `i`'s mean loss, one vector per parameter.
pub fn microbatch_grads(
    net: &Mlp<f32>,
    (x, y): &(Vec<f32>, Vec<f32>),
    i: usize,
) -> Result<Vec<Vec<f32>>> {
    let rows = i * MICROBATCH..(i + 1) * MICROBATCH;
    let tape = Tape::new();
    let xb = tape.constant(&Tensor::from_vec(
        x[rows.start * 3..rows.end * 3].to_vec(),
        [MICROBATCH, 3],
    )?);
    let yb = tape.constant(&Tensor::from_vec(y[rows].to_vec(), [MICROBATCH, 1])?);
    let loss = mse_loss(&net.forward(&tape, &xb)?, &yb, Reduction::Mean)?;
    let grads = tape.gradient(&loss, &[net])?;
    net.parameters()
        .iter()
        .map(|p| grads.get(p)?.to_vec())
        .collect()
}

/// One optimizer step on `net` with `grad(name)`, through the slice-level engine.
pub fn step(
    net: &mut Mlp<f32>,
    adam: &mut Optimizer<f32>,
    grad: impl Fn(&str) -> Vec<f32>,
) -> Result<()> {
    let names: Vec<String> = net
        .parameters()
        .iter()
        .map(|p| p.name().to_owned())
        .collect();
    let grads: Vec<Vec<f32>> = names.iter().map(|n| grad(n)).collect();
    let mut values: Vec<Vec<f32>> = net
        .parameters()
        .iter()
        .map(|p| p.value().to_vec())
        .collect::<Result<_>>()?;
    let mut params: Vec<Param<'_, f32>> = names
        .iter()
        .zip(values.iter_mut())
        .zip(&grads)
        .map(|((name, value), grad)| Param { name, value, grad })
        .collect();
    adam.step(&mut params)?;
    let mut result = Ok(());
    let mut k = 0;
    net.visit_mut(&mut |p| {
        let shape = p.shape().clone();
        if let Err(e) =
            Tensor::from_vec(std::mem::take(&mut values[k]), shape).and_then(|t| p.set_value(t))
        {
            result = Err(e);
        }
        k += 1;
    });
    result
}

pub fn fingerprint(net: &Mlp<f32>) -> Result<u64> {
    let values: Vec<(String, Vec<f32>)> = net
        .parameters()
        .iter()
        .map(|p| Ok((p.name().to_owned(), p.value().to_vec()?)))
        .collect::<Result<_>>()?;
    let refs: Vec<(&str, &[f32])> = values
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_slice()))
        .collect();
    Ok(params_fingerprint(&refs))
}

pub fn train_distributed<C: Collective>(comm: &C, data: &(Vec<f32>, Vec<f32>)) -> Result<u64> {
    let mut net = model()?;
    let mut adam = Optimizer::new(Adam::torch(), 0.01)?;
    let specs = net
        .parameters()
        .iter()
        .map(|p| ParamSpec::new(p.name(), p.shape().dims().to_vec()))
        .collect();
    let mut reducer = GradientReducer::new(specs, SAMPLES / MICROBATCH, Scale::Mean)?;
    for _ in 0..STEPS {
        let reduced = reducer.reduce(comm, |i| microbatch_grads(&net, data, i))?;
        step(&mut net, &mut adam, |name| {
            reduced.get(name).unwrap().to_vec()
        })?;
    }
    fingerprint(&net)
}

/// Gradient accumulation on one worker: every microbatch's gradient, summed in
/// rlgrad-core's canonical tree, divided by the microbatch count.
pub fn train_accumulating(data: &(Vec<f32>, Vec<f32>)) -> Result<u64> {
    let mut net = model()?;
    let mut adam = Optimizer::new(Adam::torch(), 0.01)?;
    let m = SAMPLES / MICROBATCH;
    for _ in 0..STEPS {
        let per_mb: Vec<Vec<f32>> = (0..m)
            .map(|i| Ok(microbatch_grads(&net, data, i)?.concat()))
            .collect::<Result<_>>()?;
        let sum = reduce::tree_reduce(
            m,
            Par::Seq,
            |i| per_mb[i].clone(),
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
                a
            },
        )
        .unwrap();
        let mean: Vec<f32> = sum.iter().map(|v| v / m as f32).collect();
        let mut offsets = std::collections::HashMap::new();
        let mut at = 0;
        for p in net.parameters() {
            offsets.insert(p.name().to_owned(), at..at + p.value().numel());
            at += p.value().numel();
        }
        step(&mut net, &mut adam, |name| {
            mean[offsets[name].clone()].to_vec()
        })?;
    }
    fingerprint(&net)
}
