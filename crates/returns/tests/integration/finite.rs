//! The opt-in finiteness check (`TimeMajor::require_finite`): off, non-finite inputs
//! propagate the IEEE way; on, every estimator refuses them, naming the argument and the
//! first bad index, at the slice level and on a device.

use rlgrad_returns::device::{self, Cpu, Device};
use rlgrad_returns::{
    Episodes, Error, TimeMajor, VtraceParams, discounted_returns, gae, lambda_returns,
    n_step_returns, vtrace,
};

const T: usize = 4;
const B: usize = 2;

fn ones(n: usize) -> Vec<f64> {
    vec![1.0; n]
}

/// `values` with NaN at `index`.
fn nan_at(mut values: Vec<f64>, index: usize) -> Vec<f64> {
    values[index] = f64::NAN;
    values
}

fn assert_names(err: Error, function: &str, argument: &str, place: &str) {
    let message = err.to_string();
    assert_eq!(err.argument(), Some(argument), "{message}");
    assert!(message.starts_with(function), "{message}");
    assert!(message.contains(place), "{message}");
}

#[test]
fn off_by_default_nan_propagates() {
    let rewards = nan_at(ones(T * B), 5);
    let out = gae(
        TimeMajor::new(T, B),
        &rewards,
        &ones(T * B),
        &ones(B),
        Episodes::Constant { gamma: 0.9 },
        0.95,
    )
    .unwrap();
    // Index 5 is t = 2 of column 1: it reaches the steps before it in its column only.
    assert!(out.advantages[5].is_nan() && out.advantages[1].is_nan());
    assert!(out.advantages[0].is_finite() && out.advantages[7].is_finite());
}

#[test]
fn every_estimator_names_the_argument_and_the_first_bad_index() {
    let layout = TimeMajor::new(T, B).require_finite();
    let gamma = Episodes::Constant { gamma: 0.9 };
    let (ok, one) = (ones(T * B), ones(B));
    // The first of two bad values is named.
    let bad = nan_at(nan_at(ones(T * B), 7), 5);
    let place = "index 5: NaN";
    let err = discounted_returns(layout, &bad, gamma, &one).unwrap_err();
    assert_names(err, "discounted_returns", "rewards", place);
    let err = discounted_returns(layout, &ok, gamma, &nan_at(ones(B), 1)).unwrap_err();
    assert_names(err, "discounted_returns", "bootstrap", "index 1: NaN");
    let err = gae(layout, &ok, &bad, &one, gamma, 0.95).unwrap_err();
    assert_names(err, "gae", "values", place);
    let err = lambda_returns(layout, &ok, &bad, gamma, 0.95).unwrap_err();
    assert_names(err, "lambda_returns", "next_values", place);
    let err = n_step_returns(layout, &bad, &ok, gamma, 3).unwrap_err();
    assert_names(err, "n_step_returns", "rewards", place);
    let params = VtraceParams {
        lambda: 1.0,
        clip_rho: 1.0,
        clip_pg_rho: 1.0,
    };
    let err = vtrace(layout, &ok, &ok, &one, &bad, gamma, params).unwrap_err();
    assert_names(err, "vtrace", "rhos", place);
    let mut infinite = ones(T * B);
    infinite[0] = f64::NEG_INFINITY;
    let err = gae(layout, &ok, &ok, &one, Episodes::Discounts(&infinite), 0.95).unwrap_err();
    assert_names(err, "gae", "discounts", "index 0: -inf");
    // Finite inputs pass, with the bits of the unchecked call.
    let checked = gae(layout, &ok, &ok, &one, gamma, 0.95).unwrap();
    let unchecked = gae(TimeMajor::new(T, B), &ok, &ok, &one, gamma, 0.95).unwrap();
    assert_eq!(checked, unchecked);
}

#[test]
fn final_values_are_checked_only_where_an_episode_was_truncated() {
    let layout = TimeMajor::new(T, B).require_finite();
    let (ok, one) = (ones(T * B), ones(B));
    let terminated = [false; T * B];
    let mut truncated = [false; T * B];
    truncated[3] = true;
    // A NaN final value where nothing was truncated is never read.
    let final_values = nan_at(ones(T * B), 2);
    let episodes = Episodes::gymnasium(0.9, &terminated, &truncated, &final_values);
    assert!(gae(layout, &ok, &ok, &one, episodes, 0.95).is_ok());
    let final_values = nan_at(ones(T * B), 3);
    let episodes = Episodes::gymnasium(0.9, &terminated, &truncated, &final_values);
    let err = gae(layout, &ok, &ok, &one, episodes, 0.95).unwrap_err();
    assert_names(err, "gae", "final_values", "index 3: NaN");
}

#[test]
fn the_device_level_checks_the_same_inputs() {
    let cpu = Cpu::default();
    let layout = TimeMajor::new(T, B).require_finite();
    let upload = |values: &[f64]| cpu.upload(values).unwrap();
    let (ok, one) = (upload(&ones(T * B)), upload(&ones(B)));
    let bad = upload(&nan_at(ones(T * B), 6));
    let gamma = Episodes::Constant { gamma: 0.9 };
    let err = device::gae(&cpu, layout, &ok, &bad, &one, gamma, 0.95).unwrap_err();
    assert_names(err, "gae", "values", "index 6: NaN");
    let flags = upload(&[0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    let final_values = upload(&nan_at(ones(T * B), 3));
    let episodes = Episodes::Flags {
        gamma: 0.9,
        terminated: &upload(&[0.0; T * B]),
        truncation: Some(rlgrad_returns::Truncation {
            truncated: &flags,
            final_values: &final_values,
        }),
    };
    let err = device::discounted_returns(&cpu, layout, &ok, episodes, &one).unwrap_err();
    assert_names(err, "discounted_returns", "final_values", "index 3: NaN");
    let unchecked = device::gae(&cpu, TimeMajor::new(T, B), &ok, &bad, &one, gamma, 0.95);
    assert!(unchecked.is_ok());
}
