//! Algebraic properties of the estimators, bit equality across executors, and the
//! episode-boundary semantics (an in-batch boundary equals the episodes run one by one).

use proptest::prelude::*;
use rlgrad_core::cpu::recurrence as kernel;
use rlgrad_core::kernels::recurrence::episode_step;
use rlgrad_core::{Par, Rng};
use rlgrad_returns::*;
use rlgrad_testkit::strategies::{config, in_thread_pools};

/// A random rollout: rewards, values, bootstrap, flags and final values, `[T, B]`.
#[derive(Debug, Clone)]
struct Rollout {
    layout: TimeMajor,
    /// Whether the `[T, B]` buffers are stored batch-major.
    batch_major: bool,
    rewards: Vec<f64>,
    values: Vec<f64>,
    next_values: Vec<f64>,
    bootstrap: Vec<f64>,
    terminated: Vec<f64>,
    truncated: Vec<f64>,
    final_values: Vec<f64>,
    rhos: Vec<f64>,
    gamma: f64,
    lambda: f64,
}

impl Rollout {
    fn new(t: usize, b: usize, seed: u64, end_rate: f64) -> Self {
        let mut rng = Rng::new(seed, "rollout");
        let len = t * b;
        let normal =
            |n: usize, rng: &mut Rng| (0..n).map(|_| rng.normal(0.0, 1.0)).collect::<Vec<f64>>();
        let rewards = normal(len, &mut rng);
        let values = normal(len, &mut rng);
        let bootstrap = normal(b, &mut rng);
        let final_values = normal(len, &mut rng);
        let flag = |rng: &mut Rng| f64::from(u8::from(rng.uniform_f64() < end_rate));
        let terminated = (0..len).map(|_| flag(&mut rng)).collect();
        let truncated = (0..len).map(|_| flag(&mut rng)).collect();
        let rhos = (0..len)
            .map(|_| rng.normal::<f64>(0.0, 0.7).exp())
            .collect();
        let mut next_values = values[b.min(len)..].to_vec();
        next_values.extend_from_slice(&bootstrap);
        next_values.truncate(len);
        let gamma = 0.5 + 0.5 * rng.uniform_f64();
        let lambda = rng.uniform_f64();
        Self {
            layout: TimeMajor::new(t, b),
            batch_major: false,
            rewards,
            values,
            next_values,
            bootstrap,
            terminated,
            truncated,
            final_values,
            rhos,
            gamma,
            lambda,
        }
    }

    fn flags(&self) -> SliceEpisodes<'_, f64> {
        Episodes::gymnasium(
            self.gamma,
            &self.terminated,
            &self.truncated,
            &self.final_values,
        )
    }

    /// The same episodes as per-step discounts, with truncation folded into the rewards.
    fn discount_form(&self) -> (Vec<f64>, Vec<f64>) {
        (0..self.rewards.len())
            .map(|i| {
                episode_step(
                    self.rewards[i],
                    self.gamma,
                    self.terminated[i] != 0.0,
                    Some((self.truncated[i] != 0.0, self.final_values[i])),
                )
            })
            .unzip()
    }

    /// Columns `columns` as a rollout of their own.
    fn columns(&self, columns: std::ops::Range<usize>) -> Self {
        let (t, b) = (self.layout.t, self.layout.b);
        let pick = |v: &Vec<f64>| {
            (0..t)
                .flat_map(|s| v[s * b + columns.start..s * b + columns.end].to_vec())
                .collect::<Vec<_>>()
        };
        Self {
            layout: TimeMajor::new(t, columns.len()),
            rewards: pick(&self.rewards),
            values: pick(&self.values),
            next_values: pick(&self.next_values),
            bootstrap: self.bootstrap[columns.clone()].to_vec(),
            terminated: pick(&self.terminated),
            truncated: pick(&self.truncated),
            final_values: pick(&self.final_values),
            rhos: pick(&self.rhos),
            ..*self
        }
    }

    /// The same rollout with its `[T, B]` buffers stored batch-major.
    fn batch_major(&self) -> Self {
        let transposed = |v: &Vec<f64>| to_batch_major(v, self.layout);
        Self {
            batch_major: true,
            rewards: transposed(&self.rewards),
            values: transposed(&self.values),
            next_values: transposed(&self.next_values),
            terminated: transposed(&self.terminated),
            truncated: transposed(&self.truncated),
            final_values: transposed(&self.final_values),
            rhos: transposed(&self.rhos),
            bootstrap: self.bootstrap.clone(),
            ..*self
        }
    }

    /// The layout of the buffers.
    fn storage(&self) -> SliceLayout {
        if self.batch_major {
            SliceLayout::batch_major(self.layout.t, self.layout.b)
        } else {
            self.layout.into()
        }
    }

    /// Column `j` as a rollout of its own (`B = 1`).
    fn column(&self, j: usize) -> Self {
        self.columns(j..j + 1)
    }

    fn params(&self) -> VtraceParams<f64> {
        VtraceParams {
            lambda: self.lambda,
            clip_rho: 1.0,
            clip_pg_rho: 1.2,
        }
    }

    /// Every estimator's outputs, concatenated, computed with `par`.
    fn all_outputs(&self, par: Par) -> Vec<f64> {
        let len = self.rewards.len();
        let (l, eps) = (self.storage(), self.flags());
        let mut out = vec![0.0; 7 * len];
        let (returns, rest) = out.split_at_mut(len);
        let (adv, rest) = rest.split_at_mut(len);
        let (gae_ret, rest) = rest.split_at_mut(len);
        let (lam, rest) = rest.split_at_mut(len);
        let (nstep, rest) = rest.split_at_mut(len);
        let (vs, pg) = rest.split_at_mut(len);
        discounted_returns_into(par, l, &self.rewards, eps, &self.bootstrap, returns).unwrap();
        gae_into(
            par,
            l,
            &self.rewards,
            &self.values,
            &self.bootstrap,
            eps,
            self.lambda,
            adv,
            Some(gae_ret),
        )
        .unwrap();
        lambda_returns_into(
            par,
            l,
            &self.rewards,
            &self.next_values,
            eps,
            self.lambda,
            lam,
        )
        .unwrap();
        n_step_returns_into(par, l, &self.rewards, &self.next_values, eps, 3, nstep).unwrap();
        vtrace_into(
            par,
            l,
            &self.rewards,
            &self.values,
            &self.bootstrap,
            &self.rhos,
            eps,
            self.params(),
            vs,
            pg,
        )
        .unwrap();
        out
    }
}

