//! The stacked, bidirectional GRU and LSTM against what they are made of: one layer of
//! one direction is the one-layer runner, bit for bit; the backward direction of each
//! sequence is the one-layer runner over its reversed valid steps alone; dropout sits
//! between layers only, with the documented draws; garbage in the padding changes no bit
//! of any value or gradient; parameters are named and ordered as PyTorch's `state_dict`;
//! bad arguments are errors naming the function and the argument; an optimizer steps it
//! by name. Parity with PyTorch
//! itself is `stacked_parity.rs`.

use proptest::prelude::*;
use rlgrad_autodiff::nn::{
    Gru, Lstm, LstmState, Module, Recurrent, RnnConfig, StackedGru, StackedLstm,
};
use rlgrad_autodiff::{ApplyGradients, Gradients, Param, Sequences, Tape, Var};
use rlgrad_core::{Error, Float, Result, Rng, Shape};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::strategies::config;

use crate::padded;

use padded::{Case, cases};

/// Values and gradients, as raw bits.
type Bits = Vec<Vec<u64>>;

fn bits<T: Float>(t: &Tensor<T>) -> Vec<u64> {
    t.to_vec()
        .unwrap()
        .iter()
        .map(|v| v.to_bits_u64())
        .collect()
}

fn gradient_bits<T: Float>(grads: &Gradients<T>) -> Bits {
    grads
        .iter()
        .map(|(_, grad)| grad.map(bits).unwrap_or_default())
        .collect()
}

fn bidirectional(num_layers: usize) -> RnnConfig {
    RnnConfig {
        num_layers,
        bidirectional: true,
        ..RnnConfig::default()
    }
}

/// Copies of the parameters of `module`, four at a time: one layer of one direction each.
fn layer_params<T: Float>(module: &dyn Module<T>) -> Vec<[Param<T>; 4]> {
    let params: Vec<Param<T>> = module.parameters().into_iter().cloned().collect();
    params
        .chunks(4)
        .map(|c| [c[0].clone(), c[1].clone(), c[2].clone(), c[3].clone()])
        .collect()
}

/// The one-layer layer of cell `K` with `params`.
fn one_layer<K: rlgrad_autodiff::nn::Cell, T: Float>(params: [Param<T>; 4]) -> Recurrent<K, T> {
    let [w_ih, w_hh, b_ih, b_hh] = params;
    Recurrent::from_params(w_ih, w_hh, b_ih, b_hh).unwrap()
}

/// Sets the parameters of `module` to `values`, in order.
fn set_params<T: Float>(module: &mut dyn Module<T>, values: &[Param<T>]) {
    let mut values = values.iter();
    module.visit_mut(&mut |p| p.set_value(values.next().unwrap().value().clone()).unwrap());
    assert!(values.next().is_none());
}

#[test]
fn parameters_are_named_drawn_and_shaped_as_torch_does() {
    let mut rng = Rng::new(1, "names");
    let lstm = StackedLstm::<f64>::new("policy/lstm", 3, 5, bidirectional(2), &mut rng).unwrap();
    let mut expected_paths = Vec::new();
    for layer in 0..2 {
        for suffix in ["", "_reverse"] {
            for field in ["weight_ih", "weight_hh", "bias_ih", "bias_hh"] {
                expected_paths.push(format!("{field}_l{layer}{suffix}"));
            }
        }
    }
    let named = lstm.named_parameters();
    let paths: Vec<&str> = named.iter().map(|(path, _)| path.as_str()).collect();
    assert_eq!(paths, expected_paths);
    for (path, p) in &named {
        assert_eq!(p.name(), format!("policy/lstm/{path}"));
        let width = if path.contains("_l0") { 3 } else { 10 };
        let expected: &[usize] = match &path[..7] {
            "weight_" if path.starts_with("weight_ih") => &[20, width],
            "weight_" => &[20, 5],
            _ => &[20],
        };
        assert_eq!(p.shape().dims(), expected, "{path}");
        let bound = 1.0 / 5f64.sqrt();
        assert!(p.value().to_vec().unwrap().iter().all(|v| v.abs() <= bound));
    }
    // Drawn in that order from the Rng: the first layer's forward direction is what a
    // one-layer LSTM draws first.
    let single = Lstm::<f64>::new("single", 3, 5, &mut Rng::new(1, "names")).unwrap();
    for (a, b) in single.parameters().iter().zip(lstm.parameters()) {
        assert_eq!(bits(a.value()), bits(b.value()));
    }
    let gru = StackedGru::<f32>::new("gru", 4, 2, RnnConfig::default(), &mut rng).unwrap();
    let paths: Vec<String> = gru.named_parameters().into_iter().map(|(p, _)| p).collect();
    assert_eq!(
        paths,
        ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"]
    );
    assert_eq!(gru.num_parameters(), 6 * 4 + 6 * 2 + 6 + 6);
}

