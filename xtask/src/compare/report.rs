//! From rounds of both sides to one result per case, and from results to the tables, the
//! summary lines and the JSON of a sitting.
//!
//! Each side's figure is the median over rounds of its per-round medians (criterion's
//! median point estimate; the peers' median over repeats). The best peer is the
//! implementation with the lowest such figure among the rows of the same operation. A
//! case gets no ratio when a round of either side failed: an rlgrad check that failed or
//! did not print, a missing estimate, a peer job of the workload that failed (its rows
//! are gone, and the best peer may be among them), or no peer row at all.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::bench::{BenchRun, Estimate};
use super::machine::{Machine, Versions};
use super::peers::PeerRun;
use super::workloads::{Case, Workload};

/// One round of the peer side: its results and why its failed jobs failed.
#[derive(Debug, Clone)]
pub struct PeerRound {
    pub run: PeerRun,
    pub failure_reasons: BTreeMap<String, String>,
}

/// One round of the rlgrad side: the bench run and the estimates read after it, by id.
#[derive(Debug, Clone)]
pub struct RlgradRound {
    pub run: BenchRun,
    pub estimates: BTreeMap<String, Result<Estimate, String>>,
}

/// A whole sitting, as written to `target/compare/latest.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Sitting {
    pub generated_utc: String,
    pub command: String,
    pub machine: Machine,
    pub versions: Versions,
    pub machine_line: String,
    /// The vector instruction set both sides ran in (`--isa`).
    pub isa: crate::isa::IsaSetting,
    pub quick: bool,
    pub rounds: usize,
    pub peers_dir: String,
    pub workloads: Vec<WorkloadResult>,
    pub summary: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkloadResult {
    pub id: &'static str,
    pub title: &'static str,
    /// The bench target of the rlgrad side; `None`: no rlgrad side yet.
    pub rlgrad_bench: Option<&'static str>,
    pub by_threads: Vec<ThreadsResult>,
    /// The runs behind the `2t/1t` lines, one per round; empty for the Python workloads,
    /// whose thread counts are compared across rounds.
    pub same_process: Vec<SameProcessRound>,
}

