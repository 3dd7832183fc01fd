//! The host emulations of the kernels for the unit tests: a kernel family's own source
//! compiled for the host by a C++20 compiler under `tests/host_device.hpp` (a block's
//! threads are fibers of one host thread, `__syncthreads` a switch to the next), driven
//! by a `tests/host_*.cpp` main that reads cases on stdin and prints the outputs' bits.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};

/// The compiler's switches: IEEE arithmetic as the GPU does it, no contraction into FMAs.
const FLAGS: [&str; 5] = [
    "-std=c++20",
    "-O1",
    "-ffp-contract=off",
    "-fno-fast-math",
    "-fno-strict-aliasing",
];

/// A host emulation, built.
pub(crate) struct Emulator {
    name: &'static str,
    binary: PathBuf,
}

/// Each emulation's build, or why it cannot be built, by the hash of what goes into it:
/// the f32 and f64 tests of a family (and the families sharing a main) build it once.
type Builds = BTreeMap<u64, Arc<OnceLock<Result<PathBuf, String>>>>;

impl Emulator {
    /// `main` (`("host_gemm.cpp", text)`) and the family source `family`
    /// (`("matmul.cu", text)`) compiled with the headers; `None`, saying why, without a
    /// compiler that can build C++20 (an error in the emulation's own files fails).
    ///
    /// The binary is kept beside the test executable (`host-emulations/`), named by a hash
    /// of the sources, the compiler, its version and [`FLAGS`]: built once per process,
    /// and reused by later runs until one of those changes.
    pub(crate) fn build(main: (&'static str, &str), family: (&'static str, &str)) -> Option<Self> {
        static BUILDS: Mutex<Builds> = Mutex::new(BTreeMap::new());
        let compiler = std::env::var("CXX").unwrap_or_else(|_| "c++".to_owned());
        let sources = [
            main,
            family,
            ("host_device.hpp", include_str!("../tests/host_device.hpp")),
            ("math.cuh", include_str!("cuda/math.cuh")),
            ("common.cuh", include_str!("cuda/common.cuh")),
        ];
        // FNV-1a, whose value no Rust release changes: the name outlives the process.
        let mut hash = rlgrad_core::Fingerprint::new();
        let texts = [compiler.as_str(), compiler_version(&compiler)].into_iter();
        let texts = texts
            .chain(FLAGS)
            .chain(sources.iter().flat_map(|(n, t)| [*n, *t]));
        for text in texts {
            hash.write_u64(text.len() as u64);
            hash.write(text.as_bytes());
        }
        let key = hash.finish();
        let build = Arc::clone(BUILDS.lock().unwrap().entry(key).or_default());
        match build.get_or_init(|| compile(&compiler, key, &sources)) {
            Ok(binary) => Some(Self {
                name: main.0,
                binary: binary.clone(),
            }),
            Err(why) => {
                println!("SKIPPED: {why}");
                None
            }
        }
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

/// `compiler --version`'s output, or empty where it does not run; asked once a process.
fn compiler_version(compiler: &str) -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        Command::new(compiler)
            .arg("--version")
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
            .unwrap_or_default()
    })
}

/// Builds `sources` (the main first) into the emulations' directory as the binary for
/// `key`, unless a run before built it; why not, where the compiler cannot.
fn compile(compiler: &str, key: u64, sources: &[(&'static str, &str)]) -> Result<PathBuf, String> {
    let name = sources[0].0;
    let kept = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("host-emulations")))
        .filter(|dir| std::fs::create_dir_all(dir).is_ok());
    let target = |dir: &Path| dir.join(format!("{}-{key:016x}", name.trim_end_matches(".cpp")));
    if let Some(kept) = &kept
        && target(kept).exists()
    {
        return Ok(target(kept));
    }
    // Built beside its final place, so that moving it there is a rename.
    let dir = match &kept {
        Some(kept) => tempfile::tempdir_in(kept),
        None => tempfile::tempdir(),
    }
    .unwrap();
    for (file, text) in sources {
        std::fs::write(dir.path().join(file), text).unwrap();
    }
    let built_at = target(dir.path());
    let built = Command::new(compiler)
        .args(FLAGS)
        .arg("-o")
        .arg(&built_at)
        .arg(dir.path().join(name))
        .output();
    match built {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            let why = String::from_utf8_lossy(&out.stderr);
            assert!(
                ![name, sources[1].0, "host_device.hpp"]
                    .iter()
                    .any(|file| why.contains(file)),
                "`{compiler}` failed on the host emulation:\n{why}"
            );
            return Err(format!("`{compiler}` cannot build C++20 here:\n{why}"));
        }
        Err(e) => return Err(format!("no C++ compiler `{compiler}` ({e})")),
    }
    // Moved into place whole, so that another process never runs a binary half written;
    // where there is no place to keep it, it stays in a directory this process leaves.
    match kept {
        Some(kept) if std::fs::rename(&built_at, target(&kept)).is_ok() => Ok(target(&kept)),
        _ => Ok(dir.keep().join(built_at.file_name().unwrap())),
    }
}
