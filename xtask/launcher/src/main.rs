//! What the `cargo xtask` alias runs: a launcher with no dependencies, so that it builds in
//! under a second on a fresh clone and can say at once what a first `cargo xtask demo`
//! builds and how long that takes. It then runs the driver (`cargo run --package xtask --
//! ARGS`, whose own first build takes about 10 s) and exits with its status.

use std::process::{Command, ExitCode};

/// What `cargo xtask demo` builds and runs, printed before anything is built: the first
/// build's times measured on a fresh clone (2-vCPU AMD EPYC Zen 5, 2026-11-28: the driver
/// 9 s, the example 82 s), so that a quiet minute is expected.
const DEMO_INTRO: &str = "demo: building the xtask driver (about 10 s the first time), then \
the actor-critic example in release (rlgrad's crates and their dependencies: about 80 s the \
first time on 2 cores, seconds after that), then training it on CartPole until the mean \
return of 100 episodes reaches 475 (about a second)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|verb| verb == "demo") {
        println!("{DEMO_INTRO}");
    }
    // The cargo that runs this launcher (set by `cargo run`), so that the driver is built
    // by the same toolchain.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let status = Command::new(&cargo)
        .args(["run", "--package", "xtask", "--"])
        .args(&args)
        .status();
    match status {
        Ok(status) => match status.code() {
            Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            // Killed by a signal: cargo has already said so.
            None => ExitCode::FAILURE,
        },
        Err(e) => {
            eprintln!("xtask-launcher: cannot run `{cargo} run --package xtask`: {e}");
            ExitCode::FAILURE
        }
    }
}
