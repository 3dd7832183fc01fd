//! Fused optimizer updates: one pass over (param, grad, slots) per element, in the
//! canonical order written in each rule's documentation.
//!
//! Every scalar that depends only on the step (bias corrections, the scheduled learning
//! rate, Adam's `alpha_t`) is computed by the caller on the host in f64 and rounded once to
//! the element type, so every device gets the same values. Each rule's formula follows the
//! framework it is named after (PyTorch's single-tensor `torch.optim` code, Keras 3's
//! optimizers) in its order of operations; the parity vectors check them.
//!
//! Slots are passed in the order of [`Update::slot_names`].

use smallvec::SmallVec;

use crate::{Device, Error, Float, Result, reduce};

/// `torch.optim.SGD` with momentum 0: `g' = g + wd * p` (if `wd != 0`), `p = p - lr * g'`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sgd<T> {
    /// Learning rate.
    pub lr: T,
    /// L2 weight decay (added to the gradient).
    pub weight_decay: T,
}

/// Momentum in one of three conventions.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Momentum<T> {
    /// `torch.optim.SGD`: `g' = g + wd * p`; `buf = g'` at the first step, else
    /// `buf = buf * mu + (1 - dampening) * g'`; `d = g' + mu * buf` (Nesterov) or `buf`;
    /// `p = p - lr * d`. Slot: `momentum_buffer`.
    Torch {
        /// Learning rate.
        lr: T,
        /// `mu`.
        momentum: T,
        /// Dampening of the gradient term.
        dampening: T,
        /// Nesterov's look-ahead.
        nesterov: bool,
        /// L2 weight decay.
        weight_decay: T,
        /// Whether this is the first step (the buffer starts as the gradient).
        first_step: bool,
    },
    /// `keras.optimizers.SGD`: `p = p - (p * wd) * lr` (decoupled, if `wd != 0`);
    /// `velocity = velocity * mu - g * lr`; `p = p + (velocity * mu - g * lr)` (Nesterov) or
    /// `p = p + velocity`. Slot: `velocity` (it includes the learning rate and the sign).
    Keras {
        /// Learning rate.
        lr: T,
        /// `mu`.
        momentum: T,
        /// Nesterov's look-ahead.
        nesterov: bool,
        /// Decoupled weight decay.
        weight_decay: T,
    },
    /// The classic form of the TF "optimizers with Core APIs" guide:
    /// `change = lr * g + mu * change`, `p = p - change`. Slot: `change`.
    Core {
        /// Learning rate.
        lr: T,
        /// `mu`.
        momentum: T,
    },
}

/// `torch.optim.Adam` / `AdamW` (single tensor): `p = p * keep` with
/// `keep = 1 - lr * wd` (AdamW's decoupled decay, if `keep != 1`); `g' = g + wd * p` (Adam's L2, if nonzero);
/// `m = m + (1 - b1) * (g' - m)` (torch's `lerp`); `v = v * b2 + (1 - b2) * (g' * g')`;
/// with amsgrad `v_max = max(v_max, v)` and `vv = v_max`, else `vv = v`;
/// `p = p + ((-step_size) * m) / (sqrt(vv) / bc2_sqrt + eps)` with
/// `step_size = lr / (1 - b1^t)`, `bc2_sqrt = sqrt(1 - b2^t)`. Slots: `m`, `v`
/// (and `v_max`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamTorch<T> {
    /// `lr / (1 - beta1^t)`, from the host.
    pub step_size: T,
    /// `sqrt(1 - beta2^t)`, from the host.
    pub bias_correction2_sqrt: T,
    /// `1 - beta1`, from the host.
    pub one_minus_beta1: T,
    /// `beta2`.
    pub beta2: T,
    /// `1 - beta2`, from the host.
    pub one_minus_beta2: T,
    /// Added to `sqrt` of the bias-corrected `v`.
    pub eps: T,
    /// L2 weight decay (Adam).
    pub weight_decay: T,
    /// `1 - lr * weight_decay` of AdamW's decoupled decay, from the host (1: none).
    pub decoupled_keep: T,
    /// Keep the running maximum of `v`.
    pub amsgrad: bool,
}

