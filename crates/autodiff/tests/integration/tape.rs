//! The tape's contract: accumulation, stop_gradient, pruning to what the requested
//! parameters need, consumption, bad input as errors, and the same bits at any thread
//! count for a whole training run.

#[path = "../common/mod.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rlgrad_autodiff::nn::{
    Activation, Forward, Init, Linear, Mlp, Module, hard_update, soft_update,
};
use rlgrad_autodiff::{ApplyGradients, CustomOp, Gradients, Param, Tape, Var};
use rlgrad_core::{Par, Result, Rng};
use rlgrad_optim::{Optimizer, Sgd};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::strategies;

fn tensor(data: &[f64], shape: &[usize]) -> Tensor<f64> {
    Tensor::from_vec(data.to_vec(), shape).unwrap()
}

fn bits(t: &Tensor<f64>) -> Vec<u64> {
    t.to_vec().unwrap().iter().map(|v| v.to_bits()).collect()
}

#[test]
fn a_parameter_used_twice_gets_the_sum_of_both_gradients() {
    let mut rng = Rng::new(5, "twice");
    let layer = Linear::<f64>::new("net", 3, 2, Init::TorchDefault, &mut rng).unwrap();
    let first = Tensor::rand_normal([4, 3], 0.0, 1.0, &mut rng).unwrap();
    let second = Tensor::rand_normal([5, 3], 0.0, 1.0, &mut rng).unwrap();
    let grads_of = |batches: &[&Tensor<f64>]| {
        let tape = Tape::new();
        let mut total = None;
        for x in batches {
            let loss = layer
                .forward(&tape, &tape.constant(x))
                .unwrap()
                .tanh()
                .unwrap()
                .sum_all()
                .unwrap();
            total = Some(match total {
                None => loss,
                Some(t) => loss.add(&t).unwrap(),
            });
        }
        let grads = tape.gradient(&total.unwrap(), &[&layer]).unwrap();
        layer
            .parameters()
            .iter()
            .map(|p| grads.get(p).unwrap().clone())
            .collect::<Vec<_>>()
    };
    let both = grads_of(&[&first, &second]);
    let (alone1, alone2) = (grads_of(&[&first]), grads_of(&[&second]));
    for ((b, a1), a2) in both.iter().zip(&alone1).zip(&alone2) {
        assert_eq!(bits(b), bits(&a1.add(a2).unwrap()));
    }
}

#[test]
fn stop_gradient_stops_it() {
    let w = Param::new("w", tensor(&[2.0], &[1])).unwrap();
    let tape = Tape::new();
    let v = tape.param(&w);
    let loss = v.detach().mul(&v).unwrap().sum_all().unwrap(); // d/dw (c * w) = c
    let grads = tape.gradient(&loss, &[&w]).unwrap();
    assert_eq!(grads.get(&w).unwrap().to_vec().unwrap(), [2.0]);

    let tape = Tape::new();
    let only_detached = tape
        .param(&w)
        .stop_gradient()
        .square()
        .unwrap()
        .sum_all()
        .unwrap();
    let grads = tape.gradient(&only_detached, &[&w]).unwrap();
    let err = grads.get(&w).unwrap_err().to_string();
    assert!(
        err.contains("`w`, which the loss does not depend on"),
        "{err}"
    );
    assert_eq!(grads.unconnected().collect::<Vec<_>>(), ["w"]);
}

#[test]
fn broadcasting_backward_sums_over_exactly_the_broadcast_axes() {
    let mut rng = Rng::new(8, "broadcast");
    let x = Tensor::<f64>::rand_normal([6, 4], 0.0, 1.0, &mut rng).unwrap();
    let upstream = Tensor::<f64>::rand_normal([6, 4], 0.0, 1.0, &mut rng).unwrap();
    let row = Param::new("row", Tensor::rand_normal([4], 0.0, 1.0, &mut rng).unwrap()).unwrap();
    let column = Param::new(
        "column",
        Tensor::rand_normal([6, 1], 0.0, 1.0, &mut rng).unwrap(),
    )
    .unwrap();
    let tape = Tape::new();
    let sum = tape
        .constant(&x)
        .add(&tape.param(&row))
        .unwrap()
        .add(&tape.param(&column))
        .unwrap();
    let loss = sum
        .mul(&tape.constant(&upstream))
        .unwrap()
        .sum_all()
        .unwrap();
    let grads = tape.gradient(&loss, &[&row, &column]).unwrap();
    assert_eq!(
        bits(grads.get(&row).unwrap()),
        bits(&upstream.sum_axis(0, false).unwrap())
    );
    assert_eq!(
        bits(grads.get(&column).unwrap()),
        bits(&upstream.sum_axis(1, true).unwrap())
    );
}

