//! The softplus `ln(1 + e^x)` as one differentiable op, in its stable form.

use rlgrad_autodiff::{CustomOp, Var};
use rlgrad_core::{Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};

struct Softplus;

impl<T: Float, D: TensorDevice<T>> CustomOp<T, D> for Softplus {
    fn name(&self) -> &str {
        "softplus"
    }

    fn forward(&self, inputs: &[&Tensor<T, D>]) -> Result<Tensor<T, D>> {
        let x = inputs[0];
        // max(x, 0) + ln(1 + e^-|x|): e^-|x| <= 1 never overflows.
        let tail = (&x.abs()?.neg()?.exp()? + T::one())?.log()?;
        x.relu()?.add(&tail)
    }

    fn backward(
        &self,
        inputs: &[&Tensor<T, D>],
        _output: &Tensor<T, D>,
        grad: &Tensor<T, D>,
    ) -> Result<Vec<Option<Tensor<T, D>>>> {
        Ok(vec![Some(grad.mul(&inputs[0].sigmoid()?)?)])
    }
}

/// `softplus(x) = ln(1 + e^x)`, elementwise, computed as `max(x, 0) + ln(1 + e^-|x|)`
/// (never overflows; `softplus(-x)` for large `x` is `ln(1 + e^-x)`, not `0 - x + x`).
/// Its gradient is `sigmoid(x)` (the rlgrad sigmoid, stable on both sides), exactly
/// PyTorch's `softplus` backward.
///
/// ```
/// use rlgrad_autodiff::{Param, Tape};
/// use rlgrad_tensor::Tensor;
/// let x = Param::new("x", Tensor::from_vec(vec![0.0f64, -800.0, 800.0], [3])?)?;
/// let tape = Tape::new();
/// let y = rlgrad_distributions::softplus(&tape.param(&x))?;
/// assert_eq!(y.to_vec()?, [std::f64::consts::LN_2, 0.0, 800.0]);
/// let grads = tape.gradient(&y.sum_all()?, &[&x])?;
/// assert_eq!(grads.get(&x)?.to_vec()?, [0.5, 0.0, 1.0]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn softplus<'t, T: Float, D: TensorDevice<T>>(x: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
    x.tape().custom(Softplus, &[x])
}
