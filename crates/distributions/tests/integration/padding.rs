//! Padding never matters: every `Padded` distribution gives, with garbage in every
//! padded step of its parameters, actions and noise (NaN, ±inf, ±1e30, the extreme
//! finite values, random bits; out-of-range action indices), the values and gradients it
//! gives with zero padding, bit for bit. And over the valid steps it equals the flat
//! distribution of the unpadded rows.

use proptest::prelude::*;
use rlgrad_autodiff::nn::Module;
use rlgrad_autodiff::{Param, Sequences, Tape, Var};
use rlgrad_core::{Float, Result, Rng};
use rlgrad_distributions::{Categorical, Padded};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::strategies::{self, config};

#[derive(Debug, Clone)]
struct Case<T> {
    lengths: Vec<usize>,
    max_len: usize,
    actions: usize,
    seed: u64,
    garbage: Vec<T>,
    bad_indices: Vec<usize>,
}

fn cases<T: Float>() -> impl Strategy<Value = Case<T>> {
    (
        strategies::lengths(4, 5),
        0usize..3,
        1usize..4,
        any::<u64>(),
        strategies::vec(strategies::garbage::<T>(), 1..24),
        strategies::vec(any::<usize>(), 1..8),
    )
        .prop_map(|(lengths, extra, actions, seed, garbage, bad_indices)| {
            let longest = lengths.iter().copied().max().unwrap_or(0);
            Case {
                max_len: (longest + extra).max(1),
                lengths,
                actions,
                seed,
                garbage,
                bad_indices,
            }
        })
}

impl<T: Float> Case<T> {
    fn seqs(&self) -> Sequences {
        Sequences::new(&self.lengths, Some(self.max_len)).unwrap()
    }

    fn valid(&self) -> Vec<bool> {
        self.seqs().mask().unwrap().as_bools().to_vec()
    }

    /// `[B, T, A]` values from stream `stream` (`valid` maps a normal draw), the padded
    /// steps holding garbage or zeros.
    fn padded(&self, stream: &str, garbage: bool, valid: impl Fn(T) -> T) -> Tensor<T> {
        let mut rng = Rng::new(self.seed, stream);
        let mut fill = self.garbage.iter().copied().cycle();
        let mut values = Vec::new();
        for step in self.valid() {
            for _ in 0..self.actions {
                let v = valid(rng.normal::<T>(0.0, 1.0));
                values.push(match (step, garbage) {
                    (true, _) => v,
                    (false, true) => fill.next().expect("garbage is never empty"),
                    (false, false) => T::zero(),
                });
            }
        }
        Tensor::from_vec(values, [self.lengths.len(), self.max_len, self.actions]).unwrap()
    }

    fn indices(&self, garbage: bool) -> Vec<usize> {
        let mut rng = Rng::new(self.seed, "indices");
        let mut fill = self.bad_indices.iter().copied().cycle();
        self.valid()
            .into_iter()
            .map(|v| {
                let a = rng.below(self.actions as u64) as usize;
                match (v, garbage) {
                    (true, _) => a,
                    (false, true) => fill.next().unwrap(),
                    (false, false) => 0,
                }
            })
            .collect()
    }
}

fn bits<T: Float>(v: &Var<'_, T>) -> Vec<u64> {
    v.to_vec()
        .unwrap()
        .iter()
        .map(|x| x.to_bits_u64())
        .collect()
}

/// Every per-step value, mean and gradient of every padded distribution, as bits, or
/// the first error.
fn everything<T: Float>(case: &Case<T>, garbage: bool) -> Result<Vec<Vec<u64>>> {
    let seqs = case.seqs();
    let p = |name: &str, t: Tensor<T>| Param::new(name, t).unwrap();
    let logits = p(
        "logits",
        case.padded("logits", garbage, |x| x * T::from_f64(3.0)),
    );
    let mean = p("mean", case.padded("mean", garbage, |x| x));
    let log_std = p(
        "log_std",
        case.padded("log_std", garbage, |x| x * T::from_f64(0.5)),
    );
    let shared_log_std = p("shared", Tensor::full([case.actions], T::from_f64(-0.3))?);
    let continuous = case.padded("actions", garbage, |x| x);
    let binary = case.padded("binary", garbage, |x| {
        if x > T::zero() { T::one() } else { T::zero() }
    });
    let eps = case.padded("eps", garbage, |x| x);
    let indices = case.indices(garbage);

    let tape = Tape::new();
    let mut out = Vec::new();
    let mut values = Vec::new();

    let categorical = Padded::categorical(&tape.param(&logits), &seqs)?;
    values.push(categorical.log_prob(&indices)?);
    values.push(categorical.entropy()?);
    values.push(categorical.mean_log_prob(&indices)?);
    values.push(categorical.mean_entropy()?);

    let bernoulli = Padded::bernoulli(&tape.param(&logits), &seqs)?;
    let binary = tape.constant(&binary);
    values.push(bernoulli.log_prob(&binary)?);
    values.push(bernoulli.mean_log_prob(&binary)?);
    values.push(bernoulli.mean_entropy()?);

    for log_std in [&log_std, &shared_log_std] {
        let normal = Padded::normal(&tape.param(&mean), &tape.param(log_std), &seqs)?;
        let actions = tape.constant(&continuous);
        values.push(normal.log_prob(&actions)?);
        values.push(normal.mean_log_prob(&actions)?);
        values.push(normal.mean_entropy()?);
        values.push(normal.rsample(&eps)?);

        let squashed = Padded::tanh_normal(&tape.param(&mean), &tape.param(log_std), &seqs)?;
        let sample = squashed.rsample(&eps)?;
        values.push(sample.log_prob.clone());
        values.push(sample.action.clone());
        values.push(squashed.mean_log_prob(&tape.constant(&continuous))?);
    }

    // One loss over everything that is a per-step value or a mean, weighted by index.
    let mut loss: Option<Var<'_, T>> = None;
    for (i, v) in values.iter().enumerate() {
        let term = if v.shape().ndim() == 0 {
            v.mul_scalar(T::from_usize(i + 1))?
        } else {
            v.sum_all()?.mul_scalar(T::from_f64(1.0 / (i + 1) as f64))?
        };
        loss = Some(match loss {
            None => term,
            Some(l) => l.add(&term)?,
        });
        out.push(bits(v));
    }
    let loss = loss.unwrap();
    let sources: [&dyn Module<T>; 4] = [&logits, &mean, &log_std, &shared_log_std];
    let grads = tape.gradient(&loss, &sources)?;
    for g in grads.iter() {
        out.push(
            g.1.map(|g| {
                g.to_vec()
                    .unwrap()
                    .iter()
                    .map(|x| x.to_bits_u64())
                    .collect()
            })
            .unwrap_or_default(),
        );
    }
    Ok(out)
}