/// A padded batch `[B, T, F]` of normal values, its padded steps holding `fill`.
fn padded_batch(seqs: &Sequences, features: usize, fill: f64, rng: &mut Rng) -> Tensor<f64> {
    let mut values = Vec::new();
    for &len in seqs.lengths() {
        for t in 0..seqs.max_len() {
            for _ in 0..features {
                let v = rng.normal::<f64>(0.0, 1.0);
                values.push(if t < len { v } else { fill });
            }
        }
    }
    Tensor::from_vec(values, [seqs.batch(), seqs.max_len(), features]).unwrap()
}

#[test]
fn one_layer_of_one_direction_is_the_one_layer_runner() {
    let mut rng = Rng::new(2, "one layer");
    let seqs = Sequences::new(&[4, 0, 2, 3], Some(5)).unwrap();
    let x = Param::new("x", padded_batch(&seqs, 3, 0.0, &mut rng)).unwrap();
    let h0 = Param::new(
        "h0",
        Tensor::rand_normal([4, 6], 0.0, 1.0, &mut rng).unwrap(),
    )
    .unwrap();
    let c0 = Param::new(
        "c0",
        Tensor::rand_normal([4, 6], 0.0, 1.0, &mut rng).unwrap(),
    )
    .unwrap();
    let stacked = StackedLstm::<f64>::new("s", 3, 6, RnnConfig::default(), &mut rng).unwrap();
    let single: Lstm<f64> = one_layer(layer_params(&stacked).remove(0));
    let run = |use_stack: bool| {
        let tape = Tape::new();
        let (h0v, c0v) = (tape.param(&h0), tape.param(&c0));
        let input = tape.param(&x);
        let (output, last) = if use_stack {
            let state0 = LstmState {
                h: h0v.unsqueeze(0).unwrap(),
                c: c0v.unsqueeze(0).unwrap(),
            };
            let (output, last) = stacked
                .run(&tape, &input, Some(&seqs), Some(&state0), None)
                .unwrap();
            let (h, c) = (last.h.squeeze(0).unwrap(), last.c.squeeze(0).unwrap());
            (output, LstmState { h, c })
        } else {
            let state0 = LstmState { h: h0v, c: c0v };
            single
                .run(&tape, &input, Some(&seqs), Some(&state0))
                .unwrap()
        };
        let loss = output
            .sum_all()
            .unwrap()
            .add(&last.h.mul(&last.c).unwrap().sum_all().unwrap())
            .unwrap();
        let module: &dyn Module<f64> = if use_stack { &stacked } else { &single };
        let grads = tape.gradient(&loss, &[module, &x, &h0, &c0]).unwrap();
        let mut out = vec![
            bits(output.value()),
            bits(last.h.value()),
            bits(last.c.value()),
        ];
        out.extend(gradient_bits(&grads));
        out
    };
    assert_eq!(run(true), run(false));
}

/// `[1, L, F]`: the first `len` steps of sequence `b` of `x`, in reverse order when
/// `reverse`.
fn one_sequence(x: &Tensor<f64>, b: usize, len: usize, reverse: bool) -> Tensor<f64> {
    let (steps, features) = (x.dims()[1], x.dims()[2]);
    let values = x.to_vec().unwrap();
    let mut picked = Vec::new();
    for t in 0..len {
        let t = if reverse { len - 1 - t } else { t };
        let at = (b * steps + t) * features;
        picked.extend_from_slice(&values[at..at + features]);
    }
    Tensor::from_vec(picked, [1, len, features]).unwrap()
}

