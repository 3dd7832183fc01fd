//! What [`crate::Tape::gradient`] returns.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use rlgrad_core::kernels::OptimKernel;
use rlgrad_core::{Cpu, Error, Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};
use smallvec::SmallVec;

use crate::finite::NonFinite;
use crate::module::Module;
use crate::param::{Param, ParamId};

pub(crate) struct Entry<T: Float, D: TensorDevice<T>> {
    id: ParamId,
    name: Arc<str>,
    pub(crate) grad: Option<Tensor<T, D>>,
}

impl<T: Float, D: TensorDevice<T>> Entry<T, D> {
    pub(crate) fn new(param: &Param<T, D>) -> Self {
        Self {
            id: param.id(),
            name: Arc::clone(param.shared_name()),
            grad: None,
        }
    }
}

/// The result of [`crate::Tape::gradient`]: one gradient per requested parameter, each a
/// dense tensor of the parameter's shape, or none when the loss does not depend on it.
pub struct Gradients<T: Float = f32, D: TensorDevice<T> = Cpu> {
    entries: SmallVec<[Entry<T, D>; 8]>,
    non_finite: Option<NonFinite>,
}

impl<T: Float, D: TensorDevice<T>> Gradients<T, D> {
    pub(crate) fn new(entries: SmallVec<[Entry<T, D>; 8]>, non_finite: Option<NonFinite>) -> Self {
        Self {
            entries,
            non_finite,
        }
    }

    /// The origin of the first NaN or infinity of the tape these gradients came from, when
    /// its finite check was on ([`crate::Tape::check_finite`]); an optimizer step with its
    /// own finite check on names it in its error ([`crate::ApplyGradients`]).
    pub fn first_non_finite(&self) -> Option<&NonFinite> {
        self.non_finite.as_ref()
    }

    /// The gradient of `param`. Errors: `param` was not among the requested sources, or
    /// the loss does not depend on it (the message names it).
    pub fn get(&self, param: &Param<T, D>) -> Result<&Tensor<T, D>> {
        let entry = self.by_param(param.id()).ok_or_else(|| {
            Error::value(
                "Gradients::get",
                "param",
                "a parameter the gradient was asked for",
                format_args!("`{}`", param.name()),
            )
        })?;
        entry.grad.as_ref().ok_or_else(|| {
            Error::value(
                "Gradients::get",
                "param",
                "a parameter the loss depends on",
                format_args!("`{}`, which the loss does not depend on", param.name()),
            )
        })
    }

    /// Whether the loss depends on `param` (`false` also when it was not requested).
    pub fn is_connected(&self, param: &Param<T, D>) -> bool {
        self.get(param).is_ok()
    }

    /// The gradient of the parameter named `name`, if one was requested and connected.
    pub fn by_name(&self, name: &str) -> Option<&Tensor<T, D>> {
        self.entries
            .iter()
            .find(|e| &*e.name == name)
            .and_then(|e| e.grad.as_ref())
    }

