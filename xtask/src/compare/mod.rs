//! `cargo xtask compare`: rlgrad's benches beside the peer drivers of `../shared/peers`
//! (PyTorch, JAX, NumPy, TensorFlow) in one sitting, as ratios.
//!
//! For each selected workload and thread count, the peers' `run.sh` and the matching
//! rlgrad bench run in turn, a few rounds (peer, rlgrad, peer, rlgrad, ...), so both see
//! the same machine; within a round every thread count runs in turn. With 1 and 2 threads
//! both asked for, each round ends with one more rlgrad process that times every case at
//! both counts (1 first in odd rounds, 2 first in even ones), 1 thread twice in a row,
//! and the `2t/1t` line of each case compares the counts within those processes (`W3
//! [2048,64] rlgrad 2t/1t: 1.00x the time (same process, order alternating ...; A/A 1t/1t
//! 0.98-1.02x: within the noise)`): two processes of the same binary differ by more than
//! the effect measured ([`report::SameProcessRound`]), and the A/A pair's spread is the
//! noise a verdict must clear. The
//! bench runs in a rayon pool of exactly that many threads
//! (`RLGRAD_BENCH_THREADS`) and checks each compared case against float64 before timing
//! it; the peer drivers check theirs the same way. A case whose check failed on either
//! side gets no ratio, and the table says which side and why. Output: one table per
//! workload and thread count, `target/compare/latest.json` (and `--out FILE`) with the
//! machine and versions, and last one line per case that a script can read:
//! `W3 [2048,64] 1t: 4.80x best peer (jax lax.scan (jit))`.
//!
//! The case table is [`workloads::WORKLOADS`]; its module doc says how to give a workload
//! its rlgrad side. The Python workloads P3 and P4 (rlgrad's wheel from Python beside W3's
//! and W4's peers, both sides timed by the peers' helpers) run when `--only` names them;
//! [`python`] says how.

mod bench;
mod dist;
mod load;
mod machine;
mod peers;
mod python;
pub(crate) mod report;
mod workloads;

pub(crate) use load::Snapshot;
pub(crate) use machine::{Machine, Versions, line as machine_line};
pub(crate) use peers::Peers;
pub(crate) use report::utc_now;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime};

use report::{PeerRound, RlgradRound, Sitting, ThreadsResult, WorkloadResult};
use workloads::{Runs, Slot, Workload};

use crate::isa::IsaSetting;

/// Rounds of each side per workload and thread count, unless `--rounds` says otherwise.
const DEFAULT_ROUNDS: usize = 3;

/// The options of `cargo xtask compare` (its `--help`).
pub const OPTIONS: &str = "\
  --only      workloads W0-W7, P3, P4 (default: W0-W7); P3 and P4 are rlgrad's wheel
              from Python beside W3's and W4's peers (maturin builds the wheel); D1,
              alone, is data-parallel training on 1, 2 and 4 MPI processes beside
              PyTorch DDP on Gloo, one thread per process (--threads and --isa do not
              apply; needs Open MPI; see xtask/src/compare/dist.rs)
  --threads   thread count of both sides (default: both, 1 then 2)
  --isa       cap both sides' vector instruction set: avx512, avx2 or sse2 (default:
              the CPU's widest; see xtask/src/isa.rs for each peer's switch)
  --quick     the peers' --quick and short criterion runs (~1.5 s a case)
  --rounds    peer/rlgrad rounds per workload and thread count (default 3)
  --out       also write the JSON here (always: target/compare/latest.json)
  --peers     the peer drivers (default: $RLGRAD_PEERS, else ../shared/peers);
              their venv: $PEERS_VENV, else ~/.cache/rlgrad-peers/venv (setup.sh makes it)
  -v          stream the peers' and the benches' own output
";

#[derive(Debug)]
struct Options {
    workloads: Vec<&'static Workload>,
    /// `--only D1`: the distributed row, which runs alone.
    dist: bool,
    threads: Vec<usize>,
    /// `--isa`'s level, checked against the CPU (by building rlgrad-core's `isa`
    /// example) when the sitting starts, not while parsing.
    isa: Option<String>,
    quick: bool,
    rounds: usize,
    out: Option<PathBuf>,
    peers: Option<PathBuf>,
    verbose: bool,
}

