//! Argument checks shared by the distributions: each names the public function and the
//! argument, what was expected and what came.

use rlgrad_autodiff::Var;
use rlgrad_core::{Error, Float, Result};
use rlgrad_tensor::TensorDevice;

/// `(B, A)` of a `[B, A]` parameter with at least one entry per row.
pub(crate) fn matrix<T: Float, D: TensorDevice<T>>(
    function: &'static str,
    argument: &'static str,
    x: &Var<'_, T, D>,
) -> Result<(usize, usize)> {
    match *x.dims() {
        [b, a] if a > 0 => Ok((b, a)),
        _ => Err(Error::shape(
            function,
            argument,
            "[B, A] with A >= 1 (a batch of rows)",
            x.shape(),
        )),
    }
}

/// `x` broadcast to `dims` (a `[A]`, `[1, A]` or `[B, A]` scale for a `[B, A]` location),
/// or an error naming `argument`.
pub(crate) fn broadcast_to<'t, T: Float, D: TensorDevice<T>>(
    function: &'static str,
    argument: &'static str,
    x: &Var<'t, T, D>,
    dims: &[usize],
) -> Result<Var<'t, T, D>> {
    if x.dims() == dims {
        return Ok(x.clone());
    }
    let fits = x.shape().ndim() <= dims.len()
        && x.dims()
            .iter()
            .rev()
            .zip(dims.iter().rev())
            .all(|(&s, &d)| s == d || s == 1);
    if !fits {
        return Err(Error::shape(
            function,
            argument,
            format_args!(
                "a shape that broadcasts to {dims:?} (e.g. [{}])",
                dims[dims.len() - 1]
            ),
            x.shape(),
        ));
    }
    x.broadcast_to(dims.to_vec())
}

/// `Ok` when `x` lives on the tape of `like`.
pub(crate) fn same_tape<T: Float, D: TensorDevice<T>>(
    function: &'static str,
    argument: &'static str,
    x: &Var<'_, T, D>,
    like: &Var<'_, T, D>,
) -> Result<()> {
    if std::ptr::eq(x.tape(), like.tape()) {
        Ok(())
    } else {
        Err(Error::value(
            function,
            argument,
            "a variable of the distribution's tape",
            "a variable of another tape",
        ))
    }
}

/// `Ok` when `x` lives on the tape of `like` and has its shape.
pub(crate) fn same_shape<T: Float, D: TensorDevice<T>>(
    function: &'static str,
    argument: &'static str,
    x: &Var<'_, T, D>,
    like: &Var<'_, T, D>,
) -> Result<()> {
    same_tape(function, argument, x, like)?;
    let dims = like.dims();
    if x.dims() == dims {
        Ok(())
    } else {
        Err(Error::shape(
            function,
            argument,
            format_args!("{dims:?}, the shape of the distribution's parameters"),
            x.shape(),
        ))
    }
}
