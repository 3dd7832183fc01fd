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
    /// Prints `text` and counts its PASS and FAIL lines.
    fn read(&mut self, text: &str) {
        print!("{text}");
        self.passed += text.lines().filter(|l| l.starts_with("PASS ")).count();
        self.failed += text.lines().filter(|l| l.starts_with("FAIL ")).count();
    }

    fn fail(&mut self, name: &str, why: impl std::fmt::Display) {
        self.failed += 1;
        println!("FAIL {name}: {why}");
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
    let script = crate::root().join("xtask/src/interop.py");
    let output = Command::new(&python)
        .arg(&script)
        .arg(&work)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    let mut tally = Tally::default();
    tally.read(&String::from_utf8_lossy(&output.stdout));
    if !output.status.success() {
        eprint!("{}", String::from_utf8_lossy(&output.stderr));
        tally.fail("python side ran to the end", output.status);
    } else {
        let checked = crate::tools::command()?
            .args(["interop-check", &work_arg])
            .output()
            .map_err(|e| format!("cannot run {}: {e}", crate::tools::BINARY))?;
        tally.read(&String::from_utf8_lossy(&checked.stdout));
        if !checked.status.success() && !String::from_utf8_lossy(&checked.stdout).contains("FAIL ")
        {
            eprint!("{}", String::from_utf8_lossy(&checked.stderr));
            tally.fail("rlgrad's checks of Python's files ran", checked.status);
        }
    }
    println!("interop: {} passed, {} failed", tally.passed, tally.failed);
    if tally.failed == 0 {
        Ok(())
    } else {
        Err(format!("{} interop checks failed", tally.failed))
    }
}
