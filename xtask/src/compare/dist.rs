//! `cargo xtask compare --only D1`: data-parallel training on 1, 2 and 4 processes beside
//! PyTorch DDP on Gloo (CPU), issue #24's distributed row.
//!
//! Two measurements per world size W, in rounds (rlgrad, then PyTorch, W = 1, 2, 4 in
//! turn), each side's median per round and the median of those over rounds:
//!
//! - **all-reduce**: one gradient of `--floats` values per rank (16M by default), summed
//!   over the ranks. rlgrad: `rlgrad_dist::all_reduce` (the canonical tree) and, in the
//!   same processes, MPI's own `MPI_Allreduce` of the same floats
//!   (`crates/distributed/examples/allreduce_bench.rs` under `mpirun -np W`); PyTorch:
//!   `torch.distributed.all_reduce` on Gloo (`ddp.py allreduce`).
//! - **PPO update**: `ppo_dist --timing` under `mpirun -np W` (16 CartPole environments of
//!   64 steps, 4 Adam steps on the whole batch) beside `ddp.py ppo`, the same update in
//!   PyTorch DDP; each prints the fingerprint of its final parameters, and the table says
//!   whether a side's fingerprints agree across W.
//!
//! Every process runs one thread (`RAYON_NUM_THREADS=1`, `torch.set_num_threads(1)`), so
//! at W = 4 on a 2-core machine both sides are oversubscribed alike. Results:
//! `target/compare/dist.json`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Serialize;

use super::{Peers, machine, report, target_dir};

/// The id `--only` names this row by.
pub const ID: &str = "D1";

const WORLDS: [usize; 3] = [1, 2, 4];

/// One world size's medians over the rounds.
#[derive(Debug, Serialize)]
struct WorldResult {
    world: usize,
    canonical_ms: f64,
    mpi_allreduce_ms: f64,
    torch_allreduce_ms: f64,
    rlgrad_update_ms: f64,
    torch_update_ms: f64,
    rlgrad_fingerprint: String,
    torch_fingerprint: String,
}

#[derive(Debug, Serialize)]
struct DistSitting {
    generated_utc: String,
    machine_line: String,
    floats: usize,
    reps: usize,
    updates: usize,
    rounds: usize,
    worlds: Vec<WorldResult>,
}

/// What one round measured at one world size, in milliseconds, and the fingerprints.
#[derive(Debug, Default)]
struct Round {
    canonical: f64,
    mpi: f64,
    torch_allreduce: f64,
    rlgrad_update: f64,
    torch_update: f64,
    rlgrad_fingerprint: String,
    torch_fingerprint: String,
}