/// Counts its backward calls: a probe for what the tape differentiates.
struct Probe(Arc<AtomicUsize>);

impl CustomOp<f64> for Probe {
    fn name(&self) -> &str {
        "probe"
    }
    fn forward(&self, inputs: &[&Tensor<f64>]) -> Result<Tensor<f64>> {
        Ok(inputs[0].clone())
    }
    fn backward(
        &self,
        _: &[&Tensor<f64>],
        _: &Tensor<f64>,
        grad: &Tensor<f64>,
    ) -> Result<Vec<Option<Tensor<f64>>>> {
        self.0.fetch_add(1, Ordering::Relaxed);
        Ok(vec![Some(grad.clone())])
    }
}

#[test]
fn only_what_leads_to_the_requested_parameters_is_differentiated() {
    // TD3's actor update: the critic's weights are on the path, but their gradients are
    // not asked for, so the critic-only branch is never differentiated.
    let mut rng = Rng::new(1, "prune");
    let actor = Linear::<f64>::new("actor", 3, 2, Init::TorchDefault, &mut rng).unwrap();
    let critic = Linear::<f64>::new("critic", 5, 1, Init::TorchDefault, &mut rng).unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let tape = Tape::new();
    let state = tape.constant(&Tensor::ones([4, 3]).unwrap());
    let action = actor.forward(&tape, &state).unwrap();
    let critic_weight = tape
        .custom(Probe(Arc::clone(&calls)), &[&tape.param(critic.weight())])
        .unwrap();
    let q = rlgrad_autodiff::Var::concat(&[&state, &action], 1)
        .unwrap()
        .matmul(&critic_weight)
        .unwrap();
    let loss = q.mean_all().unwrap().neg().unwrap();
    let grads = tape.gradient(&loss, &[&actor]).unwrap();
    assert_eq!(
        calls.load(Ordering::Relaxed),
        0,
        "the critic's weight was differentiated"
    );
    assert!(grads.get(actor.weight()).is_ok());
    assert!(grads.get(critic.weight()).is_err()); // not requested
}

#[test]
fn a_consumed_tape_says_so_and_a_persistent_one_does_not() {
    let w = Param::new("w", tensor(&[3.0], &[1])).unwrap();
    let tape = Tape::new();
    let loss = tape.param(&w).square().unwrap().sum_all().unwrap();
    tape.gradient(&loss, &[&w]).unwrap();
    let err = tape.gradient(&loss, &[&w]).unwrap_err().to_string();
    assert!(
        err.contains("consumed by an earlier Tape::gradient call"),
        "{err}"
    );
    assert!(
        loss.mul(&loss)
            .unwrap_err()
            .to_string()
            .contains("consumed")
    );

    let tape = Tape::new().persistent();
    let loss = tape.param(&w).square().unwrap().sum_all().unwrap();
    let first = tape
        .gradient(&loss, &[&w])
        .unwrap()
        .get(&w)
        .unwrap()
        .to_vec()
        .unwrap();
    let second = tape
        .gradient(&loss, &[&w])
        .unwrap()
        .get(&w)
        .unwrap()
        .to_vec()
        .unwrap();
    assert_eq!((first.clone(), second), (vec![6.0], vec![6.0]));

    let mut tape = Tape::new();
    let loss = tape.param(&w).square().unwrap().sum_all().unwrap();
    tape.gradient(&loss, &[&w]).unwrap();
    tape.reset();
    let loss = tape.param(&w).square().unwrap().sum_all().unwrap();
    assert_eq!(
        tape.gradient(&loss, &[&w])
            .unwrap()
            .get(&w)
            .unwrap()
            .to_vec()
            .unwrap(),
        first
    );
}

#[test]
fn a_tape_can_move_to_another_thread() {
    fn send<S: Send>(_: S) {}
    send(Tape::<f32>::new());
}

