//! The kernel sources and their compilation by NVRTC.
//!
//! Each kernel family is one CUDA C++ source (`src/cuda/<family>.cu`, beside the Rust file
//! of the same name), compiled at run time with `math.cuh` (the ports of `libm`) and
//! `common.cuh` in front of it. The options make every floating-point operation the IEEE
//! operation the Cpu performs: no FMA contraction (`--fmad=false`), no flush to zero,
//! IEEE division and square root.
//!
//! A device compiles a family the first time one of its kernels runs, once per process
//! and device. The PTX is cached on disk, keyed by a hash of the source, the options, the
//! NVRTC version and the target architecture, in `$RLGRAD_CUDA_CACHE`, else
//! `$XDG_CACHE_HOME/rlgrad-cuda`, else `~/.cache/rlgrad-cuda`; a cache that cannot be read
//! or written is only slower.

use std::path::PathBuf;

use cudarc::nvrtc::{CompileOptions, Ptx, compile_ptx_with_opts};
use rlgrad_core::{Error, Result};

const MATH: &str = include_str!("cuda/math.cuh");
const COMMON: &str = include_str!("cuda/common.cuh");

/// A kernel family: one source, one module per device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// `elementwise.cu`: unary, binary, select.
    Elementwise,
    /// `reduce.cu`: the canonical sum tree, min and max.
    Reduce,
    /// `copy.cu`: strided copy, gather, index_add, concat.
    Copy,
    /// `matmul.cu`: the canonical GEMM.
    Matmul,
    /// `recurrence.cu`: returns, GAE, lambda returns, n-step, V-trace.
    Recurrence,
    /// `sequence.cu`: pad, unpad, masked maps and sums.
    Sequence,
    /// `optim.cu`: the fused optimizer updates.
    Optim,
    /// `cell.cu`: the fused LSTM cell, forward and backward.
    Cell,
}

impl Family {
    /// Every family, in a fixed order.
    pub const ALL: [Family; 8] = [
        Family::Elementwise,
        Family::Reduce,
        Family::Copy,
        Family::Matmul,
        Family::Recurrence,
        Family::Sequence,
        Family::Optim,
        Family::Cell,
    ];

    /// The source file's stem (`"elementwise"`).
    pub fn name(self) -> &'static str {
        match self {
            Family::Elementwise => "elementwise",
            Family::Reduce => "reduce",
            Family::Copy => "copy",
            Family::Matmul => "matmul",
            Family::Recurrence => "recurrence",
            Family::Sequence => "sequence",
            Family::Optim => "optim",
            Family::Cell => "cell",
        }
    }

    /// The kernels the source defines, each as `<name>_f32` and `<name>_f64`.
    pub fn kernels(self) -> &'static [&'static str] {
        match self {
            Family::Elementwise => &["unary", "binary", "select"],
            Family::Reduce => &[
                "sum_columns",
                "sum_sequences",
                "sum_masked",
                "sum_vectors",
                "sum_finish",
                "extremum",
            ],
            Family::Copy => &["copy", "index_select", "index_add", "concat_part"],
            Family::Matmul => &["matmul"],
            Family::Recurrence => &["returns", "gae", "lambda_returns", "vtrace", "n_step"],
            Family::Sequence => &["pad", "unpad", "masked_map"],
            Family::Cell => &["lstm_cell", "lstm_cell_backward"],
            Family::Optim => &[
                "sgd",
                "momentum_torch",
                "momentum_keras",
                "momentum_core",
                "adam_torch",
                "adam_keras",
                "rmsprop",
                "adagrad_torch",
                "adagrad_keras",
            ],
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }

    fn body(self) -> &'static str {
        match self {
            Family::Elementwise => include_str!("cuda/elementwise.cu"),
            Family::Reduce => include_str!("cuda/reduce.cu"),
            Family::Copy => include_str!("cuda/copy.cu"),
            Family::Matmul => include_str!("cuda/matmul.cu"),
            Family::Recurrence => include_str!("cuda/recurrence.cu"),
            Family::Sequence => include_str!("cuda/sequence.cu"),
            Family::Optim => include_str!("cuda/optim.cu"),
            Family::Cell => include_str!("cuda/cell.cu"),
        }
    }

    /// The complete source NVRTC compiles: `math.cuh`, `common.cuh`, then the family's.
    pub fn source(self) -> String {
        format!(
            "// math.cuh\n{MATH}\n// common.cuh\n{COMMON}\n// {}.cu\n{}",
            self.name(),
            self.body()
        )
    }

    /// The PTX of this family for `arch` (`"compute_90"`; `None`: NVRTC's default), freshly
    /// compiled (no cache). An error naming the family and carrying NVRTC's log when the
    /// source does not compile, or when NVRTC cannot be loaded.
    pub fn compile(self, arch: Option<&'static str>) -> Result<String> {
        nvrtc_available()?;
        let options = options(self, arch);
        let ptx = compile_ptx_with_opts(self.source(), options).map_err(|error| {
            let log = match &error {
                cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                    log.to_string_lossy().into_owned()
                }
                other => other.to_string(),
            };
            compile_error(format!("NVRTC failed on {}.cu:\n{log}", self.name()))
        })?;
        Ok(ptx.to_src())
    }

    /// The PTX from the disk cache, or compiled and stored there.
    pub(crate) fn ptx(self, arch: Option<&'static str>) -> Result<Ptx> {
        let path = cache_dir().map(|dir| {
            let key = format!(
                "{}\n{:?}\n{:?}",
                self.source(),
                options(self, arch),
                nvrtc_version()
            );
            dir.join(format!(
                "{}-{}-{:016x}.ptx",
                self.name(),
                arch.unwrap_or("default"),
                fnv1a(key.as_bytes())
            ))
        });
        if let Some(src) = path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
            return Ok(Ptx::from_src(src));
        }
        let src = self.compile(arch)?;
        if let Some(path) = path {
            store(&path, &src);
        }
        Ok(Ptx::from_src(src))
    }
}