fn same_as_zero_padding<T: Float>(case: &Case<T>) -> std::result::Result<(), TestCaseError> {
    let zeros = everything(case, false).map_err(|e| e.to_string());
    let garbage = everything(case, true).map_err(|e| e.to_string());
    prop_assert!(zeros == garbage, "garbage in the padding changed the bits");
    Ok(())
}

proptest! {
    #![proptest_config(config(48))]

    #[test]
    fn prop_padding_never_matters_f32(case in cases::<f32>()) {
        same_as_zero_padding(&case)?;
    }

    #[test]
    fn prop_padding_never_matters_f64(case in cases::<f64>()) {
        same_as_zero_padding(&case)?;
    }

    #[test]
    fn prop_padded_categorical_is_the_flat_one_on_valid_steps(case in cases::<f64>()) {
        let seqs = case.seqs();
        prop_assume!(seqs.total() > 0);
        let logits = case.padded("logits", true, |x| x * 3.0);
        let indices = case.indices(true);
        let tape = Tape::<f64>::new();
        let padded = Padded::categorical(&tape.constant(&logits), &seqs).unwrap();
        let per_step = padded.log_prob(&indices).unwrap().to_vec().unwrap();
        let valid = case.valid();
        let a = case.actions;
        let rows: Vec<usize> = (0..valid.len()).filter(|&i| valid[i]).collect();
        let flat_logits: Vec<f64> = rows.iter().flat_map(|&i| logits.to_vec().unwrap()[i * a..(i + 1) * a].to_vec()).collect();
        let flat = Categorical::from_logits(&tape.constant(&Tensor::from_vec(flat_logits, [rows.len(), a]).unwrap())).unwrap();
        let flat_indices: Vec<usize> = rows.iter().map(|&i| indices[i]).collect();
        let expected = flat.log_prob(&flat_indices).unwrap().to_vec().unwrap();
        for (k, &i) in rows.iter().enumerate() {
            prop_assert_eq!(per_step[i].to_bits(), expected[k].to_bits());
        }
        for i in (0..valid.len()).filter(|&i| !valid[i]) {
            prop_assert_eq!(per_step[i].to_bits(), 0.0f64.to_bits());
        }
        let mean = padded.mean_log_prob(&indices).unwrap().to_scalar().unwrap();
        let reference = expected.iter().sum::<f64>() / expected.len() as f64;
        prop_assert!((mean - reference).abs() <= 1e-12 * (1.0 + reference.abs()));
    }
}

#[test]
fn padded_errors_name_the_function_and_the_argument() -> Result<()> {
    let seqs = Sequences::new(&[2, 1], Some(2))?;
    let tape = Tape::<f32>::new();
    let wrong = tape.constant(&Tensor::zeros([2, 3, 2])?);
    let err = Padded::categorical(&wrong, &seqs).unwrap_err().to_string();
    assert!(
        err.contains("Padded::categorical") && err.contains("`logits`") && err.contains("[2, 2]"),
        "{err}"
    );
    let pi = Padded::categorical(&tape.constant(&Tensor::zeros([2, 2, 3])?), &seqs)?;
    let err = pi.log_prob(&[0, 1, 2]).unwrap_err().to_string();
    assert!(err.contains("4 action indices"), "{err}");
    let err = pi.log_prob(&[0, 1, 3, 0]).unwrap_err().to_string();
    assert!(
        err.contains("`actions`") && err.contains("below A = 3"),
        "{err}"
    );
    let bernoulli = Padded::bernoulli(&tape.constant(&Tensor::zeros([2, 2, 1])?), &seqs)?;
    let half = tape.constant(&Tensor::full([2, 2, 1], 0.5)?);
    let err = bernoulli.log_prob(&half).unwrap_err().to_string();
    assert!(
        err.contains("Padded::<Bernoulli>::log_prob") && err.contains("0 or 1"),
        "{err}"
    );
    Ok(())
}
