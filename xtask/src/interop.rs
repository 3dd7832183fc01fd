//! `cargo xtask interop`: rlgrad's checkpoints and event files against the Python
//! packages people open them with, both ways.
//!
//! 1. A virtual environment `target/interop/venv` gets the pinned `safetensors`, `numpy`
//!    and `tensorboard` from PyPI (once; later runs reuse it).
//! 2. rlgrad writes a checkpoint (tensors of every native dtype, Adam's state, an RNG
//!    position, metadata) and an event file (scalars, a histogram), with the expected
//!    names, dtypes, shapes, value bits, tags and steps in `rlgrad_expected.json`.
//! 3. `interop.py` reads them with `safetensors.numpy.load_file` and TensorBoard's
//!    `EventAccumulator` and checks everything; then writes a safetensors file and an event
//!    file of its own (`python_expected.json` says what they hold).
//! 4. rlgrad reads Python's files back and checks them.
//!
//! Steps 2 and 4 are `rlgrad-tools interop-write` and `interop-check` (`tools/`), so that
//! this driver depends on no rlgrad crate.
//!
//! Every check prints `PASS name` or `FAIL name: why`; the run ends with
//! `interop: N passed, N failed` and fails if any check did.

use std::process::Command;

/// The Python packages, pinned so that every machine checks against the same versions.
const REQUIREMENTS: [&str; 3] = ["safetensors==0.8.0", "numpy==2.4.6", "tensorboard==2.21.0"];

/// The counts of PASS and FAIL lines.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
}

impl Tally {
    /// Runs `command` as the check `name`: prints its output and counts its PASS and FAIL
    /// lines; when it fails without a FAIL line (a crash, a refused argument), the check
    /// `name` fails. Whether it succeeded.
    fn run(&mut self, name: &str, mut command: Command) -> Result<bool, String> {
        let output = command
            .output()
            .map_err(|e| format!("cannot run {name}: {e}"))?;
        let text = String::from_utf8_lossy(&output.stdout);
        print!("{text}");
        let failed = text.lines().filter(|l| l.starts_with("FAIL ")).count();
        self.passed += text.lines().filter(|l| l.starts_with("PASS ")).count();
        self.failed += failed;
        if !output.status.success() && failed == 0 {
            eprint!("{}", String::from_utf8_lossy(&output.stderr));
            self.failed += 1;
            println!("FAIL {name} ran to the end: {}", output.status);
        }
        Ok(output.status.success())
    }
}

pub fn run() -> Result<(), String> {
    let dir = crate::root().join("target/interop");
    let python = crate::python::venv(&dir, &REQUIREMENTS)?;
    let work = dir.join("work");
    if work.exists() {
        std::fs::remove_dir_all(&work)
            .map_err(|e| format!("cannot clear {}: {e}", work.display()))?;
    }
    std::fs::create_dir_all(&work).map_err(|e| format!("cannot create {}: {e}", work.display()))?;

    let work_arg = work.display().to_string();
    crate::tools::run(&["interop-write", &work_arg])
        .map_err(|e| format!("writing rlgrad's files: {e}"))?;
    let mut python_side = Command::new(&python);
    python_side
        .arg(crate::root().join("xtask/src/interop.py"))
        .arg(&work);
    let mut tally = Tally::default();
    // rlgrad reads Python's files only when Python wrote them all.
    if tally.run("the Python side", python_side)? {
        let mut rlgrad_side = crate::tools::command()?;
        rlgrad_side.args(["interop-check", &work_arg]);
        tally.run("rlgrad's checks of Python's files", rlgrad_side)?;
    }
    println!("interop: {} passed, {} failed", tally.passed, tally.failed);
    if tally.failed == 0 {
        Ok(())
    } else {
        Err(format!("{} interop checks failed", tally.failed))
    }
}