/// Runs the row, `rounds` times (`quick`: fewer repetitions in each).
pub fn run(quick: bool, rounds: usize, peers: &Peers, verbose: bool) -> Result<(), String> {
    let root = crate::root();
    // Odd sample counts, so that every side's median is one sample (20 updates time 19).
    let (reps, updates) = if quick { (3, 6) } else { (11, 20) };
    let floats = 1usize << 24;
    for (package, example) in [
        ("rlgrad-dist", "allreduce_bench"),
        ("rlgrad-examples", "ppo_dist"),
    ] {
        crate::cargo(
            &["build", "--release", "-p", package, "--example", example]
                .into_iter()
                .chain(["--features", "mpi"])
                .collect::<Vec<_>>(),
            &[],
        )?;
    }
    let examples = target_dir(&root).join("release/examples");
    let python = peers.venv.join("bin/python");
    peers.ensure_gymnasium()?;
    let driver = root.join("xtask/src/compare/ddp.py");
    let mut by_world: BTreeMap<usize, Vec<Round>> = BTreeMap::new();
    let mut peer_versions = BTreeMap::new();
    for round in 1..=rounds {
        for world in WORLDS {
            eprintln!("xtask: D1 round {round}/{rounds}, W = {world}");
            let floats_arg = floats.to_string();
            let reps_arg = reps.to_string();
            let updates_arg = updates.to_string();
            let world_arg = world.to_string();
            let bench = output(
                crate::mpirun(
                    world,
                    &examples.join("allreduce_bench"),
                    &["--floats", &floats_arg, "--reps", &reps_arg],
                ),
                verbose,
            )?;
            let ppo = output(
                {
                    let mut command = crate::mpirun(
                        world,
                        &examples.join("ppo_dist"),
                        &["--updates", &updates_arg, "--timing", "--quiet"],
                    );
                    command.env("RAYON_NUM_THREADS", "1");
                    command
                },
                verbose,
            )?;
            let torch_allreduce = output(
                python_command(
                    &python,
                    &driver,
                    &[
                        "allreduce",
                        "--world",
                        &world_arg,
                        "--floats",
                        &floats_arg,
                        "--reps",
                        &reps_arg,
                    ],
                ),
                verbose,
            )?;
            let torch_ppo = output(
                python_command(
                    &python,
                    &driver,
                    &["ppo", "--world", &world_arg, "--updates", &updates_arg],
                ),
                verbose,
            )?;
            let torch_ppo = torch_json(&torch_ppo)?;
            if let Some(version) = torch_ppo["torch"].as_str() {
                peer_versions.insert("torch".to_owned(), version.to_owned());
            }
            by_world.entry(world).or_default().push(Round {
                canonical: field_after(&bench, "allreduce rlgrad canonical:", "median_ns")? / 1e6,
                mpi: field_after(&bench, "allreduce MPI_Allreduce:", "median_ns")? / 1e6,
                torch_allreduce: json_number(&torch_json(&torch_allreduce)?, "median_ns")? / 1e6,
                rlgrad_update: field_after(&ppo, "median update time:", "")?,
                torch_update: json_number(&torch_ppo, "median_ns")? / 1e6,
                rlgrad_fingerprint: line_after(&ppo, "params fingerprint:")?.to_owned(),
                torch_fingerprint: torch_ppo["fingerprint"].as_str().unwrap_or("?").to_owned(),
            });
        }
    }
    let worlds: Vec<WorldResult> = by_world
        .into_iter()
        .map(|(world, rounds)| {
            // Never empty: a world has a round or is not in the map.
            let median = |f: fn(&Round) -> f64| {
                report::median(&rounds.iter().map(f).collect::<Vec<_>>()).unwrap_or(f64::NAN)
            };
            let agreed = |f: fn(&Round) -> &str| {
                let first = f(&rounds[0]);
                if rounds.iter().all(|r| f(r) == first) {
                    first.to_owned()
                } else {
                    format!("{first} (differs between rounds)")
                }
            };
            WorldResult {
                world,
                canonical_ms: median(|r| r.canonical),
                mpi_allreduce_ms: median(|r| r.mpi),
                torch_allreduce_ms: median(|r| r.torch_allreduce),
                rlgrad_update_ms: median(|r| r.rlgrad_update),
                torch_update_ms: median(|r| r.torch_update),
                rlgrad_fingerprint: agreed(|r| &r.rlgrad_fingerprint),
                torch_fingerprint: agreed(|r| &r.torch_fingerprint),
            }
        })
        .collect();
    let machine = machine::Machine::this_one();
    let versions = machine::Versions::of(&root, peer_versions);
    let sitting = DistSitting {
        generated_utc: report::utc_now(),
        machine_line: machine::line(&machine, &versions),
        floats,
        reps,
        updates,
        rounds,
        worlds,
    };
    println!("{}", table(&sitting));
    let path = target_dir(&root).join("compare/dist.json");
    write(&path, &sitting)?;
    println!("{} ({})", sitting.machine_line, sitting.generated_utc);
    println!("results: {}", path.display());
    Ok(())
}

fn python_command(python: &Path, driver: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(python);
    command.arg(driver).args(args);
    eprintln!("xtask: {command:?}");
    command
}

/// The command's stdout; an error with its stderr when it fails.
fn output(mut command: Command, verbose: bool) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("cannot run {command:?}: {e}"))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if verbose {
        eprint!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    }
    if !out.status.success() {
        return Err(format!(
            "{command:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(stdout)
}

/// The rest of the line that starts with `prefix`.
fn line_after<'a>(text: &'a str, prefix: &str) -> Result<&'a str, String> {
    text.lines()
        .find_map(|line| line.strip_prefix(prefix))
        .map(str::trim)
        .ok_or_else(|| format!("no line `{prefix} ...` in:\n{text}"))
}

