//! Modules: parameters in a stable order, layers, target-network updates and
//! regularization.
//!
//! A [`Module`] owns [`Param`]s and visits them in a fixed order; that order and the
//! parameters' names are what optimizers, checkpoints and [`soft_update`] go by. Layers that
//! map one variable to one variable also implement [`Forward`].

mod activation;
mod linear;
mod mlp;
mod recurrent;

pub use activation::Activation;
pub use linear::{Init, Linear};
pub use mlp::Mlp;
pub use recurrent::{Cell, CellDevice, Gru, GruCell, Lstm, LstmCell, LstmState, Recurrent};

use rlgrad_core::{Cpu, Device, Error, Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::param::Param;
use crate::tape::{Tape, Var};

/// Something that owns parameters: a layer, a network, a pair of twin critics.
///
/// Implement it by visiting your fields in a fixed order; the names come from the
/// parameters themselves (given when the layers are built):
///
/// ```
/// use rlgrad_autodiff::nn::{Forward, Init, Linear, Module};
/// use rlgrad_autodiff::{Param, Tape, Var};
/// use rlgrad_core::{Result, Rng};
///
/// struct TwinCritic {
///     q1: Linear,
///     q2: Linear,
/// }
///
/// impl Module for TwinCritic {
///     fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param)) {
///         self.q1.visit(f);
///         self.q2.visit(f);
///     }
///     fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param)) {
///         self.q1.visit_mut(f);
///         self.q2.visit_mut(f);
///     }
/// }
///
/// let mut rng = Rng::new(0, "init");
/// let critic = TwinCritic {
///     q1: Linear::new("critic/q1", 4, 1, Init::TorchDefault, &mut rng)?,
///     q2: Linear::new("critic/q2", 4, 1, Init::TorchDefault, &mut rng)?,
/// };
/// let names: Vec<&str> = critic.parameters().iter().map(|p| p.name()).collect();
/// assert_eq!(names, ["critic/q1/weight", "critic/q1/bias", "critic/q2/weight", "critic/q2/bias"]);
/// assert_eq!(critic.num_parameters(), 10);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub trait Module<T: Float = f32, D: Device = Cpu> {
    /// Calls `f` for every parameter, always in the same order.
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<T, D>));

    /// Calls `f` for every parameter, mutably, in the order of [`Module::visit`].
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<T, D>));

    /// The parameters, in order.
    fn parameters(&self) -> Vec<&Param<T, D>> {
        let mut params = Vec::new();
        self.visit(&mut |p| params.push(p));
        params
    }

    /// The number of scalar parameters.
    fn num_parameters(&self) -> usize {
        let mut count = 0;
        self.visit(&mut |p| count += p.value().numel());
        count
    }
}

/// A module that maps one variable to one variable (a layer, an MLP, an activation).
pub trait Forward<T: Float = f32, D: TensorDevice<T> = Cpu>: Module<T, D> {
    /// The output for `x`, recorded on `tape`.
    fn forward<'t>(&self, tape: &'t Tape<T, D>, x: &Var<'t, T, D>) -> Result<Var<'t, T, D>>;
}

impl<T: Float, D: Device> Module<T, D> for Param<T, D> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<T, D>)) {
        f(self);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<T, D>)) {
        f(self);
    }
}

/// A target parameter and the source parameter it follows.
type Pair<'a, T, D> = (&'a mut Param<T, D>, &'a Param<T, D>);

/// Pairs the parameters of `target` and `source` in order, checking that both have the
/// same names and shapes; errors name the first parameter that differs.
fn paired<'a, T: Float, D: Device>(
    function: &'static str,
    target: &'a mut (impl Module<T, D> + ?Sized),
    source: &'a (impl Module<T, D> + ?Sized),
) -> Result<Vec<Pair<'a, T, D>>> {
    let sources = source.parameters();
    let mut targets = Vec::with_capacity(sources.len());
    target.visit_mut(&mut |p| targets.push(p));
    if targets.len() != sources.len() {
        return Err(Error::state(
            function,
            "source",
            format_args!("{} parameters like the target", targets.len()),
            format_args!("{} parameters", sources.len()),
        ));
    }
    for (t, s) in targets.iter().zip(&sources) {
        if t.name() != s.name() || t.shape() != s.shape() {
            return Err(Error::state(
                function,
                "source",
                format_args!("`{}` of shape {} (the target's)", t.name(), t.shape()),
                format_args!("`{}` of shape {}", s.name(), s.shape()),
            ));
        }
    }
    Ok(targets.into_iter().zip(sources).collect())
}

/// Polyak averaging of a target network, `target = tau * source + (1 - tau) * target` for
/// every parameter (TD3's and DDPG's soft update), with `1 - tau` computed in f64: the
/// same bits as [`rlgrad_optim::polyak_update`]. Errors: `tau` outside `[0, 1]`, or
/// modules whose parameters differ in number, names or shapes (the first difference is
/// named); nothing changes on error.
///
/// ```
/// use rlgrad_autodiff::nn::{soft_update, Init, Linear};
/// use rlgrad_core::Rng;
/// let mut rng = Rng::new(1, "init");
/// let actor = Linear::<f32>::new("actor/l1", 3, 2, Init::TorchDefault, &mut rng)?;
/// let mut target = actor.clone();
/// soft_update(&mut target, &actor, 0.005)?;
/// let other = Linear::<f32>::new("critic/l1", 3, 2, Init::TorchDefault, &mut rng)?;
/// let err = soft_update(&mut target, &other, 0.005).unwrap_err();
/// assert!(err.to_string().contains("`critic/l1/weight`"), "{err}");
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn soft_update<T: Float, D: TensorDevice<T>>(
    target: &mut (impl Module<T, D> + ?Sized),
    source: &(impl Module<T, D> + ?Sized),
    tau: f64,
) -> Result<()> {
    rlgrad_core::check::unit_interval("soft_update", "tau", tau)?;
    let (tau_t, keep) = (T::from_f64(tau), T::from_f64(1.0 - tau));
    let pairs = paired("soft_update", target, source)?;
    let updated = pairs
        .iter()
        .map(|(t, s)| (s.value() * tau_t)?.add(&(t.value() * keep)?))
        .collect::<Result<Vec<Tensor<T, D>>>>()?;
    for ((t, _), value) in pairs.into_iter().zip(updated) {
        t.set_value(value)?;
    }
    Ok(())
}

/// Copies every parameter of `source` into `target` (a hard target-network update),
/// checking names and shapes as [`soft_update`] does.
pub fn hard_update<T: Float, D: Device>(
    target: &mut (impl Module<T, D> + ?Sized),
    source: &(impl Module<T, D> + ?Sized),
) -> Result<()> {
    for (t, s) in paired("hard_update", target, source)? {
        t.set_value(s.value().clone())?;
    }
    Ok(())
}

/// The sum of the L2 penalties `c * sum(w^2)` of the parameters of `module` that have one
/// ([`Param::set_l2`], [`Linear::with_kernel_l2`]): Keras' `kernel_regularizer=l2(c)`
/// losses, added in parameter order, as one loss term. Zero (a constant) when no
/// parameter has a penalty.
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
