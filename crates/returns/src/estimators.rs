//! The estimators at the slice level: plain `&[T]` inputs of shape `[T, B]`, stored
//! time-major (a [`TimeMajor`] layout) or batch-major ([`SliceLayout::batch_major`]: `[B, T]`
//! buffers, read and written in place, with the same bits).
//!
//! Each estimator comes as a function that allocates its outputs and runs on all threads
//! of the current rayon pool, and as an `_into` function that writes into your buffers
//! with the parallelism you pass. Both call the Cpu kernels of
//! [`rlgrad_core::cpu::recurrence`].

use rlgrad_core::check;
use rlgrad_core::cpu::{alloc, recurrence as kernel};

use crate::finite;
use crate::{
    Episodes, Error, Float, Par, Result, SliceEpisodes, SliceLayout, TimeMajor, VtraceParams,
};

/// GAE advantages and the lambda-returns `advantages + values` (the value targets), as
/// `Vec<T>` at the slice level or device buffers at the [device level](crate::device).
#[derive(Debug, Clone, PartialEq)]
pub struct Gae<V> {
    /// `A_t`, `[T, B]`.
    pub advantages: V,
    /// `A_t + V(s_t)`, `[T, B]`.
    pub returns: V,
}

/// V-trace outputs, as `Vec<T>` or device buffers.
#[derive(Debug, Clone, PartialEq)]
pub struct Vtrace<V> {
    /// Value targets `vs_t`, `[T, B]`.
    pub vs: V,
    /// Policy-gradient advantages `min(clip_pg_rho, rho_t) * (q_t - V(s_t))`, `[T, B]`.
    pub pg_advantages: V,
}

pub(crate) fn check_episodes<T: Float, B: ?Sized, F: Copy>(
    function: &'static str,
    episodes: &Episodes<'_, B, T, F>,
) -> Result<()> {
    match episodes.gamma() {
        Some(gamma) => check::unit_interval(function, "gamma", gamma.as_f64()),
        None => Ok(()),
    }
}

pub(crate) fn check_lambda<T: Float>(function: &'static str, lambda: T) -> Result<()> {
    check::unit_interval(function, "lambda", lambda.as_f64())
}

pub(crate) fn check_vtrace<T: Float>(params: &VtraceParams<T>) -> Result<()> {
    check_lambda("vtrace", params.lambda)?;
    check::positive("vtrace", "clip_rho", params.clip_rho.as_f64())?;
    check::positive("vtrace", "clip_pg_rho", params.clip_pg_rho.as_f64())
}

/// The element count `T * B` of the outputs, once `rewards` (`rewards_len` elements)
/// agrees with `layout`: a layout that disagrees with the data is refused before
/// anything is allocated.
pub(crate) fn output_len(
    function: &'static str,
    layout: TimeMajor,
    rewards_len: usize,
) -> Result<usize> {
    kernel::check_lengths(function, layout, &[("rewards", rewards_len)], &[])
}

/// A zeroed `[T, B]` output for `function`, after [`output_len`]'s check.
fn new_output<T: Float>(
    function: &'static str,
    layout: TimeMajor,
    rewards: &[T],
) -> Result<Vec<T>> {
    let len = output_len(function, layout, rewards.len())?;
    alloc::try_zeroed(len, function, "layout")
}

/// `G_t = r_t + gamma * G_{t+1}` over one trajectory, `G_T = 0` (the seed notebook's
/// `get_expected_return` before standardization).
///
/// ```
/// use rlgrad_returns::{discounted_cumsum, standardize};
/// let returns = discounted_cumsum(&[1.0f32, 1.0, 1.0], 0.5)?;
/// assert_eq!(returns, [1.75, 1.5, 1.0]);
/// // TF's actor-critic tutorial: standardize with the population std and eps = f32::EPSILON.
/// let normalized = standardize(&returns, f32::EPSILON, 0)?;
/// assert!(normalized.iter().sum::<f32>().abs() < 1e-6);
/// # Ok::<(), rlgrad_returns::Error>(())
/// ```
pub fn discounted_cumsum<T: Float>(rewards: &[T], gamma: T) -> Result<Vec<T>> {
    check::unit_interval("discounted_cumsum", "gamma", gamma.as_f64())?;
    let mut out = alloc::try_zeroed(rewards.len(), "discounted_cumsum", "rewards")?;
    kernel::discounted_returns(
        Par::Seq,
        TimeMajor::new(rewards.len(), 1),
        rewards,
        Episodes::Constant { gamma },
        &[T::zero()],
        &mut out,
    )?;
    Ok(out)
}

