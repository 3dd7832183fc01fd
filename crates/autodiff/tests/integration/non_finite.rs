//! The first NaN, named: `Tape::check_finite` reports the op that first produced a
//! non-finite value (in the forward or in a backward), the line of this file that called
//! it, its input shapes and the parameters that fed it; the gradients carry it to the
//! optimizer's error; and the check never changes a value.

use rlgrad_autodiff::nn::{Activation, Forward, Init, Linear};
use rlgrad_autodiff::{ApplyGradients, Param, Tape};
use rlgrad_core::{Rng, Shape};
use rlgrad_optim::{Optimizer, Sgd};
use rlgrad_tensor::Tensor;

fn param(name: &str, values: Vec<f32>, dims: &[usize]) -> Param<f32> {
    Param::new(name, Tensor::from_vec(values, dims).unwrap()).unwrap()
}

#[test]
fn a_nan_in_the_forward_names_the_op_the_call_site_and_the_parameters() {
    let w = param("w", vec![2.0, -3.0, 4.0], &[3]);
    let unrelated = param("unrelated", vec![1.0], &[1]);
    let tape = Tape::new().check_finite();
    let scaled = tape.param(&w).mul_scalar(0.5).unwrap();
    let _ = tape.param(&unrelated).exp().unwrap();
    let line = line!() + 1;
    let logs = scaled.log().unwrap(); // ln(-1.5) = NaN at element 1
    let _later = logs.sqrt().unwrap(); // NaN again: not the first
    let origin = tape.first_non_finite().expect("the check found the NaN");
    assert_eq!(origin.op, "Var::log");
    assert_eq!(
        (origin.location.file(), origin.location.line()),
        (file!(), line)
    );
    assert!(!origin.in_backward);
    assert_eq!((origin.index, origin.value.is_nan()), (1, true));
    assert_eq!(origin.input_shapes, vec![Shape::from([3])]);
    assert_eq!(origin.params, vec!["w".to_owned()]);
    let text = origin.to_string();
    for part in ["Var::log", "non_finite.rs", "element 1", "parameters w"] {
        assert!(text.contains(part), "{text}");
    }
}

#[test]
fn a_layer_names_the_forward_call_and_its_weights() {
    let mut rng = Rng::new(7, "non-finite layer");
    let layer = Linear::<f32>::new("critic", 4, 3, Init::TorchDefault, &mut rng).unwrap();
    let tape = Tape::new().check_finite();
    let mut x = vec![0.5f32; 2 * 4];
    x[5] = f32::INFINITY;
    let x = tape.constant(&Tensor::from_vec(x, [2, 4]).unwrap());
    let line = line!() + 1;
    let y = layer.forward(&tape, &x).unwrap();
    let origin = tape.first_non_finite().expect("inf * w reaches the output");
    assert_eq!(
        (origin.location.file(), origin.location.line()),
        (file!(), line)
    );
    assert_eq!(origin.op, "Var::matmul_bias");
    assert_eq!(
        origin.input_shapes,
        vec![Shape::from([2, 4]), Shape::from([4, 3]), Shape::from([3])]
    );
    assert_eq!(origin.params, vec!["critic/weight", "critic/bias"]);
    assert_eq!(origin.index, 3, "row 1 is the first with an infinite input");
    drop(y);
}

#[test]
fn a_backward_that_sends_an_infinity_is_named_and_reaches_the_optimizers_error() {
    let mut w = param("w", vec![4.0, 0.0, 1.0], &[3]);
    let tape = Tape::new().check_finite();
    let line = line!() + 1;
    let roots = tape.param(&w).sqrt().unwrap(); // finite: [2, 0, 1]
    let loss = roots.sum_all().unwrap();
    assert_eq!(tape.first_non_finite(), None, "the forward is finite");
    let grads = tape.gradient(&loss, &[&w]).unwrap(); // d sqrt(0) = 1 / 0
    let origin = tape.first_non_finite().expect("the backward's infinity");
    assert_eq!(grads.first_non_finite(), Some(&origin));
    assert_eq!((origin.op, origin.in_backward), ("Var::sqrt", true));
    assert_eq!((origin.location.line(), origin.index), (line, 1));
    assert_eq!(origin.value, f64::INFINITY);
    assert_eq!(origin.input_shapes, vec![Shape::from([3])]);
    assert_eq!(origin.params, vec!["w".to_owned()]);
    let before = w.value().to_vec().unwrap();
    let mut sgd = Optimizer::new(Sgd::default(), 0.1).unwrap();
    sgd.check_finite(true);
    let message = sgd.apply_gradients(&mut w, &grads).unwrap_err().to_string();
    for part in ["finite gradients", "`w`", "Var::sqrt", "non_finite.rs"] {
        assert!(message.contains(part), "{message}");
    }
    assert_eq!(w.value().to_vec().unwrap(), before, "nothing changed");
}

#[test]
fn the_check_changes_no_value_and_off_finds_nothing() {
    let run = |check: bool| {
        let mut rng = Rng::new(3, "non-finite bits");
        let layer = Linear::<f32>::new("l", 5, 4, Init::TorchDefault, &mut rng).unwrap();
        let mut tape = Tape::new();
        if check {
            tape = tape.check_finite();
        }
        let x = Tensor::rand_normal([6, 5], 0.0, 1.0, &mut rng).unwrap();
        let x = tape.constant(&x);
        let y = layer
            .forward_activated(&tape, &x, Activation::Tanh)
            .unwrap();
        let loss = y.log().unwrap().sum_all().unwrap(); // tanh < 0 somewhere: NaN
        let origin = tape.first_non_finite();
        let grads = tape.gradient(&loss, &[&layer]).unwrap();
        let bits: Vec<u32> = [layer.weight(), layer.bias().unwrap()]
            .iter()
            .flat_map(|p| grads.get(p).unwrap().to_vec().unwrap())
            .chain(y.to_vec().unwrap())
            .map(f32::to_bits)
            .collect();
        (origin, bits)
    };
    let (on, bits_on) = run(true);
    let (off, bits_off) = run(false);
    assert_eq!(bits_on, bits_off);
    assert_eq!(on.expect("log of a negative tanh").op, "Var::log");
    assert_eq!(off, None);
}

#[test]
fn reset_forgets_the_origin_and_constants_have_no_parameters() {
    let mut tape = Tape::<f64>::new().check_finite();
    let x = tape.constant(&Tensor::from_vec(vec![0.0, 1.0], [2]).unwrap());
    let _ = x.log().unwrap(); // ln 0 = -inf
    let origin = tape.first_non_finite().expect("ln 0");
    assert_eq!((origin.index, origin.value), (0, f64::NEG_INFINITY));
    assert!(origin.params.is_empty());
    assert!(origin.to_string().contains("no parameters"), "{origin}");
    tape.reset();
    assert_eq!(tape.first_non_finite(), None);
    assert!(tape.checks_finite());
}