/// One bench process that timed every case of a workload at every thread count, in
/// `order` (1, 1, 2 in odd rounds, 2, 1, 1 in even ones; the second 1 is the A/A repeat,
/// `1t-again`, whose ratio to the first is the verdicts' noise floor), so that the thread counts are
/// compared on the same memory: between two processes of the same binary, where the
/// allocator and the kernel place a memory-bound kernel's arrays moves its time by more
/// than the effect measured (`W3 [128,1024]`: 30.1-34.7 us over six runs on an AMD EPYC).
#[derive(Debug, Clone, Serialize)]
pub struct SameProcessRound {
    pub order: Vec<usize>,
    /// criterion's median by bench id, for the ids the run measured.
    pub median_ns: BTreeMap<String, f64>,
    /// Why the run, or some of its estimates, gave no figure.
    pub problems: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ThreadsResult {
    pub threads: usize,
    /// The peers' results files of the rounds.
    pub peer_files: Vec<String>,
    pub cases: Vec<CaseResult>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseResult {
    pub case: &'static str,
    pub rlgrad_bench: String,
    pub rlgrad: Option<RlgradResult>,
    /// The fastest of `peers`.
    pub best_peer: Option<PeerResult>,
    /// Every peer implementation of the same operation, fastest first.
    pub peers: Vec<PeerResult>,
    /// `best peer / rlgrad`, the peer's time over rlgrad's; `None` when refused.
    pub speedup: Option<f64>,
    /// The bandwidth bound of rlgrad's bytes (ns), where the peers measured the bandwidth.
    pub bound_ns: Option<f64>,
    /// `bound / rlgrad`: the share of the bound's speed rlgrad reaches.
    pub fraction_of_bound: Option<f64>,
    /// Why there is no ratio: which side failed, and how.
    pub refused: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RlgradResult {
    pub median_ns: f64,
    pub rounds_ns: Vec<f64>,
    /// Cores other processes kept busy during each round's bench run.
    pub other_cores: Vec<Option<f64>>,
    /// The check line of each round.
    pub checks: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeerResult {
    pub implementation: String,
    pub group: String,
    pub threads: usize,
    pub median_ns: f64,
    pub rounds_ns: Vec<f64>,
    /// Cores other processes kept busy during the job of each round that has the row.
    pub other_cores: Vec<Option<f64>>,
}

/// The median of `values` (the mean of the middle two for an even count).
pub(crate) fn median(values: &[f64]) -> Option<f64> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// Why a case has no ratio, each reason once.
#[derive(Debug, Default)]
struct Problems(Vec<String>);

impl Problems {
    fn add(&mut self, text: String) {
        if !self.0.contains(&text) {
            self.0.push(text);
        }
    }
}

/// Puts the rounds of both sides together for `case` of `workload` at `threads`.
pub fn compare_case(
    workload: &Workload,
    case: &Case,
    threads: usize,
    peer_rounds: &[Result<PeerRound, String>],
    rlgrad_rounds: &[Result<RlgradRound, String>],
) -> CaseResult {
    let id = case.bench_id(threads);
    let mut problems = Problems::default();
    let (rlgrad, bytes) = rlgrad_side(&id, rlgrad_rounds, &mut problems);
    let peers = peer_side(workload, case, peer_rounds, &mut problems);
    let best_peer = peers.first().cloned();
    let bandwidth = case.bound.and_then(|size| {
        peer_rounds
            .iter()
            .flatten()
            .find_map(|round| round.run.bandwidth_gbps(size, threads))
    });
    // bytes / (GB/s) is nanoseconds.
    let bound_ns = bytes.zip(bandwidth).map(|(b, gbps)| b as f64 / gbps);
    let fraction_of_bound = bound_ns
        .zip(rlgrad.as_ref())
        .map(|(bound, r)| bound / r.median_ns);
    let refused = (!problems.0.is_empty()).then(|| problems.0.join("; "));
    let speedup = match (&refused, &best_peer, &rlgrad) {
        (None, Some(peer), Some(rlgrad)) => Some(peer.median_ns / rlgrad.median_ns),
        _ => None,
    };
    CaseResult {
        case: case.label,
        rlgrad_bench: id,
        rlgrad,
        best_peer,
        peers,
        speedup,
        bound_ns,
        fraction_of_bound,
        refused,
    }
}

/// rlgrad's figure for bench `id` over the rounds, and the bytes its bench declares.
fn rlgrad_side(
    id: &str,
    rounds: &[Result<RlgradRound, String>],
    problems: &mut Problems,
) -> (Option<RlgradResult>, Option<u64>) {
    let (mut rounds_ns, mut other_cores, mut checks, mut bytes) =
        (Vec::new(), Vec::new(), Vec::new(), None);
    for round in rounds {
        let round = match round {
            Ok(round) => round,
            Err(e) => {
                problems.add(format!("rlgrad side: {e}"));
                continue;
            }
        };
        let failure = round.run.failure.as_deref().map(|f| format!(" ({f})"));
        let failure = failure.unwrap_or_default();
        match round.run.checks.get(id) {
            Some(check) if check.passed => checks.push(format!("ok, {}", check.detail)),
            Some(check) => {
                checks.push(format!("FAILED, {}", check.detail));
                problems.add(format!("rlgrad side: check failed: {}", check.detail));
            }
            None => problems.add(format!("rlgrad side: no check of {id} ran{failure}")),
        }
        match round.estimates.get(id) {
            Some(Ok(estimate)) => {
                rounds_ns.push(estimate.median_ns);
                bytes = bytes.or(estimate.bytes);
            }
            Some(Err(e)) => problems.add(format!("rlgrad side: {e}{failure}")),
            None => problems.add(format!("rlgrad side: no estimate of {id}{failure}")),
        }
        other_cores.push(round.run.other_cores);
    }
    let result = median(&rounds_ns).map(|median_ns| RlgradResult {
        median_ns,
        rounds_ns,
        other_cores,
        checks,
    });
    (result, bytes)
}

/// Every peer implementation of `case`'s operation over the rounds, fastest first.
fn peer_side(
    workload: &Workload,
    case: &Case,
    rounds: &[Result<PeerRound, String>],
    problems: &mut Problems,
) -> Vec<PeerResult> {
    let mut by_implementation: BTreeMap<(String, String, usize), PeerResult> = BTreeMap::new();
    for round in rounds {
        let round = match round {
            Ok(round) => round,
            Err(e) => {
                problems.add(format!("peer side: {e}"));
                continue;
            }
        };
        for job in round.run.failed_jobs(workload.id) {
            let why = round
                .failure_reasons
                .get(job)
                .map_or("no output", String::as_str);
            problems.add(format!("peer side: job `{job}` failed: {why}"));
        }
        let rows = round.run.rows.iter().filter(|r| {
            r.workload == workload.id
                && r.skipped.is_none()
                && case.matches_peer_case(&r.case)
                && case.peer_impls.matches(&r.implementation)
        });
        for row in rows {
            let median_ns = match row.median_ns() {
                Ok(Some(ns)) => ns,
                Ok(None) => continue,
                Err(e) => {
                    problems.add(format!("peer side: {e}"));
                    continue;
                }
            };
            let key = (row.group.clone(), row.implementation.clone(), row.threads);
            let entry = by_implementation.entry(key).or_insert_with(|| PeerResult {
                implementation: row.implementation.clone(),
                group: row.group.clone(),
                threads: row.threads,
                median_ns: 0.0,
                rounds_ns: Vec::new(),
                other_cores: Vec::new(),
            });
            entry.rounds_ns.push(median_ns);
            entry.other_cores.push(row.job_foreign_busy_cores);
        }
    }
    let mut peers: Vec<PeerResult> = by_implementation.into_values().collect();
    for peer in &mut peers {
        peer.median_ns = median(&peer.rounds_ns).expect("a peer entry has at least one round");
    }
    peers.sort_by(|a, b| a.median_ns.total_cmp(&b.median_ns));
    if peers.is_empty() && rounds.iter().any(Result::is_ok) {
        problems.add(format!(
            "peer side: no timed row of case `{}` in the peers' results",
            case.peer_case
        ));
    }
    peers
}

/// `812 ns`, `56.2 us`, `1.23 ms`, `2.50 s`: three significant digits.
pub fn format_time(ns: f64) -> String {
    let (value, unit) = match ns {
        _ if ns < 1e3 => (ns, "ns"),
        _ if ns < 1e6 => (ns / 1e3, "us"),
        _ if ns < 1e9 => (ns / 1e6, "ms"),
        _ => (ns / 1e9, "s"),
    };
    match value {
        _ if value < 10.0 => format!("{value:.2} {unit}"),
        _ if value < 100.0 => format!("{value:.1} {unit}"),
        _ => format!("{value:.0} {unit}"),
    }
}

fn format_cores(cores: &[Option<f64>]) -> String {
    let most = cores.iter().flatten().copied().reduce(f64::max);
    most.map_or_else(|| "-".to_owned(), |c| format!("{c:.2}"))
}

/// The table of one workload at one thread count, with the reason under it for every
/// case that has no ratio.
pub fn table(workload: &WorkloadResult, result: &ThreadsResult, rounds: usize) -> String {
    let threads = match result.threads {
        1 => "1 thread".to_owned(),
        n => format!("{n} threads"),
    };
    let mut out = format!(
        "== {}: {} ({threads}, {rounds} round{})\n",
        workload.id,
        workload.title,
        if rounds == 1 { "" } else { "s" }
    );
    let mut rows = vec![
        [
            "case",
            "rlgrad",
            "best peer",
            "peer",
            "peer/rlgrad",
            "bound",
            "of bound",
            "other cores: peer, rlgrad",
        ]
        .map(str::to_owned),
    ];
    for case in &result.cases {
        let rlgrad = case.rlgrad.as_ref();
        let peer = case.best_peer.as_ref();
        let peer_name = peer.map_or_else(
            || "-".to_owned(),
            |p| match p.threads {
                t if t == result.threads => p.implementation.clone(),
                t => format!("{} ({t}t)", p.implementation),
            },
        );
        rows.push([
            case.case.to_owned(),
            rlgrad.map_or_else(|| "-".to_owned(), |r| format_time(r.median_ns)),
            peer_name,
            peer.map_or_else(|| "-".to_owned(), |p| format_time(p.median_ns)),
            case.speedup
                .map_or_else(|| "no ratio".to_owned(), |s| format!("{s:.2}x")),
            case.bound_ns.map_or_else(|| "-".to_owned(), format_time),
            case.fraction_of_bound
                .map_or_else(|| "-".to_owned(), |f| format!("{:.0}%", f * 100.0)),
            format!(
                "{}, {}",
                peer.map_or_else(|| "-".to_owned(), |p| format_cores(&p.other_cores)),
                rlgrad.map_or_else(|| "-".to_owned(), |r| format_cores(&r.other_cores)),
            ),
        ]);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .enumerate()
            // Names left-aligned, figures right-aligned.
            .map(|(i, (cell, width))| match i {
                0 | 2 | 7 => format!("{cell:<width$}"),
                _ => format!("{cell:>width$}"),
            })
            .collect();
        let _ = writeln!(out, "  {}", cells.join("  ").trim_end());
    }
    for case in &result.cases {
        if let Some(why) = &case.refused {
            let _ = writeln!(out, "  {}: no ratio: {why}", case.case);
        }
    }
    out
}

/// The script-readable lines of a workload: one per case and thread count,
/// `W3 [2048,64] 1t: 4.80x best peer (rlax.truncated_gae vmap+jit)` or
/// `W3 [2048,64] 1t: no ratio (<why>)`, and `W6: no rlgrad side yet` for a workload
/// without one.
pub fn summary_lines(workload: &WorkloadResult) -> Vec<String> {
    if workload.rlgrad_bench.is_none() {
        return vec![format!("{}: no rlgrad side yet", workload.id)];
    }
    let mut lines = Vec::new();
    for result in &workload.by_threads {
        for case in &result.cases {
            let verdict = match (&case.speedup, &case.best_peer, &case.refused) {
                (Some(speedup), Some(peer), _) => {
                    format!("{speedup:.2}x best peer ({})", peer.implementation)
                }
                (_, _, Some(why)) => format!("no ratio ({why})"),
                _ => "no ratio".to_owned(),
            };
            lines.push(format!(
                "{} {} {}t: {verdict}",
                workload.id, case.case, result.threads
            ));
        }
    }
    lines
}

/// rlgrad's time with more threads over its time with one, for every case measured both
/// ways: the median of the per-round ratios and their range, which tells a slowdown from
/// noise. The ratios come from [`WorkloadResult::same_process`] when the workload has those
/// runs (both counts in one process, the order alternating between rounds), otherwise
/// from the rounds of the tables paired in order (separate processes minutes apart; only
/// the medians are compared when a side lost a round). The same-process runs also time
/// one thread twice in a row: that A/A pair's ratios are the noise floor, and a count is
/// called slower (or faster) only when every round's ratio lies beyond it.
pub fn thread_lines(workload: &WorkloadResult) -> Vec<String> {
    let Some(one) = workload.by_threads.iter().find(|t| t.threads == 1) else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for more in workload.by_threads.iter().filter(|t| t.threads > 1) {
        for (base, case) in one.cases.iter().zip(&more.cases) {
            let (ratios, method) = if workload.same_process.is_empty() {
                let (Some(base), Some(with_more)) = (&base.rlgrad, &case.rlgrad) else {
                    continue;
                };
                let ratios = if base.rounds_ns.len() == with_more.rounds_ns.len() {
                    (base.rounds_ns.iter().zip(&with_more.rounds_ns))
                        .map(|(one, more)| more / one)
                        .collect()
                } else {
                    vec![with_more.median_ns / base.median_ns]
                };
                (ratios, "paired rounds")
            } else {
                let ratios = same_process_ratios(workload, &base.rlgrad_bench, &case.rlgrad_bench);
                (ratios, "same process, order alternating")
            };
            let Some(ratio) = median(&ratios) else {
                continue;
            };
            let (low, high) = range(&ratios);
            // The A/A repeat's id, as `workloads::Slot` spells it.
            let again = format!("{}-again", base.rlgrad_bench);
            let aa = same_process_ratios(workload, &base.rlgrad_bench, &again);
            let verdict = if aa.is_empty() {
                let verdict = if low > 1.0 {
                    "slower in every round"
                } else if high < 1.0 {
                    "faster in every round"
                } else {
                    "within the rounds' spread"
                };
                format!(": {verdict}")
            } else {
                let (aa_low, aa_high) = range(&aa);
                let noise = (1.0 - aa_low).max(aa_high - 1.0).max(0.0);
                let verdict = if low > 1.0 + noise {
                    "slower in every round, beyond the noise"
                } else if high < 1.0 - noise {
                    "faster in every round, beyond the noise"
                } else {
                    "within the noise"
                };
                format!("; A/A 1t/1t {aa_low:.2}-{aa_high:.2}x: {verdict}")
            };
            lines.push(format!(
                "{} {} rlgrad {}t/1t: {ratio:.2}x the time ({method} {low:.2}-{high:.2}x, {} rounds{verdict})",
                workload.id,
                case.case,
                more.threads,
                ratios.len()
            ));
        }
    }
    lines
}

/// `numerator / denominator` (criterion ids) in every same-process run that measured both.
fn same_process_ratios(workload: &WorkloadResult, denominator: &str, numerator: &str) -> Vec<f64> {
    (workload.same_process.iter())
        .filter_map(|run| Some(run.median_ns.get(numerator)? / run.median_ns.get(denominator)?))
        .collect()
}

/// The smallest and largest of `values`.
fn range(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(low, high), &v| {
            (low.min(v), high.max(v))
        })
}

/// The current time as [`utc_timestamp`] writes it.
pub fn utc_now() -> String {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc_timestamp(seconds)
}

/// `seconds` since the Unix epoch as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic
/// Gregorian).
pub fn utc_timestamp(seconds: u64) -> String {
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let mp = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::super::bench::{Check, parse_benchmark, parse_estimates};
    use super::super::peers::{failure_reasons, parse};
    use super::super::workloads::find;
    use super::*;
    use crate::compare::fixture;

    fn peer_round(json: &str, log: Option<&str>) -> Result<PeerRound, String> {
        Ok(PeerRound {
            run: parse(&fixture(json)).unwrap(),
            failure_reasons: log
                .map(|l| failure_reasons(&fixture(l)))
                .unwrap_or_default(),
        })
    }

    /// A round of the rlgrad side whose only bench is the fixture's GAE [2048, 64] at 1
    /// thread, with its median scaled by `scale`.
    fn rlgrad_round(scale: f64, passed: bool) -> Result<RlgradRound, String> {
        let id = "returns_f32/2048x64/gae/1t".to_owned();
        let estimate = Estimate {
            median_ns: parse_estimates(&fixture("criterion-estimates.json")).unwrap() * scale,
            bytes: parse_benchmark(&fixture("criterion-benchmark.json"), &id).unwrap(),
        };
        let detail = if passed {
            "largest error 4.5e-6 (element 55186) against float64 (allowed 1e-3)"
        } else {
            "element 3 is 2e0 where it should be 1e0 against float64 (allowed 1e-3)"
        };
        let check = Check {
            passed,
            detail: detail.to_owned(),
        };
        Ok(RlgradRound {
            run: BenchRun {
                checks: [(id.clone(), check)].into(),
                failure: None,
                other_cores: Some(0.02),
                started: SystemTime::UNIX_EPOCH,
            },
            estimates: [(id, Ok(estimate))].into(),
        })
    }

    fn gae_2048x64() -> (&'static Workload, &'static Case) {
        let w3 = find("W3").unwrap();
        (w3, &w3.rlgrad.as_ref().unwrap().cases[0])
    }

    #[test]
    fn the_best_peer_and_the_ratio_come_from_the_rounds() {
        let (w3, case) = gae_2048x64();
        let peers = [peer_round("peers-w3-quick-1t.json", None)];
        let rlgrad = [
            rlgrad_round(1.0, true),
            rlgrad_round(1.2, true),
            rlgrad_round(0.9, true),
        ];
        let result = compare_case(w3, case, 1, &peers, &rlgrad);
        assert_eq!(result.refused, None);
        let rlgrad_ns = result.rlgrad.as_ref().unwrap().median_ns;
        let fixture_ns = parse_estimates(&fixture("criterion-estimates.json")).unwrap();
        assert_eq!(rlgrad_ns, fixture_ns);
        // The fixture's fastest W3 implementation at [2048, 64].
        let best = result.best_peer.as_ref().unwrap();
        assert_eq!(best.implementation, "jax lax.scan (jit)");
        assert_eq!(result.peers.len(), 6);
        assert_eq!(result.speedup, Some(best.median_ns / rlgrad_ns));
        let bandwidth = parse(&fixture("peers-w3-quick-1t.json"))
            .unwrap()
            .bandwidth_gbps("128K", 1)
            .unwrap();
        assert_eq!(result.bound_ns, Some((16 * 2048 * 64) as f64 / bandwidth));
    }

    #[test]
    fn a_failed_rlgrad_check_refuses_the_ratio_and_says_why() {
        let (w3, case) = gae_2048x64();
        let peers = [peer_round("peers-w3-quick-1t.json", None)];
        let result = compare_case(w3, case, 1, &peers, &[rlgrad_round(1.0, false)]);
        assert_eq!(result.speedup, None);
        assert_eq!(
            result.refused.as_deref(),
            Some(
                "rlgrad side: check failed: element 3 is 2e0 where it should be 1e0 against \
                 float64 (allowed 1e-3)"
            )
        );
    }

    #[test]
    fn a_failed_peer_job_refuses_the_ratio_and_says_why() {
        let (w3, case) = gae_2048x64();
        let peers = [peer_round(
            "peers-w3-quick-2t-jax-failed.json",
            Some("peers-w3-quick-2t-jax-failed.log"),
        )];
        let result = compare_case(w3, case, 2, &peers, &[]);
        assert_eq!(result.speedup, None);
        let why = result.refused.unwrap();
        assert!(
            why.starts_with("peer side: job `W3 jax t=2` failed: F1123"),
            "{why}"
        );
        assert!(
            why.ends_with("Unknown flag in XLA_FLAGS: --xla_no_such_flag"),
            "{why}"
        );
    }

    #[test]
    fn a_missing_check_line_refuses_the_ratio() {
        let (w3, case) = gae_2048x64();
        let peers = [peer_round("peers-w3-quick-1t.json", None)];
        let mut round = rlgrad_round(1.0, true).unwrap();
        round.run.checks.clear();
        let result = compare_case(w3, case, 1, &peers, &[Ok(round)]);
        assert_eq!(
            result.refused.as_deref(),
            Some("rlgrad side: no check of returns_f32/2048x64/gae/1t ran")
        );
    }

    fn workload_result(cases: Vec<CaseResult>) -> WorkloadResult {
        WorkloadResult {
            id: "W3",
            title: "GAE advantages",
            rlgrad_bench: Some("returns"),
            by_threads: vec![ThreadsResult {
                threads: 1,
                peer_files: Vec::new(),
                cases,
            }],
            same_process: Vec::new(),
        }
    }

    fn formatted_case(speedup: bool) -> CaseResult {
        CaseResult {
            case: "[2048,64]",
            rlgrad_bench: "returns_f32/2048x64/gae/1t".to_owned(),
            rlgrad: Some(RlgradResult {
                median_ns: 52_660.4,
                rounds_ns: vec![52_660.4],
                other_cores: vec![Some(0.02)],
                checks: Vec::new(),
            }),
            best_peer: Some(PeerResult {
                implementation: "jax lax.scan (jit)".to_owned(),
                group: "jax".to_owned(),
                threads: 1,
                median_ns: 177_100.0,
                rounds_ns: vec![177_100.0],
                other_cores: vec![Some(0.81), Some(0.3)],
            }),
            peers: Vec::new(),
            speedup: speedup.then_some(177_100.0 / 52_660.4),
            bound_ns: Some(18_950.0),
            fraction_of_bound: Some(18_950.0 / 52_660.4),
            refused: (!speedup).then(|| "peer side: job `W3 jax t=1` failed: boom".to_owned()),
        }
    }

    #[test]
    fn the_table_lines_up_its_columns_and_explains_refusals() {
        let workload = workload_result(vec![formatted_case(true), formatted_case(false)]);
        let expected = "\
== W3: GAE advantages (1 thread, 3 rounds)
  case        rlgrad  best peer             peer  peer/rlgrad    bound  of bound  other cores: peer, rlgrad
  [2048,64]  52.7 us  jax lax.scan (jit)  177 us        3.36x  18.9 us       36%  0.81, 0.02
  [2048,64]  52.7 us  jax lax.scan (jit)  177 us     no ratio  18.9 us       36%  0.81, 0.02
  [2048,64]: no ratio: peer side: job `W3 jax t=1` failed: boom
";
        assert_eq!(table(&workload, &workload.by_threads[0], 3), expected);
    }

    #[test]
    fn summary_lines_give_the_ratio_or_the_reason() {
        let workload = workload_result(vec![formatted_case(true), formatted_case(false)]);
        assert_eq!(
            summary_lines(&workload),
            [
                "W3 [2048,64] 1t: 3.36x best peer (jax lax.scan (jit))",
                "W3 [2048,64] 1t: no ratio (peer side: job `W3 jax t=1` failed: boom)",
            ]
        );
        let w6 = WorkloadResult {
            id: "W6",
            title: "MLP step",
            rlgrad_bench: None,
            by_threads: Vec::new(),
            same_process: Vec::new(),
        };
        assert_eq!(summary_lines(&w6), ["W6: no rlgrad side yet"]);
    }

    #[test]
    fn thread_lines_pair_the_rounds_and_say_when_more_threads_lost_every_round() {
        let with_rounds = |threads: usize, rounds_ns: Vec<f64>| {
            let mut case = formatted_case(true);
            case.rlgrad_bench = format!("returns_f32/2048x64/gae/{threads}t");
            case.rlgrad = Some(RlgradResult {
                median_ns: median(&rounds_ns).unwrap(),
                rounds_ns,
                other_cores: Vec::new(),
                checks: Vec::new(),
            });
            ThreadsResult {
                threads,
                peer_files: Vec::new(),
                cases: vec![case],
            }
        };
        let mut workload = workload_result(Vec::new());
        workload.by_threads = vec![
            with_rounds(1, vec![100.0, 120.0, 110.0]),
            with_rounds(2, vec![104.0, 126.0, 121.0]),
        ];
        assert_eq!(
            thread_lines(&workload),
            [
                "W3 [2048,64] rlgrad 2t/1t: 1.05x the time (paired rounds 1.04-1.10x, 3 rounds: slower in every round)"
            ]
        );
        workload.by_threads[1] = with_rounds(2, vec![95.0, 125.0, 99.0]);
        assert_eq!(
            thread_lines(&workload),
            [
                "W3 [2048,64] rlgrad 2t/1t: 0.95x the time (paired rounds 0.90-1.04x, 3 rounds: within the rounds' spread)"
            ]
        );

        // With same-process runs, their ratios replace the tables' rounds; a run that lost
        // one of the two ids counts no round.
        let run = |order: [usize; 2], one: Option<f64>, two: f64| SameProcessRound {
            order: order.to_vec(),
            median_ns: one
                .map(|one| ("returns_f32/2048x64/gae/1t".to_owned(), one))
                .into_iter()
                .chain([("returns_f32/2048x64/gae/2t".to_owned(), two)])
                .collect(),
            problems: Vec::new(),
        };
        workload.same_process = vec![
            run([1, 2], Some(100.0), 99.0),
            run([2, 1], Some(110.0), 108.9),
            run([1, 2], None, 50.0),
        ];
        assert_eq!(
            thread_lines(&workload),
            [
                "W3 [2048,64] rlgrad 2t/1t: 0.99x the time (same process, order alternating 0.99-0.99x, 2 rounds: faster in every round)"
            ]
        );
        // With the A/A repeat timed, a ratio within its spread is noise: 1.01x in every
        // round, against 1t/1t pairs 0.98-1.03x, is no slowdown.
        let with_again = |order: [usize; 2], one: f64, again: f64, two: f64| {
            let mut run = run(order, Some(one), two);
            run.order.insert(0, 1);
            run.median_ns
                .insert("returns_f32/2048x64/gae/1t-again".to_owned(), again);
            run
        };
        workload.same_process = vec![
            with_again([1, 2], 100.0, 103.0, 101.0),
            with_again([2, 1], 100.0, 98.0, 101.5),
            with_again([1, 2], 100.0, 100.5, 101.2),
        ];
        assert_eq!(
            thread_lines(&workload),
            [
                "W3 [2048,64] rlgrad 2t/1t: 1.01x the time (same process, order alternating 1.01-1.01x, 3 rounds; A/A 1t/1t 0.98-1.03x: within the noise)"
            ]
        );
        workload.same_process = vec![
            with_again([1, 2], 100.0, 101.0, 110.0),
            with_again([2, 1], 100.0, 99.5, 108.0),
        ];
        assert_eq!(
            thread_lines(&workload),
            [
                "W3 [2048,64] rlgrad 2t/1t: 1.09x the time (same process, order alternating 1.08-1.10x, 2 rounds; A/A 1t/1t 0.99-1.01x: slower in every round, beyond the noise)"
            ]
        );

        workload.same_process.truncate(0);
        workload.same_process.push(run([1, 2], None, 50.0));
        assert!(
            thread_lines(&workload).is_empty(),
            "no same-process round with both counts, no line"
        );

        workload.by_threads.remove(0);
        assert!(
            thread_lines(&workload).is_empty(),
            "no 1-thread base, no line"
        );
    }

    #[test]
    fn times_take_three_significant_digits() {
        assert_eq!(format_time(812.4), "812 ns");
        assert_eq!(format_time(56_240.0), "56.2 us");
        assert_eq!(format_time(1_234_000.0), "1.23 ms");
        assert_eq!(format_time(2.5e9), "2.50 s");
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(utc_timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(utc_timestamp(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(utc_timestamp(1_795_392_000 + 3_723), "2026-11-23T01:02:03Z");
    }
}