/// Checks a bidirectional one-layer network's outputs `[B, T, 2H]` and last states
/// `[2, B, H]` (`lasts`, each part) against `alone(direction, x)`: the outputs `[1, L, H]`
/// and last state parts `[1, H]` of the layer of that direction over one sequence alone.
fn check_against_alone(
    seqs: &Sequences,
    x: &Tensor<f64>,
    output: &Tensor<f64>,
    lasts: &[Tensor<f64>],
    alone: impl Fn(usize, &Tensor<f64>) -> (Vec<f64>, Vec<Vec<f64>>),
) {
    let (steps, hidden) = (seqs.max_len(), lasts[0].dims()[2]);
    let output = output.to_vec().unwrap();
    let lasts: Vec<Vec<f64>> = lasts.iter().map(|t| t.to_vec().unwrap()).collect();
    let at = |b: usize, t: usize, direction: usize| {
        let start = (b * steps + t) * 2 * hidden + direction * hidden;
        &output[start..start + hidden]
    };
    for (b, &len) in seqs.lengths().iter().enumerate() {
        for t in len..steps {
            assert!(at(b, t, 0).iter().chain(at(b, t, 1)).all(|&v| v == 0.0));
        }
        if len == 0 {
            continue;
        }
        for direction in 0..2 {
            let (outputs, last) = alone(direction, &one_sequence(x, b, len, direction == 1));
            for t in 0..len {
                // The backward direction's output at step t is its (len - 1 - t)-th step.
                let k = if direction == 1 { len - 1 - t } else { t };
                let want = &outputs[k * hidden..(k + 1) * hidden];
                let got = at(b, t, direction);
                assert_eq!(
                    bits_of(got),
                    bits_of(want),
                    "b {b} t {t} direction {direction}"
                );
            }
            for (part, want) in lasts.iter().zip(&last) {
                let start = (direction * seqs.batch() + b) * hidden;
                assert_eq!(bits_of(&part[start..start + hidden]), bits_of(want));
            }
        }
    }
}

fn bits_of(values: &[f64]) -> Vec<u64> {
    values.iter().map(|v| v.to_bits()).collect()
}

#[test]
fn the_backward_direction_reads_each_sequence_back_from_its_last_valid_step() {
    let mut rng = Rng::new(3, "reverse");
    let seqs = Sequences::new(&[5, 2, 0, 1, 4], Some(6)).unwrap();
    let (features, hidden) = (3, 4);
    // NaN padding: the backward direction must not start there.
    let x = padded_batch(&seqs, features, f64::NAN, &mut rng);

    let gru = StackedGru::<f64>::new("gru", features, hidden, bidirectional(1), &mut rng).unwrap();
    let directions: Vec<Gru<f64>> = layer_params(&gru).into_iter().map(one_layer).collect();
    let tape = Tape::new();
    let (output, last) = gru
        .run(&tape, &tape.constant(&x), Some(&seqs), None, None)
        .unwrap();
    check_against_alone(
        &seqs,
        &x,
        output.value(),
        &[last.value().clone()],
        |d, x| {
            let tape = Tape::new();
            let (out, last) = directions[d]
                .run(&tape, &tape.constant(x), None, None)
                .unwrap();
            (out.to_vec().unwrap(), vec![last.to_vec().unwrap()])
        },
    );

    let lstm =
        StackedLstm::<f64>::new("lstm", features, hidden, bidirectional(1), &mut rng).unwrap();
    let directions: Vec<Lstm<f64>> = layer_params(&lstm).into_iter().map(one_layer).collect();
    let tape = Tape::new();
    let (output, last) = lstm
        .run(&tape, &tape.constant(&x), Some(&seqs), None, None)
        .unwrap();
    let lasts = [last.h.value().clone(), last.c.value().clone()];
    check_against_alone(&seqs, &x, output.value(), &lasts, |d, x| {
        let tape = Tape::new();
        let (out, last) = directions[d]
            .run(&tape, &tape.constant(x), None, None)
            .unwrap();
        let parts = vec![last.h.to_vec().unwrap(), last.c.to_vec().unwrap()];
        (out.to_vec().unwrap(), parts)
    });
}

