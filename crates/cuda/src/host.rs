//! The host emulations of the kernels for the unit tests: a kernel family's own source
//! compiled for the host by a C++20 compiler under `tests/host_device.hpp` (a block's
//! threads are fibers of one host thread, `__syncthreads` a switch to the next), driven
//! by a `tests/host_*.cpp` main that reads cases on stdin and prints the outputs' bits.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// A host emulation, built.
pub(crate) struct Emulator {
    name: &'static str,
    binary: PathBuf,
    _dir: tempfile::TempDir,
}

impl Emulator {
    /// `main` (`("host_gemm.cpp", text)`) and the family source `family`
    /// (`("matmul.cu", text)`) compiled with the headers; `None`, saying why, without a
    /// compiler that can build C++20 (an error in the emulation's own files fails).
    pub(crate) fn build(main: (&'static str, &str), family: (&'static str, &str)) -> Option<Self> {
        let compiler = std::env::var("CXX").unwrap_or_else(|_| "c++".to_owned());
        let dir = tempfile::tempdir().unwrap();
        for (file, text) in [
            main,
            family,
            ("host_device.hpp", include_str!("../tests/host_device.hpp")),
            ("math.cuh", include_str!("cuda/math.cuh")),
            ("common.cuh", include_str!("cuda/common.cuh")),
        ] {
            std::fs::write(dir.path().join(file), text).unwrap();
        }
        let name = main.0;
        let binary = dir.path().join(name.trim_end_matches(".cpp"));
        let built = Command::new(&compiler)
            .args([
                "-std=c++20",
                "-O1",
                "-ffp-contract=off",
                "-fno-fast-math",
                "-fno-strict-aliasing",
                "-o",
            ])
            .arg(&binary)
            .arg(dir.path().join(name))
            .output();
        match built {
            Ok(out) if out.status.success() => {}
            Ok(out) => {
                let why = String::from_utf8_lossy(&out.stderr);
                assert!(
                    ![name, family.0, "host_device.hpp"]
                        .iter()
                        .any(|file| why.contains(file)),
                    "`{compiler}` failed on the host emulation:\n{why}"
                );
                println!("SKIPPED: `{compiler}` cannot build C++20 here:\n{why}");
                return None;
            }
            Err(e) => {
                println!("SKIPPED: no C++ compiler `{compiler}` ({e})");
                return None;
            }
        }
        Some(Self {
            name,
            binary,
            _dir: dir,
        })
    }

    /// Runs the emulation on `input`; its standard output.
    pub(crate) fn run(&self, input: String) -> String {
        let mut child = Command::new(&self.binary)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
        let output = child.wait_with_output().unwrap();
        writer.join().unwrap().unwrap();
        assert!(output.status.success(), "{}: {}", self.name, output.status);
        String::from_utf8(output.stdout).unwrap()
    }
}