impl Options {
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut options = Self {
            workloads: workloads::WORKLOADS
                .iter()
                .filter(|w| !w.is_python())
                .collect(),
            dist: false,
            threads: vec![1, 2],
            isa: None,
            quick: false,
            rounds: DEFAULT_ROUNDS,
            out: None,
            peers: None,
            verbose: false,
        };
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let mut value = || {
                rest.next()
                    .ok_or_else(|| format!("{arg} needs a value (`cargo xtask compare --help`)"))
            };
            match arg.as_str() {
                "--only" => {
                    let names = value()?;
                    let names: Vec<&str> =
                        names.split(',').filter(|w| !w.trim().is_empty()).collect();
                    options.dist = names.contains(&dist::ID);
                    if options.dist && names.len() > 1 {
                        return Err(format!("--only {}: D1 runs alone", names.join(",")));
                    }
                    options.workloads = names
                        .into_iter()
                        .filter(|&w| w != dist::ID)
                        .map(workloads::find)
                        .collect::<Result<_, _>>()?;
                }
                "--threads" => {
                    options.threads = match value()?.as_str() {
                        "1" => vec![1],
                        "2" => vec![2],
                        "both" => vec![1, 2],
                        other => {
                            return Err(format!("--threads takes 1, 2 or both, got `{other}`"));
                        }
                    }
                }
                "--rounds" => {
                    let rounds = value()?;
                    options.rounds = rounds.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                        format!("--rounds takes a positive integer, got `{rounds}`")
                    })?;
                }
                "--isa" => options.isa = Some(value()?.clone()),
                "--quick" => options.quick = true,
                "--out" => options.out = Some(PathBuf::from(value()?)),
                "--peers" => options.peers = Some(PathBuf::from(value()?)),
                "-v" | "--verbose" => options.verbose = true,
                other => {
                    return Err(format!(
                        "compare: unknown argument `{other}` (`cargo xtask compare --help`)"
                    ));
                }
            }
        }
        if options.workloads.is_empty() && !options.dist {
            return Err("--only names no workload".to_owned());
        }
        Ok(options)
    }
}

/// The text of the test fixture `name` (`src/compare/fixtures/`).
#[cfg(test)]
fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/compare/fixtures")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `CARGO_TARGET_DIR`, else `target/` of the workspace.
pub(crate) fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), |dir| root.join(dir))
}

