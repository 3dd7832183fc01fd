//! Batches as `rlgrad_tensor::Tensor`s (feature `tensor`).

use rlgrad_core::{Float, Result};
use rlgrad_tensor::Tensor;

use crate::buffer::Batch;

/// A [`Batch`] as tensors on the default `Cpu`: `[len, obs_dim]` observations,
/// `[len, action_dim]` actions and `[len, 1]` columns (rewards, discounts, not-dones,
/// weights), the shapes a critic's loss broadcasts against.
#[derive(Debug, Clone)]
pub struct TensorBatch<T: Float = f32> {
    /// The stored positions of the transitions.
    pub indices: Vec<usize>,
    /// `[len, obs_dim]`.
    pub obs: Tensor<T>,
    /// `[len, action_dim]`.
    pub actions: Tensor<T>,
    /// `[len, 1]`: n-step discounted rewards.
    pub rewards: Tensor<T>,
    /// `[len, obs_dim]`.
    pub next_obs: Tensor<T>,
    /// `[len, 1]`: `gamma^m`, or 0 after a termination.
    pub discounts: Tensor<T>,
    /// `[len, 1]`: 0 after a termination, else 1.
    pub not_dones: Tensor<T>,
    /// `[len, 1]`: importance-sampling weights (1 for uniform sampling).
    pub weights: Tensor<T>,
}

impl<T: Float> Batch<T> {
    /// The batch as tensors (its vectors moved, not copied).
    ///
    /// ```
    /// use rlgrad_core::Rng;
    /// use rlgrad_replay::{Config, ReplayBuffer, Transitions};
    ///
    /// let mut buffer = ReplayBuffer::<f32>::new(Config::new(10, 3, 1))?;
    /// for i in 0..4 {
    ///     let x = i as f32;
    ///     buffer.push(Transitions { obs: &[x; 3], actions: &[x], rewards: &[x],
    ///         next_obs: &[x + 1.0; 3], terminated: &[false], truncated: &[false] })?;
    /// }
    /// let batch = buffer.sample(2, &mut Rng::new(0, "replay"))?.into_tensors()?;
    /// assert_eq!(batch.obs.dims(), &[2, 3]);
    /// assert_eq!(batch.rewards.dims(), &[2, 1]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn into_tensors(self) -> Result<TensorBatch<T>> {
        let len = self.len();
        let width = |values: &Vec<T>| values.len().checked_div(len).unwrap_or(0);
        let (obs_dim, action_dim) = (width(&self.obs), width(&self.actions));
        Ok(TensorBatch {
            obs: Tensor::from_vec(self.obs, [len, obs_dim])?,
            actions: Tensor::from_vec(self.actions, [len, action_dim])?,
            rewards: Tensor::from_vec(self.rewards, [len, 1])?,
            next_obs: Tensor::from_vec(self.next_obs, [len, obs_dim])?,
            discounts: Tensor::from_vec(self.discounts, [len, 1])?,
            not_dones: Tensor::from_vec(self.not_dones, [len, 1])?,
            weights: Tensor::from_vec(self.weights, [len, 1])?,
            indices: self.indices,
        })
    }
}
