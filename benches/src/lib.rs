//! Shared helpers for rlgrad's criterion benches (the benches live in `benches/`).
//!
//! Every bench runs at explicit thread counts: [`thread_counts`] reads them from
//! `RLGRAD_BENCH_THREADS` (`cargo xtask compare` sets it; unset, the benches run at 1 and
//! 2 threads), and [`Threads::bench`] times a routine inside a rayon pool of exactly that
//! many threads, so kernels that take [`Par::auto`] see that count too, never the
//! machine's default. The cases that `cargo xtask compare` puts beside a peer are checked
//! against a reference first ([`check`]: float64, or the exact values for copies); the check prints one
//! `compare-check <id>: ok|FAILED, ...` line that the command reads. A count listed twice
//! (`1,1,2`) is timed twice, the second time as `gae/1t-again`: the A/A pair from which
//! `cargo xtask compare` reads the noise floor of its `2t/1t` verdicts.

use std::fmt;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion};
use rayon::prelude::*;
use rlgrad_core::{Par, keep_workers_awake};

pub mod training;

/// The environment variable that sets the thread counts of a bench run (`1`, `2`, `1,2`;
/// a count at most twice, the second run being its A/A repeat).
pub const THREADS_VAR: &str = "RLGRAD_BENCH_THREADS";

/// Criterion settings for memory-bound kernels: few samples, each long enough to span
/// many iterations, so a bench file finishes in about a minute on two cores.
pub fn criterion() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
}

/// The thread counts of this run, from [`THREADS_VAR`] (default 1 and 2), each with its
/// own rayon pool; a count's second occurrence is its A/A repeat ([`Threads::id`]).
///
/// # Panics
///
/// When the variable holds anything but a comma-separated list of positive integers: a
/// bench must not quietly run at a count nobody asked for.
pub fn thread_counts() -> Vec<Threads> {
    let counts = match std::env::var(THREADS_VAR) {
        Ok(list) => parse_thread_counts(&list).unwrap_or_else(|e| panic!("{THREADS_VAR}: {e}")),
        Err(_) => vec![1, 2],
    };
    pools(counts)
}

/// A pool per count, a count's second occurrence marked as its A/A repeat.
fn pools(counts: Vec<usize>) -> Vec<Threads> {
    let mut threads: Vec<Threads> = Vec::new();
    for count in counts {
        let again = threads.iter().any(|t| t.count == count);
        threads.push(Threads {
            again,
            ..Threads::new(count)
        });
    }
    threads
}

fn parse_thread_counts(list: &str) -> Result<Vec<usize>, String> {
    let counts = list
        .split(',')
        .map(|item| match item.trim().parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!(
                "expected thread counts like `1`, `2` or `1,2`, got `{list}`"
            )),
        })
        .collect::<Result<Vec<usize>, String>>()?;
    match counts
        .iter()
        .find(|&&n| counts.iter().filter(|&&m| m == n).count() > 2)
    {
        Some(n) => Err(format!(
            "a thread count at most twice (the second run is its A/A repeat), got {n} more \
             often in `{list}`"
        )),
        None => Ok(counts),
    }
}

/// One thread count of a bench run: its [`Par`] and a rayon pool of exactly that size.
#[derive(Debug)]
pub struct Threads {
    count: usize,
    /// Whether this is the second run at `count` in this process (the A/A repeat).
    again: bool,
    pool: rayon::ThreadPool,
}

impl Threads {
    /// A pool of `count` threads.
    pub fn new(count: usize) -> Self {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(count)
            .build()
            .expect("a rayon pool of a few threads can be built");
        Self {
            count,
            again: false,
            pool,
        }
    }

    /// The number of threads.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The parallelism to pass to kernels that take one.
    pub fn par(&self) -> Par {
        Par::rayon(self.count)
    }

    /// `name` with this count appended, as the bench ids spell it: `gae/2t`, and
    /// `gae/1t-again` for a count's A/A repeat.
    pub fn id(&self, name: &str) -> String {
        let again = if self.again { "-again" } else { "" };
        format!("{name}/{}t{again}", self.count)
    }