/// Dropout as documented: the 2-layer network in training is its first layer, then each
/// value kept when its draw is at least `p` and scaled by `1 / (1 - p)` (else 0), then its
/// second layer; the same bits for the outputs, the last states and every gradient.
#[test]
fn dropout_applies_between_layers_only_while_training() {
    let (p, seed) = (0.4, 44);
    let mut rng = Rng::new(4, "dropout");
    let seqs = Sequences::new(&[3, 5, 1], Some(5)).unwrap();
    let x = Param::new("x", padded_batch(&seqs, 2, 0.0, &mut rng)).unwrap();
    let config = RnnConfig {
        dropout: p,
        ..bidirectional(2)
    };
    let net = StackedGru::<f64>::new("net", 2, 3, config, &mut rng).unwrap();
    let params: Vec<Param<f64>> = net.parameters().into_iter().cloned().collect();
    let mut bottom = StackedGru::<f64>::new("bottom", 2, 3, bidirectional(1), &mut rng).unwrap();
    let mut top = StackedGru::<f64>::new("top", 6, 3, bidirectional(1), &mut rng).unwrap();
    set_params(&mut bottom, &params[..8]);
    set_params(&mut top, &params[8..]);

    // Training: the network, and the layers with the documented mask in between.
    let stacked = |training: Option<&mut Rng>| {
        let tape = Tape::new();
        let (output, last) = net
            .run(&tape, &tape.param(&x), Some(&seqs), None, training)
            .unwrap();
        let loss = output
            .sum_all()
            .unwrap()
            .add(&last.sum_all().unwrap())
            .unwrap();
        let grads = tape.gradient(&loss, &[&net, &x]).unwrap();
        let mut out = vec![bits(output.value()), bits(last.value())];
        out.extend(gradient_bits(&grads));
        out
    };
    let composed = |mask: Option<&mut Rng>| {
        let tape = Tape::new();
        let (middle, bottom_last) = bottom
            .run(&tape, &tape.param(&x), Some(&seqs), None, None)
            .unwrap();
        let middle = match mask {
            Some(draws) => {
                let keep: Vec<f64> = (0..middle.value().numel())
                    .map(|_| if draws.uniform_f64() < p { 0.0 } else { 1.0 })
                    .collect();
                assert!(keep.contains(&0.0) && keep.contains(&1.0));
                let keep = Tensor::from_vec(keep, middle.shape().clone()).unwrap();
                let zero = tape.constant(&Tensor::zeros(Shape::scalar()).unwrap());
                let scaled = middle.mul_scalar(1.0 / (1.0 - p)).unwrap();
                Var::where_cond(&keep, &scaled, &zero).unwrap()
            }
            None => middle,
        };
        let (output, top_last) = top.run(&tape, &middle, Some(&seqs), None, None).unwrap();
        let last = Var::concat(&[&bottom_last, &top_last], 0).unwrap();
        let loss = output
            .sum_all()
            .unwrap()
            .add(&last.sum_all().unwrap())
            .unwrap();
        let grads = tape.gradient(&loss, &[&bottom, &top, &x]).unwrap();
        let mut out = vec![bits(output.value()), bits(last.value())];
        out.extend(gradient_bits(&grads));
        out
    };
    let trained = stacked(Some(&mut Rng::new(seed, "masks")));
    assert_eq!(trained, composed(Some(&mut Rng::new(seed, "masks"))));
    // Evaluation (no Rng): no dropout, and stacking is running the layers in turn.
    let evaluated = stacked(None);
    assert_eq!(evaluated, composed(None));
    assert_ne!(trained[0], evaluated[0]);

    // A network without dropout draws nothing, even while training.
    let plain = StackedGru::<f64>::new("plain", 2, 3, bidirectional(2), &mut rng).unwrap();
    let mut draws = Rng::new(seed, "masks");
    let tape = Tape::new();
    let x = tape.param(&x);
    let (with_rng, _) = plain
        .run(&tape, &x, Some(&seqs), None, Some(&mut draws))
        .unwrap();
    let (without, _) = plain.run(&tape, &x, Some(&seqs), None, None).unwrap();
    assert_eq!(bits(with_rng.value()), bits(without.value()));
    assert_eq!(draws.next_u64(), Rng::new(seed, "masks").next_u64());
}

/// [`Case::padded_values`] as a `[B, T, width]` tensor.
fn padded<T: Float>(case: &Case<T>, width: usize, stream: &str, garbage: bool) -> Tensor<T> {
    let values = case.padded_values(width, stream, garbage);
    Tensor::from_vec(values, [case.lengths.len(), case.max_len, width]).unwrap()
}

fn weighted_sum<'t, T: Float>(v: &Var<'t, T>, weights: &Var<'t, T>) -> Result<Var<'t, T>> {
    v.mul(weights)?.sum_all()
}

