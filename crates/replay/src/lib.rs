//! rlgrad-replay: the replay buffer TD3, DDPG and SAC share, with n-step returns exact
//! at episode ends, seeded sampling and prioritized replay.
//!
//! - [`ReplayBuffer`]: a fixed-capacity ring of transitions (observation, action, reward,
//!   next observation, Gymnasium's `terminated` and `truncated`) of one or several
//!   environments, `f32` or `f64`, configured by [`Config`] and filled by
//!   [`ReplayBuffer::push`] with one step of every environment ([`Transitions`]).
//! - n-step returns as `rlgrad-returns` computes them: a terminated step stops the
//!   return with no bootstrap, a truncated step bootstraps from the episode's final
//!   observation, and a window never crosses an episode end nor the ring's write position.
//! - [`ReplayBuffer::sample`]: uniform sampling from a caller's seeded
//!   [`Rng`](rlgrad_core::Rng); [`ReplayBuffer::sample_prioritized`] and
//!   [`ReplayBuffer::update_priorities`]: proportional prioritized replay (`alpha`,
//!   `beta`, importance weights) on a sum tree.
//! - [`Batch`]: contiguous host vectors; feature `tensor`: `Batch::into_tensors` gives
//!   `rlgrad_tensor::Tensor`s.
//! - Feature `checkpoint`: `ReplayBuffer::save`, `ReplayBuffer::restore` (into an
//!   `rlgrad_checkpoint::Restore` plan with the rest of an agent) and
//!   `ReplayBuffer::load`.
//!
//! The critic's target of a sampled transition is `rewards + discounts * V(next_obs)`:
//!
//! | window from step `t` ends at `k` (`m` steps) because | `rewards` | `discounts` | `next_obs` |
//! |---|---|---|---|
//! | `k` terminated | `r_t + gamma r_{t+1} + ... + gamma^{m-1} r_k` | 0 | of `k` (unused) |
//! | `k` truncated (time limit) | the same | `gamma^m` | final observation of `k` |
//! | `m = n` or `k` is the newest stored step | the same | `gamma^m` | of `k` |
//!
//! # Example
//!
//! ```
//! use rlgrad_core::Rng;
//! use rlgrad_replay::{Config, ReplayBuffer, Transitions};
//!
//! // Pendulum-sized: 3 observation elements, 1 action; 3-step returns.
//! let mut buffer = ReplayBuffer::<f32>::new(Config::new(1000, 3, 1).n_step(3, 0.99))?;
//! for t in 0..10 {
//!     let x = t as f32;
//!     buffer.push(Transitions {
//!         obs: &[x, x, x],
//!         actions: &[0.1],
//!         rewards: &[1.0],
//!         next_obs: &[x + 1.0, x + 1.0, x + 1.0],
//!         terminated: &[t == 4], // the first episode ends at t = 4
//!         truncated: &[false],
//!     })?;
//! }
//! let batch = buffer.gather(&[0, 3, 9])?;
//! assert_eq!(batch.rewards, [1.0 + 0.99 * (1.0 + 0.99 * 1.0), 1.0 + 0.99 * 1.0, 1.0]);
//! assert_eq!(batch.discounts, [0.99 * 0.99 * 0.99, 0.0, 0.99]); // t = 3 stops at the end
//! assert_eq!(batch.next_obs[3..6], [5.0, 5.0, 5.0]);
//!
//! // The same seed and stream position give the same batch, on every platform.
//! let a = buffer.sample(4, &mut Rng::new(7, "replay"))?;
//! let b = buffer.sample(4, &mut Rng::new(7, "replay"))?;
//! assert_eq!(a, b);
//! assert!(buffer.sample(11, &mut Rng::new(7, "replay")).is_err()); // only 10 stored
//!
//! // Prioritized replay.
//! let mut per = ReplayBuffer::<f32>::new(Config::new(1000, 3, 1).prioritized(0.6))?;
//! for t in 0..10 {
//!     let x = t as f32;
//!     per.push(Transitions { obs: &[x; 3], actions: &[0.1], rewards: &[1.0],
//!         next_obs: &[x + 1.0; 3], terminated: &[false], truncated: &[false] })?;
//! }
//! let batch = per.sample_prioritized(4, 0.4, &mut Rng::new(7, "replay"))?;
//! let td_errors = [0.5f32, 2.0, 0.1, 1.0];
//! let priorities: Vec<f32> = td_errors.iter().map(|e| e.abs() + 1e-6).collect();
//! per.update_priorities(&batch.indices, &priorities)?;
//! assert!(per.update_priorities(&batch.indices, &[f32::NAN; 4]).is_err());
//! # Ok::<(), rlgrad_core::Error>(())
//! ```
//!
//! # Guarantees
//!
//! - **Deterministic sampling**: uniform sampling draws `rng.below(len)` per transition
//!   in order; prioritized sampling draws `rng.uniform_f64()` per transition in order
//!   and computes in `f64` with `libm`. The same buffer and `Rng` position give the same
//!   batch, bit for bit, on every platform. A failed call draws nothing.
//! - **Bit-reproducible sum tree**: every node is recomputed as `left + right` from its
//!   children, never updated by differences, so the tree (and every prioritized batch)
//!   is a function of the current priorities alone, whatever the order of updates.
//! - **Exact n-step returns**: the reward of a window is accumulated from its last step
//!   backwards, `acc = r_j + gamma * acc`, the order of `rlgrad_returns::n_step_returns`,
//!   whose results it equals bit for bit for zero values (a property test).
//! - **Resumable**: a buffer saved with its sampling `Rng` and restored gives the same
//!   batches as a run that never stopped (tested), priorities included.
//! - **No panics on input**: wrong slice lengths, a zero capacity or dimension, sampling
//!   more than is stored, positions not stored, NaN or non-positive priorities, a
//!   checkpoint of another configuration: each is an [`Error`]
//!   naming the function, the argument, what was expected and what came, and a failed
//!   call changes nothing.
//!
//! # Vector environments
//!
//! With [`Config::num_envs`] `= B`, each push holds one step of `B` environments and the
//! storage is time-major `[capacity / B, B]`, as `rlgrad-returns`' data: the n-step
//! window of a transition follows its own environment row by row. Push the steps of one
//! environment per buffer, or of all environments together, never interleaved.

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod buffer;
#[cfg(feature = "checkpoint")]
mod checkpoint;
mod sum_tree;
#[cfg(feature = "tensor")]
mod tensor;

pub use buffer::{Batch, Config, ReplayBuffer, Transitions};
pub use rlgrad_core::{Error, Result};
#[cfg(feature = "tensor")]
pub use tensor::TensorBatch;

/// The README's examples, compiled and run as doctests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