/// One episode description over time-major and batch-major data, and the rewards of each.
type LayoutCase<'a> = (
    SliceEpisodes<'a, f64>,
    SliceEpisodes<'a, f64>,
    &'a [f64],
    &'a [f64],
);

/// Time-major `[T, B]` values stored batch-major.
fn to_batch_major<T: Copy>(v: &[T], layout: TimeMajor) -> Vec<T> {
    let (t, b) = (layout.t, layout.b);
    (0..b)
        .flat_map(|j| (0..t).map(move |s| v[s * b + j]))
        .collect()
}

fn rollout(max_t: usize, max_b: usize, end_rate: f64) -> impl Strategy<Value = Rollout> {
    (0..=max_t, 0..=max_b, any::<u64>())
        .prop_map(move |(t, b, seed)| Rollout::new(t, b, seed, end_rate))
}

fn close(a: &[f64], b: &[f64], tol: f64) -> Result<(), TestCaseError> {
    prop_assert_eq!(a.len(), b.len());
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        prop_assert!(
            (x - y).abs() <= tol * (1.0 + y.abs()),
            "at {}: {} vs {}",
            i,
            x,
            y
        );
    }
    Ok(())
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn prop_gae_with_lambda_one_plus_values_equals_discounted_returns(r in rollout(40, 20, 0.1)) {
        let eps = r.flags();
        let g = gae(r.layout, &r.rewards, &r.values, &r.bootstrap, eps, 1.0).unwrap();
        let mc = discounted_returns(r.layout, &r.rewards, eps, &r.bootstrap).unwrap();
        close(&g.returns, &mc, 1e-12)?;
    }

    #[test]
    fn prop_gae_with_lambda_zero_is_the_one_step_td_error(r in rollout(40, 20, 0.1)) {
        let g = gae(r.layout, &r.rewards, &r.values, &r.bootstrap, r.flags(), 0.0).unwrap();
        let b = r.layout.b;
        let (rewards, discounts) = r.discount_form();
        for (i, a) in g.advantages.iter().enumerate() {
            let v_next = if i + b < rewards.len() { r.values[i + b] } else { r.bootstrap[i % b] };
            let td = (rewards[i] + discounts[i] * v_next) - r.values[i];
            prop_assert_eq!(*a, td);
        }
    }

    #[test]
    fn prop_n_step_with_n_at_least_t_is_monte_carlo(r in rollout(30, 10, 0.1), extra in 0usize..5) {
        let eps = r.flags();
        let n = r.layout.t.max(1) + extra;
        let nstep = n_step_returns(r.layout, &r.rewards, &r.next_values, eps, n).unwrap();
        let last = if r.layout.t == 0 {
            vec![0.0; r.layout.b]
        } else {
            r.next_values[r.next_values.len() - r.layout.b..].to_vec()
        };
        let mc = discounted_returns(r.layout, &r.rewards, eps, &last).unwrap();
        prop_assert_eq!(bits(&nstep), bits(&mc));
    }

    #[test]
    fn prop_lambda_returns_interpolate_n_step_and_monte_carlo(r in rollout(30, 10, 0.1)) {
        let eps = r.flags();
        let one_step = n_step_returns(r.layout, &r.rewards, &r.next_values, eps, 1).unwrap();
        let lambda0 = lambda_returns(r.layout, &r.rewards, &r.next_values, eps, 0.0).unwrap();
        close(&lambda0, &one_step, 1e-12)?;
        let long = n_step_returns(r.layout, &r.rewards, &r.next_values, eps, r.layout.t.max(1)).unwrap();
        let lambda1 = lambda_returns(r.layout, &r.rewards, &r.next_values, eps, 1.0).unwrap();
        close(&lambda1, &long, 1e-12)?;
    }

    #[test]
    fn prop_in_batch_boundaries_equal_episodes_run_one_by_one(r in rollout(40, 6, 0.15)) {
        // A column with episode ends inside it equals, at every step, the same estimator run
        // on the piece of the column that belongs to that step's episode alone.
        let full = r.all_outputs(Par::Seq);
        let len = r.rewards.len();
        for j in 0..r.layout.b {
            let col = r.column(j);
            let mut start = 0;
            for end in 0..col.layout.t {
                let ended = col.terminated[end] != 0.0 || col.truncated[end] != 0.0;
                if !ended && end + 1 < col.layout.t {
                    continue;
                }
                // Episode start..=end; if it did not end, it runs to the batch end.
                let piece = |v: &Vec<f64>| v[start..=end].to_vec();
                let episode = Rollout {
                    layout: TimeMajor::new(end + 1 - start, 1),
                    rewards: piece(&col.rewards),
                    values: piece(&col.values),
                    next_values: piece(&col.next_values),
                    // After an ended episode the bootstrap is cut away; at the batch end it
                    // is the column's own bootstrap.
                    bootstrap: if ended { vec![123.0] } else { col.bootstrap.clone() },
                    terminated: piece(&col.terminated),
                    truncated: piece(&col.truncated),
                    final_values: piece(&col.final_values),
                    rhos: piece(&col.rhos),
                    ..col.clone()
                };
                let alone = episode.all_outputs(Par::Seq);
                let alone_len = episode.rewards.len();
                for (k, s) in (start..=end).enumerate() {
                    for est in 0..7 {
                        // n-step windows and V-trace's q look past the boundary only
                        // through a zero discount, so every output must agree.
                        let a = full[est * len + s * r.layout.b + j];
                        let b = alone[est * alone_len + k];
                        prop_assert!(a == b || (a - b).abs() <= 1e-12 * (1.0 + b.abs()),
                            "estimator {} column {} step {}: {} vs {}", est, j, s, a, b);
                    }
                }
                start = end + 1;
            }
        }
    }

    #[test]
    fn prop_nothing_after_an_episode_end_reaches_the_steps_before_it(
        r in rollout(30, 5, 0.15),
        poison in proptest::sample::select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e308]),
    ) {
        // Every value after an episode end (terminated or truncated at step `e`) replaced by
        // a non-finite one: the outputs of steps `0..=e` keep their bits, for every estimator.
        let clean = r.all_outputs(Par::Seq);
        let (t, b, len) = (r.layout.t, r.layout.b, r.rewards.len());
        for j in 0..b {
            let Some(e) = (0..t).find(|&s| r.terminated[s * b + j] != 0.0 || r.truncated[s * b + j] != 0.0) else {
                continue;
            };
            let mut dirty = r.clone();
            for s in e + 1..t {
                let i = s * b + j;
                for v in [&mut dirty.rewards, &mut dirty.values, &mut dirty.final_values, &mut dirty.rhos] {
                    v[i] = poison;
                }
            }
            // V(s_{e+1}) is after the end, as is the column's bootstrap.
            for s in e..t {
                dirty.next_values[s * b + j] = poison;
            }
            dirty.bootstrap[j] = poison;
            let out = dirty.all_outputs(Par::Seq);
            for est in 0..7 {
                for s in 0..=e {
                    let i = est * len + s * b + j;
                    prop_assert_eq!(out[i].to_bits(), clean[i].to_bits(), "estimator {} step {} of {}", est, s, e);
                }
            }
        }
    }

    #[test]
    fn prop_bitwise_equal_across_thread_pools_and_chunkings(r in rollout(64, 70, 0.05)) {
        let reference = bits(&r.all_outputs(Par::Seq));
        for got in in_thread_pools(&[1, 2, 4], |par| bits(&r.all_outputs(par))) {
            prop_assert_eq!(&got, &reference);
        }
        for threads in [3, 5, 8] {
            prop_assert_eq!(&bits(&r.all_outputs(Par::rayon(threads))), &reference);
        }
    }

    #[test]
    fn prop_batch_major_storage_gives_the_bits_of_time_major(r in rollout(40, 150, 0.05)) {
        let time_major = r.all_outputs(Par::Seq);
        let len = r.rewards.len();
        let want: Vec<u64> = time_major.chunks(len.max(1)).flat_map(|out| bits(&to_batch_major(out, r.layout))).collect();
        let batch_major = r.batch_major();
        for got in in_thread_pools(&[1, 2], |par| bits(&batch_major.all_outputs(par))) {
            prop_assert_eq!(&got, &want);
        }
        prop_assert_eq!(&bits(&batch_major.all_outputs(Par::rayon(3))), &want);
        // The other kinds of episode description: a constant gamma, rlax's discounts, and
        // termination flags alone, as floats and as Gymnasium's bools.
        let (rewards, discounts) = r.discount_form();
        let done: Vec<bool> = r.terminated.iter().map(|&f| f != 0.0).collect();
        let bm = |v: &[f64]| to_batch_major(v, r.layout);
        let (bm_rewards, bm_discounts, bm_done) = (bm(&rewards), bm(&discounts), to_batch_major(&done, r.layout));
        let (bm_values, bm_terminated) = (bm(&r.values), bm(&r.terminated));
        let cases: [LayoutCase<'_>; 4] = [
            (Episodes::Constant { gamma: r.gamma }, Episodes::Constant { gamma: r.gamma }, &r.rewards, &r.batch_major().rewards),
            (Episodes::Discounts(&discounts), Episodes::Discounts(&bm_discounts), &rewards, &bm_rewards),
            (Episodes::terminations(r.gamma, &r.terminated[..]), Episodes::terminations(r.gamma, &bm_terminated[..]), &r.rewards, &batch_major.rewards),
            (Episodes::terminations(r.gamma, &done[..]), Episodes::terminations(r.gamma, &bm_done[..]), &r.rewards, &batch_major.rewards),
        ];
        for (k, (tm_episodes, bm_episodes, tm_rewards, bm_rewards)) in cases.into_iter().enumerate() {
            let tm = gae(r.layout, tm_rewards, &r.values, &r.bootstrap, tm_episodes, r.lambda).unwrap();
            let got = gae(SliceLayout::batch_major(r.layout.t, r.layout.b), bm_rewards, &bm_values, &r.bootstrap, bm_episodes, r.lambda).unwrap();
            prop_assert_eq!(bits(&got.advantages), bits(&to_batch_major(&tm.advantages, r.layout)), "case {}", k);
            prop_assert_eq!(bits(&got.returns), bits(&to_batch_major(&tm.returns, r.layout)), "case {}", k);
        }
    }

    #[test]
    fn prop_any_column_split_gives_the_same_bits(r in rollout(24, 150, 0.1), cut in any::<usize>()) {
        // The kernels cut columns into blocks of 64, 16 and 1 and into per-thread chunks:
        // computing two parts of the batch separately must give the same bits.
        let cut = cut % (r.layout.b + 1);
        let full = r.all_outputs(Par::Seq);
        let (left, right) = (r.columns(0..cut), r.columns(cut..r.layout.b));
        let (lo, ro) = (left.all_outputs(Par::Seq), right.all_outputs(Par::Seq));
        let (len, llen, rlen) = (r.rewards.len(), left.rewards.len(), right.rewards.len());
        for est in 0..7 {
            for s in 0..r.layout.t {
                for j in 0..r.layout.b {
                    let want = full[est * len + s * r.layout.b + j];
                    let got = if j < cut { lo[est * llen + s * cut + j] } else { ro[est * rlen + s * (r.layout.b - cut) + j - cut] };
                    prop_assert_eq!(got.to_bits(), want.to_bits());
                }
            }
        }
    }

    #[test]
    fn prop_fused_gae_equals_the_unfused_passes(r in rollout(40, 20, 0.1)) {
        let g = gae(r.layout, &r.rewards, &r.values, &r.bootstrap, r.flags(), r.lambda).unwrap();
        let (rewards, discounts) = r.discount_form();
        let b = r.layout.b;
        let deltas: Vec<f64> = (0..rewards.len()).map(|i| {
            let v_next = if i + b < rewards.len() { r.values[i + b] } else { r.bootstrap[i % b] };
            (rewards[i] + discounts[i] * v_next) - r.values[i]
        }).collect();
        let coefficients: Vec<f64> = discounts.iter().map(|d| r.lambda * d).collect();
        let mut advantages = vec![0.0; rewards.len()];
        kernel::linear_recurrence(Par::Seq, r.layout, &deltas, &coefficients, &vec![0.0; b], &mut advantages).unwrap();
        prop_assert_eq!(bits(&g.advantages), bits(&advantages));
        // And the flag form equals the discount form with truncation folded into rewards.
        let via_discounts = gae(r.layout, &rewards, &r.values, &r.bootstrap, Episodes::Discounts(&discounts), r.lambda).unwrap();
        prop_assert_eq!(bits(&g.advantages), bits(&via_discounts.advantages));
    }

    #[test]
    fn prop_f32_stays_close_to_f64(r in rollout(40, 10, 0.1)) {
        let f32s = |v: &Vec<f64>| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        let (rw, vals, boot, term) = (f32s(&r.rewards), f32s(&r.values), f32s(&r.bootstrap), f32s(&r.terminated));
        let eps32 = Episodes::terminations(r.gamma as f32, &term);
        let eps64 = Episodes::terminations(r.gamma, &r.terminated);
        let g32 = gae(r.layout, &rw, &vals, &boot, eps32, r.lambda as f32).unwrap();
        let g64 = gae(r.layout, &r.rewards, &r.values, &r.bootstrap, eps64, r.lambda).unwrap();
        let widened: Vec<f64> = g32.advantages.iter().map(|&x| f64::from(x)).collect();
        close(&widened, &g64.advantages, 1e-4)?;
    }
}