#[test]
fn a_no_grad_tape_records_nothing() {
    let w = Param::new("w", tensor(&[3.0], &[1])).unwrap();
    let tape = Tape::new().no_grad();
    let loss = tape.param(&w).square().unwrap().sum_all().unwrap();
    assert_eq!(loss.to_scalar().unwrap(), 9.0);
    assert!(!loss.is_tracked() && tape.is_empty());
    assert!(
        tape.gradient(&loss, &[&w])
            .unwrap_err()
            .to_string()
            .contains("no_grad")
    );
}

#[test]
fn bad_input_is_an_error_that_names_it() {
    let tape = Tape::<f64>::new();
    let a = tape.constant(&Tensor::zeros([2, 3]).unwrap());
    let b = tape.constant(&Tensor::zeros([4]).unwrap());
    let err = a.add(&b).unwrap_err().to_string();
    assert!(
        err.starts_with("Var::add:") && err.contains("[2, 3]") && err.contains("[4]"),
        "{err}"
    );
    let err = a
        .matmul(&b.reshape([4, 1]).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("Var::matmul:") && err.contains("[4, 1]") && err.contains("[2, 3]"),
        "{err}"
    );
    let err = a.gather(1, &[0, 5], [2, 1]).unwrap_err().to_string();
    assert!(
        err.starts_with("Var::gather:") && err.contains("5"),
        "{err}"
    );

    let other = Tape::<f64>::new();
    let foreign = other.constant(&Tensor::zeros([2, 3]).unwrap());
    assert!(
        a.add(&foreign)
            .unwrap_err()
            .to_string()
            .contains("another tape")
    );
    assert!(
        other
            .gradient(&a, &[])
            .unwrap_err()
            .to_string()
            .contains("another tape")
    );

    let mut rng = Rng::new(2, "init");
    let mut target = Mlp::<f64>::new(
        "actor",
        &[3, 4, 2],
        Activation::Relu,
        Activation::Tanh,
        Init::TorchDefault,
        &mut rng,
    )
    .unwrap();
    let wider = Mlp::<f64>::new(
        "actor",
        &[3, 5, 2],
        Activation::Relu,
        Activation::Tanh,
        Init::TorchDefault,
        &mut rng,
    )
    .unwrap();
    let before: Vec<Vec<f64>> = target
        .parameters()
        .iter()
        .map(|p| p.value().to_vec().unwrap())
        .collect();
    let err = soft_update(&mut target, &wider, 0.5)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("`actor/l1/weight` of shape [3, 4]") && err.contains("[3, 5]"),
        "{err}"
    );
    // A shape error in a layer names the layer's path and the input, not its weight.
    let x = tape.constant(&Tensor::zeros([256, 4]).unwrap());
    let err = target.forward(&tape, &x).unwrap_err().to_string();
    assert_eq!(
        err,
        "Linear::forward: argument `x` has the wrong shape: expected [..., 3]: layer \
         \"actor/l1\" expects 3 input features, got [256, 4] (4 features)"
    );
    let hidden = tape.constant(&Tensor::zeros([8, 3]).unwrap());
    let layer = Linear::<f64>::new("critic/q", 5, 1, Init::TorchDefault, &mut rng).unwrap();
    let err = layer.forward(&tape, &hidden).unwrap_err().to_string();
    assert!(
        err.contains("layer \"critic/q\" expects 5") && err.contains("[8, 3]"),
        "{err}"
    );

    assert!(hard_update(&mut target, &wider).is_err());
    assert!(soft_update(&mut target, &wider.clone(), 1.5).is_err());
    let after: Vec<Vec<f64>> = target
        .parameters()
        .iter()
        .map(|p| p.value().to_vec().unwrap())
        .collect();
    assert_eq!(before, after, "a failed update changed the target");
}

