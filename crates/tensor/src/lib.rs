//! rlgrad-tensor: n-d tensors on any rlgrad device.
//!
//! [`Tensor<T, D = Cpu>`](Tensor) is a shared buffer of `f32` or `f64` plus a strided
//! layout. It offers constructors (from a `Vec`, zeros, ones, full, arange, linspace, and
//! seeded uniform and normal samples from a named [`Rng`](rlgrad_core::Rng) stream), shape
//! ops (reshape, transpose, permute, broadcast, narrow, index_select, concat, stack,
//! squeeze, unsqueeze), elementwise ops with NumPy broadcasting and scalar operands,
//! comparisons giving 0/1 masks, `where_cond`, reductions over all elements or one axis,
//! and matmul (2-D and batched, and [`Tensor::matmul_bias`]: a linear layer with its bias
//! and activation applied as the product is stored, the bits of the three ops).
//!
//! # Guarantees
//!
//! - Reductions follow the canonical order of [`rlgrad_core::reduce`]: the same bits at
//!   every thread count and input alignment.
//! - Elementwise ops use the canonical formulas of [`rlgrad_core::kernels::UnaryOp`] and
//!   [`BinaryOp`](rlgrad_core::kernels::BinaryOp), with portable transcendentals.
//! - Seeded constructors give the same tensor on every platform, thread count and
//!   dependency upgrade (the conversions live in rlgrad-core, not in `rand`).
//! - Matmul has a canonical order too (a fused multiply-add chain over `k`, see
//!   [`Tensor::matmul`]): the same bits at every thread count and on every CPU.
//! - Every op returns `Result`: shape mismatches, failed broadcasts, bad axes and
//!   indices, and empty reductions without an identity are errors, never panics.
//!   Operators (`&a + &b`, `&t * 2.0`) return `Result` too.
//! - Every constructor returns an `Err` naming the size when the host cannot allocate it
//!   (`Tensor::<f32>::ones([1 << 30, 1 << 30])`, a shape whose bytes overflow `usize`);
//!   none aborts. The [`Cpu`]'s op outputs come from the same checked allocations
//!   ([`rlgrad_core::cpu::alloc`]).
//!
//! # Example
//!
//! ```
//! use rlgrad_tensor::Tensor;
//!
//! let x = Tensor::<f32>::arange(0.0, 6.0, 1.0)?.reshape([2, 3])?;
//! let bias = Tensor::from_vec(vec![10.0f32, 20.0, 30.0], [3])?;
//! let y = (&x + &bias)?.relu()?;          // broadcasts [2, 3] + [3]
//! assert_eq!(y.sum_axis(0, false)?.to_vec()?, [23.0, 45.0, 67.0]);
//! let scaled = (&y * 0.5)?;
//! assert_eq!(scaled.max_all()?, 17.5);
//! assert!((&x + &Tensor::zeros([4])?).is_err()); // [2, 3] and [4] don't broadcast
//! # Ok::<(), rlgrad_core::Error>(())
//! ```

mod create;
mod display;
mod matmul;
mod ops;
mod reduce;
mod shape_ops;
mod tensor;

pub use rlgrad_core::{Cpu, Error, Result, Shape};
pub use tensor::Tensor;

use rlgrad_core::Float;
use rlgrad_core::kernels::{
    CopyKernel, ElementwiseKernel, MatmulKernel, RandomKernel, ReduceKernel,
};

/// Every kernel family a [`Tensor`] needs, bundled: implemented automatically by any
/// device that implements them all (the [`Cpu`], `rlgrad-cuda`'s `Cuda`).
pub trait TensorDevice<T: Float>:
    ElementwiseKernel<T> + ReduceKernel<T> + CopyKernel<T> + MatmulKernel<T> + RandomKernel<T>
{
}

impl<T: Float, D> TensorDevice<T> for D where
    D: ElementwiseKernel<T> + ReduceKernel<T> + CopyKernel<T> + MatmulKernel<T> + RandomKernel<T>
{
}

/// The README's examples, compiled and run as doctests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
