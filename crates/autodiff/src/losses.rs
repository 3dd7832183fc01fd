//! Losses, composed of differentiable ops so that their gradients come from the tape.

use rlgrad_core::{Error, Float, Result};
use rlgrad_tensor::TensorDevice;

use crate::tape::Var;

/// How a loss reduces its elementwise terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reduction {
    /// The mean over all elements (PyTorch's default).
    Mean,
    /// The sum over all elements (Keras' `reduction="sum"`).
    Sum,
}

#[track_caller]
fn reduce<'t, T: Float, D: TensorDevice<T>>(
    terms: Var<'t, T, D>,
    reduction: Reduction,
) -> Result<Var<'t, T, D>> {
    match reduction {
        Reduction::Mean => terms.mean_all(),
        Reduction::Sum => terms.sum_all(),
    }
}

fn same_shape<T: Float, D: TensorDevice<T>>(
    function: &'static str,
    prediction: &Var<'_, T, D>,
    target: &Var<'_, T, D>,
) -> Result<()> {
    if prediction.shape() == target.shape() {
        Ok(())
    } else {
        Err(Error::shape(
            function,
            "target",
            format_args!("the prediction's shape {}", prediction.shape()),
            target.shape(),
        ))
    }
}

/// `reduce((prediction - target)^2)`: PyTorch's `mse_loss`. The shapes must be equal (a
/// silent broadcast of `[B]` against `[B, 1]` is a classic bug).
///
/// ```
/// use rlgrad_autodiff::{losses::{mse_loss, Reduction}, Tape};
/// use rlgrad_tensor::Tensor;
/// let tape = Tape::<f32>::new();
/// let p = tape.constant(&Tensor::from_vec(vec![1.0, 2.0], [2, 1])?);
/// let t = tape.constant(&Tensor::from_vec(vec![0.0, 0.0], [2, 1])?);
/// assert_eq!(mse_loss(&p, &t, Reduction::Mean)?.to_scalar()?, 2.5);
/// assert!(mse_loss(&p, &tape.constant(&Tensor::zeros([2])?), Reduction::Mean).is_err());
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[track_caller]
pub fn mse_loss<'t, T: Float, D: TensorDevice<T>>(
    prediction: &Var<'t, T, D>,
    target: &Var<'t, T, D>,
    reduction: Reduction,
) -> Result<Var<'t, T, D>> {
    same_shape("mse_loss", prediction, target)?;
    reduce(prediction.sub(target)?.square()?, reduction)
}

/// The Huber loss with threshold `delta`: `0.5 e^2` where `|e| <= delta`, else
/// `delta (|e| - 0.5 delta)`, for `e = prediction - target`, computed as Keras does
/// (`q = min(|e|, delta)`, `0.5 q^2 + delta (|e| - q)`). Errors: shapes differ, `delta`
/// not positive and finite.
#[track_caller]
pub fn huber_loss<'t, T: Float, D: TensorDevice<T>>(
    prediction: &Var<'t, T, D>,
    target: &Var<'t, T, D>,
    delta: T,
    reduction: Reduction,
) -> Result<Var<'t, T, D>> {
    same_shape("huber_loss", prediction, target)?;
    rlgrad_core::check::positive("huber_loss", "delta", delta.as_f64())?;
    let error = prediction.sub(target)?.abs()?;
    let quadratic = error.clamp(T::zero(), delta)?;
    let linear = error.sub(&quadratic)?;
    let terms = quadratic
        .square()?
        .mul_scalar(T::from_f64(0.5))?
        .add(&linear.mul_scalar(delta)?)?;
    reduce(terms, reduction)
}

/// Cross-entropy of `logits` `[B, C]` against class indices `targets` (`B` of them, each
/// below `C`): `-log_softmax(logits)[b, targets[b]]`, reduced (PyTorch's `cross_entropy`).
#[track_caller]
pub fn cross_entropy_with_logits<'t, T: Float, D: TensorDevice<T>>(
    logits: &Var<'t, T, D>,
    targets: &[usize],
    reduction: Reduction,
) -> Result<Var<'t, T, D>> {
    let function = "cross_entropy_with_logits";
    if logits.shape().ndim() != 2 {
        return Err(Error::shape(
            function,
            "logits",
            "[batch, classes]",
            logits.shape(),
        ));
    }
    let batch = logits.dims()[0];
    let picked = logits
        .log_softmax(1)?
        .gather(1, targets, [batch, 1])
        .map_err(|e| e.in_function(function))?;
    reduce(picked.neg()?, reduction)
}
