//! Padding never matters. Every differentiable op that takes [`Sequences`] (the GRU and
//! LSTM runners, the masked reductions, masked normalization, zero padding, pad and unpad
//! in both layouts) gives, with garbage in every padded position (NaN, ±inf, ±1e30, the
//! extreme finite values, random bits), the outputs and the gradients it gives with zero
//! padding, bit for bit. The garbage goes into the padded inputs and into the padded
//! positions of the gradients that arrive from later ops (seeded through [`Tape::vjp`]).

use proptest::prelude::*;
use rlgrad_autodiff::nn::{Gru, Lstm, LstmState, Module};
use rlgrad_autodiff::{Gradients, PadOrder, Param, Sequences, Tape, Var};
use rlgrad_core::{Float, Result, Rng};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::strategies::config;

/// Values and gradients, as raw bits.
type Bits = Vec<Vec<u64>>;

use crate::padded;

use padded::{Case, cases};

impl<T: Float> Case<T> {
    fn seqs(&self) -> Sequences {
        Sequences::new(&self.lengths, Some(self.max_len)).unwrap()
    }

    fn batch(&self) -> usize {
        self.lengths.len()
    }

    /// [`Case::padded_values`] in the time-major layout `[T, B, width]`.
    fn padded_time_major(&self, width: usize, stream: &str, garbage: bool) -> Vec<T> {
        let batch_major = self.padded_values(width, stream, garbage);
        let (b, t) = (self.batch(), self.max_len);
        let mut values = Vec::with_capacity(batch_major.len());
        for step in 0..t {
            for seq in 0..b {
                let at = (seq * t + step) * width;
                values.extend_from_slice(&batch_major[at..at + width]);
            }
        }
        values
    }

    /// `n` values with no padding, from stream `stream`.
    fn dense(&self, n: usize, stream: &str) -> Vec<T> {
        let mut rng = Rng::new(self.seed, stream);
        (0..n).map(|_| rng.normal::<T>(0.0, 1.0)).collect()
    }
}

fn bits<T: Float>(t: &Tensor<T>) -> Vec<u64> {
    t.to_vec()
        .unwrap()
        .iter()
        .map(|v| v.to_bits_u64())
        .collect()
}

/// Every gradient, in order, as bits (a parameter without one as no values).
fn gradient_bits<T: Float>(grads: &Gradients<T>) -> Bits {
    grads
        .iter()
        .map(|(_, grad)| grad.map(bits).unwrap_or_default())
        .collect()
}

/// `run(false)` (zero padding) and `run(true)` (garbage) give the same bits, or the same
/// error.
fn same_as_zero_padding(
    what: &str,
    run: impl Fn(bool) -> Result<Bits>,
) -> std::result::Result<(), TestCaseError> {
    let zeros = run(false).map_err(|e| e.to_string());
    let garbage = run(true).map_err(|e| e.to_string());
    prop_assert!(
        zeros == garbage,
        "{what}: garbage in the padding changed the bits"
    );
    Ok(())
}

/// The output of `op` on the input `x` of `shape` and, with the backward seeded by
/// `output_grad`, the input's gradient.
fn through<T: Float>(
    x: Vec<T>,
    shape: &[usize],
    output_grad: Vec<T>,
    op: impl for<'t> FnOnce(&Var<'t, T>) -> Result<Var<'t, T>>,
) -> Result<Bits> {
    let x = Param::new("x", Tensor::from_vec(x, shape)?)?;
    let tape = Tape::new();
    let y = op(&tape.param(&x))?;
    let seed = Tensor::from_vec(output_grad, y.shape().clone())?;
    let grads = tape.vjp(&y, &seed, &[&x])?;
    Ok(vec![bits(y.value()), bits(grads.get(&x)?)])
}

fn weighted_sum<'t, T: Float>(v: &Var<'t, T>, weights: &Tensor<T>) -> Result<Var<'t, T>> {
    v.mul(&v.tape().constant(weights))?.sum_all()
}

