//! [`Module`]: what owns parameters, visited in a fixed order, by name and by path; the
//! containers that are modules when their elements are; target-network updates.
//!
//! This file sits below the tape: the tape takes modules as the sources of a gradient,
//! and `#[derive(Module)]` (from `rlgrad-derive`, re-exported here) builds on the trait.

use rlgrad_core::kernels::OptimKernel;
use rlgrad_core::{Cpu, Device, Error, Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::param::Param;

/// `prefix/child`, or `child` for an empty prefix: how a parameter's path grows by one
/// field name (or index) at each level of a module. `/` is the separator everywhere in
/// rlgrad (parameter names, checkpoint entries).
///
/// ```
/// use rlgrad_autodiff::nn::child_path;
/// assert_eq!(child_path("actor", "l1"), "actor/l1");
/// assert_eq!(child_path("", "l1"), "l1");
/// ```
pub fn child_path(prefix: &str, child: &str) -> String {
    if prefix.is_empty() {
        child.to_owned()
    } else {
        format!("{prefix}/{child}")
    }
}

/// Something that owns parameters: a layer, a network, a pair of twin critics, an agent.
///
/// A module visits its parameters in a fixed order ([`Module::visit`]); that order is
/// what target-network updates and gradients go by. Each parameter has two names:
///
/// - its **name** ([`Param::name`]), given when it was built (`Linear::new("actor/l1", ..)`
///   names `actor/l1/weight`): what optimizers and [`soft_update`] key on;
/// - its **path** in the module ([`Module::named_parameters`], PyTorch's
///   `named_parameters`): the field names down to it, joined by `/` (`l1/weight` inside
///   an `Actor { l1: Linear, .. }`, `actor/l1/weight` one level up, `layers/0/weight` in
///   a `Vec`): where `rlgrad-checkpoint`'s `put_module(prefix, ..)` stores it, below the
///   prefix. [`Module::name_by_path`] makes the names the paths, so that a module built
///   from layers with throwaway names is named by its structure.
///
/// Derive it for a struct whose fields are modules (layers, `Param`s, `Vec`s, `Option`s
/// and `Box`es of modules); `#[module(skip)]` leaves out a field that is not one:
///
/// ```
/// use rlgrad_autodiff::nn::{Init, Linear, Module};
/// use rlgrad_autodiff::Param;
/// use rlgrad_core::{Result, Rng};
/// use rlgrad_tensor::Tensor;
///
/// #[derive(Module, Clone)]
/// struct Critic {
///     q1: Linear,
///     q2: Option<Linear>,
///     log_alpha: Param,
///     #[module(skip)]
///     updates: u64,
/// }
///
/// let mut rng = Rng::new(0, "init");
/// let critic = Critic {
///     q1: Linear::new("q1", 4, 1, Init::TorchDefault, &mut rng)?,
///     q2: Some(Linear::new("q2", 4, 1, Init::TorchDefault, &mut rng)?),
///     log_alpha: Param::new("log_alpha", Tensor::zeros([1])?)?,
///     updates: 0,
/// };
/// let paths: Vec<String> = critic.named_parameters().into_iter().map(|(path, _)| path).collect();
/// assert_eq!(paths, ["q1/weight", "q1/bias", "q2/weight", "q2/bias", "log_alpha"]);
/// assert_eq!(critic.num_parameters(), 11);
///
/// let mut target = critic.clone();
/// target.soft_update_from(&critic, 0.005)?;   // Polyak: tau * source + (1 - tau) * target
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
///
/// Or implement it by hand, visiting the fields in a fixed order (and overriding
/// [`Module::visit_named`] and [`Module::visit_named_mut`] to give the paths; by default a
/// parameter's path is the prefix joined with its name):
///
/// ```
/// use rlgrad_autodiff::nn::{Init, Linear, Module};
/// use rlgrad_autodiff::Param;
/// use rlgrad_core::Rng;
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
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a module of `Param<{T}, {D}>`s",
    note = "under `#[derive(Module)]`, a field that is not a module needs `#[module(skip)]`"
)]
pub trait Module<T: Float = f32, D: Device = Cpu> {
    /// Calls `f` for every parameter, always in the same order.
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<T, D>));

    /// Calls `f` for every parameter, mutably, in the order of [`Module::visit`].
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<T, D>));

    /// Calls `f` with the path and the parameter for every parameter, in the order of
    /// [`Module::visit`]; paths start with `prefix` (see [`child_path`]). The default
    /// gives each parameter the path `prefix/name`; layers and derived modules override
    /// it with their field names.
    fn visit_named<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(&str, &'a Param<T, D>)) {
        self.visit(&mut |p| f(&child_path(prefix, p.name()), p));
    }

    /// [`Module::visit_named`], mutably.
    fn visit_named_mut<'a>(
        &'a mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &'a mut Param<T, D>),
    ) {
        self.visit_mut(&mut |p| {
            let path = child_path(prefix, p.name());
            f(&path, p);
        });
    }

    /// The parameters, in order.
    fn parameters(&self) -> Vec<&Param<T, D>> {
        let mut params = Vec::new();
        self.visit(&mut |p| params.push(p));
        params
    }

    /// The parameters with their paths in this module (PyTorch's `named_parameters`), in
    /// order.
    fn named_parameters(&self) -> Vec<(String, &Param<T, D>)> {
        let mut params = Vec::new();
        self.visit_named("", &mut |path, p| params.push((path.to_owned(), p)));
        params
    }

    /// The number of scalar parameters.
    fn num_parameters(&self) -> usize {
        let mut count = 0;
        self.visit(&mut |p| count += p.value().numel());
        count
    }

    /// Renames every parameter to its path under `prefix` (`actor/l1/weight` for the
    /// field `l1` of a module renamed with the prefix `actor`), so that optimizers,
    /// checkpoints and errors name parameters by the module's structure. Errors (nothing
    /// is renamed): an empty prefix for a module that is a single [`Param`] (a parameter
    /// needs a name), or two parameters with the same path.
    ///
    /// ```
    /// use rlgrad_autodiff::nn::{Init, Linear, Module};
    /// use rlgrad_core::Rng;
    ///
    /// #[derive(Module)]
    /// struct Actor {
    ///     l1: Linear,
    ///     l2: Linear,
    /// }
    /// let mut rng = Rng::new(0, "init");
    /// let mut actor = Actor {
    ///     l1: Linear::new("l1", 3, 8, Init::TorchDefault, &mut rng)?,
    ///     l2: Linear::new("l2", 8, 1, Init::TorchDefault, &mut rng)?,
    /// };
    /// actor.name_by_path("actor")?;
    /// assert_eq!(actor.parameters()[2].name(), "actor/l2/weight");
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    fn name_by_path(&mut self, prefix: &str) -> Result<()> {
        let mut renames: Vec<(&mut Param<T, D>, String)> = Vec::new();
        self.visit_named_mut(prefix, &mut |path, p| renames.push((p, path.to_owned())));
        let mut seen = std::collections::BTreeSet::new();
        for (_, path) in &renames {
            if path.is_empty() {
                return Err(Error::value(
                    "Module::name_by_path",
                    "prefix",
                    "a non-empty prefix (the module is a single parameter)",
                    "\"\"",
                ));
            }
            if !seen.insert(path.as_str()) {
                return Err(Error::state(
                    "Module::name_by_path",
                    "self",
                    "parameters with distinct paths",
                    format_args!("two parameters at `{path}`"),
                ));
            }
        }
        for (p, path) in renames {
            p.set_name(path);
        }
        Ok(())
    }

    /// Polyak averaging of this target network towards `source` ([`soft_update`]):
    /// `self = tau * source + (1 - tau) * self` for every parameter, `1 - tau` computed
    /// in f64, the bits of `rlgrad_optim::polyak_update`. Errors: `tau` outside `[0, 1]`,
    /// parameters that differ in number, names or shapes; nothing changes on error.
    fn soft_update_from(&mut self, source: &Self, tau: f64) -> Result<()>
    where
        Self: Sized,
        D: TensorDevice<T> + OptimKernel<T>,
    {
        soft_update(self, source, tau)
    }

    /// Copies every parameter of `source` into this target network ([`hard_update`]).
    fn hard_update_from(&mut self, source: &Self) -> Result<()>
    where
        Self: Sized,
    {
        hard_update(self, source)
    }
}

