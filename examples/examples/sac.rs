//! SAC on Pendulum-v1 with CleanRL's hyper-parameters and automatic entropy tuning,
//! trained until the mean return of the last 10 episodes reaches -200.
//!
//! ```text
//! cargo run --release --example sac -- --seed 0
//! cargo run --release --example sac -- --seed 0 --device cuda
//! ```

use std::process::ExitCode;

use rlgrad_examples::cli;
use rlgrad_examples::sac::Config;

const USAGE: &str = "\
usage: cargo run --release --example sac -- [--alpha A] [options]

SAC on Pendulum-v1 (CleanRL's hyper-parameters: 256-256 networks, Adam 3e-4 for the actor
and 1e-3 for the twin critics and the temperature, 5000 random start steps, batch 256,
gamma 0.99, tau 0.005, 2 actor updates every 2 steps, the temperature tuned towards an
entropy of -1). A unit is an environment step.

  --alpha A              a fixed temperature instead of the tuned one
";

fn main() -> ExitCode {
    cli::main(USAGE, |args| {
        Ok(Config {
            fixed_alpha: args.value::<f32>("--alpha", "a temperature")?,
            ..Config::default()
        })
    })
}