/// A GRU or LSTM over the case's batch, from given initial states: its outputs, its last
/// state, and every gradient (of the layer's weights, the input and the initial states)
/// both from the outputs (seeded with garbage at padded steps) and from the last state.
fn recurrent<T: Float>(case: &Case<T>, lstm: bool, garbage: bool) -> Result<Bits> {
    let seqs = case.seqs();
    let (b, t, f, h) = (case.batch(), case.max_len, case.features, case.hidden);
    let mut rng = Rng::new(case.seed, "padding/recurrent");
    let x = Param::new(
        "x",
        Tensor::from_vec(case.padded_values(f, "x", garbage), [b, t, f])?,
    )?;
    let h0 = Param::new("h0", Tensor::rand_normal([b, h], 0.0, 1.0, &mut rng)?)?;
    let c0 = Param::new("c0", Tensor::rand_normal([b, h], 0.0, 1.0, &mut rng)?)?;
    let last_weights = Tensor::rand_normal([b, h], 0.0, 1.0, &mut rng)?;
    let output_grad = Tensor::from_vec(case.padded_values(h, "output grad", garbage), [b, t, h])?;
    let lstm_layer = Lstm::<T>::new("lstm", f, h, &mut rng)?;
    let gru_layer = Gru::<T>::new("gru", f, h, &mut rng)?;
    let tape = Tape::new().persistent();
    let input = tape.param(&x);
    let weigh = |v| weighted_sum(v, &last_weights);
    let mut out = Vec::new();
    let (outputs, last_loss, sources): (_, _, Vec<&dyn Module<T>>) = if lstm {
        let state0 = LstmState {
            h: tape.param(&h0),
            c: tape.param(&c0),
        };
        let (outputs, last) = lstm_layer.run(&tape, &input, Some(&seqs), Some(&state0))?;
        out.extend([bits(last.h.value()), bits(last.c.value())]);
        let loss = weigh(&last.h)?.add(&weigh(&last.c)?)?;
        (outputs, loss, vec![&lstm_layer, &x, &h0, &c0])
    } else {
        let (outputs, last) = gru_layer.run(&tape, &input, Some(&seqs), Some(&tape.param(&h0)))?;
        out.push(bits(last.value()));
        (outputs, weigh(&last)?, vec![&gru_layer, &x, &h0])
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

/// Every sequence op of the tape over the case, each compared on its own.
fn sequence_ops<T: Float>(case: &Case<T>) -> std::result::Result<(), TestCaseError> {
    let seqs = case.seqs();
    let (b, t, f) = (case.batch(), case.max_len, case.features);
    let batch_major = [b, t, f];
    let padded = |garbage| case.padded_values(f, "x", garbage);
    let padded_grad = |garbage| case.padded_values(f, "output grad", garbage);
    let packed_grad = || case.dense(seqs.total() * f, "packed grad");
    let scalar_grad = || vec![T::one()];

    same_as_zero_padding("masked_sum", |garbage| {
        through(padded(garbage), &batch_major, scalar_grad(), |x| {
            x.masked_sum(&seqs)
        })
    })?;
    same_as_zero_padding("masked_mean", |garbage| {
        through(padded(garbage), &batch_major, scalar_grad(), |x| {
            x.masked_mean(&seqs)
        })
    })?;
    same_as_zero_padding("masked_mean of [B, T]", |garbage| {
        through(
            case.padded_values(1, "x", garbage),
            &[b, t],
            scalar_grad(),
            |x| x.masked_mean(&seqs),
        )
    })?;
    same_as_zero_padding("sequence_means", |garbage| {
        let grad = case.dense(b, "means grad");
        through(padded(garbage), &batch_major, grad, |x| {
            x.sequence_means(&seqs)
        })
    })?;
    same_as_zero_padding("masked_normalize", |garbage| {
        through(padded(garbage), &batch_major, padded_grad(garbage), |x| {
            x.masked_normalize(&seqs, T::from_f64(1e-8), 1)
        })
    })?;
    same_as_zero_padding("zero_padding", |garbage| {
        through(padded(garbage), &batch_major, padded_grad(garbage), |x| {
            x.zero_padding(&seqs)
        })
    })?;
    same_as_zero_padding("unpad_sequences (batch-major)", |garbage| {
        through(padded(garbage), &batch_major, packed_grad(), |x| {
            x.unpad_sequences(&seqs, PadOrder::BatchMajor)
        })
    })?;
    same_as_zero_padding("unpad_sequences (time-major)", |garbage| {
        let x = case.padded_time_major(f, "x", garbage);
        through(x, &[t, b, f], packed_grad(), |x| {
            x.unpad_sequences(&seqs, PadOrder::TimeMajor)
        })
    })?;
    // pad's input has no padding; its output's padding is zeros, and the gradient that
    // arrives there must not reach the packed rows.
    let packed = || case.dense(seqs.total() * f, "packed");
    same_as_zero_padding("pad_sequences (batch-major)", |garbage| {
        through(packed(), &[seqs.total(), f], padded_grad(garbage), |x| {
            x.pad_sequences(&seqs, PadOrder::BatchMajor)
        })
    })?;
    same_as_zero_padding("pad_sequences (time-major)", |garbage| {
        let grad = case.padded_time_major(f, "output grad", garbage);
        through(packed(), &[seqs.total(), f], grad, |x| {
            x.pad_sequences(&seqs, PadOrder::TimeMajor)
        })
    })?;
    same_as_zero_padding("lstm run", |garbage| recurrent(case, true, garbage))?;
    same_as_zero_padding("gru run", |garbage| recurrent(case, false, garbage))?;
    Ok(())
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn prop_garbage_in_padding_changes_no_bit_f64(case in cases::<f64>(1..5)) {
        sequence_ops(&case)?;
    }

    #[test]
    fn prop_garbage_in_padding_changes_no_bit_f32(case in cases::<f32>(1..5)) {
        sequence_ops(&case)?;
    }
}

/// The case: lengths `[3, 1]`, NaN, inf or 1e30 in the short sequence's padded
/// steps. The gradients of the valid input and of every weight stay finite.
#[test]
fn a_short_sequence_with_nan_padding_gets_finite_gradients() {
    for fill in [f32::NAN, f32::INFINITY, 1e30] {
        for lstm in [true, false] {
            let case = Case {
                lengths: vec![3, 1],
                max_len: 3,
                features: 2,
                hidden: 4,
                seed: 7,
                garbage: vec![fill],
            };
            let got = recurrent(&case, lstm, true).unwrap();
            assert_eq!(got, recurrent(&case, lstm, false).unwrap(), "{fill} {lstm}");
            for values in &got {
                assert!(
                    values.iter().all(|&v| f32::from_bits(v as u32).is_finite()),
                    "{fill} (lstm: {lstm}): a non-finite value or gradient"
                );
            }
        }
    }
}
