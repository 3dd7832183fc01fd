//! The GPU bundle and its runner.
//!
//! `cargo xtask gpu-build` puts everything a GPU machine without a Rust toolchain needs
//! into `gpu-bin/`: the `rlgrad-cuda` test binaries, rlgrad-dist's NCCL test and the
//! examples' GPU test (TD3, DDPG, SAC, the actor-critic, recurrent PPO and `ppo_dist`
//! against the Cpu's checkpoint bits),
//! `rlgrad-gpu-bench` (rlgrad-benches', with its PyTorch and JAX scripts embedded), this xtask binary, the
//! parity vectors, the runner script `gpu-bin/run`, and where MPI is installed, the test of
//! `Nccl::from_mpi` that runs under `mpirun` (`gpu-bin/mpi/`). On the GPU machine one command, `gpu-bin/run`, calls `xtask gpu-run`:
//! every test in a process of its own with `RLGRAD_REQUIRE_GPU=1` (a crash or a hang
//! fails that test only, and a missing GPU fails instead of skipping), then the parity
//! suites on the GPU, then the bench; it never stops at a failure, keeps within a time
//! budget, and writes one report, `$OUT/gpu-report.md` and `$OUT/gpu-report.json`.
//!
//! `--dry-run` runs the same bundle on a machine without a GPU (CI does, so that the
//! bundle cannot rot): what needs a GPU is reported "not run", the rest must pass, and
//! the report is still written and checked.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::compare::report::utc_now;

/// Where `gpu-build` puts the bundle (git-ignored).
pub const BUNDLE: &str = "gpu-bin";

/// The bundle's folder of test programs without the libtest harness that run under
/// `mpirun` (rlgrad-dist's `nccl_mpi`), at each of [`MPI_WORLD_SIZES`].
const MPI_TESTS: &str = "mpi";

/// The world sizes of the mpirun tests on a GPU machine: one rank, and two (which need two
/// GPUs; on one, NCCL's refusal must come at once, and the step says it did not run).
const MPI_WORLD_SIZES: [usize; 2] = [1, 2];

/// The runner script of the bundle: everything resolves relative to its folder.
const RUN_SCRIPT: &str = "#!/bin/sh\n\
# Runs the rlgrad GPU bundle (cargo xtask gpu-build): every CUDA test, the parity suites on\n\
# the GPU and the bench, writing gpu-report.md and gpu-report.json into $OUT (or\n\
# gpu-report/ here). Options: --dry-run, --quick, --budget SECONDS.\n\
here=$(cd \"$(dirname \"$0\")\" && pwd)\n\
if ! \"$here/xtask\" --help >/dev/null 2>&1; then\n\
  echo \"gpu-bin/run: the bundle's binaries do not start on this machine (they need Linux\" >&2\n\
  echo \"x86_64 with glibc >= 2.34, e.g. Ubuntu 22.04 or Debian 12):\" >&2\n\
  \"$here/xtask\" --help 2>&1 | head -3 >&2\n\
  exit 1\n\
fi\n\
exec \"$here/xtask\" gpu-run --bundle \"$here\" --out \"${OUT:-$here/gpu-report}\" \"$@\"\n";

