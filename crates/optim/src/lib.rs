//! rlgrad-optim: optimizers you can see into, that match PyTorch and Keras, fused and
//! deterministic.
//!
//! - Built-in rules, each documenting its update formula: [`Sgd`], [`Momentum`] (PyTorch,
//!   Keras and the classic `change = lr*g + mu*change` form; Nesterov), [`Adam`] (PyTorch and
//!   Keras flavors, amsgrad, L2 weight decay), [`AdamW`], [`Rmsprop`] (centered, momentum;
//!   both flavors) and [`Adagrad`] (both flavors). [`Flavor`] names where the frameworks put
//!   epsilon and weight decay differently.
//! - Each built-in rule is also data ([`Builtin`]): its flavors with their defaults and
//!   one table of its hyper-parameters (name and [`Domain`]), which its checks and
//!   [`Rule::hyperparameters`] read, for building a rule by name (the Python bindings do).
//! - [`Optimizer`]: named parameters, parameter groups with their own hyper-parameters and
//!   [`Schedule`]s, slots with stable names (`m`, `v`, `v_max`, `momentum_buffer`,
//!   `velocity`, `change`, `square_avg`, `grad_avg`, `sum`) readable at any time, a step
//!   counter, [`effective_lr`](Optimizer::effective_lr) (Adam's `alpha_t`) per group and
//!   [`effective_lr_of`](Optimizer::effective_lr_of) per parameter,
//!   [`last_lr`](Optimizer::last_lr), state export/import keyed by parameter name, an
//!   opt-in finite check, and `Clone` (a clone steps exactly as the original).
//! - Exported state records each group's rule ([`RuleSpec`]), numeric hyper-parameters
//!   ([`Rule::hyperparameters`]) and schedule ([`Schedule::spec`]), with the step counter;
//!   [`Optimizer::load_state`] refuses state saved with any other value, naming the
//!   hyper-parameter and both values, and a run resumes with another learning rate by
//!   loading into the optimizer as saved, then calling
//!   [`set_schedule`](Optimizer::set_schedule) ([`set_rule`](Optimizer::set_rule) for
//!   other hyper-parameters).
//! - Every update is one fused pass over (param, grad, slots), parallel in fixed chunks and
//!   vectorized; step-only scalars (bias corrections, the scheduled rate) are computed once
//!   per step on the host in f64. The same kernels run on any device implementing
//!   [`OptimKernel`] ([`Optimizer::step_on`]); the fused updates' formulas are in
//!   [`fused`]. Every type the API takes or returns is exported here, so this crate alone
//!   is a complete dependency.
//! - [`clip_grad_norm`] (global, canonical reduction, returns the norm before clipping;
//!   [`plan_clip`] is its decision from sums a device computed), [`clip_grad_value`],
//!   [`polyak_update`] and [`hard_update`] for target networks.
//!
//! # Example
//!
//! ```
//! use rlgrad_optim::{Adam, Cosine, LinearWarmup, Optimizer, Param};
//!
//! let schedule = LinearWarmup { steps: 10, then: Cosine { base: 3e-4, min: 0.0, steps: 1000 } };
//! let mut opt = Optimizer::<f32>::new(Adam::torch(), schedule)?;
//! let mut weight = vec![0.5f32; 4];
//! let grad = vec![0.1f32, -0.2, 0.3, 0.0];
//! opt.step(&mut [Param { name: "actor.weight", value: &mut weight, grad: &grad }])?;
//! assert_eq!(opt.last_lr(0), Some(3e-4 * 1.0 / 10.0)); // the first warm-up step
//! println!("alpha_t = {}", opt.effective_lr(0)?);
//! println!("m = {:?}", opt.slot("actor.weight", "m")?);
//! let checkpoint = opt.state()?; // slots by parameter name, and the step counter
//! # Ok::<(), rlgrad_optim::Error>(())
//! ```
//!
//! # A custom optimizer is a small trait impl
//!
//! Lion (Chen et al. 2023): `c = b1 m + (1 - b1) g`, `p -= lr (sign(c) + wd p)`,
//! `m = b2 m + (1 - b2) g`.
//!
//! ```
//! use rlgrad_optim::{Float, Optimizer, Param, Rule, StepRule};
//!
//! #[derive(Debug, Clone)]
//! struct Lion { beta1: f64, beta2: f64, weight_decay: f64 }
//!
//! impl<T: Float> Rule<T> for Lion {
//!     fn name(&self) -> &'static str { "lion" }
//!     fn slot_names(&self) -> Vec<&'static str> { vec!["m"] }
//!     // Recorded in exported state and checked on import (optional: unverified without).
//!     fn hyperparameters(&self) -> Vec<(&'static str, f64)> {
//!         vec![("beta1", self.beta1), ("beta2", self.beta2), ("weight_decay", self.weight_decay)]
//!     }
//!     fn step(&self, _step: u64, lr: f64) -> StepRule<'_, T> {
//!         let f = T::from_f64;
//!         let (b1, b2, wd, lr) = (f(self.beta1), f(self.beta2), f(self.weight_decay), f(lr));
//!         let (c1, c2) = (f(1.0 - self.beta1), f(1.0 - self.beta2));
//!         StepRule::Custom(Box::new(move |p: &mut [T], g: &[T], slots: &mut [&mut [T]]| {
//!             let [m] = slots else { return };
//!             for ((p, &g), m) in p.iter_mut().zip(g).zip(m.iter_mut()) {
//!                 let c = b1 * *m + c1 * g;
//!                 let sign = if c > T::zero() { T::one() } else if c < T::zero() { -T::one() } else { T::zero() };
//!                 *p = *p - lr * (sign + wd * *p);
//!                 *m = b2 * *m + c2 * g;
//!             }
//!         }))
//!     }
//! }
//!
//! let mut opt = Optimizer::<f64>::new(Lion { beta1: 0.9, beta2: 0.99, weight_decay: 0.0 }, 0.1)?;
//! let mut x = vec![1.0, -1.0];
//! opt.step(&mut [Param { name: "x", value: &mut x, grad: &[2.0, -3.0] }])?;
//! assert_eq!(x, [0.9, -0.9]);
//! # Ok::<(), rlgrad_optim::Error>(())
//! ```
//!
//! # Errors
//!
//! Hyper-parameters are checked when a rule joins an optimizer (betas outside `[0, 1)`,
//! `eps <= 0`, negative or non-finite weight decay, a negative or non-finite first
//! learning rate), learning rates at every step (negative or non-finite). A step refuses,
//! changing nothing, parameters whose gradient length differs, a repeated name, a length
//! that differs from the parameter's state, a parameter set that differs from imported
//! state, and non-finite gradients when the check is on. Importing state refuses, changing
//! nothing, another number of groups, another rule (name, flavor or slot-changing option),
//! another value of a hyper-parameter or another schedule, a parameter in another group,
//! and slots of another length. Asking for an unknown parameter or slot is an error that
//! names the valid slots. No public function panics on its input, and a call that fails
//! leaves the parameters, the gradients and the optimizer's state as they were (tested
//! with random rules, schedules, parameter sets and non-finite values).

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod clip;
/// The TF "optimizers with Core APIs" convergence test, which the workspace's tools run
/// (`cargo xtask converge`, the parity suite): a test harness, public for them only and
/// not covered by semantic versioning.
#[doc(hidden)]
pub mod converge;
mod hyper;
mod optimizer;
mod rule;
mod schedule;

pub use clip::{
    Clipping, clip_grad_norm, clip_grad_norm_with, clip_grad_value, global_norm, hard_update,
    plan_clip, polyak_update,
};
pub use hyper::{Builtin, Domain, FlavorDefaults, Hyperparameter, Value};
pub use optimizer::{
    DeviceParam, GroupState, Optimizer, OptimizerState, Param, ParamState, PreparedState,
};
pub use rlgrad_core::kernels::OptimKernel;
/// The fused updates [`StepRule::Fused`] carries, with their formulas.
pub use rlgrad_core::kernels::optim as fused;
pub use rlgrad_core::{Cpu, Device, Error, Float, Par, Result};
pub use rule::{
    Adagrad, Adam, AdamW, ChunkUpdate, CloneRule, Flavor, Momentum, MomentumFlavor, Rmsprop, Rule,
    RuleSpec, Sgd, StepRule,
};
pub use schedule::{
    CloneSchedule, Constant, Cosine, Exponential, LinearWarmup, Schedule, Sequence, StepDecay,
};

/// The README's examples, compiled and run as doctests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
