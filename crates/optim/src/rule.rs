//! Update rules: the built-in optimizers, and the [`Rule`] trait for your own.

use std::fmt::Debug;

use rlgrad_core::kernels::optim::{self as fused, Update};
use rlgrad_core::{Float, Result};

use crate::hyper::{
    Builtin, FlavorDefaults, Hyperparameter, check_domains, hyperparameters, numbers,
};

/// What a rule does at one step, built once per step on the host.
pub enum StepRule<'a, T> {
    /// A built-in fused update (runs on every device).
    Fused(Update<T>),
    /// A custom update of one chunk: `(param, grad, slots)`, slots in the order of
    /// [`Rule::slot_names`]. Called for chunks of every parameter, possibly in parallel.
    Custom(Box<ChunkUpdate<'a, T>>),
}

/// The signature of a custom chunk update.
pub type ChunkUpdate<'a, T> = dyn Fn(&mut [T], &[T], &mut [&mut [T]]) + Send + Sync + 'a;

impl<T: Debug> Debug for StepRule<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Fused(update) => f.debug_tuple("Fused").field(update).finish(),
            Self::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

/// What gives a rule's slots their meaning: the rule, whose formula it follows and the
/// options that change what the slots hold. Recorded in exported state, so that state is
/// never loaded into a rule that would read its slots differently (a PyTorch-flavor
/// RMSprop momentum buffer holds no learning rate; a Keras one does). The numeric
/// hyper-parameters are recorded beside it ([`Rule::hyperparameters`]).
///
/// ```
/// use rlgrad_optim::{Rmsprop, Rule, RuleSpec};
/// let rule = Rmsprop { centered: true, momentum: 0.9, ..Rmsprop::keras() };
/// let spec = <Rmsprop as Rule<f32>>::spec(&rule);
/// assert_eq!(spec, RuleSpec::new("rmsprop").flavor("keras").option("centered").option("momentum"));
/// assert_eq!(spec.to_string(), "rmsprop (keras; centered, momentum)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct RuleSpec {
    /// The rule's stable name ([`Rule::name`]).
    pub name: String,
    /// Whose formula, for rules that have flavors (`"torch"`, `"keras"`, `"core"`).
    pub flavor: Option<String>,
    /// The options that change what the slots hold (`"amsgrad"`, `"centered"`), in the
    /// order the rule lists them.
    pub options: Vec<String>,
}

impl RuleSpec {
    /// A rule without flavor or options.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            flavor: None,
            options: Vec::new(),
        }
    }

    /// With the given flavor.
    pub fn flavor(mut self, flavor: &str) -> Self {
        self.flavor = Some(flavor.to_owned());
        self
    }

    /// With one more option.
    pub fn option(mut self, option: &str) -> Self {
        self.options.push(option.to_owned());
        self
    }

    /// With `option` when `on`.
    fn option_if(self, option: &str, on: bool) -> Self {
        if on { self.option(option) } else { self }
    }
}

impl std::fmt::Display for RuleSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)?;
        match (&self.flavor, self.options.is_empty()) {
            (None, true) => Ok(()),
            (Some(flavor), true) => write!(f, " ({flavor})"),
            (None, false) => write!(f, " ({})", self.options.join(", ")),
            (Some(flavor), false) => write!(f, " ({flavor}; {})", self.options.join(", ")),
        }
    }
}

fn flavor_name(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Torch => "torch",
        Flavor::Keras => "keras",
    }
}

/// An optimizer's update rule: its slots and what one step does. Implementing it on a
/// `Clone` type is all a custom optimizer takes ([`CloneRule`] then comes for free, so that
/// an [`Optimizer`](crate::Optimizer) clones); see the crate docs for Lion.
pub trait Rule<T: Float>: Debug + Send + Sync + CloneRule<T> {
    /// A stable name (`"adam"`).
    fn name(&self) -> &'static str;

    /// What gives the slots their meaning, recorded in exported state and compared on
    /// import: the name alone unless the rule has flavors or options that change its slots.
    fn spec(&self) -> RuleSpec {
        RuleSpec::new(self.name())
    }

    /// The numeric hyper-parameters by name, exact and finite (Adam's `beta1`, `beta2`,
    /// `eps`, `weight_decay`; the learning rate is the schedule's): recorded in exported
    /// state, and a state saved with other values is refused on import, naming them.
    ///
    /// The default reports none, which leaves a custom rule's values unverified on import
    /// (its [`Rule::spec`] still is checked). It is a default rather than a required method
    /// because leaving it out loses a check, never a correct step, and keeps a custom rule
    /// a small impl; implement it whenever the rule has hyper-parameters.
    fn hyperparameters(&self) -> Vec<(&'static str, f64)> {
        Vec::new()
    }