/// `cargo xtask gpu-build [--profile P]`: the bundle's binaries in cargo profile `P`,
/// `release` unless told (CI's dry run takes `test`, the profile its tests were built in,
/// so that the bundle reuses them instead of building everything a second time).
pub fn build(args: &[String]) -> Result<(), String> {
    let profile = match args {
        [] => "release",
        [flag, profile] if flag == "--profile" => profile.as_str(),
        _ => {
            return Err(format!(
                "usage: cargo xtask gpu-build [--profile P], got {args:?}"
            ));
        }
    };
    let root = crate::root();
    let out = root.join(BUNDLE);
    let _ = std::fs::remove_dir_all(&out);
    std::fs::create_dir_all(out.join("tests")).map_err(|e| format!("{}: {e}", out.display()))?;
    let binaries = ["rlgrad-gpu-bench", crate::tools::BINARY, "xtask"];
    let mpi_missing = crate::mpi_missing();
    let selection = crate::workspace_selection(&mpi_missing);
    // In the test profile, everything comes from the selection (and so the features)
    // `cargo xtask test` built the workspace in, and is reused as it is: any other
    // feature set would compile every crate again. `--tests` beside the binaries gives
    // the same features as `cargo test` (dev-dependencies included). In another profile
    // only what the bundle needs is built: the binaries, the CUDA crate's tests beside the
    // tools binary (which gives their dependencies the features they have in the
    // workspace), and the NCCL and examples' GPU tests.
    let (mut build, mut test_build, mut other_tests) = (
        vec!["build", "--profile", profile],
        vec!["test", "--no-run", "--profile", profile],
        vec!["test", "--no-run", "--profile", profile],
    );
    if profile == "test" {
        build.extend(selection);
        build.push("--tests");
        test_build.extend(selection);
    } else {
        for package in ["rlgrad-benches", crate::tools::BINARY, "xtask"] {
            build.extend(["-p", package]);
        }
        test_build.extend(["-p", "rlgrad-cuda", "-p", crate::tools::BINARY]);
        other_tests.extend(selection);
        other_tests.extend(["--test", "nccl", "--test", "gpu"]);
        if mpi_missing.is_none() {
            other_tests.extend(["--test", "nccl_mpi"]);
        }
    }
    for binary in binaries {
        build.extend(["--bin", binary]);
    }
    let built_binaries = crate::built_executables(&build)?;
    let copy = |from: &Path, to: &Path| {
        std::fs::copy(from, to)
            .map(|_| ())
            .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))
    };
    let built_tests = crate::built_executables(&test_build)?;
    for test in built_tests
        .iter()
        .filter(|b| b.kind == "test" && b.package_dir == Path::new("crates/cuda"))
    {
        copy(&test.path, &out.join("tests").join(&test.name))?;
    }
    // rlgrad-dist's NCCL tests and the examples' GPU test (in the bundle as `examples`);
    // the test of `Nccl::from_mpi` runs under mpirun, and building it needs MPI here too.
    let built = if profile == "test" {
        built_tests
    } else {
        crate::built_executables(&other_tests)?
    };
    copy(
        crate::find_test(&built, "crates/distributed", "nccl")?,
        &out.join("tests").join("nccl"),
    )?;
    copy(
        crate::find_test(&built, "examples", "gpu")?,
        &out.join("tests").join("examples"),
    )?;
    match &mpi_missing {
        None => {
            std::fs::create_dir_all(out.join(MPI_TESTS))
                .map_err(|e| format!("{}: {e}", out.display()))?;
            copy(
                crate::find_test(&built, "crates/distributed", "nccl_mpi")?,
                &out.join(MPI_TESTS).join("nccl_mpi"),
            )?
        }
        Some(why) => println!("gpu-build: the bundle goes without the mpirun tests: {why}"),
    }
    for binary in binaries {
        let path = built_binaries
            .iter()
            .find(|b| b.kind == "bin" && b.name == binary)
            .map(|b| b.path.as_path())
            .ok_or_else(|| format!("cargo built no `{binary}`"))?;
        copy(path, &out.join(binary))?;
    }
    let parity = out.join("parity");
    std::fs::create_dir_all(&parity).map_err(|e| format!("{}: {e}", parity.display()))?;
    for entry in std::fs::read_dir(root.join("parity")).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        if path.is_file() {
            copy(&path, &parity.join(path.file_name().unwrap_or_default()))?;
        }
    }
    strip_symbols(&out)?;
    let script = out.join("run");
    std::fs::write(&script, RUN_SCRIPT).map_err(|e| format!("{}: {e}", script.display()))?;
    make_executable(&script)?;
    println!(
        "gpu-build: the bundle is in {BUNDLE}/. On the GPU machine (the device tool's `run` \
         with carry [\"{BUNDLE}\"]), from the repository root:\n\n  {BUNDLE}/run\n\n\
         It runs every test, parity and the bench within 10 minutes, never stops at a \
         failure, and writes $OUT/gpu-report.md and $OUT/gpu-report.json."
    );
    Ok(())
}

/// Strips the symbol tables from the bundle's programs (the binutils `strip` of this
/// machine; without one the bundle keeps them): the device tool carries at most 64 MiB of
/// working tree, and the release bundle was 55 MB with them, 44 MB without. Panics keep
/// their messages and locations; only backtraces lose function names.
fn strip_symbols(bundle: &Path) -> Result<(), String> {
    let mut programs = Vec::new();
    for folder in [
        bundle.to_path_buf(),
        bundle.join("tests"),
        bundle.join(MPI_TESTS),
    ] {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        programs.extend(
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file()),
        );
    }
    match Command::new("strip")
        .arg("--strip-all")
        .args(&programs)
        .status()
    {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(format!("strip of the bundle's programs failed: {status}")),
        Err(e) => {
            println!("gpu-build: no `strip` here ({e}); the bundle keeps its symbols");
            Ok(())
        }
    }
}

#[cfg(unix)]
fn make_executable(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(not(unix))]
fn make_executable(_: &Path) -> Result<(), String> {
    Ok(())
}

/// What `gpu-run` was asked.
#[derive(Debug, Clone, PartialEq)]
struct Options {
    bundle: PathBuf,
    out: PathBuf,
    dry_run: bool,
    quick: bool,
    budget: Duration,
}

