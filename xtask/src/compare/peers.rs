//! The peer side: `run.sh` of `../shared/peers` (or another [`Driver`] that takes its
//! options: `compare.py` of the Python workloads) for one workload at one thread count, and
//! its results JSON (`run.py`'s schema: `rows`, `jobs`, `versions`,
//! `bandwidth_gbps_for_bounds`). A driver that fails its float64 check (or crashes) exits
//! non-zero; `run.py` then records the job as failed, keeps none of its rows, and prints
//! the driver's last output lines, from which [`failure_reasons`] takes the why.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::Deserialize;

/// The Gymnasium the twins step (the one `crates/envs` recorded its trajectories with).
const GYMNASIUM: &str = "gymnasium==1.4.0";

/// Where the peers and their venv are.
#[derive(Debug, Clone)]
pub struct Peers {
    pub dir: PathBuf,
    pub venv: PathBuf,
    /// Set for every run of the drivers (the `--isa` switches).
    pub env: BTreeMap<String, String>,
}

/// A program that takes `run.sh`'s options and writes `run.py`'s results JSON: the peers'
/// `run.sh`, or `crates/python/bench/compare.py` for one side of a Python workload.
#[derive(Debug, Clone)]
pub struct Driver {
    pub program: PathBuf,
    /// Its arguments before `run.sh`'s options.
    pub args: Vec<OsString>,
    /// Set for its runs, after [`Peers::env`].
    pub env: Vec<(String, OsString)>,
}

impl fmt::Display for Driver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.program.display())?;
        self.args
            .iter()
            .try_for_each(|arg| write!(f, " {}", arg.to_string_lossy()))
    }
}

impl Peers {
    /// The peers at `dir` (`--peers`, else `RLGRAD_PEERS`, else `../shared/peers` beside the
    /// workspace) with the venv `setup.sh` makes (`PEERS_VENV`, else
    /// `~/.cache/rlgrad-peers/venv`); an error saying how to get them when either is missing.
    pub fn locate(dir: Option<PathBuf>, root: &Path) -> Result<Self, String> {
        let dir = dir
            .or_else(|| std::env::var_os("RLGRAD_PEERS").map(PathBuf::from))
            .unwrap_or_else(|| root.join("../shared/peers"));
        if !dir.join("run.sh").is_file() {
            return Err(format!(
                "no peer drivers at {} (no run.sh): pass --peers DIR or set RLGRAD_PEERS",
                dir.display()
            ));
        }
        let dir = dir.canonicalize().unwrap_or(dir);
        let venv = match std::env::var_os("PEERS_VENV") {
            Some(venv) => PathBuf::from(venv),
            None => std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".cache/rlgrad-peers/venv"))
                .ok_or("neither PEERS_VENV nor HOME is set: cannot find the peers' venv")?,
        };
        if !venv.join("bin/python").is_file() {
            return Err(format!(
                "no peers venv at {}: make it with `bash {}/setup.sh` (the first time \
                 downloads several GB), or point PEERS_VENV at one",
                venv.display(),
                dir.display()
            ));
        }
        Ok(Self {
            dir,
            venv,
            env: BTreeMap::new(),
        })
    }

    /// The peers' own driver, `run.sh`.
    pub fn run_sh(&self) -> Driver {
        Driver {
            program: PathBuf::from("bash"),
            args: vec![self.dir.join("run.sh").into()],
            env: Vec::new(),
        }
    }

    /// Installs the pinned Gymnasium into the peers' venv unless it is there.
    pub fn ensure_gymnasium(&self) -> Result<(), String> {
        let python = self.venv.join("bin/python");
        let version = GYMNASIUM.trim_start_matches("gymnasium==");
        let check = format!(
            "import importlib.metadata as m, sys; sys.exit(m.version('gymnasium') != '{version}')"
        );
        let present = Command::new(&python)
            .args(["-c", &check])
            .status()
            .is_ok_and(|s| s.success());
        if present {
            return Ok(());
        }
        eprintln!("xtask: installing {GYMNASIUM} into the peers' venv");
        let status = Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", GYMNASIUM])
            .status()
            .map_err(|e| format!("cannot run pip: {e}"))?;
        if status.success() {
            Ok(())
        } else {
            Err(format!("`pip install {GYMNASIUM}` failed ({status})"))
        }
    }

    /// Runs `driver` for `workload` at `threads`, results to `out`; with `bounds`, its W0
    /// probe runs too (W1-W4). Returns the parsed results and the driver's output (see
    /// [`failure_reasons`]); an error only when there are no results at all.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        driver: &Driver,
        workload: &str,
        threads: usize,
        quick: bool,
        bounds: bool,
        out: &Path,
        verbose: bool,
    ) -> Result<(PeerRun, String), String> {
        let threads = threads.to_string();
        let mut args = vec!["--only", workload, "--threads", &threads];
        if quick {
            args.push("--quick");
        }
        if !bounds {
            args.push("--no-bounds");
        }
        let out_arg = out.to_string_lossy();
        args.extend(["--out", &out_arg]);
        // A results file left by an earlier sitting must not pass for this run's.
        let _ = std::fs::remove_file(out);
        let mut child = Command::new(&driver.program)
            .args(&driver.args)
            .args(&args)
            .env("PEERS_VENV", &self.venv)
            // The Python workloads' drivers import the peers' modules from RLGRAD_PEERS and
            // must not write bytecode there (the folder may be read-only; run.sh says the
            // same for its own runs).
            .env("RLGRAD_PEERS", &self.dir)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .envs(&self.env)
            .envs(driver.env.clone())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot run {driver}: {e}"))?;
        let mut output = String::new();
        let stdout = child.stdout.take().expect("stdout is piped");
        for line in BufReader::new(stdout).lines() {
            let line = line.map_err(|e| format!("reading the output of {driver}: {e}"))?;
            if verbose {
                println!("    {line}");
            }
            output.push_str(&line);
            output.push('\n');
        }
        let status = child
            .wait()
            .map_err(|e| format!("waiting for {driver}: {e}"))?;
        let text = std::fs::read_to_string(out).map_err(|e| {
            let tail: Vec<&str> = output.lines().rev().take(10).collect();
            format!(
                "{driver} {} ({status}) wrote no results to {} ({e}); its last lines:\n{}",
                args.join(" "),
                out.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        })?;
        Ok((parse(&text)?, output))
    }
}

