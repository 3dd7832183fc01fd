//! The fused LSTM cell against the same step written with unfused ops: the forward gives
//! the same bits, and so do the gradients; and a transposed weight's gradient (`x @ W^T`)
//! is dense and has the bits of `(x^T g)^T`.

use rlgrad_autodiff::nn::{Lstm, LstmState, Module};
use rlgrad_autodiff::{Param, Tape, Var};
use rlgrad_core::{Result, Rng};
use rlgrad_tensor::Tensor;

fn bits(t: &Tensor<f64>) -> Vec<u64> {
    t.to_vec().unwrap().iter().map(|v| v.to_bits()).collect()
}

/// One LSTM step with PyTorch's equations, op by op.
fn unfused_step<'t>(
    tape: &'t Tape<f64>,
    params: &[&Param<f64>],
    x: &Var<'t, f64>,
    state: &LstmState<'t, f64>,
) -> Result<LstmState<'t, f64>> {
    let [w_ih, w_hh, b_ih, b_hh] = [0, 1, 2, 3].map(|k| tape.param(params[k]));
    let hidden = state.h.dims()[1];
    let input = x.matmul(&w_ih.t()?)?.add(&b_ih)?;
    let gates = input.add(&state.h.matmul(&w_hh.t()?)?.add(&b_hh)?)?;
    let gate = |k: usize| gates.narrow(1, k * hidden, hidden);
    let (i, f) = (gate(0)?.sigmoid()?, gate(1)?.sigmoid()?);
    let (g, o) = (gate(2)?.tanh()?, gate(3)?.sigmoid()?);
    let c = f.mul(&state.c)?.add(&i.mul(&g)?)?;
    let h = o.mul(&c.tanh()?)?;
    Ok(LstmState { h, c })
}

#[test]
fn the_fused_cell_is_the_unfused_step() {
    let mut rng = Rng::new(21, "fused lstm");
    let (batch, inputs, hidden) = (5, 3, 7);
    let lstm = Lstm::<f64>::new("lstm", inputs, hidden, &mut rng).unwrap();
    let params = lstm.parameters();
    let x = Tensor::rand_normal([batch, inputs], 0.0, 1.0, &mut rng).unwrap();
    let h0 = Tensor::rand_normal([batch, hidden], 0.0, 1.0, &mut rng).unwrap();
    let c0 = Tensor::rand_normal([batch, hidden], 0.0, 2.0, &mut rng).unwrap();
    let weights = Tensor::rand_normal([batch, hidden], 0.0, 1.0, &mut rng).unwrap();
    let (h0, c0) = (Param::new("h0", h0).unwrap(), Param::new("c0", c0).unwrap());
    let run = |fused: bool| {
        let tape = Tape::new();
        let state = LstmState {
            h: tape.param(&h0),
            c: tape.param(&c0),
        };
        let x = tape.constant(&x);
        // Two steps, so that the second step's gradient flows back through the first.
        let mut next = state;
        for _ in 0..2 {
            next = if fused {
                lstm.step(&tape, &x, &next).unwrap()
            } else {
                unfused_step(&tape, &params, &x, &next).unwrap()
            };
        }
        let weights = tape.constant(&weights);
        let loss = next
            .h
            .mul(&weights)
            .unwrap()
            .add(&next.c.tanh().unwrap())
            .unwrap()
            .sum_all()
            .unwrap();
        let values = (next.h.value().clone(), next.c.value().clone());
        let grads = tape.gradient(&loss, &[&lstm, &h0, &c0]).unwrap();
        let every: Vec<Tensor<f64>> = params
            .iter()
            .copied()
            .chain([&h0, &c0])
            .map(|p| grads.get(p).unwrap().clone())
            .collect();
        (values, every)
    };
    let ((h, c), fused) = run(true);
    let ((h_ref, c_ref), unfused) = run(false);
    assert_eq!(bits(&h), bits(&h_ref));
    assert_eq!(bits(&c), bits(&c_ref));
    // The fused backward applies the unfused ops' rules in the order the tape
    // accumulates them, so even the gradients are the same bits.
    for (k, (a, b)) in fused.iter().zip(&unfused).enumerate() {
        assert_eq!(bits(a), bits(b), "gradient {k}");
    }
}

#[test]
fn a_transposed_weight_gets_the_bits_of_the_plain_formula() {
    let mut rng = Rng::new(22, "transposed weight");
    let x = Tensor::rand_normal([9, 5], 0.0, 1.0, &mut rng).unwrap();
    let upstream = Tensor::rand_normal([9, 4], 0.0, 1.0, &mut rng).unwrap();
    let w = Param::new(
        "w",
        Tensor::rand_normal([4, 5], 0.0, 1.0, &mut rng).unwrap(),
    )
    .unwrap();
    let tape = Tape::new();
    let y = tape
        .constant(&x)
        .matmul(&tape.param(&w).t().unwrap())
        .unwrap();
    let loss = y.mul(&tape.constant(&upstream)).unwrap().sum_all().unwrap();
    let grads = tape.gradient(&loss, &[&w]).unwrap();
    let got = grads.get(&w).unwrap();
    // d loss / d W^T = x^T @ upstream, transposed back to W's shape.
    let want = x.t().unwrap().matmul(&upstream).unwrap().t().unwrap();
    assert!(got.is_contiguous(), "a dense gradient for the weight");
    assert_eq!(bits(got), bits(&want));
}