fn parse_options(args: &[String]) -> Result<Options, String> {
    let mut options = Options {
        // The bundle this binary is part of (gpu-bin/xtask), else the workspace's gpu-bin/
        // (`cargo xtask gpu-run` on the build machine).
        bundle: std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_path_buf))
            .filter(|folder| folder.join("tests").is_dir())
            .unwrap_or_else(|| crate::root().join(BUNDLE)),
        out: std::env::var_os("OUT").map_or_else(|| PathBuf::from("gpu-report"), PathBuf::from),
        dry_run: false,
        quick: false,
        budget: Duration::from_secs(540),
    };
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        let mut value = |name: &str| {
            rest.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value (`cargo xtask gpu-run --help`)"))
        };
        match arg.as_str() {
            "--bundle" => options.bundle = PathBuf::from(value("--bundle")?),
            "--out" => options.out = PathBuf::from(value("--out")?),
            "--dry-run" => options.dry_run = true,
            "--quick" => options.quick = true,
            "--budget" => {
                let text = value("--budget")?;
                let seconds: u64 =
                    text.parse().ok().filter(|&s| s >= 60).ok_or_else(|| {
                        format!("--budget takes whole seconds >= 60, got `{text}`")
                    })?;
                options.budget = Duration::from_secs(seconds);
            }
            other => {
                return Err(format!(
                    "unknown option `{other}` (`cargo xtask gpu-run --help`)"
                ));
            }
        }
    }
    Ok(options)
}

/// How one step of the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Passed,
    Failed,
    /// Needed a GPU that was not there (dry run), or the time budget was spent.
    NotRun,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed => "FAILED",
            Outcome::NotRun => "not run",
        }
    }
}

/// One step: a test, the parity run or the bench.
#[derive(Debug, Clone)]
struct Step {
    group: String,
    name: String,
    outcome: Outcome,
    seconds: f64,
    /// `(compared, differing)` elements, from the test's `rlgrad-bits` lines.
    bits: Option<(u64, u64)>,
    /// Why it failed or did not run: the first lines of the failure, or the skip line.
    detail: Vec<String>,
}

/// A finished child process.
struct Finished {
    /// `None` when it was killed at its time limit.
    success: Option<bool>,
    output: String,
    seconds: f64,
}

/// Runs `command` to its end or to `limit`, whichever comes first, collecting its
/// stdout and stderr. The command runs in a process group of its own, and the whole
/// group is killed at the limit (the bench's Python child included), so that nothing
/// keeps the output pipes open.
fn run_limited(mut command: Command, limit: Duration) -> Finished {
    let start = Instant::now();
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let spawned = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            return Finished {
                success: Some(false),
                output: format!("cannot start {command:?}: {e}"),
                seconds: 0.0,
            };
        }
    };
    let readers: Vec<_> = [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|mut stream| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stream.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    })
    .collect();
    let success = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status.success()),
            Ok(None) if start.elapsed() < limit => std::thread::sleep(Duration::from_millis(20)),
            _ => {
                kill_group(&mut child);
                let _ = child.wait();
                break None;
            }
        }
    };
    let output = readers
        .into_iter()
        .map(|reader| reader.join().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    Finished {
        success,
        output,
        seconds: start.elapsed().as_secs_f64(),
    }
}

#[cfg(unix)]
fn kill_group(child: &mut std::process::Child) {
    match libc::pid_t::try_from(child.id()) {
        // SAFETY: sends SIGKILL to the process group the child leads (`process_group(0)`
        // made its id the group's); no memory is touched.
        Ok(group) => unsafe {
            libc::kill(-group, libc::SIGKILL);
        },
        Err(_) => {
            let _ = child.kill();
        }
    }
}

#[cfg(not(unix))]
fn kill_group(child: &mut std::process::Child) {
    let _ = child.kill();
}

/// The first lines that say why a run failed: from the first panic, else the last lines.
fn failure_excerpt(output: &str) -> Vec<String> {
    const LINES: usize = 12;
    let lines: Vec<&str> = output.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines
        .iter()
        .position(|l| l.contains("panicked at") || l.starts_with("Error") || l.contains("FAIL"))
        .unwrap_or(lines.len().saturating_sub(LINES));
    lines[start..]
        .iter()
        .take(LINES)
        .map(|l| (*l).to_owned())
        .collect()
}

/// The environment variable that turns a GPU test's skip into a failure
/// (`rlgrad_cuda::REQUIRE_GPU`).
const REQUIRE_GPU: &str = "RLGRAD_REQUIRE_GPU";

/// The `(compared, differing)` counts of a line written by `rlgrad_cuda::bits_line`
/// (`rlgrad-bits: compared N, differing M`), `None` for any other line. The counts may
/// follow other text on the line: libtest prints `test name ... ` before running a test
/// and its `ok` after, so what the test prints when it ends shares libtest's line.
fn parse_bits_line(line: &str) -> Option<(u64, u64)> {
    const MARKER: &str = "rlgrad-bits: compared ";
    let rest = line.trim_end();
    let rest = &rest[rest.find(MARKER)? + MARKER.len()..];
    let (compared, differing) = rest.split_once(", differing ")?;
    Some((compared.parse().ok()?, differing.parse().ok()?))
}

