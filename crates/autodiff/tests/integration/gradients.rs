//! Every op's gradient against central finite differences in f64, on random shapes and
//! values: the tape's gradient of `sum(f(inputs) * w)` for a random weight `w` must match
//! `(L(x + h e_i) - L(x - h e_i)) / 2h` for every element of every input.

use proptest::prelude::*;
use rlgrad_autodiff::losses::{Reduction, cross_entropy_with_logits, huber_loss, mse_loss};
use rlgrad_autodiff::nn::{Activation, Forward, Gru, Init, Linear, Lstm, Mlp, Module, l2_penalty};
use rlgrad_autodiff::{PadOrder, Param, Sequences, Tape, Var};
use rlgrad_core::kernels::UnaryOp;
use rlgrad_core::{Result, Rng, Shape};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::strategies;

/// The scalar a check differentiates: `sum(out * w)` with a fixed random `w`.
fn scalarize<'t>(out: &Var<'t, f64>, seed: u64) -> Result<Var<'t, f64>> {
    let mut rng = Rng::new(seed, "weights");
    let w = Tensor::rand_uniform(out.shape().clone(), 0.5, 1.5, &mut rng)?;
    out.mul(&out.tape().constant(&w))?.sum_all()
}

/// Checks the tape's gradients of `f` at `inputs` against central differences. `f` gets
/// the inputs on the tape in order.
fn check<F>(inputs: &[&Tensor<f64>], f: F) -> std::result::Result<(), TestCaseError>
where
    F: for<'t> Fn(&[Var<'t, f64>]) -> Result<Var<'t, f64>>,
{
    let params: Vec<Param<f64>> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| Param::new(format!("input{i}"), (*t).clone()).unwrap())
        .collect();
    let loss_at = |values: &[Tensor<f64>]| -> f64 {
        let tape = Tape::new().no_grad();
        let vars: Vec<_> = values.iter().map(|v| tape.constant(v)).collect();
        scalarize(&f(&vars).unwrap(), 99)
            .unwrap()
            .to_scalar()
            .unwrap()
    };
    let tape = Tape::new();
    let vars: Vec<_> = params.iter().map(|p| tape.param(p)).collect();
    let loss = scalarize(&f(&vars).unwrap(), 99).unwrap();
    let sources: Vec<&dyn Module<f64>> = params.iter().map(|p| p as &dyn Module<f64>).collect();
    let grads = tape.gradient(&loss, &sources).unwrap();
    let h = 1e-6;
    for (i, p) in params.iter().enumerate() {
        let analytic = match grads.get(p) {
            Ok(g) => g.to_vec().unwrap(),
            Err(_) => vec![0.0; p.value().numel()],
        };
        prop_assert_eq!(
            grads
                .get(p)
                .map_or(p.shape().clone(), |g| g.shape().clone()),
            p.shape().clone()
        );
        let base = inputs[i].to_vec().unwrap();
        for (j, &a) in analytic.iter().enumerate() {
            let probe = |delta: f64| {
                let mut moved = base.clone();
                moved[j] += delta;
                let mut values: Vec<Tensor<f64>> = inputs.iter().map(|t| (*t).clone()).collect();
                values[i] = Tensor::from_vec(moved, inputs[i].shape().clone()).unwrap();
                loss_at(&values)
            };
            let numeric = (probe(h) - probe(-h)) / (2.0 * h);
            let tolerance = 1e-5 * (1.0 + numeric.abs());
            prop_assert!(
                (a - numeric).abs() <= tolerance,
                "input {} element {}: tape {} vs finite differences {}",
                i,
                j,
                a,
                numeric
            );
        }
    }
    Ok(())
}

/// A tensor of `shape` with values in `[low, high)`, away from zero by at least `gap`
/// (kinks of relu, abs and friends sit at 0).
fn values(shape: &[usize], seed: u64, low: f64, high: f64, gap: f64) -> Tensor<f64> {
    let mut rng = Rng::new(seed, "values");
    let n: usize = shape.iter().product();
    let data = (0..n)
        .map(|_| {
            let v = low + (high - low) * rng.uniform_f64();
            if v.abs() < gap {
                gap.copysign(v) * (1.0 + rng.uniform_f64())
            } else {
                v
            }
        })
        .collect();
    Tensor::from_vec(data, shape).unwrap()
}

fn normal(shape: &[usize], seed: u64) -> Tensor<f64> {
    values(shape, seed, -2.0, 2.0, 0.05)
}