/// Discounted returns `G_t = r'_t + d_t * G_{t+1}`, `G_T = bootstrap` (`[B]`, `V(s_T)`),
/// on all threads of the current rayon pool. With `Episodes::Discounts` this is
/// `rlax.discounted_returns`.
///
/// ```
/// use rlgrad_returns::{discounted_returns, Episodes, FlagSlice, TimeMajor, Truncation};
/// // One environment, four steps: a time limit cuts the episode at t = 1, the next one
/// // runs to the end of the batch.
/// let rewards = [1.0f64, 1.0, 1.0, 1.0];
/// let terminated = [0.0, 0.0, 0.0, 0.0];
/// let truncated = [0.0, 1.0, 0.0, 0.0];
/// let final_values = [0.0, 10.0, 0.0, 0.0]; // V(final observation) at the truncation
/// let episodes = Episodes::Flags {
///     gamma: 0.5,
///     terminated: FlagSlice::from(&terminated),
///     truncation: Some(Truncation {
///         truncated: FlagSlice::from(&truncated),
///         final_values: &final_values[..],
///     }),
/// };
/// // The same as `Episodes::gymnasium(0.5, &terminated, &truncated, &final_values)`.
/// let g = discounted_returns(TimeMajor::new(4, 1), &rewards, episodes, &[2.0])?;
/// assert_eq!(g, [1.0 + 0.5 * 6.0, 1.0 + 0.5 * 10.0, 1.0 + 0.5 * 2.0, 1.0 + 0.5 * 2.0]);
/// # Ok::<(), rlgrad_returns::Error>(())
/// ```
pub fn discounted_returns<T: Float>(
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    episodes: SliceEpisodes<'_, T>,
    bootstrap: &[T],
) -> Result<Vec<T>> {
    let layout: SliceLayout = layout.into();
    let mut out = new_output("discounted_returns", layout.shape(), rewards)?;
    discounted_returns_into(Par::auto(), layout, rewards, episodes, bootstrap, &mut out)?;
    Ok(out)
}

/// [`discounted_returns`] into `returns` (`[T, B]`) with the given parallelism.
pub fn discounted_returns_into<T: Float>(
    par: Par,
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    episodes: SliceEpisodes<'_, T>,
    bootstrap: &[T],
    returns: &mut [T],
) -> Result<()> {
    let layout: SliceLayout = layout.into();
    check_episodes("discounted_returns", &episodes)?;
    let inputs = [("rewards", rewards), ("bootstrap", bootstrap)];
    finite::check_inputs("discounted_returns", layout.shape(), &inputs, &episodes)?;
    kernel::discounted_returns(par, layout, rewards, episodes, bootstrap, returns)
}

/// Generalized advantage estimation (Schulman et al. 2016), on all threads of the current
/// rayon pool: `delta_t = r'_t + d_t V(s_{t+1}) - V(s_t)`,
/// `A_t = delta_t + lambda d_t A_{t+1}`, `A_T = 0`, with `V(s_T) = bootstrap`.
/// With `Episodes::Discounts` this is `rlax.truncated_generalized_advantage_estimation`;
/// with `Episodes::Flags` and `gamma`, Stable-Baselines3's
/// `compute_returns_and_advantage`, plus correct time-limit truncation.
pub fn gae<T: Float>(
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    values: &[T],
    bootstrap: &[T],
    episodes: SliceEpisodes<'_, T>,
    lambda: T,
) -> Result<Gae<Vec<T>>> {
    let layout: SliceLayout = layout.into();
    let mut out = Gae {
        advantages: new_output("gae", layout.shape(), rewards)?,
        returns: new_output("gae", layout.shape(), rewards)?,
    };
    gae_into(
        Par::auto(),
        layout,
        rewards,
        values,
        bootstrap,
        episodes,
        lambda,
        &mut out.advantages,
        Some(&mut out.returns),
    )?;
    Ok(out)
}

/// [`gae`] into `advantages` and, if given, `returns` (`[T, B]` each) with the given
/// parallelism. Passing `None` computes the advantages only, as rlax and TorchRL do, and
/// saves a fifth of the memory traffic.
#[allow(clippy::too_many_arguments)]
pub fn gae_into<T: Float>(
    par: Par,
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    values: &[T],
    bootstrap: &[T],
    episodes: SliceEpisodes<'_, T>,
    lambda: T,
    advantages: &mut [T],
    returns: Option<&mut [T]>,
) -> Result<()> {
    let layout: SliceLayout = layout.into();
    check_episodes("gae", &episodes)?;
    check_lambda("gae", lambda)?;
    let inputs = [
        ("rewards", rewards),
        ("values", values),
        ("bootstrap", bootstrap),
    ];
    finite::check_inputs("gae", layout.shape(), &inputs, &episodes)?;
    kernel::gae(
        par, layout, rewards, values, bootstrap, episodes, lambda, advantages, returns,
    )
}

/// TD(lambda) returns (`rlax.lambda_returns`) from next-state values
/// `next_values[t] = V(s_{t+1})`: `G_t = r'_t + d_t ((1 - lambda) nv_t + lambda G_{t+1})`,
/// and the last step bootstraps fully on `nv_{T-1}`. `lambda = 1` gives Monte-Carlo returns
/// bootstrapped at the end, `lambda = 0` one-step TD targets.
pub fn lambda_returns<T: Float>(
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    next_values: &[T],
    episodes: SliceEpisodes<'_, T>,
    lambda: T,
) -> Result<Vec<T>> {
    let layout: SliceLayout = layout.into();
    let mut out = new_output("lambda_returns", layout.shape(), rewards)?;
    lambda_returns_into(
        Par::auto(),
        layout,
        rewards,
        next_values,
        episodes,
        lambda,
        &mut out,
    )?;
    Ok(out)
}