#[test]
fn large_batches_are_bitwise_equal_across_threads() {
    // Big enough (600k elements) that the kernels split the columns between tasks, with a
    // column count that leaves blocks of 16 and single columns over.
    let r = Rollout::new(300, 2003, 17, 0.05);
    let reference = bits(&r.all_outputs(Par::Seq));
    for par in [Par::rayon(2), Par::rayon(3), Par::rayon(4)] {
        assert_eq!(bits(&r.all_outputs(par)), reference, "{par:?}");
    }
    for got in in_thread_pools(&[1, 2, 4], |par| bits(&r.all_outputs(par))) {
        assert_eq!(got, reference);
    }
}

#[test]
fn large_batch_major_batches_give_the_time_major_bits_on_any_thread_count() {
    let r = Rollout::new(300, 2003, 17, 0.05);
    let len = r.rewards.len();
    let time_major = r.all_outputs(Par::Seq);
    let want: Vec<u64> = time_major
        .chunks(len)
        .flat_map(|out| bits(&to_batch_major(out, r.layout)))
        .collect();
    let batch_major = r.batch_major();
    for par in [Par::Seq, Par::rayon(2), Par::rayon(3)] {
        assert_eq!(bits(&batch_major.all_outputs(par)), want, "{par:?}");
    }
    for got in in_thread_pools(&[2, 4], |par| bits(&batch_major.all_outputs(par))) {
        assert_eq!(got, want);
    }
}

