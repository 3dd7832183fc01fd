//! Python virtual environments under `target/` for the commands that run Python
//! (`cargo xtask interop`, the pytest suite of the `rlgrad` wheel), the wheel built with
//! maturin (for its tests and for `cargo xtask compare`'s Python workloads), and `cargo
//! xtask pytest`: the wheel installed into its venv, and its pytest suite.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Runs `command`; an error naming `what` when it cannot start or fails.
pub fn status(command: &mut Command, what: &str) -> Result<(), String> {
    let status = command
        .status()
        .map_err(|e| format!("cannot {what}: {e}"))?;
    status
        .success()
        .then_some(())
        .ok_or(format!("{what} failed ({status})"))
}

/// The Python of the virtual environment `dir/venv`, created with `python3 -m venv` and
/// given the pinned `requirements` from PyPI when it does not hold exactly them yet (a
/// marker file records what was installed, so later runs start at once).
pub fn venv(dir: &Path, requirements: &[&str]) -> Result<PathBuf, String> {
    let venv = dir.join("venv");
    let python = venv.join("bin/python");
    let marker = venv.join("rlgrad-requirements.txt");
    let wanted = requirements.join("\n");
    if std::fs::read_to_string(&marker).is_ok_and(|have| have == wanted) {
        return Ok(python);
    }
    eprintln!(
        "xtask: installing {} into {}",
        requirements.join(" "),
        venv.display()
    );
    status(
        Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(&venv),
        "create a Python venv with `python3 -m venv`",
    )?;
    status(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(requirements),
        "pip install the Python packages",
    )?;
    std::fs::write(&marker, wanted)
        .map_err(|e| format!("cannot write {}: {e}", marker.display()))?;
    Ok(python)
}

/// What the wheel's build and tests need, pinned.
const REQUIREMENTS: [&str; 4] = [
    "maturin==1.16.0",
    "numpy==2.4.6",
    "pytest==9.2.0",
    "hypothesis==6.170.17",
];

/// The cargo profile a wheel is compiled in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WheelProfile {
    /// `release`: for timing it (`cargo xtask compare`).
    Release,
    /// `dev`, unoptimized: for its tests, which compute the same bits (opt-levels never
    /// change rlgrad's floating-point operations) and ran as fast (5 s either way), while
    /// a cold build took 25 s against release's 77 s (2026-11-28, 2 cores). Not the test
    /// profile: for `cargo rustc`, which maturin runs, `--profile test` means a test harness.
    Unoptimized,
}

impl WheelProfile {
    fn cargo_name(self) -> &'static str {
        match self {
            WheelProfile::Release => "release",
            WheelProfile::Unoptimized => "dev",
        }
    }
}

/// The `rlgrad` wheel (abi3, in `profile`) built with maturin into
/// `target/python/wheels`, with the Python of `target/python/venv` (made or updated
/// first); returns that Python and the wheel's path.
pub fn build_wheel(profile: WheelProfile) -> Result<(PathBuf, PathBuf), String> {
    let root = crate::root();
    let dir = root.join("target/python");
    let python = venv(&dir, &REQUIREMENTS)?;
    let bin = python
        .parent()
        .ok_or("the venv's python has no directory")?;
    let wheels = dir.join("wheels");
    if wheels.exists() {
        std::fs::remove_dir_all(&wheels)
            .map_err(|e| format!("cannot clear {}: {e}", wheels.display()))?;
    }
    status(
        Command::new(bin.join("maturin"))
            .args(["build", "--profile", profile.cargo_name(), "--quiet"])
            .arg("--manifest-path")
            .arg(root.join("crates/python/Cargo.toml"))
            .arg("--out")
            .arg(&wheels)
            .arg("--interpreter")
            .arg(&python)
            .current_dir(&root),
        "build the rlgrad wheel with maturin",
    )?;
    let wheel = std::fs::read_dir(&wheels)
        .map_err(|e| format!("cannot read {}: {e}", wheels.display()))?
        .flatten()
        .map(|entry| entry.path())
        .find(|path| path.extension().is_some_and(|ext| ext == "whl"))
        .ok_or_else(|| format!("maturin wrote no wheel into {}", wheels.display()))?;
    Ok((python, wheel))
}

/// `pip install` of `wheel` (no dependencies) with `python`: into its environment, or,
/// with `target`, into that folder alone (emptied first) for a `PYTHONPATH`.
pub fn install_wheel(python: &Path, wheel: &Path, target: Option<&Path>) -> Result<(), String> {
    let mut command = Command::new(python);
    command.args([
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--force-reinstall",
        "--no-deps",
    ]);
    if let Some(target) = target {
        if target.exists() {
            std::fs::remove_dir_all(target)
                .map_err(|e| format!("cannot clear {}: {e}", target.display()))?;
        }
        command.arg("--target").arg(target);
    }
    status(command.arg(wheel), "pip install the rlgrad wheel")
}

/// `cargo xtask pytest`: builds the `rlgrad` wheel unoptimized ([`build_wheel`]),
/// installs it into `target/python/venv`, writes the Rust crates' results on the parity
/// inputs of returns, mask and optim to `target/python/rust-outputs` (the bit-equality
/// test reads them), and runs `crates/python/tests` with pytest.
pub fn pytest() -> Result<(), String> {
    let root = crate::root();
    let dir = root.join("target/python");
    let (python, wheel) = build_wheel(WheelProfile::Unoptimized)?;
    install_wheel(&python, &wheel, None)?;
    let outputs = dir.join("rust-outputs");
    let outputs_arg = outputs.display().to_string();
    crate::tools::run(&[
        "parity-outputs",
        &outputs_arg,
        "--suite",
        "returns",
        "--suite",
        "mask",
        "--suite",
        "optim",
    ])?;
    status(
        Command::new(&python)
            .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
            .arg(root.join("crates/python/tests"))
            .env("RLGRAD_RUST_OUTPUTS", &outputs)
            .env("RLGRAD_PARITY_DIR", root.join("parity"))
            .current_dir(&dir),
        "run the rlgrad pytest suite",
    )
}