/// A step's outcome from its process: passed, failed (with the excerpt), or not run when
/// it passed by skipping (the `SKIPPED (no ...)` line of `rlgrad_cuda::skip`).
fn judge(group: &str, name: &str, finished: &Finished) -> Step {
    let skipped: Vec<String> = finished
        .output
        .lines()
        .filter(|l| l.contains("SKIPPED (no "))
        .take(1)
        .map(|l| l.trim().to_owned())
        .collect();
    let bits = finished
        .output
        .lines()
        .filter_map(parse_bits_line)
        .reduce(|a, b| (a.0 + b.0, a.1 + b.1));
    let (outcome, detail) = match finished.success {
        None => (
            Outcome::Failed,
            std::iter::once(format!("timed out after {:.0} s, killed", finished.seconds))
                .chain(failure_excerpt(&finished.output))
                .collect(),
        ),
        Some(false) => (Outcome::Failed, failure_excerpt(&finished.output)),
        Some(true) if !skipped.is_empty() => (Outcome::NotRun, skipped),
        Some(true) => (Outcome::Passed, Vec::new()),
    };
    Step {
        group: group.to_owned(),
        name: name.to_owned(),
        outcome,
        seconds: finished.seconds,
        bits: bits.filter(|&(compared, _)| compared > 0),
        detail,
    }
}

/// The tests of a libtest binary (`--list --format terse`).
fn list_tests(binary: &Path) -> Result<Vec<String>, String> {
    let output = Command::new(binary)
        .args(["--list", "--format", "terse"])
        .output()
        .map_err(|e| format!("cannot list {}: {e}", binary.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} --list failed: {}",
            binary.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_owned)
        .collect())
}

/// Folders that may hold the library file `file` (`libnvrtc.so.13`, `libnccl.so.2`) on a
/// machine whose Python has PyTorch or JAX with CUDA 13 (NVIDIA's wheels put them in
/// `nvidia/<package>/lib`), or a CUDA toolkit.
fn library_candidates(file: &str) -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Command::new("python3")
        .args(["-c", "import sys; print('\\n'.join(sys.path))"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter(|l| !l.is_empty())
                .map(|l| PathBuf::from(l).join("nvidia"))
                .collect()
        })
        .unwrap_or_default();
    roots.sort();
    roots.dedup();
    let mut found = Vec::new();
    for root in roots {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        let mut folders: Vec<PathBuf> = entries.flatten().map(|e| e.path().join("lib")).collect();
        folders.sort();
        found.extend(folders.into_iter().filter(|lib| lib.join(file).exists()));
    }
    for toolkit in ["/usr/local/cuda/lib64", "/usr/local/cuda-13/lib64"] {
        if Path::new(toolkit).join(file).exists() {
            found.push(PathBuf::from(toolkit));
        }
    }
    found
}

/// Whether the dynamic loader finds the library `file` by itself.
#[cfg(unix)]
fn loadable(file: &str) -> bool {
    let Ok(name) = std::ffi::CString::new(file) else {
        return false;
    };
    // SAFETY: a NUL-terminated name; a handle dlopen returns is closed once.
    unsafe {
        let handle = libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
        if handle.is_null() {
            false
        } else {
            libc::dlclose(handle);
            true
        }
    }
}

#[cfg(not(unix))]
fn loadable(_: &str) -> bool {
    false
}

/// The environment every child gets: the GPU required (unless a dry run), and the
/// folders of NVRTC and NCCL on the library path where the loader would not find them by
/// itself.
fn child_environment(options: &Options) -> Vec<(String, String)> {
    let mut environment = Vec::new();
    if !options.dry_run {
        environment.push((REQUIRE_GPU.to_owned(), "1".to_owned()));
    }
    let mut folders = Vec::new();
    if !loadable("libnvrtc.so.13") {
        folders.extend(library_candidates("libnvrtc.so.13").into_iter().next());
    }
    if !loadable("libnccl.so.2") {
        folders.extend(library_candidates("libnccl.so.2").into_iter().next());
    }
    if !folders.is_empty() {
        let old = std::env::var("LD_LIBRARY_PATH").unwrap_or_default();
        let joined = folders
            .iter()
            .map(|f| f.display().to_string())
            .chain((!old.is_empty()).then_some(old))
            .collect::<Vec<_>>()
            .join(":");
        environment.push(("LD_LIBRARY_PATH".to_owned(), joined));
    }
    environment
}

/// What the report says about the machine, asked in a child (which gets the library
/// path) so that this process opens no GPU context beside the tests'.
fn machine_facts(options: &Options, environment: &[(String, String)]) -> Value {
    let mut command = Command::new(options.bundle.join(crate::tools::BINARY));
    command
        .arg("gpu-facts")
        .envs(environment.iter().map(|(k, v)| (k, v)));
    let finished = run_limited(command, Duration::from_secs(120));
    let text = finished.output.lines().find(|l| l.starts_with('{'));
    text.and_then(|t| serde_json::from_str(t).ok())
        .unwrap_or_else(|| json!({ "error": failure_excerpt(&finished.output) }))
}

/// Tests that need no GPU and give the same result on any machine, which `cargo test` has
/// run on the same sources: a dry run (CI's, after `cargo test`) leaves them out (the
/// bundle's test binary, a part of the tests' names, and what they are). The NVRTC compile
/// tests take almost a minute, the host emulations of the kernels another.
const HOST_ONLY_TESTS: [(&str, &str, &str); 2] = [
    ("integration", "ptx::", "the NVRTC compile tests"),
    (
        "rlgrad_cuda",
        "::tests::emulated_",
        "the host emulations of the kernels",
    ),
];