#[test]
fn termination_cuts_and_truncation_bootstraps() {
    let rewards = [1.0f64, 1.0, 1.0];
    let zeros = [0.0; 3];
    let layout = TimeMajor::new(3, 1);
    let terminated = [0.0, 1.0, 0.0];
    let cut = discounted_returns(
        layout,
        &rewards,
        Episodes::terminations(0.5, &terminated),
        &[4.0],
    )
    .unwrap();
    assert_eq!(cut, [1.5, 1.0, 3.0]);
    let truncated = [0.0, 1.0, 0.0];
    let final_values = [0.0, 8.0, 0.0];
    let boot = discounted_returns(
        layout,
        &rewards,
        Episodes::Flags {
            gamma: 0.5,
            terminated: FlagSlice::from(&zeros),
            truncation: Some(Truncation {
                truncated: FlagSlice::from(&truncated),
                final_values: &final_values[..],
            }),
        },
        &[4.0],
    )
    .unwrap();
    assert_eq!(boot, [1.0 + 0.5 * 5.0, 5.0, 3.0]);
}

#[test]
fn bad_arguments_are_errors_naming_them() {
    let x = [1.0f32; 6];
    let l = TimeMajor::new(3, 2);
    let c = Episodes::Constant { gamma: 0.9 };
    let msg = |e: Error| e.to_string();
    assert_eq!(
        msg(gae(l, &x, &x[..5], &[0.0; 2], c, 0.9).unwrap_err()),
        "gae: argument `values` has the wrong shape: expected 6 elements ([T, B] = [3, 2]), got 5 elements"
    );
    assert!(msg(gae(l, &x, &x, &[0.0; 3], c, 0.9).unwrap_err()).contains("`bootstrap`"));
    assert!(msg(gae(l, &x, &x, &[0.0; 2], c, 1.5).unwrap_err()).contains("`lambda` is invalid"));
    assert!(
        msg(gae(
            l,
            &x,
            &x,
            &[0.0; 2],
            Episodes::Constant { gamma: f32::NAN },
            0.5
        )
        .unwrap_err())
        .contains("`gamma`")
    );
    assert!(
        msg(discounted_returns(l, &x, Episodes::Discounts(&x[..4]), &[0.0; 2]).unwrap_err())
            .contains("`discounts`")
    );
    assert!(msg(n_step_returns(l, &x, &x, c, 0).unwrap_err()).contains("`n` is invalid"));
    let p = |clip_rho: f32, clip_pg_rho: f32| VtraceParams {
        lambda: 1.0,
        clip_rho,
        clip_pg_rho,
    };
    assert!(
        msg(vtrace(l, &x, &x, &[0.0; 2], &x, c, p(0.0, 1.0)).unwrap_err()).contains("`clip_rho`")
    );
    assert!(
        msg(vtrace(l, &x, &x, &[0.0; 2], &x, c, p(1.0, -1.0)).unwrap_err())
            .contains("`clip_pg_rho`")
    );
    assert!(msg(discounted_cumsum(&x, -0.1).unwrap_err()).contains("`gamma`"));
    let truncated = [0.0f32; 5];
    let flags = Episodes::gymnasium(0.9, &x, &truncated, &x);
    assert!(msg(lambda_returns(l, &x, &x, flags, 0.5).unwrap_err()).contains("`truncated`"));
}

