//! [`OptimKernel`] on the GPU (`optim.cu`): every fused update of
//! `rlgrad_core::kernels::optim` in its documented order of operations, one thread per
//! element, step scalars from the host.

use rlgrad_core::kernels::OptimKernel;
use rlgrad_core::kernels::optim::{Adagrad, Adam, Flavor, Momentum, Update};
use rlgrad_core::{Error, Float, Result};

use crate::compile::Family;
use crate::device::{Cuda, CudaBuffer, KernelArg, Scalar, grid};

fn check<T: Float>(
    update: &Update<T>,
    param: &CudaBuffer<T>,
    grad: &CudaBuffer<T>,
    slots: &[&mut CudaBuffer<T>],
) -> Result<()> {
    const F: &str = "Cuda::update";
    let len = param.len();
    if grad.len() != len {
        return Err(Error::shape(
            F,
            "grad",
            format_args!("{len} elements, as the parameter"),
            format_args!("{} elements", grad.len()),
        ));
    }
    let names = update.slot_names();
    if slots.len() != names.len() {
        return Err(Error::shape(
            F,
            "slots",
            format_args!("{} slots ({})", names.len(), names.join(", ")),
            format_args!("{} slots", slots.len()),
        ));
    }
    if let Some((name, slot)) = names.iter().zip(slots).find(|(_, s)| s.len() != len) {
        return Err(Error::shape(
            F,
            "slots",
            format_args!("slot `{name}` of {len} elements"),
            format_args!("{} elements", slot.len()),
        ));
    }
    Ok(())
}

impl<T: Float> OptimKernel<T> for Cuda {
    fn update(
        &self,
        update: &Update<T>,
        param: &mut CudaBuffer<T>,
        grad: &CudaBuffer<T>,
        slots: &mut [&mut CudaBuffer<T>],
    ) -> Result<()> {
        const F: &str = "Cuda::update";
        check(update, param, grad, slots)?;
        let n = param.len();
        if n == 0 {
            return Ok(());
        }
        let slot = |k: usize| slots.get(k).map_or(0, |s| self.ptr(&**s));
        let (p, g, len) = (self.ptr(param), self.ptr(grad), n as u64);
        let s = Scalar::of::<T>;
        let flag = |b: bool| i32::from(b);
        let (s0, s1, s2) = (slot(0), slot(1), slot(2));
        let (name, args): (&str, Vec<Box<dyn KernelArg>>) = match *update {
            Update::Sgd(rule) => (
                "sgd",
                vec![
                    Box::new(len),
                    Box::new(s(rule.lr)),
                    Box::new(s(rule.weight_decay)),
                ],
            ),
            Update::Momentum(Momentum::Torch {
                lr,
                momentum,
                dampening,
                nesterov,
                weight_decay,
                first_step,
            }) => (
                "momentum_torch",
                vec![
                    Box::new(s0),
                    Box::new(len),
                    Box::new(s(lr)),
                    Box::new(s(momentum)),
                    Box::new(s(dampening)),
                    Box::new(flag(nesterov)),
                    Box::new(s(weight_decay)),
                    Box::new(flag(first_step)),
                ],
            ),
            Update::Momentum(Momentum::Keras {
                lr,
                momentum,
                nesterov,
                weight_decay,
            }) => (
                "momentum_keras",
                vec![
                    Box::new(s0),
                    Box::new(len),
                    Box::new(s(lr)),
                    Box::new(s(momentum)),
                    Box::new(flag(nesterov)),
                    Box::new(s(weight_decay)),
                ],
            ),
            Update::Momentum(Momentum::Core { lr, momentum }) => (
                "momentum_core",
                vec![
                    Box::new(s0),
                    Box::new(len),
                    Box::new(s(lr)),
                    Box::new(s(momentum)),
                ],
            ),
            Update::Adam(Adam::Torch(a)) => (
                "adam_torch",
                vec![
                    Box::new(s0),
                    Box::new(s1),
                    Box::new(s2),
                    Box::new(len),
                    Box::new(s(a.step_size)),
                    Box::new(s(a.bias_correction2_sqrt)),
                    Box::new(s(a.one_minus_beta1)),
                    Box::new(s(a.beta2)),
                    Box::new(s(a.one_minus_beta2)),
                    Box::new(s(a.eps)),
                    Box::new(s(a.weight_decay)),
                    Box::new(s(a.decoupled_keep)),
                ],
            ),
            Update::Adam(Adam::Keras {
                alpha,
                lr,
                one_minus_beta1,
                one_minus_beta2,
                eps,
                weight_decay,
                amsgrad: _,
            }) => (
                "adam_keras",
                vec![
                    Box::new(s0),
                    Box::new(s1),
                    Box::new(s2),
                    Box::new(len),
                    Box::new(s(alpha)),
                    Box::new(s(lr)),
                    Box::new(s(one_minus_beta1)),
                    Box::new(s(one_minus_beta2)),
                    Box::new(s(eps)),
                    Box::new(s(weight_decay)),
                ],
            ),
            Update::Rmsprop(r) => {
                // Slots: square_avg, then grad_avg when centered, then the momentum buffer.
                let grad_avg = if r.centered { s1 } else { 0 };
                let buffer = if r.momentum != T::zero() {
                    if r.centered { s2 } else { s1 }
                } else {
                    0
                };
                (
                    "rmsprop",
                    vec![
                        Box::new(s0),
                        Box::new(grad_avg),
                        Box::new(buffer),
                        Box::new(len),
                        Box::new(flag(r.flavor == Flavor::Torch)),
                        Box::new(s(r.lr)),
                        Box::new(s(r.alpha)),
                        Box::new(s(r.one_minus_alpha)),
                        Box::new(s(r.eps)),
                        Box::new(s(r.momentum)),
                        Box::new(s(r.weight_decay)),
                    ],
                )
            }
            Update::Adagrad(Adagrad::Torch {
                clr,
                eps,
                weight_decay,
            }) => (
                "adagrad_torch",
                vec![
                    Box::new(s0),
                    Box::new(len),
                    Box::new(s(clr)),
                    Box::new(s(eps)),
                    Box::new(s(weight_decay)),
                ],
            ),
            Update::Adagrad(Adagrad::Keras {
                lr,
                eps,
                weight_decay,
            }) => (
                "adagrad_keras",
                vec![
                    Box::new(s0),
                    Box::new(len),
                    Box::new(s(lr)),
                    Box::new(s(eps)),
                    Box::new(s(weight_decay)),
                ],
            ),
        };
        let kernel = self.function::<T>(Family::Optim, name)?;
        let mut all: Vec<&dyn KernelArg> = vec![&p, &g];
        all.extend(args.iter().map(|a| &**a));
        self.launch(F, &kernel, grid(n), &all)
    }
}