/// A parameter is a module of one parameter; its path is the prefix (the field name).
impl<T: Float, D: Device> Module<T, D> for Param<T, D> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<T, D>)) {
        f(self);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<T, D>)) {
        f(self);
    }
    fn visit_named<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(&str, &'a Param<T, D>)) {
        f(prefix, self);
    }
    fn visit_named_mut<'a>(
        &'a mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &'a mut Param<T, D>),
    ) {
        f(prefix, self);
    }
}

/// The elements in order, the path of element `i` being `prefix/i` (PyTorch's
/// `nn.ModuleList`).
impl<T: Float, D: Device, M: Module<T, D>> Module<T, D> for Vec<M> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<T, D>)) {
        for m in self {
            m.visit(f);
        }
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<T, D>)) {
        for m in self {
            m.visit_mut(f);
        }
    }
    fn visit_named<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(&str, &'a Param<T, D>)) {
        for (i, m) in self.iter().enumerate() {
            m.visit_named(&child_path(prefix, &i.to_string()), f);
        }
    }
    fn visit_named_mut<'a>(
        &'a mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &'a mut Param<T, D>),
    ) {
        for (i, m) in self.iter_mut().enumerate() {
            m.visit_named_mut(&child_path(prefix, &i.to_string()), f);
        }
    }
}