/// Adam and AdamW.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Adam<T> {
    /// PyTorch's Adam and AdamW: see [`AdamTorch`].
    Torch(AdamTorch<T>),
    /// `keras.optimizers.Adam`: `p = p - (p * wd) * lr` (decoupled, if nonzero);
    /// `m = m + (g - m) * (1 - b1)`; `v = v + (g * g - v) * (1 - b2)`; amsgrad as above;
    /// `p = p - (m * alpha) / (sqrt(vv) + eps)` with
    /// `alpha = lr * sqrt(1 - b2^t) / (1 - b1^t)`. Slots: `m`, `v` (and `v_max`).
    Keras {
        /// `alpha_t`, from the host.
        alpha: T,
        /// `lr`, for the decoupled decay.
        lr: T,
        /// `1 - beta1`, from the host.
        one_minus_beta1: T,
        /// `1 - beta2`, from the host.
        one_minus_beta2: T,
        /// Added to `sqrt(v)` (not to the bias-corrected `v`).
        eps: T,
        /// Decoupled weight decay.
        weight_decay: T,
        /// Keep the running maximum of `v`.
        amsgrad: bool,
    },
}

/// Whose formula a rule follows where the frameworks differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// PyTorch's `torch.optim` (L2 weight decay added to the gradient).
    Torch,
    /// Keras 3 (decoupled weight decay `p -= p * wd * lr`).
    Keras,
}

/// RMSprop.
///
/// - `Flavor::Torch` (`torch.optim.RMSprop`): `g' = g + wd * p` (if nonzero);
///   `sq = sq * alpha + (1 - alpha) * (g' * g')`; centered: `ga = ga + (1 - alpha) * (g' - ga)`,
///   `avg = sqrt(sq + (-1) * (ga * ga)) + eps`, else `avg = sqrt(sq) + eps`; with momentum:
///   `buf = buf * mu + g' / avg`, `p = p + (-lr) * buf`; else `p = p + ((-lr) * g') / avg`.
/// - `Flavor::Keras` (`keras.optimizers.RMSprop`, `alpha` is Keras' `rho`):
///   `p = p - (p * wd) * lr` (if nonzero); `sq = alpha * sq + (1 - alpha) * (g * g)`;
///   centered: `ga = alpha * ga + (1 - alpha) * g`, `den = sq - ga * ga + eps`, else
///   `den = sq + eps`; `inc = (lr * g) / sqrt(den)`; with momentum `buf = mu * buf + inc`,
///   `p = p - buf`; else `p = p - inc`.
///
/// Slots: `square_avg` (, `grad_avg` when centered) (, `momentum_buffer` when `mu != 0`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rmsprop<T> {
    /// Whose formula.
    pub flavor: Flavor,
    /// Learning rate.
    pub lr: T,
    /// Smoothing constant.
    pub alpha: T,
    /// `1 - alpha`, from the host.
    pub one_minus_alpha: T,
    /// Added outside (Torch) or inside (Keras) the square root.
    pub eps: T,
    /// `mu` (0: no momentum slot).
    pub momentum: T,
    /// Subtract the squared mean gradient.
    pub centered: bool,
    /// L2 (Torch) or decoupled (Keras) weight decay.
    pub weight_decay: T,
}

/// Adagrad.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Adagrad<T> {
    /// `torch.optim.Adagrad`: `g' = g + wd * p` (if nonzero); `sum = sum + g' * g'`;
    /// `p = p + ((-clr) * g') / (sqrt(sum) + eps)` with `clr = lr / (1 + (t - 1) * lr_decay)`.
    /// Slot: `sum`.
    Torch {
        /// The decayed learning rate, from the host.
        clr: T,
        /// Added outside the square root.
        eps: T,
        /// L2 weight decay.
        weight_decay: T,
    },
    /// `keras.optimizers.Adagrad`: `p = p - (p * wd) * lr` (if nonzero); `sum = sum + g * g`;
    /// `p = p - (lr * g) / sqrt(sum + eps)`. Slot: `sum`.
    Keras {
        /// Learning rate.
        lr: T,
        /// Added inside the square root.
        eps: T,
        /// Decoupled weight decay.
        weight_decay: T,
    },
}

