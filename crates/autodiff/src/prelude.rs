//! What a training step names, for one glob import: `use rlgrad_autodiff::prelude::*;`.
//!
//! The tape and its values ([`Tape`], [`Var`], [`Param`]), modules and layers
//! ([`Module`] and its derive, [`Forward`], [`Linear`], [`Mlp`], [`Sequential`], the
//! recurrent layers, [`soft_update`]), the losses, the common optimizers of
//! `rlgrad-optim` with [`ApplyGradients`] to step them, [`Tensor`], [`Rng`] and
//! [`Result`]. Everything else stays under its module's path.
//!
//! ```
//! use rlgrad_autodiff::prelude::*;
//!
//! let mut rng = Rng::new(0, "example");
//! let mut model = Mlp::<f32>::new("model", &[2, 16, 1], Activation::Tanh, Activation::Identity,
//!                                 Init::TorchDefault, &mut rng)?;
//! let mut adam = Optimizer::<f32>::new(Adam::torch(), 1e-2)?;
//! let x = Tensor::rand_normal([32, 2], 0.0, 1.0, &mut rng)?;
//! let y = x.sum_axis(1, true)?;
//! let mut tape = Tape::new();
//! let mut losses = Vec::new();
//! for _ in 0..100 {
//!     tape.reset();
//!     let prediction = model.forward(&tape, &tape.constant(&x))?;
//!     let loss = mse_loss(&prediction, &tape.constant(&y), Reduction::Mean)?;
//!     losses.push(loss.to_scalar()?);
//!     adam.minimize(&loss, &mut model)?;
//! }
//! assert!(losses[99] < 0.1 * losses[0]);
//! # Ok::<(), rlgrad_core::Error>(())
//! ```

pub use crate::losses::{Reduction, cross_entropy_with_logits, huber_loss, mse_loss};
pub use crate::nn::{
    Activation, Forward, Gru, Init, Linear, Lstm, Mlp, Module, Sequential, StackedGru, StackedLstm,
    soft_update,
};
pub use crate::{ApplyGradients, Param, Tape, Var};
pub use rlgrad_core::{Error, Result, Rng};
pub use rlgrad_optim::{Adam, AdamW, Optimizer, Rmsprop, Sgd};
pub use rlgrad_tensor::Tensor;
