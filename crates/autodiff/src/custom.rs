//! Custom ops: a forward and a backward written by you (or by another crate), recorded on
//! the tape like any built-in op. The masked sequence ops of this crate are built on it.

use rlgrad_core::{Error, Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};
use smallvec::SmallVec;

use crate::backward::{CustomNode, Op};
use crate::tape::{Tape, Var};

/// An op with a hand-written gradient.
///
/// [`CustomOp::forward`] computes the output from the input values; [`CustomOp::backward`]
/// gets the same inputs, the output and the gradient of the loss with respect to the
/// output, and returns one gradient per input (`None` for an input that gets none, such as
/// an integer index passed as a tensor). Each gradient must have its input's shape; the
/// tape checks it and reports the op by name otherwise.
///
/// A softplus, `ln(1 + e^x)`, whose derivative is the sigmoid:
///
/// ```
/// use rlgrad_autodiff::{CustomOp, Param, Tape};
/// use rlgrad_core::Result;
/// use rlgrad_tensor::Tensor;
///
/// struct Softplus;
///
/// impl CustomOp<f64> for Softplus {
///     fn name(&self) -> &str {
///         "softplus"
///     }
///     fn forward(&self, inputs: &[&Tensor<f64>]) -> Result<Tensor<f64>> {
///         (&inputs[0].exp()? + 1.0)?.log()
///     }
///     fn backward(
///         &self,
///         inputs: &[&Tensor<f64>],
///         _output: &Tensor<f64>,
///         grad: &Tensor<f64>,
///     ) -> Result<Vec<Option<Tensor<f64>>>> {
///         Ok(vec![Some(grad.mul(&inputs[0].sigmoid()?)?)])
///     }
/// }
///
/// let x = Param::new("x", Tensor::from_vec(vec![0.0, 2.0], [2])?)?;
/// let tape = Tape::<f64>::new();
/// let y = tape.custom(Softplus, &[&tape.param(&x)])?.sum_all()?;
/// let grads = tape.gradient(&y, &[&x])?;
/// let dx = grads.get(&x)?.to_vec()?;
/// assert_eq!(dx[0], 0.5);
/// assert!((dx[1] - 1.0 / (1.0 + (-2.0f64).exp())).abs() < 1e-15);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub trait CustomOp<T: Float = f32, D: TensorDevice<T> = rlgrad_core::Cpu>: Send + 'static {
    /// A name for messages.
    fn name(&self) -> &str;

    /// The output for `inputs`.
    fn forward(&self, inputs: &[&Tensor<T, D>]) -> Result<Tensor<T, D>>;

    /// One gradient per input, from the gradient `grad` of the output.
    fn backward(
        &self,
        inputs: &[&Tensor<T, D>],
        output: &Tensor<T, D>,
        grad: &Tensor<T, D>,
    ) -> Result<Vec<Option<Tensor<T, D>>>>;
}

/// `Ok` when a custom op returned one gradient per input, each of its input's shape.
pub(crate) fn check_gradients<T: Float, D: TensorDevice<T>>(
    name: &str,
    inputs: &[&Tensor<T, D>],
    grads: &[Option<Tensor<T, D>>],
) -> Result<()> {
    if grads.len() != inputs.len() {
        return Err(Error::shape(
            "Tape::gradient",
            "loss",
            format_args!(
                "one gradient per input ({}) from custom op `{name}`",
                inputs.len()
            ),
            format_args!("{} gradients", grads.len()),
        ));
    }
    for (i, (input, grad)) in inputs.iter().zip(grads).enumerate() {
        if let Some(grad) = grad
            && grad.shape() != input.shape()
        {
            return Err(Error::shape(
                "Tape::gradient",
                "loss",
                format_args!(
                    "a gradient of shape {} for input {i} of custom op `{name}`",
                    input.shape()
                ),
                grad.shape(),
            ));
        }
    }
    Ok(())
}

impl<T: Float, D: TensorDevice<T>> Tape<T, D> {
    /// Applies a [`CustomOp`] to `inputs`, recording it for the backward pass.
    #[track_caller]
    pub fn custom<'t>(
        &'t self,
        op: impl CustomOp<T, D>,
        inputs: &[&Var<'t, T, D>],
    ) -> Result<Var<'t, T, D>> {
        for input in inputs {
            self.check_same("Tape::custom", "inputs", input)?;
        }
        let values: SmallVec<[Tensor<T, D>; 4]> =
            inputs.iter().map(|v| v.value().clone()).collect();
        let output = {
            let refs: SmallVec<[&Tensor<T, D>; 4]> = values.iter().collect();
            op.forward(&refs)?
        };
        let nodes: SmallVec<[Option<usize>; 4]> = inputs.iter().map(|v| v.node()).collect();
        self.record("Tape::custom", output.clone(), inputs, || {
            Op::Custom(Box::new(CustomNode {
                op: Box::new(op),
                inputs: nodes.clone(),
                values,
                output,
            }))
        })
    }
}
