//! Random shapes, axes and indices fed to every public op: each returns `Ok` or `Err`,
//! never panics, and an `Ok` has the shape the op promises.

use proptest::prelude::*;
use rlgrad_core::{Rng, Shape};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::strategies::{self, config};

fn tensor(shape: &Shape) -> Tensor<f32> {
    Tensor::rand_normal(shape.clone(), 0.0, 1.0, &mut Rng::new(0, "no-panics")).unwrap()
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn prop_public_ops_return_ok_or_err(
        a in strategies::shape(4, 4),
        b in strategies::shape(4, 4),
        axis in 0usize..6,
        other_axis in 0usize..6,
        start in 0usize..6,
        len in 0usize..6,
        indices in proptest::collection::vec(0usize..6, 0..5),
        new_shape in strategies::shape(4, 6),
        ddof in 0usize..3,
    ) {
        let (x, y) = (tensor(&a), tensor(&b));
        if let Ok(z) = x.add(&y) {
            prop_assert_eq!(z.shape(), &Shape::broadcast("t", &a, &b).unwrap());
        }
        if let Ok(z) = x.matmul(&y) {
            prop_assert_eq!(z.ndim(), a.ndim().max(b.ndim()));
        }
        if let Ok(z) = x.where_cond(&y, &x) {
            prop_assert_eq!(z.shape(), &Shape::broadcast("t", &a, &b).unwrap());
        }
        if let Ok(z) = x.reshape(new_shape.clone()) {
            prop_assert_eq!(z.numel(), x.numel());
        }
        if let Ok(z) = x.transpose(axis, other_axis) {
            prop_assert_eq!(z.numel(), x.numel());
        }
        if let Ok(z) = x.narrow(axis, start, len) {
            prop_assert_eq!(z.dims()[axis], len);
        }
        if let Ok(z) = x.index_select(axis, &indices) {
            prop_assert_eq!(z.dims()[axis], indices.len());
        }
        if let Ok(z) = Tensor::concat(&[&x, &y], axis) {
            prop_assert_eq!(z.numel(), x.numel() + y.numel());
        }
        if let Ok(z) = Tensor::stack(&[&x, &y], axis) {
            prop_assert_eq!(z.numel(), 2 * x.numel());
        }
        if let Ok(z) = x.squeeze(axis) {
            prop_assert_eq!(z.ndim() + 1, x.ndim());
        }
        if let Ok(z) = x.unsqueeze(axis) {
            prop_assert_eq!(z.ndim(), x.ndim() + 1);
        }
        if let Ok(z) = x.broadcast_to(b.clone()) {
            prop_assert_eq!(z.shape(), &b);
        }
        if let Ok(z) = x.permute(&indices) {
            prop_assert_eq!(z.numel(), x.numel());
        }
        if let Ok(z) = x.sum_axis(axis, true) {
            prop_assert_eq!(z.ndim(), x.ndim());
        }
        if let Ok(z) = x.var_axis(axis, ddof, false) {
            prop_assert_eq!(z.ndim() + 1, x.ndim());
        }
        for r in [x.mean_all(), x.min_all(), x.max_all()] {
            prop_assert_eq!(r.is_ok(), x.numel() > 0);
        }
        prop_assert_eq!(x.var_all(ddof).is_ok(), x.numel() > ddof);
        prop_assert!(x.t().is_ok() == (x.ndim() >= 2));
        prop_assert!(x.to_scalar().is_ok() == (x.numel() == 1));
    }
}