    /// Runs `op` inside the pool.
    pub fn install<R: Send>(&self, op: impl FnOnce() -> R + Send) -> R {
        self.pool.install(op)
    }

    /// Benches `routine` as `name/<count>t` in `group`, timed inside the pool with its other
    /// workers kept awake ([`keep_workers_awake`]: as a training loop on CPUs of its own
    /// would run, and as the peers' OpenMP and Eigen pools wait between kernels).
    pub fn bench<R>(
        &self,
        group: &mut BenchmarkGroup<'_, WallTime>,
        name: &str,
        mut routine: impl FnMut() -> R + Send,
    ) {
        group.bench_function(self.id(name), |b| {
            self.pool
                .install(|| keep_workers_awake(|| b.iter(&mut routine)));
        });
    }
}

/// How far a result may be from its float64 reference: `|got - want| <= abs + rel |want|`
/// element by element. [`Tolerance::EXACT`] asks for equality.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Tolerance {
    /// The absolute part.
    pub abs: f64,
    /// The part relative to the reference value.
    pub rel: f64,
}

impl Tolerance {
    /// Equality: copies and gathers move values, they do not compute them.
    pub const EXACT: Self = Self { abs: 0.0, rel: 0.0 };

    fn allows(self, got: f64, want: f64) -> bool {
        (got - want).abs() <= self.abs + self.rel * want.abs()
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.abs, self.rel) {
            (0.0, 0.0) => write!(f, "equality"),
            (abs, 0.0) => write!(f, "{abs:e}"),
            (abs, rel) => write!(f, "{abs:e} + {rel:e} |want|"),
        }
    }
}

/// Checks `got` against the reference `want` (float64, or the very values for copies and
/// gathers), prints the `compare-check` line of bench `id` and returns whether it passed.
/// A NaN anywhere fails; so does a length that differs from the reference's.
pub fn check<W: Copy + Into<f64>>(id: &str, got: &[f32], want: &[W], tolerance: Tolerance) -> bool {
    let verdict = verdict(got, want, tolerance);
    let status = if verdict.is_ok() { "ok" } else { "FAILED" };
    let detail = verdict.unwrap_or_else(|why| why);
    println!("compare-check {id}: {status}, {detail} against float64 (allowed {tolerance})");
    status == "ok"
}

/// `Ok(what was seen)` or `Err(what was wrong)`.
fn verdict<W: Copy + Into<f64>>(
    got: &[f32],
    want: &[W],
    tolerance: Tolerance,
) -> Result<String, String> {
    if got.len() != want.len() {
        return Err(format!(
            "{} values where the reference has {}",
            got.len(),
            want.len()
        ));
    }
    let mut worst: Option<(usize, f64)> = None;
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let (g, w) = (f64::from(g), w.into());
        if !tolerance.allows(g, w) {
            return Err(format!("element {i} is {g:e} where it should be {w:e}"));
        }
        let error = (g - w).abs();
        if worst.is_none_or(|(_, e)| error > e) {
            worst = Some((i, error));
        }
    }
    Ok(match worst {
        Some((_, 0.0)) => format!("all {} values equal", got.len()),
        Some((i, error)) => format!("largest error {error:.1e} (element {i})"),
        None => "no values".to_owned(),
    })
}

