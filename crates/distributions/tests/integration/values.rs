//! Values at the edges (stable forms), errors on bad input, and seeded sampling.

use rlgrad_autodiff::{Param, Tape, Var};
use rlgrad_core::{Error, Result, Rng};
use rlgrad_distributions::{Bernoulli, Categorical, Normal, TanhNormal, softplus};
use rlgrad_tensor::Tensor;

fn param<T: rlgrad_core::Float>(values: Vec<T>, shape: &[usize]) -> Param<T> {
    Param::new("p", Tensor::from_vec(values, shape.to_vec()).unwrap()).unwrap()
}

fn finite(values: &[f32]) -> bool {
    values.iter().all(|v| v.is_finite())
}

#[test]
fn a_logit_leading_by_30_gives_finite_values_and_gradients() -> Result<()> {
    for lead in [30.0f32, 100.0] {
        let logits = param(vec![lead, 0.0, 0.0, 0.0], &[1, 4]);
        let tape = Tape::new();
        let pi = Categorical::from_logits(&tape.param(&logits))?;
        let log_prob = pi.log_prob(&[1])?;
        let entropy = pi.entropy()?;
        assert!((log_prob.to_scalar()? + lead).abs() < 1e-4, "{lead}");
        let h = entropy.to_scalar()?;
        assert!(h.is_finite() && (0.0..1e-10).contains(&h), "{lead}: {h}");
        let loss = log_prob.add(&entropy)?.sum_all()?;
        let grads = tape.gradient(&loss, &[&logits])?;
        let g = grads.get(&logits)?.to_vec()?;
        assert!(finite(&g), "{lead}: {g:?}");
        assert!(
            (g[0] + 1.0).abs() < 1e-6 && (g[1] - 1.0).abs() < 1e-6,
            "{g:?}"
        );
    }
    Ok(())
}

#[test]
fn masked_out_actions_have_probability_zero_and_no_nan() -> Result<()> {
    let logits = param(vec![f32::NEG_INFINITY, 0.0, 0.0], &[1, 3]);
    let tape = Tape::new();
    let pi = Categorical::from_logits(&tape.param(&logits))?;
    let entropy = pi.entropy()?;
    assert!((entropy.to_scalar()? - std::f32::consts::LN_2).abs() < 1e-6);
    assert_eq!(pi.probs()?.to_vec()?[0], 0.0);
    let loss = entropy.add(&pi.log_prob(&[2])?)?.sum_all()?;
    let g = tape.gradient(&loss, &[&logits])?.get(&logits)?.to_vec()?;
    assert!(finite(&g), "{g:?}");
    let mut rng = Rng::new(3, "masked");
    for _ in 0..200 {
        assert_ne!(pi.sample(&mut rng)?, [0]);
    }
    Ok(())
}

#[test]
fn tanh_normal_is_finite_deep_in_the_squashed_tail() -> Result<()> {
    // u = mean + exp(log_std) * eps = 6, and far beyond, on both sides.
    for u in [6.0f32, 20.0, -20.0, 90.0] {
        let mean = param(vec![u - 2.0], &[1, 1]);
        let log_std = param(vec![0.0f32], &[1, 1]);
        let tape = Tape::new();
        let pi = TanhNormal::from_log_std(&tape.param(&mean), &tape.param(&log_std))?;
        let sample = pi.rsample(&Tensor::from_vec(vec![2.0f32], [1, 1])?)?;
        let log_prob = sample.log_prob.to_scalar()?;
        // N(u; u - 2, 1) + 2 * (|u| - ln 2 + softplus(-2|u|)) ~= -2.919 + 2 |u| - 1.386
        let expected = -2.0 - 0.918_938_5 + 2.0 * (u.abs() - std::f32::consts::LN_2);
        assert!(
            (log_prob - expected).abs() < 1e-4 * expected.abs().max(1.0),
            "u = {u}: {log_prob} vs {expected}"
        );
        let loss = sample
            .log_prob
            .add(&sample.action.sum(1, false)?)?
            .sum_all()?;
        let grads = tape.gradient(&loss, &[&mean, &log_std])?;
        assert!(finite(&grads.get(&mean)?.to_vec()?), "u = {u}");
        assert!(finite(&grads.get(&log_std)?.to_vec()?), "u = {u}");
    }
    Ok(())
}

