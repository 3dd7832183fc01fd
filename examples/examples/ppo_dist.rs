//! DD-PPO on CartPole-v1, data-parallel: the final parameters are the same bits on any
//! number of workers, which the last line, `params fingerprint: <hex>`, lets anyone
//! compare.
//!
//! ```text
//! cargo run --release --example ppo_dist -- --updates 50 --workers 4      # threads
//! cargo build --release -p rlgrad-examples --example ppo_dist --features mpi
//! mpirun -np 4 target/release/examples/ppo_dist --updates 50              # processes
//! ```

use std::process::ExitCode;

use rlgrad_core::Result;
use rlgrad_dist::{Collective, Local};
use rlgrad_examples::cli::Args;
use rlgrad_examples::ppo_dist::{Config, DdPpo};

const USAGE: &str = "\
usage: ppo_dist [--updates N] [--workers W] [--seed N] [--quiet]

DD-PPO on CartPole-v1 with MLPs (16 environments of 64 steps per update, 4 Adam steps
on the whole batch per update, one microbatch per environment). Started by mpirun (a
build with --features mpi), each process is a worker; otherwise --workers threads are.
Every worker count gives the same parameters, bit for bit.

  --updates N    updates to run (default 100)
  --workers W    worker threads when not under mpirun (default 1: gradient
                 accumulation over the same 16 microbatches)
  --seed N       seed of the environments, initialization and actions (default 0)
  --quiet        only the final line
";

fn train<C: Collective>(comm: &C, config: &Config, updates: usize, quiet: bool) -> Result<u64> {
    let mut agent = DdPpo::new(config.clone(), comm)?;
    for _ in 0..updates {
        let report = agent.update(comm)?;
        if !quiet && comm.rank() == 0 && (report.update % 10 == 0 || report.update == 1) {
            let mean = report
                .mean_return
                .map_or_else(|| "-".to_owned(), |m| format!("{m:.1}"));
            println!(
                "update {:>4}: {} episodes, mean return {mean}",
                report.update, report.episodes
            );
        }
    }
    agent.fingerprint()
}

/// Whether mpirun (or srun) started this process.
fn under_mpi() -> bool {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

fn run(mut args: Args) -> Result<()> {
    let updates = args
        .value("--updates", "a number of updates")?
        .unwrap_or(100);
    let workers: usize = args.value("--workers", "a worker count >= 1")?.unwrap_or(1);
    let seed = args.value("--seed", "an unsigned integer")?.unwrap_or(0);
    let quiet = args.flag("--quiet");
    args.finish()?;
    let config = Config {
        seed,
        ..Config::default()
    };
    let (fingerprint, rank) = if under_mpi() {
        mpi_run(&config, updates, quiet)?
    } else {
        let prints = Local::run(workers, Local::DEFAULT_TIMEOUT, |comm| {
            train(comm, &config, updates, quiet)
        })?;
        (prints[0], 0)
    };
    if rank == 0 {
        println!("params fingerprint: {fingerprint:016x}");
    }
    Ok(())
}

#[cfg(feature = "mpi")]
fn mpi_run(config: &Config, updates: usize, quiet: bool) -> Result<(u64, usize)> {
    let comm = rlgrad_dist::Mpi::init()?;
    let fingerprint = train(&comm, config, updates, quiet)?;
    Ok((fingerprint, comm.rank()))
}

#[cfg(not(feature = "mpi"))]
fn mpi_run(_: &Config, _: usize, _: bool) -> Result<(u64, usize)> {
    Err(rlgrad_core::Error::value(
        "ppo_dist",
        "mpirun",
        "a build with --features mpi to run under mpirun",
        "a build without it",
    ))
}

fn main() -> ExitCode {
    let args = Args::from_env();
    if args.wants_help() {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ppo_dist: {e}");
            ExitCode::FAILURE
        }
    }
}
