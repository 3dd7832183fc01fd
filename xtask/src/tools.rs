//! The verbs that run rlgrad's own code (parity, interop's rlgrad side, converge, the
//! GPU facts) do it through `rlgrad-tools` (`tools/`), a binary built on demand: this
//! driver depends on no rlgrad crate, so `cargo xtask` starts in seconds on a fresh clone.
//!
//! It is built in the `test` profile, the one `cargo xtask test` builds the workspace's
//! tests in, so that after the tests it costs a link, not a second build of the crates.

use std::process::Command;

/// The name of the tools binary, its package's and in the GPU bundle.
pub const BINARY: &str = "rlgrad-tools";

/// Builds `rlgrad-tools` (quietly when up to date) and returns a command that runs it,
/// from the path cargo reports.
pub fn command() -> Result<Command, String> {
    let path = crate::built_binary(
        &["build", "--quiet", "--profile", "test", "-p", BINARY],
        BINARY,
    )?;
    Ok(Command::new(path))
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