/// Two shapes that broadcast: `full` and a version with some axes set to 1 or dropped.
fn broadcast_pair() -> impl Strategy<Value = (Vec<usize>, Vec<usize>)> {
    (strategies::shape(3, 4), any::<u64>()).prop_map(|(shape, bits)| {
        let full: Vec<usize> = shape.dims().iter().map(|&d| d.max(1)).collect();
        let mut small: Vec<usize> = full
            .iter()
            .enumerate()
            .map(|(i, &d)| if bits >> i & 1 == 1 { 1 } else { d })
            .collect();
        let drop = (bits >> 8) as usize % (small.len() + 1);
        small.drain(..drop);
        if bits >> 12 & 1 == 1 {
            (full, small)
        } else {
            (small, full)
        }
    })
}

proptest! {
    #![proptest_config(strategies::config(24))]

    #[test]
    fn prop_arithmetic_with_broadcasting((a, b) in broadcast_pair(), seed in any::<u64>()) {
        let (x, y) = (normal(&a, seed), values(&b, seed ^ 1, 0.5, 2.0, 0.0));
        check(&[&x, &y], |v| v[0].add(&v[1]))?;
        check(&[&x, &y], |v| v[0].sub(&v[1]))?;
        check(&[&x, &y], |v| v[0].mul(&v[1]))?;
        check(&[&x, &y], |v| v[0].div(&v[1]))?;
    }

    #[test]
    fn prop_maximum_and_minimum((a, b) in broadcast_pair(), seed in any::<u64>()) {
        let (x, y) = (normal(&a, seed), normal(&b, seed ^ 7));
        check(&[&x, &y], |v| v[0].maximum(&v[1]))?;
        check(&[&x, &y], |v| v[0].minimum(&v[1]))?;
    }

    #[test]
    fn prop_elementwise_functions(shape in strategies::shape(3, 5), seed in any::<u64>()) {
        let x = normal(shape.dims(), seed);
        let positive = values(shape.dims(), seed, 0.3, 3.0, 0.0);
        check(&[&x], |v| v[0].neg())?;
        check(&[&x], |v| v[0].abs())?;
        check(&[&x], |v| v[0].exp())?;
        check(&[&positive], |v| v[0].log())?;
        check(&[&positive], |v| v[0].sqrt())?;
        check(&[&positive], |v| v[0].powf(1.7))?;
        check(&[&x], |v| v[0].powf(3.0))?;
        check(&[&x], |v| v[0].tanh())?;
        check(&[&x], |v| v[0].relu())?;
        check(&[&x], |v| v[0].sigmoid())?;
        check(&[&x], |v| v[0].square())?;
        check(&[&x], |v| v[0].clamp(-0.5, 0.7))?;
        check(&[&x], |v| &(&(&v[0] * 3.0)? - 1.5)? / 4.0)?;
        check(&[&x], |v| v[0].add_scalar(2.0)?.mul_scalar(-0.5))?;
    }

    #[test]
    fn prop_reductions(shape in strategies::non_empty_shape(3, 5), seed in any::<u64>(), axis in any::<usize>()) {
        let x = normal(shape.dims(), seed);
        let axis = axis % shape.ndim();
        check(&[&x], |v| v[0].sum_all())?;
        check(&[&x], |v| v[0].mean_all())?;
        check(&[&x], |v| v[0].max_all())?;
        check(&[&x], |v| v[0].min_all())?;
        for keepdim in [false, true] {
            check(&[&x], |v| v[0].sum(axis, keepdim))?;
            check(&[&x], |v| v[0].mean(axis, keepdim))?;
            check(&[&x], |v| v[0].max(axis, keepdim))?;
            check(&[&x], |v| v[0].min(axis, keepdim))?;
        }
    }

    #[test]
    fn prop_matmul(m in 1usize..5, k in 1usize..5, n in 1usize..5, batch in 1usize..3, seed in any::<u64>()) {
        let (a, b) = (normal(&[m, k], seed), normal(&[k, n], seed ^ 3));
        check(&[&a, &b], |v| v[0].matmul(&v[1]))?;
        check(&[&a, &b], |v| v[1].t()?.matmul(&v[0].t()?))?;
        let batched = normal(&[batch, m, k], seed ^ 5);
        check(&[&batched, &b], |v| v[0].matmul(&v[1]))?;
        // The fused linear layer (relu's kink is left to the bitwise test in tape.rs; exp
        // is not fused and runs after the fused product and bias).
        let bias = normal(&[n], seed ^ 7);
        for activation in [None, Some(UnaryOp::Tanh), Some(UnaryOp::Sigmoid), Some(UnaryOp::Exp)] {
            check(&[&a, &b, &bias], |v| v[0].matmul_bias(&v[1], &v[2], activation))?;
        }
    }

    #[test]
    fn prop_shape_ops(shape in strategies::non_empty_shape(3, 4), seed in any::<u64>(), pick in any::<usize>()) {
        let x = normal(shape.dims(), seed);
        let dims = shape.dims().to_vec();
        let ndim = dims.len();
        let axis = pick % ndim;
        let n = shape.numel();
        check(&[&x], |v| v[0].reshape([n]))?;
        check(&[&x], |v| v[0].transpose(0, ndim - 1))?;
        let order: Vec<usize> = (0..ndim).rev().collect();
        check(&[&x], |v| v[0].permute(&order))?;
        check(&[&x], |v| v[0].unsqueeze(axis)?.squeeze(axis))?;
        let mut wider = vec![2usize];
        wider.extend(&dims);
        check(&[&x], |v| v[0].broadcast_to(wider.clone()))?;
        let len = dims[axis];
        check(&[&x], |v| v[0].narrow(axis, len / 2, len - len / 2))?;
        check(&[&x, &x], |v| Var::concat(&[&v[0], &v[1], &v[0]], axis))?;
        check(&[&x, &x], |v| Var::stack(&[&v[0], &v[1]], axis))?;
        let repeated: Vec<usize> = (0..len + 2).map(|i| (i * 7 + pick) % len).collect();
        check(&[&x], |v| v[0].index_select(axis, &repeated))?;
        let mut index_shape = dims.clone();
        index_shape[axis] = 3;
        let count: usize = index_shape.iter().product();
        let index: Vec<usize> = (0..count).map(|i| (i * 5 + pick) % len).collect();
        check(&[&x], |v| v[0].gather(axis, &index, index_shape.clone()))?;
        let condition = x.gt(&Tensor::scalar(0.0)).unwrap();
        check(&[&x, &normal(&dims, seed ^ 9)], |v| Var::where_cond(&condition, &v[0], &v[1]))?;
    }

    #[test]
    fn prop_softmax_and_losses(rows in 1usize..5, classes in 1usize..6, seed in any::<u64>(), pick in any::<usize>()) {
        let logits = values(&[rows, classes], seed, -4.0, 4.0, 0.0);
        check(&[&logits], |v| v[0].softmax(1))?;
        check(&[&logits], |v| v[0].log_softmax(1))?;
        check(&[&logits], |v| v[0].log_softmax(0))?;
        let targets: Vec<usize> = (0..rows).map(|i| (i + pick) % classes).collect();
        for reduction in [Reduction::Mean, Reduction::Sum] {
            check(&[&logits], |v| cross_entropy_with_logits(&v[0], &targets, reduction))?;
            let target = normal(&[rows, classes], seed ^ 11);
            check(&[&logits, &target], |v| mse_loss(&v[0], &v[1], reduction))?;
            check(&[&logits, &target], |v| huber_loss(&v[0], &v[1], 1.0, reduction))?;
        }
    }

    #[test]
    fn prop_masked_sequence_ops(lengths in strategies::lengths(4, 5), seed in any::<u64>()) {
        prop_assume!(lengths.iter().any(|&l| l > 0));
        let seqs = Sequences::new(&lengths, None).unwrap();
        let (b, t) = (seqs.batch(), seqs.max_len());
        let x = normal(&[b, t], seed);
        check(&[&x], |v| v[0].masked_sum(&seqs))?;
        check(&[&x], |v| v[0].masked_mean(&seqs))?;
        if seqs.total() > 1 {
            check(&[&x], |v| v[0].masked_normalize(&seqs, 1e-8, 1))?;
        }
        if lengths.iter().all(|&l| l > 0) {
            check(&[&x], |v| v[0].sequence_means(&seqs))?;
        }
        let with_features = normal(&[b, t, 2], seed ^ 6);
        check(&[&with_features], |v| v[0].masked_mean(&seqs))?;
        check(&[&with_features], |v| v[0].masked_sum(&seqs))?;
        if seqs.total() > 1 {
            check(&[&with_features], |v| v[0].masked_normalize(&seqs, 1e-8, 0))?;
        }
        let flat = normal(&[seqs.total(), 3], seed ^ 2);
        for order in [PadOrder::BatchMajor, PadOrder::TimeMajor] {
            check(&[&flat], |v| v[0].pad_sequences(&seqs, order))?;
            let padded = Shape::from(match order {
                PadOrder::BatchMajor => [b, t, 3],
                PadOrder::TimeMajor => [t, b, 3],
            });
            check(&[&normal(padded.dims(), seed ^ 4)], |v| v[0].unpad_sequences(&seqs, order))?;
        }
    }

    #[test]
    fn prop_recurrent_layers(lengths in strategies::lengths(3, 4), seed in any::<u64>()) {
        prop_assume!(lengths.iter().all(|&l| l > 0));
        let seqs = Sequences::new(&lengths, None).unwrap();
        let (b, t) = (seqs.batch(), seqs.max_len());
        let mut rng = Rng::new(seed, "init");
        let x = normal(&[b, t, 2], seed);
        let mut gru = Gru::<f64>::new("gru", 2, 3, &mut rng).unwrap();
        check_module(&mut gru, |tape, gru| {
            let (outputs, last) = gru.run(tape, &tape.constant(&x), Some(&seqs), None)?;
            outputs.sum(1, false)?.add(&last)
        })?;
        let mut lstm = Lstm::<f64>::new("lstm", 2, 3, &mut rng).unwrap();
        check_module(&mut lstm, |tape, lstm| {
            let (outputs, state) = lstm.run(tape, &tape.constant(&x), Some(&seqs), None)?;
            outputs.sum(1, false)?.add(&state.c)
        })?;
        check(&[&x], |v| gru.run(v[0].tape(), &v[0], Some(&seqs), None).map(|(out, _)| out))?;
    }

    #[test]
    fn prop_layers(seed in any::<u64>()) {
        let mut rng = Rng::new(seed, "init");
        let x = normal(&[4, 3], seed);
        let mut mlp = Mlp::<f64>::new("mlp", &[3, 5, 2], Activation::Tanh, Activation::Sigmoid, Init::GlorotUniform, &mut rng).unwrap();
        check_module(&mut mlp, |tape, mlp| mlp.forward(tape, &tape.constant(&x)))?;
        let mut regularized = Linear::<f64>::new("dense", 3, 2, Init::TorchDefault, &mut rng).unwrap().with_kernel_l2(0.3).unwrap();
        check_module(&mut regularized, |tape, dense| dense.forward(tape, &tape.constant(&x))?.sum_all()?.add(&l2_penalty(tape, dense)?))?;
    }
}

