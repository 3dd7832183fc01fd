//! proptest strategies for the inputs rlgrad's tests use, shared by every crate's tests
//! in this workspace.
//!
//! ```
//! use proptest::prelude::*;
//! use rlgrad_testkit::strategies;
//!
//! proptest!(|(x in strategies::vec(strategies::finite::<f32>(), 0..100))| {
//!     let sum = rlgrad_core::reduce::sum(&x, rlgrad_core::Par::Seq);
//!     prop_assert!(sum.is_finite());
//! });
//! ```

use proptest::prelude::*;
use proptest::test_runner::Config;

use rlgrad_core::{Float, Shape};

/// A proptest configuration with `default_cases` cases, unless the environment variable
/// `PROPTEST_CASES` asks for another number (as `cargo xtask proptest --cases N` does).
pub fn config(default_cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    Config {
        cases,
        ..Config::default()
    }
}

/// Runs `f(isa, par)` at every instruction set this CPU supports (through the cap of
/// [`rlgrad_core::cpu::simd::set_max_isa`]) and two thread settings: `Par::Seq` with the
/// default grains, and `Par::rayon(3)` with every grain 1 ([`rlgrad_core::cpu::grain`]), so
/// that every kernel splits as far as its pieces allow whatever its size. The cap and the
/// grains are put back afterwards, also when `f` panics. Both are process-wide: call this
/// from one test per test binary (the cross-ISA golden tests do).
///
/// ```
/// use rlgrad_core::reduce;
/// use rlgrad_testkit::strategies::every_isa_and_split;
/// let x: Vec<f32> = (0..10_000).map(|i| (i as f32).sin()).collect();
/// let mut sums = Vec::new();
/// every_isa_and_split(|_, par| sums.push(reduce::sum(&x, par).to_bits()));
/// assert!(sums.len() >= 2 && sums.windows(2).all(|w| w[0] == w[1]));
/// ```
pub fn every_isa_and_split(mut f: impl FnMut(rlgrad_core::cpu::simd::Isa, rlgrad_core::Par)) {
    use rlgrad_core::cpu::grain::{self, Family};
    use rlgrad_core::cpu::simd::{self, Isa};

    fn split_everything(split: bool) {
        for family in Family::ALL {
            grain::set_grain(family, split.then_some(1));
        }
    }
    /// Puts the cap and the grains back when dropped.
    struct Restore;
    impl Drop for Restore {
        fn drop(&mut self) {
            simd::set_max_isa(None);
            split_everything(false);
        }
    }
    let _restore = Restore;
    for isa in Isa::ALL.into_iter().filter(|isa| isa.is_supported()) {
        simd::set_max_isa(Some(isa));
        for par in [rlgrad_core::Par::Seq, rlgrad_core::Par::rayon(3)] {
            split_everything(par != rlgrad_core::Par::Seq);
            f(isa, par);
        }
    }
}

