//! Suite `convergence`: the TF guide's one-variable test against rlgrad-optim.

use rlgrad_optim::converge::{self, GuideOptimizer, SeedAdam};

use super::{Array, Case, Outputs};

pub const OPS: &[(&str, super::Handler)] = &[("convergence", convergence)];

fn convergence(case: &Case) -> Result<Outputs, String> {
    let optimizer = match case.text("optimizer")? {
        "gd" => GuideOptimizer::GradientDescent,
        "momentum" => GuideOptimizer::Momentum {
            momentum: case.number("momentum")?,
        },
        "adam" => GuideOptimizer::Adam(SeedAdam {
            beta_1: case.number("beta_1")?,
            beta_2: case.number("beta_2")?,
            ep: case.number("ep")?,
        }),
        other => return Err(format!("unknown optimizer `{other}`")),
    };
    let max_iters = case
        .optional_count("max_iters")?
        .ok_or("missing config `max_iters`")?;
    let run = converge::run(
        optimizer,
        case.number("lr")?,
        case.number("init")? as f32,
        max_iters,
    )
    .map_err(|e| e.to_string())?;
    let head: Vec<f32> = run.path.iter().copied().take(20).collect();
    Ok(Outputs::from([
        (
            "outcome".to_owned(),
            Array::scalar(f64::from(run.outcome.code())),
        ),
        (
            "iterations".to_owned(),
            Array::scalar(run.iterations as f64),
        ),
        ("final_x".to_owned(), Array::scalar(f64::from(run.final_x))),
        ("path_head".to_owned(), Array::new(&[head.len()], &head)),
    ]))
}