/// A bidirectional stacked GRU or LSTM (dropout 0.3, training) over the case's batch
/// from given initial states: its outputs, last states, and every gradient (weights,
/// input, initial states) from the outputs (seeded with garbage at padded steps) and from
/// the last states.
fn stacked_run<T: Float>(
    case: &Case<T>,
    num_layers: usize,
    lstm: bool,
    garbage: bool,
) -> Result<Bits> {
    let seqs = Sequences::new(&case.lengths, Some(case.max_len))?;
    let (b, f, h) = (case.lengths.len(), case.features, case.hidden);
    let config = RnnConfig {
        num_layers,
        bidirectional: true,
        dropout: 0.3,
    };
    let states = 2 * num_layers;
    let mut rng = Rng::new(case.seed, "stacked/padding");
    let x = Param::new("x", padded(case, f, "x", garbage))?;
    let h0 = Param::new(
        "h0",
        Tensor::rand_normal([states, b, h], 0.0, 1.0, &mut rng)?,
    )?;
    let c0 = Param::new(
        "c0",
        Tensor::rand_normal([states, b, h], 0.0, 1.0, &mut rng)?,
    )?;
    let last_weights = Tensor::<T>::rand_normal([states, b, h], 0.0, 1.0, &mut rng)?;
    let output_grad = padded(case, 2 * h, "output grad", garbage);
    let lstm_net = StackedLstm::<T>::new("lstm", f, h, config, &mut rng)?;
    let gru_net = StackedGru::<T>::new("gru", f, h, config, &mut rng)?;
    let mut masks = Rng::new(case.seed, "masks");
    let tape = Tape::new().persistent();
    let input = tape.param(&x);
    let weights = tape.constant(&last_weights);
    let weigh = |v| weighted_sum(v, &weights);
    let mut out = Vec::new();
    let (outputs, last_loss, sources): (_, _, Vec<&dyn Module<T>>) = if lstm {
        let state0 = LstmState {
            h: tape.param(&h0),
            c: tape.param(&c0),
        };
        let (outputs, last) =
            lstm_net.run(&tape, &input, Some(&seqs), Some(&state0), Some(&mut masks))?;
        out.extend([bits(last.h.value()), bits(last.c.value())]);
        let loss = weigh(&last.h)?.add(&weigh(&last.c)?)?;
        (outputs, loss, vec![&lstm_net, &x, &h0, &c0])
    } else {
        let h0v = tape.param(&h0);
        let (outputs, last) =
            gru_net.run(&tape, &input, Some(&seqs), Some(&h0v), Some(&mut masks))?;
        out.push(bits(last.value()));
        (outputs, weigh(&last)?, vec![&gru_net, &x, &h0])
    };
    out.push(bits(outputs.value()));
    out.extend(gradient_bits(&tape.vjp(
        &outputs,
        &output_grad,
        &sources,
    )?));
    out.extend(gradient_bits(&tape.gradient(&last_loss, &sources)?));
    Ok(out)
}

fn same_as_zero_padding<T: Float>(
    case: &Case<T>,
    num_layers: usize,
) -> std::result::Result<(), TestCaseError> {
    for lstm in [false, true] {
        let zeros = stacked_run(case, num_layers, lstm, false).map_err(|e| e.to_string());
        let garbage = stacked_run(case, num_layers, lstm, true).map_err(|e| e.to_string());
        prop_assert!(
            zeros == garbage,
            "lstm: {lstm}: garbage in the padding changed the bits"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(32))]

    #[test]
    fn prop_garbage_in_padding_changes_no_bit_f64(case in cases::<f64>(1..4), layers in 1usize..4) {
        same_as_zero_padding(&case, layers)?;
    }

    #[test]
    fn prop_garbage_in_padding_changes_no_bit_f32(case in cases::<f32>(1..4), layers in 1usize..4) {
        same_as_zero_padding(&case, layers)?;
    }
}

/// `(function, argument)` of an error.
fn named(error: Error) -> (&'static str, Option<&'static str>) {
    (error.function(), error.argument())
}

