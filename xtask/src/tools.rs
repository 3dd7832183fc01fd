//! The verbs that run rlgrad's own code (parity, interop's rlgrad side, converge, the
//! GPU facts) do it through `rlgrad-tools` (`tools/`), a binary built on demand: this
//! driver depends on no rlgrad crate, so `cargo xtask` starts in seconds on a fresh clone.
//!
//! It is built in the `test` profile, the one `cargo xtask test` builds the workspace's
//! tests in, so that after the tests it costs a link, not a second build of the crates.

use std::path::PathBuf;
use std::process::Command;

/// The cargo profile `rlgrad-tools` is built in, and the folder of `target/` it lands in.
const PROFILE: (&str, &str) = ("test", "debug");

/// The name of the tools binary, in `target/debug/` and in the GPU bundle.
pub const BINARY: &str = "rlgrad-tools";

/// Builds `rlgrad-tools` (quietly when up to date) and returns a command that runs it.
pub fn command() -> Result<Command, String> {
    crate::cargo(
        &["build", "--quiet", "--profile", PROFILE.0, "-p", BINARY],
        &[],
    )?;
    Ok(Command::new(path()))
}

/// Where [`command`] builds the binary.
pub fn path() -> PathBuf {
    crate::compare::target_dir(&crate::root())
        .join(PROFILE.1)
        .join(BINARY)
}

/// Runs `rlgrad-tools ARGS` (building it first), its output going to this process's.
pub fn run(args: &[&str]) -> Result<(), String> {
    let status = command()?
        .args(args)
        .current_dir(crate::root())
        .status()
        .map_err(|e| format!("cannot run {BINARY}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("`{BINARY} {}` failed ({status})", args.join(" ")))
    }
}
