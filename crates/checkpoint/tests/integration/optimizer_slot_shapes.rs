//! Optimizer slots are stored in their parameter's shape (Adam's `m` of a `[4, 64]`
//! weight is `[4, 64]`, as in PyTorch's `state_dict`), whether the parameter is put before
//! or after the optimizer; files whose slots are 1-d, as rlgrad wrote them before, still
//! restore.

use rlgrad_autodiff::nn::{Activation, Init, Mlp, Module};
use rlgrad_checkpoint::{Checkpoint, Restore, State};
use rlgrad_core::{Result, Rng};
use rlgrad_optim::{Adam, Optimizer, Param};

use crate::slot_bits;

const WEIGHT: [usize; 2] = [4, 64];

fn weight() -> Vec<f32> {
    (0..256).map(|i| (i as f32 - 128.0) / 64.0).collect()
}

/// Adam after two steps over `actor/l1/weight` `[4, 64]`, `actor/l1/bias` `[64]` and
/// `log_alpha`, which no checkpoint here stores.
fn trained() -> (Optimizer<f32>, Vec<f32>, Vec<f32>) {
    let mut adam = Optimizer::<f32>::new(Adam::torch(), 1e-3).unwrap();
    let (mut w, mut b, mut alpha) = (weight(), vec![0.5f32; 64], vec![0.0f32]);
    for step in 0..2 {
        let gw: Vec<f32> = w.iter().map(|v| v * 0.5 + step as f32).collect();
        let gb: Vec<f32> = (0..64).map(|i| i as f32 / 64.0 - 0.5).collect();
        adam.step(&mut [
            Param {
                name: "actor/l1/weight",
                value: &mut w,
                grad: &gw,
            },
            Param {
                name: "actor/l1/bias",
                value: &mut b,
                grad: &gb,
            },
            Param {
                name: "log_alpha",
                value: &mut alpha,
                grad: &[0.25],
            },
        ])
        .unwrap();
    }
    (adam, w, b)
}

fn shape(checkpoint: &Checkpoint, name: &str) -> Vec<usize> {
    checkpoint.tensor_info(name).unwrap().shape.clone()
}

fn restored(checkpoint: &Checkpoint) -> Result<Optimizer<f32>> {
    let (mut w, mut b) = (vec![0.0f32; 256], vec![0.0f32; 64]);
    let mut adam = Optimizer::<f32>::new(Adam::torch(), 1e-3)?;
    let mut plan = Restore::new();
    plan.slice("actor/l1/weight", &WEIGHT, &mut w)
        .slice("actor/l1/bias", &[64], &mut b)
        .optimizer("optim", &mut adam);
    checkpoint.restore(plan)?;
    Ok(adam)
}

#[test]
fn slots_have_their_parameters_shape_put_before_or_after_the_optimizer() -> Result<()> {
    let (adam, w, b) = trained();
    let mut parameters_first = Checkpoint::new();
    parameters_first.put("actor/l1/weight", &WEIGHT, &w)?;
    parameters_first.put("actor/l1/bias", &[64], &b)?;
    parameters_first.put_optimizer("optim", &adam)?;

    let mut optimizer_first = Checkpoint::new();
    optimizer_first.put_optimizer("optim", &adam)?;
    optimizer_first.put("actor/l1/weight", &WEIGHT, &w)?;
    optimizer_first.put("actor/l1/bias", &[64], &b)?;
    assert_eq!(optimizer_first, parameters_first);

    let file = Checkpoint::from_bytes(&parameters_first.to_bytes()?)?;
    for slot in ["m", "v"] {
        assert_eq!(
            shape(&file, &format!("optim/actor/l1/weight/{slot}")),
            WEIGHT
        );
        assert_eq!(shape(&file, &format!("optim/actor/l1/bias/{slot}")), [64]);
        // A parameter stored nowhere in the checkpoint: its element count alone.
        assert_eq!(shape(&file, &format!("optim/log_alpha/{slot}")), [1]);
    }
    // Row-major, as the parameter: m[1][0] is the slot's element 64.
    let m = file.read::<f32>("optim/actor/l1/weight/m", &WEIGHT)?;
    assert_eq!(
        m[64].to_bits(),
        adam.slot("actor/l1/weight", "m")?[64].to_bits()
    );

    let resumed = restored(&file)?;
    assert_eq!(slot_bits(&resumed.state()?), slot_bits(&adam.state()?));
    assert_eq!(resumed.state()?, adam.state()?);
    Ok(())
}

#[test]
fn flat_slots_of_earlier_files_still_restore() -> Result<()> {
    let (adam, w, b) = trained();
    // What rlgrad wrote before slots had shapes: every slot 1-d.
    let mut flat = Checkpoint::new();
    flat.put_optimizer("optim", &adam)?;
    let mut flat = Checkpoint::from_bytes(&flat.to_bytes()?)?;
    flat.put("actor/l1/weight", &WEIGHT, &w)?;
    flat.put("actor/l1/bias", &[64], &b)?;
    assert_eq!(shape(&flat, "optim/actor/l1/weight/m"), [256]);

    let resumed = restored(&flat)?;
    assert_eq!(slot_bits(&resumed.state()?), slot_bits(&adam.state()?));
    assert_eq!(resumed.state()?, adam.state()?);
    Ok(())
}

/// An agent whose optimizer field comes before the network it trains.
#[derive(State)]
struct Agent {
    adam: Optimizer,
    #[state(module)]
    actor: Mlp,
}

#[test]
fn a_derived_agents_slots_have_the_shapes_of_its_parameters() -> Result<()> {
    let actor = Mlp::new(
        "actor",
        &[3, 8, 1],
        Activation::Tanh,
        Activation::Identity,
        Init::TorchDefault,
        &mut Rng::new(0, "init"),
    )?;
    let mut adam = Optimizer::<f32>::new(Adam::torch(), 1e-3)?;
    let mut values: Vec<Vec<f32>> = actor
        .parameters()
        .iter()
        .map(|p| p.value().to_vec())
        .collect::<Result<_>>()?;
    let names: Vec<String> = actor
        .parameters()
        .iter()
        .map(|p| p.name().to_owned())
        .collect();
    let grads: Vec<Vec<f32>> = values.iter().map(|v| vec![0.1; v.len()]).collect();
    let mut params: Vec<Param<'_, f32>> = names
        .iter()
        .zip(&mut values)
        .zip(&grads)
        .map(|((name, value), grad)| Param { name, value, grad })
        .collect();
    adam.step(&mut params)?;

    let checkpoint = Checkpoint::from_state(&Agent { adam, actor })?;
    assert_eq!(shape(&checkpoint, "actor/l1/weight"), [3, 8]);
    assert_eq!(shape(&checkpoint, "adam/actor/l1/weight/m"), [3, 8]);
    assert_eq!(shape(&checkpoint, "adam/actor/l2/weight/v"), [8, 1]);
    assert_eq!(shape(&checkpoint, "adam/actor/l2/bias/m"), [1]);
    Ok(())
}
