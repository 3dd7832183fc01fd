//! Data-parallel training with autodiff and the optimizer engine: a few Adam steps on
//! W = 1, 2, 3, 4 workers give bit-identical parameters, equal to gradient accumulation on
//! one worker without any communicator.

use std::time::Duration;

use rlgrad_autodiff::losses::{Reduction, mse_loss};
use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module};
use rlgrad_autodiff::{Tape, Tensor};
use rlgrad_core::{Par, Result, Rng, reduce};
use rlgrad_dist::{Collective, GradientReducer, Local, ParamSpec, Scale, params_fingerprint};
use rlgrad_optim::{Adam, Optimizer, Param};

const SAMPLES: usize = 35;
const MICROBATCH: usize = 5; // 7 microbatches: no W in 2..=4 divides them
const STEPS: usize = 4;

fn data() -> (Vec<f32>, Vec<f32>) {
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

fn model() -> Result<Mlp<f32>> {
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
fn microbatch_grads(
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
fn step(
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

fn fingerprint(net: &Mlp<f32>) -> Result<u64> {
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

fn train_distributed<C: Collective>(comm: &C, data: &(Vec<f32>, Vec<f32>)) -> Result<u64> {
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
fn train_accumulating(data: &(Vec<f32>, Vec<f32>)) -> Result<u64> {
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

#[test]
fn training_on_1_to_4_workers_gives_the_parameters_of_accumulation() {
    let data = data();
    let expected = train_accumulating(&data).unwrap();
    let untrained = fingerprint(&model().unwrap()).unwrap();
    assert_ne!(expected, untrained, "the steps changed the parameters");
    for workers in 1..=4 {
        let prints = Local::run(workers, Duration::from_secs(60), |comm| {
            train_distributed(comm, &data)
        })
        .unwrap();
        for (rank, p) in prints.iter().enumerate() {
            assert_eq!(
                *p, expected,
                "W={workers} rank {rank}: {p:016x} vs {expected:016x}"
            );
        }
    }
}
