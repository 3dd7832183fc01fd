//! `rlgrad-tools`: the part of `cargo xtask` that runs rlgrad's crates, built on demand
//! by the driver (`xtask/src/tools.rs`) so that the driver itself depends on none of them.
//!
//! ```text
//! rlgrad-tools parity [DIR] [--suite S]... [--implemented] [--device cpu|cuda]
//! rlgrad-tools parity-outputs OUT --suite S...   rlgrad's results on the vendored cases
//! rlgrad-tools interop-write WORK | interop-check WORK
//! rlgrad-tools converge
//! rlgrad-tools gpu-facts
//! ```

mod converge;
mod interop;
mod parity;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde_json::{Value, json};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (command, rest) = args
        .split_first()
        .map_or(("", &[][..]), |(c, r)| (c.as_str(), r));
    let result = match command {
        "parity" => parity_command(rest),
        "parity-outputs" => parity_outputs(rest),
        "interop-write" => interop::write(rest),
        "interop-check" => interop::check(rest),
        "converge" => no_options("converge", rest).and_then(|()| converge::run()),
        "gpu-facts" => no_options("gpu-facts", rest).and_then(|()| gpu_facts()),
        _ => Err(format!(
            "unknown command `{command}`; usage:\n{}",
            USAGE.trim_end()
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("rlgrad-tools: {message}");
            ExitCode::FAILURE
        }
    }
}

const USAGE: &str = "\
  rlgrad-tools parity [DIR] [--suite S]... [--implemented] [--device cpu|cuda]
  rlgrad-tools parity-outputs OUT --suite S...
  rlgrad-tools interop-write WORK | interop-check WORK
  rlgrad-tools converge
  rlgrad-tools gpu-facts
";

/// The workspace root (the parent of this crate), where the vendored `parity/` lives.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tools lives one level below the workspace root")
        .to_path_buf()
}

/// `Ok` when a command that takes no options got none.
fn no_options(command: &str, args: &[String]) -> Result<(), String> {
    match args.first() {
        None => Ok(()),
        Some(arg) => Err(format!("{command} takes no options, got `{arg}`")),
    }
}

/// `parity`: the reference vectors of `DIR` (default: the vendored `parity/`), every suite
/// or those named; `--implemented` names every suite with an implementing crate, so that
/// an op without an implementation fails instead of being reported unsupported.
fn parity_command(args: &[String]) -> Result<(), String> {
    let mut dir = None;
    let mut suites = Vec::new();
    let mut target = parity::Target::Cpu;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        if arg == "--device" {
            target = match rest.next().map(String::as_str) {
                Some("cpu") => parity::Target::Cpu,
                Some("cuda") => parity::Target::Cuda,
                other => return Err(format!("--device takes cpu or cuda, got {other:?}")),
            };
        } else if arg == "--suite" {
            let suite = rest.next().ok_or("--suite needs a suite name")?;
            suites.push(suite.clone());
        } else if arg == "--implemented" {
            suites.extend(parity::implemented_suites().iter().map(|s| (*s).to_owned()));
        } else if arg.starts_with("--") {
            return Err(format!(
                "unknown option `{arg}` (`cargo xtask parity --help`)"
            ));
        } else if dir.replace(PathBuf::from(arg)).is_some() {
            return Err("more than one directory given (`cargo xtask parity --help`)".to_owned());
        }
    }
    if target == parity::Target::Cuda
        && let Err(why) = rlgrad_cuda::Cuda::new(0)
    {
        let skipped = rlgrad_cuda::skip_outcome(rlgrad_cuda::gpu_required(), "GPU", &why)?;
        println!("parity --device cuda: {skipped}, no case ran");
        return Ok(());
    }
    parity::run(&dir.unwrap_or_else(parity::default_dir), &suites, target)
}

/// `parity-outputs OUT --suite S...`: what rlgrad computes on the vendored cases of the
/// suites, one JSON file per case in `OUT`, for the Python bindings' bit-equality test.
fn parity_outputs(args: &[String]) -> Result<(), String> {
    let usage = || format!("usage: rlgrad-tools parity-outputs OUT --suite S..., got {args:?}");
    let (out, rest) = args.split_first().ok_or_else(usage)?;
    let mut suites = Vec::new();
    let mut rest = rest.iter();
    while let Some(arg) = rest.next() {
        match (arg.as_str(), rest.next()) {
            ("--suite", Some(suite)) => suites.push(suite.as_str()),
            _ => return Err(usage()),
        }
    }
    if suites.is_empty() {
        return Err(usage());
    }
    let written = parity::write_outputs(&parity::default_dir(), &suites, Path::new(out))?;
    println!("rlgrad's results on {written} parity cases in {out}");
    Ok(())
}

/// `gpu-facts`: one JSON line with the GPU, its driver, NVRTC and the compile target, or
/// why there is no GPU (the GPU runner's report says it).
fn gpu_facts() -> Result<(), String> {
    let nvrtc = rlgrad_cuda::nvrtc_version().map(|v| v.to_string());
    let facts = match rlgrad_cuda::Cuda::new(0) {
        Ok(gpu) => json!({
            "gpu": gpu.model(),
            "target": gpu.target().label(),
            "driver": gpu.driver_version().to_string(),
            "nvrtc": nvrtc,
        }),
        Err(why) => json!({ "gpu": Value::Null, "why": why.to_string(), "nvrtc": nvrtc }),
    };
    println!("{facts}");
    Ok(())
}
