//! Broadcasting elementwise ops against a naive index-by-index reference.

use proptest::prelude::*;
use rlgrad_core::{Rng, Shape};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::strategies::{self, config};

/// Two shapes that broadcast, and their broadcast: each operand keeps a suffix of a random
/// shape with some axes collapsed to 1.
fn broadcast_pair() -> impl Strategy<Value = (Shape, Shape, Shape)> {
    strategies::shape(4, 4).prop_flat_map(|out| {
        let n = out.ndim();
        (Just(out), 0..=n, 0..=n, any::<u8>(), any::<u8>()).prop_map(|(out, a, b, ma, mb)| {
            let operand = |skip: usize, mask: u8| {
                Shape::from(
                    out.dims()[skip..]
                        .iter()
                        .enumerate()
                        .map(|(i, &d)| if mask >> (i % 8) & 1 == 1 { 1 } else { d })
                        .collect::<Vec<_>>(),
                )
            };
            let (a, b) = (operand(a, ma), operand(b, mb));
            let out = Shape::broadcast("test", &a, &b).expect("suffixes of one shape broadcast");
            (a, b, out)
        })
    })
}

fn unravel(mut index: usize, dims: &[usize]) -> Vec<usize> {
    let mut out = vec![0; dims.len()];
    for axis in (0..dims.len()).rev() {
        out[axis] = index % dims[axis];
        index /= dims[axis];
    }
    out
}

/// The element of `data` (shape `dims`) that broadcasting maps to output index `at`.
fn broadcast_get(data: &[f64], dims: &[usize], at: &[usize]) -> f64 {
    let pad = at.len() - dims.len();
    let mut flat = 0;
    for (axis, &d) in dims.iter().enumerate() {
        let i = if d == 1 { 0 } else { at[pad + axis] };
        flat = flat * d + i;
    }
    data[flat]
}

/// A binary tensor method, as a function pointer.
type TensorOp = fn(&Tensor<f64>, &Tensor<f64>) -> rlgrad_core::Result<Tensor<f64>>;
/// Its scalar reference.
type ScalarOp = fn(f64, f64) -> f64;

fn random(shape: &Shape, rng: &mut Rng) -> Tensor<f64> {
    Tensor::rand_normal(shape.clone(), 0.0, 3.0, rng).unwrap()
}

proptest! {
    #![proptest_config(config(128))]

    #[test]
    fn prop_binary_ops_equal_the_naive_reference((a, b, out) in broadcast_pair(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed, "broadcast");
        let (x, y) = (random(&a, &mut rng), random(&b, &mut rng));
        let (xd, yd) = (x.to_vec().unwrap(), y.to_vec().unwrap());
        let ops: [(&str, TensorOp, ScalarOp); 6] = [
            ("add", Tensor::add, |p, q| p + q),
            ("sub", Tensor::sub, |p, q| p - q),
            ("mul", Tensor::mul, |p, q| p * q),
            ("div", Tensor::div, |p, q| p / q),
            ("maximum", Tensor::maximum, f64::max),
            ("lt", Tensor::lt, |p, q| f64::from(u8::from(p < q))),
        ];
        for (name, op, reference) in ops {
            let got = op(&x, &y).unwrap();
            prop_assert_eq!(got.shape(), &out);
            for (i, g) in got.to_vec().unwrap().iter().enumerate() {
                let at = unravel(i, out.dims());
                let want = reference(broadcast_get(&xd, a.dims(), &at), broadcast_get(&yd, b.dims(), &at));
                prop_assert_eq!(g.to_bits(), want.to_bits(), "{} at {:?}", name, at);
            }
        }
    }

    #[test]
    fn prop_where_cond_selects_elementwise((a, b, out) in broadcast_pair(), seed in any::<u64>()) {
        let mut rng = Rng::new(seed, "where");
        let (x, y) = (random(&a, &mut rng), random(&b, &mut rng));
        let mask = x.gt(&Tensor::scalar(0.0)).unwrap();
        let got = mask.where_cond(&x, &y).unwrap();
        prop_assert_eq!(got.shape(), &out);
        let (xd, yd) = (x.to_vec().unwrap(), y.to_vec().unwrap());
        for (i, g) in got.to_vec().unwrap().iter().enumerate() {
            let at = unravel(i, out.dims());
            let xv = broadcast_get(&xd, a.dims(), &at);
            let want = if xv > 0.0 { xv } else { broadcast_get(&yd, b.dims(), &at) };
            prop_assert_eq!(g.to_bits(), want.to_bits());
        }
    }

    #[test]
    fn prop_ops_on_strided_views_equal_ops_on_copies(shape in strategies::non_empty_shape(3, 6), seed in any::<u64>()) {
        let mut rng = Rng::new(seed, "views");
        let x = random(&shape, &mut rng);
        let view = x.t().unwrap_or(x.clone());
        let dense = Tensor::from_vec(view.to_vec().unwrap(), view.shape().clone()).unwrap();
        prop_assert_eq!(view.tanh().unwrap().to_vec().unwrap(), dense.tanh().unwrap().to_vec().unwrap());
        prop_assert_eq!((&view * &view).unwrap().to_vec().unwrap(), dense.square().unwrap().to_vec().unwrap());
        prop_assert_eq!(view.sum_all().unwrap().to_bits(), dense.sum_all().unwrap().to_bits());
    }
}

