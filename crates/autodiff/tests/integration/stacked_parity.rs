//! Parity of the stacked, bidirectional GRU and LSTM with `torch.nn.GRU`/`LSTM` on
//! packed sequences (`pack_padded_sequence` with unsorted lengths, then
//! `pad_packed_sequence`): outputs, last states, and the gradients of a weighted sum of
//! them with respect to every weight, the input and the initial states, in f64. The
//! fixtures are `tests/torch/rnn_f64.json`, written by `tests/torch/make_rnn_fixtures.py`
//! (which says what they hold); the input's padded steps hold random values, which
//! packing never reads.

use rlgrad_autodiff::nn::{LstmState, Module, RnnConfig, StackedGru, StackedLstm};
use rlgrad_autodiff::{Param, Sequences, Tape, Var};
use rlgrad_core::Rng;
use rlgrad_tensor::Tensor;
use serde_json::Value;

/// The largest error allowed, relative to `max(|torch|, 1)`.
const TOLERANCE: f64 = 1e-12;

fn fixtures() -> Value {
    let text = include_str!("../torch/rnn_f64.json");
    serde_json::from_str(text).expect("the fixtures are JSON")
}

/// A fixture tensor, `{"shape": [...], "data": [...]}`.
fn tensor(value: &Value) -> Tensor<f64> {
    let numbers = |key: &str| -> Vec<&Value> {
        value[key]
            .as_array()
            .unwrap_or_else(|| panic!("a fixture tensor has {key}"))
            .iter()
            .collect()
    };
    let shape: Vec<usize> = numbers("shape")
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    let data: Vec<f64> = numbers("data")
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    Tensor::from_vec(data, shape).unwrap()
}

/// The largest error of `got` against torch's `expected`, relative to `max(|x|, 1)`,
/// after checking the shapes.
fn error(what: &str, got: &Tensor<f64>, expected: &Value) -> f64 {
    let expected = tensor(expected);
    assert_eq!(got.dims(), expected.dims(), "{what}: shape");
    got.to_vec()
        .unwrap()
        .iter()
        .zip(expected.to_vec().unwrap())
        .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
        .fold(0.0, f64::max)
}

/// `module`'s parameters set to the fixture's, which must come in the same order with the
/// same names (PyTorch's `state_dict`).
fn load(module: &mut dyn Module<f64>, params: &Value) {
    let params = params.as_array().unwrap();
    let mut count = 0;
    module.visit_named_mut("", &mut |path, p| {
        let fixture = &params[count];
        assert_eq!(path, fixture["name"].as_str().unwrap(), "parameter {count}");
        p.set_value(tensor(fixture)).unwrap();
        count += 1;
    });
    assert_eq!(count, params.len(), "as many parameters as torch");
}

/// `sum(v * weights)`.
fn weighted<'t>(v: &Var<'t, f64>, weights: &Value) -> Var<'t, f64> {
    v.mul(&v.tape().constant(&tensor(weights)))
        .unwrap()
        .sum_all()
        .unwrap()
}

/// One fixture case run through rlgrad: the largest relative error over every output,
/// last state and gradient.
fn case_error(case: &Value) -> f64 {
    let name = case["name"].as_str().unwrap();
    let config = RnnConfig {
        num_layers: case["num_layers"].as_u64().unwrap() as usize,
        bidirectional: case["bidirectional"].as_bool().unwrap(),
        dropout: 0.0,
    };
    let (inputs, hidden) = (
        case["input_size"].as_u64().unwrap() as usize,
        case["hidden_size"].as_u64().unwrap() as usize,
    );
    let lstm = case["cell"] == "lstm";
    let lengths: Vec<usize> = case["lengths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_u64().unwrap() as usize)
        .collect();
    let x = Param::new("x", tensor(&case["x"])).unwrap();
    let seqs = Sequences::new(&lengths, Some(x.shape().dims()[1])).unwrap();
    let initial = |key: &str| {
        case["initial"]
            .get(key)
            .map(|t| Param::new(key, tensor(t)).unwrap())
    };
    let (h0, c0) = (initial("h0"), initial("c0"));

    let mut rng = Rng::new(0, "parity");
    let mut stacked_lstm =
        StackedLstm::<f64>::new("rnn", inputs, hidden, config, &mut rng).unwrap();
    let mut stacked_gru = StackedGru::<f64>::new("rnn", inputs, hidden, config, &mut rng).unwrap();
    let net: &mut dyn Module<f64> = if lstm {
        &mut stacked_lstm
    } else {
        &mut stacked_gru
    };
    load(net, &case["params"]);

    let tape = Tape::new();
    let input = tape.param(&x);
    let (output, finals) = if lstm {
        let state0 = h0.as_ref().map(|h0| LstmState {
            h: tape.param(h0),
            c: tape.param(c0.as_ref().unwrap()),
        });
        let (output, last) = stacked_lstm
            .run(&tape, &input, Some(&seqs), state0.as_ref(), None)
            .unwrap();
        (output, vec![("h_n", last.h), ("c_n", last.c)])
    } else {
        let h0 = h0.as_ref().map(|h0| tape.param(h0));
        let (output, last) = stacked_gru
            .run(&tape, &input, Some(&seqs), h0.as_ref(), None)
            .unwrap();
        (output, vec![("h_n", last)])
    };

    let mut errors = vec![error(
        &format!("{name}: output"),
        output.value(),
        &case["output"],
    )];
    let mut loss = weighted(&output, &case["weights"]["w_output"]);
    for (key, value) in &finals {
        errors.push(error(
            &format!("{name}: {key}"),
            value.value(),
            &case["final"][key],
        ));
        let weights = &case["weights"][format!("w_{}", &key[..1])];
        loss = loss.add(&weighted(value, weights)).unwrap();
    }

    let net: &dyn Module<f64> = if lstm { &stacked_lstm } else { &stacked_gru };
    let mut sources: Vec<&dyn Module<f64>> = vec![net, &x];
    sources.extend(h0.iter().chain(&c0).map(|p| p as &dyn Module<f64>));
    let grads = tape.gradient(&loss, &sources).unwrap();
    let expected = &case["grads"];
    for (path, p) in net.named_parameters() {
        let what = format!("{name}: gradient of {path}");
        errors.push(error(&what, grads.get(p).unwrap(), &expected[&path]));
    }
    for p in [Some(&x), h0.as_ref(), c0.as_ref()].into_iter().flatten() {
        let what = format!("{name}: gradient of {}", p.name());
        errors.push(error(&what, grads.get(p).unwrap(), &expected[p.name()]));
    }
    assert_eq!(
        errors.len(),
        1 + finals.len() + expected.as_object().unwrap().len(),
        "{name}: every output, state and gradient compared"
    );
    errors.into_iter().fold(0.0, f64::max)
}

#[test]
fn stacked_and_bidirectional_layers_match_torch_on_packed_sequences() {
    let fixtures = fixtures();
    let cases = fixtures["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4);
    for case in cases {
        let worst = case_error(case);
        println!("{}: largest relative error {worst:.1e}", case["name"]);
        assert!(
            worst <= TOLERANCE,
            "{}: an error of {worst:e} relative to torch",
            case["name"]
        );
    }
}
