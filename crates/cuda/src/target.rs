//! What NVRTC compiles the kernels into for one GPU: a cubin for the GPU's architecture
//! when NVRTC knows it, PTX for the driver to compile otherwise, and the rules that keep
//! either loadable by the driver at hand.
//!
//! PTX carries an ISA version (`.version 9.2`) that the driver's JIT must know: NVRTC
//! 13.2 emits ISA 9.2, and a CUDA 13.0 driver (580) refuses it with
//! `CUDA_ERROR_UNSUPPORTED_PTX_VERSION`. A cubin holds machine code (SASS) instead, which
//! any driver of the same CUDA major version loads (CUDA's minor-version compatibility),
//! and it costs no JIT time at load. So:
//!
//! 1. NVRTC's major version newer than the driver's: an error (neither a cubin nor PTX
//!    of a newer major release is guaranteed to load).
//! 2. NVRTC lists the GPU's architecture: a cubin for `sm_XY`.
//! 3. Otherwise (a GPU newer than NVRTC): PTX for the newest `compute_XY` NVRTC has
//!    that the GPU can run, and if NVRTC is newer than the driver, the PTX's
//!    `.version` lowered to the newest ISA the driver accepts. The kernels use nothing
//!    younger than PTX ISA 8.0 (CUDA 12.0, the oldest driver rlgrad supports), so the
//!    lowered text means the same.
//! 4. A GPU older than every architecture NVRTC targets: an error naming both.

use rlgrad_core::{Error, Result};

/// A compute capability, `sm_90` is `Arch { major: 9, minor: 0 }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Arch {
    /// The major version (9 for Hopper).
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

impl Arch {
    /// The architecture of NVRTC's numbering (`90` for `sm_90`).
    pub fn from_number(number: u32) -> Arch {
        Arch {
            major: number / 10,
            minor: number % 10,
        }
    }

    fn number(self) -> u32 {
        self.major * 10 + self.minor
    }
}

/// A CUDA release, of the driver (`cuDriverGetVersion`) or of NVRTC (`nvrtcVersion`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CudaVersion {
    /// The major version (13).
    pub major: u32,
    /// The minor version.
    pub minor: u32,
}

impl CudaVersion {
    /// The version `cuDriverGetVersion` encodes as `1000 * major + 10 * minor`.
    pub fn from_driver(encoded: u32) -> CudaVersion {
        CudaVersion {
            major: encoded / 1000,
            minor: encoded % 1000 / 10,
        }
    }

    /// The newest PTX ISA this release's driver JIT accepts, `None` for a release before
    /// CUDA 12 (which rlgrad does not support).
    pub fn ptx_isa(self) -> Option<(u32, u32)> {
        match (self.major, self.minor) {
            (12, minor @ 0..=5) => Some((8, minor)),
            (12, 6 | 7) => Some((8, 5)),
            (12, 8) => Some((8, 7)),
            (12, _) => Some((8, 8)),
            (13, minor) => Some((9, minor)),
            (major, _) if major > 13 => Some((major - 4, 0)),
            _ => None,
        }
    }
}

impl std::fmt::Display for CudaVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// What NVRTC produces for a GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Target {
    /// Machine code for `sm_XY`, loaded without JIT.
    Cubin(Arch),
    /// PTX for `compute_XY`, compiled by the driver at load; `isa` is the ISA version
    /// its `.version` directive is lowered to, where the driver is older than NVRTC.
    Ptx {
        /// The virtual architecture compiled for.
        arch: Arch,
        /// The lowered ISA version, if any.
        isa: Option<(u32, u32)>,
    },
}

impl Target {
    /// The target for a GPU of architecture `gpu` under a driver of version `driver`,
    /// with NVRTC of version `nvrtc` that targets `nvrtc_archs` (NVRTC's numbering, as
    /// `nvrtcGetSupportedArchs` lists them). Pure: the rules above, testable without a
    /// GPU. An error when no choice can load.
    pub fn choose(
        gpu: Arch,
        driver: CudaVersion,
        nvrtc: CudaVersion,
        nvrtc_archs: &[u32],
    ) -> Result<Target> {
        let fail = |message: String| Error::Device {
            function: "Target::choose",
            device: format!("sm_{}", gpu.number()),
            message,
            cause: None,
        };
        if nvrtc.major > driver.major {
            return Err(fail(format!(
                "NVRTC {nvrtc} is of a newer CUDA major version than the driver (CUDA \
                 {driver}): use an NVRTC {}.x (the `nvidia-cuda-nvrtc` wheel of that \
                 version) or update the driver",
                driver.major
            )));
        }
        if nvrtc_archs.contains(&gpu.number()) {
            return Ok(Target::Cubin(gpu));
        }
        let Some(newest) = nvrtc_archs
            .iter()
            .copied()
            .filter(|&a| a <= gpu.number())
            .max()
        else {
            return Err(fail(format!(
                "NVRTC {nvrtc} targets no architecture this GPU runs (it has {}, the GPU is \
                 sm_{})",
                list(nvrtc_archs),
                gpu.number()
            )));
        };
        let isa = if nvrtc > driver {
            Some(driver.ptx_isa().ok_or_else(|| {
                fail(format!(
                    "the driver (CUDA {driver}) is older than CUDA 12, which rlgrad needs"
                ))
            })?)
        } else {
            None
        };
        Ok(Target::Ptx {
            arch: Arch::from_number(newest),
            isa,
        })
    }

