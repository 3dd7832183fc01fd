//! `cargo xtask`: the workspace driver.
//!
//! ```text
//! cargo xtask demo                    the actor-critic trained on CartPole, curve and logs in runs/demo
//! cargo xtask test                    fmt --check, clippy -D warnings, docs, tests, MPI tests, parity, pytest,
//!                                     then test-x86 and test-arm
//! cargo xtask test-x86 [--all]        the core's unit tests (--all: all its tests) on an emulated AVX2 CPU without AVX-512
//! cargo xtask test-arm [--all]        clippy for aarch64, the core's tests (--all: and the algorithm crates') under qemu
//! cargo xtask pytest                  the Python wheel built into target/python/venv, its pytest suite
//! cargo xtask proptest [--cases N]    only the property tests, N cases each
//! cargo xtask parity [DIR] [--suite S]...
//!                                     reference vectors (default: the vendored parity/)
//! cargo xtask bench [FILTER]          the criterion benches
//! cargo xtask parity --device cuda    the suites with device kernels, on the GPU
//! cargo xtask gpu-bench [--out FILE]  rlgrad's CUDA kernels beside PyTorch on one GPU
//! cargo xtask gpu-build               the GPU bundle in gpu-bin/ (tests, bench, runner gpu-bin/run)
//! cargo xtask gpu-run [--dry-run]     what gpu-bin/run runs: everything, one report
//! cargo xtask converge                the TF guide's convergence test, plotted
//! cargo xtask interop                 checkpoints and event files against Python's readers
//! cargo xtask package [--verify]      what crates.io needs of every publishable crate
//! cargo xtask msrv                    every publishable crate checked by the MSRV toolchain
//! cargo xtask compare [--only W1,W3] [--threads 1|2|both] [--quick] [--out FILE]
//!                                     rlgrad beside the peers of ../shared/peers, as ratios
//! cargo xtask examples-compare        each example's training beside its PyTorch twin
//! cargo xtask calibrate               where a second thread starts to pay, per kernel family
//! cargo xtask gemm-peak [--isa avx2]  the GEMM on TD3's products, GFLOP/s and share of FMA peak
//! ```

mod arm;
mod compare;
mod examples;
mod gpu;
mod interop;
mod isa;
mod package;
mod python;
mod stages;
mod tools;
mod x86;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

/// A subcommand: how it is called, what it does, and what runs it.
struct Subcommand {
    /// `name [options]`, as the command list shows it.
    synopsis: &'static str,
    /// What it does, one line per line of the command list.
    about: &'static [&'static str],
    /// The options, for `cargo xtask NAME --help`; empty for a command without any.
    options: &'static str,
    run: fn(&[String]) -> Result<(), String>,
}

impl Subcommand {
    fn name(&self) -> &'static str {
        self.synopsis
            .split_whitespace()
            .next()
            .expect("every synopsis starts with the command's name")
    }

    /// What `cargo xtask NAME --help` prints.
    fn help(&self) -> String {
        let mut help = format!("usage: cargo xtask {}\n\n", self.synopsis);
        for line in self.about {
            help.push_str(line);
            help.push('\n');
        }
        if !self.options.is_empty() {
            help.push('\n');
            help.push_str(self.options);
        }
        help
    }
}

/// The column where the command list's descriptions start.
const ABOUT_COLUMN: usize = 29;