    /// Checks the hyper-parameters; called when the rule joins an optimizer.
    fn validate(&self) -> Result<()> {
        Ok(())
    }

    /// The per-parameter slots, by their stable names (`["m", "v"]`).
    fn slot_names(&self) -> Vec<&'static str>;

    /// The value a slot starts at (0 unless the rule says otherwise).
    fn slot_init(&self, _slot: &str) -> T {
        T::zero()
    }

    /// The step size the rule effectively applies at `step` (1-based) with learning rate
    /// `lr`: Adam's `alpha_t = lr sqrt(1 - beta2^t) / (1 - beta1^t)`; `lr` for most rules.
    fn effective_lr(&self, _step: u64, lr: f64) -> f64 {
        lr
    }

    /// The update of step `step` (1-based, counted per parameter) with learning rate `lr`.
    fn step(&self, step: u64, lr: f64) -> StepRule<'_, T>;
}

/// Cloning behind a `Box<dyn Rule<T>>`; implemented for every `Rule<T> + Clone`.
pub trait CloneRule<T: Float> {
    /// A boxed copy of this rule.
    fn clone_box(&self) -> Box<dyn Rule<T>>;
}

impl<T: Float, R: Rule<T> + Clone + 'static> CloneRule<T> for R {
    fn clone_box(&self) -> Box<dyn Rule<T>> {
        Box::new(self.clone())
    }
}

impl<T: Float> Clone for Box<dyn Rule<T>> {
    fn clone(&self) -> Self {
        // The boxed rule's own copy: `self.clone_box()` would box the box again.
        (**self).clone_box()
    }
}

/// Where the two big frameworks put things differently (epsilon, weight decay, slots).
pub use rlgrad_core::kernels::optim::Flavor;

fn t<T: Float>(value: f64) -> T {
    T::from_f64(value)
}

/// Plain SGD, PyTorch's: `g += wd * p` (if `weight_decay > 0`), `p -= lr * g`.
/// Default: no weight decay.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sgd {
    /// L2 weight decay.
    pub weight_decay: f64,
}

impl Builtin for Sgd {
    const NAME: &'static str = "sgd";
    const TYPE: &'static str = "Sgd";
    const FLAVORS: &'static [FlavorDefaults<Self>] = &[("torch", Self::default)];
    const HYPERPARAMETERS: &'static [Hyperparameter<Self>] =
        hyperparameters![weight_decay: NonNegative];
}

impl<T: Float> Rule<T> for Sgd {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn validate(&self) -> Result<()> {
        check_domains(self)
    }
    fn hyperparameters(&self) -> Vec<(&'static str, f64)> {
        numbers(self)
    }
    fn slot_names(&self) -> Vec<&'static str> {
        Vec::new()
    }
    fn step(&self, _step: u64, lr: f64) -> StepRule<'_, T> {
        StepRule::Fused(Update::Sgd(fused::Sgd {
            lr: t(lr),
            weight_decay: t(self.weight_decay),
        }))
    }
}

/// The three momentum conventions; the formulas are in
/// [`rlgrad_core::kernels::optim::Momentum`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MomentumFlavor {
    /// `torch.optim.SGD(momentum=..)`: slot `momentum_buffer`, dampening, Nesterov.
    Torch,
    /// `keras.optimizers.SGD(momentum=..)`: slot `velocity` (includes `-lr`), Nesterov.
    Keras,
    /// `change = lr * g + mu * change; p -= change` (the TF Core-APIs guide): slot `change`.
    Core,
}

/// SGD with momentum (and Nesterov). Defaults: `momentum = 0.9`, no dampening, no
/// Nesterov, no weight decay (PyTorch's default momentum is 0, which is plain SGD).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Momentum {
    /// Whose formula.
    pub flavor: MomentumFlavor,
    /// `mu` in `[0, 1)`.
    pub momentum: f64,
    /// Torch only: damping of the gradient term, in `[0, 1]`.
    pub dampening: f64,
    /// Nesterov's look-ahead (Torch and Keras; needs `dampening = 0` in Torch).
    pub nesterov: bool,
    /// L2 (Torch) or decoupled (Keras) weight decay; not in the Core form.
    pub weight_decay: f64,
}