/// The most slots any fused update keeps (Adam with amsgrad, centered RMSprop with
/// momentum).
pub const MAX_SLOTS: usize = 3;

/// One fused update with its step scalars.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Update<T> {
    /// Plain SGD.
    Sgd(Sgd<T>),
    /// Momentum, Nesterov.
    Momentum(Momentum<T>),
    /// Adam, AdamW.
    Adam(Adam<T>),
    /// RMSprop.
    Rmsprop(Rmsprop<T>),
    /// Adagrad.
    Adagrad(Adagrad<T>),
}

impl<T: Float> Update<T> {
    /// The slots the update reads and writes, in the order the kernels take them.
    pub fn slot_names(&self) -> &'static [&'static str] {
        match *self {
            Self::Sgd(_) => &[],
            Self::Momentum(Momentum::Torch { .. }) => &["momentum_buffer"],
            Self::Momentum(Momentum::Keras { .. }) => &["velocity"],
            Self::Momentum(Momentum::Core { .. }) => &["change"],
            Self::Adam(Adam::Torch(AdamTorch { amsgrad, .. }) | Adam::Keras { amsgrad, .. }) => {
                if amsgrad {
                    &["m", "v", "v_max"]
                } else {
                    &["m", "v"]
                }
            }
            Self::Rmsprop(Rmsprop {
                momentum, centered, ..
            }) => match (centered, momentum != T::zero()) {
                (false, false) => &["square_avg"],
                (true, false) => &["square_avg", "grad_avg"],
                (false, true) => &["square_avg", "momentum_buffer"],
                (true, true) => &["square_avg", "grad_avg", "momentum_buffer"],
            },
            Self::Adagrad(_) => &["sum"],
        }
    }

    /// Applies the update to one chunk: `param`, `grad` and every slot have one length.
    /// This is the canonical implementation the Cpu device runs; the `match` sits outside
    /// the loops so that each loop vectorizes.
    #[inline(always)]
    pub(crate) fn apply_chunk(&self, param: &mut [T], grad: &[T], slots: &mut [&mut [T]]) {
        let zero = T::zero();
        match *self {
            Self::Sgd(Sgd { lr, weight_decay }) => {
                for (p, &g) in param.iter_mut().zip(grad) {
                    let g = if weight_decay != zero {
                        g + weight_decay * *p
                    } else {
                        g
                    };
                    *p = *p - lr * g;
                }
            }
            Self::Momentum(Momentum::Torch {
                lr,
                momentum,
                dampening,
                nesterov,
                weight_decay,
                first_step,
            }) => {
                let [buf] = slots else {
                    unreachable!("momentum takes one slot")
                };
                let one_minus_dampening = T::one() - dampening;
                for ((p, &g), b) in param.iter_mut().zip(grad).zip(buf.iter_mut()) {
                    let g = if weight_decay != zero {
                        g + weight_decay * *p
                    } else {
                        g
                    };
                    *b = if first_step {
                        g
                    } else {
                        *b * momentum + one_minus_dampening * g
                    };
                    let d = if nesterov { g + momentum * *b } else { *b };
                    *p = *p - lr * d;
                }
            }
            Self::Momentum(Momentum::Keras {
                lr,
                momentum,
                nesterov,
                weight_decay,
            }) => {
                let [velocity] = slots else {
                    unreachable!("momentum takes one slot")
                };
                for ((p, &g), v) in param.iter_mut().zip(grad).zip(velocity.iter_mut()) {
                    if weight_decay != zero {
                        *p = *p - (*p * weight_decay) * lr;
                    }
                    *v = *v * momentum - g * lr;
                    *p = if nesterov {
                        *p + (*v * momentum - g * lr)
                    } else {
                        *p + *v
                    };
                }
            }
            Self::Momentum(Momentum::Core { lr, momentum }) => {
                let [change] = slots else {
                    unreachable!("momentum takes one slot")
                };
                for ((p, &g), c) in param.iter_mut().zip(grad).zip(change.iter_mut()) {
                    *c = lr * g + momentum * *c;
                    *p = *p - *c;
                }
            }
            Self::Adam(Adam::Torch(adam)) => {
                // Four loops, so that the common case (no weight decay) carries no
                // per-element test of a loop-invariant condition.
                let decay = adam.weight_decay != zero || adam.decoupled_keep != T::one();
                match (decay, slots) {
                    (false, [m, v]) => {
                        adam_torch_loop::<T, false, false>(adam, param, grad, m, v, &mut [])
                    }
                    (true, [m, v]) => {
                        adam_torch_loop::<T, true, false>(adam, param, grad, m, v, &mut [])
                    }
                    (false, [m, v, vm]) => {
                        adam_torch_loop::<T, false, true>(adam, param, grad, m, v, vm)
                    }
                    (true, [m, v, vm]) => {
                        adam_torch_loop::<T, true, true>(adam, param, grad, m, v, vm)
                    }
                    _ => unreachable!("adam takes two or three slots"),
                }
            }
            Self::Adam(Adam::Keras {
                alpha,
                lr,
                one_minus_beta1,
                one_minus_beta2,
                eps,
                weight_decay,
                amsgrad: _,
            }) => {
                let decay = |p: &mut T| {
                    if weight_decay != zero {
                        *p = *p - (*p * weight_decay) * lr;
                    }
                };
                match slots {
                    [m, v] => {
                        for (((p, &g), m), v) in param
                            .iter_mut()
                            .zip(grad)
                            .zip(m.iter_mut())
                            .zip(v.iter_mut())
                        {
                            decay(p);
                            *m = *m + (g - *m) * one_minus_beta1;
                            *v = *v + (g * g - *v) * one_minus_beta2;
                            *p = *p - (*m * alpha) / (v.sqrt() + eps);
                        }
                    }
                    [m, v, v_max] => {
                        for ((((p, &g), m), v), vm) in param
                            .iter_mut()
                            .zip(grad)
                            .zip(m.iter_mut())
                            .zip(v.iter_mut())
                            .zip(v_max.iter_mut())
                        {
                            decay(p);
                            *m = *m + (g - *m) * one_minus_beta1;
                            *v = *v + (g * g - *v) * one_minus_beta2;
                            *vm = reduce::max2(*vm, *v);
                            *p = *p - (*m * alpha) / (vm.sqrt() + eps);
                        }
                    }
                    _ => unreachable!("adam takes two or three slots"),
                }
            }
            Self::Rmsprop(rule) => rmsprop_chunk(rule, param, grad, slots),
            Self::Adagrad(Adagrad::Torch {
                clr,
                eps,
                weight_decay,
            }) => {
                let [sum] = slots else {
                    unreachable!("adagrad takes one slot")
                };
                let neg_clr = -clr;
                for ((p, &g), s) in param.iter_mut().zip(grad).zip(sum.iter_mut()) {
                    let g = if weight_decay != zero {
                        g + weight_decay * *p
                    } else {
                        g
                    };
                    *s = *s + g * g;
                    *p = *p + (neg_clr * g) / (s.sqrt() + eps);
                }
            }
            Self::Adagrad(Adagrad::Keras {
                lr,
                eps,
                weight_decay,
            }) => {
                let [sum] = slots else {
                    unreachable!("adagrad takes one slot")
                };
                for ((p, &g), s) in param.iter_mut().zip(grad).zip(sum.iter_mut()) {
                    if weight_decay != zero {
                        *p = *p - (*p * weight_decay) * lr;
                    }
                    *s = *s + g * g;
                    *p = *p - (lr * g) / (*s + eps).sqrt();
                }
            }
        }
    }
}

