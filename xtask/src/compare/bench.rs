//! The rlgrad side: the bench binaries of `rlgrad-benches`, built once and then run
//! directly (no cargo between rounds), at the thread counts asked for, in that order
//! (`RLGRAD_BENCH_THREADS`), with
//! criterion's results under `CRITERION_HOME`; their `compare-check` lines and criterion's
//! `estimates.json` (median point estimate, ns) and `benchmark.json` (throughput bytes).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::SystemTime;

use serde::Deserialize;

use super::load::Snapshot;

/// Criterion's settings for `--quick`: about a second and a half per case.
const QUICK_ARGS: &[&str] = &[
    "--warm-up-time",
    "0.5",
    "--measurement-time",
    "1",
    "--sample-size",
    "10",
];

/// Builds the bench targets `targets` of `rlgrad-benches` (bench profile) and returns
/// their executables by target name.
pub fn build(targets: &[&str]) -> Result<BTreeMap<String, PathBuf>, String> {
    let mut args = vec![
        "bench",
        "--package",
        "rlgrad-benches",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ];
    for target in targets {
        args.extend(["--bench", target]);
    }
    let output = crate::cargo_command(&args)
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!("building the benches failed ({})", output.status));
    }
    let executables = executables(&String::from_utf8_lossy(&output.stdout));
    match targets.iter().find(|t| !executables.contains_key(**t)) {
        Some(missing) => Err(format!("cargo built no executable for bench `{missing}`")),
        None => Ok(executables),
    }
}

/// Bench target name -> executable, from cargo's JSON messages.
fn executables(messages: &str) -> BTreeMap<String, PathBuf> {
    #[derive(Deserialize)]
    struct Message {
        reason: String,
        target: Option<Target>,
        executable: Option<PathBuf>,
    }
    #[derive(Deserialize)]
    struct Target {
        name: String,
        kind: Vec<String>,
    }
    messages
        .lines()
        .filter_map(|line| serde_json::from_str::<Message>(line).ok())
        .filter(|m| m.reason == "compiler-artifact")
        .filter_map(|m| {
            let target = m.target?;
            let is_bench = target.kind.iter().any(|k| k == "bench");
            Some((target.name, m.executable?)).filter(|_| is_bench)
        })
        .collect()
}

/// One run of a bench binary.
#[derive(Debug, Clone)]
pub struct BenchRun {
    /// `compare-check` lines by bench id.
    pub checks: BTreeMap<String, Check>,
    /// Why the run failed as a whole (a non-zero exit), if it did.
    pub failure: Option<String>,
    /// Cores other processes kept busy during the run.
    pub other_cores: Option<f64>,
    pub started: SystemTime,
}

/// A bench's correctness check of one case against float64, as it printed it.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    pub passed: bool,
    /// What the check saw (`largest error 2.1e-7 (element 5) against float64 ...`).
    pub detail: String,
}

/// `compare-check <id>: ok, <detail>` or `compare-check <id>: FAILED, <detail>`.
pub fn parse_check(line: &str) -> Option<(String, Check)> {
    let rest = line.strip_prefix("compare-check ")?;
    let (id, verdict) = rest.split_once(": ")?;
    let (status, detail) = verdict.split_once(", ").unwrap_or((verdict, ""));
    let passed = match status {
        "ok" => true,
        "FAILED" => false,
        _ => return None,
    };
    Some((
        id.to_owned(),
        Check {
            passed,
            detail: detail.to_owned(),
        },
    ))
}

/// Runs `executable` on the benches `ids` (exact criterion ids) at each count of `threads`
/// in turn (a bench times each case at every count before the next case, or every case at
/// one count before the next count).
pub fn run(
    executable: &Path,
    threads: &[usize],
    quick: bool,
    ids: &[String],
    criterion_home: &Path,
    env: &BTreeMap<String, String>,
    verbose: bool,
) -> Result<BenchRun, String> {
    let filter = format!(
        "^(?:{})$",
        ids.iter()
            .map(|id| regex_escape(id))
            .collect::<Vec<_>>()
            .join("|")
    );
    let mut command = Command::new(executable);
    command
        .arg("--bench")
        .arg("--noplot")
        .args(if quick { QUICK_ARGS } else { &[] })
        .arg(&filter)
        .env("RLGRAD_BENCH_THREADS", thread_list(threads))
        .env("CRITERION_HOME", criterion_home)
        .envs(env)
        .current_dir(crate::root().join("benches"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = SystemTime::now();
    let before = Snapshot::now();
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", executable.display()))?;
    let stderr = child.stderr.take().expect("stderr is piped");
    let stderr_reader = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
            .collect::<Vec<_>>()
    });
    let mut checks = BTreeMap::new();
    let mut tail = Vec::new();
    let stdout = child.stdout.take().expect("stdout is piped");
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        if verbose {
            println!("    {line}");
        }
        if let Some((id, check)) = parse_check(&line) {
            checks.insert(id, check);
        }
        tail.push(line);
    }
    let status = child
        .wait()
        .map_err(|e| format!("waiting for {}: {e}", executable.display()))?;
    let other_cores = before.zip(Snapshot::now()).map(|(a, b)| a.other_cores(&b));
    let stderr = stderr_reader.join().unwrap_or_default();
    let failure = (!status.success()).then(|| {
        let last: Vec<&String> = tail.iter().chain(&stderr).rev().take(8).collect();
        let last: Vec<&str> = last.into_iter().rev().map(String::as_str).collect();
        format!(
            "the bench exited with {status}; its last lines: {}",
            last.join(" | ")
        )
    });
    Ok(BenchRun {
        checks,
        failure,
        other_cores,
        started,
    })
}

