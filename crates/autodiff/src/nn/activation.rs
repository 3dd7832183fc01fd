//! Activation functions as modules without parameters.

use rlgrad_core::{Device, Float, Result};
use rlgrad_tensor::TensorDevice;

use super::{Forward, Module};
use crate::param::Param;
use crate::tape::{Tape, Var};

/// An elementwise activation. As a [`Forward`] module it has no parameters, so it can
/// sit between layers; [`Activation::apply`] applies it to a variable directly.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Activation {
    /// `max(x, 0)`
    Relu,
    /// `tanh x`
    Tanh,
    /// `1 / (1 + e^-x)`
    Sigmoid,
    /// `x`
    Identity,
}

impl Activation {
    /// The activation of `x`.
    #[track_caller]
    pub fn apply<'t, T: Float, D: TensorDevice<T>>(
        self,
        x: &Var<'t, T, D>,
    ) -> Result<Var<'t, T, D>> {
        match self {
            Self::Relu => x.relu(),
            Self::Tanh => x.tanh(),
            Self::Sigmoid => x.sigmoid(),
            Self::Identity => Ok(x.clone()),
        }
    }
}

impl<T: Float, D: Device> Module<T, D> for Activation {
    fn visit<'a>(&'a self, _f: &mut dyn FnMut(&'a Param<T, D>)) {}
    fn visit_mut<'a>(&'a mut self, _f: &mut dyn FnMut(&'a mut Param<T, D>)) {}
}

impl<T: Float, D: TensorDevice<T>> Forward<T, D> for Activation {
    #[track_caller]
    fn forward<'t>(&self, _tape: &'t Tape<T, D>, x: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        self.apply(x)
    }
}