/// PyTorch's Adam over one chunk; `DECAY` applies the weight decays, `AMSGRAD` keeps
/// `v_max` (empty otherwise).
#[inline(always)]
fn adam_torch_loop<T: Float, const DECAY: bool, const AMSGRAD: bool>(
    s: AdamTorch<T>,
    param: &mut [T],
    grad: &[T],
    m: &mut [T],
    v: &mut [T],
    v_max: &mut [T],
) {
    let n = param.len();
    let neg_step = -s.step_size;
    let (grad, m, v) = (&grad[..n], &mut m[..n], &mut v[..n]);
    let v_max = if AMSGRAD { &mut v_max[..n] } else { v_max };
    for i in 0..n {
        let mut g = grad[i];
        if DECAY {
            if s.decoupled_keep != T::one() {
                param[i] = param[i] * s.decoupled_keep;
            }
            if s.weight_decay != T::zero() {
                g = g + s.weight_decay * param[i];
            }
        }
        m[i] = m[i] + s.one_minus_beta1 * (g - m[i]);
        v[i] = v[i] * s.beta2 + s.one_minus_beta2 * (g * g);
        let vv = if AMSGRAD {
            v_max[i] = reduce::max2(v_max[i], v[i]);
            v_max[i]
        } else {
            v[i]
        };
        param[i] = param[i] + (neg_step * m[i]) / (vv.sqrt() / s.bias_correction2_sqrt + s.eps);
    }
}

