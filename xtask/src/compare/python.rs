//! The Python workloads (P3, P4): rlgrad's wheel called from Python, beside W3's and W4's
//! peers. Both sides are groups of one driver (`crates/python/bench/p<N>_*.py`), run by
//! `crates/python/bench/compare.py` with the peers' venv, one side at a time so that the
//! rounds alternate as for the Rust benches. The wheel is built for the sitting and
//! installed into `target/python/bench-site` (put on `PYTHONPATH`), so the peers' venv
//! stays as `setup.sh` made it and the sitting times this checkout's rlgrad.
//!
//! rlgrad's round is read from the driver's results JSON (`run.py`'s schema, the rows of
//! the `rlgrad` group: one [`Estimate`] per case) and from its output: the driver prints
//! a `compare-check` line per case, as the Rust benches do, and times only what passed.

use std::collections::BTreeMap;
use std::time::SystemTime;

use super::bench::{self, BenchRun, Estimate};
use super::peers::{Driver, PeerRun, Peers, failure_reasons};
use super::report::RlgradRound;
use super::workloads::Case;

/// The group of a Python driver that calls rlgrad.
const RLGRAD_GROUP: &str = "rlgrad";

/// The two sides of the Python workloads, ready to run.
#[derive(Debug, Clone)]
pub struct Sides {
    pub peers: Driver,
    pub rlgrad: Driver,
}

/// Builds the wheel (`target/python/venv` gets maturin from PyPI the first time), installs
/// it into `target/python/bench-site` with `peers`' Python, and returns both sides'
/// drivers; rlgrad's side runs with `rlgrad_env` too (the `--isa` cap).
pub fn prepare(peers: &Peers, rlgrad_env: &BTreeMap<String, String>) -> Result<Sides, String> {
    let root = crate::root();
    let (_, wheel) = crate::python::build_wheel(crate::python::WheelProfile::Release)?;
    let python = peers.venv.join("bin/python");
    let site = root.join("target/python/bench-site");
    crate::python::install_wheel(&python, &wheel, Some(&site))?;
    eprintln!(
        "xtask: compare: {} for the Python workloads in {}",
        wheel.display(),
        site.display()
    );
    let script = root.join("crates/python/bench/compare.py");
    let driver = |side: &str, env: &BTreeMap<String, String>| Driver {
        program: python.clone(),
        args: [script.as_os_str(), "--side".as_ref(), side.as_ref()]
            .into_iter()
            .map(Into::into)
            // run.py passes the jobs' own output (rlgrad's check lines) through only with -v.
            .chain((side == RLGRAD_GROUP).then(|| "-v".into()))
            .collect(),
        env: std::iter::once(("PYTHONPATH".to_owned(), site.clone().into()))
            .chain(env.iter().map(|(k, v)| (k.clone(), v.into())))
            .collect(),
    };
    Ok(Sides {
        peers: driver("peers", &BTreeMap::new()),
        rlgrad: driver(RLGRAD_GROUP, rlgrad_env),
    })
}

/// rlgrad's round of `cases` of `workload` at `threads` from the rlgrad side's results
/// and output: the check lines by id, the `rlgrad` rows' medians, the failed jobs.
pub fn rlgrad_round(
    workload: &str,
    cases: &[Case],
    threads: usize,
    run: &PeerRun,
    output: &str,
    started: SystemTime,
) -> RlgradRound {
    let checks = output
        .lines()
        .filter_map(|line| bench::parse_check(line.trim_start()))
        .collect();
    let reasons = failure_reasons(output);
    let failed: Vec<String> = run
        .failed_jobs(workload)
        .into_iter()
        .map(|job| {
            let why = reasons.get(job).map_or("no output", String::as_str);
            format!("job `{job}` failed: {why}")
        })
        .collect();
    let rows: Vec<_> = run
        .rows
        .iter()
        .filter(|r| r.workload == workload && r.group == RLGRAD_GROUP && r.threads == threads)
        .collect();
    let other_cores = rows
        .iter()
        .filter_map(|r| r.job_foreign_busy_cores)
        .reduce(f64::max);
    let estimates: BTreeMap<String, Result<Estimate, String>> = cases
        .iter()
        .map(|case| {
            let row = rows
                .iter()
                .find(|r| r.case == case.peer_case && r.implementation == case.function);
            let estimate = match row.map(|r| r.median_ns()) {
                Some(Ok(Some(median_ns))) => Ok(Estimate {
                    median_ns,
                    bytes: None,
                }),
                Some(Err(e)) => Err(e),
                Some(Ok(None)) | None => Err(format!(
                    "the driver timed no row `{}` of case `{}`",
                    case.function, case.peer_case
                )),
            };
            (case.bench_id(threads), estimate)
        })
        .collect();
    RlgradRound {
        run: BenchRun {
            checks,
            failure: (!failed.is_empty()).then(|| failed.join("; ")),
            other_cores,
            started,
        },
        estimates,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::fixture;
    use crate::compare::peers::parse;
    use crate::compare::workloads::find;

    #[test]
    fn the_rlgrad_round_takes_checks_and_medians_from_the_driver() {
        let p3 = find("P3").unwrap();
        let cases = p3.rlgrad.as_ref().unwrap().cases;
        let run = parse(&fixture("python-p3-rlgrad-quick-1t.json")).unwrap();
        let output = fixture("python-p3-rlgrad-quick-1t.log");
        let round = rlgrad_round("P3", cases, 1, &run, &output, SystemTime::UNIX_EPOCH);
        assert_eq!(round.run.failure, None);
        assert!(round.run.other_cores.is_some());
        for case in cases {
            let id = case.bench_id(1);
            assert!(round.run.checks[&id].passed, "{id}");
            assert!(
                round.estimates[&id].as_ref().unwrap().median_ns > 0.0,
                "{id}"
            );
        }
        let small = &round.estimates["T=128,B=8/rlgrad.returns.gae (numpy)/1t"];
        let row = run
            .rows
            .iter()
            .find(|r| r.case == "T=128,B=8" && r.implementation == "rlgrad.returns.gae (numpy)")
            .unwrap();
        assert_eq!(small.as_ref().unwrap().median_ns, row.median.unwrap() * 1e3);
    }

    #[test]
    fn a_failed_check_or_job_leaves_its_reason() {
        let p3 = find("P3").unwrap();
        let cases = p3.rlgrad.as_ref().unwrap().cases;
        let mut run = parse(&fixture("python-p3-rlgrad-quick-1t.json")).unwrap();
        run.rows.clear();
        run.jobs[0].failed = true;
        let job = run.jobs[0].job.clone();
        let output = format!(
            "compare-check T=128,B=8/rlgrad.returns.gae (numpy)/1t: FAILED, element 3 is 2e0 \
             where it should be 1e0 against float64 (allowed 0.001)\n  {job}: attempt 1 FAILED \
             (exit 1, 2s); last output:\n    | AssertionError: boom\n"
        );
        let round = rlgrad_round("P3", cases, 1, &run, &output, SystemTime::UNIX_EPOCH);
        let id = "T=128,B=8/rlgrad.returns.gae (numpy)/1t";
        assert!(!round.run.checks[id].passed);
        assert_eq!(
            round.run.failure.as_deref(),
            Some(format!("job `{job}` failed: AssertionError: boom").as_str())
        );
        assert_eq!(
            round.estimates[id],
            Err("the driver timed no row `rlgrad.returns.gae (numpy)` of case `T=128,B=8`".into())
        );
    }
}