#[test]
fn the_squashing_correction_is_log_one_minus_tanh_squared() -> Result<()> {
    // Where 1 - tanh(u)^2 is still accurate in f64, the stable form agrees with it.
    let us = [-3.0f64, -0.5, 0.0, 1e-3, 0.7, 2.5];
    let mean = param(us.to_vec(), &[1, us.len()]);
    let log_std = param(vec![0.0f64; us.len()], &[1, us.len()]);
    let tape = Tape::new();
    let pi = TanhNormal::from_log_std(&tape.param(&mean), &tape.param(&log_std))?;
    let normal = Normal::from_log_std(&tape.param(&mean), &tape.param(&log_std))?;
    let u = tape.param(&mean);
    let squashed = pi.log_prob_per_dim(&u)?.to_vec()?;
    let plain = normal.log_prob_per_dim(&u)?.to_vec()?;
    for ((&u, s), p) in us.iter().zip(squashed).zip(plain) {
        let naive = p - (1.0 - u.tanh().powi(2)).ln();
        assert!((s - naive).abs() < 1e-12, "u = {u}: {s} vs {naive}");
    }
    Ok(())
}

#[test]
fn softplus_is_stable_on_both_sides() -> Result<()> {
    let x = param(vec![-1000.0f32, -30.0, 0.0, 30.0, 1000.0], &[5]);
    let tape = Tape::new();
    let y = softplus(&tape.param(&x))?;
    let v = y.to_vec()?;
    assert_eq!(v[0], 0.0);
    assert!((v[1] / (-30.0f32).exp() - 1.0).abs() < 1e-6, "{}", v[1]);
    assert_eq!(v[2], std::f32::consts::LN_2);
    assert_eq!(v[3], 30.0);
    assert_eq!(v[4], 1000.0);
    let g = tape.gradient(&y.sum_all()?, &[&x])?.get(&x)?.to_vec()?;
    assert_eq!(g[0], 0.0);
    assert_eq!(g[2], 0.5);
    assert_eq!(g[4], 1.0);
    Ok(())
}

#[test]
fn bernoulli_matches_the_closed_forms() -> Result<()> {
    let xs = [-50.0f64, -2.0, 0.0, 0.5, 50.0];
    let logits = param(xs.to_vec(), &[1, 5]);
    let tape = Tape::new();
    let pi = Bernoulli::from_logits(&tape.param(&logits))?;
    let ones = tape.constant(&Tensor::ones([1, 5])?);
    let zeros = tape.constant(&Tensor::zeros([1, 5])?);
    let lp1 = pi.log_prob_per_dim(&ones)?.to_vec()?;
    let lp0 = pi.log_prob_per_dim(&zeros)?.to_vec()?;
    let h = pi.entropy_per_dim()?.to_vec()?;
    for (i, &x) in xs.iter().enumerate() {
        let p = 1.0 / (1.0 + (-x).exp());
        assert!(
            (lp1[i].exp() - p).abs() < 1e-12 && lp1[i].is_finite(),
            "{x}"
        );
        assert!(
            (lp0[i].exp() - (1.0 - p)).abs() < 1e-12 && lp0[i].is_finite(),
            "{x}"
        );
        let naive = if p > 0.0 && p < 1.0 {
            -(p * p.ln() + (1.0 - p) * (1.0 - p).ln())
        } else {
            0.0
        };
        assert!((h[i] - naive).abs() < 1e-12, "{x}: {} vs {naive}", h[i]);
    }
    assert_eq!(pi.mode()?.to_vec()?, [0.0, 0.0, 0.0, 1.0, 1.0]);
    let total = pi.log_prob(&ones)?.to_scalar()?;
    assert_eq!(total, lp1.iter().sum::<f64>());
    Ok(())
}