    /// Gradients computed elsewhere, for [`crate::ApplyGradients::apply_gradients`]: one
    /// for every parameter of `module`, in its visiting order, `grad_of(param)`. That is
    /// how a gradient the tape did not make reaches an optimizer on any device: reduced
    /// over ranks by `rlgrad-dist` on the host and uploaded, accumulated by hand, read from
    /// a file. Each is kept dense ([`Tensor::dense`]). Errors: `grad_of`'s own, and a
    /// gradient whose shape is not its parameter's (naming the parameter); nothing is
    /// asked of the parameters after the first error.
    ///
    /// ```
    /// use rlgrad_autodiff::{ApplyGradients, Gradients, Param};
    /// use rlgrad_optim::{Optimizer, Sgd};
    /// use rlgrad_tensor::Tensor;
    /// let mut w = Param::new("w", Tensor::from_vec(vec![1.0f32, 2.0], [2])?)?;
    /// // A gradient from elsewhere, by the parameter's name.
    /// let reduced = [("w", vec![0.5f32, -1.0])];
    /// let grads = Gradients::from_fn(&w, |p| {
    ///     let (_, grad) = reduced.iter().find(|(name, _)| *name == p.name()).unwrap();
    ///     Tensor::from_vec(grad.clone(), p.shape().clone())
    /// })?;
    /// let mut sgd = Optimizer::<f32>::new(Sgd::default(), 1.0)?;
    /// sgd.apply_gradients(&mut w, &grads)?;
    /// assert_eq!(w.value().to_vec()?, [0.5, 3.0]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn from_fn<M: Module<T, D> + ?Sized>(
        module: &M,
        mut grad_of: impl FnMut(&Param<T, D>) -> Result<Tensor<T, D>>,
    ) -> Result<Self> {
        let mut entries = SmallVec::new();
        let mut failed = None;
        module.visit(&mut |param| {
            if failed.is_some() {
                return;
            }
            let grad = grad_of(param).and_then(|grad| {
                if grad.shape() != param.shape() {
                    return Err(Error::shape(
                        "Gradients::from_fn",
                        "grad_of",
                        format_args!("the shape {} of `{}`", param.shape(), param.name()),
                        grad.shape(),
                    ));
                }
                grad.dense()
            });
            match grad {
                Ok(grad) => {
                    let mut entry = Entry::new(param);
                    entry.grad = Some(grad);
                    entries.push(entry);
                }
                Err(error) => failed = Some(error),
            }
        });
        match failed {
            Some(error) => Err(error),
            None => Ok(Self::new(entries, None)),
        }
    }

    pub(crate) fn by_param(&self, id: ParamId) -> Option<&Entry<T, D>> {
        self.entries.iter().find(|e| e.id == id)
    }

    /// The number of requested parameters.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no parameter was requested.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Each requested parameter in order: its name and its gradient (`None` when the loss
    /// does not depend on it).
    pub fn iter(&self) -> impl Iterator<Item = (&str, Option<&Tensor<T, D>>)> {
        self.entries.iter().map(|e| (&*e.name, e.grad.as_ref()))
    }

    /// The names of the requested parameters the loss does not depend on.
    pub fn unconnected(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .filter(|e| e.grad.is_none())
            .map(|e| &*e.name)
    }
}

impl<T: Float, D: TensorDevice<T>> Entry<T, D> {
    pub(crate) fn grad(&self) -> Option<&Tensor<T, D>> {
        self.grad.as_ref()
    }
}

impl<T: Float, D: TensorDevice<T>> Gradients<T, D> {
    /// Scales every gradient by `max_norm / norm` when their global L2 norm exceeds
    /// `max_norm` (PyTorch's `clip_grad_norm_`, TensorFlow's `clip_by_global_norm`) and
    /// returns the norm before clipping: [`rlgrad_optim::clip_grad_norm`]'s canonical
    /// order over the gradients in request order, with the same bits on every device. An
    /// error for a non-positive or non-finite `max_norm`.
    ///
    /// On a device other than the Cpu, the sum of squares runs there (the canonical sum of
    /// the gradients concatenated in request order) and the norm is read back to decide
    /// the scaling: one host read per call, so a [`rlgrad_core::Step`] that clips is not
    /// recorded (it runs eagerly and says so).
    pub fn clip_global_norm(&mut self, max_norm: f64) -> Result<T> {
        if let Some(on_cpu) = (self as &mut dyn Any).downcast_mut::<Gradients<T, Cpu>>() {
            // The norm decides on the host, as the other devices' read does: a step that
            // clips cannot be recorded there, so the Cpu's steps say so too.
            rlgrad_core::step::note_host_read("Gradients::clip_global_norm");
            return on_cpu.clip_slices(max_norm);
        }
        self.clip_with_tensor_ops(max_norm)
    }

