//! rlgrad-cuda: the [`Cuda`] device, every kernel trait of `rlgrad-core` on an NVIDIA GPU,
//! giving the same bits as the [`Cpu`](rlgrad_core::Cpu) device.
//!
//! Change the device value and an rlgrad algorithm runs on the GPU: `Tensor<f32, Cuda>`,
//! `Tape<f32, Cuda>`, the device-level functions of `rlgrad-returns`, `rlgrad-mask` and
//! `rlgrad-optim` (`Optimizer::step_on`) all take it.
//!
//! ```no_run
//! use rlgrad_core::kernels::{ReduceKernel, ReduceOp};
//! use rlgrad_core::{Cpu, Device, Layout, Shape, View};
//! use rlgrad_cuda::Cuda;
//!
//! let gpu = Cuda::new(0)?; // an error, not a panic, without a GPU
//! let x: Vec<f32> = (0..100_000).map(|i| (i as f32).sin()).collect();
//! let layout = Layout::contiguous(Shape::from([x.len()]));
//! let mut sum = gpu.alloc_zeros(1)?;
//! gpu.reduce(ReduceOp::Sum, View::new(&gpu.upload(&x)?, &layout), None, &mut sum)?;
//! let mut cpu_sum = vec![0.0f32];
//! Cpu::seq().reduce(ReduceOp::Sum, View::new(&x, &layout), None, &mut cpu_sum)?;
//! assert_eq!(gpu.download(&sum)?[0].to_bits(), cpu_sum[0].to_bits());
//! # Ok::<(), rlgrad_core::Error>(())
//! ```
//!
//! # Guarantees
//!
//! - **Bit-identical to the Cpu**, by construction: every kernel follows its Cpu twin's
//!   canonical order (documented at each kernel trait), in CUDA C++ compiled by NVRTC with
//!   FMA contraction off, no flush to zero, IEEE division and square root. The sums use
//!   the same 64-element leaves, 16 lanes and pairwise tree; matmul is rlgrad's GEMM (a
//!   fused multiply-add chain over `k` per output, tiled by the output's size, never
//!   split over `k`; no cuBLAS, whose order is its own);
//!   recurrences run sequentially in time per column; `exp`, `ln`, `tanh` and `powf` are
//!   line-by-line ports of the `libm` crate the Cpu uses (checked bit for bit against it
//!   on the host by `tests/integration/host_math.rs`), not CUDA's `expf` and friends, which differ in
//!   the last bits.
//! - **One exception, NaN payloads**: where a result is NaN it is NaN on both devices,
//!   but GPU arithmetic returns the canonical NaN (`0x7fffffff`) where x86 propagates an
//!   operand's payload or returns `0xffc00000`, so the bit patterns of NaNs may differ.
//!   Tests compare "same bits, or both NaN".
//! - **Errors, not panics**: [`Cuda::new`] says why there is no GPU (no driver library,
//!   no NVRTC, no device); kernels check their arguments as the Cpu's do, with the same
//!   messages under `Cuda::*` names. A view with more than 8 dimensions left after merging
//!   its dense ones is an error on this device.
//! - **Allocation-free when warmed up**: outputs and scratch buffers come from a caching
//!   allocator (free lists by size, half the GPU's memory at most by default, see
//!   [`Cuda::set_cache_limit`]), as PyTorch's caching allocator does.
//! - **Compiled once**: each kernel family is compiled by NVRTC the first time it runs,
//!   once per process and device, into a cubin for the GPU (PTX only for a GPU newer
//!   than NVRTC, see [`Target`]), and cached on disk (see [`Family`]).
//! - **Ordered**: a device has one stream; work runs in call order, and
//!   [`Device::download`](rlgrad_core::Device::download) waits for it.
//!
//! # Building without CUDA
//!
//! cudarc loads `libcuda` and `libnvrtc` at run time (`dynamic-loading`), so this crate
//! builds and its tests pass on a machine without a CUDA toolkit or a GPU; the GPU tests
//! print that they were skipped and why. On a GPU machine, `RLGRAD_REQUIRE_GPU=1` makes
//! every such skip a failure (tests, `cargo xtask parity --device cuda`, the GPU bench), so
//! that a run that found no GPU cannot pass ([`skip`]). No other rlgrad crate depends on
//! this one.
//!
//! # Several GPUs
//!
//! Data parallelism is `rlgrad-dist`'s: gradients summed over a fixed tree of
//! microbatches, so the bits do not depend on the number of workers (see its docs), on
//! threads, MPI processes or one rank per GPU on NVIDIA's NCCL (`Nccl`, its `nccl`
//! feature). Its collectives move host buffers: this device's gradients are downloaded
//! first (NCCL stages the bytes through GPU memory).

mod capture;
mod cell;
mod compile;
mod copy;
mod device;
mod elementwise;
#[cfg(test)]
mod host;
mod matmul;
mod optim;
mod random;
mod recurrence;
mod reduce;
mod require;
mod sequence;
mod strided;
mod target;

pub use capture::{CudaRecordings, RECORDINGS, StepStats};
pub use compile::{Compiled, Family, Image, nvrtc_archs, nvrtc_available, nvrtc_version};
pub use device::{Activity, Cuda, CudaBuffer};
/// How this crate's tests and bench binary skip without a GPU and report to the GPU
/// runner (`cargo xtask gpu-run`): a test harness, public for them only (a binary cannot
/// take a dev-dependency such as the testkit) and not covered by semantic versioning.
#[doc(hidden)]
pub use require::{REQUIRE_GPU, bits_line, gpu_required, skip, skip_outcome};
pub use target::{Arch, CudaVersion, KernelResources, Target};

/// The README's examples, compiled as doctests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