#[test]
fn unary_and_scalar_ops() {
    let x = Tensor::from_vec(vec![-2.0f32, -0.5, 0.0, 0.5, 4.0], [5]).unwrap();
    assert_eq!(
        x.relu().unwrap().to_vec().unwrap(),
        [0.0, 0.0, 0.0, 0.5, 4.0]
    );
    assert_eq!(
        x.abs().unwrap().to_vec().unwrap(),
        [2.0, 0.5, 0.0, 0.5, 4.0]
    );
    assert_eq!(
        x.clamp(-1.0, 1.0).unwrap().to_vec().unwrap(),
        [-1.0, -0.5, 0.0, 0.5, 1.0]
    );
    assert_eq!(
        (&x * 2.0).unwrap().to_vec().unwrap(),
        [-4.0, -1.0, 0.0, 1.0, 8.0]
    );
    assert_eq!(
        (1.0 - &x).unwrap().to_vec().unwrap(),
        [3.0, 1.5, 1.0, 0.5, -3.0]
    );
    assert_eq!(
        (2.0 / &x.narrow(0, 3, 2).unwrap())
            .unwrap()
            .to_vec()
            .unwrap(),
        [4.0, 0.5]
    );
    assert_eq!(
        (-&x).unwrap().to_vec().unwrap(),
        [2.0, 0.5, -0.0, -0.5, -4.0]
    );
    assert_eq!(
        x.square().unwrap().to_vec().unwrap(),
        [4.0, 0.25, 0.0, 0.25, 16.0]
    );
    assert_eq!(
        x.narrow(0, 4, 1).unwrap().sqrt().unwrap().to_vec().unwrap(),
        [2.0]
    );
    assert_eq!(
        x.narrow(0, 4, 1)
            .unwrap()
            .powf(1.5)
            .unwrap()
            .to_vec()
            .unwrap(),
        [8.0]
    );
    let s = x.sigmoid().unwrap().to_vec().unwrap();
    assert_eq!(s[2], 0.5);
    assert!((s[4] - 1.0 / (1.0 + (-4.0f32).exp())).abs() < 1e-7);
    let e = x.exp().unwrap().log().unwrap().to_vec().unwrap();
    for (a, b) in e.iter().zip(x.to_vec().unwrap()) {
        assert!((a - b).abs() < 1e-6);
    }
}

#[test]
fn failed_broadcasts_are_errors() {
    let a = Tensor::<f32>::zeros([2, 3]).unwrap();
    let b = Tensor::<f32>::zeros([2]).unwrap();
    let err = (&a + &b).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Tensor::add: argument `rhs` has the wrong shape: expected a shape broadcastable with [2, 3], got [2]"
    );
    assert!(a.where_cond(&a, &b).is_err());
}
