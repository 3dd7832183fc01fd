//! The kernel sources and their compilation by NVRTC.
//!
//! Each kernel family is one CUDA C++ source (`src/cuda/<family>.cu`, beside the Rust file
//! of the same name), compiled at run time with `math.cuh` (the ports of `libm`) and
//! `common.cuh` in front of it. The options make every floating-point operation the IEEE
//! operation the Cpu performs: no FMA contraction (`--fmad=false`), no flush to zero,
//! IEEE division and square root.
//!
//! A device compiles a family the first time one of its kernels runs, once per process
//! and device, into a cubin for the GPU's architecture where NVRTC knows it, PTX
//! otherwise (the choice and why: [`Target`]). The image is cached on disk, keyed by a
//! hash of the source, the options (the target among them) and the NVRTC version, in
//! `$RLGRAD_CUDA_CACHE`, else
//! `$XDG_CACHE_HOME/rlgrad-cuda`, else `~/.cache/rlgrad-cuda`; a cache that cannot be read
//! or written is only slower.

use std::ffi::CString;
use std::path::PathBuf;

use cudarc::nvrtc::{self, Ptx};
use rlgrad_core::{Error, Result};

use crate::target::{CudaVersion, KernelResources, Target, lower_ptx_version, parse_resources};

const MATH: &str = include_str!("cuda/math.cuh");
const COMMON: &str = include_str!("cuda/common.cuh");

/// A kernel family: one source, one module per device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
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
    /// `random.cu`: uniform and normal draws of an `Rng` stream.
    Random,
}

