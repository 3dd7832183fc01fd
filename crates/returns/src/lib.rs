//! rlgrad-returns: every common return and advantage estimator over `[T, B]` batches, exact
//! at episode boundaries, on plain slices (time-major, or batch-major through
//! [`SliceLayout::batch_major`]) or on any rlgrad device (time-major).
//!
//! | estimator | function | formula (`r'`, `d` from [`Episodes`]) |
//! |---|---|---|
//! | discounted cumulative sum | [`discounted_cumsum`] | `G_t = r_t + gamma * G_{t+1}`, `G_T = 0` |
//! | standardization | [`standardize`] | `(x - mean) / (std_ddof + eps)` |
//! | discounted returns | [`discounted_returns`] | `G_t = r'_t + d_t * G_{t+1}`, `G_T = bootstrap` |
//! | GAE | [`gae`] | `A_t = delta_t + lambda d_t A_{t+1}`, `delta_t = r'_t + d_t v_{t+1} - v_t` |
//! | TD(lambda) | [`lambda_returns`] | `G_t = r'_t + d_t ((1 - lambda) nv_t + lambda G_{t+1})` |
//! | n-step | [`n_step_returns`] | `G_t = r'_t + d_t (r'_{t+1} + ... + d_k nv_k)`, `k = min(t+n-1, T-1)` |
//! | V-trace | [`vtrace`] | IMPALA's targets `vs` and policy-gradient advantages, rlax's form |
//!
//! # Episode boundaries
//!
//! [`Episodes`] says how each step is discounted: a constant `gamma`, rlax-style per-step
//! `discounts`, or Gymnasium's `terminated` / `truncated` flags (`bool`, `u8` or floats).
//! Termination cuts the return (the value after a terminal state is zero); time-limit
//! truncation bootstraps from the value of the final observation, which you pass in
//! [`Truncation::final_values`]. The last step of the batch bootstraps from `bootstrap`
//! (`V(s_T)`) unless it ended.
//!
//! An episode end is a cut, not a multiplication by zero: every term that brings a later
//! value into a step whose discount is zero is selected away
//! ([`cut`](rlgrad_core::kernels::recurrence::cut)), so a NaN or an infinity after a
//! termination (the value of a reset observation, a bootstrap) never reaches the steps
//! before it.
//!
//! # Gymnasium's vector environments
//!
//! `terminated` and `truncated` go in as Gymnasium returns them: `bool` arrays, `u8`
//! masks or 0/1 floats ([`FlagSlice`]; [`Episodes::gymnasium`] and
//! [`Episodes::terminations`] take any of them). Each flag is 0 or 1: every slice-level
//! estimator refuses any other value (a 0.5, a NaN, a byte 2) with an
//! [`Error::Value`] naming the argument and the step and column of the first one. The
//! check costs nothing measurable (a compare per flag, made while the scan reads it), so
//! an `_into` call refused for a flag has written its outputs; any other error leaves
//! them as they were. Where the value of the final observation
//! of a truncated episode comes from depends on the autoreset mode:
//!
//! - **Same-step autoreset** (Gymnasium 0.26 to 0.29, and 1.x with
//!   `autoreset_mode=AutoresetMode.SAME_STEP`): the step that ends an episode already
//!   returns the first observation of the next one; the final observation is in
//!   `info["final_observation"]` (0.29) or `info["final_obs"]` (1.x). Pass its value as
//!   `final_values[t]`. Every row is a real transition.
//! - **Next-step autoreset** (the default of Gymnasium 1.x vector envs): the step that ends
//!   an episode returns its final observation as the next observation, and the *next*
//!   call to `step` resets that environment: it ignores the action and returns the reset
//!   observation with reward 0 and both flags false. That row is a reset step, not a
//!   transition. The value of the final observation is the next row's value, so a
//!   truncated episode bootstraps from `values[t + 1]` (the `bootstrap` at the last row),
//!   and the reset steps are left out of the loss (their advantages are meaningless, and
//!   the episode end before them cuts them off from the episode they follow).
//!
//! ```
//! use rlgrad_returns::{gae, Episodes, TimeMajor};
//!
//! // One environment (B = 1), six rows of next-step autoreset: episode A is truncated at
//! // t = 2; t = 3 is the reset step (its observation is A's final one, its reward 0);
//! // episode B starts at t = 4 and runs past the end of the batch.
//! let (t_len, b) = (6, 1);
//! let rewards = [1.0f32, 1.0, 1.0, 0.0, 1.0, 1.0];
//! let values = [0.5f32, 0.6, 0.7, 3.0, 0.4, 0.5]; // values[3] = V(A's final observation)
//! let terminated = [false; 6];
//! let truncated = [false, false, true, false, false, false];
//! let bootstrap = [0.45f32]; // V(observation after the last row)
//!
//! // V(final observation) of a row is the value of the row after it.
//! let final_values: Vec<f32> = (0..t_len * b)
//!     .map(|i| if i + b < t_len * b { values[i + b] } else { bootstrap[i % b] })
//!     .collect();
//! let episodes = Episodes::gymnasium(0.99, &terminated, &truncated, &final_values);
//! let out = gae(TimeMajor::new(t_len, b), &rewards, &values, &bootstrap, episodes, 0.95)?;
//! assert_eq!(out.advantages[2], (1.0 + 0.99 * 3.0) - 0.7); // bootstrapped from V(final obs)
//!
//! // A row right after an episode end is a reset step: weight 0 in the loss.
//! let loss_weights: Vec<f32> = (0..t_len * b)
//!     .map(|i| {
//!         let reset = i >= b && (terminated[i - b] || truncated[i - b]);
//!         if reset { 0.0 } else { 1.0 }
//!     })
//!     .collect();
//! assert_eq!(loss_weights, [1.0, 1.0, 1.0, 0.0, 1.0, 1.0]);
//! # Ok::<(), rlgrad_returns::Error>(())
//! ```
//!
//! # One primitive
//!
//! Every estimator is the reverse linear recurrence `y_t = x_t + c_t y_{t+1}` of
//! [`rlgrad_core::kernels::recurrence`], with `x` and `c` formed from the inputs on the fly;
//! the canonical formulas and their order of operations are documented there. Columns run
//! in parallel (rayon; time-major in chunks of at least 128 columns per task, as narrower
//! ones would share the outputs' cache lines between threads, vectorized in blocks of 128,
//! 64 and 16 adjacent columns; batch-major data copied a tile of 32 steps by 64 columns at a
//! time into time-major order and scanned by the same kernels), each column
//! sequentially in time: results are bitwise equal for every thread count and chunking.
//! The same kernels run on any device implementing
//! [`RecurrenceKernel`](device::RecurrenceKernel), through [`device`]. Every type the
//! functions take or return is exported here, so this crate alone is a complete
//! dependency.
//!
//! # Example
//!
//! ```
//! use rlgrad_returns::{gae, Episodes, TimeMajor};
//!
//! // Two environments, three steps, time-major: rewards[t * 2 + env].
//! let rewards = vec![1.0f32, 0.0, 1.0, 0.0, 1.0, 1.0];
//! let values = vec![0.5f32, 0.2, 0.5, 0.2, 0.5, 0.2];
//! let terminated = vec![0.0f32, 0.0, 1.0, 0.0, 0.0, 0.0]; // env 0 ends at t = 1
//! let bootstrap = vec![0.4f32, 0.3]; // V(s_3) of each environment
//! let out = gae(
//!     TimeMajor::new(3, 2),
//!     &rewards,
//!     &values,
//!     &bootstrap,
//!     Episodes::terminations(0.99, &terminated),
//!     0.95,
//! )?;
//! // Env 0 at t = 1 terminated: its advantage is r - V = 1.0 - 0.5, nothing after it.
//! assert_eq!(out.advantages[2 * 1], 0.5);
//! assert_eq!(out.returns[2], out.advantages[2] + values[2]);
//! # Ok::<(), rlgrad_returns::Error>(())
//! ```
//!
//! # Errors
//!
//! Every function returns an [`Error`] naming the argument for: buffers whose length is not
//! `T * B` (or `B` for bootstraps), `gamma` or `lambda` outside `[0, 1]` or not finite,
//! `n = 0`, clip thresholds that are not finite and positive. `T = 0` or `B = 0` give empty
//! results. Non-finite data propagates the IEEE way within an episode, never across its
//! end; ask for [`TimeMajor::require_finite`] and every estimator instead refuses a NaN
//! or an infinity in any input it reads, naming the argument and the first bad index
//! (`gae: argument `rewards` holds a non-finite value at index 37: NaN`), at the cost of
//! one more read of the inputs (and a copy to the host for device buffers). No public function panics or aborts on its input: sizes are checked arithmetic,
//! outputs are allocated only after the data agrees with the layout and through a fallible
//! allocator, and an `_into` function that fails leaves its outputs as they were (tested
//! with random sizes up to `usize::MAX` and non-finite values).

#![forbid(unsafe_code)]

pub mod device;
mod estimators;
mod finite;
mod standardize;

pub use estimators::{
    Gae, Vtrace, discounted_cumsum, discounted_returns, discounted_returns_into, gae, gae_into,
    lambda_returns, lambda_returns_into, n_step_returns, n_step_returns_into, vtrace, vtrace_into,
};
pub use rlgrad_core::cpu::layout::transpose;
pub use rlgrad_core::kernels::recurrence::{
    Episodes, FlagSlice, SliceEpisodes, SliceLayout, TimeMajor, Truncation, VtraceParams,
};
pub use rlgrad_core::{Error, Float, Par, Result};
pub use standardize::standardize;

/// The README's examples, compiled and run as doctests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
