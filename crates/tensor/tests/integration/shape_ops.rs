//! Shape ops round-trip, and views read the elements a copy would hold.

use proptest::prelude::*;
use rlgrad_core::{Rng, Shape};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::strategies::{self, config};

fn random(shape: &Shape, seed: u64) -> Tensor<f32> {
    Tensor::rand_uniform(shape.clone(), -1.0, 1.0, &mut Rng::new(seed, "shape-ops")).unwrap()
}

fn bits(t: &Tensor<f32>) -> Vec<u32> {
    t.to_vec().unwrap().iter().map(|v| v.to_bits()).collect()
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn prop_reshape_round_trips(shape in strategies::shape(4, 5), seed in any::<u64>()) {
        let x = random(&shape, seed);
        let flat = x.reshape([x.numel()]).unwrap();
        prop_assert_eq!(bits(&flat), bits(&x));
        prop_assert_eq!(bits(&flat.reshape(shape.clone()).unwrap()), bits(&x));
        let back = flat.reshape(shape).unwrap();
        prop_assert_eq!(back.shape(), x.shape());
    }

    #[test]
    fn prop_transpose_twice_is_identity_and_matches_the_index_formula(
        shape in strategies::non_empty_shape(4, 5), seed in any::<u64>(), a in any::<usize>(), b in any::<usize>(),
    ) {
        let x = random(&shape, seed);
        let (a, b) = (a % shape.ndim(), b % shape.ndim());
        let t = x.transpose(a, b).unwrap();
        prop_assert_eq!(bits(&t.transpose(a, b).unwrap()), bits(&x));
        // Reshaping a transposed view must copy in the transposed order.
        let copied = t.reshape([t.numel()]).unwrap();
        prop_assert_eq!(bits(&copied), bits(&t));
        let order: Vec<usize> = (0..shape.ndim()).rev().collect();
        let p = x.permute(&order).unwrap();
        prop_assert_eq!(bits(&p.permute(&order).unwrap()), bits(&x));
    }

    #[test]
    fn prop_narrow_then_concat_round_trips(shape in strategies::non_empty_shape(3, 6), seed in any::<u64>(), axis in any::<usize>(), cut in any::<usize>()) {
        let x = random(&shape, seed);
        let axis = axis % shape.ndim();
        let size = shape.dims()[axis];
        let cut = cut % (size + 1);
        let left = x.narrow(axis, 0, cut).unwrap();
        let right = x.narrow(axis, cut, size - cut).unwrap();
        prop_assert_eq!(bits(&Tensor::concat(&[&left, &right], axis).unwrap()), bits(&x));
        let all: Vec<usize> = (0..size).collect();
        prop_assert_eq!(bits(&x.index_select(axis, &all).unwrap()), bits(&x));
    }

    #[test]
    fn prop_stack_then_select_gives_the_parts(shape in strategies::shape(3, 4), seed in any::<u64>(), axis in any::<usize>()) {
        let parts = [random(&shape, seed), random(&shape, seed ^ 1), random(&shape, seed ^ 2)];
        let axis = axis % (shape.ndim() + 1);
        let stacked = Tensor::stack(&parts.iter().collect::<Vec<_>>(), axis).unwrap();
        for (i, part) in parts.iter().enumerate() {
            let slice = stacked.narrow(axis, i, 1).unwrap().squeeze(axis).unwrap();
            prop_assert_eq!(bits(&slice), bits(part));
        }
    }

    #[test]
    fn prop_broadcast_to_repeats(rows in 1usize..5, cols in 1usize..5, seed in any::<u64>()) {
        let row = random(&Shape::from([1, cols]), seed);
        let grid = row.broadcast_to([rows, cols]).unwrap();
        let data = grid.to_vec().unwrap();
        for r in 0..rows {
            prop_assert_eq!(&data[r * cols..(r + 1) * cols], &row.to_vec().unwrap()[..]);
        }
    }
}

#[test]
fn index_select_gathers_in_the_given_order() {
    let x = Tensor::<f32>::arange(0.0, 6.0, 1.0)
        .unwrap()
        .reshape([3, 2])
        .unwrap();
    let picked = x.index_select(0, &[2, 0, 2]).unwrap();
    assert_eq!(picked.to_vec().unwrap(), [4.0, 5.0, 0.0, 1.0, 4.0, 5.0]);
    let cols = x.index_select(1, &[1]).unwrap();
    assert_eq!(cols.to_vec().unwrap(), [1.0, 3.0, 5.0]);
    assert!(x.index_select(0, &[3]).is_err());
}

#[test]
fn bad_shape_arguments_are_errors_that_name_them() {
    let x = Tensor::<f32>::zeros([2, 3]).unwrap();
    let msg = |r: rlgrad_core::Result<Tensor<f32>>| r.unwrap_err().to_string();
    assert_eq!(
        msg(x.reshape([4, 2])),
        "Tensor::reshape: argument `shape` has the wrong shape: expected a shape of 6 elements like [2, 3], got [4, 2] (8 elements)"
    );
    assert!(msg(x.transpose(0, 2)).starts_with("Tensor::transpose: argument `b` is out of range"));
    assert!(msg(x.permute(&[0, 0])).contains("a permutation of 0..2"));
    assert!(msg(x.narrow(1, 2, 2)).contains("start + len <= 3"));
    assert!(msg(x.squeeze(0)).contains("an axis of size 1"));
    assert!(msg(x.unsqueeze(3)).contains("an axis <= 2"));
    assert!(msg(x.broadcast_to([3, 3])).starts_with("Tensor::broadcast_to"));
    assert!(msg(Tensor::concat(&[], 0)).contains("at least one tensor"));
    assert!(
        msg(Tensor::concat(&[&x, &Tensor::zeros([2, 2]).unwrap()], 0))
            .contains("except along axis 0")
    );
    assert!(
        msg(Tensor::stack(&[&x, &Tensor::zeros([3, 2]).unwrap()], 0))
            .contains("every tensor of shape [2, 3]")
    );
    assert!(msg(Tensor::arange(0.0, 1.0, 0.0)).contains("non-zero step"));
    assert!(msg(Tensor::from_vec(vec![1.0], [2])).contains("2 elements for shape [2]"));
    assert!(msg(Tensor::zeros([usize::MAX, 2])).contains("fits in usize"));
}
