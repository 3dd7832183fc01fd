//! Tensor reductions: canonical bits at every thread count, axis vs full reduction,
//! keepdim shapes, and errors for reductions without a value.

use proptest::prelude::*;
use rlgrad_core::{Cpu, Par, Rng, reduce};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::strategies::{self, config, in_thread_pools};

proptest! {
    #![proptest_config(config(64))]

    #[test]
    fn prop_tensor_reductions_are_bitwise_equal_for_1_2_and_4_threads(
        shape in strategies::non_empty_shape(3, 30), seed in any::<u64>(),
    ) {
        let data: Vec<f32> = {
            let mut rng = Rng::new(seed, "tensor-reduce");
            (0..shape.numel()).map(|_| rng.normal(0.0, 100.0)).collect()
        };
        let run = |par: Par| {
            let t = Tensor::from_vec_on(&Cpu::new(par), data.clone(), shape.clone()).unwrap();
            let mut bits = vec![t.sum_all().unwrap().to_bits(), t.var_all(0).unwrap().to_bits()];
            for axis in 0..shape.ndim() {
                bits.extend(t.mean_axis(axis, false).unwrap().to_vec().unwrap().iter().map(|v| v.to_bits()));
                bits.extend(t.max_axis(axis, true).unwrap().to_vec().unwrap().iter().map(|v| v.to_bits()));
            }
            bits
        };
        let reference = run(Par::Seq);
        for got in in_thread_pools(&[1, 2, 4], run) {
            prop_assert_eq!(&got, &reference);
        }
        prop_assert_eq!(reference[0], reduce::sum(&data, Par::Seq).to_bits());
    }
}

#[test]
fn keepdim_and_values() {
    let t = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]).unwrap();
    assert_eq!(t.sum_axis(1, true).unwrap().dims(), &[2, 1]);
    assert_eq!(t.sum_axis(1, false).unwrap().to_vec().unwrap(), [6.0, 15.0]);
    assert_eq!(
        t.mean_axis(0, false).unwrap().to_vec().unwrap(),
        [2.5, 3.5, 4.5]
    );
    assert_eq!(
        t.var_axis(0, 1, false).unwrap().to_vec().unwrap(),
        [4.5, 4.5, 4.5]
    );
    assert_eq!(t.min_axis(1, false).unwrap().to_vec().unwrap(), [1.0, 4.0]);
    assert_eq!(t.min_all().unwrap(), 1.0);
    assert_eq!(t.max_all().unwrap(), 6.0);
    assert_eq!(t.mean_all().unwrap(), 3.5);
    assert_eq!(
        t.t().unwrap().sum_axis(0, false).unwrap().to_vec().unwrap(),
        [6.0, 15.0]
    );
}

#[test]
fn reductions_without_a_value_are_errors() {
    let empty = Tensor::<f32>::zeros([0, 3]).unwrap();
    assert_eq!(empty.sum_all().unwrap(), 0.0);
    assert_eq!(
        empty.sum_axis(0, false).unwrap().to_vec().unwrap(),
        [0.0; 3]
    );
    let err = empty.mean_all().unwrap_err();
    assert_eq!(
        err.to_string(),
        "Tensor::mean_all: argument `self` is empty: expected at least 1 elements to reduce, got 0"
    );
    assert!(empty.max_axis(0, false).is_err());
    assert_eq!(empty.max_axis(1, false).unwrap().numel(), 0);
    let one = Tensor::<f32>::ones([1]).unwrap();
    assert!(one.var_all(1).is_err());
    assert!(one.sum_axis(1, false).is_err());
}