#[test]
fn empty_batches_give_empty_results() {
    for layout in [TimeMajor::new(0, 3), TimeMajor::new(4, 0)] {
        let boot = vec![0.0f32; layout.b];
        let c = Episodes::Constant { gamma: 0.9 };
        assert!(
            discounted_returns(layout, &[], c, &boot)
                .unwrap()
                .is_empty()
        );
        assert!(
            gae(layout, &[], &[], &boot, c, 0.9)
                .unwrap()
                .advantages
                .is_empty()
        );
        assert!(lambda_returns(layout, &[], &[], c, 0.9).unwrap().is_empty());
        assert!(n_step_returns(layout, &[], &[], c, 2).unwrap().is_empty());
        assert!(
            vtrace(
                layout,
                &[],
                &[],
                &boot,
                &[],
                c,
                VtraceParams {
                    lambda: 1.0,
                    clip_rho: 1.0,
                    clip_pg_rho: 1.0
                }
            )
            .unwrap()
            .vs
            .is_empty()
        );
    }
    assert!(discounted_cumsum::<f32>(&[], 0.9).unwrap().is_empty());
}

#[test]
fn layouts_that_disagree_with_the_data_allocate_nothing() {
    // Each used to allocate `T * B` elements before checking the data: a capacity-overflow
    // panic or an abort.
    let x = [1.0f32; 2];
    let c = Episodes::Constant { gamma: 0.9 };
    let p = VtraceParams {
        lambda: 1.0,
        clip_rho: 1.0,
        clip_pg_rho: 1.0,
    };
    for layout in [
        TimeMajor::new(usize::MAX / 4, 1),
        TimeMajor::new(1 << 50, 1),
    ] {
        let err = gae(layout, &x, &x, &[0.0], c, 0.9).unwrap_err();
        assert!(err.to_string().contains("`rewards`"), "{err}");
        assert!(discounted_returns(layout, &x, c, &[0.0]).is_err());
        assert!(lambda_returns(layout, &x, &x, c, 0.9).is_err());
        assert!(n_step_returns(layout, &x, &x, c, 1).is_err());
        assert!(vtrace(layout, &x, &x, &[0.0], &x, c, p).is_err());
    }
}