/// RMSprop's chunk update (both flavors), split out for its slot combinations.
#[inline(always)]
fn rmsprop_chunk<T: Float>(rule: Rmsprop<T>, param: &mut [T], grad: &[T], slots: &mut [&mut [T]]) {
    let zero = T::zero();
    let Rmsprop {
        flavor,
        lr,
        alpha,
        one_minus_alpha,
        eps,
        momentum,
        centered,
        weight_decay,
    } = rule;
    let torch = flavor == Flavor::Torch;
    let (square_avg, rest) = slots.split_first_mut().expect("rmsprop keeps square_avg");
    let (mut grad_avg, rest) = if centered {
        let (ga, rest) = rest
            .split_first_mut()
            .expect("centered rmsprop keeps grad_avg");
        (Some(ga), rest)
    } else {
        (None, rest)
    };
    let mut buffer = rest.first_mut();
    for i in 0..param.len() {
        let p = &mut param[i];
        let mut g = grad[i];
        let sq = &mut square_avg[i];
        if torch {
            if weight_decay != zero {
                g = g + weight_decay * *p;
            }
            *sq = *sq * alpha + one_minus_alpha * (g * g);
            let avg = match grad_avg.as_deref_mut() {
                Some(ga) => {
                    ga[i] = ga[i] + one_minus_alpha * (g - ga[i]);
                    (*sq + (-T::one()) * (ga[i] * ga[i])).sqrt() + eps
                }
                None => sq.sqrt() + eps,
            };
            match buffer.as_deref_mut() {
                Some(buf) => {
                    buf[i] = buf[i] * momentum + g / avg;
                    *p = *p + (-lr) * buf[i];
                }
                None => *p = *p + ((-lr) * g) / avg,
            }
        } else {
            if weight_decay != zero {
                *p = *p - (*p * weight_decay) * lr;
            }
            *sq = alpha * *sq + one_minus_alpha * (g * g);
            let denominator = match grad_avg.as_deref_mut() {
                Some(ga) => {
                    ga[i] = alpha * ga[i] + one_minus_alpha * g;
                    *sq - ga[i] * ga[i] + eps
                }
                None => *sq + eps,
            };
            let increment = (lr * g) / denominator.sqrt();
            match buffer.as_deref_mut() {
                Some(buf) => {
                    buf[i] = momentum * buf[i] + increment;
                    *p = *p - buf[i];
                }
                None => *p = *p - increment,
            }
        }
    }
}

/// One parameter's update for [`OptimKernel::update_all`]: the rule with its step
/// scalars, the parameter, its gradient and its slots (in [`Update::slot_names`] order).
#[derive(Debug)]
pub struct BufferJob<'a, T, B> {
    /// The update rule and its scalars.
    pub update: Update<T>,
    /// The parameter, updated in place.
    pub param: &'a mut B,
    /// Its gradient.
    pub grad: &'a B,
    /// Its slots.
    pub slots: SmallVec<[&'a mut B; MAX_SLOTS]>,
}