/// Checks the tape's gradients of a module's parameters against central differences,
/// moving each parameter element through [`Param::set_value`].
fn check_module<M, F>(module: &mut M, f: F) -> std::result::Result<(), TestCaseError>
where
    M: Module<f64>,
    F: for<'t> Fn(&'t Tape<f64>, &M) -> Result<Var<'t, f64>>,
{
    let tape = Tape::new();
    let loss = scalarize(&f(&tape, module).unwrap(), 42).unwrap();
    let grads = tape.gradient(&loss, &[&*module]).unwrap();
    let analytic: Vec<Vec<f64>> = module
        .parameters()
        .iter()
        .map(|p| grads.get(p).unwrap().to_vec().unwrap())
        .collect();
    let h = 1e-6;
    for (i, param_grads) in analytic.iter().enumerate() {
        for (j, &a) in param_grads.iter().enumerate() {
            let mut loss_with = |delta: f64| {
                let mut k = 0;
                module.visit_mut(&mut |p| {
                    if k == i {
                        let mut data = p.value().to_vec().unwrap();
                        data[j] += delta;
                        p.set_value(Tensor::from_vec(data, p.shape().clone()).unwrap())
                            .unwrap();
                    }
                    k += 1;
                });
                let tape = Tape::new().no_grad();
                scalarize(&f(&tape, module).unwrap(), 42)
                    .unwrap()
                    .to_scalar()
                    .unwrap()
            };
            let plus = loss_with(h);
            let minus = loss_with(-2.0 * h);
            loss_with(h);
            let numeric = (plus - minus) / (2.0 * h);
            let tolerance = 1e-5 * (1.0 + numeric.abs());
            prop_assert!(
                (a - numeric).abs() <= tolerance,
                "parameter {} element {}: tape {} vs finite differences {}",
                i,
                j,
                a,
                numeric
            );
        }
    }
    Ok(())
}