/// Copies `src` into `dst` with `threads` tasks: the memory-bandwidth yardstick that the
/// kernels' bytes are compared with (8 bytes per f32 element: one read, one write).
pub fn parallel_copy(dst: &mut [f32], src: &[f32], threads: usize) {
    let chunk = dst.len().div_ceil(threads.max(1)).max(1);
    dst.par_chunks_mut(chunk)
        .zip(src.par_chunks(chunk))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// The fastest read of `x` this machine does: per thread, 16 independent lanes over a
/// contiguous part, compiled for AVX-512 or AVX2 when the CPU has them. Its order of
/// additions depends on the thread count, so it is a bandwidth yardstick, not a sum rlgrad
/// would return.
pub fn read_ceiling(x: &[f32], threads: usize) -> f32 {
    let part = x.len().div_ceil(threads.max(1)).max(1);
    x.par_chunks(part)
        .map(lanes_widest)
        .collect::<Vec<f32>>()
        .iter()
        .sum()
}

#[inline(always)]
fn lanes(x: &[f32]) -> f32 {
    let mut acc = [0.0f32; 16];
    for group in x.chunks_exact(16) {
        for (a, &v) in acc.iter_mut().zip(group) {
            *a += v;
        }
    }
    acc.iter().sum::<f32>() + x.chunks_exact(16).remainder().iter().sum::<f32>()
}

fn lanes_widest(x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU supports AVX-512F, checked just above.
            return unsafe { lanes_avx512(x) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            return unsafe { lanes_avx2(x) };
        }
    }
    lanes(x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn lanes_avx512(x: &[f32]) -> f32 {
    lanes(x)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn lanes_avx2(x: &[f32]) -> f32 {
    lanes(x)
}

/// Seconds per call of `run`, for the report binaries (`calibrate`, `gemm_peak`) that time
/// without criterion: the fastest of 7 batches, each of enough calls (about 20 ms) to hide
/// the clock, after one warm-up call.
pub fn seconds_per_call(mut run: impl FnMut()) -> f64 {
    use std::time::Instant;
    run();
    let clock = Instant::now();
    run();
    let once = clock.elapsed().max(Duration::from_nanos(100));
    let calls = (Duration::from_millis(20).as_nanos() / once.as_nanos()).clamp(1, 1_000_000);
    let calls = u32::try_from(calls).expect("at most a million calls");
    (0..7)
        .map(|_| {
            let clock = Instant::now();
            for _ in 0..calls {
                run();
            }
            clock.elapsed().as_secs_f64() / f64::from(calls)
        })
        .fold(f64::INFINITY, f64::min)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_counts_parse_from_a_comma_separated_list() {
        assert_eq!(parse_thread_counts("1"), Ok(vec![1]));
        assert_eq!(parse_thread_counts("1, 2"), Ok(vec![1, 2]));
        assert!(parse_thread_counts("0").is_err());
        assert!(parse_thread_counts("two").is_err());
        assert!(parse_thread_counts("").is_err());
        assert_eq!(parse_thread_counts("1,1,2"), Ok(vec![1, 1, 2]));
        assert!(parse_thread_counts("1,1,1").is_err());
    }

    #[test]
    fn a_count_listed_twice_runs_again_under_its_own_id() {
        let ids: Vec<String> = pools(vec![1, 1, 2]).iter().map(|t| t.id("gae")).collect();
        assert_eq!(ids, ["gae/1t", "gae/1t-again", "gae/2t"]);
    }

    #[test]
    fn verdict_reports_the_largest_error_or_the_first_element_out_of_tolerance() {
        let loose = Tolerance {
            abs: 1e-3,
            rel: 0.0,
        };
        assert_eq!(
            verdict(&[1.0, 2.0005], &[1.0f64, 2.0], loose),
            Ok("largest error 5.0e-4 (element 1)".to_owned())
        );
        assert_eq!(
            verdict(&[1.0, 2.5], &[1.0f64, 2.0], loose),
            Err("element 1 is 2.5e0 where it should be 2e0".to_owned())
        );
        assert!(verdict(&[f32::NAN], &[0.0f64], loose).is_err());
        assert!(verdict(&[1.0], &[1.0f64, 2.0], loose).is_err());
        assert_eq!(
            verdict(&[1.0, 0.5], &[1.0f32, 0.5], Tolerance::EXACT),
            Ok("all 2 values equal".to_owned())
        );
    }

    #[test]
    fn threads_run_their_routine_in_a_pool_of_their_size() {
        let two = Threads::new(2);
        assert_eq!(two.install(rayon::current_num_threads), 2);
        assert_eq!(two.par(), Par::rayon(2));
        assert_eq!(two.id("gae"), "gae/2t");
    }
}
