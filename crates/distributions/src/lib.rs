//! rlgrad-distributions: policy distributions on the `rlgrad-autodiff` tape, batched and
//! differentiable, for the losses of policy-gradient and actor-critic agents.
//!
//! - [`Categorical`] (discrete actions, from logits `[B, A]`): `log_prob`, `entropy`,
//!   `probs`, `mode`, seeded `sample`.
//! - [`Normal`] (continuous actions, mean `[B, A]` and `log_std` or `std`): `log_prob`,
//!   `entropy` (summed over the action dimension, the SB3/CleanRL convention, with
//!   `*_per_dim` variants that keep it), reparameterized `rsample` from given noise or a
//!   seeded [`Rng`](rlgrad_core::Rng), `sample`.
//! - [`TanhNormal`] (SAC's squashed Gaussian): `rsample` returns the pre-squash value,
//!   the action and its log-density together; `log_prob` from the pre-squash value;
//!   `mode` (`tanh(mean)`).
//! - [`Bernoulli`] (binary and multi-binary actions, from logits `[B, A]`): `log_prob`,
//!   `entropy`, `probs`, `mode`, seeded `sample`.
//! - [`Padded`]: each of them over a padded batch of sequences `[B, T, A]` with its
//!   [`Sequences`](rlgrad_autodiff::Sequences), per-step results `[B, T]` and means over
//!   the valid steps only, for recurrent policies.
//! - [`softplus`]: `ln(1 + e^x)` as one stable differentiable op.
//!
//! Errors are [`rlgrad_core::Error`] values naming the function, the argument, what was
//! expected and what came (a shape that does not fit, an action index not below `A`, a
//! Bernoulli action other than 0 or 1, sampling from NaN logits); nothing panics on user
//! input.
//!
//! # Example: a PPO-style policy loss on a categorical policy
//!
//! ```
//! use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp};
//! use rlgrad_autodiff::Tape;
//! use rlgrad_core::Rng;
//! use rlgrad_distributions::Categorical;
//! use rlgrad_tensor::Tensor;
//!
//! let mut rng = Rng::new(0, "init");
//! let policy = Mlp::<f32>::new("pi", &[4, 32, 2], Activation::Tanh, Activation::Identity,
//!                              Init::TorchDefault, &mut rng)?;
//! let observations = Tensor::rand_normal([8, 4], 0.0, 1.0, &mut rng)?;
//! let advantages = Tensor::rand_normal([8], 0.0, 1.0, &mut rng)?;
//!
//! // Acting: sample actions with a seeded stream (the same seed, the same actions).
//! let tape = Tape::new().no_grad();
//! let pi = Categorical::from_logits(&policy.forward(&tape, &tape.constant(&observations))?)?;
//! let actions = pi.sample(&mut Rng::new(7, "explore"))?;
//! assert_eq!(actions, Categorical::from_logits(pi.log_probs())?.sample(&mut Rng::new(7, "explore"))?);
//!
//! // Learning: -mean(log_prob * advantage) - 0.01 * mean(entropy).
//! let tape = Tape::new();
//! let pi = Categorical::from_logits(&policy.forward(&tape, &tape.constant(&observations))?)?;
//! let surrogate = pi.log_prob(&actions)?.mul(&tape.constant(&advantages))?.mean_all()?;
//! let loss = surrogate.neg()?.sub(&pi.entropy()?.mean_all()?.mul_scalar(0.01)?)?;
//! let grads = tape.gradient(&loss, &[&policy])?;
//! assert!(grads.len() > 0);
//! # Ok::<(), rlgrad_core::Error>(())
//! ```
//!
//! # Guarantees
//!
//! - **Order of operations.** Every value is a fixed composition of `rlgrad-autodiff` ops
//!   (each type's docs give the formula in its order), and every gradient is those ops'
//!   backward rules; sums over the action dimension are `rlgrad-tensor`'s canonical
//!   reduction. So log-probabilities, entropies, samples and gradients are
//!   **bit-identical at every thread count** (a [`Cpu`](rlgrad_core::Cpu) with any
//!   [`Par`](rlgrad_core::Par); tested at 1, 2 and 4 threads).
//! - **Seeded sampling.** `sample` draws from the named [`Rng`](rlgrad_core::Rng) stream
//!   you pass, in row-major order, with the conversions written in each method's docs:
//!   a seed gives the same samples on every platform and thread count.
//! - **Numerically stable forms.** Categorical log-probabilities by the log-softmax
//!   `(x - max) - ln(sum(exp(x - max)))` (a logit leading by 30 gives finite values and
//!   gradients); entropies with PyTorch's clamp of `-inf` log-probabilities (masked
//!   actions give 0, not NaN); softplus as `max(x, 0) + ln(1 + e^-|x|)`; SAC's log-det
//!   as `2 * (ln 2 - u - softplus(-2u))`, without the `1e-6` epsilon (finite at `u = 6`
//!   and far beyond); Bernoulli log-probabilities as `a * x - softplus(x)`.
//! - **Padding never leaks.** [`Padded`] selects `+0` into padded steps of every
//!   parameter and action before any math, so NaN or inf in padding changes no bit of any
//!   value or gradient (property-tested against zero padding).
//! - **Parity with PyTorch.** The `distributions` suite of `cargo xtask parity`
//!   (`torch.distributions` 2.15: categorical, normal, squashed normal, f32 and f64)
//!   passes within its tolerances.

#![forbid(unsafe_code)]

mod bernoulli;
mod categorical;
mod check;
mod normal;
mod padded;
mod softplus;
mod tanh_normal;

pub use bernoulli::Bernoulli;
pub use categorical::Categorical;
pub use normal::Normal;
pub use padded::Padded;
pub use softplus::softplus;
pub use tanh_normal::{TanhNormal, TanhSample};

/// The README's examples, compiled and run as doctests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