const SUBCOMMANDS: &[Subcommand] = &[
    Subcommand {
        synopsis: "demo",
        about: &[
            "trains the actor-critic on CartPole until it solves it",
            "(progress bar); learning curve, TensorBoard logs, CSV and",
            "checkpoint in runs/demo",
        ],
        options: "",
        run: |args| no_options("demo", args).and_then(|()| examples::demo()),
    },
    Subcommand {
        synopsis: "test",
        about: &[
            "cargo fmt --check, clippy -D warnings, warning-free cargo doc,",
            "cargo test, rlgrad-dist's MPI tests under mpirun -np 1..4",
            "(skipped, saying why, without MPI), parity, the Python",
            "wheel's pytest suite, then test-x86 and test-arm",
        ],
        options: "",
        run: |args| no_options("test", args).and_then(|()| test()),
    },
    Subcommand {
        synopsis: "test-x86 [--all]",
        about: &[
            "rlgrad-core's unit tests, from cargo test's build, under",
            "qemu-x86_64 -cpu max: an x86-64 CPU with AVX2 and no",
            "AVX-512, where an AVX-512 instruction on an AVX2 path is a",
            "SIGILL (an AVX-512 machine cannot tell); --all: its golden",
            "and integration tests too; without qemu-x86_64 it says",
            "what to install and skips (fails under CI=true)",
        ],
        options: "  --all       the deep run: the golden and integration tests too (about 4 minutes)\n",
        run: x86::test,
    },
    Subcommand {
        synopsis: "test-arm [--all]",
        about: &[
            "clippy -D warnings for aarch64-unknown-linux-gnu, and the",
            "core's tests and autodiff's golden run cross-built and run",
            "under qemu-aarch64 (the NEON paths, the same bits); --all:",
            "clippy on the whole workspace and the tests of returns,",
            "mask, optim and tensor too; without the cross tools it says",
            "what to install and skips (fails under CI=true)",
        ],
        options: "  --all       the deep run: every crate with kernels, the whole workspace's clippy\n",
        run: arm::test,
    },
    Subcommand {
        synopsis: "pytest",
        about: &[
            "the Python wheel (maturin, unoptimized) into target/python/venv",
            "and its pytest suite (parity, properties, bits against Rust)",
        ],
        options: "",
        run: |args| no_options("pytest", args).and_then(|()| python::pytest()),
    },
    Subcommand {
        synopsis: "proptest [--cases N]",
        about: &["only the property tests (names starting prop_), N cases each"],
        options: "",
        run: proptest,
    },
    Subcommand {
        synopsis: "parity [DIR] [--suite S] [--device cpu|cuda]",
        about: &[
            "run reference vectors (default DIR: the vendored parity/);",
            "--suite may repeat; ends with `N passed, N failed`;",
            "--device cuda runs the suites whose ops go through device",
            "kernels (returns) on GPU 0; without a GPU it says so and",
            "exits 0 (fails with RLGRAD_REQUIRE_GPU=1)",
        ],
        options: "",
        run: parity_command,
    },
    Subcommand {
        synopsis: "bench [FILTER]",
        about: &["criterion benches (results in target/criterion)"],
        options: "",
        run: bench,
    },
    Subcommand {
        synopsis: "gpu-bench [--out FILE]",
        about: &[
            "rlgrad's CUDA kernels and PyTorch's on the same GPU, one",
            "sitting: a table (GB/s, share of copy bandwidth, ratio to",
            "PyTorch) and JSON; without a GPU it says so and exits 0",
            "(fails with RLGRAD_REQUIRE_GPU=1)",
        ],
        options: "",
        run: gpu_bench,
    },
    Subcommand {
        synopsis: "gpu-build [--profile P]",
        about: &[
            "the GPU bundle in gpu-bin/: the CUDA test binaries, the",
            "NCCL and examples GPU tests, the bench, xtask and",
            "rlgrad-tools (in cargo profile P, default release), the",
            "parity vectors and the runner gpu-bin/run; prints the one",
            "command to run on a GPU machine",
        ],
        options: "  --profile P   the cargo profile (CI's dry run: test, reusing its tests)\n",
        run: gpu::build,
    },
    Subcommand {
        synopsis: "gpu-run [--dry-run] [--quick] [--budget S] [--bundle DIR] [--out DIR]",
        about: &[
            "what gpu-bin/run calls on the GPU machine: every CUDA test",
            "in its own process with RLGRAD_REQUIRE_GPU=1, parity on",
            "the GPU, the bench; never stops at a failure; writes",
            "gpu-report.md and gpu-report.json into the --out folder",
        ],
        options: "  --dry-run     no GPU expected: what needs one is reported \"not run\"\n\
                  \x20 --quick       the bench at small sizes\n\
                  \x20 --budget S    seconds for everything (default 540)\n\
                  \x20 --bundle DIR  the bundle (default: this binary's folder, else gpu-bin/)\n\
                  \x20 --out DIR     the report's folder (default $OUT, else gpu-report)\n",
        run: gpu::run,
    },
    Subcommand {
        synopsis: "gpu-facts",
        about: &[
            "one JSON line: the GPU, its driver, NVRTC and the compile",
            "target, or why there is no GPU (for gpu-run's report)",
        ],
        options: "",
        run: |args| no_options("gpu-facts", args).and_then(|()| tools::run(&["gpu-facts"])),
    },
    Subcommand {
        synopsis: "converge",
        about: &[
            "the convergence test of GD, momentum and Adam on",
            "L(x) = 2x^4 + 3x^3 + 2: outcome table, and PNG/SVG charts",
            "in target/converge/",
        ],
        options: "",
        run: |args| no_options("converge", args).and_then(|()| tools::run(&["converge"])),
    },
    Subcommand {
        synopsis: "interop",
        about: &[
            "checkpoints and event files read by Python's safetensors",
            "and tensorboard, and theirs by rlgrad (pip installs them",
            "into target/interop/venv); ends with `N passed, N failed`",
        ],
        options: "",
        run: |args| no_options("interop", args).and_then(|()| interop::run()),
    },
    Subcommand {
        synopsis: "package [--verify]",
        about: &[
            "cargo package --workspace, and what crates.io needs of each",
            "publishable crate: both license files, keywords, description,",
            "docs link, README links inside the package; --verify: the",
            "verification build, and each crate linted alone with no",
            "features, each feature and all",
        ],
        options: "",
        run: package::run,
    },
    Subcommand {
        synopsis: "msrv",
        about: &[
            "every publishable crate with all its features checked by",
            "the toolchain of its rust-version (rustup installs it when",
            "missing), in target/msrv",
        ],
        options: "",
        run: package::msrv,
    },
    Subcommand {
        synopsis: "compare [--only W1,W3] [--threads 1|2|both] [--quick] [--rounds N] [--out FILE] [--peers DIR] [-v]",
        about: &[
            "rlgrad's benches beside the peer drivers (../shared/peers),",
            "interleaved for a few rounds: a table per workload, the JSON",
            "in target/compare/latest.json, and one line per case",
            "(`W3 [2048,64] 1t: 4.80x best peer (...)`); no ratio where a",
            "side failed its float64 check",
        ],
        options: compare::OPTIONS,
        run: compare::run,
    },
    Subcommand {
        synopsis: "calibrate [--only FAMILY,...] [--quick] [--out FILE]",
        about: &[
            "per kernel family (rlgrad_core::cpu::grain), one thread against",
            "two forced to split at growing sizes: where two threads",
            "start to pay, beside the default grain; JSON in",
            "target/calibrate/latest.json",
        ],
        options: "\
  --only      families among elementwise, reduce, matmul, recurrence, batch-major,
              sequence, optim, cell (default: all)
  --quick     every other size
  --out       also write the JSON here
",
        run: calibrate,
    },
    Subcommand {
        synopsis: "gemm-peak [--isa avx512|avx2]",
        about: &[
            "rlgrad's GEMM on every product of a TD3 update (batch 100",
            "and 256) and the W6 MLP, one thread: GFLOP/s and the share",
            "of this core's measured f32 FMA peak at the ISA in use",
        ],
        options: "  --isa       cap the vector instruction set (RLGRAD_MAX_ISA)\n",
        run: gemm_peak,
    },
    Subcommand {
        synopsis: "examples-compare [--only A,B] [--threads N] [--quick] [--seed N] [--device D] [--out FILE] [--peers DIR]",
        about: &[
            "each example's training in rlgrad and in its PyTorch twin",
            "(examples/python/), one after the other at the same budget,",
            "seed and threads: environment steps per second and their",
            "ratio, JSON in target/examples-compare/latest.json",
        ],
        options: examples::OPTIONS,
        run: examples::compare,
    },
];

