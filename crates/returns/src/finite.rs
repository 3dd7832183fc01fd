//! The opt-in check that every input an estimator reads is finite
//! ([`TimeMajor::require_finite`]).

use rlgrad_core::{Device, check};

use crate::{Episodes, Float, Result, SliceEpisodes, TimeMajor};

/// `Ok` when every value of `inputs` is finite, and every value of `final_values` at a
/// step that `truncated` flags.
fn check_all<T: Float>(
    function: &'static str,
    inputs: &[(&'static str, &[T])],
    final_values: &[T],
    truncated: impl Fn(usize) -> bool,
) -> Result<()> {
    for &(argument, values) in inputs {
        check::finite(function, argument, values)?;
    }
    check::finite_where(function, "final_values", final_values, truncated)
}

/// With `layout.requires_finite()`, `Ok` when every named input and every value
/// `episodes` reads (the discounts, the final values at truncated steps) is finite.
pub(crate) fn check_inputs<T: Float>(
    function: &'static str,
    layout: TimeMajor,
    inputs: &[(&'static str, &[T])],
    episodes: &SliceEpisodes<'_, T>,
) -> Result<()> {
    if !layout.requires_finite() {
        return Ok(());
    }
    let mut all = inputs.to_vec();
    match episodes {
        Episodes::Discounts(discounts) => all.push(("discounts", discounts)),
        Episodes::Flags {
            truncation: Some(t),
            ..
        } => {
            let truncated = |i| t.truncated.is_set(i) == Some(true);
            return check_all(function, &all, t.final_values, truncated);
        }
        _ => {}
    }
    check_all(function, &all, &[], |_| false)
}

/// [`check_inputs`] for device buffers, copied to the host only when the check is on.
pub(crate) fn check_device_inputs<D: Device, T: Float>(
    device: &D,
    function: &'static str,
    layout: TimeMajor,
    inputs: &[(&'static str, &D::Buffer<T>)],
    episodes: &Episodes<'_, D::Buffer<T>, T>,
) -> Result<()> {
    if !layout.requires_finite() {
        return Ok(());
    }
    let mut host = inputs
        .iter()
        .map(|&(argument, buffer)| Ok((argument, device.download(buffer)?)))
        .collect::<Result<Vec<_>>>()?;
    let (mut truncated, mut final_values) = (Vec::new(), Vec::new());
    match episodes {
        Episodes::Discounts(discounts) => host.push(("discounts", device.download(discounts)?)),
        Episodes::Flags {
            truncation: Some(t),
            ..
        } => {
            truncated = device.download(t.truncated)?;
            final_values = device.download(t.final_values)?;
        }
        _ => {}
    }
    let named: Vec<(&'static str, &[T])> = host.iter().map(|(a, v)| (*a, &v[..])).collect();
    let is_truncated = |i: usize| truncated.get(i).is_some_and(|&f| f != T::zero());
    check_all(function, &named, &final_values, is_truncated)
}