/// One `run.py` results file.
#[derive(Debug, Clone, Deserialize)]
pub struct PeerRun {
    pub versions: BTreeMap<String, String>,
    /// `{size: {threads: GB/s}}`: the best add/triad bandwidth at up to that many threads.
    pub bandwidth_gbps_for_bounds: BTreeMap<String, BTreeMap<String, f64>>,
    pub jobs: Vec<Job>,
    pub rows: Vec<Row>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Job {
    /// `W3 jax t=1`, or `W0 probe numpy t=1` for the bandwidth probe.
    pub job: String,
    #[serde(default)]
    pub failed: bool,
}

/// One timed (or skipped) implementation of one case.
#[derive(Debug, Clone, Deserialize)]
pub struct Row {
    pub workload: String,
    pub group: String,
    #[serde(rename = "impl")]
    pub implementation: String,
    pub case: String,
    pub threads: usize,
    pub unit: Option<String>,
    pub median: Option<f64>,
    /// Why the row was not timed (a library that does not import, say).
    pub skipped: Option<String>,
    /// Cores other processes kept busy during the row's job.
    pub job_foreign_busy_cores: Option<f64>,
}

impl Row {
    /// The median in nanoseconds; `None` for skipped rows.
    pub fn median_ns(&self) -> Result<Option<f64>, String> {
        let (Some(median), Some(unit)) = (self.median, self.unit.as_deref()) else {
            return Ok(None);
        };
        let per = match unit.split('/').next() {
            Some("s") => 1e9,
            Some("ms") => 1e6,
            Some("us") => 1e3,
            Some("ns") => 1.0,
            _ => {
                return Err(format!(
                    "peer row `{}` ({}): unknown unit `{unit}`",
                    self.implementation, self.case
                ));
            }
        };
        Ok(Some(median * per))
    }
}

impl PeerRun {
    /// The failed jobs of `workload` (not of the W0 probe that serves its bounds).
    pub fn failed_jobs(&self, workload: &str) -> Vec<&str> {
        self.jobs
            .iter()
            .filter(|j| j.failed && j.job.split_whitespace().next() == Some(workload))
            .filter(|j| !j.job.contains(" probe "))
            .map(|j| j.job.as_str())
            .collect()
    }