pub fn run(args: &[String]) -> Result<(), String> {
    let options = Options::parse(args)?;
    let root = crate::root();
    if options.dist {
        let peers = peers::Peers::locate(options.peers.clone(), &root)?;
        return dist::run(options.quick, options.rounds, &peers, options.verbose);
    }
    let isa = IsaSetting::new(options.isa.as_deref())?;
    let target = target_dir(&root);
    let runs: Vec<Runs> = options
        .workloads
        .iter()
        .filter_map(|w| w.rlgrad.as_ref().map(|side| side.runs))
        .collect();
    let mut bench_targets: Vec<&str> = runs
        .iter()
        .filter_map(|runs| match runs {
            Runs::Bench(target) => Some(*target),
            Runs::Python(_) => None,
        })
        .collect();
    bench_targets.sort_unstable();
    bench_targets.dedup();
    // Neither the peers nor a build are needed when no workload has an rlgrad side.
    let runner = if runs.is_empty() {
        None
    } else {
        let peers = peers::Peers {
            env: isa.peer_env.clone(),
            ..peers::Peers::locate(options.peers.clone(), &root)?
        };
        let python = runs
            .iter()
            .any(|runs| matches!(runs, Runs::Python(_)))
            .then(|| python::prepare(&peers, &isa.rlgrad_env))
            .transpose()?;
        let executables = if bench_targets.is_empty() {
            BTreeMap::new() // `cargo bench --no-run` without a target would build them all
        } else {
            bench::build(&bench_targets)?
        };
        let runner = Runner {
            peers,
            rlgrad_env: isa.rlgrad_env.clone(),
            python,
            executables,
            criterion_home: target.join("criterion"),
            rounds_dir: target.join("compare/rounds"),
        };
        std::fs::create_dir_all(&runner.rounds_dir)
            .map_err(|e| format!("cannot create {}: {e}", runner.rounds_dir.display()))?;
        Some(runner)
    };

    let mut results = Vec::new();
    let mut peer_versions = BTreeMap::new();
    for &workload in &options.workloads {
        let (Some(side), Some(runner)) = (&workload.rlgrad, &runner) else {
            println!(
                "{}: {}: no rlgrad side yet (see xtask/src/compare/workloads.rs)",
                workload.id, workload.title
            );
            results.push(WorkloadResult {
                id: workload.id,
                title: workload.title,
                rlgrad_bench: None,
                by_threads: Vec::new(),
                same_process: Vec::new(),
            });
            continue;
        };
        // Round by round, every thread count in turn: a comparison between thread counts
        // then pairs runs minutes apart, not a sitting's first and second half.
        let mut by_count: Vec<ThreadRounds> = options
            .threads
            .iter()
            .map(|&threads| ThreadRounds::new(threads))
            .collect();
        let compares_counts =
            options.threads.contains(&1) && options.threads.iter().any(|&t| t > 1);
        let mut same_process = Vec::new();
        for round in 1..=options.rounds {
            for rounds in &mut by_count {
                runner.round(workload, side, round, rounds, &options, &mut peer_versions);
            }
            if compares_counts && matches!(side.runs, Runs::Bench(_)) {
                same_process.push(runner.same_process_round(workload, side, round, &options));
            }
        }
        let by_threads = by_count
            .into_iter()
            .map(|rounds| rounds.finish(workload, side))
            .collect();
        let result = WorkloadResult {
            id: workload.id,
            title: workload.title,
            rlgrad_bench: Some(side.runs.name()),
            by_threads,
            same_process,
        };
        println!();
        for by_threads in &result.by_threads {
            println!("{}", report::table(&result, by_threads, options.rounds));
        }
        results.push(result);
    }

    let machine = machine::Machine::this_one();
    let versions = machine::Versions::of(&root, peer_versions);
    let sitting = Sitting {
        generated_utc: report::utc_now(),
        command: std::iter::once("cargo xtask compare".to_owned())
            .chain(args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" "),
        machine_line: format!("{}; {}", machine::line(&machine, &versions), isa.describe()),
        machine,
        isa,
        versions,
        quick: options.quick,
        rounds: options.rounds,
        peers_dir: runner.map_or_else(String::new, |r| r.peers.dir.display().to_string()),
        summary: results
            .iter()
            .flat_map(|w| {
                report::summary_lines(w)
                    .into_iter()
                    .chain(report::thread_lines(w))
            })
            .collect(),
        workloads: results,
    };
    let latest = target.join("compare/latest.json");
    write_json(
        &sitting,
        std::iter::once(&latest).chain(options.out.as_ref()),
    )?;
    println!("{} ({})", sitting.machine_line, sitting.generated_utc);
    println!("results: {}", latest.display());
    for line in &sitting.summary {
        println!("{line}");
    }
    let refused = sitting
        .workloads
        .iter()
        .flat_map(|w| &w.by_threads)
        .flat_map(|t| &t.cases)
        .filter(|c| c.refused.is_some())
        .count();
    if refused > 0 {
        return Err(format!(
            "{refused} case(s) have no ratio: a side failed (the tables say which and why)"
        ));
    }
    Ok(())
}

