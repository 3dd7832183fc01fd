//! PPO with an LSTM policy on CartPole without velocities (RL Zoo's hyper-parameters for
//! `CartPoleNoVel-v1`); `--policy mlp` trains the same PPO with a memoryless policy, and
//! `--policy both` trains both and draws their learning curves on one chart.
//!
//! ```text
//! cargo run --release --example recurrent_ppo -- --seed 0 --policy both
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use rlgrad_core::{Error, Result};
use rlgrad_examples::cli::{self, Args, train_on_device};
use rlgrad_examples::ppo::{Config, Ppo};
use rlgrad_examples::run::Options;
use rlgrad_summary::{CurveOptions, plot_learning_curves};

const USAGE: &str = "\
usage: cargo run --release --example recurrent_ppo -- [--policy lstm|mlp|both] [options]

PPO on CartPole without velocities (observations [x, theta]), RL Zoo's hyper-parameters
for sb3-contrib's RecurrentPPO on CartPoleNoVel-v1: 8 environments, 32-step rollouts, 20
epochs, gamma 0.98, GAE lambda 0.8, learning rate 1e-3 and clip range 0.2 decaying
linearly over the budget. A unit is an environment step (budget: 100000).

  --policy lstm          separate 64-unit LSTMs for the policy and the value (default)
  --policy mlp           the same networks with a dense layer in place of each LSTM
  --policy both          lstm, then mlp, in RUN_DIR/lstm and RUN_DIR/mlp, and both
                         learning curves in RUN_DIR/lstm_vs_mlp.png
";

fn main() -> ExitCode {
    let args = Args::from_env();
    if args.wants_help() {
        print!("{USAGE}\ncommon options:\n{}", cli::COMMON_USAGE);
        return ExitCode::SUCCESS;
    }
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

fn run(mut args: Args) -> Result<()> {
    let policy = args
        .value::<String>("--policy", "lstm, mlp or both")?
        .unwrap_or_else(|| "lstm".to_owned());
    let options = args.options::<Ppo>()?;
    let configs = match policy.as_str() {
        "lstm" => vec![("lstm", Config::recurrent())],
        "mlp" => vec![("mlp", Config::memoryless())],
        "both" => vec![("lstm", Config::recurrent()), ("mlp", Config::memoryless())],
        other => {
            return Err(Error::value(
                "recurrent_ppo",
                "--policy",
                "lstm, mlp or both",
                format_args!("`{other}`"),
            ));
        }
    };
    let both = configs.len() > 1;
    let root = options.run_dir.clone().unwrap_or_else(|| {
        PathBuf::from("runs").join(format!("ppo_lstm_vs_mlp-seed{}", options.seed))
    });
    let mut curves = Vec::new();
    for (name, config) in configs {
        let options = Options {
            run_dir: if both {
                Some(root.join(name))
            } else {
                options.run_dir.clone()
            },
            ..options.clone()
        };
        let outcome = train_on_device(&options, &config)?;
        println!("{}\n", cli::report(&outcome.summary));
        curves.push(
            outcome
                .episodes
                .series(&format!("{name} policy: episode return")),
        );
    }
    if both {
        let path = root.join("lstm_vs_mlp.png");
        let chart = CurveOptions {
            title: format!("PPO on CartPole without velocities (seed {})", options.seed),
            x_label: "environment steps".into(),
            y_label: "episode return".into(),
            smoothing: Config::recurrent().target.window,
            ..CurveOptions::default()
        };
        plot_learning_curves(&path, &curves, &chart)?;
        println!("both learning curves: {}", path.display());
    }
    Ok(())
}
