//! rlgrad-autodiff: reverse-mode automatic differentiation on a gradient tape, with the
//! modules, losses and glue an RL agent needs.
//!
//! - [`Tape`] records the ops run on [`Var`]s; [`Tape::gradient`] returns the gradients
//!   of a loss with respect to the [`Param`]s of any modules (TensorFlow's
//!   `GradientTape`). Only what leads from the requested parameters to the loss is
//!   differentiated.
//! - [`Var`] has arithmetic with broadcasting, scalar ops, `relu`, `tanh`, `sigmoid`,
//!   `exp`, `log`, `sqrt`, `powf`, `abs`, `clamp`, sums, means, `max`/`min` over axes,
//!   `reshape`, `transpose`, `concat`, `narrow`, `index_select`, `gather`, `maximum` and
//!   `minimum`, `softmax` and `log_softmax`, `matmul`, [`Var::matmul_bias`] (a linear
//!   layer and its activation as one op, the bits of the three), `detach`, and the
//!   masked sequence ops of `rlgrad-mask` ([`Var::masked_mean`],
//!   [`Var::masked_normalize`], [`Var::pad_sequences`], ...).
//! - [`losses`]: MSE, Huber (sum or mean), cross-entropy from logits.
//! - [`CustomOp`]: your own forward and backward, recorded like a built-in op.
//! - [`nn`]: [`nn::Module`] (parameters in a stable, named order), [`nn::Linear`] with
//!   PyTorch's or Keras' initialization, [`nn::Mlp`], activations, [`nn::Gru`] and
//!   [`nn::Lstm`] with a runner over padded batches, their stacked and bidirectional
//!   forms [`nn::StackedGru`] and [`nn::StackedLstm`], [`nn::soft_update`] and
//!   [`nn::hard_update`] for target networks, [`nn::l2_penalty`] (Keras'
//!   `kernel_regularizer`).
//! - [`ApplyGradients`]: an `rlgrad-optim` optimizer step over a module's parameters.
//! - `#[derive(Module)]` ([`Module`], from `rlgrad-derive`): a struct of layers,
//!   `Param`s, and `Vec`s/`Option`s/`Box`es of them is a module, its parameters named by
//!   field path (`actor/l1/weight`), with `soft_update_from` for target networks;
//!   [`nn::Sequential`] for the plain stack.
//! - [`prelude`]: the names a training step uses, for one glob import.
//!
//! # Operators
//!
//! `+ - * /` and unary `-` work on `Var`s (by reference or by value) and scalars on
//! either side, and return `Result<Var>`, like [`Var::add`] and the tensor operators:
//! `(0.5 * &(&q - &target)?)?`, `(1.0 - &done)?`, `(-&log_prob)?`. They are the named ops
//! (`s - x` is one op with the bits of the scalar formula `s - x`), so an expression reads
//! like the math and has the named ops' bits and gradients.
//!
//! Why `Result` even for `&x * 2.0`, which has no shape to get wrong: a scalar op still
//! records a node, and recording fails on a tape consumed by [`Tape::gradient`] (a
//! variable of the last step used after its gradient was taken, a real bug in a training
//! loop), and computing fails where a device cannot allocate the output (CUDA out of
//! memory). An operator that panicked there would turn a user's mistake into an abort,
//! which rlgrad's "no panics on user input" rule forbids, and an operator returning a
//! `Var` that carried the error inside would report it far from where it happened. So no
//! operator here is infallible, and all of them say so in their type; a binary op between
//! variables also fails on shapes that do not broadcast and on variables of two tapes.
//!
//! # Guarantees
//!
//! - Every forward op is a tensor op of `rlgrad-tensor` (canonical formulas and
//!   reductions) and every backward rule is written with tensor ops in PyTorch's order of
//!   operations; gradients accumulate in the reverse of the recording order. So a training
//!   run gives the same bits at every thread count, and on every CPU (matmul included: it
//!   has a canonical order too).
//! - Errors, never panics, on bad input: shape mismatches name the op and both shapes, a
//!   gradient asked for a parameter the loss does not depend on is reported by name, a
//!   second `gradient` call on a consumed tape says so.
//! - A training loop that repeats the same step allocates no new memory once warmed up:
//!   tensors recycle their buffers through the device's cache
//!   ([`rlgrad_core::cpu::cache`]), and [`Tape::reset`] keeps the tape's memory.
//!
//! # Example: a regression step
//!
//! ```
//! use rlgrad_autodiff::losses::{mse_loss, Reduction};
//! use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp};
//! use rlgrad_autodiff::{ApplyGradients, Tape};
//! use rlgrad_core::Rng;
//! use rlgrad_optim::{Adam, Optimizer};
//! use rlgrad_tensor::Tensor;
//!
//! let mut rng = Rng::new(0, "example");
//! let mut model = Mlp::<f32>::new("model", &[2, 16, 1], Activation::Tanh, Activation::Identity,
//!                                 Init::TorchDefault, &mut rng)?;
//! let mut adam = Optimizer::<f32>::new(Adam::torch(), 1e-2)?;
//! let x = Tensor::rand_normal([32, 2], 0.0, 1.0, &mut rng)?;
//! let y = x.sum_axis(1, true)?;                       // learn y = x0 + x1
//! let mut tape = Tape::new();
//! let mut first = None;
//! for _ in 0..100 {
//!     tape.reset();
//!     let prediction = model.forward(&tape, &tape.constant(&x))?;
//!     let loss = mse_loss(&prediction, &tape.constant(&y), Reduction::Mean)?;
//!     first.get_or_insert(loss.to_scalar()?);
//!     let grads = tape.gradient(&loss, &[&model])?;
//!     adam.apply_gradients(&mut model, &grads)?;
//! }
//! let tape = Tape::new().no_grad();
//! let last = mse_loss(&model.forward(&tape, &tape.constant(&x))?, &tape.constant(&y), Reduction::Mean)?;
//! assert!(last.to_scalar()? < 0.1 * first.unwrap());
//! # Ok::<(), rlgrad_core::Error>(())
//! ```

#![forbid(unsafe_code)]

mod backward;
mod custom;
mod finite;
mod gradients;
pub mod losses;
mod masked;
mod module;
pub mod nn;
mod ops;
mod optim;
mod param;
pub mod prelude;
mod tape;

pub use backward::CustomOp;
pub use finite::NonFinite;
pub use gradients::Gradients;
pub use masked::SequenceDevice;
pub use module::Module;
pub use optim::ApplyGradients;
pub use param::{Param, ParamId};
/// `#[derive(Module)]` (from `rlgrad-derive`): see [`nn::Module`].
pub use rlgrad_derive::Module;
pub use tape::{Tape, Var};

pub use rlgrad_core::{Cpu, Device, Error, Float, Result};
pub use rlgrad_mask::{PadOrder, Sequences};
pub use rlgrad_tensor::Tensor;

/// The README's examples, compiled and run as doctests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
