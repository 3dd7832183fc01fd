//! The canonical reductions: bitwise equal at every thread count and input offset, and
//! as accurate as pairwise summation.

use proptest::prelude::*;
use rlgrad_core::kernels::{ReduceKernel, ReduceOp};
use rlgrad_core::{Cpu, Layout, Par, Rng, Shape, View, reduce};
use rlgrad_testkit::strategies::{self, config, finite, in_thread_pools};

fn all_reductions(x: &[f32], par: Par) -> Vec<u32> {
    let mut out = vec![reduce::sum(x, par).to_bits()];
    if !x.is_empty() {
        out.push(reduce::mean(x, par).unwrap().to_bits());
        out.push(reduce::min(x, par).unwrap().to_bits());
        out.push(reduce::max(x, par).unwrap().to_bits());
        out.push(reduce::var(x, 0, par).unwrap().to_bits());
    }
    out
}

/// Plain recursive pairwise summation in f32, the accuracy yardstick.
fn pairwise(x: &[f32]) -> f32 {
    match x.len() {
        0 => 0.0,
        1 => x[0],
        n => pairwise(&x[..n / 2]) + pairwise(&x[n / 2..]),
    }
}

/// First-order worst-case error bound of a summation tree `depth` additions deep.
fn bound(x: &[f32], depth: u32) -> f64 {
    let abs_sum: f64 = x.iter().map(|&v| f64::from(v).abs()).sum();
    1.01 * f64::from(depth) * f64::from(f32::EPSILON / 2.0) * abs_sum
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn prop_reductions_are_bitwise_equal_across_thread_pools(
        x in strategies::vec(finite::<f32>(), 0..100_000),
    ) {
        let results = in_thread_pools(&[1, 2, 4], |par| all_reductions(&x, par));
        let sequential = all_reductions(&x, Par::Seq);
        for r in &results {
            prop_assert_eq!(r, &sequential);
        }
    }

    #[test]
    fn prop_reductions_do_not_depend_on_alignment(
        x in strategies::vec(finite::<f32>(), 0..5_000),
        offset in 0usize..17,
    ) {
        let mut shifted = vec![7.0f32; offset];
        shifted.extend_from_slice(&x);
        prop_assert_eq!(all_reductions(&shifted[offset..], Par::rayon(2)), all_reductions(&x, Par::Seq));
    }

    #[test]
    fn prop_sum_error_is_within_the_pairwise_bound(
        x in strategies::vec(finite::<f32>(), 1..30_000),
    ) {
        let exact: f64 = x.iter().map(|&v| f64::from(v)).sum();
        let depth = (x.len() as f64).log2().ceil() as u32 + 1;
        let err = (f64::from(reduce::sum(&x, Par::rayon(2))) - exact).abs();
        prop_assert!(err <= bound(&x, depth), "error {err} over bound {}", bound(&x, depth));
    }

    #[test]
    fn prop_axis_reduction_equals_reduction_of_the_gathered_elements(
        shape in strategies::non_empty_shape(3, 40),
        seed in any::<u64>(),
        axis_pick in any::<usize>(),
    ) {
        let mut rng = Rng::new(seed, "axis");
        let x: Vec<f64> = (0..shape.numel()).map(|_| rng.normal(0.0, 10.0)).collect();
        let axis = axis_pick % shape.ndim();
        let layout = Layout::contiguous(shape.clone());
        let dims = shape.dims();
        let inner: usize = dims[axis + 1..].iter().product();
        for op in [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Var { ddof: 0 }] {
            let mut by_kernel = vec![f64::NAN; shape.numel() / dims[axis]];
            Cpu::new(Par::rayon(3)).reduce(op, View::new(&x, &layout), Some(axis), &mut by_kernel).unwrap();
            for (index, got) in by_kernel.iter().enumerate() {
                let base = (index / inner) * dims[axis] * inner + index % inner;
                let column: Vec<f64> = (0..dims[axis]).map(|t| x[base + t * inner]).collect();
                let mut want = vec![f64::NAN];
                Cpu::seq().reduce(op, View::new(&column, &Layout::contiguous(Shape::from([column.len()]))), None, &mut want).unwrap();
                let want = want[0];
                prop_assert_eq!(got.to_bits(), want.to_bits(), "{:?} axis {} output {}", op, axis, index);
            }
        }
    }
}

#[test]
fn accuracy_is_on_par_with_pairwise_summation() {
    // Fixed seeds: a deterministic comparison of average errors, not a flaky statistic.
    let mut rng = Rng::new(11, "accuracy");
    let (mut canonical, mut plain_pairwise, mut naive) = (0.0f64, 0.0f64, 0.0f64);
    for _ in 0..40 {
        let x: Vec<f32> = (0..100_000).map(|_| rng.uniform::<f32>() * 2.0).collect();
        let exact: f64 = x.iter().map(|&v| f64::from(v)).sum();
        canonical += (f64::from(reduce::sum(&x, Par::Seq)) - exact).abs();
        plain_pairwise += (f64::from(pairwise(&x)) - exact).abs();
        naive += (f64::from(x.iter().fold(0.0f32, |a, &b| a + b)) - exact).abs();
    }
    assert!(
        canonical <= 1.5 * plain_pairwise,
        "canonical {canonical}, pairwise {plain_pairwise}"
    );
    assert!(
        canonical * 10.0 < naive,
        "canonical {canonical}, naive {naive}"
    );
}

#[test]
fn variance_needs_more_elements_than_ddof() {
    let x = [1.0f32, 2.0];
    let layout = Layout::contiguous(Shape::from([2]));
    let err = Cpu::seq()
        .reduce(
            ReduceOp::Var { ddof: 2 },
            View::new(&x[..].to_vec(), &layout),
            None,
            &mut vec![0.0],
        )
        .unwrap_err();
    assert!(err.to_string().contains("at least 3 elements"), "{err}");
}
