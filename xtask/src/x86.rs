//! `cargo xtask test-x86`: rlgrad-core's tests on an x86-64 CPU with AVX2 and FMA but no
//! AVX-512, the one `qemu-x86_64 -cpu max` emulates. The kernels' run-time detection picks
//! AVX2 there, and any AVX-512 instruction left on an AVX2 path is an illegal instruction
//! (SIGILL), as on such a real CPU. On an AVX-512 machine, such as CI's, the tests of the
//! AVX2 paths cannot see one: 1d235e3 ran the AVX-512 transpose on the AVX2 path and
//! passed there (9d6456c fixed it).
//!
//! The test executables are the ones `cargo test` built for this host, in the selection of
//! `cargo xtask test`, so nothing is rebuilt; they run from the crate's folder, as cargo
//! runs them.

use std::path::Path;
use std::process::{Command, ExitStatus};
use std::time::Instant;

/// The emulator (Debian `qemu-user`, 7.2 or later: AVX2 came to its x86 emulation in 7.2).
const QEMU: &str = "qemu-x86_64";
/// QEMU's CPU model with every feature its emulation has: AVX2 and FMA, no AVX-512.
const CPU_MODEL: &str = "max";
/// What to install where the emulator is missing.
const INSTALL: &str = "Debian: apt-get install qemu-user";
/// The crate whose tests run: the only library with instruction-set code.
const PACKAGE_DIR: &str = "crates/core";

/// The core's unit tests: their test target's name, and what messages call them.
const UNIT: (&str, &str) = ("rlgrad_core", "unit tests");

/// CI's run, about a minute under emulation on 2 cores: the core's unit tests. An
/// AVX-512 instruction can reach an AVX2 path only through the explicit intrinsics and
/// `target_feature` functions (the compiler emits none of its own into an AVX2 function),
/// and those (the GEMM's micro-kernels and register transposes, the lines' transposes,
/// the segment sums) have unit tests that run every version the CPU has. The GEMM's
/// is most of the minute; the other tests run beside it on the second core.
const CI_TESTS: [(&str, &str); 1] = [UNIT];

/// The deep run (`--all`, about four minutes): also the golden test (every kernel family
/// at SSE2 and AVX2, twice as long as the unit tests) and the integration tests.
const ALL_TESTS: [(&str, &str); 3] = [
    UNIT,
    ("golden", "golden test"),
    ("integration", "integration tests"),
];

/// `cargo xtask test-x86 [--all]`, in the selection of `cargo xtask test`.
pub fn test(args: &[String]) -> Result<(), String> {
    let all = match args {
        [] => false,
        [flag] if flag == "--all" => true,
        _ => return Err(format!("usage: cargo xtask test-x86 [--all], got {args:?}")),
    };
    run(&crate::workspace_selection(&crate::mpi_missing()), all)
}