/// The number after the word `key` (or first, when `key` is empty) on the line that
/// starts with `prefix`.
fn field_after(text: &str, prefix: &str, key: &str) -> Result<f64, String> {
    let rest = line_after(text, prefix)?;
    let mut words = rest.split_whitespace();
    if !key.is_empty() {
        words.find(|w| *w == key);
    }
    words
        .next()
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| format!("no number after `{prefix} .. {key}` in `{rest}`"))
}

/// The driver's one JSON line.
fn torch_json(text: &str) -> Result<serde_json::Value, String> {
    let line = text.lines().rev().find(|l| l.starts_with('{'));
    line.and_then(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| format!("ddp.py printed no JSON line: {text}"))
}

fn json_number(json: &serde_json::Value, key: &str) -> Result<f64, String> {
    json[key]
        .as_f64()
        .ok_or_else(|| format!("ddp.py's JSON has no number `{key}`: {json}"))
}

fn table(sitting: &DistSitting) -> String {
    let mut out = format!(
        "D1 all-reduce of {}M floats per rank (ms) and PPO update (ms), median of {} round(s)\n\
         | W | rlgrad canonical | MPI_Allreduce | torch Gloo | canonical / MPI | torch / rlgrad \
         | rlgrad update | torch DDP update | torch / rlgrad |\n|{}\n",
        sitting.floats >> 20,
        sitting.rounds,
        "---|".repeat(9)
    );
    for w in &sitting.worlds {
        out += &format!(
            "| {} | {} | {} | {} | {:.2}x | {:.2}x | {:.2} | {:.2} | {:.2}x |\n",
            w.world,
            milliseconds(w.canonical_ms),
            milliseconds(w.mpi_allreduce_ms),
            milliseconds(w.torch_allreduce_ms),
            w.canonical_ms / w.mpi_allreduce_ms,
            w.torch_allreduce_ms / w.canonical_ms,
            w.rlgrad_update_ms,
            w.torch_update_ms,
            w.torch_update_ms / w.rlgrad_update_ms,
        );
    }
    let same = |f: fn(&WorldResult) -> &str| {
        let prints: Vec<&str> = sitting.worlds.iter().map(f).collect();
        let verdict = if prints.windows(2).all(|p| p[0] == p[1]) {
            "the same on every W"
        } else {
            "differ across W"
        };
        format!("{verdict} ({})", prints.join(", "))
    };
    out += &format!(
        "final parameters after {} updates: rlgrad {}; torch DDP {}",
        sitting.updates,
        same(|w| &w.rlgrad_fingerprint),
        same(|w| &w.torch_fingerprint)
    );
    out
}

/// One decimal, or four below 1 ms (W = 1 exchanges nothing).
fn milliseconds(ms: f64) -> String {
    if ms >= 1.0 {
        format!("{ms:.1}")
    } else {
        format!("{ms:.4}")
    }
}

fn write(path: &PathBuf, sitting: &DistSitting) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    let json = serde_json::to_string_pretty(sitting).expect("the sitting serializes");
    std::fs::write(path, json).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_lines_of_both_rlgrad_programs_and_the_drivers_json() {
        let bench = "allreduce rlgrad canonical: world 2 floats 16 median_ns 2500000 samples_ns 1,2\n\
                     allreduce MPI_Allreduce: world 2 floats 16 median_ns 1000000 samples_ns 3\n";
        assert_eq!(
            field_after(bench, "allreduce rlgrad canonical:", "median_ns"),
            Ok(2.5e6)
        );
        assert_eq!(
            field_after(bench, "allreduce MPI_Allreduce:", "median_ns"),
            Ok(1e6)
        );
        let ppo = "median update time: 12.820 ms over 9 updates\nparams fingerprint: 3c58\n";
        assert_eq!(field_after(ppo, "median update time:", ""), Ok(12.82));
        assert_eq!(line_after(ppo, "params fingerprint:"), Ok("3c58"));
        assert!(line_after(ppo, "nothing:").is_err());
        let json = torch_json("log\n{\"median_ns\": 5.0, \"fingerprint\": \"ab\"}\n").unwrap();
        assert_eq!(json_number(&json, "median_ns"), Ok(5.0));
        assert!(json_number(&json, "missing").is_err());
        assert!(torch_json("no json").is_err());
    }
}
