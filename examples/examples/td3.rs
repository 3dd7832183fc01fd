//! TD3 on Pendulum-v1 with Fujimoto's hyper-parameters, trained until the mean return of
//! the last 10 episodes reaches -200; `--ddpg` switches TD3's three additions off.
//!
//! ```text
//! cargo run --release --example td3 -- --seed 0
//! cargo run --release --example td3 -- --seed 0 --ddpg
//! cargo run --release --example td3 -- --seed 0 --device cuda
//! ```

use std::process::ExitCode;

use rlgrad_examples::cli;
use rlgrad_examples::td3::Config;

const USAGE: &str = "\
usage: cargo run --release --example td3 -- [--ddpg] [options]

TD3 on Pendulum-v1 (Fujimoto's hyper-parameters: 256-256 networks, Adam 3e-4, 25000
random start steps, batch 256, gamma 0.99, tau 0.005, exploration noise 0.1, target noise
0.2 clipped at 0.5, policy delay 2). A unit is an environment step.

  --ddpg                 DDPG: one critic, no target policy smoothing, no delay
";

fn main() -> ExitCode {
    cli::main(USAGE, |args| {
        Ok(if args.flag("--ddpg") {
            Config::ddpg()
        } else {
            Config::td3()
        })
    })
}