fn write_json<'a>(
    sitting: &Sitting,
    paths: impl Iterator<Item = &'a PathBuf>,
) -> Result<(), String> {
    let json = serde_json::to_string_pretty(sitting).expect("the sitting serializes");
    for path in paths {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        std::fs::write(path, &json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// What both sides need to run: the peers, the built benches, the Python workloads'
/// drivers (when one is selected), and where results go.
struct Runner {
    peers: peers::Peers,
    /// rlgrad's side of the `--isa` cap (`RLGRAD_MAX_ISA`).
    rlgrad_env: BTreeMap<String, String>,
    python: Option<python::Sides>,
    executables: BTreeMap<String, PathBuf>,
    criterion_home: PathBuf,
    rounds_dir: PathBuf,
}

/// The rounds of one thread count run so far, both sides, and the peers' results files.
struct ThreadRounds {
    threads: usize,
    peer_rounds: Vec<Result<PeerRound, String>>,
    rlgrad_rounds: Vec<Result<RlgradRound, String>>,
    peer_files: Vec<String>,
}

impl ThreadRounds {
    fn new(threads: usize) -> Self {
        Self {
            threads,
            peer_rounds: Vec::new(),
            rlgrad_rounds: Vec::new(),
            peer_files: Vec::new(),
        }
    }

    /// Every case of `side` compared over the rounds.
    fn finish(self, workload: &Workload, side: &workloads::RlgradSide) -> ThreadsResult {
        let cases = side
            .cases
            .iter()
            .map(|case| {
                report::compare_case(
                    workload,
                    case,
                    self.threads,
                    &self.peer_rounds,
                    &self.rlgrad_rounds,
                )
            })
            .collect();
        ThreadsResult {
            threads: self.threads,
            peer_files: self.peer_files,
            cases,
        }
    }
}

impl Runner {
    /// Round `round` of `workload` at `rounds.threads`, peer then rlgrad, appended to
    /// `rounds`; the peers' versions go into `peer_versions`.
    fn round(
        &self,
        workload: &Workload,
        side: &workloads::RlgradSide,
        round: usize,
        rounds: &mut ThreadRounds,
        options: &Options,
        peer_versions: &mut BTreeMap<String, String>,
    ) {
        let threads = rounds.threads;
        let ids: Vec<String> = side.cases.iter().map(|c| c.bench_id(threads)).collect();
        print!(
            "{} {threads}t, round {round} of {}: peers",
            workload.id, options.rounds
        );
        let _ = std::io::stdout().flush();
        let file = self.rounds_dir.join(format!(
            "{}-{threads}t-round{round}-peers.json",
            workload.id
        ));
        let clock = Instant::now();
        let python = match side.runs {
            Runs::Bench(_) => None,
            Runs::Python(_) => Some(self.python.as_ref().expect("prepared for Python workloads")),
        };
        let peer_driver = python.map_or_else(|| self.peers.run_sh(), |p| p.peers.clone());
        // The W0 probe (for the bounds) runs once per thread count, in the first round.
        let bounds = round == 1 && python.is_none();
        let peer_round = self
            .peers
            .run(
                &peer_driver,
                workload.id,
                threads,
                options.quick,
                bounds,
                &file,
                options.verbose,
            )
            .map(|(run, output)| PeerRound {
                run,
                failure_reasons: peers::failure_reasons(&output),
            });
        print!(" {:.0} s, rlgrad", clock.elapsed().as_secs_f64());
        let _ = std::io::stdout().flush();
        let clock = Instant::now();
        let rlgrad_round = match python {
            Some(python) => {
                let file = file.with_file_name(format!(
                    "{}-{threads}t-round{round}-rlgrad.json",
                    workload.id
                ));
                let started = SystemTime::now();
                self.peers
                    .run(
                        &python.rlgrad,
                        workload.id,
                        threads,
                        options.quick,
                        false,
                        &file,
                        options.verbose,
                    )
                    .map(|(run, output)| {
                        python::rlgrad_round(
                            workload.id,
                            side.cases,
                            threads,
                            &run,
                            &output,
                            started,
                        )
                    })
            }
            None => bench::run(
                &self.executables[side.runs.name()],
                &[threads],
                options.quick,
                &ids,
                &self.criterion_home,
                &self.rlgrad_env,
                options.verbose,
            )
            .map(|run| rlgrad_estimates(run, side.cases, threads, &self.criterion_home)),
        };
        println!(" {:.0} s", clock.elapsed().as_secs_f64());
        if let Ok(peer_round) = &peer_round {
            peer_versions.extend(peer_round.run.versions.clone());
        }
        rounds.peer_files.push(file.display().to_string());
        rounds.peer_rounds.push(peer_round);
        rounds.rlgrad_rounds.push(rlgrad_round);
    }

    /// The bench of `workload` timing every case at every thread count in one process, 1
    /// first in odd rounds and last in even ones, for the `2t/1t` lines, with the fewest
    /// threads timed twice in a row (`1t`, `1t-again`): the A/A pair whose ratio is the
    /// noise floor of their verdicts ([`report::SameProcessRound`]).
    fn same_process_round(
        &self,
        workload: &Workload,
        side: &workloads::RlgradSide,
        round: usize,
        options: &Options,
    ) -> report::SameProcessRound {
        let order = same_process_order(&options.threads, round);
        let slots = slots(&order);
        let ids: Vec<String> = (slots.iter())
            .flat_map(|&slot| side.cases.iter().map(move |c| c.bench_id(slot)))
            .collect();
        let order_text = (slots.iter().map(Slot::to_string))
            .collect::<Vec<_>>()
            .join(", ");
        print!(
            "{} {order_text} in one process, round {round} of {}:",
            workload.id, options.rounds
        );
        let _ = std::io::stdout().flush();
        let clock = Instant::now();
        let mut result = report::SameProcessRound {
            order: order.clone(),
            median_ns: BTreeMap::new(),
            problems: Vec::new(),
        };
        match bench::run(
            &self.executables[side.runs.name()],
            &order,
            options.quick,
            &ids,
            &self.criterion_home,
            &self.rlgrad_env,
            options.verbose,
        ) {
            Ok(run) => {
                result.problems.extend(run.failure.clone());
                for &slot in &slots {
                    let RlgradRound { estimates, .. } =
                        rlgrad_estimates(run.clone(), side.cases, slot, &self.criterion_home);
                    for (id, estimate) in estimates {
                        match estimate {
                            Ok(estimate) => {
                                result.median_ns.insert(id, estimate.median_ns);
                            }
                            Err(e) => result.problems.push(format!("{id}: {e}")),
                        }
                    }
                }
            }
            Err(e) => result.problems.push(e),
        }
        print!(" {:.0} s", clock.elapsed().as_secs_f64());
        if !result.problems.is_empty() {
            print!(" ({})", result.problems.join("; "));
        }
        println!();
        result
    }
}

/// The thread counts of round `round`'s same-process run: ascending in odd rounds and
/// descending in even ones, the fewest listed twice in a row (its A/A pair).
fn same_process_order(threads: &[usize], round: usize) -> Vec<usize> {
    let mut order = threads.to_vec();
    order.sort_unstable();
    if let Some(&fewest) = order.first() {
        order.insert(0, fewest);
    }
    if round.is_multiple_of(2) {
        order.reverse();
    }
    order
}

/// The bench's timings of a run at `order`: a count's second occurrence is its A/A repeat.
fn slots(order: &[usize]) -> Vec<Slot> {
    let mut slots: Vec<Slot> = Vec::new();
    for &threads in order {
        let again = slots.iter().any(|s| s.threads == threads);
        slots.push(Slot { threads, again });
    }
    slots
}

/// Reads criterion's estimate of every case after a bench run.
fn rlgrad_estimates(
    run: bench::BenchRun,
    cases: &[workloads::Case],
    slot: impl Into<Slot>,
    criterion_home: &Path,
) -> RlgradRound {
    let slot = slot.into();
    let estimates = cases
        .iter()
        .map(|case| {
            let id = case.bench_id(slot);
            let dir = bench::results_dir(criterion_home, case.group, &case.function_id(slot));
            let estimate = bench::read_estimate(&dir, &id, run.started);
            (id, estimate)
        })
        .collect();
    RlgradRound { run, estimates }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn same_process_runs_time_one_thread_twice_in_a_row_and_alternate_the_order() {
        assert_eq!(same_process_order(&[1, 2], 1), [1, 1, 2]);
        assert_eq!(same_process_order(&[2, 1], 2), [2, 1, 1]);
        let labels: Vec<String> = slots(&[2, 1, 1]).iter().map(Slot::to_string).collect();
        assert_eq!(labels, ["2t", "1t", "1t-again"]);
    }

    #[test]
    fn options_parse_workloads_threads_and_flags() {
        let options = Options::parse(&args("--only W1,w3 --threads 1 --quick --rounds 2")).unwrap();
        let ids: Vec<&str> = options.workloads.iter().map(|w| w.id).collect();
        assert_eq!(ids, ["W1", "W3"]);
        assert_eq!(options.threads, [1]);
        assert!(options.quick);
        assert_eq!(options.rounds, 2);
        assert_eq!(options.isa, None);
        let capped = Options::parse(&args("--isa avx2")).unwrap();
        assert_eq!(capped.isa.as_deref(), Some("avx2"));

        let defaults = Options::parse(&[]).unwrap();
        assert_eq!(
            defaults.workloads.len(),
            8,
            "W0-W7; P3 and P4 only when named"
        );
        assert!(defaults.workloads.iter().all(|w| !w.is_python()));
        let python = Options::parse(&args("--only P3,p4")).unwrap();
        let ids: Vec<&str> = python.workloads.iter().map(|w| w.id).collect();
        assert_eq!(ids, ["P3", "P4"]);
        assert_eq!(defaults.threads, [1, 2]);
        assert_eq!(defaults.rounds, DEFAULT_ROUNDS);
    }

    #[test]
    fn bad_options_are_errors_that_name_them() {
        for (line, expected) in [
            ("--only W9", "unknown workload `W9`"),
            ("--threads 3", "--threads takes 1, 2 or both"),
            ("--rounds 0", "--rounds takes a positive integer"),
            ("--out", "--out needs a value"),
            ("--fast", "unknown argument `--fast`"),
        ] {
            let error = Options::parse(&args(line)).unwrap_err();
            assert!(error.contains(expected), "{line}: {error}");
        }
    }
}