    /// The gradients flattened and concatenated in request order; `None` for none.
    fn concatenated(&self) -> Result<Option<Tensor<T, D>>> {
        let flat: Vec<Tensor<T, D>> = self
            .entries
            .iter()
            .filter_map(|e| e.grad.as_ref())
            .map(|g| g.reshape([g.numel()]))
            .collect::<Result<_>>()?;
        Ok(match flat.as_slice() {
            [] => None,
            [one] => Some(one.clone()),
            many => Some(Tensor::concat(&many.iter().collect::<Vec<_>>(), 0)?),
        })
    }

    /// [`Self::clip_global_norm`] through tensor ops, which every device has.
    fn clip_with_tensor_ops(&mut self, max_norm: f64) -> Result<T> {
        let function = "Gradients::clip_global_norm";
        let all = self.concatenated()?;
        let sum_of_squares = |scale: T| match &all {
            None => Ok(T::zero()),
            Some(all) if scale == T::one() => all.square()?.sum_all(),
            Some(all) => (all * scale)?.square()?.sum_all(),
        };
        let largest_magnitude = || all.as_ref().map_or(Ok(T::zero()), |a| a.abs()?.max_all());
        let clipping =
            rlgrad_optim::plan_clip(function, max_norm, sum_of_squares, largest_magnitude)
                .map_err(|e| e.in_function(function))?;
        if let Some((first, second)) = clipping.scale {
            for grad in self.entries.iter_mut().filter_map(|e| e.grad.as_mut()) {
                *grad = if first == T::one() {
                    (&*grad * second)?
                } else {
                    ((&*grad * first)? * second)?
                };
            }
        }
        Ok(clipping.norm)
    }
}

impl<T: Float, D: TensorDevice<T> + OptimKernel<T>> Gradients<T, D> {
    /// [`Self::clip_global_norm`] decided on the device: the same norm and the same
    /// clipped gradients, bit for bit, with nothing read back, so that a
    /// [`rlgrad_core::Step`] that clips can be recorded (a GPU's CUDA graph). Returns the
    /// norm as a one-element tensor, to read after the step (`None` when no parameter has
    /// a gradient: nothing to clip). An error for a non-positive or non-finite `max_norm`.
    ///
    /// On the Cpu, whose memory is the host's, this is [`Self::clip_global_norm`]'s fused
    /// clip with the norm put in a tensor (and no host read counted). Elsewhere the
    /// decision ([`clip_factors`]) needs the largest `|g|` and the sum of squares of the
    /// gradients scaled by [`down_scale`] of it where the plain sum overflows; without a
    /// read the device cannot know beforehand, so it computes both always: two more
    /// reductions than [`Self::clip_global_norm`], and the gradients multiply by two
    /// device scalars (1 and 1 where they stay, which keeps every bit).
    ///
    /// ```
    /// use rlgrad_autodiff::{Param, Tape};
    /// use rlgrad_core::Cpu;
    /// use rlgrad_tensor::Tensor;
    ///
    /// let w = Param::new("w", Tensor::from_vec(vec![3.0f32, 4.0], [2])?)?;
    /// let tape = Tape::new();
    /// let loss = tape.param(&w).mul(&tape.param(&w))?.sum_all()?;
    /// let mut grads = tape.gradient(&loss, &[&w])?; // [6, 8], norm 10
    /// let norm = grads.clip_global_norm_on_device(1.0)?.expect("w has a gradient");
    /// assert_eq!(norm.to_vec()?, [10.0]);
    /// let clipped = grads.get(&w)?.to_vec()?;
    /// assert!((clipped[0] - 0.6).abs() < 1e-6 && (clipped[1] - 0.8).abs() < 1e-6);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    ///
    /// [`clip_factors`]: rlgrad_core::kernels::clip::clip_factors
    /// [`down_scale`]: rlgrad_core::kernels::clip::down_scale
    pub fn clip_global_norm_on_device(&mut self, max_norm: f64) -> Result<Option<Tensor<T, D>>> {
        const F: &str = "Gradients::clip_global_norm_on_device";
        rlgrad_core::check::positive(F, "max_norm", max_norm)?;
        if self.entries.iter().all(|e| e.grad.is_none()) {
            return Ok(None);
        }
        if let Some(on_cpu) = (self as &mut dyn Any).downcast_mut::<Gradients<T, Cpu>>() {
            let norm = on_cpu.clip_slices(max_norm)?;
            let norm: Box<dyn Any> = Box::new(Tensor::<T, Cpu>::from_vec(vec![norm], [1])?);
            return Ok(norm.downcast::<Tensor<T, D>>().ok().map(|norm| *norm));
        }
        self.clip_deciding_on_device(max_norm)
    }