impl Momentum {
    /// The given flavor with the defaults above.
    pub fn new(flavor: MomentumFlavor) -> Self {
        Self {
            flavor,
            momentum: 0.9,
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        }
    }
}

impl Builtin for Momentum {
    const NAME: &'static str = "momentum";
    const TYPE: &'static str = "Momentum";
    const FLAVORS: &'static [FlavorDefaults<Self>] = &[
        ("torch", || Self::new(MomentumFlavor::Torch)),
        ("keras", || Self::new(MomentumFlavor::Keras)),
        ("core", || Self::new(MomentumFlavor::Core)),
    ];
    const HYPERPARAMETERS: &'static [Hyperparameter<Self>] = hyperparameters![
        momentum: UnitIntervalOpen,
        dampening: UnitInterval,
        nesterov: Switch,
        weight_decay: NonNegative,
    ];
}

impl<T: Float> Rule<T> for Momentum {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn spec(&self) -> RuleSpec {
        let flavor = match self.flavor {
            MomentumFlavor::Torch => "torch",
            MomentumFlavor::Keras => "keras",
            MomentumFlavor::Core => "core",
        };
        RuleSpec::new(Self::NAME)
            .flavor(flavor)
            .option_if("nesterov", self.nesterov)
    }
    fn validate(&self) -> Result<()> {
        check_domains(self)?;
        if self.nesterov && self.dampening != 0.0 {
            return Err(rlgrad_core::Error::value(
                "Momentum",
                "dampening",
                "0 with Nesterov momentum (as PyTorch requires)",
                self.dampening,
            ));
        }
        if self.flavor == MomentumFlavor::Core && (self.nesterov || self.weight_decay != 0.0) {
            return Err(rlgrad_core::Error::value(
                "Momentum",
                "flavor",
                "no Nesterov and no weight decay with the Core flavor",
                "Core with Nesterov or weight decay",
            ));
        }
        Ok(())
    }
    fn hyperparameters(&self) -> Vec<(&'static str, f64)> {
        numbers(self)
    }
    fn slot_names(&self) -> Vec<&'static str> {
        vec![match self.flavor {
            MomentumFlavor::Torch => "momentum_buffer",
            MomentumFlavor::Keras => "velocity",
            MomentumFlavor::Core => "change",
        }]
    }
    fn step(&self, step: u64, lr: f64) -> StepRule<'_, T> {
        let (lr, momentum, weight_decay) = (t(lr), t(self.momentum), t(self.weight_decay));
        StepRule::Fused(Update::Momentum(match self.flavor {
            MomentumFlavor::Torch => fused::Momentum::Torch {
                lr,
                momentum,
                dampening: t(self.dampening),
                nesterov: self.nesterov,
                weight_decay,
                first_step: step == 1,
            },
            MomentumFlavor::Keras => fused::Momentum::Keras {
                lr,
                momentum,
                nesterov: self.nesterov,
                weight_decay,
            },
            MomentumFlavor::Core => fused::Momentum::Core { lr, momentum },
        }))
    }
}

/// `alpha_t = lr sqrt(1 - beta2^t) / (1 - beta1^t)` in f64.
fn adam_alpha(lr: f64, beta1: f64, beta2: f64, step: u64) -> f64 {
    let t = step.min(i32::MAX as u64) as i32;
    lr * (1.0 - beta2.powi(t)).sqrt() / (1.0 - beta1.powi(t))
}

/// Adam. Torch flavor: eps added to `sqrt` of the bias-corrected `v`, L2 weight decay;
/// Keras flavor: `alpha_t * m / (sqrt(v) + eps)`, decoupled weight decay.
///
/// Defaults ([`Adam::torch`] / [`Adam::keras`]): betas 0.9 / 0.999, eps 1e-8 (Torch) or
/// 1e-7 (Keras, whose default differs from PyTorch's), no weight decay, no amsgrad.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adam {
    /// Whose formula.
    pub flavor: Flavor,
    /// `beta1` in `[0, 1)`.
    pub beta1: f64,
    /// `beta2` in `[0, 1)`.
    pub beta2: f64,
    /// `eps > 0`.
    pub eps: f64,
    /// L2 (Torch) or decoupled (Keras) weight decay.
    pub weight_decay: f64,
    /// Use the running maximum of `v` (slot `v_max`).
    pub amsgrad: bool,
}

impl Adam {
    /// `torch.optim.Adam`'s defaults.
    pub fn torch() -> Self {
        Self {
            flavor: Flavor::Torch,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
        }
    }