/// The golden test: runs `hashes` at every instruction set and split of
/// [`every_isa_and_split`] and panics, listing every difference, unless each
/// `(name, dtype, hash)` it returns is the committed row of `golden`. The hashes of the
/// first run are printed (`--nocapture`), so that a deliberate change of the bits can
/// update the committed table.
pub fn assert_golden_hashes(
    golden: &[(&str, &str, u64)],
    mut hashes: impl FnMut(rlgrad_core::Par) -> Vec<(&'static str, &'static str, u64)>,
) {
    let mut failures = Vec::new();
    let mut printed = false;
    every_isa_and_split(|isa, par| {
        assert_eq!(rlgrad_core::cpu::simd::isa(), isa, "the cap selects {isa}");
        let rows = hashes(par);
        if !printed {
            for (name, dtype, hash) in &rows {
                println!("golden {name} {dtype}: {hash:#018x}");
            }
            printed = true;
        }
        failures.extend(
            crate::golden::mismatches(golden, &rows)
                .into_iter()
                .map(|line| format!("{line} (isa {isa}, {par:?})")),
        );
    });
    assert!(
        failures.is_empty(),
        "{} golden hashes differ (an unintended change is a determinism bug):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Runs `f(Par::rayon(t))` inside a rayon pool of `t` threads for each `t` in `threads`
/// (pools are built once per process and reused), returning the results in order. The
/// determinism tests compare these results bit for bit.
///
/// ```
/// use rlgrad_core::reduce;
/// use rlgrad_testkit::strategies::in_thread_pools;
/// let x: Vec<f32> = (0..10_000).map(|i| (i as f32).sin()).collect();
/// let sums = in_thread_pools(&[1, 2, 4], |par| reduce::sum(&x, par).to_bits());
/// assert!(sums.windows(2).all(|w| w[0] == w[1]));
/// ```
pub fn in_thread_pools<R: Send>(
    threads: &[usize],
    f: impl Fn(rlgrad_core::Par) -> R + Sync,
) -> Vec<R> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    static POOLS: OnceLock<Mutex<HashMap<usize, Arc<rayon::ThreadPool>>>> = OnceLock::new();
    threads
        .iter()
        .map(|&t| {
            let pool = {
                let mut pools = POOLS
                    .get_or_init(Default::default)
                    .lock()
                    .expect("no panics while holding the pool lock");
                Arc::clone(pools.entry(t).or_insert_with(|| {
                    Arc::new(
                        rayon::ThreadPoolBuilder::new()
                            .num_threads(t)
                            .build()
                            .expect("a rayon pool of a few threads can be built"),
                    )
                }))
            };
            pool.install(|| f(rlgrad_core::Par::rayon(t)))
        })
        .collect()
}

/// Shapes of `0..=max_ndim` dimensions, each of size `0..=max_dim`.
pub fn shape(max_ndim: usize, max_dim: usize) -> impl Strategy<Value = Shape> {
    proptest::collection::vec(0..=max_dim, 0..=max_ndim).prop_map(Shape::from)
}

/// Shapes of `1..=max_ndim` dimensions, each of size `1..=max_dim` (no empty tensors).
pub fn non_empty_shape(max_ndim: usize, max_dim: usize) -> impl Strategy<Value = Shape> {
    proptest::collection::vec(1..=max_dim.max(1), 1..=max_ndim.max(1)).prop_map(Shape::from)
}

/// Edge values every float kernel must survive: signed zeros, the smallest subnormal, the
/// smallest normal, one, epsilon-sized steps.
pub fn edge_values<T: Float>() -> Vec<T> {
    let min_positive = T::min_positive_value();
    let subnormal = min_positive / T::from_f64(1024.0);
    vec![
        T::zero(),
        T::neg_zero(),
        subnormal,
        -subnormal,
        min_positive,
        -min_positive,
        T::one(),
        -T::one(),
        T::one() + T::EPSILON,
        T::EPSILON,
    ]
}

/// Finite values of moderate size (`|x| <= 1e4`) mixed with [`edge_values`]: sums of a
/// few thousand of them cannot overflow.
pub fn finite<T: Float>() -> BoxedStrategy<T> {
    prop_oneof![
        6 => (-1.0e4f64..1.0e4).prop_map(T::from_f64),
        2 => (-1.0f64..1.0).prop_map(T::from_f64),
        1 => proptest::sample::select(edge_values::<T>()),
    ]
    .boxed()
}

/// Like [`finite`], plus huge magnitudes (up to a quarter of the largest finite value):
/// for kernels that must propagate overflow the IEEE way.
pub fn wide<T: Float>() -> BoxedStrategy<T> {
    let quarter_max = T::max_value() / T::from_f64(4.0);
    prop_oneof![
        8 => finite::<T>(),
        1 => proptest::sample::select(vec![quarter_max, -quarter_max, T::from_f64(1e30), T::from_f64(-1e30)]),
    ]
    .boxed()
}

/// Any value, non-finite ones included.
pub fn any_value<T: Float>() -> BoxedStrategy<T> {
    prop_oneof![
        8 => wide::<T>(),
        1 => proptest::sample::select(vec![T::nan(), T::infinity(), T::neg_infinity()]),
    ]
    .boxed()
}

/// What a padded position may hold when nothing cleared it: NaN of both signs,
/// infinities, `±1e30`, the extreme finite values, and arbitrary bit patterns (NaNs with
/// payloads, subnormals, anything). Padding must be selected out, so that none of these reaches an output
/// or a gradient: the padding tests write them where zeros would be and compare bits.
pub fn garbage<T: Float>() -> BoxedStrategy<T> {
    prop_oneof![
        1 => proptest::sample::select(vec![
            T::nan(),
            -T::nan(),
            T::infinity(),
            T::neg_infinity(),
            T::from_f64(1e30),
            T::from_f64(-1e30),
            T::max_value(),
            T::min_value(),
        ]),
        1 => any::<u64>().prop_map(T::from_bits_u64),
    ]
    .boxed()
}

/// Vectors of `element` with a length in `len`.
pub fn vec<T: std::fmt::Debug>(
    element: impl Strategy<Value = T>,
    len: impl Into<proptest::collection::SizeRange>,
) -> impl Strategy<Value = Vec<T>> {
    proptest::collection::vec(element, len)
}

/// Ragged sequence lengths: `1..=max_batch` entries, each in `0..=max_len`, zeros
/// included on purpose (empty sequences are where padding code breaks).
pub fn lengths(max_batch: usize, max_len: usize) -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(
        prop_oneof![1 => Just(0usize), 6 => 0..=max_len],
        1..=max_batch.max(1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest! {
        #![proptest_config(config(32))]
        #[test]
        fn prop_generated_values_are_in_their_classes(
            s in shape(4, 5),
            x in vec(finite::<f32>(), 0..50),
            w in vec(wide::<f64>(), 0..50),
            l in lengths(8, 10),
        ) {
            prop_assert!(s.ndim() <= 4 && s.dims().iter().all(|&d| d <= 5));
            prop_assert!(x.iter().all(|v| v.is_finite() && v.abs() <= 1e4));
            prop_assert!(w.iter().all(|v| v.is_finite()));
            prop_assert!(!l.is_empty() && l.iter().all(|&v| v <= 10));
        }
    }
}