/// What `cargo xtask --help` prints: every subcommand, generated from [`SUBCOMMANDS`].
fn usage() -> String {
    let mut usage = "usage: cargo xtask <command> [options]\n       \
                     cargo xtask <command> --help\n\ncommands:\n"
        .to_owned();
    for command in SUBCOMMANDS {
        let mut lines = command.about.iter();
        let first = lines.next().copied().unwrap_or_default();
        if command.synopsis.len() + 2 < ABOUT_COLUMN {
            usage.push_str(&format!(
                "  {:<w$}{first}\n",
                command.synopsis,
                w = ABOUT_COLUMN - 2
            ));
        } else {
            usage.push_str(&format!(
                "  {}\n{:ABOUT_COLUMN$}{first}\n",
                command.synopsis, ""
            ));
        }
        for line in lines {
            usage.push_str(&format!("{:ABOUT_COLUMN$}{line}\n", ""));
        }
    }
    usage
}

/// `cargo xtask calibrate`: the calibration binary of `benches/`, in release.
fn calibrate(args: &[String]) -> Result<(), String> {
    let mut args = args.to_vec();
    let mut extra_out = None;
    if let Some(i) = args.iter().position(|a| a == "--out") {
        extra_out = Some(args.get(i + 1).cloned().ok_or("--out needs a value")?);
        args.drain(i..i + 2);
    }
    let latest = compare::target_dir(&root()).join("calibrate/latest.json");
    std::fs::create_dir_all(latest.parent().expect("a file in a folder"))
        .map_err(|e| format!("cannot create {}: {e}", latest.display()))?;
    let latest_arg = latest.display().to_string();
    let mut bin_args = vec!["--out", &latest_arg];
    bin_args.extend(args.iter().map(String::as_str));
    run_bench_binary("calibrate", &bin_args, &[])?;
    if let Some(out) = extra_out {
        std::fs::copy(&latest, &out).map_err(|e| format!("cannot write {out}: {e}"))?;
    }
    Ok(())
}

