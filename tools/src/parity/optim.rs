//! Suite `optim`: optimizer trajectories of PyTorch and Keras against rlgrad-optim.

use rlgrad_core::Float;
use rlgrad_optim::{
    Adagrad, Adam, AdamW, Flavor, Momentum, MomentumFlavor, Optimizer, Param, Rmsprop, Rule, Sgd,
};

use super::{Array, Case, Outputs};

pub const OPS: &[(&str, super::Handler)] = &[
    ("sgd", |c| super::by_dtype!(c, trajectory)),
    ("momentum", |c| super::by_dtype!(c, trajectory)),
    ("adam", |c| super::by_dtype!(c, trajectory)),
    ("adamw", |c| super::by_dtype!(c, trajectory)),
    ("rmsprop", |c| super::by_dtype!(c, trajectory)),
    ("adagrad", |c| super::by_dtype!(c, trajectory)),
];

fn flavor(case: &Case) -> Result<Flavor, String> {
    match case.text("flavor")? {
        "torch" => Ok(Flavor::Torch),
        "keras" => Ok(Flavor::Keras),
        other => Err(format!("unknown flavor `{other}`")),
    }
}

/// The rule a case describes.
fn rule<T: Float>(case: &Case) -> Result<Box<dyn Rule<T>>, String> {
    let n = |key: &str| case.number(key);
    Ok(match case.op.as_str() {
        "sgd" => Box::new(Sgd {
            weight_decay: n("weight_decay")?,
        }),
        "momentum" => Box::new(Momentum {
            flavor: match case.text("flavor")? {
                "torch" => MomentumFlavor::Torch,
                "keras" => MomentumFlavor::Keras,
                "core" => MomentumFlavor::Core,
                other => return Err(format!("unknown flavor `{other}`")),
            },
            momentum: n("momentum")?,
            dampening: n("dampening")?,
            nesterov: case.flag("nesterov")?,
            weight_decay: n("weight_decay")?,
        }),
        "adam" => Box::new(Adam {
            flavor: flavor(case)?,
            beta1: n("beta1")?,
            beta2: n("beta2")?,
            eps: n("eps")?,
            weight_decay: n("weight_decay")?,
            amsgrad: case.flag("amsgrad")?,
        }),
        "adamw" => Box::new(AdamW {
            beta1: n("beta1")?,
            beta2: n("beta2")?,
            eps: n("eps")?,
            weight_decay: n("weight_decay")?,
            amsgrad: case.flag("amsgrad")?,
        }),
        "rmsprop" => Box::new(Rmsprop {
            flavor: flavor(case)?,
            alpha: n("alpha")?,
            eps: n("eps")?,
            momentum: n("momentum")?,
            centered: case.flag("centered")?,
            weight_decay: n("weight_decay")?,
        }),
        "adagrad" => Box::new(Adagrad {
            flavor: flavor(case)?,
            lr_decay: n("lr_decay")?,
            eps: n("eps")?,
            initial_accumulator_value: n("initial_accumulator_value")?,
            weight_decay: n("weight_decay")?,
        }),
        other => return Err(format!("unknown optimizer `{other}`")),
    })
}

/// Runs the case's gradients through the optimizer, recording the parameter after each
/// step, Adam's `alpha_t`, and the final slots.
fn trajectory<T: Float>(case: &Case) -> Result<Outputs, String> {
    let rule = rule::<T>(case)?;
    let slot_names = rule.slot_names();
    let mut opt = Optimizer::<T>::new(rule, case.number("lr")?).map_err(|e| e.to_string())?;
    let param = case.input_array("param")?;
    let mut value = case.input::<T>("param")?;
    let grads = case.input::<T>("grads")?;
    let len = value.len();
    if len == 0 || grads.len() % len != 0 {
        return Err(format!(
            "grads hold {} values, not a multiple of the {len} parameters",
            grads.len()
        ));
    }
    let steps = grads.len() / len;
    let (mut params, mut effective_lr) =
        (Vec::with_capacity(grads.len()), Vec::with_capacity(steps));
    for grad in grads.chunks(len) {
        opt.step(&mut [Param {
            name: "param",
            value: &mut value,
            grad,
        }])
        .map_err(|e| e.to_string())?;
        params.extend_from_slice(&value);
        effective_lr.push(T::from_f64(opt.effective_lr(0).map_err(|e| e.to_string())?));
    }
    let mut shape = vec![steps];
    shape.extend_from_slice(&param.shape);
    let mut out = Outputs::from([
        ("params".to_owned(), Array::new(&shape, &params)),
        (
            "effective_lr".to_owned(),
            Array::new(&[steps], &effective_lr),
        ),
    ]);
    for slot in slot_names {
        let values = opt.slot("param", slot).map_err(|e| e.to_string())?;
        out.insert(slot.to_owned(), Array::new(&param.shape, values));
    }
    Ok(out)
}