#[test]
fn non_finite_values_after_a_termination_do_not_leak() {
    let layout = TimeMajor::new(3, 1);
    let rewards = [1.0f32, 1.0, 1.0];
    let flags = |terminated: &'static [f32]| Episodes::terminations(0.9, terminated);
    // The value of the observation after the terminal step is NaN (a reset observation).
    let out = gae(
        layout,
        &rewards,
        &[0.0, f32::NAN, 0.0],
        &[0.0],
        flags(&[1.0, 0.0, 0.0]),
        0.95,
    )
    .unwrap();
    assert_eq!(out.advantages[0], 1.0);
    // An infinite bootstrap after a terminated last step.
    let values = [0.5f32; 3];
    let out = gae(
        layout,
        &rewards,
        &values,
        &[f32::INFINITY],
        flags(&[0.0, 0.0, 1.0]),
        0.95,
    )
    .unwrap();
    assert!(out.advantages.iter().all(|a| a.is_finite()), "{out:?}");
    let g = discounted_returns(layout, &rewards, flags(&[0.0, 0.0, 1.0]), &[f32::NAN]).unwrap();
    assert_eq!(g, [1.0 + 0.9 * 1.9, 1.9, 1.0]);
    // A zero discount of rlax's form cuts as well.
    let g = discounted_returns(
        layout,
        &rewards,
        Episodes::Discounts(&[0.5, 0.0, 0.5][..]),
        &[0.0],
    )
    .unwrap();
    let nan_after = [1.0f32, 1.0, f32::NAN];
    let cut = discounted_returns(
        layout,
        &nan_after,
        Episodes::Discounts(&[0.5, 0.0, 0.5][..]),
        &[0.0],
    )
    .unwrap();
    assert_eq!(cut[..2], g[..2]);
    // Within an episode, NaN propagates the IEEE way.
    let within = discounted_returns(
        layout,
        &nan_after,
        Episodes::Constant { gamma: 0.5 },
        &[0.0],
    )
    .unwrap();
    assert!(within.iter().all(|v| v.is_nan()));
}

