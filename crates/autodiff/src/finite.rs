//! The first non-finite value of a tape, named: what [`crate::Tape::check_finite`] finds.

use std::fmt;
use std::panic::Location;
use std::sync::Arc;

use rlgrad_core::{Float, Result, Shape, check};
use rlgrad_tensor::{Tensor, TensorDevice};

/// Where the first NaN or infinity of a [`crate::Tape`] with the finite check on came from
/// ([`crate::Tape::check_finite`]): the op that produced it, where your code called that
/// op, the shapes of its inputs and the parameters they depend on.
///
/// Its `Display` is one line:
/// ``Var::log at src/agent.rs:41:22 produced NaN at element 3 of its output (inputs [64, 1]; parameters critic.l2.weight, critic.l2.bias)``.
#[derive(Debug, Clone)]
pub struct NonFinite {
    /// The op, as its errors name it (`"Var::log"`, `"Linear::forward"`'s `"Var::linear"`).
    pub op: &'static str,
    /// The call in your code: the op method you called, or the layer's `forward`.
    pub location: &'static Location<'static>,
    /// `false`: the op's output was non-finite; `true`: its output was finite and the
    /// gradient its backward sent to an input was not (`sqrt` at 0, say).
    pub in_backward: bool,
    /// The shapes of the op's inputs that are variables, in order (for an origin in the
    /// backward: of the inputs its backward sent gradients to).
    pub input_shapes: Vec<Shape>,
    /// The parameters the op's inputs depend on, in the order they went on the tape.
    pub params: Vec<String>,
    /// The index of the first non-finite element (row-major) of the output, or of the
    /// gradient sent back.
    pub index: usize,
    /// That element.
    pub value: f64,
}

/// Equal when every field is, the value by its bits (so that a NaN origin equals itself).
impl PartialEq for NonFinite {
    fn eq(&self, other: &Self) -> bool {
        (
            self.op,
            self.location,
            self.in_backward,
            self.index,
            self.value.to_bits(),
        ) == (
            other.op,
            other.location,
            other.in_backward,
            other.index,
            other.value.to_bits(),
        ) && self.input_shapes == other.input_shapes
            && self.params == other.params
    }
}

impl fmt::Display for NonFinite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.in_backward {
            "the gradient its backward sent to an input"
        } else {
            "its output"
        };
        write!(
            f,
            "{} at {} produced {} at element {} of {what} (inputs ",
            self.op, self.location, self.value, self.index
        )?;
        if self.input_shapes.is_empty() {
            f.write_str("none")?;
        }
        for (i, shape) in self.input_shapes.iter().enumerate() {
            write!(f, "{}{shape}", if i == 0 { "" } else { ", " })?;
        }
        if self.params.is_empty() {
            f.write_str("; no parameters)")
        } else {
            write!(f, "; parameters {})", self.params.join(", "))
        }
    }
}

/// What the finite check keeps of a recorded node, to name it if it turns out to be the
/// origin.
#[derive(Debug, Clone)]
pub(crate) struct NodeOrigin {
    pub op: &'static str,
    pub location: &'static Location<'static>,
    /// The parameter's name, for a parameter's leaf.
    pub param: Option<Arc<str>>,
}

/// The index and value of the first non-finite element of `tensor`. Read in place where
/// the device allows ([`rlgrad_core::Device::host_slice`]): the whole buffer under the
/// view when it is at most twice the view's size (every element of a view is in its
/// buffer, so a finite buffer is a finite view; a broadcast gradient is checked without a
/// copy), the view's elements otherwise, or downloaded from a device.
pub(crate) fn first_non_finite<T: Float, D: TensorDevice<T>>(
    tensor: &Tensor<T, D>,
) -> Result<Option<(usize, f64)>> {
    let device = tensor.device();
    let view = tensor.view();
    let small = device.buffer_len(view.buffer) <= 2 * tensor.numel().max(1);
    if let Some(all) = device.host_slice(view.buffer).filter(|_| small) {
        match check::first_non_finite(all) {
            None => return Ok(None),
            Some(i) if tensor.dense_buffer().is_some() => return Ok(Some((i, all[i].as_f64()))),
            Some(_) => {}
        }
    }
    let dense = tensor.dense()?;
    let buffer = dense
        .dense_buffer()
        .expect("Tensor::dense gives a tensor with a dense buffer");
    let values = device.host_values(buffer)?;
    Ok(check::first_non_finite(&values).map(|i| (i, values[i].as_f64())))
}
