//! `cargo xtask test-arm`: the workspace on aarch64, cross-built here and its tests run
//! under `qemu-aarch64` user-mode emulation. The Cpu kernels take their NEON paths there
//! and the tests compare their bits with the canonical references, so a pass means
//! aarch64 gives the bits of x86. (Speed under emulation means nothing: it is not
//! measured.)

use std::path::Path;
use std::process::Command;

const TARGET: &str = "aarch64-unknown-linux-gnu";
/// The cross linker (Debian `gcc-aarch64-linux-gnu`).
const LINKER: &str = "aarch64-linux-gnu-gcc";
/// The emulator (Debian `qemu-user`).
const QEMU: &str = "qemu-aarch64";
/// aarch64's C library and dynamic loader for the emulator (Debian
/// `libc6-dev-arm64-cross`).
const SYSROOT: &str = "/usr/aarch64-linux-gnu";
/// What to install where something is missing.
const INSTALL: &str = "rustup target add aarch64-unknown-linux-gnu; Debian: apt-get install \
                       gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user";

/// The crates whose tests run under emulation in the deep run (`test-arm --all`): the
/// core with every kernel, the algorithm crates and tensors. Autodiff's whole suite would
/// double the cold cross build (autodiff's kernels are the core's): only its golden test
/// runs, and the rest (I/O, environments, examples) has no per-ISA code.
const ALL_CRATES: [&str; 5] = [
    "rlgrad-core",
    "rlgrad-returns",
    "rlgrad-mask",
    "rlgrad-optim",
    "rlgrad-tensor",
];

/// The CI-sized run's crates: the only crate with `target_arch` code is the core, whose
/// tests (with its golden test: every kernel family's output bits at every ISA) hold the
/// NEON paths to the canonical bits; the algorithm crates call the same kernels.
const CI_CRATES: [&str; 1] = ["rlgrad-core"];

/// `cargo xtask test-arm [--all]`: clippy for aarch64 and the tests of [`CI_CRATES`]
/// (with `--all`: the whole workspace's clippy and [`ALL_CRATES`]' tests) and autodiff's
/// golden training run under qemu (unit and integration tests: doc tests cannot run
/// cross). Where a tool is missing it fails under `CI=true` and otherwise prints why it
/// skipped.
pub fn test(args: &[String]) -> Result<(), String> {
    let all = match args {
        [] => false,
        [flag] if flag == "--all" => true,
        _ => return Err(format!("usage: cargo xtask test-arm [--all], got {args:?}")),
    };
    if let Some(missing) = missing() {
        let why = format!("{missing} (install: {INSTALL})");
        if std::env::var("CI").is_ok_and(|ci| ci == "true") {
            return Err(format!("the aarch64 tests cannot run: {why}"));
        }
        println!("xtask: aarch64 tests skipped: {why}");
        return Ok(());
    }
    let runner = format!("{QEMU} -L {SYSROOT}");
    let envs = [
        ("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER", LINKER),
        (
            "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER",
            runner.as_str(),
        ),
        // The cross build is most of this step's time; panics still name file and line.
        ("CARGO_PROFILE_TEST_DEBUG", "false"),
        // Emulated code runs about ten times slower: the host's unoptimized test build
        // would take three times as long here as building at opt-level 1 (this build is
        // the target's own, shared with no other step).
        ("CARGO_PROFILE_TEST_OPT_LEVEL", "1"),
    ];
    let crates: &[&str] = if all { &ALL_CRATES } else { &CI_CRATES };
    let mut clippy = vec!["clippy", "--all-targets", "--target", TARGET];
    if all {
        clippy.push("--workspace");
    } else {
        for name in crates {
            clippy.extend(["-p", name]);
        }
    }
    clippy.extend(["--", "-D", "warnings"]);
    crate::cargo(&clippy, &envs)?;
    let mut args = vec!["test", "--target", TARGET];
    for name in crates {
        args.extend(["-p", name]);
    }
    args.push("--tests");
    crate::cargo(&args, &envs)?;
    // The cross-ISA golden hashes of a short training run: the same bits on NEON.
    crate::cargo(
        &[
            "test",
            "--target",
            TARGET,
            "-p",
            "rlgrad-autodiff",
            "--test",
            "golden",
        ],
        &envs,
    )
}

/// What the cross build or the emulation lacks, or `None`.
fn missing() -> Option<String> {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let libdir = Command::new(rustc)
        .args(["--print", "target-libdir", "--target", TARGET])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    if !libdir.is_some_and(|dir| Path::new(&dir).is_dir()) {
        return Some(format!(
            "Rust's standard library for {TARGET} is not installed"
        ));
    }
    for tool in [LINKER, QEMU] {
        let runs = Command::new(tool)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if !runs {
            return Some(format!("`{tool}` not found"));
        }
    }
    let loader = Path::new(SYSROOT).join("lib/ld-linux-aarch64.so.1");
    if !loader.exists() {
        return Some(format!(
            "no aarch64 C library ({} is missing)",
            loader.display()
        ));
    }
    None
}
