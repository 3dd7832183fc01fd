//! The glue to `rlgrad-optim`: parameters and their gradients handed to an optimizer by
//! name.

use rlgrad_core::kernels::OptimKernel;
use rlgrad_core::{Error, Float, Result};
use rlgrad_optim::{DeviceParam, Optimizer};
use rlgrad_tensor::TensorDevice;
use smallvec::SmallVec;

use crate::finite::NonFinite;
use crate::gradients::Gradients;
use crate::module::Module;
use crate::param::Param;
use crate::tape::Var;

/// One optimizer step over a module's parameters with the gradients of a tape, matched
/// by parameter identity and handed to the optimizer under the parameters' names (Keras'
/// `optimizer.apply_gradients(zip(grads, model.trainable_variables))`).
///
/// Every parameter of the module must have a gradient: one the loss does not depend on is
/// an error naming it, and nothing changes (ask for the gradients of the parameters you
/// train). The update is the optimizer's fused kernel on each parameter's buffer, in place;
/// a tape still holding the old values keeps them (copy on write). When the optimizer's
/// finite check finds a NaN or an infinity ([`Optimizer::check_finite`]) and the tape
/// checked too ([`crate::Tape::check_finite`]), the error names where the first one came
/// from ([`crate::NonFinite`]).
pub trait ApplyGradients<T: Float, D: TensorDevice<T>> {
    /// One step over the parameters of `module`.
    ///
    /// ```
    /// use rlgrad_autodiff::{ApplyGradients, Param, Tape};
    /// use rlgrad_optim::{Optimizer, Sgd};
    /// use rlgrad_tensor::Tensor;
    /// let mut w = Param::new("w", Tensor::from_vec(vec![1.0f32, 2.0], [2])?)?;
    /// let mut sgd = Optimizer::<f32>::new(Sgd::default(), 0.5)?;
    /// let tape = Tape::new();
    /// let loss = tape.param(&w).square()?.sum_all()?;
    /// let grads = tape.gradient(&loss, &[&w])?;
    /// sgd.apply_gradients(&mut w, &grads)?;
    /// assert_eq!(w.value().to_vec()?, [0.0, 0.0]); // w - 0.5 * 2w
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    fn apply_gradients<M: Module<T, D> + ?Sized>(
        &mut self,
        module: &mut M,
        grads: &Gradients<T, D>,
    ) -> Result<()>;

    /// The gradient of `loss` with respect to the parameters of `module`, then one step
    /// over them: [`crate::Tape::gradient`] on the loss's tape, then
    /// [`ApplyGradients::apply_gradients`], with their errors (Keras'
    /// `optimizer.minimize(loss, var_list, tape)`; PyTorch's `zero_grad()`,
    /// `loss.backward()`, `step()`).
    ///
    /// ```
    /// use rlgrad_autodiff::{ApplyGradients, Param, Tape};
    /// use rlgrad_optim::{Optimizer, Sgd};
    /// use rlgrad_tensor::Tensor;
    /// let mut w = Param::new("w", Tensor::from_vec(vec![1.0f32, 2.0], [2])?)?;
    /// let mut sgd = Optimizer::<f32>::new(Sgd::default(), 0.25)?;
    /// let tape = Tape::new();
    /// sgd.minimize(&tape.param(&w).square()?.sum_all()?, &mut w)?;
    /// assert_eq!(w.value().to_vec()?, [0.5, 1.0]); // w - 0.25 * 2w
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    fn minimize<M: Module<T, D>>(&mut self, loss: &Var<'_, T, D>, module: &mut M) -> Result<()> {
        let grads = loss.tape().gradient(loss, &[&*module])?;
        self.apply_gradients(module, &grads)
    }
}

impl<T: Float, D: TensorDevice<T> + OptimKernel<T>> ApplyGradients<T, D> for Optimizer<T, D> {
    fn apply_gradients<M: Module<T, D> + ?Sized>(
        &mut self,
        module: &mut M,
        grads: &Gradients<T, D>,
    ) -> Result<()> {
        let function = "Optimizer::apply_gradients";
        let mut params: SmallVec<[&mut Param<T, D>; 16]> = SmallVec::new();
        module.visit_mut(&mut |p| params.push(p));
        for p in &params {
            let connected = grads.by_param(p.id()).is_some_and(|e| e.grad().is_some());
            if !connected {
                return Err(Error::value(
                    function,
                    "grads",
                    "a gradient for every parameter of the module",
                    format_args!("none for `{}`", p.name()),
                ));
            }
        }
        let mut steps: SmallVec<[DeviceParam<'_, T, D>; 16]> = SmallVec::new();
        for p in params {
            let grad = grads
                .by_param(p.id())
                .and_then(|e| e.grad())
                .and_then(|g| g.dense_buffer())
                .expect("gradients are dense and were checked above");
            let (name, value) = p.name_and_buffer()?;
            steps.push(DeviceParam { name, value, grad });
        }
        self.step_on(&mut steps)
            .map_err(|e| with_origin(e.in_function(function), grads.first_non_finite()))
    }
}

/// The step's error, with the origin of the tape's first non-finite value appended when it
/// is the optimizer's finite check that failed and the tape checked too.
fn with_origin(error: Error, origin: Option<&NonFinite>) -> Error {
    match (error, origin) {
        (
            Error::Value {
                function,
                argument,
                expected,
                got,
            },
            Some(origin),
        ) if expected.starts_with("finite gradients") => Error::value(
            function,
            argument,
            expected,
            format_args!("{got}; the tape's first non-finite value: {origin}"),
        ),
        (error, _) => error,
    }
}