/// `cargo xtask gpu-run`.
pub fn run(args: &[String]) -> Result<(), String> {
    let options = parse_options(args)?;
    let started = Instant::now();
    std::fs::create_dir_all(&options.out).map_err(|e| format!("{}: {e}", options.out.display()))?;
    let environment = child_environment(&options);
    let machine = machine_facts(&options, &environment);
    println!("gpu-run: {machine}");
    // The bench gets what is left after the tests, at least this much.
    let bench_reserve = Duration::from_secs(if options.quick { 60 } else { 180 });
    let mut steps = Vec::new();
    let not_run = |group: &str, name: &str, why: String| Step {
        group: group.to_owned(),
        name: name.to_owned(),
        outcome: Outcome::NotRun,
        seconds: 0.0,
        bits: None,
        detail: vec![why],
    };
    // One test in a process of its own, within what the budget leaves before the bench.
    let run_test = |group: &str, test: &str, mut command: Command| {
        let left = options
            .budget
            .saturating_sub(started.elapsed())
            .saturating_sub(bench_reserve);
        let step = if left < Duration::from_secs(5) {
            not_run(
                group,
                test,
                "the time budget was spent before this test".to_owned(),
            )
        } else {
            command.envs(environment.iter().map(|(k, v)| (k, v)));
            judge(
                group,
                test,
                &run_limited(command, left.min(Duration::from_secs(240))),
            )
        };
        println!(
            "gpu-run: {:<8} {group}::{test} ({:.1} s)",
            step.outcome.name(),
            step.seconds
        );
        step
    };
    let mut binaries: Vec<PathBuf> = std::fs::read_dir(options.bundle.join("tests"))
        .map_err(|e| format!("{}/tests: {e}", options.bundle.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    binaries.sort();
    for binary in &binaries {
        let group = binary
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tests = match list_tests(binary) {
            Ok(tests) => tests,
            Err(why) => {
                steps.push(Step {
                    group: group.clone(),
                    name: "(listing the tests)".to_owned(),
                    outcome: Outcome::Failed,
                    seconds: 0.0,
                    bits: None,
                    detail: vec![why],
                });
                continue;
            }
        };
        for test in tests {
            let host_only = HOST_ONLY_TESTS
                .iter()
                .find(|(binary, part, _)| group == *binary && test.contains(part));
            if let (true, Some((_, _, what))) = (options.dry_run, host_only) {
                steps.push(not_run(
                    &group,
                    &test,
                    format!(
                        "a dry run leaves out {what}, which need no GPU and which cargo test \
                         ran on the same sources"
                    ),
                ));
                continue;
            }
            let mut command = Command::new(binary);
            command.args(["--exact", &test, "--nocapture", "--test-threads", "1"]);
            steps.push(run_test(&group, &test, command));
        }
    }
    let mpi_binaries: Vec<PathBuf> = match std::fs::read_dir(options.bundle.join(MPI_TESTS)) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => {
            steps.push(not_run(
                MPI_TESTS,
                "(the mpirun tests)",
                "the bundle has none: gpu-build found no MPI to build them with".to_owned(),
            ));
            Vec::new()
        }
    };
    let mpirun_missing = crate::mpirun_missing();
    for binary in &mpi_binaries {
        let group = binary
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        // Absolute: mpirun runs in the bundle's folder (the workspace's path does not
        // exist on a GPU machine), where a relative path would not resolve.
        let binary = std::path::absolute(binary).unwrap_or_else(|_| binary.clone());
        for world in MPI_WORLD_SIZES {
            let name = format!("mpirun -np {world}");
            if let Some(why) = &mpirun_missing {
                steps.push(not_run(&group, &name, why.clone()));
                continue;
            }
            // The ranks on this node inherit mpirun's environment (the library path, the
            // GPU requirement).
            let mut command = crate::mpirun(world, &binary, &[]);
            command.current_dir(&options.bundle);
            steps.push(run_test(&group, &name, command));
        }
    }
    let left = |reserve: u64| {
        options
            .budget
            .saturating_sub(started.elapsed())
            .saturating_sub(Duration::from_secs(reserve))
    };
    let mut parity = Command::new(options.bundle.join(crate::tools::BINARY));
    parity
        .arg("parity")
        .arg(options.bundle.join("parity"))
        .args(["--device", "cuda"])
        .envs(environment.iter().map(|(k, v)| (k, v)));
    let parity_step = judge(
        "parity",
        "parity --device cuda",
        &run_limited(
            parity,
            left(bench_reserve.as_secs()).max(Duration::from_secs(30)),
        ),
    );
    println!("gpu-run: {:<8} parity", parity_step.outcome.name());
    steps.push(parity_step);
    let bench_json = options.out.join("gpu-bench.json");
    let _ = std::fs::remove_file(&bench_json);
    let mut bench = Command::new(options.bundle.join("rlgrad-gpu-bench"));
    bench
        .arg("--out")
        .arg(&bench_json)
        .envs(environment.iter().map(|(k, v)| (k, v)));
    if options.quick {
        bench.arg("--quick");
    }
    let bench_step = judge(
        "bench",
        "rlgrad-gpu-bench",
        &run_limited(bench, left(10).max(Duration::from_secs(30))),
    );
    println!("gpu-run: {:<8} bench", bench_step.outcome.name());
    steps.push(bench_step);
    let bench_rows = std::fs::read_to_string(&bench_json)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .unwrap_or(Value::Null);
    let report = Report {
        generated_utc: utc_now(),
        dry_run: options.dry_run,
        machine,
        steps,
        bench: bench_rows,
        seconds: started.elapsed().as_secs_f64(),
    };
    let json_path = options.out.join("gpu-report.json");
    let markdown_path = options.out.join("gpu-report.md");
    let json_text = serde_json::to_string_pretty(&report.json()).map_err(|e| e.to_string())?;
    std::fs::write(&json_path, &json_text).map_err(|e| format!("{}: {e}", json_path.display()))?;
    std::fs::write(&markdown_path, report.markdown())
        .map_err(|e| format!("{}: {e}", markdown_path.display()))?;
    check_report(&serde_json::from_str(&json_text).map_err(|e| e.to_string())?)?;
    let (passed, failed, not_run) = report.counts();
    println!(
        "gpu-run: {passed} passed, {failed} failed, {not_run} not run in {:.0} s; report in {} \
         and {}",
        report.seconds,
        markdown_path.display(),
        json_path.display()
    );
    if failed > 0 {
        Err(format!(
            "{failed} step(s) failed (see {})",
            markdown_path.display()
        ))
    } else {
        Ok(())
    }
}

/// Everything a run found.
struct Report {
    generated_utc: String,
    dry_run: bool,
    machine: Value,
    steps: Vec<Step>,
    bench: Value,
    seconds: f64,
}

impl Report {
    fn counts(&self) -> (usize, usize, usize) {
        let count = |o: Outcome| self.steps.iter().filter(|s| s.outcome == o).count();
        (
            count(Outcome::Passed),
            count(Outcome::Failed),
            count(Outcome::NotRun),
        )
    }

    fn bits(&self) -> (u64, u64) {
        self.steps
            .iter()
            .filter_map(|s| s.bits)
            .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1))
    }

    fn json(&self) -> Value {
        let (passed, failed, not_run) = self.counts();
        let (compared, differing) = self.bits();
        json!({
            "schema": 1,
            "generated_utc": self.generated_utc,
            "mode": if self.dry_run { "dry-run" } else { "gpu" },
            "machine": self.machine,
            "seconds": self.seconds,
            "summary": {
                "passed": passed,
                "failed": failed,
                "not_run": not_run,
                "elements_compared": compared,
                "elements_differing": differing,
            },
            "steps": self.steps.iter().map(|s| json!({
                "group": s.group,
                "name": s.name,
                "outcome": s.outcome.name(),
                "seconds": s.seconds,
                "elements_compared": s.bits.map(|b| b.0),
                "elements_differing": s.bits.map(|b| b.1),
                "detail": s.detail,
            })).collect::<Vec<_>>(),
            "bench": self.bench,
        })
    }

    fn markdown(&self) -> String {
        let (passed, failed, not_run) = self.counts();
        let (compared, differing) = self.bits();
        let machine = |key: &str| {
            self.machine[key]
                .as_str()
                .map_or_else(|| "-".to_owned(), str::to_owned)
        };
        let mut md = format!(
            "# rlgrad GPU report\n\n{} UTC, {}, {:.0} s.\n\nGPU: {} (compile target {}, \
             driver CUDA {}, NVRTC {}){}\n\n**{passed} passed, {failed} failed, {not_run} \
             not run.** Elements compared with the Cpu: {compared}, differing: {differing} \
             (expected 0).\n\n",
            self.generated_utc,
            if self.dry_run {
                "dry run (no GPU expected)"
            } else {
                "GPU run (RLGRAD_REQUIRE_GPU=1)"
            },
            self.seconds,
            machine("gpu"),
            machine("target"),
            machine("driver"),
            machine("nvrtc"),
            self.machine["why"]
                .as_str()
                .map_or_else(String::new, |w| format!("; no GPU: {w}")),
        );
        md.push_str("## Tests, parity, bench\n\n| step | outcome | s | compared | differing |\n|---|---|---|---|---|\n");
        for s in &self.steps {
            let (c, d) = s.bits.map_or(("-".to_owned(), "-".to_owned()), |(c, d)| {
                (c.to_string(), d.to_string())
            });
            md.push_str(&format!(
                "| {}::{} | {} | {:.1} | {c} | {d} |\n",
                s.group,
                s.name,
                s.outcome.name(),
                s.seconds
            ));
        }
        let explained: Vec<&Step> = self
            .steps
            .iter()
            .filter(|s| s.outcome != Outcome::Passed && !s.detail.is_empty())
            .collect();
        if !explained.is_empty() {
            md.push_str("\n## Why\n");
            for s in explained {
                md.push_str(&format!(
                    "\n### {}::{} ({})\n\n```text\n{}\n```\n",
                    s.group,
                    s.name,
                    s.outcome.name(),
                    s.detail.join("\n")
                ));
            }
        }
        if let Some(rows) = self.bench["rows"].as_array() {
            md.push_str(
                "\n## Bench (each output checked against the Cpu's bits before timing)\n\n\
                 | workload | bits | rlgrad ms | GB/s | of copy | PyTorch ms | JAX ms | vs best peer |\n\
                 |---|---|---|---|---|---|---|---|\n",
            );
            let ms = |v: &Value| {
                v.as_f64()
                    .map_or_else(|| "-".to_owned(), |x| format!("{x:.4}"))
            };
            for row in rows {
                let ours = row["rlgrad_ms"].as_f64();
                let best = [row["torch_ms"].as_f64(), row["jax_ms"].as_f64()]
                    .into_iter()
                    .flatten()
                    .fold(None, |b: Option<f64>, x| Some(b.map_or(x, |b| b.min(x))));
                let ratio = match (ours, best) {
                    (Some(o), Some(b)) if o > 0.0 => format!("{:.2}x", b / o),
                    _ => "-".to_owned(),
                };
                md.push_str(&format!(
                    "| {} | {} | {} | {:.0} | {:.0}% | {} | {} | {ratio} |\n",
                    row["workload"].as_str().unwrap_or("?"),
                    row["bits"].as_str().unwrap_or("-"),
                    ms(&row["rlgrad_ms"]),
                    row["gb_per_s"].as_f64().unwrap_or(0.0),
                    100.0 * row["fraction_of_copy"].as_f64().unwrap_or(0.0),
                    ms(&row["torch_ms"]),
                    ms(&row["jax_ms"]),
                ));
            }
        }
        md
    }
}

