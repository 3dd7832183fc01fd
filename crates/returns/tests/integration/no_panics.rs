//! Every public function of rlgrad-returns with random sizes (zero, small and huge, up to
//! `usize::MAX`), random hyper-parameters and non-finite data: each call returns `Ok` or
//! `Err`, never panics or aborts, and a call that fails leaves its outputs as they were.

use proptest::prelude::*;
use rlgrad_returns::device::{self, Cpu};
use rlgrad_returns::*;
use rlgrad_testkit::strategies::{self, config};

/// Sizes that are zero, small, or far beyond any memory (so that no allocation of them
/// can succeed, whatever the machine's overcommit setting).
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => 0usize..5,
        1 => proptest::sample::select(vec![usize::MAX, usize::MAX / 2, 1 << 48, 1 << 62]),
    ]
}

/// A hyper-parameter: usually in range, sometimes anything at all.
fn scalar() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => 0.0f32..=1.0,
        1 => strategies::any_value::<f32>(),
    ]
}

/// Per-step data: usually the layout's length when it is small, else any small length.
fn data(len: Option<usize>, values: &[f32], pick: usize) -> Vec<f32> {
    let n = match len {
        Some(n) if n <= values.len() && !pick.is_multiple_of(4) => n,
        _ => pick % (values.len() + 1),
    };
    values[..n].to_vec()
}

#[derive(Debug, Clone)]
struct Case {
    t: usize,
    b: usize,
    values: Vec<f32>,
    picks: Vec<usize>,
    gamma: f32,
    lambda: f32,
    eps: f32,
    n: usize,
    ddof: usize,
    flags: u8,
    par: usize,
}

fn case() -> impl Strategy<Value = Case> {
    (
        (size(), size()),
        strategies::vec(strategies::any_value::<f32>(), 0..40),
        strategies::vec(any::<usize>(), 12),
        (scalar(), scalar(), scalar()),
        (size(), size()),
        (0u8..6, 1usize..4),
    )
        .prop_map(
            |((t, b), values, picks, (gamma, lambda, eps), (n, ddof), (flags, par))| Case {
                t,
                b,
                values,
                picks,
                gamma,
                lambda,
                eps,
                n,
                ddof,
                flags,
                par,
            },
        )
}