impl Family {
    /// Every family, in a fixed order.
    pub const ALL: [Family; 9] = [
        Family::Elementwise,
        Family::Reduce,
        Family::Copy,
        Family::Matmul,
        Family::Recurrence,
        Family::Sequence,
        Family::Optim,
        Family::Cell,
        Family::Random,
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
            Family::Random => "random",
        }
    }

    /// The kernels the source defines once, for bytes (a captured step's zeroing and
    /// upload copy in copy.cu), beside its [`Family::kernels`].
    pub fn byte_kernels(self) -> &'static [&'static str] {
        match self {
            Family::Copy => &["zero_bytes", "copy_bytes"],
            _ => &[],
        }
    }

    /// The kernels the source defines, each as `<name>_f32` and `<name>_f64`.
    pub fn kernels(self) -> &'static [&'static str] {
        match self {
            Family::Elementwise => &["unary", "binary", "select"],
            Family::Reduce => &[
                "sum_contiguous",
                "sum_columns",
                "sum_sequences",
                "sum_masked",
                "sum_columns_once",
                "sum_sequences_once",
                "sum_masked_once",
                "sum_vectors",
                "sum_finish",
                "extremum",
            ],
            Family::Copy => &["copy", "index_select", "index_add", "concat_part"],
            Family::Matmul => &[
                "matmul",
                "matmul_128_nn",
                "matmul_128_tn",
                "matmul_128_nt",
                "matmul_128_tt",
                "matmul_64_nn",
                "matmul_64_tn",
                "matmul_64_nt",
                "matmul_64_tt",
                "matmul_32_nn",
                "matmul_32_tn",
                "matmul_32_nt",
                "matmul_32_tt",
                "matmul_bias_64_nn",
                "matmul_bias_32_nn",
            ],
            Family::Recurrence => &[
                "returns_constant",
                "returns_discounts",
                "returns_terminations",
                "returns_truncations",
                "gae_constant",
                "gae_discounts",
                "gae_terminations",
                "gae_truncations",
                "gae_returns_constant",
                "gae_returns_discounts",
                "gae_returns_terminations",
                "gae_returns_truncations",
                "lambda_returns_constant",
                "lambda_returns_discounts",
                "lambda_returns_terminations",
                "lambda_returns_truncations",
                "vtrace_constant",
                "vtrace_discounts",
                "vtrace_terminations",
                "vtrace_truncations",
                "n_step_constant",
                "n_step_discounts",
                "n_step_terminations",
                "n_step_truncations",
            ],
            Family::Sequence => &["pad", "unpad", "masked_map"],
            Family::Cell => &["lstm_cell", "lstm_cell_backward"],
            Family::Random => &["rng_uniform", "rng_normal"],
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
                "polyak",
                "clip_scale",
                "clip_plan",
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
            Family::Random => include_str!("cuda/random.cu"),
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

    /// This family compiled for `target`, freshly (no cache): the image the driver loads
    /// and NVRTC's log, which for a cubin holds ptxas's resource report of every kernel
    /// ([`Compiled::resources`]). An error naming the family and carrying NVRTC's log when
    /// the source does not compile, or when NVRTC cannot be loaded.
    pub fn compile(self, target: Target) -> Result<Compiled> {
        nvrtc_available()?;
        let options = options(target);
        let fail = |what: &str, log: &str| {
            compile_error(format!("NVRTC failed on {}.cu {what}:\n{log}", self.name()))
        };
        let program = Program::create(&self.source(), self.name())?;
        // SAFETY: `program` is a live NVRTC program; the options are valid C strings.
        let compiled = unsafe { nvrtc::result::compile_program(program.handle, &options) };
        let log = program.log();
        compiled.map_err(|e| fail(&format!("({e:?})"), &log))?;
        let image = match target {
            Target::Cubin(_) => {
                let mut size = 0usize;
                // SAFETY: a compiled program; NVRTC writes the size, then exactly that
                // many bytes into a buffer of that size.
                let bytes = unsafe {
                    nvrtc::sys::nvrtcGetCUBINSize(program.handle, &mut size)
                        .result()
                        .and_then(|()| {
                            let mut bytes = vec![0u8; size];
                            nvrtc::sys::nvrtcGetCUBIN(program.handle, bytes.as_mut_ptr().cast())
                                .result()
                                .map(|()| bytes)
                        })
                };
                Image::Cubin(bytes.map_err(|e| fail(&format!("(no cubin: {e:?})"), &log))?)
            }
            Target::Ptx { isa, .. } => {
                // SAFETY: a compiled program.
                let text = unsafe { nvrtc::result::get_ptx(program.handle) }
                    .map_err(|e| fail(&format!("(no PTX: {e:?})"), &log))?;
                let ptx = nul_terminated(&text);
                Image::Ptx(match isa {
                    Some(isa) => lower_ptx_version(&ptx, isa)?,
                    None => ptx,
                })
            }
        };
        Ok(Compiled { image, log })
    }

    /// The image from the disk cache, or compiled and stored there.
    pub(crate) fn image(self, target: Target) -> Result<Image> {
        self.image_cached_in(target, cache_dir().as_deref())
    }

    /// The image from `cache` (no cache: `None`), or compiled and stored there. Cache
    /// files carry a CRC32C: a truncated or damaged one is compiled anew.
    fn image_cached_in(self, target: Target, cache: Option<&std::path::Path>) -> Result<Image> {
        let path = cache.map(|dir| {
            let key = format!(
                "{}\n{:?}\n{:?}",
                self.source(),
                options(target),
                nvrtc_version()
            );
            let extension = match target {
                Target::Cubin(_) => "cubin",
                Target::Ptx { .. } => "ptx",
            };
            dir.join(format!(
                "{}-{}-{:016x}.{extension}",
                self.name(),
                target.label(),
                fnv1a(key.as_bytes())
            ))
        });
        let cached = path
            .as_ref()
            .and_then(|p| std::fs::read(p).ok())
            .and_then(unsealed);
        if let Some(bytes) = cached {
            match target {
                Target::Cubin(_) => return Ok(Image::Cubin(bytes)),
                Target::Ptx { .. } => {
                    if let Ok(text) = String::from_utf8(bytes) {
                        return Ok(Image::Ptx(text));
                    }
                }
            }
        }
        let image = self.compile(target)?.image;
        if let Some(path) = path {
            store(&path, &sealed(image.bytes()));
        }
        Ok(image)
    }
}

/// A compiled kernel family.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// What the driver loads.
    pub image: Image,
    /// NVRTC's log (ptxas's `-v` report for a cubin).
    pub log: String,
}

