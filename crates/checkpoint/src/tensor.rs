//! `rlgrad_tensor::Tensor` in checkpoints (feature `tensor`).

use rlgrad_core::{Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::checkpoint::Checkpoint;
use crate::dtype::Scalar;
use crate::restore::{Need, Report, Restore, Target};

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

/// The tensor stored under `name` (checked to have `like`'s dtype and shape), on `like`'s
/// device; `None` when nothing is stored under `name`.
pub(crate) fn stored_like<T, D>(
    checkpoint: &Checkpoint,
    name: &str,
    like: &Tensor<T, D>,
) -> Result<Option<Tensor<T, D>>>
where
    T: Float + Scalar,
    D: TensorDevice<T>,
{
    let Some(stored) = checkpoint.stored(name) else {
        return Ok(None);
    };
    let mut values = vec![T::default(); like.numel()];
    T::decode_le_bytes(&stored.bytes, &mut values);
    Tensor::from_vec_on(like.device(), values, like.shape().clone()).map(Some)
}

struct TensorTarget<'a, T: Float, D: TensorDevice<T>> {
    name: String,
    tensor: &'a mut Tensor<T, D>,
}

impl<T, D> Target for TensorTarget<'_, T, D>
where
    T: Float + Scalar,
    D: TensorDevice<T>,
{
    fn name(&self) -> &str {
        &self.name
    }

    fn check(&mut self, checkpoint: &Checkpoint, report: &mut Report) {
        report.expect(
            checkpoint,
            &self.name,
            Need::Target,
            <T as Scalar>::DTYPE,
            self.tensor.dims(),
        );
    }

    fn apply(self: Box<Self>, checkpoint: &Checkpoint) -> Result<()> {
        if let Some(restored) = stored_like(checkpoint, &self.name, self.tensor)? {
            *self.tensor = restored;
        }
        Ok(())
    }

    fn may_fail(&self) -> bool {
        // Uploading to a device can fail.
        true
    }
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
            tensor,
        })
    }
}