/// [`lambda_returns`] into `returns` with the given parallelism.
pub fn lambda_returns_into<T: Float>(
    par: Par,
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    next_values: &[T],
    episodes: SliceEpisodes<'_, T>,
    lambda: T,
    returns: &mut [T],
) -> Result<()> {
    let layout: SliceLayout = layout.into();
    check_episodes("lambda_returns", &episodes)?;
    check_lambda("lambda_returns", lambda)?;
    let inputs = [("rewards", rewards), ("next_values", next_values)];
    finite::check_inputs("lambda_returns", layout.shape(), &inputs, &episodes)?;
    kernel::lambda_returns(par, layout, rewards, next_values, episodes, lambda, returns)
}

/// n-step bootstrapped returns (`rlax.n_step_bootstrapped_returns`) from next-state values:
/// `G_t = r'_t + d_t (r'_{t+1} + d_{t+1} (... + d_k nv_k))`, `k = min(t + n - 1, T - 1)`:
/// windows that reach the end of the batch are cut there and bootstrap on `nv_{T-1}`.
/// `n` may exceed `T`; `n = 0` is an error.
pub fn n_step_returns<T: Float>(
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    next_values: &[T],
    episodes: SliceEpisodes<'_, T>,
    n: usize,
) -> Result<Vec<T>> {
    let layout: SliceLayout = layout.into();
    let mut out = new_output("n_step_returns", layout.shape(), rewards)?;
    n_step_returns_into(
        Par::auto(),
        layout,
        rewards,
        next_values,
        episodes,
        n,
        &mut out,
    )?;
    Ok(out)
}

/// [`n_step_returns`] into `returns` with the given parallelism.
pub fn n_step_returns_into<T: Float>(
    par: Par,
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    next_values: &[T],
    episodes: SliceEpisodes<'_, T>,
    n: usize,
    returns: &mut [T],
) -> Result<()> {
    let layout: SliceLayout = layout.into();
    check_episodes("n_step_returns", &episodes)?;
    if n == 0 {
        return Err(Error::value("n_step_returns", "n", "n >= 1", n));
    }
    let inputs = [("rewards", rewards), ("next_values", next_values)];
    finite::check_inputs("n_step_returns", layout.shape(), &inputs, &episodes)?;
    kernel::n_step_returns(par, layout, rewards, next_values, episodes, n, returns)
}

/// V-trace (Espeholt et al. 2018) in rlax's form, on all threads of the current rayon pool.
/// `rhos` are importance ratios `pi / mu` (not their logs); `values[t] = V(s_t)`,
/// `bootstrap = V(s_T)`. See [`rlgrad_core::kernels::recurrence`] for the formulas; with
/// `lambda < 1` the policy-gradient target mixes `vs` and `V` as rlax does.
pub fn vtrace<T: Float>(
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    values: &[T],
    bootstrap: &[T],
    rhos: &[T],
    episodes: SliceEpisodes<'_, T>,
    params: VtraceParams<T>,
) -> Result<Vtrace<Vec<T>>> {
    let layout: SliceLayout = layout.into();
    let mut out = Vtrace {
        vs: new_output("vtrace", layout.shape(), rewards)?,
        pg_advantages: new_output("vtrace", layout.shape(), rewards)?,
    };
    vtrace_into(
        Par::auto(),
        layout,
        rewards,
        values,
        bootstrap,
        rhos,
        episodes,
        params,
        &mut out.vs,
        &mut out.pg_advantages,
    )?;
    Ok(out)
}

/// [`vtrace`] into `vs` and `pg_advantages` with the given parallelism.
#[allow(clippy::too_many_arguments)]
pub fn vtrace_into<T: Float>(
    par: Par,
    layout: impl Into<SliceLayout>,
    rewards: &[T],
    values: &[T],
    bootstrap: &[T],
    rhos: &[T],
    episodes: SliceEpisodes<'_, T>,
    params: VtraceParams<T>,
    vs: &mut [T],
    pg_advantages: &mut [T],
) -> Result<()> {
    let layout: SliceLayout = layout.into();
    check_episodes("vtrace", &episodes)?;
    check_vtrace(&params)?;
    let inputs = [
        ("rewards", rewards),
        ("values", values),
        ("bootstrap", bootstrap),
        ("rhos", rhos),
    ];
    finite::check_inputs("vtrace", layout.shape(), &inputs, &episodes)?;
    kernel::vtrace(
        par,
        layout,
        rewards,
        values,
        bootstrap,
        rhos,
        episodes,
        params,
        vs,
        pg_advantages,
    )
}