fn options(family: Family, arch: Option<&'static str>) -> CompileOptions {
    CompileOptions {
        fmad: Some(false),
        ftz: Some(false),
        prec_div: Some(true),
        prec_sqrt: Some(true),
        use_fast_math: Some(false),
        arch,
        name: Some(format!("{}.cu", family.name())),
        ..Default::default()
    }
}

fn compile_error(message: String) -> Error {
    Error::Device {
        function: "rlgrad_cuda::compile",
        device: "nvrtc".to_owned(),
        message,
    }
}

/// `Ok` when NVRTC's library (`libnvrtc.so.13` or a name cudarc tries) can be loaded; an
/// error saying it cannot otherwise (instead of cudarc's panic on first use).
pub fn nvrtc_available() -> Result<()> {
    // SAFETY: only tries to open the library by its candidate names, touching no state.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(compile_error(
            "no NVRTC library found (libnvrtc.so.13 from the CUDA 13 toolkit or the \
             `nvidia-cuda-nvrtc` wheel; put its folder on LD_LIBRARY_PATH)"
                .to_owned(),
        ))
    }
}

/// NVRTC's `(major, minor)` version.
fn nvrtc_version() -> (i32, i32) {
    let (mut major, mut minor) = (0, 0);
    // SAFETY: nvrtcVersion writes two ints through valid pointers; the library is present
    // (checked by the caller, `nvrtc_available`, before any compile).
    unsafe {
        cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor);
    }
    (major, minor)
}

fn cache_dir() -> Option<PathBuf> {
    let from = |var: &str| {
        std::env::var_os(var)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    from("RLGRAD_CUDA_CACHE")
        .or_else(|| from("XDG_CACHE_HOME").map(|d| d.join("rlgrad-cuda")))
        .or_else(|| from("HOME").map(|d| d.join(".cache").join("rlgrad-cuda")))
}

/// Writes the PTX through a temporary file and a rename, so that a reader never sees half
/// a file; failures are ignored (the cache only saves time).
fn store(path: &std::path::Path, src: &str) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&temporary, src).is_ok() && std::fs::rename(&temporary, path).is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}

/// FNV-1a, 64 bits: a hash that stays the same across Rust versions, for file names.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, &b| {
        (hash ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_hold_the_shared_headers_and_hashes_are_stable() {
        for family in Family::ALL {
            let source = family.source();
            assert!(source.contains("rl_expf") && source.contains("struct Strided"));
            assert!(source.contains("_f32"), "{}", family.name());
            assert_eq!(Family::ALL[family.index()], family);
        }
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
