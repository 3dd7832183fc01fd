//! The parity runner: reference vectors from PyTorch, Keras, JAX/optax/rlax and RLlib
//! (schema in `parity/README.md`), dispatched on `suite` + `op` to rlgrad's
//! implementation and compared within each case's tolerance.
//!
//! Without `--suite`, every file runs; a case whose suite has no implementing crate in this
//! workspace yet is reported `unsupported` and not counted. With `--suite S`, every case
//! of S counts, and an op without an implementation is a failure. An unknown op of an
//! implemented suite is always a failure.

mod autodiff;
mod case;
mod convergence;
mod distributions;
mod mask;
mod optim;
mod returns;

use std::path::{Path, PathBuf};

pub use case::{Array, Case, Outputs};

/// What the implementation of one `suite`/`op` computes from a case.
pub type Handler = fn(&Case) -> Result<Outputs, String>;

/// Calls `$f::<f32>` or `$f::<f64>` as the case's dtype says.
macro_rules! by_dtype {
    ($case:expr, $f:ident) => {
        match $case.dtype {
            rlgrad_core::DType::F32 => $f::<f32>($case),
            rlgrad_core::DType::F64 => $f::<f64>($case),
            other => Err(format!("unsupported dtype {other}")),
        }
    };
}
pub(crate) use by_dtype;

/// The suites with an implementing crate, and their ops.
const SUITES: &[(&str, &[(&str, Handler)])] = &[
    ("autodiff", autodiff::OPS),
    ("returns", returns::OPS),
    ("mask", mask::OPS),
    ("optim", optim::OPS),
    ("convergence", convergence::OPS),
    ("distributions", distributions::OPS),
];

/// Where the cases run: the slice level (the Cpu), or the device level on a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Every implemented suite, on the Cpu.
    Cpu,
    /// The suites whose ops go through device kernels, on `rlgrad-cuda`'s `Cuda` device:
    /// returns (mask and optim run their parity cases on the slice level only so far).
    Cuda,
}

/// The suites and ops of a target.
fn suites(target: Target) -> &'static [(&'static str, &'static [(&'static str, Handler)])] {
    match target {
        Target::Cpu => SUITES,
        Target::Cuda => &[("returns", returns::CUDA_OPS)],
    }
}

/// Suites with an implementing crate in this workspace.
pub fn implemented_suites() -> Vec<&'static str> {
    SUITES.iter().map(|(suite, _)| *suite).collect()
}

fn handler(target: Target, suite: &str, op: &str) -> Option<Handler> {
    suites(target)
        .iter()
        .find(|(s, _)| *s == suite)?
        .1
        .iter()
        .find(|(o, _)| *o == op)
        .map(|(_, h)| *h)
}

/// The vendored copy of the reference vectors.
pub fn default_dir() -> PathBuf {
    crate::root().join("parity")
}

enum Outcome {
    Pass(f64),
    Fail(String),
    Unsupported(String),
}

fn evaluate(target: Target, case: &Case) -> Outcome {
    let Some(handler) = handler(target, &case.suite, &case.op) else {
        if target == Target::Cuda {
            return Outcome::Unsupported(format!(
                "`{}/{}` does not run on the Cuda device yet",
                case.suite, case.op
            ));
        }
        return if implemented_suites().contains(&case.suite.as_str()) {
            Outcome::Fail(format!(
                "unknown op `{}` of suite `{}`",
                case.op, case.suite
            ))
        } else {
            Outcome::Unsupported(format!("no crate implements suite `{}` yet", case.suite))
        };
    };
    match handler(case) {
        Ok(outputs) => match case.compare(&outputs) {
            Ok(worst) => Outcome::Pass(worst),
            Err(why) => Outcome::Fail(why),
        },
        Err(why) => Outcome::Fail(format!("the implementation returned an error: {why}")),
    }
}

/// Runs every `*.json` case of `dir` (restricted to `suites` unless empty), prints a line
/// per case and `N passed, N failed`; an error when a case failed or none ran.
pub fn run(dir: &Path, suites: &[String], target: Target) -> Result<(), String> {
    let cases = case::load_dir(dir)?;
    let (mut passed, mut failed, mut unsupported) = (0usize, 0usize, 0usize);
    let mut ran = 0usize;
    for loaded in &cases {
        let case = match loaded {
            Ok(case) => case,
            Err(why) => {
                if suites.is_empty() {
                    println!("FAIL  {why}");
                    failed += 1;
                }
                continue;
            }
        };
        if !suites.is_empty() && !suites.contains(&case.suite) {
            continue;
        }
        ran += 1;
        let label = format!("{}/{}  {}", case.suite, case.op, case.name);
        match evaluate(target, case) {
            Outcome::Pass(worst) => {
                passed += 1;
                println!(
                    "pass  {label}  (worst error {:.0}% of tolerance)",
                    worst * 100.0
                );
            }
            Outcome::Fail(why) => {
                failed += 1;
                println!("FAIL  {label}  {why}");
            }
            Outcome::Unsupported(why) if suites.is_empty() => {
                unsupported += 1;
                println!("unsupported  {label}  {why}");
            }
            Outcome::Unsupported(why) => {
                failed += 1;
                println!("FAIL  {label}  unsupported: {why}");
            }
        }
    }
    for suite in suites {
        if !cases.iter().flatten().any(|c| &c.suite == suite) {
            println!("FAIL  suite `{suite}`: no case in {}", dir.display());
            failed += 1;
        }
    }
    if unsupported > 0 {
        println!("{unsupported} unsupported (suites without an implementing crate, not counted)");
    }
    println!("{passed} passed, {failed} failed");
    if failed > 0 {
        Err(format!("{failed} parity case(s) failed"))
    } else if ran == 0 {
        Err(format!("no parity case ran from {}", dir.display()))
    } else {
        Ok(())
    }
}

/// Writes what rlgrad computes for every case of `suites` in `dir` to `out/<case>.json`
/// (`{"name": {"shape": [..], "data": [..]}}`, values as exact f64 JSON numbers, non-finite
/// ones as `"nan"`, `"inf"`, `"-inf"`), for the Python bindings' bit-equality test; the
/// number of files written. A case the implementation refuses is an error.
pub fn write_outputs(dir: &Path, suites: &[&str], out: &Path) -> Result<usize, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut written = 0;
    for case in case::load_dir(dir)?.iter().flatten() {
        if !suites.contains(&case.suite.as_str()) {
            continue;
        }
        let handler = handler(Target::Cpu, &case.suite, &case.op)
            .ok_or_else(|| format!("{}: unknown op `{}`", case.name, case.op))?;
        let outputs = handler(case).map_err(|why| format!("{}: {why}", case.name))?;
        let number = |v: f64| match v {
            v if v.is_nan() => serde_json::json!("nan"),
            v if v == f64::INFINITY => serde_json::json!("inf"),
            v if v == f64::NEG_INFINITY => serde_json::json!("-inf"),
            v => serde_json::json!(v),
        };
        let json: serde_json::Map<String, serde_json::Value> = outputs
            .iter()
            .map(|(name, array)| {
                let data: Vec<_> = array.data.iter().map(|&v| number(v)).collect();
                (
                    name.clone(),
                    serde_json::json!({ "shape": array.shape, "data": data }),
                )
            })
            .collect();
        let path = out.join(format!("{}.json", case.name));
        let text = serde_json::to_string(&json).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written += 1;
    }
    Ok(written)
}