/// `out` keeps its bits when `result` is an error, except for a flag other than 0 or 1,
/// which the estimators find while they write (as the crate docs say).
fn unchanged_on_error(result: &Result<()>, before: &[f32], after: &[f32]) -> bool {
    let invalid_flag = matches!(
        result,
        Err(rlgrad_returns::Error::Value {
            argument: "terminated" | "truncated",
            ..
        })
    );
    result.is_ok()
        || invalid_flag
        || before
            .iter()
            .map(|v| v.to_bits())
            .eq(after.iter().map(|v| v.to_bits()))
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn prop_every_function_returns_ok_or_err(c in case()) {
        let layout = TimeMajor::new(c.t, c.b);
        let len = layout.len();
        let column = Some(c.b);
        let d = |k: usize| data(len, &c.values, c.picks[k]);
        let (rewards, values, discounts, final_values, rhos) = (d(0), d(1), d(2), d(3), d(4));
        let bootstrap = data(column, &c.values, c.picks[5]);
        let flags_f: Vec<f32> = d(6);
        let flags_b: Vec<bool> = flags_f.iter().map(|v| *v > 0.0).collect();
        let flags_u: Vec<u8> = flags_f.iter().map(|v| u8::from(*v < 0.0)).collect();
        let episodes = match c.flags {
            0 => Episodes::Constant { gamma: c.gamma },
            1 => Episodes::Discounts(&discounts[..]),
            2 => Episodes::terminations(c.gamma, &flags_b),
            3 => Episodes::gymnasium(c.gamma, &flags_f, &flags_u, &final_values),
            4 => Episodes::gymnasium(c.gamma, &flags_b, &flags_b, &final_values),
            _ => Episodes::gymnasium(c.gamma, &flags_u, &flags_f, &final_values),
        };
        let params = VtraceParams { lambda: c.lambda, clip_rho: c.eps, clip_pg_rho: c.gamma };
        let par = Par::rayon(c.par);

        let _ = discounted_cumsum(&rewards, c.gamma);
        let _ = discounted_returns(layout, &rewards, episodes, &bootstrap);
        let _ = gae(layout, &rewards, &values, &bootstrap, episodes, c.lambda);
        let _ = lambda_returns(layout, &rewards, &values, episodes, c.lambda);
        let _ = n_step_returns(layout, &rewards, &values, episodes, c.n);
        let _ = vtrace(layout, &rewards, &values, &bootstrap, &rhos, episodes, params);
        let _ = standardize(&values, c.eps, c.ddof);
        let _ = transpose(&values, c.t, c.b, c.n);

        // The `_into` forms: an error leaves the outputs alone.
        let sentinel = |k: usize| vec![-7.5f32; data(len, &c.values, c.picks[k]).len()];
        let (mut out, mut out2) = (sentinel(7), sentinel(8));
        let before = (out.clone(), out2.clone());
        let r = discounted_returns_into(par, layout, &rewards, episodes, &bootstrap, &mut out);
        prop_assert!(unchanged_on_error(&r, &before.0, &out));
        let (mut out, before) = (before.0.clone(), before);
        let r = gae_into(par, layout, &rewards, &values, &bootstrap, episodes, c.lambda, &mut out, Some(&mut out2));
        prop_assert!(unchanged_on_error(&r, &before.0, &out) && unchanged_on_error(&r, &before.1, &out2));
        let (mut out, mut out2) = before.clone();
        let r = gae_into(par, layout, &rewards, &values, &bootstrap, episodes, c.lambda, &mut out, None);
        prop_assert!(unchanged_on_error(&r, &before.0, &out));
        let mut out = before.0.clone();
        let r = lambda_returns_into(par, layout, &rewards, &values, episodes, c.lambda, &mut out);
        prop_assert!(unchanged_on_error(&r, &before.0, &out));
        let mut out = before.0.clone();
        let r = n_step_returns_into(par, layout, &rewards, &values, episodes, c.n, &mut out);
        prop_assert!(unchanged_on_error(&r, &before.0, &out));
        let mut out = before.0.clone();
        let r = vtrace_into(par, layout, &rewards, &values, &bootstrap, &rhos, episodes, params, &mut out, &mut out2);
        prop_assert!(unchanged_on_error(&r, &before.0, &out) && unchanged_on_error(&r, &before.1, &out2));

        // The device level, with flags as buffers of the element type.
        let cpu = Cpu::new(par);
        let (rw, vs, bs, rh) = (rewards.clone(), values.clone(), bootstrap.clone(), rhos.clone());
        let (fl, fv, ds) = (flags_f.clone(), final_values.clone(), discounts.clone());
        let on_device = match c.flags {
            0 => Episodes::Constant { gamma: c.gamma },
            1 => Episodes::Discounts(&ds),
            2 => Episodes::Flags { gamma: c.gamma, terminated: &fl, truncation: None },
            _ => Episodes::Flags {
                gamma: c.gamma,
                terminated: &fl,
                truncation: Some(Truncation { truncated: &fl, final_values: &fv }),
            },
        };
        let _ = device::discounted_returns(&cpu, layout, &rw, on_device, &bs);
        let _ = device::gae(&cpu, layout, &rw, &vs, &bs, on_device, c.lambda);
        let _ = device::lambda_returns(&cpu, layout, &rw, &vs, on_device, c.lambda);
        let _ = device::n_step_returns(&cpu, layout, &rw, &vs, on_device, c.n);
        let _ = device::vtrace(&cpu, layout, &rw, &vs, &bs, &rh, on_device, params);
        let _ = device::standardize(&cpu, &vs, c.eps, c.ddof);

        // The descriptions themselves.
        prop_assert_eq!(layout.is_empty(), c.t == 0 || c.b == 0);
        let flag_slice = FlagSlice::<f32>::from(&flags_b);
        prop_assert_eq!(flag_slice.len(), flags_b.len());
        prop_assert_eq!(flag_slice.is_set(c.picks[9]), flags_b.get(c.picks[9]).copied());
        let lengths = episodes.lengths(<[f32]>::len, |f| f.len());
        prop_assert!(lengths.len() <= 3);
    }
}