    /// [`Self::clip_global_norm_on_device`] through the decision kernels, which every
    /// device has (a GPU's path; tested on the Cpu).
    fn clip_deciding_on_device(&mut self, max_norm: f64) -> Result<Option<Tensor<T, D>>> {
        const F: &str = "Gradients::clip_global_norm_on_device";
        let Some(all) = self.concatenated()? else {
            return Ok(None);
        };
        let device = all.device().clone();
        // One-element results of the reductions (`[1]`), as the decision kernels take them.
        let sum = all.square()?.sum_axis(0, true)?;
        let largest = all.abs()?.max_axis(0, true)?;
        let scale = Tensor::from_kernel(&device, [1].into(), |out| {
            device.clip_scale(buffer_of(&largest)?, out)
        })?;
        let scaled = (&all * &scale)?.square()?.sum_axis(0, true)?;
        let sums = Tensor::concat(&[&sum, &largest, &scaled], 0)?;
        let plan = Tensor::from_kernel(&device, [3].into(), |out| {
            device.clip_plan(max_norm, buffer_of(&sums)?, out)
        })
        .map_err(|e| e.in_function(F))?;
        let (first, second) = (plan.narrow(0, 1, 1)?, plan.narrow(0, 2, 1)?);
        for grad in self.entries.iter_mut().filter_map(|e| e.grad.as_mut()) {
            *grad = (&(&*grad * &first)? * &second)?;
        }
        plan.narrow(0, 0, 1).map(Some)
    }
}

/// The whole buffer of a tensor made dense ([`Tensor::dense`]).
fn buffer_of<T: Float, D: TensorDevice<T>>(tensor: &Tensor<T, D>) -> Result<&D::Buffer<T>> {
    tensor.dense_buffer().ok_or_else(|| {
        Error::shape(
            "Gradients::clip_global_norm_on_device",
            "tensor",
            "a dense tensor",
            "a view",
        )
    })
}

impl<T: Float> Gradients<T, Cpu> {
    /// [`Self::clip_global_norm`] on the Cpu: in place, fused, in parallel.
    fn clip_slices(&mut self, max_norm: f64) -> Result<T> {
        let mut buffers: SmallVec<[&mut [T]; 8]> = SmallVec::new();
        for entry in &mut self.entries {
            if let Some(grad) = &mut entry.grad {
                buffers.push(grad.make_mut()?.as_mut_slice());
            }
        }
        rlgrad_optim::clip_grad_norm(&mut buffers, max_norm)
            .map_err(|e| e.in_function("Gradients::clip_global_norm"))
    }
}

