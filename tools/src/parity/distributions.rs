//! Suite `distributions`: torch.distributions' categorical, normal and squashed normal,
//! written with rlgrad-distributions' public API the way a user would write them; the
//! gradients come from the tape.

use rlgrad_autodiff::{Tape, Var};
use rlgrad_core::Float;
use rlgrad_distributions::{Categorical, Normal, TanhNormal};

use super::case::{err, grad_output, param, tensor};
use super::{Array, Case, Outputs};

pub const OPS: &[(&str, super::Handler)] = &[
    ("categorical", |c| super::by_dtype!(c, categorical)),
    ("normal", |c| super::by_dtype!(c, normal)),
    ("tanh_normal", |c| super::by_dtype!(c, tanh_normal)),
];

/// `sum(weights * values)` with the weights of input `name`.
fn weighted<'t, T: Float>(
    case: &Case,
    tape: &'t Tape<T>,
    name: &str,
    values: &Var<'t, T>,
) -> Result<Var<'t, T>, String> {
    let weights = tape.constant(&tensor::<T>(case, name)?);
    values.mul(&weights).and_then(|v| v.sum_all()).map_err(err)
}

fn output<T: Float>(outputs: &mut Outputs, name: &str, v: &Var<'_, T>) -> Result<(), String> {
    outputs.insert(
        name.to_owned(),
        Array::new(v.dims(), &v.to_vec().map_err(err)?),
    );
    Ok(())
}

fn categorical<T: Float>(case: &Case) -> Result<Outputs, String> {
    let logits = param::<T>(case, "logits")?;
    let actions = case.input_usize("actions")?;
    let tape = Tape::new();
    let pi = Categorical::from_logits(&tape.param(&logits)).map_err(err)?;
    let log_prob = pi.log_prob(&actions).map_err(err)?;
    let entropy = pi.entropy().map_err(err)?;
    let loss = weighted(case, &tape, "w_log_prob", &log_prob)?
        .add(&weighted(case, &tape, "w_entropy", &entropy)?)
        .map_err(err)?;
    let grads = tape.gradient(&loss, &[&logits]).map_err(err)?;
    let mut out = Outputs::new();
    output(&mut out, "log_prob", &log_prob)?;
    output(&mut out, "entropy", &entropy)?;
    output(&mut out, "loss", &loss)?;
    grad_output(&mut out, "grad_logits", &grads, &logits)?;
    Ok(out)
}

fn normal<T: Float>(case: &Case) -> Result<Outputs, String> {
    let (mean, log_std) = (param::<T>(case, "mean")?, param::<T>(case, "log_std")?);
    let tape = Tape::new();
    let pi = Normal::from_log_std(&tape.param(&mean), &tape.param(&log_std)).map_err(err)?;
    let actions = tape.constant(&tensor::<T>(case, "actions")?);
    let log_prob = pi.log_prob(&actions).map_err(err)?;
    let entropy = pi.entropy().map_err(err)?;
    let rsample = pi.rsample(&tensor::<T>(case, "eps")?).map_err(err)?;
    let loss = weighted(case, &tape, "w_log_prob", &log_prob)?
        .add(&weighted(case, &tape, "w_entropy", &entropy)?)
        .map_err(err)?
        .add(&weighted(case, &tape, "w_rsample", &rsample)?)
        .map_err(err)?;
    let grads = tape.gradient(&loss, &[&mean, &log_std]).map_err(err)?;
    let mut out = Outputs::new();
    output(&mut out, "log_prob", &log_prob)?;
    output(&mut out, "entropy", &entropy)?;
    output(&mut out, "rsample", &rsample)?;
    output(&mut out, "loss", &loss)?;
    grad_output(&mut out, "grad_mean", &grads, &mean)?;
    grad_output(&mut out, "grad_log_std", &grads, &log_std)?;
    Ok(out)
}

fn tanh_normal<T: Float>(case: &Case) -> Result<Outputs, String> {
    let (mean, log_std) = (param::<T>(case, "mean")?, param::<T>(case, "log_std")?);
    let tape = Tape::new();
    let pi = TanhNormal::from_log_std(&tape.param(&mean), &tape.param(&log_std)).map_err(err)?;
    let sample = pi.rsample(&tensor::<T>(case, "eps")?).map_err(err)?;
    let loss = weighted(case, &tape, "w_action", &sample.action)?
        .add(&weighted(case, &tape, "w_log_prob", &sample.log_prob)?)
        .map_err(err)?;
    let grads = tape.gradient(&loss, &[&mean, &log_std]).map_err(err)?;
    let mut out = Outputs::new();
    output(&mut out, "action", &sample.action)?;
    output(&mut out, "log_prob", &sample.log_prob)?;
    output(&mut out, "loss", &loss)?;
    grad_output(&mut out, "grad_mean", &grads, &mean)?;
    grad_output(&mut out, "grad_log_std", &grads, &log_std)?;
    Ok(out)
}
