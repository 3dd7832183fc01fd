//! The softplus `ln(1 + e^x)` as one differentiable op, in its stable form.

use rlgrad_autodiff::{CustomOp, Var};
use rlgrad_core::{Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};

struct Softplus;

/// `ln(1 + y)` for `y >= 0`, accurate to a few ulps where `1 + y` rounds to 1 or near
/// it: with `w = 1 + y` and `d = w - 1` (exact), `y` where `d == 0`, else
/// `y * (ln(w) / d)` (Goldberg's correction of the rounding of `w`).
fn log1p<T: Float, D: TensorDevice<T>>(y: &Tensor<T, D>) -> Result<Tensor<T, D>> {
    let w = (y + T::one())?;
    let d = (&w - T::one())?;
    let accurate = y.mul(&w.log()?.div(&d)?)?;
    let zero = Tensor::zeros_on(y.device(), rlgrad_core::Shape::scalar())?;
    d.eq(&zero)?.where_cond(y, &accurate)
}

impl<T: Float, D: TensorDevice<T>> CustomOp<T, D> for Softplus {
    fn name(&self) -> &str {
        "softplus"
    }

    fn forward(&self, inputs: &[&Tensor<T, D>]) -> Result<Tensor<T, D>> {
        let x = inputs[0];
        // max(x, 0) + log1p(e^-|x|): e^-|x| <= 1 never overflows.
        let y = x.abs()?.neg()?.exp()?;
        x.relu()?.add(&log1p(&y)?)
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

/// `softplus(x) = ln(1 + e^x)`, elementwise, computed as `max(x, 0) + log1p(e^-|x|)`:
/// it never overflows, and for very negative `x` it is `e^x` to a few ulps, not 0
/// (`log1p(y)` is `y * (ln(w) / (w - 1))` with `w = 1 + y`, or `y` where `w == 1`).
/// Its gradient is `sigmoid(x)` (the rlgrad sigmoid, stable on both sides), exactly
/// PyTorch's `softplus` backward.
///
/// ```
/// use rlgrad_autodiff::{Param, Tape};
/// use rlgrad_tensor::Tensor;
/// let x = Param::new("x", Tensor::from_vec(vec![0.0f64, -800.0, 800.0, -40.0], [4])?)?;
/// let tape = Tape::new();
/// let y = rlgrad_distributions::softplus(&tape.param(&x))?.to_vec()?;
/// assert_eq!(y[..3], [std::f64::consts::LN_2, 0.0, 800.0]);
/// assert!((y[3] / (-40.0f64).exp() - 1.0).abs() < 1e-15); // not 0
/// let grads = tape.gradient(&rlgrad_distributions::softplus(&tape.param(&x))?.sum_all()?, &[&x])?;
/// assert_eq!(grads.get(&x)?.to_vec()?[..3], [0.5, 0.0, 1.0]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn softplus<'t, T: Float, D: TensorDevice<T>>(x: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
    x.tape().custom(Softplus, &[x])
}