/// The module when there is one (under the same path), nothing otherwise.
impl<T: Float, D: Device, M: Module<T, D>> Module<T, D> for Option<M> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<T, D>)) {
        if let Some(m) = self {
            m.visit(f);
        }
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<T, D>)) {
        if let Some(m) = self {
            m.visit_mut(f);
        }
    }
    fn visit_named<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(&str, &'a Param<T, D>)) {
        if let Some(m) = self {
            m.visit_named(prefix, f);
        }
    }
    fn visit_named_mut<'a>(
        &'a mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &'a mut Param<T, D>),
    ) {
        if let Some(m) = self {
            m.visit_named_mut(prefix, f);
        }
    }
}

/// The boxed module (a `Box<dyn Forward>` layer of a [`crate::nn::Sequential`]).
impl<T: Float, D: Device, M: Module<T, D> + ?Sized> Module<T, D> for Box<M> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<T, D>)) {
        (**self).visit(f);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<T, D>)) {
        (**self).visit_mut(f);
    }
    fn visit_named<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(&str, &'a Param<T, D>)) {
        (**self).visit_named(prefix, f);
    }
    fn visit_named_mut<'a>(
        &'a mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &'a mut Param<T, D>),
    ) {
        (**self).visit_named_mut(prefix, f);
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
/// same bits as [`rlgrad_optim::polyak_update`]. All parameters are averaged in place in
/// one call of the device's [`OptimKernel::polyak`] (one launch on a GPU, where a
/// tensor op per parameter would be three). Errors: `tau` outside `[0, 1]`, or modules
/// whose parameters differ in number, names or shapes (the first difference is named);
/// nothing changes on error.
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
pub fn soft_update<T: Float, D: TensorDevice<T> + OptimKernel<T>>(
    target: &mut (impl Module<T, D> + ?Sized),
    source: &(impl Module<T, D> + ?Sized),
    tau: f64,
) -> Result<()> {
    rlgrad_core::check::unit_interval("soft_update", "tau", tau)?;
    let (tau_t, keep) = (T::from_f64(tau), T::from_f64(1.0 - tau));
    let pairs = paired("soft_update", target, source)?;
    let Some(device) = pairs.first().map(|(_, s)| s.value().device().clone()) else {
        return Ok(());
    };
    // Dense sources: a view's buffer is not its elements in order.
    let sources = pairs
        .iter()
        .map(|(_, s)| s.value().dense())
        .collect::<Result<Vec<Tensor<T, D>>>>()?;
    let sources: Vec<&D::Buffer<T>> = sources
        .iter()
        .map(|s| s.dense_buffer().expect("dense() made it dense"))
        .collect();
    let mut targets = Vec::with_capacity(pairs.len());
    for (t, _) in pairs {
        targets.push(t.name_and_buffer()?.1);
    }
    device
        .polyak(tau_t, keep, &mut targets, &sources)
        .map_err(|e| e.in_function("soft_update"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::{Activation, Init, Mlp};
    use rlgrad_core::Rng;

    fn bits(module: &impl Module<f32>) -> Vec<u32> {
        module
            .parameters()
            .iter()
            .flat_map(|p| p.value().to_vec().unwrap())
            .map(f32::to_bits)
            .collect()
    }

    /// In place, through the device's Polyak kernel: the bits of the tensor-op formula
    /// `(source * tau) + (target * (1 - tau))`, and a target cloned from its source (their
    /// buffers shared) leaves the source as it was.
    #[test]
    fn soft_update_is_the_formula_in_place_and_copies_shared_buffers_first() {
        let mut rng = Rng::new(6, "soft-update");
        let mlp = |rng: &mut Rng| {
            Mlp::<f32>::new(
                "critic",
                &[5, 40, 1],
                Activation::Relu,
                Activation::Identity,
                Init::TorchDefault,
                rng,
            )
            .unwrap()
        };
        let (source, mut target) = (mlp(&mut rng), mlp(&mut rng));
        let tau = 0.005;
        let (tau_t, keep) = (tau as f32, (1.0 - tau) as f32);
        let want: Vec<u32> = target
            .parameters()
            .iter()
            .zip(source.parameters())
            .flat_map(|(t, s)| {
                (s.value() * tau_t)
                    .unwrap()
                    .add(&(t.value() * keep).unwrap())
                    .unwrap()
                    .to_vec()
                    .unwrap()
            })
            .map(f32::to_bits)
            .collect();
        soft_update(&mut target, &source, tau).unwrap();
        assert_eq!(bits(&target), want);

        let before = bits(&source);
        let mut shared = source.clone();
        soft_update(&mut shared, &source, 0.5).unwrap();
        assert_eq!(bits(&source), before, "the source changed with its clone");
    }
}
