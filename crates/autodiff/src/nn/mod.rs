//! Modules: parameters in a stable order, layers, target-network updates and
//! regularization.
//!
//! A [`Module`] owns [`Param`](crate::Param)s and visits them in a fixed order; that order and the
//! parameters' names are what optimizers, checkpoints and [`soft_update`] go by. Layers that
//! map one variable to one variable also implement [`Forward`]; [`Sequential`] chains them.
//! `#[derive(Module)]` writes the impl for a struct of modules.

mod activation;
mod linear;
mod mlp;
mod recurrent;
mod sequential;
mod stacked;

pub use crate::module::{Module, child_path, hard_update, soft_update};
pub use activation::Activation;
pub use linear::{Init, Linear};
pub use mlp::Mlp;
pub use recurrent::{Cell, CellDevice, Gru, GruCell, Lstm, LstmCell, LstmState, Recurrent};
/// `#[derive(Module)]`: see [`Module`] and the `rlgrad-derive` crate.
pub use rlgrad_derive::Module;
pub use sequential::{Layer, Sequential};
pub use stacked::{RnnConfig, StackedGru, StackedLstm, StackedRecurrent};

use rlgrad_core::{Cpu, Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::tape::{Tape, Var};

/// A module that maps one variable to one variable (a layer, an MLP, an activation).
pub trait Forward<T: Float = f32, D: TensorDevice<T> = Cpu>: Module<T, D> {
    /// The output for `x`, recorded on `tape`.
    fn forward<'t>(&self, tape: &'t Tape<T, D>, x: &Var<'t, T, D>) -> Result<Var<'t, T, D>>;
}

/// The sum of the L2 penalties `c * sum(w^2)` of the parameters of `module` that have one
/// ([`Param::set_l2`](crate::Param::set_l2), [`Linear::with_kernel_l2`]): Keras' `kernel_regularizer=l2(c)`
/// losses, added in parameter order, as one loss term. Zero (a constant) when no
/// parameter has a penalty.
#[track_caller]
pub fn l2_penalty<'t, T: Float, D: TensorDevice<T>>(
    tape: &'t Tape<T, D>,
    module: &(impl Module<T, D> + ?Sized),
) -> Result<Var<'t, T, D>> {
    let mut total: Option<Var<'t, T, D>> = None;
    let mut failure = None;
    module.visit(&mut |p| {
        let Some(c) = p.l2() else { return };
        let term = tape
            .param(p)
            .square()
            .and_then(|sq| sq.sum_all())
            .and_then(|sum| &sum * T::from_f64(c));
        match (term, total.take()) {
            (Ok(term), None) => total = Some(term),
            (Ok(term), Some(sum)) => match &sum + &term {
                Ok(next) => total = Some(next),
                Err(e) => failure = Some(e),
            },
            (Err(e), previous) => {
                total = previous;
                failure = Some(e);
            }
        }
    });
    if let Some(e) = failure {
        return Err(e.in_function("l2_penalty"));
    }
    match total {
        Some(total) => Ok(total),
        None => Ok(tape.constant(&Tensor::from_vec_on(
            tape.device(),
            vec![T::zero()],
            rlgrad_core::Shape::scalar(),
        )?)),
    }
}
