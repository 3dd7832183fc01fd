//! The sequence ops of `rlgrad-mask` as differentiable ops (custom ops over its forward
//! and backward kernels): masked sums and means over the valid steps of a padded batch,
//! per-sequence means, masked normalization, and pad/unpad.

use rlgrad_core::kernels::SequenceKernel;
use rlgrad_core::kernels::sequence::{PadOrder, Sequences};
use rlgrad_core::{Error, Float, Result, Shape};
use rlgrad_mask::device as mask;
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::backward::CustomOp;
use crate::tape::Var;

/// A device that runs both tensors and the sequence kernels.
pub trait SequenceDevice<T: Float>: TensorDevice<T> + SequenceKernel<T> {}

impl<T: Float, D: TensorDevice<T> + SequenceKernel<T>> SequenceDevice<T> for D {}

/// `f` applied to the dense buffer of `t`.
fn on_buffer<T: Float, D: SequenceDevice<T>, R>(
    t: &Tensor<T, D>,
    f: impl FnOnce(&D::Buffer<T>) -> Result<R>,
) -> Result<R> {
    let dense = t.dense()?;
    f(dense
        .dense_buffer()
        .expect("Tensor::dense gives a dense buffer"))
}

fn scalar<T: Float, D: SequenceDevice<T>>(device: &D, value: T) -> Result<Tensor<T, D>> {
    Tensor::from_vec_on(device, vec![value], Shape::scalar())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reduction {
    Sum,
    Mean,
}

struct MaskedReduce {
    seqs: Sequences,
    features: usize,
    reduction: Reduction,
}

impl<T: Float, D: SequenceDevice<T>> CustomOp<T, D> for MaskedReduce {
    fn name(&self) -> &str {
        match self.reduction {
            Reduction::Sum => "masked_sum",
            Reduction::Mean => "masked_mean",
        }
    }

    fn forward(&self, inputs: &[&Tensor<T, D>]) -> Result<Tensor<T, D>> {
        let device = inputs[0].device();
        let value = on_buffer(inputs[0], |x| match self.reduction {
            Reduction::Sum => mask::masked_sum(device, &self.seqs, x, self.features),
            Reduction::Mean => mask::masked_mean(device, &self.seqs, x, self.features),
        })?;
        scalar(device, value)
    }

    fn backward(
        &self,
        inputs: &[&Tensor<T, D>],
        _output: &Tensor<T, D>,
        grad: &Tensor<T, D>,
    ) -> Result<Vec<Option<Tensor<T, D>>>> {
        let device = inputs[0].device();
        let g = grad.to_scalar()?;
        let buffer = match self.reduction {
            Reduction::Sum => mask::masked_sum_backward(device, &self.seqs, self.features, g)?,
            Reduction::Mean => mask::masked_mean_backward(device, &self.seqs, self.features, g)?,
        };
        Ok(vec![Some(Tensor::from_buffer_on(
            device,
            buffer,
            inputs[0].shape().clone(),
        )?)])
    }
}

struct SequenceMeans {
    seqs: Sequences,
    features: usize,
}

impl<T: Float, D: SequenceDevice<T>> CustomOp<T, D> for SequenceMeans {
    fn name(&self) -> &str {
        "sequence_means"
    }

    fn forward(&self, inputs: &[&Tensor<T, D>]) -> Result<Tensor<T, D>> {
        let device = inputs[0].device();
        let means = on_buffer(inputs[0], |x| {
            mask::sequence_means(device, &self.seqs, x, self.features)
        })?;
        let batch = means.len();
        Tensor::from_vec_on(device, means, [batch])
    }

    fn backward(
        &self,
        inputs: &[&Tensor<T, D>],
        _output: &Tensor<T, D>,
        grad: &Tensor<T, D>,
    ) -> Result<Vec<Option<Tensor<T, D>>>> {
        let device = inputs[0].device();
        let buffer =
            mask::sequence_means_backward(device, &self.seqs, self.features, &grad.to_vec()?)?;
        Ok(vec![Some(Tensor::from_buffer_on(
            device,
            buffer,
            inputs[0].shape().clone(),
        )?)])
    }
}

struct MaskedNormalize<T> {
    seqs: Sequences,
    features: usize,
    eps: T,
    ddof: usize,
}

impl<T: Float, D: SequenceDevice<T>> CustomOp<T, D> for MaskedNormalize<T> {
    fn name(&self) -> &str {
        "masked_normalize"
    }

    fn forward(&self, inputs: &[&Tensor<T, D>]) -> Result<Tensor<T, D>> {
        let device = inputs[0].device();
        let out = on_buffer(inputs[0], |x| {
            mask::masked_normalize(device, &self.seqs, x, self.features, self.eps, self.ddof)
        })?;
        Tensor::from_buffer_on(device, out, inputs[0].shape().clone())
    }

    fn backward(
        &self,
        inputs: &[&Tensor<T, D>],
        _output: &Tensor<T, D>,
        grad: &Tensor<T, D>,
    ) -> Result<Vec<Option<Tensor<T, D>>>> {
        let device = inputs[0].device();
        let buffer = on_buffer(inputs[0], |x| {
            on_buffer(grad, |g| {
                mask::masked_normalize_backward(
                    device,
                    &self.seqs,
                    x,
                    self.features,
                    self.eps,
                    self.ddof,
                    g,
                )
            })
        })?;
        Ok(vec![Some(Tensor::from_buffer_on(
            device,
            buffer,
            inputs[0].shape().clone(),
        )?)])
    }
}

struct Padding {
    seqs: Sequences,
    order: PadOrder,
    features: usize,
    /// `true`: packed to padded; `false`: padded to packed.
    pad: bool,
}

impl Padding {
    fn padded_shape(&self) -> Shape {
        match self.order {
            PadOrder::BatchMajor => {
                Shape::from([self.seqs.batch(), self.seqs.max_len(), self.features])
            }
            PadOrder::TimeMajor => {
                Shape::from([self.seqs.max_len(), self.seqs.batch(), self.features])
            }
        }
    }

    fn run<T: Float, D: SequenceDevice<T>>(
        &self,
        x: &Tensor<T, D>,
        pad: bool,
    ) -> Result<Tensor<T, D>> {
        let device = x.device();
        let (buffer, shape) = on_buffer(x, |b| {
            if pad {
                let out = mask::pad(device, &self.seqs, b, self.features, self.order)?;
                Ok((out, self.padded_shape()))
            } else {
                let out = mask::unpad(device, &self.seqs, b, self.features, self.order)?;
                Ok((out, Shape::from([self.seqs.total(), self.features])))
            }
        })?;
        Tensor::from_buffer_on(device, buffer, shape)
    }
}

impl<T: Float, D: SequenceDevice<T>> CustomOp<T, D> for Padding {
    fn name(&self) -> &str {
        if self.pad {
            "pad_sequences"
        } else {
            "unpad_sequences"
        }
    }

    fn forward(&self, inputs: &[&Tensor<T, D>]) -> Result<Tensor<T, D>> {
        self.run(inputs[0], self.pad)
    }

    fn backward(
        &self,
        _inputs: &[&Tensor<T, D>],
        _output: &Tensor<T, D>,
        grad: &Tensor<T, D>,
    ) -> Result<Vec<Option<Tensor<T, D>>>> {
        Ok(vec![Some(self.run(grad, !self.pad)?)])
    }
}

/// The feature width of `x`, which must be `[B, T]` (width 1) or `[B, T, F]` for `seqs`.
fn padded_features<T: Float, D: TensorDevice<T>>(
    function: &'static str,
    x: &Var<'_, T, D>,
    seqs: &Sequences,
) -> Result<usize> {
    match *x.dims() {
        [b, t] if (b, t) == (seqs.batch(), seqs.max_len()) => Ok(1),
        [b, t, f] if (b, t) == (seqs.batch(), seqs.max_len()) => Ok(f),
        _ => Err(Error::shape(
            function,
            "self",
            format_args!(
                "[B, T] or [B, T, F] with [B, T] = [{}, {}] for the sequences",
                seqs.batch(),
                seqs.max_len()
            ),
            x.shape(),
        )),
    }
}

impl<'t, T: Float, D: SequenceDevice<T>> Var<'t, T, D> {
    /// The sum over the valid steps of a padded `[B, T]` or `[B, T, F]` batch
    /// (batch-major), a scalar:
    /// [`rlgrad_mask::masked_sum`]'s canonical order, so the padding is never read.
    #[track_caller]
    pub fn masked_sum(&self, seqs: &Sequences) -> Result<Self> {
        self.masked_reduce("Var::masked_sum", seqs, Reduction::Sum)
    }

    /// The mean over the valid steps of a padded `[B, T]` or `[B, T, F]` batch (RLlib's
    /// `reduce_mean_valid`): the sum of the valid values over their number, bitwise the
    /// mean of the unpadded values. The gradient is `grad / N` at valid steps, 0 at
    /// padding. An error when no step is valid.
    ///
    /// ```
    /// use rlgrad_autodiff::{Param, Tape};
    /// use rlgrad_mask::Sequences;
    /// use rlgrad_tensor::Tensor;
    /// let seqs = Sequences::new(&[2, 1], Some(3))?;
    /// let x = Param::new("x", Tensor::from_vec(vec![1.0f64, 3.0, f64::NAN, 5.0, 9e9, 0.0], [2, 3])?)?;
    /// let tape = Tape::new();
    /// let mean = tape.param(&x).masked_mean(&seqs)?;
    /// assert_eq!(mean.to_scalar()?, 3.0);
    /// let grads = tape.gradient(&mean, &[&x])?;
    /// let third = 1.0 / 3.0;
    /// assert_eq!(grads.get(&x)?.to_vec()?, [third, third, 0.0, third, 0.0, 0.0]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    #[track_caller]
    pub fn masked_mean(&self, seqs: &Sequences) -> Result<Self> {
        self.masked_reduce("Var::masked_mean", seqs, Reduction::Mean)
    }

    #[track_caller]
    fn masked_reduce(
        &self,
        function: &'static str,
        seqs: &Sequences,
        reduction: Reduction,
    ) -> Result<Self> {
        let features = padded_features(function, self, seqs)?;
        let op = MaskedReduce {
            seqs: seqs.clone(),
            features,
            reduction,
        };
        self.tape().custom(op, &[self])
    }

    /// The mean of each sequence's valid values of a padded `[B, T]` or `[B, T, F]` batch,
    /// `[B]`; an error when a sequence is empty.
    #[track_caller]
    pub fn sequence_means(&self, seqs: &Sequences) -> Result<Self> {
        let features = padded_features("Var::sequence_means", self, seqs)?;
        self.tape().custom(
            SequenceMeans {
                seqs: seqs.clone(),
                features,
            },
            &[self],
        )
    }

    /// Advantage normalization over the valid values of a padded `[B, T]` or `[B, T, F]`
    /// batch:
    /// `(x - mean) / (std + eps)` with the masked mean and standard deviation (`ddof`
    /// degrees of freedom), 0 at padding ([`rlgrad_mask::masked_normalize`]).
    #[track_caller]
    pub fn masked_normalize(&self, seqs: &Sequences, eps: T, ddof: usize) -> Result<Self> {
        let features = padded_features("Var::masked_normalize", self, seqs)?;
        let op = MaskedNormalize {
            seqs: seqs.clone(),
            features,
            eps,
            ddof,
        };
        self.tape().custom(op, &[self])
    }

    /// Packed rows `[N, F]` (sequence after sequence) to a zero-padded batch, `[B, T, F]`
    /// (`BatchMajor`) or `[T, B, F]` (`TimeMajor`); the backward unpads.
    #[track_caller]
    pub fn pad_sequences(&self, seqs: &Sequences, order: PadOrder) -> Result<Self> {
        let function = "Var::pad_sequences";
        if self.shape().ndim() != 2 || self.dims()[0] != seqs.total() {
            return Err(Error::shape(
                function,
                "self",
                format_args!("[N, F] with N = {} valid steps", seqs.total()),
                self.shape(),
            ));
        }
        let op = Padding {
            seqs: seqs.clone(),
            order,
            features: self.dims()[1],
            pad: true,
        };
        self.tape().custom(op, &[self])
    }

    /// A padded batch (`[B, T, F]` or `[T, B, F]` by `order`) to its packed valid rows
    /// `[N, F]`; the padding is never read, and its gradient is 0.
    #[track_caller]
    pub fn unpad_sequences(&self, seqs: &Sequences, order: PadOrder) -> Result<Self> {
        let function = "Var::unpad_sequences";
        let (b, t) = (seqs.batch(), seqs.max_len());
        let expected = match order {
            PadOrder::BatchMajor => [b, t],
            PadOrder::TimeMajor => [t, b],
        };
        if self.shape().ndim() != 3 || self.dims()[..2] != expected {
            return Err(Error::shape(
                function,
                "self",
                format_args!(
                    "{order:?} padded data [{}, {}, F]",
                    expected[0], expected[1]
                ),
                self.shape(),
            ));
        }
        let op = Padding {
            seqs: seqs.clone(),
            order,
            features: self.dims()[2],
            pad: false,
        };
        self.tape().custom(op, &[self])
    }
}

impl<T: Float, D: TensorDevice<T>> Var<'_, T, D> {
    /// This padded `[B, T]` or `[B, T, F]` batch (batch-major) with every padded step
    /// replaced by `+0`, *selected* in ([`Var::where_cond`]), never multiplied by a zero
    /// mask: whatever the padding held (NaN, inf, stale values) reaches no later value and
    /// no gradient, and everything computed from the result has the bits it has with
    /// zero padding. The gradient passes at valid steps and is `+0` at padding.
    ///
    /// Use it where padded data enters elementwise math whose backward would multiply a
    /// zero gradient by the padding's value (`exp`, products, squares): the masked
    /// reductions then see finite values at padding and their zero gradients stay zero.
    /// The recurrent layers' `run` applies it to their input.
    ///
    /// ```
    /// use rlgrad_autodiff::{Param, Tape};
    /// use rlgrad_mask::Sequences;
    /// use rlgrad_tensor::Tensor;
    /// let seqs = Sequences::new(&[2, 1], Some(2))?;
    /// let x = Param::new("x", Tensor::from_vec(vec![1.0f64, 2.0, 3.0, f64::NAN], [2, 2])?)?;
    /// let tape = Tape::new();
    /// let clean = tape.param(&x).zero_padding(&seqs)?;
    /// assert_eq!(clean.to_vec()?, [1.0, 2.0, 3.0, 0.0]);
    /// // exp(NaN) * 0 would be NaN; exp(0) * 0 is 0.
    /// let loss = clean.exp()?.masked_mean(&seqs)?;
    /// let grads = tape.gradient(&loss, &[&x])?;
    /// assert!(grads.get(&x)?.to_vec()?.iter().all(|g| g.is_finite()));
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    #[track_caller]
    pub fn zero_padding(&self, seqs: &Sequences) -> Result<Self> {
        padded_features("Var::zero_padding", self, seqs)?;
        if seqs.total() == seqs.padded_steps() {
            return Ok(self.clone());
        }
        let (batch, steps) = (seqs.batch(), seqs.max_len());
        // The mask broadcasts over the features of a `[B, T, F]` batch.
        let mask_shape = if self.shape().ndim() == 2 {
            Shape::from([batch, steps])
        } else {
            Shape::from([batch, steps, 1])
        };
        let device = self.tape().device();
        let valid = Tensor::from_vec_on(device, seqs.mask()?.to_float()?, mask_shape)?;
        let zero = self
            .tape()
            .constant(&Tensor::zeros_on(device, Shape::scalar())?);
        Var::where_cond(&valid, self, &zero)
    }
}