/// The fused optimizer update and the target networks' Polyak averaging. Every buffer
/// holds the parameter's element count; `slots` follow [`Update::slot_names`].
pub trait OptimKernel<T: Float>: Device {
    /// Applies `update` to `param` in place, reading `grad` and updating the slots.
    fn update(
        &self,
        update: &Update<T>,
        param: &mut Self::Buffer<T>,
        grad: &Self::Buffer<T>,
        slots: &mut [&mut Self::Buffer<T>],
    ) -> Result<()>;

    /// Applies every job of a step: the bits of [`OptimKernel::update`] on each (updates
    /// are elementwise), in as few passes as the device can make (a GPU: one launch per
    /// few parameters of the same update). The default, which the Cpu keeps (each update
    /// is already one parallel pass that allocates nothing), updates them one by one. A
    /// device that fails in the middle leaves the jobs before the failure done.
    fn update_all(&self, jobs: &mut [BufferJob<'_, T, Self::Buffer<T>>]) -> Result<()> {
        for job in jobs {
            self.update(&job.update, job.param, job.grad, &mut job.slots)?;
        }
        Ok(())
    }

    /// Polyak averaging of every target toward its source, elementwise
    /// `target = (source * tau) + (target * keep)` with `keep = 1 - tau` rounded by the
    /// caller (TD3's and DDPG's soft target update), for all pairs at once. An error when
    /// the lists' lengths differ or a target's length is not its source's.
    fn polyak(
        &self,
        tau: T,
        keep: T,
        targets: &mut [&mut Self::Buffer<T>],
        sources: &[&Self::Buffer<T>],
    ) -> Result<()>;

    /// `scale[0] = down_scale(largest[0])` ([`down_scale`](crate::kernels::clip::down_scale)): the factor of a
    /// global-norm clip's second sum of squares, computed where the gradients are. An error
    /// unless both hold one element.
    fn clip_scale(&self, largest: &Self::Buffer<T>, scale: &mut Self::Buffer<T>) -> Result<()>;

    /// `out = clip_factors(max_norm, sums[0], sums[1], sums[2])` ([`clip_factors`](crate::kernels::clip::clip_factors)):
    /// a global-norm clip's `[norm, first, second]` from its sums, decided where the
    /// gradients are, so that the step reads nothing back. An error unless `sums` and
    /// `out` hold three elements, or when `max_norm` is not finite and positive.
    fn clip_plan(
        &self,
        max_norm: f64,
        sums: &Self::Buffer<T>,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;
}

/// Checks the arguments of [`OptimKernel::clip_scale`] (`sizes` 1 and 1) or
/// [`OptimKernel::clip_plan`] (3 and 3, and `max_norm`), given the buffers' lengths.
pub fn check_clip(
    function: &'static str,
    [input, output]: [(&'static str, usize); 2],
    want: usize,
    max_norm: Option<f64>,
) -> Result<()> {
    crate::check::len(function, input.0, want, input.1)?;
    crate::check::len(function, output.0, want, output.1)?;
    match max_norm {
        Some(max_norm) => crate::check::positive(function, "max_norm", max_norm),
        None => Ok(()),
    }
}

/// Checks the arguments of [`OptimKernel::polyak`] given the buffers' lengths.
pub fn check_polyak(
    function: &'static str,
    targets: impl ExactSizeIterator<Item = usize>,
    sources: impl ExactSizeIterator<Item = usize>,
) -> Result<()> {
    if targets.len() != sources.len() {
        return Err(Error::shape(
            function,
            "sources",
            format_args!("{} buffers, one per target", targets.len()),
            sources.len(),
        ));
    }
    for (k, (t, s)) in targets.zip(sources).enumerate() {
        if t != s {
            return Err(Error::shape(
                function,
                "sources",
                format_args!("{t} elements in source {k}, as its target"),
                s,
            ));
        }
    }
    Ok(())
}