#[test]
fn apply_gradients_refuses_a_parameter_without_gradient_and_changes_nothing() {
    let mut rng = Rng::new(4, "init");
    let mut model = Mlp::<f64>::new(
        "m",
        &[2, 3, 1],
        Activation::Relu,
        Activation::Identity,
        Init::TorchDefault,
        &mut rng,
    )
    .unwrap();
    let mut sgd = Optimizer::new(Sgd::default(), 0.1).unwrap();
    let tape = Tape::new();
    let loss = tape.param(model.layers()[1].weight()).sum_all().unwrap();
    let grads = tape.gradient(&loss, &[&model]).unwrap();
    let before: Vec<Vec<f64>> = model
        .parameters()
        .iter()
        .map(|p| p.value().to_vec().unwrap())
        .collect();
    let err = sgd
        .apply_gradients(&mut model, &grads)
        .unwrap_err()
        .to_string();
    assert!(err.contains("none for `m/l1/weight`"), "{err}");
    let after: Vec<Vec<f64>> = model
        .parameters()
        .iter()
        .map(|p| p.value().to_vec().unwrap())
        .collect();
    assert_eq!(before, after);
    assert_eq!(sgd.step_count(), 0);
}

#[test]
fn gradients_from_elsewhere_step_as_the_tapes_and_a_wrong_shape_names_its_parameter() {
    let model = |seed| {
        Mlp::<f64>::new(
            "m",
            &[3, 4, 2],
            Activation::Tanh,
            Activation::Identity,
            Init::TorchDefault,
            &mut Rng::new(seed, "init"),
        )
        .unwrap()
    };
    let (mut from_tape, mut from_elsewhere) = (model(5), model(5));
    let tape = Tape::new();
    let x = tape.constant(&tensor(&[0.5, -1.0, 2.0, 1.5, 0.25, -0.75], &[2, 3]));
    let loss = from_tape.forward(&tape, &x).unwrap().square().unwrap();
    let grads = tape
        .gradient(&loss.sum_all().unwrap(), &[&from_tape])
        .unwrap();
    // The tape's gradients as host vectors, as a reducer over ranks hands them back; the
    // weights' arrive transposed (a strided view), which the optimizer must not mind.
    let host: Vec<(String, Vec<f64>)> = from_tape
        .parameters()
        .iter()
        .map(|p| (p.name().to_owned(), grads.get(p).unwrap().to_vec().unwrap()))
        .collect();
    let uploaded = Gradients::from_fn(&from_elsewhere, |p| {
        let (_, values) = host.iter().find(|(name, _)| name == p.name()).unwrap();
        match p.shape().dims() {
            &[rows, columns] => {
                let mut transposed = vec![0.0; values.len()];
                for (i, v) in values.iter().enumerate() {
                    transposed[(i % columns) * rows + i / columns] = *v;
                }
                Tensor::from_vec(transposed, [columns, rows])?.transpose(0, 1)
            }
            _ => Tensor::from_vec(values.clone(), p.shape().clone()),
        }
    })
    .unwrap();
    let mut sgd = [0, 1].map(|_| Optimizer::new(Sgd::default(), 0.1).unwrap());
    sgd[0].apply_gradients(&mut from_tape, &grads).unwrap();
    sgd[1]
        .apply_gradients(&mut from_elsewhere, &uploaded)
        .unwrap();
    let bits = common::module_bits;
    assert_eq!(bits(&from_tape), bits(&from_elsewhere));
    assert_ne!(bits(&from_tape), bits(&model(5)), "the step moved them");

    let mut asked = 0;
    let err = Gradients::from_fn(&from_elsewhere, |p| {
        asked += 1;
        Tensor::zeros([p.shape().numel() + 1])
    })
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("Gradients::from_fn") && err.contains("`m/l1/weight`"),
        "{err}"
    );
    assert_eq!(asked, 1, "nothing asked after the first error");
}

/// `steps` steps of the shared training loop: the final parameters' bits.
fn training_run(par: Par, sizes: &[usize], batch: usize, steps: usize) -> Vec<Vec<u64>> {
    let mut training = common::Training::new(par, sizes, batch);
    for _ in 0..steps {
        training.step();
    }
    training.parameter_bits()
}

#[test]
fn a_training_run_gives_the_same_bits_at_every_thread_count() {
    // The seed model of the autodiff issue: 8 -> 64 -> 64 -> 1, batch 100, 200 steps.
    let seed_model = |par| training_run(par, &[8, 64, 64, 1], 100, 200);
    let runs = strategies::in_thread_pools(&[1, 2], seed_model);
    assert_eq!(runs[0], runs[1]);
    assert_eq!(runs[0], seed_model(Par::Seq));
    // TD3's actor shapes, large enough that every kernel splits its work across threads.
    let td3_actor = |par| training_run(par, &[17, 400, 300, 6], 256, 8);
    let runs = strategies::in_thread_pools(&[1, 2, 4], td3_actor);
    assert!(runs.windows(2).all(|w| w[0] == w[1]));
}