#[test]
fn gymnasium_bools_and_bytes_equal_float_flags() {
    let r = Rollout::new(37, 19, 3, 0.1);
    let bools = |v: &[f64]| v.iter().map(|&f| f != 0.0).collect::<Vec<bool>>();
    let bytes = |v: &[f64]| v.iter().map(|&f| u8::from(f != 0.0)).collect::<Vec<u8>>();
    let (term_b, trunc_b) = (bools(&r.terminated), bools(&r.truncated));
    let (term_u, trunc_u) = (bytes(&r.terminated), bytes(&r.truncated));
    let floats = r.flags();
    let gae_of = |episodes: SliceEpisodes<'_, f64>| {
        let out = gae(
            r.layout,
            &r.rewards,
            &r.values,
            &r.bootstrap,
            episodes,
            r.lambda,
        )
        .unwrap();
        bits(&out.advantages)
    };
    let want = gae_of(floats);
    let fv = &r.final_values;
    assert_eq!(
        gae_of(Episodes::gymnasium(r.gamma, &term_b, &trunc_b, fv)),
        want
    );
    assert_eq!(
        gae_of(Episodes::gymnasium(r.gamma, &term_u, &trunc_u, fv)),
        want
    );
    // Mixed kinds, and terminations alone.
    assert_eq!(
        gae_of(Episodes::gymnasium(r.gamma, &term_b, &r.truncated, fv)),
        want
    );
    assert_eq!(
        gae_of(Episodes::terminations(r.gamma, &term_u)),
        gae_of(Episodes::terminations(r.gamma, &r.terminated))
    );
    // A wrong length of bool flags is refused like any other.
    let err = discounted_returns(
        r.layout,
        &r.rewards,
        Episodes::terminations(r.gamma, &term_b[1..]),
        &r.bootstrap,
    )
    .unwrap_err();
    assert!(err.to_string().contains("`terminated`"), "{err}");
}

#[test]
fn batch_major_layouts_refuse_non_finite_inputs_when_asked() {
    // Two columns of three steps, stored one column after the other; a NaN reward at
    // step 1 of column 1.
    let layout = SliceLayout::batch_major(3, 2);
    let mut rewards = vec![1.0f32; 6];
    rewards[layout.index(1, 1)] = f32::NAN;
    let values = vec![0.5f32; 6];
    let constant = Episodes::Constant { gamma: 0.9 };
    let out = gae(layout, &rewards, &values, &[0.0, 0.0], constant, 0.95).unwrap();
    assert!(out.advantages[..3].iter().all(|a| a.is_finite()));
    assert!(out.advantages[3..5].iter().all(|a| a.is_nan()));
    let err = gae(
        layout.require_finite(),
        &rewards,
        &values,
        &[0.0, 0.0],
        constant,
        0.95,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("gae") && err.contains("rewards"), "{err}");
}

