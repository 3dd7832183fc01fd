//! Kernel traits, one per op family, implemented by every device.
//!
//! Each op's canonical formula is defined once, here, as a scalar function
//! ([`UnaryOp::apply`], [`BinaryOp::apply`]) or in the documentation of its trait, and each
//! device implementation follows it to the bit. Scalars that depend only on the step are
//! computed by the caller on the host and passed in.
//!
//! | family | trait | used by |
//! |---|---|---|
//! | elementwise map / zip / select | [`ElementwiseKernel`] | tensor |
//! | reductions (sum, mean, var, min, max) | [`ReduceKernel`] | tensor |
//! | strided copy, gather, concat | [`CopyKernel`] | tensor |
//! | matrix multiplication | [`MatmulKernel`] | tensor |
//! | reverse linear recurrences over `[T, B]` | [`RecurrenceKernel`] | returns |
//! | ragged sequences: pad, unpad, masked sums and maps | [`SequenceKernel`] | mask |
//! | fused optimizer updates | [`OptimKernel`] | optim |
//! | fused recurrent cells (LSTM) | [`CellKernel`] | autodiff |

pub mod cell;
pub mod clip;
mod copy;
mod elementwise;
mod matmul;
pub mod optim;
mod random;
pub mod recurrence;
mod reduce;
pub mod sequence;

pub use cell::CellKernel;
pub use copy::CopyKernel;
pub use elementwise::{BinaryOp, ElementwiseKernel, UnaryOp};
pub use matmul::{MatmulKernel, check_bias, matmul_dims};
pub use optim::OptimKernel;
pub use random::RandomKernel;
pub use recurrence::RecurrenceKernel;
pub use reduce::{ReduceKernel, ReduceOp};
pub use sequence::SequenceKernel;
