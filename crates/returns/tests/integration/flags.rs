//! Episode-end flags are 0 or 1: every slice-level estimator refuses any other value
//! (0.5, -1, NaN, a byte 2), naming the argument and the step and column of the first
//! one, in either layout; flags of 0 and 1 give the bits of Gymnasium's bools.

use rlgrad_returns::{
    Episodes, Error, FlagSlice, Par, SliceEpisodes, SliceLayout, TimeMajor, Truncation,
    VtraceParams, discounted_returns, gae, lambda_returns, n_step_returns, vtrace,
};

const T: usize = 4;
const B: usize = 3;

/// Every estimator over `[T, B]` data in `layout` with `episodes`, as its result's error
/// (`None` when it ran).
fn each_estimator(layout: SliceLayout, episodes: SliceEpisodes<'_, f32>) -> Vec<Option<Error>> {
    let x = vec![0.5f32; T * B];
    let last = vec![0.25f32; B];
    let params = VtraceParams {
        lambda: 0.9,
        clip_rho: 1.0,
        clip_pg_rho: 1.0,
    };
    vec![
        discounted_returns(layout, &x, episodes, &last).err(),
        gae(layout, &x, &x, &last, episodes, 0.95).err(),
        lambda_returns(layout, &x, &x, episodes, 0.95).err(),
        n_step_returns(layout, &x, &x, episodes, 2).err(),
        vtrace(layout, &x, &x, &last, &x, episodes, params).err(),
    ]
}

fn layouts() -> [SliceLayout; 2] {
    [TimeMajor::new(T, B).into(), SliceLayout::batch_major(T, B)]
}

#[test]
fn flags_other_than_0_or_1_are_errors_naming_the_argument_step_and_column() {
    for layout in layouts() {
        for bad in [0.5f32, -1.0, 2.0, f32::NAN, f32::INFINITY, -0.5] {
            let mut flags = vec![0.0f32; T * B];
            flags[layout.index(2, 1)] = bad;
            flags[layout.index(3, 2)] = bad;
            let zeros = vec![0.0f32; T * B];
            let as_terminated = Episodes::terminations(0.9, &flags);
            let as_truncated: SliceEpisodes<'_, f32> = Episodes::Flags {
                gamma: 0.9,
                terminated: FlagSlice::from(&zeros),
                truncation: Some(Truncation {
                    truncated: FlagSlice::from(&flags),
                    final_values: zeros.as_slice(),
                }),
            };
            for (episodes, argument) in [(as_terminated, "terminated"), (as_truncated, "truncated")]
            {
                for error in each_estimator(layout, episodes) {
                    let message = error.expect("an invalid flag is refused").to_string();
                    assert!(
                        message.contains(&format!("argument `{argument}` is invalid"))
                            && message.contains("0 or 1")
                            && message.contains("at step 2 of column 1"),
                        "{layout:?} {bad}: {message}"
                    );
                }
            }
        }
    }
}

#[test]
fn bytes_other_than_0_or_1_are_errors() {
    for layout in layouts() {
        let mut flags = vec![0u8; T * B];
        flags[layout.index(1, 2)] = 2;
        for error in each_estimator(layout, Episodes::terminations(0.9, &flags)) {
            let message = error.expect("a byte 2 is refused").to_string();
            assert!(message.contains("got 2 at step 1 of column 2"), "{message}");
        }
    }
}

#[test]
fn flags_of_0_and_1_give_the_bits_of_bools() {
    let bools: Vec<bool> = (0..T * B).map(|i| i % 5 == 3).collect();
    let floats: Vec<f32> = bools.iter().map(|&b| f32::from(u8::from(b))).collect();
    let bytes: Vec<u8> = bools.iter().map(|&b| u8::from(b)).collect();
    let x: Vec<f32> = (0..T * B).map(|i| i as f32 * 0.25 - 1.0).collect();
    let last = vec![0.5f32; B];
    let run = |episodes| {
        let out = gae(TimeMajor::new(T, B), &x, &x, &last, episodes, 0.9).unwrap();
        out.advantages
            .iter()
            .map(|a| a.to_bits())
            .collect::<Vec<_>>()
    };
    let want = run(Episodes::terminations(0.99, &bools));
    assert_eq!(run(Episodes::terminations(0.99, &floats)), want);
    assert_eq!(run(Episodes::terminations(0.99, &bytes)), want);
    // A negative zero is a zero.
    let signed: Vec<f32> = floats
        .iter()
        .map(|&f| if f == 0.0 { -0.0 } else { f })
        .collect();
    assert_eq!(run(Episodes::terminations(0.99, &signed)), want);
}