    /// `keras.optimizers.Adam`'s defaults.
    pub fn keras() -> Self {
        Self {
            flavor: Flavor::Keras,
            eps: 1e-7,
            ..Self::torch()
        }
    }

    fn slots(&self) -> Vec<&'static str> {
        if self.amsgrad {
            vec!["m", "v", "v_max"]
        } else {
            vec!["m", "v"]
        }
    }
}

impl Builtin for Adam {
    const NAME: &'static str = "adam";
    const TYPE: &'static str = "Adam";
    const FLAVORS: &'static [FlavorDefaults<Self>] =
        &[("torch", Self::torch), ("keras", Self::keras)];
    const HYPERPARAMETERS: &'static [Hyperparameter<Self>] = hyperparameters![
        beta1: UnitIntervalOpen,
        beta2: UnitIntervalOpen,
        eps: Positive,
        weight_decay: NonNegative,
        amsgrad: Switch,
    ];
}

impl<T: Float> Rule<T> for Adam {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn spec(&self) -> RuleSpec {
        RuleSpec::new(Self::NAME)
            .flavor(flavor_name(self.flavor))
            .option_if("amsgrad", self.amsgrad)
    }
    fn validate(&self) -> Result<()> {
        check_domains(self)
    }
    fn hyperparameters(&self) -> Vec<(&'static str, f64)> {
        numbers(self)
    }
    fn slot_names(&self) -> Vec<&'static str> {
        self.slots()
    }
    fn effective_lr(&self, step: u64, lr: f64) -> f64 {
        adam_alpha(lr, self.beta1, self.beta2, step)
    }
    fn step(&self, step: u64, lr: f64) -> StepRule<'_, T> {
        StepRule::Fused(Update::Adam(adam_update(self, step, lr, 0.0)))
    }
}

/// The fused Adam update; `decoupled` is AdamW's weight decay.
fn adam_update<T: Float>(adam: &Adam, step: u64, lr: f64, decoupled: f64) -> fused::Adam<T> {
    let t_ = step.min(i32::MAX as u64) as i32;
    match adam.flavor {
        Flavor::Torch => fused::Adam::Torch(fused::AdamTorch {
            step_size: t(lr / (1.0 - adam.beta1.powi(t_))),
            bias_correction2_sqrt: t((1.0 - adam.beta2.powi(t_)).sqrt()),
            one_minus_beta1: t(1.0 - adam.beta1),
            beta2: t(adam.beta2),
            one_minus_beta2: t(1.0 - adam.beta2),
            eps: t(adam.eps),
            weight_decay: t(adam.weight_decay),
            decoupled_keep: t(1.0 - lr * decoupled),
            amsgrad: adam.amsgrad,
        }),
        Flavor::Keras => fused::Adam::Keras {
            alpha: t(adam_alpha(lr, adam.beta1, adam.beta2, step)),
            lr: t(lr),
            one_minus_beta1: t(1.0 - adam.beta1),
            one_minus_beta2: t(1.0 - adam.beta2),
            eps: t(adam.eps),
            weight_decay: t(adam.weight_decay),
            amsgrad: adam.amsgrad,
        },
    }
}

/// AdamW (`torch.optim.AdamW`): Adam with decoupled weight decay `p *= 1 - lr * wd` before
/// the update. Defaults: betas 0.9 / 0.999, eps 1e-8, weight decay 0.01 (PyTorch's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamW {
    /// `beta1` in `[0, 1)`.
    pub beta1: f64,
    /// `beta2` in `[0, 1)`.
    pub beta2: f64,
    /// `eps > 0`.
    pub eps: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
    /// Use the running maximum of `v`.
    pub amsgrad: bool,
}

impl Default for AdamW {
    fn default() -> Self {
        Self {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.01,
            amsgrad: false,
        }
    }
}

impl AdamW {
    fn as_adam(&self) -> Adam {
        Adam {
            flavor: Flavor::Torch,
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            weight_decay: 0.0,
            amsgrad: self.amsgrad,
        }
    }
}

impl Builtin for AdamW {
    const NAME: &'static str = "adamw";
    const TYPE: &'static str = "AdamW";
    const FLAVORS: &'static [FlavorDefaults<Self>] = &[("torch", Self::default)];
    const HYPERPARAMETERS: &'static [Hyperparameter<Self>] = hyperparameters![
        beta1: UnitIntervalOpen,
        beta2: UnitIntervalOpen,
        eps: Positive,
        weight_decay: NonNegative,
        amsgrad: Switch,
    ];
}