#[test]
fn normal_log_prob_and_entropy_sum_over_the_action_dimension() -> Result<()> {
    let mean = param(vec![0.0f64, 1.0, -1.0, 2.0, 0.5, 0.0], &[2, 3]);
    let log_std = param(vec![0.1f64, -0.2, 0.3], &[3]);
    let tape = Tape::new();
    let pi = Normal::from_log_std(&tape.param(&mean), &tape.param(&log_std))?;
    let actions = tape.constant(&Tensor::from_vec(
        vec![0.3, 0.9, -2.0, 2.0, 0.0, 1.0],
        [2, 3],
    )?);
    let per_dim = pi.log_prob_per_dim(&actions)?.to_vec()?;
    let summed = pi.log_prob(&actions)?.to_vec()?;
    let m = mean.value().to_vec()?;
    let a = actions.to_vec()?;
    let s = [0.1f64, -0.2, 0.3];
    for i in 0..6 {
        let sd = s[i % 3].exp();
        let density = (-(a[i] - m[i]).powi(2) / (2.0 * sd * sd)).exp()
            / (sd * (2.0 * std::f64::consts::PI).sqrt());
        assert!((per_dim[i] - density.ln()).abs() < 1e-12);
    }
    assert!((summed[0] - per_dim[..3].iter().sum::<f64>()).abs() < 1e-12);
    let h = pi.entropy()?.to_vec()?;
    let expected: f64 = s
        .iter()
        .map(|l| 0.5 + 0.5 * (2.0 * std::f64::consts::PI).ln() + l)
        .sum();
    assert!((h[0] - expected).abs() < 1e-12 && (h[1] - expected).abs() < 1e-12);
    // from_std gives the same distribution.
    let std = tape.constant(&Tensor::from_vec(s.iter().map(|l| l.exp()).collect(), [3])?);
    let by_std = Normal::from_std(&tape.param(&mean), &std)?;
    let other = by_std.log_prob(&actions)?.to_vec()?;
    assert!((other[1] - summed[1]).abs() < 1e-12);
    Ok(())
}

fn message(e: Error) -> String {
    e.to_string()
}