/// A linear layer and its activation, as `matmul_bias` or as the three ops it stands for.
fn linear_layer<'t>(
    h: &Var<'t, f32>,
    w: &Var<'t, f32>,
    b: &Var<'t, f32>,
    activation: Option<rlgrad_core::kernels::UnaryOp<f32>>,
    fused: bool,
) -> Result<Var<'t, f32>> {
    use rlgrad_core::kernels::UnaryOp;
    if fused {
        return h.matmul_bias(w, b, activation);
    }
    let sum = h.matmul(w)?.add(b)?;
    match activation {
        Some(UnaryOp::Relu) => sum.relu(),
        Some(UnaryOp::Tanh) => sum.tanh(),
        Some(UnaryOp::Sigmoid) => sum.sigmoid(),
        Some(UnaryOp::Exp) => sum.exp(),
        None => Ok(sum),
        Some(other) => panic!("no unfused twin written for {other:?}"),
    }
}

/// `matmul_bias` (one node) against the matmul, add and activation it stands for (three
/// nodes), bit for bit in values and in every gradient, with the weight and bias used
/// twice (so that the order in which their gradients accumulate counts), for each
/// activation it fuses, none, and one it does not fuse.
#[test]
fn matmul_bias_is_the_three_ops_in_values_and_gradients() {
    use rlgrad_core::kernels::UnaryOp;
    let mut rng = Rng::new(8, "matmul_bias");
    let mut param = |name: &str, shape: &[usize]| {
        Param::new(
            name,
            Tensor::<f32>::rand_normal(shape, 0.0, 1.0, &mut rng).unwrap(),
        )
        .unwrap()
    };
    let (x, w, b) = (
        param("x", &[37, 20]),
        param("w", &[20, 20]),
        param("b", &[20]),
    );
    let f32_bits =
        |t: &Tensor<f32>| -> Vec<u32> { t.to_vec().unwrap().iter().map(|v| v.to_bits()).collect() };
    for activation in [
        None,
        Some(UnaryOp::Relu),
        Some(UnaryOp::Tanh),
        Some(UnaryOp::Sigmoid),
        Some(UnaryOp::Exp),
    ] {
        let run = |fused: bool| {
            let tape = Tape::new();
            let (xv, wv, bv) = (tape.param(&x), tape.param(&w), tape.param(&b));
            let h = linear_layer(&xv, &wv, &bv, activation, fused).unwrap();
            let y = linear_layer(&h, &wv, &bv, activation, fused).unwrap();
            let loss = (&y * &y).unwrap().mean_all().unwrap();
            let grads = tape.gradient(&loss, &[&x, &w, &b]).unwrap();
            let mut all = vec![f32_bits(y.value())];
            for p in [&x, &w, &b] {
                all.push(f32_bits(grads.get(p).unwrap()));
            }
            all
        };
        assert_eq!(run(true), run(false), "{activation:?}");
    }
}

/// A layer applied to a batch of sequences (`[batch, time, in]`) runs the ops one by one
/// (the fused op is 2-D) and gives the bits of the batched product, the bias and the
/// activation.
#[test]
fn a_linear_layer_takes_batched_inputs() {
    let mut rng = Rng::new(9, "batched");
    let mlp = Mlp::<f32>::new(
        "mlp",
        &[4, 3],
        Activation::Relu,
        Activation::Tanh,
        Init::TorchDefault,
        &mut rng,
    )
    .unwrap();
    let x = Tensor::<f32>::rand_normal([2, 5, 4], 0.0, 1.0, &mut rng).unwrap();
    let tape = Tape::new();
    let got = mlp.forward(&tape, &tape.constant(&x)).unwrap();
    let params = mlp.parameters();
    let want = x
        .matmul(params[0].value())
        .unwrap()
        .add(params[1].value())
        .unwrap()
        .tanh()
        .unwrap();
    assert_eq!(got.dims(), [2, 5, 3]);
    let bits =
        |t: &Tensor<f32>| -> Vec<u32> { t.to_vec().unwrap().iter().map(|v| v.to_bits()).collect() };
    assert_eq!(bits(got.value()), bits(&want));
}