impl Compiled {
    /// Registers, stack and spills of every kernel, from ptxas's report (cubins only;
    /// empty for PTX, which ptxas does not see until the driver loads it).
    pub fn resources(&self) -> Vec<KernelResources> {
        parse_resources(&self.log)
    }
}

/// A module image for the driver.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Image {
    /// Machine code for one architecture (an ELF file).
    Cubin(Vec<u8>),
    /// PTX text, compiled by the driver at load.
    Ptx(String),
}

impl Image {
    /// The bytes as stored on disk.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Image::Cubin(bytes) => bytes,
            Image::Ptx(text) => text.as_bytes(),
        }
    }

    /// The image as cudarc loads it.
    pub(crate) fn into_module_source(self) -> Ptx {
        match self {
            Image::Cubin(bytes) => Ptx::from_binary(bytes),
            Image::Ptx(text) => Ptx::from_src(text),
        }
    }
}

/// The text of NVRTC's NUL-terminated C string `chars` (lossy UTF-8). Byte by byte:
/// `c_char` is `i8` on x86-64 and `u8` on aarch64.
fn nul_terminated(chars: &[std::ffi::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|c| c.to_ne_bytes()[0])
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A cache file's contents: the image, then its CRC32C (4 bytes, little-endian).
fn sealed(image: &[u8]) -> Vec<u8> {
    let mut bytes = image.to_vec();
    bytes.extend_from_slice(&crc32c::crc32c(image).to_le_bytes());
    bytes
}

/// The image of a cache file whose checksum holds; `None` for a truncated or damaged one.
fn unsealed(mut bytes: Vec<u8>) -> Option<Vec<u8>> {
    let split = bytes.len().checked_sub(4)?;
    let stored = u32::from_le_bytes(bytes[split..].try_into().ok()?);
    bytes.truncate(split);
    (crc32c::crc32c(&bytes) == stored).then_some(bytes)
}

/// An NVRTC program, destroyed on drop. The source and name stay alive as long as the
/// program, whatever NVRTC's copying rules are.
struct Program {
    handle: nvrtc::sys::nvrtcProgram,
    _source: CString,
    _name: CString,
}

impl Program {
    fn create(source: &str, name: &str) -> Result<Program> {
        let text = CString::new(source)
            .map_err(|_| compile_error(format!("{name}.cu holds a NUL byte")))?;
        let file = CString::new(format!("{name}.cu"))
            .map_err(|_| compile_error(format!("{name}: a NUL byte in the name")))?;
        let program = nvrtc::result::create_program(&text, Some(&file))
            .map_err(|e| compile_error(format!("NVRTC cannot create {name}.cu: {e:?}")))?;
        Ok(Program {
            handle: program,
            _source: text,
            _name: file,
        })
    }

    fn log(&self) -> String {
        // SAFETY: a live program; the log is a NUL-terminated string NVRTC owns a copy of.
        match unsafe { nvrtc::result::get_program_log(self.handle) } {
            Ok(chars) => nul_terminated(&chars),
            Err(e) => format!("(no log: {e:?})"),
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: the program was created by `create` and is destroyed once, here.
        let _ = unsafe { nvrtc::result::destroy_program(self.handle) };
    }
}

/// NVRTC's options: IEEE arithmetic as the Cpu has it, the target's architecture, and
/// ptxas's resource report for cubins.
fn options(target: Target) -> Vec<String> {
    let mut options = vec![
        "--fmad=false".to_owned(),
        "--ftz=false".to_owned(),
        "--prec-div=true".to_owned(),
        "--prec-sqrt=true".to_owned(),
        format!("--gpu-architecture={}", target.gpu_architecture()),
    ];
    if let Target::Cubin(_) = target {
        options.push("--ptxas-options=-v".to_owned());
        // From 12.9 NVRTC keeps a compile cache of its own (beside the driver's compute
        // cache) and a hit skips ptxas, leaving no resource report in the log: the GPU
        // run found `ptx.rs` without one after `kernels.rs` had compiled the same source.
        if nvrtc_version().is_some_and(|v| (v.major, v.minor) >= (12, 9)) {
            options.push("--no-cache".to_owned());
        }
    }
    options
}

fn compile_error(message: String) -> Error {
    Error::Device {
        function: "rlgrad_cuda::compile",
        device: "nvrtc".to_owned(),
        message,
        cause: None,
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

/// NVRTC's version, `None` when its library cannot be loaded.
pub fn nvrtc_version() -> Option<CudaVersion> {
    nvrtc_available().ok()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: nvrtcVersion writes two ints through valid pointers; the library is present.
    unsafe { nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
        .result()
        .ok()?;
    Some(CudaVersion {
        major: major.max(0) as u32,
        minor: minor.max(0) as u32,
    })
}

/// The architectures NVRTC compiles cubins for (`90` for `sm_90`), empty when its
/// library cannot be loaded.
pub fn nvrtc_archs() -> Vec<u32> {
    if nvrtc_available().is_err() {
        return Vec::new();
    }
    let mut count = 0;
    // SAFETY: NVRTC writes the count, then exactly `count` ints into a buffer that long.
    unsafe {
        if nvrtc::sys::nvrtcGetNumSupportedArchs(&mut count)
            .result()
            .is_err()
        {
            return Vec::new();
        }
        let mut archs = vec![0i32; count.max(0) as usize];
        if nvrtc::sys::nvrtcGetSupportedArchs(archs.as_mut_ptr())
            .result()
            .is_err()
        {
            return Vec::new();
        }
        archs.into_iter().map(|a| a.max(0) as u32).collect()
    }
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

/// Writes an image through a temporary file and a rename, so that a reader never sees
/// half a file; failures are ignored (the cache only saves time).
fn store(path: &std::path::Path, bytes: &[u8]) {
    let Some(dir) = path.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() {
        return;
    }
    let temporary = path.with_extension(format!("tmp{}", std::process::id()));
    if std::fs::write(&temporary, bytes).is_ok() && std::fs::rename(&temporary, path).is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
}

/// FNV-1a, 64 bits ([`rlgrad_core::Fingerprint`]): a hash that stays the same across Rust
/// versions, for file names.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash = rlgrad_core::Fingerprint::new();
    hash.write(bytes);
    hash.finish()
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

    #[test]
    fn cubins_are_cached_by_target_and_a_damaged_one_is_compiled_anew() {
        if let Err(why) = nvrtc_available() {
            return crate::skip("NVRTC", &why);
        }
        let dir = tempfile::tempdir().unwrap();
        let h100 = Target::Cubin(crate::Arch::from_number(90));
        let family = Family::Optim;
        let first = family.image_cached_in(h100, Some(dir.path())).unwrap();
        let files: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        let name = files[0].file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            name.starts_with("optim-sm_90-") && name.ends_with(".cubin"),
            "{name}"
        );
        assert_eq!(std::fs::read(&files[0]).unwrap(), sealed(first.bytes()));
        // Another target is another file.
        let a100 = Target::Cubin(crate::Arch::from_number(80));
        let other = family.image_cached_in(a100, Some(dir.path())).unwrap();
        assert_ne!(other, first);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
        // A truncated or damaged file is not loaded: the cubin is compiled and stored again.
        let whole = sealed(first.bytes());
        let mut flipped = whole.clone();
        flipped[whole.len() / 2] ^= 4;
        for damaged in [&whole[..3], &whole[..whole.len() - 1], &flipped[..]] {
            assert_eq!(unsealed(damaged.to_vec()), None);
            std::fs::write(&files[0], damaged).unwrap();
            assert_eq!(
                family.image_cached_in(h100, Some(dir.path())).unwrap(),
                first
            );
            assert_eq!(std::fs::read(&files[0]).unwrap(), whole);
        }
    }
}