impl<T: Float> Rule<T> for AdamW {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn spec(&self) -> RuleSpec {
        RuleSpec::new(Self::NAME).option_if("amsgrad", self.amsgrad)
    }
    fn validate(&self) -> Result<()> {
        check_domains(self)
    }
    fn hyperparameters(&self) -> Vec<(&'static str, f64)> {
        numbers(self)
    }
    fn slot_names(&self) -> Vec<&'static str> {
        self.as_adam().slots()
    }
    fn effective_lr(&self, step: u64, lr: f64) -> f64 {
        adam_alpha(lr, self.beta1, self.beta2, step)
    }
    fn step(&self, step: u64, lr: f64) -> StepRule<'_, T> {
        StepRule::Fused(Update::Adam(adam_update(
            &self.as_adam(),
            step,
            lr,
            self.weight_decay,
        )))
    }
}

/// RMSprop. Torch: eps outside the square root, L2 decay; Keras: eps inside, decoupled
/// decay, and the momentum slot includes the learning rate.
///
/// Defaults ([`Rmsprop::torch`] / [`Rmsprop::keras`]): `alpha` 0.99 (Torch) or 0.9 (Keras'
/// `rho`), eps 1e-8 / 1e-7, no momentum, not centered, no weight decay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rmsprop {
    /// Whose formula.
    pub flavor: Flavor,
    /// Smoothing constant in `[0, 1)` (Keras' `rho`).
    pub alpha: f64,
    /// `eps > 0`.
    pub eps: f64,
    /// `mu` in `[0, 1)`; 0 keeps no momentum slot.
    pub momentum: f64,
    /// Subtract the squared running mean of the gradient.
    pub centered: bool,
    /// L2 (Torch) or decoupled (Keras) weight decay.
    pub weight_decay: f64,
}

impl Rmsprop {
    /// `torch.optim.RMSprop`'s defaults.
    pub fn torch() -> Self {
        Self {
            flavor: Flavor::Torch,
            alpha: 0.99,
            eps: 1e-8,
            momentum: 0.0,
            centered: false,
            weight_decay: 0.0,
        }
    }

    /// `keras.optimizers.RMSprop`'s defaults.
    pub fn keras() -> Self {
        Self {
            flavor: Flavor::Keras,
            alpha: 0.9,
            eps: 1e-7,
            ..Self::torch()
        }
    }
}

impl Builtin for Rmsprop {
    const NAME: &'static str = "rmsprop";
    const TYPE: &'static str = "Rmsprop";
    const FLAVORS: &'static [FlavorDefaults<Self>] =
        &[("torch", Self::torch), ("keras", Self::keras)];
    const HYPERPARAMETERS: &'static [Hyperparameter<Self>] = hyperparameters![
        alpha: UnitIntervalOpen,
        eps: Positive,
        momentum: UnitIntervalOpen,
        centered: Switch,
        weight_decay: NonNegative,
    ];
}

impl<T: Float> Rule<T> for Rmsprop {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn spec(&self) -> RuleSpec {
        RuleSpec::new(Self::NAME)
            .flavor(flavor_name(self.flavor))
            .option_if("centered", self.centered)
            .option_if("momentum", self.momentum != 0.0)
    }
    fn validate(&self) -> Result<()> {
        check_domains(self)
    }
    fn hyperparameters(&self) -> Vec<(&'static str, f64)> {
        numbers(self)
    }
    fn slot_names(&self) -> Vec<&'static str> {
        let mut names = vec!["square_avg"];
        if self.centered {
            names.push("grad_avg");
        }
        if self.momentum != 0.0 {
            names.push("momentum_buffer");
        }
        names
    }
    fn step(&self, _step: u64, lr: f64) -> StepRule<'_, T> {
        let (lr, alpha, one_minus_alpha) = (t(lr), t(self.alpha), t(1.0 - self.alpha));
        let (eps, momentum, weight_decay) = (t(self.eps), t(self.momentum), t(self.weight_decay));
        StepRule::Fused(Update::Rmsprop(fused::Rmsprop {
            flavor: self.flavor,
            lr,
            alpha,
            one_minus_alpha,
            eps,
            momentum,
            centered: self.centered,
            weight_decay,
        }))
    }
}

