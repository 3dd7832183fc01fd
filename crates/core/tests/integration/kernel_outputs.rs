//! Every kernel writes every element of its output buffer: the buffer cache hands out
//! recycled buffers with old contents, so a kernel that skipped an element would leak
//! them into results. Each kernel runs twice, into an output full of NaN and into one
//! full of zeros, and the two results must be the same bits.

use proptest::prelude::*;
use rlgrad_core::kernels::{
    BinaryOp, CopyKernel, ElementwiseKernel, MatmulKernel, ReduceKernel, ReduceOp, UnaryOp,
};
use rlgrad_core::{Cpu, Dims, Layout, Par, Result, Rng, Shape, View};
use rlgrad_testkit::strategies;

/// The output of `kernel` into a NaN-filled and a zero-filled buffer of `len`, as bits.
fn both_outputs(len: usize, kernel: impl Fn(&mut Vec<f64>) -> Result<()>) -> [Vec<u64>; 2] {
    [f64::NAN, 0.0].map(|fill| {
        let mut out = vec![fill; len];
        kernel(&mut out).unwrap();
        out.iter().map(|v| v.to_bits()).collect()
    })
}

fn random(len: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng::new(seed, "kernel-outputs");
    (0..len).map(|_| rng.normal(0.0, 3.0)).collect()
}

proptest! {
    #![proptest_config(strategies::config(64))]

    #[test]
    fn prop_kernels_overwrite_their_whole_output(
        shape in strategies::shape(3, 6),
        seed in any::<u64>(),
        axis_pick in any::<usize>(),
    ) {
        let cpu = Cpu::new(Par::rayon(2));
        let n = shape.numel();
        let (x, y) = (random(n, seed), random(n, seed ^ 1));
        let layout = Layout::contiguous(shape.clone());
        let (vx, vy) = (View::new(&x, &layout), View::new(&y, &layout));
        let check = |outputs: [Vec<u64>; 2]| -> std::result::Result<(), TestCaseError> {
            prop_assert_eq!(&outputs[0], &outputs[1]);
            Ok(())
        };
        check(both_outputs(n, |out| cpu.unary(UnaryOp::Tanh, vx, out)))?;
        check(both_outputs(n, |out| cpu.binary(BinaryOp::Mul, vx, vy, out)))?;
        check(both_outputs(n, |out| cpu.select(vx, vy, vx, out)))?;
        check(both_outputs(n, |out| cpu.copy(vx, out)))?;
        if shape.ndim() > 0 {
            let axis = axis_pick % shape.ndim();
            let size = shape.dims()[axis];
            let outputs = n.checked_div(size).unwrap_or(0);
            if size > 0 {
                check(both_outputs(outputs, |out| cpu.reduce(ReduceOp::Sum, vx, Some(axis), out)))?;
            }
            let indices: Vec<usize> = (0..size).rev().collect();
            check(both_outputs(n, |out| cpu.index_select(vx, axis, &indices, out)))?;
            let grown = size + 2;
            let mut dims = Dims::from(shape.dims());
            dims[axis] = grown;
            let grown_len = Shape::from(dims).numel();
            let spread: Vec<usize> = (0..size).map(|i| (i * 3) % grown).collect();
            check(both_outputs(grown_len, |out| cpu.index_add(vx, axis, &spread, grown, out)))?;
            check(both_outputs(2 * n, |out| cpu.concat(&[vx, vy], axis, out)))?;
        }
        if n > 0 {
            check(both_outputs(1, |out| cpu.reduce(ReduceOp::Sum, vx, None, out)))?;
        }
    }

    #[test]
    fn prop_matmul_overwrites_its_whole_output(m in 0usize..9, k in 0usize..9, n in 0usize..9, seed in any::<u64>()) {
        let cpu = Cpu::new(Par::rayon(2));
        let (a, b) = (random(m * k, seed), random(k * n, seed ^ 1));
        let (la, lb) = (Layout::contiguous(Shape::from([m, k])), Layout::contiguous(Shape::from([k, n])));
        let outputs = both_outputs(m * n, |out| cpu.matmul(View::new(&a, &la), View::new(&b, &lb), out));
        prop_assert_eq!(&outputs[0], &outputs[1]);
    }
}

#[test]
fn outputs_of_the_wrong_length_are_refused() {
    let cpu = Cpu::seq();
    let x = vec![1.0f32, 2.0, 3.0];
    let layout = Layout::contiguous(Shape::from([3]));
    let err = cpu
        .unary(UnaryOp::Neg, View::new(&x, &layout), &mut vec![0.0; 2])
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "argument `out` has the wrong shape: expected an output of 3 elements, got 2 elements"
        ),
        "{err}"
    );
}

#[test]
fn index_add_accumulates_repeated_indices_in_order() {
    let cpu = Cpu::seq();
    let x = vec![1.0f32, 2.0, 3.0, 4.0];
    let layout = Layout::contiguous(Shape::from([4, 1]));
    let mut out = vec![f32::NAN; 2];
    cpu.index_add(View::new(&x, &layout), 0, &[1, 1, 0, 1], 2, &mut out)
        .unwrap();
    assert_eq!(out, [3.0, 7.0]);
    assert!(
        cpu.index_add(View::new(&x, &layout), 0, &[0, 2, 0, 0], 2, &mut out)
            .is_err()
    );
}
