//! The canonical all-reduce of one gradient per rank beside MPI's own `MPI_Allreduce` of
//! the same floats, timed under `mpirun`: what determinism across world sizes costs.
//! `cargo xtask compare --only D1` runs it beside PyTorch DDP's Gloo all-reduce.
//!
//! ```text
//! cargo build --release -p rlgrad-dist --example allreduce_bench --features mpi
//! mpirun -np 4 target/release/examples/allreduce_bench --floats 16777216 --reps 10
//! ```
//!
//! Each rank holds one vector of `--floats` values (a microbatch per rank, as in DDP). The
//! two all-reduces alternate, each call after a barrier; rank 0 prints one line per
//! implementation, `allreduce <name>: world W floats N median_ns X samples_ns a,b,c`, once
//! the sums of both agree within float rounding.

use std::process::ExitCode;
use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::traits::CommunicatorCollectives;
use rlgrad_core::{Error, Result};
use rlgrad_dist::{Collective, Mpi, all_reduce};

const USAGE: &str = "\
usage: mpirun -np W allreduce_bench [--floats N] [--reps R] [--warmup K]

  --floats N   floats per rank (default 16777216, 64 MiB)
  --reps R     timed calls of each implementation (default 10)
  --warmup K   untimed calls of each first (default 2)
";

struct Options {
    floats: usize,
    reps: usize,
    warmup: usize,
}

fn parse(args: &[String]) -> Result<Options> {
    let mut options = Options {
        floats: 1 << 24,
        reps: 10,
        warmup: 2,
    };
    let mut rest = args.iter();
    while let Some(flag) = rest.next() {
        let (name, slot) = match flag.as_str() {
            "--floats" => ("--floats", &mut options.floats),
            "--reps" => ("--reps", &mut options.reps),
            "--warmup" => ("--warmup", &mut options.warmup),
            other => return Err(Error::value("allreduce_bench", "argument", USAGE, other)),
        };
        let text = rest.next().map(String::as_str).unwrap_or_default();
        *slot = text
            .parse()
            .map_err(|_| Error::value("allreduce_bench", name, "a count", text))?;
    }
    if options.floats == 0 || options.reps == 0 {
        return Err(Error::value(
            "allreduce_bench",
            "--floats and --reps",
            "at least 1",
            0,
        ));
    }
    Ok(options)
}

/// This rank's gradient: values that differ across ranks and elements, so that the order of
/// the additions shows in the bits.
fn gradient(rank: usize, floats: usize) -> Vec<f32> {
    (0..floats)
        .map(|i| ((i % 1021) as f32 * 1e-3 + 0.1).sin() * (rank + 1) as f32)
        .collect()
}

fn median(samples: &[u64]) -> u64 {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    sorted[sorted.len() / 2]
}

fn run(options: &Options) -> Result<()> {
    let comm = Mpi::init()?;
    let (rank, world) = (comm.rank(), comm.size());
    let n = options.floats;
    let mut canonical_ns = Vec::new();
    let mut mpi_ns = Vec::new();
    let (mut canonical, mut plain) = (Vec::new(), vec![0f32; n]);
    for rep in 0..options.warmup + options.reps {
        // Generated before the barrier: the gradient exists when an all-reduce starts, and
        // the last result is freed outside the timed call.
        let mut leaf = Some(gradient(rank, n));
        drop(std::mem::take(&mut canonical));
        comm.barrier()?;
        let start = Instant::now();
        canonical = all_reduce(&comm, world, n, |_| {
            Ok(leaf.take().expect("one microbatch per rank"))
        })?;
        let canonical_time = start.elapsed();

        let send = gradient(rank, n);
        comm.barrier()?;
        let start = Instant::now();
        comm.communicator()
            .all_reduce_into(&send[..], &mut plain[..], SystemOperation::sum());
        let mpi_time = start.elapsed();
        if rep >= options.warmup {
            canonical_ns.push(canonical_time.as_nanos() as u64);
            mpi_ns.push(mpi_time.as_nanos() as u64);
        }
    }
    let scale: f32 = (1..=world).map(|r| r as f32).sum();
    if let Some((i, (a, b))) = canonical
        .iter()
        .zip(&plain)
        .enumerate()
        .find(|(_, (a, b))| (*a - *b).abs() > 1e-5 * scale)
    {
        return Err(Error::value(
            "allreduce_bench",
            "sums",
            "the canonical and MPI sums within float rounding",
            format_args!("{a} against {b} at element {i}"),
        ));
    }
    if rank == 0 {
        for (name, samples) in [
            ("rlgrad canonical", &canonical_ns),
            ("MPI_Allreduce", &mpi_ns),
        ] {
            let list: Vec<String> = samples.iter().map(u64::to_string).collect();
            println!(
                "allreduce {name}: world {world} floats {n} median_ns {} samples_ns {}",
                median(samples),
                list.join(",")
            );
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        print!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    match parse(&args).and_then(|options| run(&options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("allreduce_bench: {e}");
            ExitCode::FAILURE
        }
    }
}