/// Adagrad. Torch: `clr = lr / (1 + (t - 1) lr_decay)`, eps outside the square root;
/// Keras: eps inside, no learning-rate decay.
///
/// Defaults ([`Adagrad::torch`] / [`Adagrad::keras`]): eps 1e-10 / 1e-7, initial
/// accumulator 0 (Torch) or 0.1 (Keras), no decay.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Adagrad {
    /// Whose formula.
    pub flavor: Flavor,
    /// Torch only: learning-rate decay per step.
    pub lr_decay: f64,
    /// `eps > 0`.
    pub eps: f64,
    /// Where the `sum` slot starts.
    pub initial_accumulator_value: f64,
    /// L2 (Torch) or decoupled (Keras) weight decay.
    pub weight_decay: f64,
}

impl Adagrad {
    /// `torch.optim.Adagrad`'s defaults.
    pub fn torch() -> Self {
        Self {
            flavor: Flavor::Torch,
            lr_decay: 0.0,
            eps: 1e-10,
            initial_accumulator_value: 0.0,
            weight_decay: 0.0,
        }
    }

    /// `keras.optimizers.Adagrad`'s defaults.
    pub fn keras() -> Self {
        Self {
            flavor: Flavor::Keras,
            eps: 1e-7,
            initial_accumulator_value: 0.1,
            ..Self::torch()
        }
    }
}

impl Builtin for Adagrad {
    const NAME: &'static str = "adagrad";
    const TYPE: &'static str = "Adagrad";
    const FLAVORS: &'static [FlavorDefaults<Self>] =
        &[("torch", Self::torch), ("keras", Self::keras)];
    const HYPERPARAMETERS: &'static [Hyperparameter<Self>] = hyperparameters![
        lr_decay: NonNegative,
        eps: Positive,
        initial_accumulator_value: NonNegative,
        weight_decay: NonNegative,
    ];
}

impl<T: Float> Rule<T> for Adagrad {
    fn name(&self) -> &'static str {
        Self::NAME
    }
    fn spec(&self) -> RuleSpec {
        RuleSpec::new(Self::NAME).flavor(flavor_name(self.flavor))
    }
    fn validate(&self) -> Result<()> {
        check_domains(self)?;
        if self.flavor == Flavor::Keras && self.lr_decay != 0.0 {
            return Err(rlgrad_core::Error::value(
                "Adagrad",
                "lr_decay",
                "0 with the Keras flavor",
                self.lr_decay,
            ));
        }
        Ok(())
    }
    fn hyperparameters(&self) -> Vec<(&'static str, f64)> {
        numbers(self)
    }
    fn slot_names(&self) -> Vec<&'static str> {
        vec!["sum"]
    }
    fn slot_init(&self, _slot: &str) -> T {
        t(self.initial_accumulator_value)
    }
    fn effective_lr(&self, step: u64, lr: f64) -> f64 {
        match self.flavor {
            Flavor::Torch => lr / (1.0 + (step.saturating_sub(1)) as f64 * self.lr_decay),
            Flavor::Keras => lr,
        }
    }
    fn step(&self, step: u64, lr: f64) -> StepRule<'_, T> {
        let (eps, weight_decay) = (t(self.eps), t(self.weight_decay));
        StepRule::Fused(Update::Adagrad(match self.flavor {
            Flavor::Torch => fused::Adagrad::Torch {
                clr: t(<Self as Rule<T>>::effective_lr(self, step, lr)),
                eps,
                weight_decay,
            },
            Flavor::Keras => fused::Adagrad::Keras {
                lr: t(lr),
                eps,
                weight_decay,
            },
        }))
    }
}

/// A boxed rule is a rule, so rules can be chosen at run time.
impl<T: Float> Rule<T> for Box<dyn Rule<T>> {
    fn name(&self) -> &'static str {
        (**self).name()
    }
    fn spec(&self) -> RuleSpec {
        (**self).spec()
    }
    fn hyperparameters(&self) -> Vec<(&'static str, f64)> {
        (**self).hyperparameters()
    }
    fn validate(&self) -> Result<()> {
        (**self).validate()
    }
    fn slot_names(&self) -> Vec<&'static str> {
        (**self).slot_names()
    }
    fn slot_init(&self, slot: &str) -> T {
        (**self).slot_init(slot)
    }
    fn effective_lr(&self, step: u64, lr: f64) -> f64 {
        (**self).effective_lr(step, lr)
    }
    fn step(&self, step: u64, lr: f64) -> StepRule<'_, T> {
        (**self).step(step, lr)
    }
}