/// `[2, 1]` as `RLGRAD_BENCH_THREADS` spells it: `2,1`.
fn thread_list(threads: &[usize]) -> String {
    threads
        .iter()
        .map(usize::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Criterion's files of one bench: `<home>/<group>/<function>/new/`, with the characters
/// criterion replaces in directory names (`?"/\*<>:|^`) replaced by `_`.
pub fn results_dir(criterion_home: &Path, group: &str, function_id: &str) -> PathBuf {
    let safe = |name: &str| -> String {
        name.chars()
            .map(|c| if "?\"/\\*<>:|^".contains(c) { '_' } else { c })
            .collect()
    };
    criterion_home
        .join(safe(group))
        .join(safe(function_id))
        .join("new")
}

/// What criterion measured for one bench.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// The median of the per-iteration sample times, ns.
    pub median_ns: f64,
    /// Bytes per iteration, when the bench declares a byte throughput.
    pub bytes: Option<u64>,
}

/// Reads the estimate of bench `id` from `dir`, refusing one older than `since` (a bench
/// that did not run this time leaves the previous run's files).
pub fn read_estimate(dir: &Path, id: &str, since: SystemTime) -> Result<Estimate, String> {
    let estimates_path = dir.join("estimates.json");
    let modified = std::fs::metadata(&estimates_path)
        .and_then(|m| m.modified())
        .map_err(|_| format!("criterion wrote no {}", estimates_path.display()))?;
    if modified < since {
        return Err(format!(
            "{} is from an earlier run: the bench did not run",
            estimates_path.display()
        ));
    }
    let read = |path: &Path| {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    };
    let median_ns = parse_estimates(&read(&estimates_path)?)?;
    let bytes = parse_benchmark(&read(&dir.join("benchmark.json"))?, id)?;
    Ok(Estimate { median_ns, bytes })
}

/// The median point estimate (ns) of criterion's `estimates.json`.
pub fn parse_estimates(text: &str) -> Result<f64, String> {
    #[derive(Deserialize)]
    struct Estimates {
        median: PointEstimate,
    }
    #[derive(Deserialize)]
    struct PointEstimate {
        point_estimate: f64,
    }
    serde_json::from_str::<Estimates>(text)
        .map(|e| e.median.point_estimate)
        .map_err(|e| format!("criterion's estimates.json: {e}"))
}

/// The byte throughput of criterion's `benchmark.json`, after checking that it is bench
/// `id`'s (criterion renames directories whose sanitized names collide).
pub fn parse_benchmark(text: &str, id: &str) -> Result<Option<u64>, String> {
    #[derive(Deserialize)]
    struct Benchmark {
        full_id: String,
        throughput: Option<BTreeMap<String, serde_json::Value>>,
    }
    let benchmark: Benchmark =
        serde_json::from_str(text).map_err(|e| format!("criterion's benchmark.json: {e}"))?;
    if benchmark.full_id != id {
        return Err(format!(
            "criterion's benchmark.json is bench `{}`, expected `{id}`",
            benchmark.full_id
        ));
    }
    Ok(benchmark
        .throughput
        .and_then(|t| t.get("Bytes").and_then(serde_json::Value::as_u64)))
}

fn regex_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::fixture;

    #[test]
    fn reads_the_median_and_the_bytes_of_criterion_files() {
        let median = parse_estimates(&fixture("criterion-estimates.json")).unwrap();
        assert!(median > 0.0);
        let id = "returns_f32/2048x64/gae/1t";
        let bytes = parse_benchmark(&fixture("criterion-benchmark.json"), id).unwrap();
        assert_eq!(bytes, Some(16 * 2048 * 64));
        assert!(parse_benchmark(&fixture("criterion-benchmark.json"), "other/1t").is_err());
        assert!(parse_estimates("{}").is_err());
    }

    #[test]
    fn check_lines_parse_into_verdicts() {
        let (id, check) = parse_check(
            "compare-check returns_f32/2048x64/gae/1t: ok, largest error 4.8e-7 (element 3) \
             against float64 (allowed 1e-3)",
        )
        .unwrap();
        assert_eq!(id, "returns_f32/2048x64/gae/1t");
        assert!(check.passed);
        assert!(check.detail.starts_with("largest error 4.8e-7"));
        let (_, failed) = parse_check(
            "compare-check mask_f32/seed/pad/1t: FAILED, element 7 is 1e0 where it should be 0e0",
        )
        .unwrap();
        assert!(!failed.passed);
        assert_eq!(parse_check("Benchmarking returns_f32/2048x64/gae/1t"), None);
        assert_eq!(parse_check("compare-check x: maybe"), None);
    }

    #[test]
    fn results_dirs_follow_criterion_naming() {
        let dir = results_dir(Path::new("/t/criterion"), "returns_f32/2048x64", "gae/1t");
        assert_eq!(
            dir,
            Path::new("/t/criterion/returns_f32_2048x64/gae_1t/new")
        );
    }

    #[test]
    fn bench_executables_come_from_cargo_messages() {
        let messages = r#"{"reason":"compiler-artifact","target":{"name":"returns","kind":["bench"]},"executable":"/t/release/deps/returns-1a2b"}
{"reason":"compiler-artifact","target":{"name":"rlgrad_benches","kind":["lib"]},"executable":null}
{"reason":"build-finished","success":true}"#;
        let found = executables(messages);
        assert_eq!(found.len(), 1);
        assert_eq!(found["returns"], Path::new("/t/release/deps/returns-1a2b"));
    }

    #[test]
    fn ids_are_escaped_for_the_filter() {
        assert_eq!(regex_escape("a/b.c(d)"), r"a/b\.c\(d\)");
    }
}