#[test]
fn bad_input_is_an_error_that_names_function_argument_and_what_came() -> Result<()> {
    let tape = Tape::<f32>::new();
    let v = |values: Vec<f32>, shape: &[usize]| -> Var<'_, f32> {
        tape.constant(&Tensor::from_vec(values, shape.to_vec()).unwrap())
    };
    let err = Categorical::from_logits(&v(vec![0.0; 3], &[3]))
        .map(|_| ())
        .unwrap_err();
    assert!(
        message(err.clone()).contains("Categorical::from_logits"),
        "{err}"
    );
    assert!(message(err.clone()).contains("`logits`") && message(err).contains("[3]"));
    let err = Categorical::from_logits(&v(vec![], &[2, 0]))
        .map(|_| ())
        .unwrap_err();
    assert!(message(err).contains("A >= 1"));

    let pi = Categorical::from_logits(&v(vec![0.0; 6], &[2, 3]))?;
    let err = message(pi.log_prob(&[0, 3]).unwrap_err());
    assert!(
        err.contains("Categorical::log_prob")
            && err.contains("`actions`")
            && err.contains("below A = 3")
            && err.contains("3 at batch entry 1"),
        "{err}"
    );
    let err = message(pi.log_prob(&[0]).unwrap_err());
    assert!(
        err.contains("2 action indices") && err.contains("got 1 indices"),
        "{err}"
    );

    let mean = v(vec![0.0; 6], &[2, 3]);
    let err = message(Normal::from_log_std(&mean, &v(vec![0.0; 2], &[2])).unwrap_err());
    assert!(
        err.contains("Normal::from_log_std") && err.contains("`log_std`") && err.contains("[2]"),
        "{err}"
    );
    let pi = Normal::from_log_std(&mean, &v(vec![0.0; 3], &[3]))?;
    let err = message(pi.log_prob(&v(vec![0.0; 3], &[1, 3])).unwrap_err());
    assert!(
        err.contains("Normal::log_prob") && err.contains("`actions`"),
        "{err}"
    );
    let err = message(pi.rsample(&Tensor::zeros([2, 2])?).unwrap_err());
    assert!(
        err.contains("Normal::rsample") && err.contains("`eps`"),
        "{err}"
    );
    let err =
        message(TanhNormal::from_std(&v(vec![0.0; 3], &[3]), &v(vec![1.0], &[1])).unwrap_err());
    assert!(
        err.contains("TanhNormal::from_std") && err.contains("`mean`"),
        "{err}"
    );

    let pi = Bernoulli::from_logits(&v(vec![0.0; 2], &[1, 2]))?;
    let err = message(pi.log_prob(&v(vec![1.0, 0.5], &[1, 2])).unwrap_err());
    assert!(
        err.contains("Bernoulli::log_prob")
            && err.contains("0 or 1")
            && err.contains("0.5 at flat index 1"),
        "{err}"
    );

    let nan = Categorical::from_logits(&v(vec![f32::NAN, 0.0], &[1, 2]))?;
    let err = message(nan.sample(&mut Rng::new(0, "t")).unwrap_err());
    assert!(
        err.contains("Categorical::sample") && err.contains("`logits`"),
        "{err}"
    );
    let nan = Bernoulli::from_logits(&v(vec![f32::NAN], &[1, 1]))?;
    assert!(nan.sample(&mut Rng::new(0, "t")).is_err());

    // Parameters of two tapes do not mix.
    let other = Tape::<f32>::new();
    let foreign = other.constant(&Tensor::zeros([3])?);
    let err = message(Normal::from_log_std(&mean, &foreign).unwrap_err());
    assert!(
        err.contains("`log_std`") && err.contains("another tape"),
        "{err}"
    );
    let normal = Normal::from_log_std(&mean, &v(vec![0.0; 3], &[3]))?;
    let err = message(
        normal
            .log_prob(&other.constant(&Tensor::zeros([2, 3])?))
            .unwrap_err(),
    );
    assert!(
        err.contains("Normal::log_prob") && err.contains("`actions`"),
        "{err}"
    );
    Ok(())
}

#[test]
fn an_empty_batch_gives_empty_results() -> Result<()> {
    let tape = Tape::<f32>::new();
    let pi = Categorical::from_logits(&tape.constant(&Tensor::zeros([0, 3])?))?;
    assert_eq!(pi.log_prob(&[])?.to_vec()?, Vec::<f32>::new());
    assert_eq!(pi.entropy()?.dims(), [0]);
    assert_eq!(pi.sample(&mut Rng::new(0, "t"))?, Vec::<usize>::new());
    Ok(())
}

#[test]
fn categorical_samples_are_seeded_and_follow_the_probabilities() -> Result<()> {
    let probs = [0.1f64, 0.2, 0.3, 0.4];
    let row: Vec<f64> = probs.iter().map(|p| p.ln()).collect();
    let rows = 5_000;
    let logits: Vec<f64> = row.iter().copied().cycle().take(rows * 4).collect();
    let tape = Tape::new();
    let pi = Categorical::from_logits(&tape.constant(&Tensor::from_vec(logits, [rows, 4])?))?;
    let draws = pi.sample(&mut Rng::new(11, "categorical"))?;
    assert_eq!(draws, pi.sample(&mut Rng::new(11, "categorical"))?);
    assert_ne!(draws, pi.sample(&mut Rng::new(12, "categorical"))?);
    let mut counts = [0usize; 4];
    for &a in &draws {
        counts[a] += 1;
    }
    for (count, p) in counts.iter().zip(probs) {
        // 4 standard deviations of a binomial count.
        let sd = (rows as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (*count as f64 - rows as f64 * p).abs() < 4.0 * sd,
            "{counts:?}"
        );
    }
    assert_eq!(pi.mode()?[..3], [3, 3, 3]);
    Ok(())
}