/// `cargo xtask gemm-peak`: the GEMM report binary of `benches/`, in release.
fn gemm_peak(args: &[String]) -> Result<(), String> {
    let isa = match args {
        [] => isa::IsaSetting::new(None)?,
        [flag, level] if flag == "--isa" => isa::IsaSetting::new(Some(level))?,
        _ => {
            return Err(format!(
                "usage: cargo xtask gemm-peak [--isa LEVEL], got {args:?}"
            ));
        }
    };
    let env: Vec<(&str, &str)> = isa
        .rlgrad_env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    run_bench_binary("gemm_peak", &[], &env)
}

/// Runs the report binary `name` of `benches/` (`src/bin/`) in release with `args`.
fn run_bench_binary(name: &str, args: &[&str], envs: &[(&str, &str)]) -> Result<(), String> {
    let mut command = vec![
        "run",
        "--release",
        "--quiet",
        "-p",
        "rlgrad-benches",
        "--bin",
        name,
        "--",
    ];
    command.extend(args);
    cargo(&command, envs)
}

/// `Ok` when a command that takes no options got none.
fn no_options(command: &str, args: &[String]) -> Result<(), String> {
    match args.first() {
        None => Ok(()),
        Some(arg) => Err(format!(
            "{command} takes no options, got `{arg}` (`cargo xtask {command} --help`)"
        )),
    }
}

/// What the command line asks for.
enum Request<'a> {
    Usage,
    Help(&'a Subcommand),
    Run(&'a Subcommand, &'a [String]),
}

