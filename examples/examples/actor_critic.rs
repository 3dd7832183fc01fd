//! The TensorFlow actor-critic tutorial on CartPole-v1, trained until the mean return of
//! the last 100 episodes reaches 475.
//!
//! ```text
//! cargo run --release --example actor_critic -- --seed 42
//! ```

use std::process::ExitCode;

use rlgrad_examples::actor_critic::Config;
use rlgrad_examples::cli;

const USAGE: &str = "\
usage: cargo run --release --example actor_critic -- [options]

The TensorFlow actor-critic tutorial on CartPole-v1: one network (shared 128-unit layer,
policy and value heads), one Adam step (lr 0.01) per episode on standardized discounted
returns with a Huber critic loss. A unit is an episode (budget: the tutorial's 10000).
";

fn main() -> ExitCode {
    cli::main(USAGE, |_args| Ok(Config::default()))
}
