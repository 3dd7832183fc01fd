//! `rlgrad_tensor::Tensor` in checkpoints (feature `tensor`).

use rlgrad_core::{Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::checkpoint::Checkpoint;
use crate::dtype::Scalar;
use crate::restore::{Need, Report, Restore, Target};
use crate::state::State;

impl Checkpoint {
    /// Stores `tensor` under `name` with its shape (a view is stored as its own elements,
    /// row-major). Errors as [`Checkpoint::put`], or when the device cannot copy it out.
    ///
    /// ```
    /// use rlgrad_checkpoint::{Checkpoint, Restore};
    /// use rlgrad_tensor::Tensor;
    ///
    /// let weight = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3])?;
    /// let mut checkpoint = Checkpoint::new();
    /// checkpoint.put_tensor("actor/l1/weight", &weight.t()?)?;
    /// assert_eq!(checkpoint.tensor_info("actor/l1/weight").unwrap().shape, [3, 2]);
    ///
    /// let mut restored = Tensor::<f32>::zeros([3, 2])?;
    /// let mut plan = Restore::new();
    /// plan.tensor("actor/l1/weight", &mut restored);
    /// checkpoint.restore(plan)?;
    /// assert_eq!(restored.to_vec()?, [1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn put_tensor<T, D>(&mut self, name: &str, tensor: &Tensor<T, D>) -> Result<()>
    where
        T: Float + Scalar,
        D: TensorDevice<T>,
    {
        self.put(name, tensor.dims(), &tensor.to_vec()?)
    }
}

/// A tensor under `prefix` itself ([`Checkpoint::put_tensor`], [`Restore::tensor`]).
impl<T: Float + Scalar, D: TensorDevice<T>> State for Tensor<T, D> {
    fn save_state(&self, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()> {
        checkpoint.put_tensor(prefix, self)
    }

    fn restore_state<'a>(
        &'a mut self,
        prefix: &str,
        _: &Checkpoint,
        plan: &mut Restore<'a>,
    ) -> Result<()> {
        plan.tensor(prefix, self);
        Ok(())
    }
}

/// Something holding a tensor that a restore replaces: a `Tensor`, or (feature
/// `autodiff`) a parameter, which keeps its shape.
pub(crate) trait TensorSlot {
    type Element: Float + Scalar;
    type Device: TensorDevice<Self::Element>;
    fn current(&self) -> &Tensor<Self::Element, Self::Device>;
    /// Puts in `value`, of the current value's shape and device.
    fn replace(&mut self, value: Tensor<Self::Element, Self::Device>);
}

impl<T: Float + Scalar, D: TensorDevice<T>> TensorSlot for &mut Tensor<T, D> {
    type Element = T;
    type Device = D;
    fn current(&self) -> &Tensor<T, D> {
        self
    }
    fn replace(&mut self, value: Tensor<T, D>) {
        **self = value;
    }
}

/// A slot restored from the entry `name`, which must hold the slot's dtype and shape.
pub(crate) struct TensorTarget<S: TensorSlot> {
    pub(crate) name: String,
    pub(crate) slot: S,
    /// The decoded value on the slot's device, once prepared.
    pub(crate) staged: Option<Tensor<S::Element, S::Device>>,
}

impl<S: TensorSlot> Target for TensorTarget<S> {
    fn name(&self) -> &str {
        &self.name
    }

    fn check(&mut self, checkpoint: &Checkpoint, report: &mut Report) {
        report.expect(
            checkpoint,
            &self.name,
            Need::Target,
            <S::Element as Scalar>::DTYPE,
            self.slot.current().dims(),
        );
    }

    /// Decodes and uploads (which can fail on a device) before anything is written.
    fn prepare(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        if let Some(stored) = checkpoint.stored(&self.name) {
            let like = self.slot.current();
            let mut values = vec![S::Element::default(); like.numel()];
            S::Element::decode_le_bytes(&stored.bytes, &mut values);
            self.staged = Some(staged_tensor(like, values)?);
        }
        Ok(())
    }

    fn apply(mut self: Box<Self>, _checkpoint: &Checkpoint) {
        if let Some(value) = self.staged.take() {
            self.slot.replace(value);
        }
    }
}

/// `values` as a tensor of `like`'s shape on `like`'s device.
pub(crate) fn staged_tensor<T: Float, D: TensorDevice<T>>(
    like: &Tensor<T, D>,
    values: Vec<T>,
) -> Result<Tensor<T, D>> {
    Tensor::from_vec_on(like.device(), values, like.shape().clone())
}

impl<'a> Restore<'a> {
    /// Replaces `tensor` by a tensor of the same shape, on the same device, holding the
    /// values stored under `name` (stored as `T` with exactly `tensor`'s shape).
    pub fn tensor<T, D>(&mut self, name: &str, tensor: &'a mut Tensor<T, D>) -> &mut Self
    where
        T: Float + Scalar,
        D: TensorDevice<T>,
    {
        self.push(TensorTarget {
            name: name.to_owned(),
            slot: tensor,
            staged: None,
        })
    }
}
