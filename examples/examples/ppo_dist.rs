//! DD-PPO on CartPole-v1, data-parallel: the final parameters are the same bits on any
//! number of workers, which the last line, `params fingerprint: <hex>`, lets anyone
//! compare.
//!
//! ```text
//! cargo run --release --example ppo_dist -- --updates 50 --workers 4      # threads
//! cargo build --release -p rlgrad-examples --example ppo_dist --features mpi
//! mpirun -np 4 target/release/examples/ppo_dist --updates 50              # processes
//! # checkpoints every 10 updates, resumed on another number of workers
//! cargo run --release --example ppo_dist -- --updates 20 --save-every 10 --run-dir runs/d
//! cargo run --release --example ppo_dist -- --updates 50 --workers 3 --run-dir runs/d --resume
//! cargo run --release --example ppo_dist -- --updates 50 --workers 2 --device cuda  # the GPU
//! ```

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use rlgrad_core::{Cpu, Error, Result};
use rlgrad_dist::{Collective, Local};
use rlgrad_examples::cli::Args;
use rlgrad_examples::device::{DeviceKind, TrainDevice};
use rlgrad_examples::ppo_dist::{Config, DdPpo};

const USAGE: &str = "\
usage: ppo_dist [--updates N] [--workers W] [--accumulate K] [--seed N]
                [--run-dir DIR [--save-every K] [--resume]] [--timing] [--quiet]
                [--device cpu|cuda]

DD-PPO on CartPole-v1 with MLPs (16 environments of 64 steps per update, 4 Adam steps
on the whole batch per update, one microbatch per environment). Started by mpirun (a
build with --features mpi), each process is a worker; otherwise --workers threads are.
Every worker count gives the same parameters, bit for bit.

  --updates N    updates to run (default 100)
  --workers W    worker threads when not under mpirun (default 1: gradient
                 accumulation over the same 16 microbatches)
  --accumulate K each worker reduces its microbatches in K groups, as K workers
                 would own them (default 1); the same bits for every K
  --seed N       seed of the environments, initialization and actions (default 0)
  --run-dir DIR  save a checkpoint there after the last update (rank 0 writes it,
                 keeping the newest 3); refused when DIR holds checkpoints already,
                 unless --resume
  --save-every K also save after every K-th update
  --resume       continue from the latest checkpoint in DIR, on any number of workers,
                 up to --updates in all: the same bits as a run that never stopped
  --timing       time each update on rank 0, the ranks starting it together (after
                 a barrier), and print `median update time: X ms over N updates`
                 before the final line (the first update, a warm-up, left out)
  --quiet        only the final line (and the timing line)
  --device D     where the networks train: cpu (default) or cuda, the first GPU,
                 which every worker shares; the same bits on either
";

/// What to run, besides the configuration.
struct Plan {
    updates: u64,
    accumulate: usize,
    run_dir: Option<PathBuf>,
    save_every: Option<u64>,
    resume: bool,
    timing: bool,
    quiet: bool,
}

/// What a run ends with.
struct Finish {
    fingerprint: u64,
    /// Each update's time but the first's, with `--timing`.
    update_times: Vec<Duration>,
}

fn train<C: Collective, D: TrainDevice>(
    comm: &C,
    device: &D,
    config: &Config,
    plan: &Plan,
) -> Result<Finish> {
    let mut agent = match (&plan.run_dir, plan.resume) {
        (Some(dir), true) => DdPpo::resume_on(device, config.clone(), comm, dir)?,
        (Some(dir), false) => {
            DdPpo::check_fresh(comm, dir)?;
            DdPpo::new_on(device, config.clone(), comm)?
        }
        (None, _) => DdPpo::new_on(device, config.clone(), comm)?,
    }
    .with_accumulation(plan.accumulate)?;
    let mut update_times = Vec::new();
    let first = agent.updates() + 1;
    while agent.updates() < plan.updates {
        if plan.timing {
            comm.barrier()?;
        }
        let start = Instant::now();
        let report = agent.update(comm)?;
        if plan.timing && report.update > first {
            update_times.push(start.elapsed());
        }
        if !plan.quiet && comm.rank() == 0 && (report.update % 10 == 0 || report.update == 1) {
            let mean = report
                .mean_return
                .map_or_else(|| "-".to_owned(), |m| format!("{m:.1}"));
            println!(
                "update {:>4}: {} episodes, mean return {mean}",
                report.update, report.episodes
            );
        }
        if let (Some(dir), Some(every)) = (&plan.run_dir, plan.save_every)
            && report.update % every == 0
            && report.update < plan.updates
        {
            agent.save(comm, dir)?;
        }
    }
    if let Some(dir) = &plan.run_dir {
        agent.save(comm, dir)?;
    }
    Ok(Finish {
        fingerprint: agent.fingerprint()?,
        update_times,
    })
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
    let plan = Plan {
        updates,
        accumulate: args
            .value("--accumulate", "a number of groups >= 1")?
            .unwrap_or(1),
        run_dir: args.value("--run-dir", "a directory")?,
        save_every: args.value("--save-every", "a number of updates >= 1")?,
        resume: args.flag("--resume"),
        timing: args.flag("--timing"),
        quiet: args.flag("--quiet"),
    };
    let device = args.device()?;
    args.finish()?;
    if plan.save_every == Some(0) {
        return Err(Error::value(
            "ppo_dist",
            "--save-every",
            "a number of updates >= 1",
            0,
        ));
    }
    if plan.run_dir.is_none() && (plan.resume || plan.save_every.is_some()) {
        let flag = if plan.resume {
            "--resume"
        } else {
            "--save-every"
        };
        return Err(Error::value(
            "ppo_dist",
            flag,
            "a --run-dir to read and write checkpoints in",
            "none",
        ));
    }
    let config = Config {
        seed,
        ..Config::default()
    };
    let (finish, rank) = match device {
        DeviceKind::Cpu => run_on(&Cpu::default(), workers, &config, &plan)?,
        DeviceKind::Cuda => run_on(&DeviceKind::open_cuda()?, workers, &config, &plan)?,
    };
    if rank == 0 {
        if plan.timing {
            let mut times = finish.update_times;
            times.sort_unstable();
            match times.get(times.len() / 2) {
                Some(median) => println!(
                    "median update time: {:.3} ms over {} updates",
                    median.as_secs_f64() * 1e3,
                    times.len()
                ),
                None => println!("median update time: none (--timing needs two updates or more)"),
            }
        }
        println!("params fingerprint: {:016x}", finish.fingerprint);
    }
    Ok(())
}

/// The run on `device`: one process of mpirun's, or `workers` threads; rank 0's finish
/// and this process's rank.
fn run_on<D: TrainDevice>(
    device: &D,
    workers: usize,
    config: &Config,
    plan: &Plan,
) -> Result<(Finish, usize)> {
    if under_mpi() {
        return mpi_run(device, config, plan);
    }
    let mut finishes = Local::run(workers, Local::DEFAULT_TIMEOUT, |comm| {
        train(comm, device, config, plan)
    })?;
    Ok((finishes.swap_remove(0), 0))
}

#[cfg(feature = "mpi")]
fn mpi_run<D: TrainDevice>(device: &D, config: &Config, plan: &Plan) -> Result<(Finish, usize)> {
    let comm = rlgrad_dist::Mpi::init()?;
    let finish = train(&comm, device, config, plan)?;
    Ok((finish, comm.rank()))
}

#[cfg(not(feature = "mpi"))]
fn mpi_run<D: TrainDevice>(_: &D, _: &Config, _: &Plan) -> Result<(Finish, usize)> {
    Err(Error::value(
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