#[test]
fn bad_arguments_are_errors_naming_the_function_and_the_argument() {
    let mut rng = Rng::new(5, "errors");
    let layers = |num_layers| RnnConfig {
        num_layers,
        ..RnnConfig::default()
    };
    let dropout = |dropout| RnnConfig {
        dropout,
        ..bidirectional(2)
    };
    let lstm_error = |inputs, hidden, config, rng: &mut Rng| {
        named(StackedLstm::<f32>::new("l", inputs, hidden, config, rng).unwrap_err())
    };
    let gru_error = |inputs, hidden, config, rng: &mut Rng| {
        named(StackedGru::<f32>::new("g", inputs, hidden, config, rng).unwrap_err())
    };
    let new_lstm = ("StackedLstm::new", Some("config.num_layers"));
    assert_eq!(lstm_error(3, 4, layers(0), &mut rng), new_lstm);
    for p in [1.0, -0.1, f64::NAN, f64::INFINITY] {
        let expected = ("StackedGru::new", Some("config.dropout"));
        assert_eq!(gru_error(3, 4, dropout(p), &mut rng), expected, "{p}");
    }
    assert_eq!(
        lstm_error(0, 4, bidirectional(2), &mut rng),
        ("StackedLstm::new", Some("inputs"))
    );
    assert_eq!(
        gru_error(3, 0, bidirectional(2), &mut rng),
        ("StackedGru::new", Some("hidden"))
    );

    let gru = StackedGru::<f32>::new("g", 3, 4, bidirectional(2), &mut rng).unwrap();
    let lstm = StackedLstm::<f32>::new("l", 3, 4, bidirectional(2), &mut rng).unwrap();
    let tape = Tape::new();
    let zeros = |shape: &[usize]| tape.constant(&Tensor::zeros(shape).unwrap());
    let x = zeros(&[2, 5, 3]);
    let seqs = Sequences::new(&[5, 3], Some(5)).unwrap();
    let gru_run = |x: &Var<'_, f32>, seqs: Option<&Sequences>, h0: Option<&Var<'_, f32>>| {
        named(gru.run(&tape, x, seqs, h0, None).unwrap_err())
    };
    let run = ("StackedGru::run", Some("x"));
    assert_eq!(gru_run(&zeros(&[2, 5, 4]), None, None), run);
    assert_eq!(gru_run(&zeros(&[10, 3]), None, None), run);
    assert_eq!(gru_run(&zeros(&[2, 0, 3]), None, None), run);
    let short = Sequences::new(&[4, 3], Some(4)).unwrap();
    assert_eq!(
        gru_run(&x, Some(&short), None),
        ("StackedGru::run", Some("seqs"))
    );
    // One layer's state where four (2 layers x 2 directions) are due.
    let state0 = ("StackedGru::run", Some("state0"));
    assert_eq!(gru_run(&x, Some(&seqs), Some(&zeros(&[2, 4]))), state0);
    assert_eq!(gru_run(&x, Some(&seqs), Some(&zeros(&[1, 2, 4]))), state0);
    assert!(
        gru.run(&tape, &x, Some(&seqs), Some(&zeros(&[4, 2, 4])), None)
            .is_ok()
    );
    let state = |h: &[usize], c: &[usize]| LstmState {
        h: zeros(h),
        c: zeros(c),
    };
    let lstm_run = |state0: &LstmState<'_, f32>| {
        named(
            lstm.run(&tape, &x, Some(&seqs), Some(state0), None)
                .unwrap_err(),
        )
    };
    let state0 = ("StackedLstm::run", Some("state0"));
    assert_eq!(lstm_run(&state(&[4, 2, 4], &[4, 2, 5])), state0);
    assert_eq!(lstm_run(&state(&[2, 2, 4], &[4, 2, 4])), state0);
    assert!(
        lstm.run(
            &tape,
            &x,
            Some(&seqs),
            Some(&state(&[4, 2, 4], &[4, 2, 4])),
            None
        )
        .is_ok()
    );
}

/// A module like any other: renamed by path, and stepped by an optimizer by name.
#[test]
fn an_optimizer_steps_every_parameter_by_name() {
    let mut rng = Rng::new(6, "optimizer");
    let mut lstm = StackedLstm::<f32>::new("throwaway", 2, 3, bidirectional(2), &mut rng).unwrap();
    lstm.name_by_path("agent/lstm").unwrap();
    assert_eq!(
        lstm.parameters()[4].name(),
        "agent/lstm/weight_ih_l0_reverse"
    );
    let before: Vec<Tensor<f32>> = lstm
        .parameters()
        .iter()
        .map(|p| p.value().clone())
        .collect();
    let mut adam = Optimizer::new(Adam::torch(), 1e-2).unwrap();
    let x = Tensor::rand_normal([2, 4, 2], 0.0, 1.0, &mut rng).unwrap();
    let seqs = Sequences::new(&[4, 2], Some(4)).unwrap();
    let tape = Tape::new();
    let (output, last) = lstm
        .run(&tape, &tape.constant(&x), Some(&seqs), None, None)
        .unwrap();
    let loss = output
        .masked_mean(&seqs)
        .unwrap()
        .add(&last.c.mean_all().unwrap())
        .unwrap();
    let grads = tape.gradient(&loss, &[&lstm]).unwrap();
    adam.apply_gradients(&mut lstm, &grads).unwrap();
    for (p, old) in lstm.parameters().iter().zip(&before) {
        assert_ne!(bits(p.value()), bits(old), "{} did not move", p.name());
    }
}