#[test]
fn flags_of_another_length_are_refused_for_their_length() {
    let flags = [0.5f32; T * B + 1];
    let x = vec![0.0f32; T * B];
    let message = rlgrad_returns::gae_into(
        Par::Seq,
        TimeMajor::new(T, B),
        &x,
        &x,
        &[0.0; B],
        Episodes::terminations(0.9, &flags),
        0.9,
        &mut [0.0; T * B],
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(
        message.contains("`terminated` has the wrong shape"),
        "{message}"
    );
}

#[test]
fn an_invalid_flag_anywhere_is_found_in_vector_blocks_tails_and_parallel_chunks() {
    let (t, b) = (9, 300);
    let x = vec![0.5f32; t * b];
    let last = vec![0.25f32; b];
    for layout in [TimeMajor::new(t, b).into(), SliceLayout::batch_major(t, b)] {
        for (step, column) in [(0, 0), (8, 299), (4, 130), (3, 17), (5, 296)] {
            let mut flags = vec![0u8; t * b];
            flags[layout.index(step, column)] = 3;
            for par in [Par::Seq, Par::rayon(2)] {
                let message = rlgrad_returns::gae_into(
                    par,
                    layout,
                    &x,
                    &x,
                    &last,
                    Episodes::terminations(0.9, &flags),
                    0.9,
                    &mut vec![0.0; t * b],
                    None,
                )
                .unwrap_err()
                .to_string();
                let want = format!("got 3 at step {step} of column {column}");
                assert!(message.contains(&want), "{layout:?} {par:?}: {message}");
            }
        }
    }
}

/// Shapes wide and long enough for the vector scans (batch-major data read in place takes
/// at least a vector of columns and a cache line of steps), in `f32` and `f64`: every value
/// other than 0 or 1 is found, down to the smallest subnormals and the neighbours of 1,
/// and a negative zero is a zero.
#[test]
fn values_next_to_0_and_1_are_refused_by_the_vector_scans() {
    fn check<F: rlgrad_returns::Float + std::fmt::Debug>(bad: &[F]) {
        let (t, b) = (40, 40);
        let x = vec![F::from_f64(0.5); t * b];
        let last = vec![F::from_f64(0.25); b];
        let gamma = F::from_f64(0.9);
        for layout in [TimeMajor::new(t, b).into(), SliceLayout::batch_major(t, b)] {
            for &bad in bad {
                let mut flags = vec![F::zero(); t * b];
                flags[layout.index(33, 21)] = bad;
                let episodes = Episodes::terminations(gamma, &flags);
                let message = gae(layout, &x, &x, &last, episodes, F::from_f64(0.95))
                    .expect_err("a flag other than 0 or 1 is refused")
                    .to_string();
                assert!(
                    message.contains("at step 33 of column 21"),
                    "{layout:?} {bad:?}: {message}"
                );
            }
            let mut flags = vec![F::from_f64(-0.0); t * b];
            flags[layout.index(2, 3)] = F::one();
            gae(
                layout,
                &x,
                &x,
                &last,
                Episodes::terminations(gamma, &flags),
                gamma,
            )
            .expect("flags of -0 and 1 are valid");
        }
    }
    check(&[
        f32::from_bits(1),
        -f32::from_bits(1),
        1.0 - f32::EPSILON / 2.0,
        1.0 + f32::EPSILON,
        f32::MAX,
        f32::NEG_INFINITY,
    ]);
    check(&[
        f64::from_bits(1),
        -f64::from_bits(1),
        1.0 - f64::EPSILON / 2.0,
        1.0 + f64::EPSILON,
        f64::MAX,
        f64::NEG_INFINITY,
    ]);
}