/// Runs [`CI_TESTS`] (`all`: [`ALL_TESTS`]) under the emulator, from the build of
/// `cargo test SELECTION`. Skipped, saying why, on a host other than x86-64 Linux, and
/// without the emulator (which fails under `CI=true`).
pub fn run(selection: &[&str], all: bool) -> Result<(), String> {
    if !cfg!(all(target_arch = "x86_64", target_os = "linux")) {
        println!(
            "xtask: x86 tests without AVX-512 skipped: this host is not x86-64 Linux (they \
             run its own test builds under {QEMU})"
        );
        return Ok(());
    }
    let runs = Command::new(QEMU)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !runs {
        let why = format!("`{QEMU}` not found (install: {INSTALL})");
        if std::env::var("CI").is_ok_and(|ci| ci == "true") {
            return Err(format!("the x86 tests without AVX-512 cannot run: {why}"));
        }
        println!("xtask: x86 tests without AVX-512 skipped: {why}");
        return Ok(());
    }
    let mut args = vec!["test", "--no-run"];
    args.extend(selection);
    let built = crate::built_executables(&args)?;
    let isa = built
        .iter()
        .find(|b| b.kind == "example" && b.package_dir == Path::new(PACKAGE_DIR) && b.name == "isa")
        .ok_or_else(|| format!("cargo built no example `isa` of {PACKAGE_DIR}"))?;
    check_emulated_cpu(&isa.path)?;
    let tests: &[(&str, &str)] = if all { &ALL_TESTS } else { &CI_TESTS };
    for &(name, label) in tests {
        let binary = crate::find_test(&built, PACKAGE_DIR, name)?;
        let started = Instant::now();
        let status = emulated(binary)
            .status()
            .map_err(|e| format!("cannot run {QEMU}: {e}"))?;
        if !status.success() {
            return Err(failure(label, binary, status));
        }
        eprintln!(
            "xtask: rlgrad-core's {label} passed under {QEMU} -cpu {CPU_MODEL} in {:.1} s",
            started.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// `qemu-x86_64 -cpu max PROGRAM`, from the core's folder, with no `RLGRAD_MAX_ISA`: a
/// cap would keep the kernels off the AVX2 paths this is for.
fn emulated(program: &Path) -> Command {
    eprintln!("xtask: {QEMU} -cpu {CPU_MODEL} {}", program.display());
    let mut command = Command::new(QEMU);
    command
        .args(["-cpu", CPU_MODEL])
        .arg(program)
        .current_dir(crate::root().join(PACKAGE_DIR))
        .env_remove("RLGRAD_MAX_ISA");
    command
}

/// `Ok` when the core's `isa` example finds AVX2 as the emulated CPU's widest level. An
/// emulator without AVX2 (QEMU before 7.2) would run the baseline paths only, and one
/// with AVX-512 the AVX-512 paths: either way the tests would pass having checked nothing.
fn check_emulated_cpu(isa_example: &Path) -> Result<(), String> {
    let output = emulated(isa_example)
        .output()
        .map_err(|e| format!("cannot run {QEMU}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let cpu = stdout.lines().find_map(|l| l.strip_prefix("cpu "));
    match cpu {
        Some("avx2") => Ok(()),
        Some(level) => Err(format!(
            "{QEMU} -cpu {CPU_MODEL} emulates a CPU whose widest level is {level}, so the \
             tests would not run the AVX2 paths without AVX-512 (Debian's qemu-user 7.2 \
             emulates AVX2 and no AVX-512)"
        )),
        None => Err(format!(
            "the `isa` example failed under {QEMU} -cpu {CPU_MODEL} ({}): {stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        )),
    }
}

/// What a failed run of the `tests` in `binary` says: an illegal instruction is named for
/// what it means here.
fn failure(tests: &str, binary: &Path, status: ExitStatus) -> String {
    if illegal_instruction(status) {
        format!(
            "rlgrad-core's {tests} died of SIGILL under {QEMU} -cpu {CPU_MODEL} (AVX2, \
             no AVX-512): an AVX2 path ran an AVX-512 instruction (to find the test: cd \
             {PACKAGE_DIR} && {QEMU} -cpu {CPU_MODEL} {} --test-threads 1)",
            binary.display()
        )
    } else {
        format!("rlgrad-core's {tests} failed under {QEMU} -cpu {CPU_MODEL} ({status})")
    }
}

#[cfg(unix)]
fn illegal_instruction(status: ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(libc::SIGILL)
}

#[cfg(not(unix))]
fn illegal_instruction(_: ExitStatus) -> bool {
    false
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    #[test]
    fn an_illegal_instruction_is_named_for_what_it_means_here() {
        let binary = Path::new("target/debug/deps/rlgrad_core-0");
        let killed = failure("unit tests", binary, ExitStatus::from_raw(libc::SIGILL));
        assert!(
            killed.contains("an AVX2 path ran an AVX-512 instruction")
                && killed.contains("rlgrad_core-0 --test-threads 1"),
            "{killed}"
        );
        // Exit code 101: a test failed.
        let failed = failure("unit tests", binary, ExitStatus::from_raw(101 << 8));
        assert!(!failed.contains("SIGILL"), "{failed}");
    }
}