#[test]
fn bernoulli_and_normal_samples_are_seeded_and_have_their_moments() -> Result<()> {
    let n = 20_000;
    let tape = Tape::new();
    let logits = tape.constant(&Tensor::full([n, 1], 0.4f64.ln() - 0.6f64.ln())?);
    let pi = Bernoulli::from_logits(&logits)?;
    let draws = pi.sample(&mut Rng::new(5, "bernoulli"))?.to_vec()?;
    assert_eq!(draws, pi.sample(&mut Rng::new(5, "bernoulli"))?.to_vec()?);
    let mean = draws.iter().sum::<f64>() / n as f64;
    assert!(
        (mean - 0.4).abs() < 4.0 * (0.24 / n as f64).sqrt(),
        "{mean}"
    );

    let mu = tape.constant(&Tensor::full([n, 1], 1.5)?);
    let log_std = tape.constant(&Tensor::full([1], 0.5f64.ln())?);
    let normal = Normal::from_log_std(&mu, &log_std)?;
    let x = normal.sample(&mut Rng::new(5, "normal"))?.to_vec()?;
    let again = normal.rsample_rng(&mut Rng::new(5, "normal"))?.to_vec()?;
    assert!(
        x.iter()
            .zip(&again)
            .all(|(a, b)| a.to_bits() == b.to_bits())
    );
    let m = x.iter().sum::<f64>() / n as f64;
    let var = x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1) as f64;
    assert!((m - 1.5).abs() < 4.0 * 0.5 / (n as f64).sqrt(), "{m}");
    assert!((var.sqrt() - 0.5).abs() < 0.02, "{var}");

    let squashed = TanhNormal::from_log_std(&mu, &log_std)?;
    let a = squashed.sample(&mut Rng::new(5, "normal"))?.to_vec()?;
    assert!(
        a.iter()
            .zip(&x)
            .all(|(a, x)| a.to_bits() == x.tanh().to_bits() || (a - x.tanh()).abs() < 1e-15)
    );
    let s = squashed.rsample_rng(&mut Rng::new(5, "normal"))?;
    assert_eq!(s.action.to_vec()?, a);
    Ok(())
}

#[test]
fn one_stream_per_row_draws_what_each_row_alone_draws() -> Result<()> {
    let rows = 5;
    let logits: Vec<f32> = (0..rows * 3).map(|i| ((i * 7) % 5) as f32 * 0.4).collect();
    let tape = Tape::new().no_grad();
    let logits = tape.constant(&Tensor::from_vec(logits, [rows, 3])?);
    let pi = Categorical::from_logits(&logits)?;
    let stream = |row: usize| Rng::new(11, &format!("env{row}"));
    let mut streams: Vec<Rng> = (0..rows).map(stream).collect();
    let mut together = Vec::new();
    for _ in 0..40 {
        together.push(pi.sample_each(&mut streams)?);
    }
    for row in 0..rows {
        let alone = Categorical::from_logits(&logits.narrow(0, row, 1)?)?;
        let mut rng = stream(row);
        for draws in &together {
            assert_eq!(draws[row], alone.sample(&mut rng)?[0], "row {row}");
        }
    }
    assert!(
        together.iter().any(|d| d[0] != together[0][0]),
        "the draws vary"
    );

    let before: Vec<f64> = streams.clone().iter_mut().map(Rng::uniform_f64).collect();
    let err = message(pi.sample_each(&mut streams[..rows - 1]).unwrap_err());
    assert!(
        err.contains("Categorical::sample_each") && err.contains("`rngs`"),
        "{err}"
    );
    let after: Vec<f64> = streams.iter_mut().map(Rng::uniform_f64).collect();
    assert_eq!(before, after, "a refused call advances no generator");
    Ok(())
}