/// Every estimator's outputs in f32 (the register transposes' element type), for the
/// inputs given in `order` (time-major, or batch-major when `batch_major`), returned
/// time-major: `n`-step returns with `n` reaching past a chunk of the batch-major
/// staging, flags as floats, as bytes, and with truncation.
fn f32_outputs(layout: TimeMajor, batch_major: bool, seed: u64, n: usize) -> Vec<Vec<u32>> {
    let (t, b) = (layout.t, layout.b);
    let len = t * b;
    let mut rng = Rng::new(seed, "f32 tiles");
    let mut values = |scale: f32| -> Vec<f32> {
        (0..len)
            .map(|_| scale * (rng.uniform_f32() - 0.5))
            .collect()
    };
    let (rewards, vals, next_values, final_values) =
        (values(2.0), values(4.0), values(4.0), values(4.0));
    let rhos: Vec<f32> = values(1.0).iter().map(|x| x + 1.0).collect();
    let flags: Vec<f32> = values(1.0).iter().map(|&x| f32::from(x > 0.45)).collect();
    let truncated: Vec<f32> = values(1.0).iter().map(|&x| f32::from(x < -0.45)).collect();
    let bootstrap: Vec<f32> = (0..b).map(|j| j as f32 * 0.25 - 1.0).collect();
    let stored = |v: &[f32]| {
        if batch_major {
            to_batch_major(v, layout)
        } else {
            v.to_vec()
        }
    };
    let (rewards, vals, next_values, final_values, rhos) = (
        stored(&rewards),
        stored(&vals),
        stored(&next_values),
        stored(&final_values),
        stored(&rhos),
    );
    let (flags, truncated) = (stored(&flags), stored(&truncated));
    let bytes: Vec<u8> = flags.iter().map(|&f| f as u8).collect();
    let discounts: Vec<f32> = flags.iter().map(|&f| 0.99 * (1.0 - f)).collect();
    let storage = if batch_major {
        SliceLayout::batch_major(t, b)
    } else {
        SliceLayout::from(layout)
    };
    let episodes: [SliceEpisodes<'_, f32>; 4] = [
        Episodes::terminations(0.99, &flags[..]),
        Episodes::terminations(0.99, &bytes[..]),
        Episodes::Discounts(&discounts),
        Episodes::Flags {
            gamma: 0.99,
            terminated: FlagSlice::Bytes(&bytes),
            truncation: Some(Truncation {
                truncated: FlagSlice::Values(&truncated),
                final_values: &final_values,
            }),
        },
    ];
    let par = Par::rayon(2);
    let mut outputs = Vec::new();
    let out = || vec![0.0f32; len];
    for episodes in episodes {
        let (mut adv, mut ret) = (out(), out());
        kernel::gae(
            par,
            storage,
            &rewards,
            &vals,
            &bootstrap,
            episodes,
            0.95,
            &mut adv,
            Some(&mut ret),
        )
        .unwrap();
        let mut returns = out();
        kernel::discounted_returns(par, storage, &rewards, episodes, &bootstrap, &mut returns)
            .unwrap();
        let mut lambda = out();
        kernel::lambda_returns(
            par,
            storage,
            &rewards,
            &next_values,
            episodes,
            0.9,
            &mut lambda,
        )
        .unwrap();
        let mut nstep = out();
        kernel::n_step_returns(
            par,
            storage,
            &rewards,
            &next_values,
            episodes,
            n,
            &mut nstep,
        )
        .unwrap();
        let (mut vs, mut pg) = (out(), out());
        let params = VtraceParams {
            lambda: 0.95,
            clip_rho: 1.0,
            clip_pg_rho: 1.0,
        };
        kernel::vtrace(
            par, storage, &rewards, &vals, &bootstrap, &rhos, episodes, params, &mut vs, &mut pg,
        )
        .unwrap();
        outputs.extend([adv, ret, returns, lambda, nstep, vs, pg]);
    }
    let mut linear = out();
    kernel::linear_recurrence(par, storage, &rewards, &discounts, &bootstrap, &mut linear).unwrap();
    outputs.push(linear);
    outputs
        .into_iter()
        .map(|o| {
            let o = if batch_major {
                to_time_major(&o, layout)
            } else {
                o
            };
            o.iter().map(|x| x.to_bits()).collect()
        })
        .collect()
}

fn to_time_major<T: Copy>(v: &[T], layout: TimeMajor) -> Vec<T> {
    let (t, b) = (layout.t, layout.b);
    (0..t)
        .flat_map(|s| (0..b).map(move |j| v[j * t + s]))
        .collect()
}

/// Batch-major data go through time-major tiles of 64, 16 or 8 columns, 32 steps at a time,
/// transposed in registers for f32: every width around the tiles' (padded last blocks,
/// narrow data), step counts across several chunks (a short last one), and n-step
/// returns reading past a chunk, give time-major's bits.
#[test]
fn batch_major_f32_gives_the_bits_of_time_major_across_tiles() {
    for (t, b) in [
        (100, 64),
        (100, 70),
        (65, 130),
        (33, 7),
        (1, 16),
        (96, 16),
        (40, 1),
    ] {
        let layout = TimeMajor::new(t, b);
        for n in [1, 5, 40] {
            let want = f32_outputs(layout, false, 7, n);
            let got = f32_outputs(layout, true, 7, n);
            for (k, (got, want)) in got.iter().zip(&want).enumerate() {
                assert!(got == want, "[{t},{b}] n = {n}: output {k} differs");
            }
        }
    }
}