/// The subcommand `args` name, and whether they ask for its help (`--help` or `-h`
/// anywhere after it: help never runs a command).
fn parse(args: &[String]) -> Result<Request<'_>, String> {
    let Some(first) = args.first() else {
        return Err(usage());
    };
    if matches!(first.as_str(), "help" | "--help" | "-h") {
        return Ok(Request::Usage);
    }
    let command = SUBCOMMANDS
        .iter()
        .find(|c| c.name() == first)
        .ok_or_else(|| format!("unknown command `{first}`\n\n{}", usage()))?;
    let rest = &args[1..];
    if rest.iter().any(|a| a == "--help" || a == "-h") {
        Ok(Request::Help(command))
    } else {
        Ok(Request::Run(command, rest))
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = parse(&args).and_then(|request| match request {
        Request::Usage => {
            print!("{}", usage());
            Ok(())
        }
        Request::Help(command) => {
            print!("{}", command.help());
            Ok(())
        }
        Request::Run(command, rest) => (command.run)(rest),
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("xtask: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root (the parent of this crate).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// An executable a cargo build wrote, as its JSON messages name it.
#[derive(Debug)]
struct Built {
    /// The folder of its package's manifest, relative to the workspace root
    /// (`crates/cuda`).
    package_dir: PathBuf,
    /// `test` for a test harness (of a library, binary or integration test), else the
    /// target's kind (`bin`, `example`).
    kind: String,
    /// The target's name (`golden`, `ppo_dist`; the crate name for a library's tests).
    name: String,
    path: PathBuf,
}

/// `cargo ARGS` (the cargo that runs xtask) in the workspace root, announced on stderr.
fn cargo_command(args: &[&str]) -> Command {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    eprintln!("xtask: cargo {}", args.join(" "));
    let mut command = Command::new(cargo);
    command.args(args).current_dir(root());
    command
}

/// Runs `cargo ARGS --message-format=json` (`test ... --no-run`, or `build ...`) and
/// returns every executable it made: test harnesses, examples and binaries.
fn built_executables(args: &[&str]) -> Result<Vec<Built>, String> {
    let output = cargo_command(args)
        .arg("--message-format=json")
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !output.status.success() {
        return Err(format!("`cargo {}` failed", args.join(" ")));
    }
    let root = root();
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|m| {
            let path = PathBuf::from(m["executable"].as_str()?);
            let manifest = Path::new(m["manifest_path"].as_str()?);
            let package_dir = manifest.parent()?.strip_prefix(&root).ok()?.to_path_buf();
            let kind = if m["profile"]["test"] == true {
                "test"
            } else {
                m["target"]["kind"][0].as_str().unwrap_or("bin")
            };
            Some(Built {
                package_dir,
                kind: kind.to_owned(),
                name: m["target"]["name"].as_str().unwrap_or("lib").to_owned(),
                path,
            })
        })
        .collect())
}

/// The test harness `name` of the package in `package_dir` among `built`.
fn find_test<'a>(built: &'a [Built], package_dir: &str, name: &str) -> Result<&'a Path, String> {
    built
        .iter()
        .find(|b| b.kind == "test" && b.package_dir == Path::new(package_dir) && b.name == name)
        .map(|b| b.path.as_path())
        .ok_or_else(|| format!("cargo built no test `{name}` of {package_dir}"))
}

/// The executable `cargo ARGS` built for the binary or example `name`.
fn built_binary(args: &[&str], name: &str) -> Result<PathBuf, String> {
    built_executables(args)?
        .into_iter()
        .find(|b| b.kind != "test" && b.name == name)
        .map(|b| b.path)
        .ok_or_else(|| format!("`cargo {}` built no `{name}`", args.join(" ")))
}

fn cargo(args: &[&str], envs: &[(&str, &str)]) -> Result<(), String> {
    let status = cargo_command(args)
        .envs(envs.iter().copied())
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`cargo {}` failed ({status})", args.join(" ")))
    }
}

fn test() -> Result<(), String> {
    let mut stages = stages::Stages::default();
    stages.run("fmt", || cargo(&["fmt", "--all", "--check"], &[]))?;
    let mpi = mpi_missing();
    let selection = workspace_selection(&mpi);
    stages.run("clippy", || {
        let mut clippy = vec!["clippy"];
        clippy.extend(selection);
        clippy.extend(["--all-targets", "--", "-D", "warnings"]);
        cargo(&clippy, &[])
    })?;
    // Docs without warnings, in the selection's feature set (every feature there is, as on
    // docs.rs), so that the dependencies' metadata is clippy's; each crate's docs with each
    // feature alone are `cargo xtask package --verify`'s.
    stages.run("doc", || {
        let mut doc = vec!["doc", "--no-deps"];
        doc.extend(selection);
        cargo(&doc, &[("RUSTDOCFLAGS", "-D warnings")])
    })?;
    stages.run("cargo test", || {
        // One selection for every crate, the CUDA crate's tests included (they skip without
        // a GPU): each library is built once, with the features the whole workspace's
        // tests unify to, which the tools binary and the GPU bundle's build reuse.
        let mut test = vec!["test"];
        test.extend(selection);
        cargo(&test, &[])?;
        eprintln!("xtask: the CUDA tests above ran where this GPU allows:");
        tools::run(&["gpu-facts"])
    })?;
    stages.run("mpi", || mpi_tests(&mpi))?;
    stages.run("parity", || tools::run(&["parity", "--implemented"]))?;
    stages.run("pytest", python::pytest)?;
    // The tests' executables again, emulated without AVX-512: nothing to build, about a
    // minute.
    stages.run("test-x86", || x86::run(&selection, false))?;
    // Last: a cross build and emulated tests, the slowest step.
    stages.run("test-arm", || arm::test(&[]))?;
    eprint!("{}", stages.table());
    Ok(())
}