    /// NVRTC's `--gpu-architecture` value: `sm_90` for a cubin, `compute_90` for PTX.
    pub fn gpu_architecture(self) -> String {
        match self {
            Target::Cubin(arch) => format!("sm_{}", arch.number()),
            Target::Ptx { arch, .. } => format!("compute_{}", arch.number()),
        }
    }

    /// A short name for cache files and reports: `sm_90`, `compute_100`,
    /// `compute_100-isa9.0`.
    pub fn label(self) -> String {
        match self {
            Target::Ptx {
                isa: Some((major, minor)),
                ..
            } => format!("{}-isa{major}.{minor}", self.gpu_architecture()),
            _ => self.gpu_architecture(),
        }
    }
}

fn list(archs: &[u32]) -> String {
    archs
        .iter()
        .map(|a| format!("sm_{a}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `ptx` with its `.version` directive set to `isa`, when it declares a newer one. An
/// error when the PTX has no `.version` line.
pub(crate) fn lower_ptx_version(ptx: &str, (major, minor): (u32, u32)) -> Result<String> {
    let fail = |message: &str| Error::Device {
        function: "rlgrad_cuda::compile",
        device: "nvrtc".to_owned(),
        message: message.to_owned(),
        cause: None,
    };
    let start = ptx
        .find(".version ")
        .ok_or_else(|| fail("NVRTC's PTX has no `.version` directive"))?;
    let end = ptx[start..].find('\n').map_or(ptx.len(), |n| start + n);
    let declared = ptx[start + ".version ".len()..end].trim();
    let parsed = declared
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
        .ok_or_else(|| fail("NVRTC's PTX has an unreadable `.version` directive"))?;
    if parsed <= (major, minor) {
        return Ok(ptx.to_owned());
    }
    Ok(format!(
        "{}.version {major}.{minor}{}",
        &ptx[..start],
        &ptx[end..]
    ))
}

/// What ptxas reports for one kernel (`-Xptxas=-v` in NVRTC's log).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelResources {
    /// The kernel's name (`unary_f32`).
    pub kernel: String,
    /// Registers per thread.
    pub registers: u32,
    /// Bytes of stack frame per thread (local memory).
    pub stack_frame: u32,
    /// Bytes stored to local memory because registers ran out.
    pub spill_stores: u32,
    /// Bytes loaded back from those spills.
    pub spill_loads: u32,
    /// Bytes of static shared memory per block.
    pub shared: u32,
}

/// The per-kernel resources in a ptxas log; kernels whose lines are incomplete are left
/// out.
pub(crate) fn parse_resources(log: &str) -> Vec<KernelResources> {
    let mut found = Vec::new();
    let mut current: Option<KernelResources> = None;
    let number_before = |line: &str, word: &str| -> Option<u32> {
        let head = &line[..line.find(word)?];
        head.split_whitespace().last()?.parse().ok()
    };
    for line in log.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            if let Some(done) = current.take() {
                found.push(done);
            }
            current = rest.split('\'').next().map(|name| KernelResources {
                kernel: name.to_owned(),
                registers: u32::MAX,
                stack_frame: 0,
                spill_stores: 0,
                spill_loads: 0,
                shared: 0,
            });
        } else if let Some(kernel) = current.as_mut() {
            if line.contains("bytes stack frame") {
                kernel.stack_frame = number_before(line, "bytes stack frame").unwrap_or(0);
                kernel.spill_stores = number_before(line, "bytes spill stores").unwrap_or(0);
                kernel.spill_loads = number_before(line, "bytes spill loads").unwrap_or(0);
            } else if line.contains("Used ") && line.contains(" registers") {
                let used = line.split("Used ").nth(1).and_then(|r| {
                    r.split_whitespace()
                        .next()
                        .and_then(|n| n.parse::<u32>().ok())
                });
                if let Some(registers) = used {
                    kernel.registers = registers;
                }
                kernel.shared = number_before(line, "bytes smem").unwrap_or(0);
            }
        }
    }
    found.extend(current);
    found.retain(|k| k.registers != u32::MAX);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    const NVRTC_13_ARCHS: [u32; 12] = [75, 80, 86, 87, 88, 89, 90, 100, 103, 110, 120, 121];

    fn cuda(major: u32, minor: u32) -> CudaVersion {
        CudaVersion { major, minor }
    }

    #[test]
    fn a_gpu_nvrtc_knows_gets_a_cubin_whatever_the_minor_versions() {
        let h100 = Arch::from_number(90);
        // The GPU machine's case: NVRTC 13.2 (PTX ISA 9.2) under a 13.0 driver (580).
        for nvrtc in [cuda(13, 0), cuda(13, 2), cuda(12, 8)] {
            let target = Target::choose(h100, cuda(13, 0), nvrtc, &NVRTC_13_ARCHS).unwrap();
            assert_eq!(target, Target::Cubin(h100));
            assert_eq!(target.gpu_architecture(), "sm_90");
        }
        assert_eq!(CudaVersion::from_driver(13000), cuda(13, 0));
        assert_eq!(CudaVersion::from_driver(12080), cuda(12, 8));
    }

    #[test]
    fn a_gpu_newer_than_nvrtc_gets_ptx_pinned_to_the_driver() {
        let future = Arch::from_number(130);
        let target = Target::choose(future, cuda(13, 0), cuda(13, 2), &NVRTC_13_ARCHS).unwrap();
        assert_eq!(
            target,
            Target::Ptx {
                arch: Arch::from_number(121),
                isa: Some((9, 0))
            }
        );
        assert_eq!(target.label(), "compute_121-isa9.0");
        // A driver as new as NVRTC takes NVRTC's PTX as it is.
        let same = Target::choose(future, cuda(13, 2), cuda(13, 2), &NVRTC_13_ARCHS).unwrap();
        assert_eq!(
            same,
            Target::Ptx {
                arch: Arch::from_number(121),
                isa: None
            }
        );
        // sm_91 (not in the list) runs sm_90's PTX.
        let between = Target::choose(Arch::from_number(91), cuda(13, 1), cuda(13, 0), &[90]);
        assert_eq!(
            between.unwrap().gpu_architecture(),
            "compute_90",
            "the newest architecture at most the GPU's"
        );
    }

    #[test]
    fn impossible_choices_are_errors_that_say_why() {
        let old = Target::choose(
            Arch::from_number(70),
            cuda(13, 0),
            cuda(13, 0),
            &NVRTC_13_ARCHS,
        );
        let message = old.unwrap_err().to_string();
        assert!(
            message.contains("sm_70") && message.contains("sm_75"),
            "{message}"
        );
        let newer_major = Target::choose(
            Arch::from_number(90),
            cuda(12, 8),
            cuda(13, 0),
            &NVRTC_13_ARCHS,
        );
        let message = newer_major.unwrap_err().to_string();
        assert!(
            message.contains("NVRTC 13.0") && message.contains("12.8"),
            "{message}"
        );
    }

    #[test]
    fn driver_versions_map_to_the_ptx_isa_their_jit_accepts() {
        assert_eq!(cuda(13, 0).ptx_isa(), Some((9, 0)));
        assert_eq!(cuda(13, 2).ptx_isa(), Some((9, 2)));
        assert_eq!(cuda(12, 6).ptx_isa(), Some((8, 5)));
        assert_eq!(cuda(12, 8).ptx_isa(), Some((8, 7)));
        assert_eq!(cuda(12, 9).ptx_isa(), Some((8, 8)));
        assert_eq!(cuda(11, 8).ptx_isa(), None);
    }

    #[test]
    fn lowering_rewrites_only_a_newer_version_directive() {
        let ptx = "//\n// Generated by NVIDIA NVVM Compiler\n.version 9.2\n.target sm_90\n.address_size 64\n";
        let lowered = lower_ptx_version(ptx, (9, 0)).unwrap();
        assert_eq!(lowered, ptx.replace(".version 9.2", ".version 9.0"));
        assert_eq!(lower_ptx_version(ptx, (9, 2)).unwrap(), ptx);
        assert_eq!(lower_ptx_version(ptx, (9, 4)).unwrap(), ptx);
        assert!(lower_ptx_version(".target sm_90\n", (9, 0)).is_err());
    }

    #[test]
    fn ptxas_logs_parse_into_per_kernel_resources() {
        let log = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'gae_f64' for 'sm_90'\n\
ptxas info    : Function properties for gae_f64\n\
ptxas         .     8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads\n\
ptxas info    : Used 255 registers, used 0 barriers\n\
ptxas info    : Compile time = 18.175 ms\n\
ptxas info    : Compiling entry function 'gae_f32' for 'sm_90'\n\
ptxas info    : Function properties for gae_f32\n\
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 40 registers, used 1 barriers, 400 bytes cmem[0], 16640 bytes smem\n";
        let found = parse_resources(log);
        assert_eq!(
            found,
            vec![
                KernelResources {
                    kernel: "gae_f64".to_owned(),
                    registers: 255,
                    stack_frame: 8,
                    spill_stores: 12,
                    spill_loads: 16,
                    shared: 0
                },
                KernelResources {
                    kernel: "gae_f32".to_owned(),
                    registers: 40,
                    stack_frame: 0,
                    spill_stores: 0,
                    spill_loads: 0,
                    shared: 16640
                },
            ]
        );
        assert!(parse_resources("nothing here").is_empty());
    }
}
