//! rlgrad-core: the trait layer every rlgrad crate stands on.
//!
//! - [`Float`] (`f32`, `f64`) and [`Element`] with the runtime tag [`DType`];
//! - [`Shape`] (row-major, NumPy broadcasting) and [`Layout`] (strided views);
//! - [`Error`] and [`Result`]: every message names the function, the argument, what was
//!   expected and what came;
//! - [`Device`] (allocate, upload, download, synchronize) and the [`kernels`] traits,
//!   one per op family, with the [`Cpu`] device implementing all of them on rayon (all
//!   its code is in [`cpu`], its instruction sets in [`cpu::simd`] and its grain sizes in
//!   [`cpu::grain`]);
//! - [`reduce`]: the canonical reduction order (fixed leaves by element index, a fixed
//!   pairwise tree), independent of thread count and alignment;
//! - [`Par`]: explicit parallelism, so tests can compare bits across thread counts;
//! - [`Rng`]: seeded, named random streams whose output is fixed forever, with a
//!   resumable position ([`RngState`]);
//!
//! # Guarantees
//!
//! Every kernel documents its canonical order of floating-point operations and every
//! device and thread count follows it, so results are bit-identical. Transcendental
//! functions come from the `libm` crate ([`Float::exp_portable`]) so that they are the same
//! on every platform. Matrix multiplication is rlgrad's own blocked GEMM with a canonical
//! order too (a fused multiply-add chain over `k`, see [`kernels::MatmulKernel`]), so it
//! gives the same bits on every CPU.
//! Public functions never panic on bad input; they return [`Error`].
//!
//! # Example
//!
//! ```
//! use rlgrad_core::kernels::{ReduceKernel, ReduceOp};
//! use rlgrad_core::{Cpu, Device, Layout, Par, Shape, View};
//!
//! let cpu = Cpu::new(Par::rayon(2));
//! let x = cpu.upload(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0])?;
//! let layout = Layout::contiguous(Shape::from([2, 3]));
//! let mut row_sums = cpu.alloc_zeros(2)?;
//! cpu.reduce(ReduceOp::Sum, View::new(&x, &layout), Some(1), &mut row_sums)?;
//! assert_eq!(row_sums, [6.0, 15.0]);
//! # Ok::<(), rlgrad_core::Error>(())
//! ```

pub mod check;
pub mod cpu;
mod device;
mod error;
mod fingerprint;
mod float;
pub mod kernels;
pub mod reduce;
mod rng;
mod shape;
pub mod step;

pub use cpu::Cpu;
pub use cpu::par::{Par, keep_workers_awake};
pub use device::{Device, View};
pub use error::{Cause, Error, Result};
pub use fingerprint::Fingerprint;
pub use float::{DType, Element, Float};
pub use rng::{PCG_MULTIPLIER, PcgPosition, Rng, RngState};
pub use shape::{Dims, Layout, RowCursor, Shape};
pub use step::Step;

/// The README's examples, compiled and run as doctests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