fn proptest(args: &[String]) -> Result<(), String> {
    let cases = match args {
        [] => None,
        [flag, n] if flag == "--cases" => Some(
            n.parse::<u32>()
                .map_err(|_| format!("--cases needs a positive integer, got `{n}`"))?,
        ),
        _ => {
            return Err(format!(
                "usage: cargo xtask proptest [--cases N], got {args:?}"
            ));
        }
    };
    let cases = cases.map(|n| n.to_string());
    // A deep run's many cases pay for an optimized build of its own (the test profile's
    // is unoptimized, sized for CI's cases).
    let envs: Vec<(&str, &str)> = cases
        .iter()
        .flat_map(|n| {
            [
                ("PROPTEST_CASES", n.as_str()),
                ("CARGO_PROFILE_TEST_OPT_LEVEL", "1"),
            ]
        })
        .collect();
    let mut args = vec!["test"];
    args.extend(workspace_selection(&mpi_missing()));
    args.extend(["--tests", "prop_"]);
    cargo(&args, &envs)
}

/// Why the MPI backend of rlgrad-dist cannot be built or run here (`None` when it can):
/// rsmpi's build needs `mpicc` and libclang, the tests need `mpirun`.
fn mpi_missing() -> Option<String> {
    tool_missing("mpicc", "--showme:version").or_else(mpirun_missing)
}

/// Why `mpirun` cannot run here (`None` when it can): what running MPI programs needs.
fn mpirun_missing() -> Option<String> {
    tool_missing("mpirun", "--version")
}

/// Why `tool arg` does not run here, naming the Debian packages of MPI.
fn tool_missing(tool: &str, arg: &str) -> Option<String> {
    let found = Command::new(tool)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success());
    (!found).then(|| {
        format!(
            "`{tool}` not found (Debian: apt-get install libopenmpi-dev openmpi-bin libclang-dev)"
        )
    })
}

/// The one selection of every build `cargo xtask test` makes for this machine (clippy,
/// the tests, the MPI and NCCL tests, the ppo_dist example, the GPU bundle's NCCL tests):
/// the whole workspace with rlgrad-dist's `nccl`, and its `mpi` (with the examples') where
/// MPI is here. One selection and one feature set, so that each crate is compiled once.
fn workspace_selection(mpi_missing: &Option<String>) -> [&'static str; 3] {
    let features = match mpi_missing {
        None => "rlgrad-dist/mpi,rlgrad-dist/nccl,rlgrad-examples/mpi",
        Some(_) => "rlgrad-dist/nccl",
    };
    ["--workspace", "--features", features]
}

/// The world sizes the MPI tests run at; more ranks than cores is fine (--oversubscribe).
const MPI_WORLD_SIZES: [usize; 4] = [1, 2, 3, 4];

