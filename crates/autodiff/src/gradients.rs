//! What [`crate::Tape::gradient`] returns.

use std::fmt;
use std::sync::Arc;

use rlgrad_core::{Cpu, Error, Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};
use smallvec::SmallVec;

use crate::finite::NonFinite;
use crate::param::{Param, ParamId};

pub(crate) struct Entry<T: Float, D: TensorDevice<T>> {
    id: ParamId,
    name: Arc<str>,
    pub(crate) grad: Option<Tensor<T, D>>,
}

impl<T: Float, D: TensorDevice<T>> Entry<T, D> {
    pub(crate) fn new(param: &Param<T, D>) -> Self {
        Self {
            id: param.id(),
            name: Arc::clone(param.shared_name()),
            grad: None,
        }
    }
}

/// The result of [`crate::Tape::gradient`]: one gradient per requested parameter, each a
/// dense tensor of the parameter's shape, or none when the loss does not depend on it.
pub struct Gradients<T: Float = f32, D: TensorDevice<T> = Cpu> {
    entries: SmallVec<[Entry<T, D>; 8]>,
    non_finite: Option<NonFinite>,
}

impl<T: Float, D: TensorDevice<T>> Gradients<T, D> {
    pub(crate) fn new(entries: SmallVec<[Entry<T, D>; 8]>, non_finite: Option<NonFinite>) -> Self {
        Self {
            entries,
            non_finite,
        }
    }

    /// The origin of the first NaN or infinity of the tape these gradients came from, when
    /// its finite check was on ([`crate::Tape::check_finite`]); an optimizer step with its
    /// own finite check on names it in its error ([`crate::ApplyGradients`]).
    pub fn first_non_finite(&self) -> Option<&NonFinite> {
        self.non_finite.as_ref()
    }

    /// The gradient of `param`. Errors: `param` was not among the requested sources, or
    /// the loss does not depend on it (the message names it).
    pub fn get(&self, param: &Param<T, D>) -> Result<&Tensor<T, D>> {
        let entry = self.by_param(param.id()).ok_or_else(|| {
            Error::value(
                "Gradients::get",
                "param",
                "a parameter the gradient was asked for",
                format_args!("`{}`", param.name()),
            )
        })?;
        entry.grad.as_ref().ok_or_else(|| {
            Error::value(
                "Gradients::get",
                "param",
                "a parameter the loss depends on",
                format_args!("`{}`, which the loss does not depend on", param.name()),
            )
        })
    }

    /// Whether the loss depends on `param` (`false` also when it was not requested).
    pub fn is_connected(&self, param: &Param<T, D>) -> bool {
        self.get(param).is_ok()
    }

    /// The gradient of the parameter named `name`, if one was requested and connected.
    pub fn by_name(&self, name: &str) -> Option<&Tensor<T, D>> {
        self.entries
            .iter()
            .find(|e| &*e.name == name)
            .and_then(|e| e.grad.as_ref())
    }

    pub(crate) fn by_param(&self, id: ParamId) -> Option<&Entry<T, D>> {
        self.entries.iter().find(|e| e.id == id)
    }

    /// The number of requested parameters.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no parameter was requested.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Each requested parameter in order: its name and its gradient (`None` when the loss
    /// does not depend on it).
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<&Tensor<T, D>>)> {
        self.entries.iter().map(|e| (&*e.name, e.grad.as_ref()))
    }

    /// The names of the requested parameters the loss does not depend on.
    pub fn unconnected(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .filter(|e| e.grad.is_none())
            .map(|e| &*e.name)
    }
}

impl<T: Float, D: TensorDevice<T>> Entry<T, D> {
    pub(crate) fn grad(&self) -> Option<&Tensor<T, D>> {
        self.grad.as_ref()
    }
}

impl<T: Float> Gradients<T, Cpu> {
    /// Scales every gradient by `max_norm / norm` when their global L2 norm exceeds
    /// `max_norm` (PyTorch's `clip_grad_norm_`, TensorFlow's `clip_by_global_norm`) and
    /// returns the norm before clipping: [`rlgrad_optim::clip_grad_norm`]'s canonical
    /// order over the gradients in request order. An error for a non-positive or
    /// non-finite `max_norm`.
    pub fn clip_global_norm(&mut self, max_norm: f64) -> Result<T> {
        let mut buffers: SmallVec<[&mut [T]; 8]> = SmallVec::new();
        for entry in &mut self.entries {
            if let Some(grad) = &mut entry.grad {
                buffers.push(grad.make_mut()?.as_mut_slice());
            }
        }
        rlgrad_optim::clip_grad_norm(&mut buffers, max_norm)
            .map_err(|e| e.in_function("Gradients::clip_global_norm"))
    }
}

impl<T: Float, D: TensorDevice<T>> fmt::Debug for Gradients<T, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for (name, grad) in self.iter() {
            list.entry(&(name, grad.map(|g| g.shape().clone())));
        }
        list.finish()
    }
}