    /// The bandwidth (GB/s) the peers' bound uses for W0 size `size` at `threads`: the
    /// best measured at up to `min(threads, 2)` threads, as `run.py`'s `bound_us`.
    pub fn bandwidth_gbps(&self, size: &str, threads: usize) -> Option<f64> {
        let by_threads = self.bandwidth_gbps_for_bounds.get(size)?;
        by_threads.get(&threads.min(2).to_string()).copied()
    }
}

pub fn parse(text: &str) -> Result<PeerRun, String> {
    serde_json::from_str(text).map_err(|e| format!("the peers' results JSON: {e}"))
}

/// Why each failed job failed, from `run.py`'s output: a failed attempt prints
/// `  <job>: attempt N FAILED (...); last output:` and then the driver's last lines as
/// `    | ...`. The reason is the last of those lines (the exception, usually).
pub fn failure_reasons(output: &str) -> BTreeMap<String, String> {
    let mut reasons = BTreeMap::new();
    let mut current: Option<(String, String)> = None;
    for line in output.lines() {
        if let Some((job, _)) = line.trim_start().split_once(": attempt ")
            && line.contains(" FAILED (")
        {
            if let Some((job, reason)) = current.take() {
                reasons.insert(job, reason);
            }
            let status = line[line.find(" FAILED (").unwrap_or(0) + 1..].trim_end_matches(':');
            let status = status.split("; last output").next().unwrap_or(status);
            current = Some((job.to_owned(), status.to_owned()));
        } else if let Some(tail) = line.trim_start().strip_prefix("| ") {
            if let Some((_, reason)) = current.as_mut()
                && !tail.trim().is_empty()
            {
                *reason = tail.trim().to_owned();
            }
        } else if let Some((job, reason)) = current.take() {
            reasons.insert(job, reason);
        }
    }
    if let Some((job, reason)) = current {
        reasons.insert(job, reason);
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::fixture;

    #[test]
    fn parses_the_rows_versions_and_bandwidths_of_a_real_run() {
        let run = parse(&fixture("peers-w3-quick-1t.json")).unwrap();
        let w3: Vec<&Row> = run.rows.iter().filter(|r| r.workload == "W3").collect();
        // numpy, torch, jax (scan and rlax), torchrl (two): 6 implementations, 2 shapes.
        assert_eq!(w3.len(), 12);
        let rlax = w3
            .iter()
            .find(|r| r.implementation == "rlax.truncated_gae vmap+jit" && r.case == "T=2048,B=64")
            .unwrap();
        assert_eq!(rlax.group, "jax");
        assert_eq!(rlax.threads, 1);
        let median_us = rlax.median.unwrap();
        assert_eq!(rlax.median_ns().unwrap(), Some(median_us * 1e3));
        assert!(rlax.job_foreign_busy_cores.is_some());
        assert_eq!(run.versions["jax"], "0.10.2");
        assert!(run.bandwidth_gbps("128K", 1).is_some());
        assert_eq!(run.bandwidth_gbps("128K", 4), None);
        assert!(run.failed_jobs("W3").is_empty());
    }

    #[test]
    fn a_failed_job_has_no_rows_and_its_reason_comes_from_the_output() {
        let run = parse(&fixture("peers-w3-quick-2t-jax-failed.json")).unwrap();
        assert_eq!(run.failed_jobs("W3"), ["W3 jax t=2"]);
        assert!(run.rows.iter().all(|r| r.group != "jax"));
        let reasons = failure_reasons(&fixture("peers-w3-quick-2t-jax-failed.log"));
        assert_eq!(reasons.len(), 1);
        assert!(
            reasons["W3 jax t=2"].ends_with("Unknown flag in XLA_FLAGS: --xla_no_such_flag"),
            "{reasons:?}"
        );
    }

    #[test]
    fn a_failure_without_output_lines_gives_its_exit_status() {
        let output =
            "  W5 tf t=1: attempt 1 FAILED (exit -9, 3s); last output:\n  W5 jax t=1: 4s\n";
        let reasons = failure_reasons(output);
        assert_eq!(reasons["W5 tf t=1"], "FAILED (exit -9, 3s)");
    }

    #[test]
    fn units_convert_to_nanoseconds() {
        let row = |unit: &str| Row {
            workload: "W7".to_owned(),
            group: "torch".to_owned(),
            implementation: "torch eager".to_owned(),
            case: "batch 256".to_owned(),
            threads: 1,
            unit: Some(unit.to_owned()),
            median: Some(2.0),
            skipped: None,
            job_foreign_busy_cores: None,
        };
        assert_eq!(row("ms/iter").median_ns(), Ok(Some(2e6)));
        assert_eq!(row("us/step").median_ns(), Ok(Some(2e3)));
        assert!(row("GB/s").median_ns().is_err());
    }
}