/// rlgrad-dist's MPI backend, from the build of the tests ([`workspace_selection`], which
/// also built and ran the NCCL tests: without a GPU they skip, and the test stage says
/// why): the MPI test binaries (`mpi`, and `mpi_timeout` once per collective: a rank that
/// skips it) under `mpirun -np W` for each of [`MPI_WORLD_SIZES`]; and the ppo_dist
/// example's fingerprint, which must be the same for all of them and for one process with
/// `--accumulate 4`. Skipped, saying why, where MPI is missing.
fn mpi_tests(mpi_missing: &Option<String>) -> Result<(), String> {
    if let Some(why) = mpi_missing {
        println!("xtask: MPI tests of rlgrad-dist skipped: {why}");
        return Ok(());
    }
    let selection = workspace_selection(mpi_missing);
    let mut tests = vec!["test", "--no-run"];
    tests.extend(selection);
    let built = built_executables(&tests)?;
    // Each test with the arguments of its runs: mpi_timeout's names the collective its
    // last rank skips (at W = 1, where no rank can be missing, it skips the fault).
    let tests: [(&str, &[&str]); 2] = [
        ("mpi", &[]),
        (
            "mpi_timeout",
            &["barrier", "all_gather", "all_to_all", "broadcast"],
        ),
    ];
    for (test, collectives) in tests {
        let binary = find_test(&built, "crates/distributed", test)?;
        let runs: Vec<Vec<&str>> = if collectives.is_empty() {
            vec![Vec::new()]
        } else {
            collectives.iter().map(|c| vec![*c]).collect()
        };
        for world in MPI_WORLD_SIZES {
            // A world size's runs side by side: mpi_timeout's ranks mostly wait out its
            // timeout, polling every millisecond, so its four collectives' runs at once
            // cost the time of one.
            let children: Vec<_> = (runs.iter())
                .map(|args| {
                    let child = mpirun(world, binary, args)
                        .spawn()
                        .map_err(|e| format!("cannot run mpirun: {e}"));
                    (args, child)
                })
                .collect();
            // Every run is waited for before the first failure is reported.
            let outcomes: Vec<_> = (children.into_iter())
                .map(|(args, child)| {
                    let status = child?
                        .wait()
                        .map_err(|e| format!("waiting for mpirun: {e}"))?;
                    if status.success() {
                        Ok(())
                    } else {
                        Err(format!(
                            "rlgrad-dist's `{test}` test {args:?} failed under mpirun -np \
                             {world} ({status})"
                        ))
                    }
                })
                .collect();
            outcomes.into_iter().collect::<Result<(), String>>()?;
        }
    }
    // The ppo_dist example, a short run per world size: one fingerprint for all of them.
    let mut build = vec!["build", "--profile", "test"];
    build.extend(selection);
    build.extend(["--example", "ppo_dist"]);
    let example = built_binary(&build, "ppo_dist")?;
    let args = ["--updates", "3", "--quiet"];
    let mut runs: Vec<(String, Command)> = MPI_WORLD_SIZES
        .iter()
        .map(|&world| {
            (
                format!("mpirun -np {world}"),
                mpirun(world, &example, &args),
            )
        })
        .collect();
    // One process, its microbatches in 4 groups as 4 workers would own them.
    let mut accumulate = Command::new(&example);
    accumulate.args(args).args(["--accumulate", "4"]);
    runs.push(("--accumulate 4".to_owned(), accumulate));
    let mut prints = Vec::new();
    for (name, mut command) in runs {
        let output = command
            .output()
            .map_err(|e| format!("cannot run ppo_dist ({name}): {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "ppo_dist failed with {name} ({}):\n{}",
                output.status,
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let print = stdout
            .lines()
            .find_map(|l| l.strip_prefix("params fingerprint: "))
            .ok_or_else(|| format!("ppo_dist with {name} printed no fingerprint: {stdout}"))?
            .to_owned();
        eprintln!("xtask: ppo_dist with {name}: params fingerprint {print}");
        prints.push((name, print));
    }
    if prints.iter().any(|(_, p)| *p != prints[0].1) {
        return Err(format!(
            "ppo_dist's parameters differ across world sizes and --accumulate: {prints:?}"
        ));
    }
    println!(
        "xtask: ppo_dist under mpirun -np {MPI_WORLD_SIZES:?} and with --accumulate 4: one \
         params fingerprint, {}",
        prints[0].1
    );
    Ok(())
}

/// `mpirun -np world program args` with what every run here needs: `--oversubscribe`
/// (more ranks than cores), a timeout, and `--allow-run-as-root` as root (CI), which Open
/// MPI refuses otherwise.
fn mpirun(world: usize, program: &Path, args: &[&str]) -> Command {
    let root_user = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    let mut command = Command::new("mpirun");
    if root_user {
        command.arg("--allow-run-as-root");
    }
    command
        .args([
            "--oversubscribe",
            "--timeout",
            "300",
            "-np",
            &world.to_string(),
        ])
        .arg(program)
        .args(args)
        .current_dir(root());
    eprintln!(
        "xtask: mpirun -np {world} {} {}",
        program.display(),
        args.join(" ")
    );
    command
}

/// `cargo xtask parity`: `rlgrad-tools parity` with the same arguments.
fn parity_command(args: &[String]) -> Result<(), String> {
    let mut tool_args = vec!["parity"];
    tool_args.extend(args.iter().map(String::as_str));
    tools::run(&tool_args)
}

fn bench(args: &[String]) -> Result<(), String> {
    let mut cargo_args = vec!["bench", "--package", "rlgrad-benches"];
    if let Some(filter) = args.first() {
        cargo_args.extend(["--", filter.as_str()]);
    }
    cargo(&cargo_args, &[])
}

fn gpu_bench(args: &[String]) -> Result<(), String> {
    let mut cargo_args = vec![
        "run",
        "--release",
        "-p",
        "rlgrad-benches",
        "--bin",
        "rlgrad-gpu-bench",
        "--",
    ];
    cargo_args.extend(args.iter().map(String::as_str));
    cargo(&cargo_args, &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    #[test]
    fn every_subcommand_answers_help_without_running() {
        for command in SUBCOMMANDS {
            for flag in ["--help", "-h"] {
                let line = args(&[command.name(), flag]);
                assert!(
                    matches!(parse(&line), Ok(Request::Help(c)) if c.name() == command.name()),
                    "`cargo xtask {} {flag}` does not ask for help",
                    command.name()
                );
            }
            // Even after other options.
            let line = args(&[command.name(), "--quick", "--help"]);
            assert!(matches!(parse(&line), Ok(Request::Help(_))));
            let help = command.help();
            assert!(
                help.starts_with(&format!("usage: cargo xtask {}", command.name())),
                "{help}"
            );
        }
    }

    #[test]
    fn the_command_list_names_every_subcommand() {
        let usage = usage();
        for command in SUBCOMMANDS {
            assert!(
                usage.contains(&format!("\n  {}", command.synopsis)),
                "`{}` missing from:\n{usage}",
                command.name()
            );
        }
        assert!(usage.contains("examples-compare"));
        for words in [&["--help"][..], &["-h"], &["help"]] {
            assert!(matches!(parse(&args(words)), Ok(Request::Usage)));
        }
        assert!(parse(&[]).is_err());
        let err = parse(&args(&["demoo"])).err().unwrap();
        assert!(err.starts_with("unknown command `demoo`"), "{err}");
    }

    /// The CUDA test binaries and the bench are built here and run on a GPU machine
    /// (`gpu-build`): a path of this machine compiled into them would not exist there.
    #[test]
    fn what_runs_on_the_gpu_machine_opens_no_path_of_the_build_machine() {
        let mut folders = vec![
            root().join("crates/cuda/tests"),
            root().join("benches/src/bin"),
        ];
        let mut checked = 0;
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    checked += 1;
                    let text = std::fs::read_to_string(&path).unwrap();
                    assert!(
                        !text.contains("CARGO_MANIFEST_DIR"),
                        "{} bakes in a path of the build machine: embed the file \
                         (include_str!/include_bytes!) instead",
                        path.display()
                    );
                }
            }
        }
        assert!(
            checked >= 5,
            "only {checked} files found under crates/cuda/tests and benches/src/bin"
        );
    }

    #[test]
    fn commands_without_options_refuse_them() {
        let line = args(&["demo", "--seed", "3"]);
        let Ok(Request::Run(command, rest)) = parse(&line) else {
            panic!("demo with an option is a run request");
        };
        let err = (command.run)(rest).unwrap_err();
        assert_eq!(
            err,
            "demo takes no options, got `--seed` (`cargo xtask demo --help`)"
        );
    }
}