impl<T: Float, D: TensorDevice<T>> fmt::Debug for Gradients<T, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut list = f.debug_list();
        for (name, grad) in self.iter() {
            list.entry(&(name, grad.map(|g| g.shape().clone())));
        }
        list.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tape;
    use rlgrad_core::Rng;

    /// Gradients equal to `factors` (the loss is `sum(p_k * factors_k)`), for parameters of
    /// sizes that put the canonical sum's pieces across tensor boundaries.
    fn gradients(factors: &[Vec<f32>]) -> Gradients<f32> {
        let params: Vec<Param<f32>> = factors
            .iter()
            .enumerate()
            .map(|(k, f)| Param::new(format!("p{k}"), Tensor::zeros([f.len()]).unwrap()).unwrap())
            .collect();
        let tape = Tape::new();
        let mut loss = None;
        for (p, f) in params.iter().zip(factors) {
            let term = tape
                .param(p)
                .mul(&tape.constant(&Tensor::from_vec(f.clone(), [f.len()]).unwrap()))
                .unwrap()
                .sum_all()
                .unwrap();
            loss = Some(match loss {
                None => term,
                Some(sum) => term.add(&sum).unwrap(),
            });
        }
        let sources: Vec<&dyn crate::Module<f32>> = params
            .iter()
            .map(|p| p as &dyn crate::Module<f32>)
            .collect();
        tape.gradient(&loss.unwrap(), &sources).unwrap()
    }

    fn all_bits(grads: &Gradients<f32>) -> Vec<u32> {
        grads
            .iter()
            .flat_map(|(_, g)| g.unwrap().to_vec().unwrap())
            .map(f32::to_bits)
            .collect()
    }

    /// The tensor-op path (what a GPU runs) and the decision on the device (what a
    /// recorded step runs) give the Cpu's in-place clip bit for bit: clipped and not,
    /// squares that overflow f32 (the rescaled norm), a norm beyond f32's range, infinite
    /// and NaN gradients.
    #[test]
    fn clipping_through_tensor_ops_and_on_the_device_has_the_cpus_bits() {
        let mut rng = Rng::new(3, "clip");
        let sizes = [1, 33, 5000, 70_007];
        for (case, (magnitude, poison)) in [
            (1.0, None),
            (1e-4, None),
            (1e20, None),
            (1e37, None),
            (1.0, Some(f32::INFINITY)),
            (1.0, Some(f32::NAN)),
        ]
        .into_iter()
        .enumerate()
        {
            let mut factors: Vec<Vec<f32>> = sizes
                .iter()
                .map(|&n| (0..n).map(|_| rng.normal(0.0, magnitude)).collect())
                .collect();
            if let Some(poison) = poison {
                factors[2][17] = poison;
            }
            let (mut on_cpu, mut through_ops) = (gradients(&factors), gradients(&factors));
            let (mut on_device, mut public) = (gradients(&factors), gradients(&factors));
            let cpu_norm = on_cpu.clip_slices(0.5).unwrap();
            let ops_norm = through_ops.clip_with_tensor_ops(0.5).unwrap();
            let device_norm = on_device.clip_deciding_on_device(0.5).unwrap().unwrap();
            let public_norm = public.clip_global_norm_on_device(0.5).unwrap().unwrap();
            let clipped = [
                ("tensor ops", ops_norm, &through_ops),
                ("device", device_norm.to_vec().unwrap()[0], &on_device),
                ("public", public_norm.to_vec().unwrap()[0], &public),
            ];
            for (path, norm, grads) in clipped {
                assert_eq!(
                    norm.to_bits(),
                    cpu_norm.to_bits(),
                    "case {case}: {path} norm"
                );
                assert_eq!(all_bits(&on_cpu), all_bits(grads), "case {case}: {path}");
            }
            if magnitude == 1e-4 {
                let unchanged: Vec<u32> = factors.concat().iter().map(|f| f.to_bits()).collect();
                assert_eq!(all_bits(&on_cpu), unchanged, "case {case}: below the limit");
            }
        }
        let mut grads = gradients(&[vec![3.0, 4.0]]);
        let error = grads.clip_with_tensor_ops(0.0).unwrap_err().to_string();
        assert!(error.contains("Gradients::clip_global_norm") && error.contains("max_norm"));
        let error = grads
            .clip_global_norm_on_device(f64::NAN)
            .unwrap_err()
            .to_string();
        assert!(error.contains("clip_global_norm_on_device") && error.contains("max_norm"));
    }
}