/// `Ok` when `report` has the shape a reader of gpu-report.json relies on.
fn check_report(report: &Value) -> Result<(), String> {
    let fail = |what: &str| Err(format!("gpu-report.json is malformed: {what}"));
    if report["schema"] != 1 {
        return fail("schema is not 1");
    }
    for key in [
        "passed",
        "failed",
        "not_run",
        "elements_compared",
        "elements_differing",
    ] {
        if !report["summary"][key].is_u64() {
            return fail(&format!("summary.{key} is not a count"));
        }
    }
    let Some(steps) = report["steps"].as_array() else {
        return fail("no steps");
    };
    let total = ["passed", "failed", "not_run"]
        .iter()
        .map(|k| report["summary"][k].as_u64().unwrap_or(0))
        .sum::<u64>();
    if steps.len() as u64 != total {
        return fail("the summary does not count every step");
    }
    for step in steps {
        let outcome = step["outcome"].as_str().unwrap_or("");
        if !["passed", "FAILED", "not run"].contains(&outcome) || !step["name"].is_string() {
            return fail(&format!("step {step}"));
        }
    }
    for group in ["parity", "bench"] {
        if !steps.iter().any(|s| s["group"] == group) {
            return fail(&format!("no {group} step"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finished(success: Option<bool>, output: &str) -> Finished {
        Finished {
            success,
            output: output.to_owned(),
            seconds: 1.5,
        }
    }

    #[test]
    fn bit_counts_survive_the_trip_through_a_test_log() {
        // The text rlgrad_cuda::bits_line writes (its test pins it too).
        assert_eq!(
            parse_bits_line("rlgrad-bits: compared 12345, differing 0"),
            Some((12_345, 0))
        );
        assert_eq!(
            parse_bits_line("  rlgrad-bits: compared 7, differing 2\r"),
            Some((7, 2))
        );
        assert_eq!(
            parse_bits_line("rlgrad-bits: compared x, differing 2"),
            None
        );
        assert_eq!(parse_bits_line("test foo ... ok"), None);
        // What libtest makes of it (`--exact t --nocapture`, seen on the first GPU run).
        assert_eq!(
            parse_bits_line("test t ... rlgrad-bits: compared 5, differing 0"),
            Some((5, 0))
        );
    }

    #[test]
    fn a_step_passes_fails_times_out_or_did_not_run() {
        let passed = judge(
            "kernels",
            "t",
            &finished(
                Some(true),
                "running 1 test\ntest t ... rlgrad-bits: compared 10, differing 0\nrlgrad-bits: compared 5, differing 0\nok",
            ),
        );
        assert_eq!(
            (passed.outcome, passed.bits),
            (Outcome::Passed, Some((15, 0)))
        );
        let skipped = judge(
            "kernels",
            "t",
            &finished(
                Some(true),
                "SKIPPED (no GPU): no CUDA driver library\nrlgrad-bits: compared 0, differing 0",
            ),
        );
        assert_eq!(skipped.outcome, Outcome::NotRun);
        assert_eq!(skipped.bits, None);
        assert_eq!(
            skipped.detail,
            vec!["SKIPPED (no GPU): no CUDA driver library"]
        );
        let failed = judge(
            "kernels",
            "t",
            &finished(
                Some(false),
                "noise\nthread 't' panicked at tests/integration/kernels.rs:9:5:\nunary: 3 of 35 elements differ\nrlgrad-bits: compared 35, differing 3",
            ),
        );
        assert_eq!(failed.outcome, Outcome::Failed);
        assert_eq!(failed.bits, Some((35, 3)));
        assert!(
            failed.detail[0].contains("panicked at"),
            "{:?}",
            failed.detail
        );
        let hung = judge("kernels", "t", &finished(None, "still going"));
        assert_eq!(hung.outcome, Outcome::Failed);
        assert!(hung.detail[0].starts_with("timed out"));
    }

    #[test]
    fn a_child_that_hangs_is_killed_at_its_limit_and_output_is_kept() {
        let mut command = Command::new("sh");
        command.args(["-c", "echo before; sleep 30"]);
        let result = run_limited(command, Duration::from_millis(300));
        assert_eq!(result.success, None);
        assert!(result.output.contains("before"));
        assert!(result.seconds < 10.0);
        let mut command = Command::new("sh");
        command.args(["-c", "echo out; echo err >&2; exit 3"]);
        let result = run_limited(command, Duration::from_secs(30));
        assert_eq!(result.success, Some(false));
        assert!(result.output.contains("out") && result.output.contains("err"));
    }

    #[test]
    fn the_report_counts_every_step_and_checks_its_own_shape() {
        let step = |group: &str, outcome, bits| Step {
            group: group.to_owned(),
            name: "x".to_owned(),
            outcome,
            seconds: 0.5,
            bits,
            detail: vec!["why".to_owned()],
        };
        let report = Report {
            generated_utc: "2026-11-25T00:00:00Z".to_owned(),
            dry_run: true,
            machine: json!({ "gpu": null, "why": "no driver" }),
            steps: vec![
                step("kernels", Outcome::Passed, Some((100, 0))),
                step("kernels", Outcome::Failed, Some((10, 2))),
                step("parity", Outcome::NotRun, None),
                step("bench", Outcome::NotRun, None),
            ],
            bench: json!({ "rows": [{
                "workload": "gae 2048x64", "bits": "same", "rlgrad_ms": 0.05,
                "gb_per_s": 100.0, "fraction_of_copy": 0.1, "torch_ms": 40.0, "jax_ms": 2.0
            }]}),
            seconds: 3.0,
        };
        let json = report.json();
        assert_eq!(check_report(&json), Ok(()));
        assert_eq!(json["summary"]["elements_compared"], 110);
        assert_eq!(json["summary"]["elements_differing"], 2);
        let md = report.markdown();
        assert!(md.contains("**1 passed, 1 failed, 2 not run.**"), "{md}");
        assert!(md.contains("| gae 2048x64 | same | 0.0500 |"), "{md}");
        assert!(md.contains("40.00x"), "the best peer is JAX's 2 ms: {md}");
        let mut broken = json.clone();
        broken["summary"]["passed"] = json!(7);
        assert!(check_report(&broken).is_err());
        broken = json.clone();
        broken["steps"]
            .as_array_mut()
            .unwrap()
            .retain(|s| s["group"] != "bench");
        broken["summary"]["not_run"] = json!(1);
        assert!(check_report(&broken).unwrap_err().contains("no bench step"));
    }

    #[cfg(unix)]
    #[test]
    fn the_run_script_hands_its_options_to_the_runner_or_says_why_it_cannot() {
        let dir = std::env::temp_dir().join(format!("rlgrad-run-script-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (script, runner) = (dir.join("run"), dir.join("xtask"));
        std::fs::write(&script, RUN_SCRIPT).unwrap();
        make_executable(&script).unwrap();
        // A stand-in runner that prints its arguments.
        std::fs::write(&runner, "#!/bin/sh\necho \"args: $*\"\n").unwrap();
        make_executable(&runner).unwrap();
        let output = Command::new(&script)
            .args(["--dry-run", "--quick"])
            .env("OUT", "/tmp/report")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let here = dir.canonicalize().unwrap();
        assert_eq!(
            stdout.trim(),
            format!(
                "args: gpu-run --bundle {} --out /tmp/report --dry-run --quick",
                here.display()
            )
        );
        // A runner that cannot start: the script says so and fails.
        std::fs::write(
            &runner,
            "#!/bin/sh\necho 'GLIBC_2.34 not found' >&2\nexit 127\n",
        )
        .unwrap();
        let output = Command::new(&script).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success());
        assert!(
            stderr.contains("do not start") && stderr.contains("GLIBC_2.34"),
            "{stderr}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn options_parse_and_refuse_what_they_do_not_know() {
        let args = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        let options = parse_options(&args(&[
            "--bundle",
            "b",
            "--out",
            "o",
            "--dry-run",
            "--budget",
            "300",
        ]))
        .unwrap();
        assert_eq!(options.bundle, PathBuf::from("b"));
        assert_eq!(options.out, PathBuf::from("o"));
        assert!(options.dry_run && !options.quick);
        assert_eq!(options.budget, Duration::from_secs(300));
        assert!(parse_options(&args(&["--budget", "5"])).is_err());
        assert!(parse_options(&args(&["--out"])).is_err());
        assert!(
            parse_options(&args(&["--fast"]))
                .unwrap_err()
                .contains("--fast")
        );
    }
}
