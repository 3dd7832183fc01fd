//! Gradients against central finite differences in f64, and the same bits at every
//! thread count.

use proptest::prelude::*;
use rlgrad_autodiff::nn::Module;
use rlgrad_autodiff::{Param, Tape, Var};
use rlgrad_core::{Cpu, Par, Result, Rng};
use rlgrad_distributions::{Bernoulli, Categorical, Normal, TanhNormal, softplus};
use rlgrad_tensor::Tensor;
use rlgrad_testkit::strategies::{self, config};

/// The loss of one distribution for the parameter values `params` (one `Var` each), with
/// fixed data drawn from `seed`.
type Loss = for<'t> fn(&[Var<'t, f64>], &Data) -> Result<Var<'t, f64>>;

/// The batch, the action count and the data a loss needs besides its parameters.
#[derive(Debug, Clone)]
struct Data {
    batch: usize,
    actions: usize,
    indices: Vec<usize>,
    binary: Vec<f64>,
    continuous: Vec<f64>,
    eps: Vec<f64>,
    weights: Vec<Vec<f64>>,
}

impl Data {
    fn new(batch: usize, actions: usize, seed: u64) -> Self {
        let mut rng = Rng::new(seed, "data");
        let n = batch * actions;
        let mut normals = |k: usize| (0..k).map(|_| rng.normal_f64()).collect::<Vec<f64>>();
        let continuous = normals(n);
        let eps = normals(n);
        let weights = (0..3).map(|_| normals(n)).collect();
        let mut rng = Rng::new(seed, "indices");
        Self {
            batch,
            actions,
            indices: (0..batch)
                .map(|_| rng.below(actions as u64) as usize)
                .collect(),
            binary: (0..n).map(|_| rng.below(2) as f64).collect(),
            continuous,
            eps,
            weights,
        }
    }

    fn matrix(&self, values: &[f64]) -> Tensor<f64> {
        Tensor::from_vec(values.to_vec(), [self.batch, self.actions]).unwrap()
    }

    /// `sum(w_k * x)` with the first entries of weight vector `k`.
    fn weighted<'t>(&self, k: usize, x: &Var<'t, f64>) -> Result<Var<'t, f64>> {
        let n = x.value().numel();
        let w = Tensor::from_vec(self.weights[k][..n].to_vec(), x.shape().clone())?;
        x.mul(&x.tape().constant(&w))?.sum_all()
    }
}

fn categorical<'t>(p: &[Var<'t, f64>], d: &Data) -> Result<Var<'t, f64>> {
    let pi = Categorical::from_logits(&p[0])?;
    d.weighted(0, &pi.log_prob(&d.indices)?)?
        .add(&d.weighted(1, &pi.entropy()?)?)?
        .add(&d.weighted(2, &pi.probs()?)?)
}

fn normal<'t>(p: &[Var<'t, f64>], d: &Data) -> Result<Var<'t, f64>> {
    // log_std is a state-independent [A] parameter: the broadcast's backward is checked too.
    let pi = Normal::from_log_std(&p[0], &p[1])?;
    let actions = p[0].tape().constant(&d.matrix(&d.continuous));
    d.weighted(0, &pi.log_prob(&actions)?)?
        .add(&d.weighted(1, &pi.entropy()?)?)?
        .add(&d.weighted(2, &pi.rsample(&d.matrix(&d.eps))?)?)
}

fn normal_from_std<'t>(p: &[Var<'t, f64>], d: &Data) -> Result<Var<'t, f64>> {
    let pi = Normal::from_std(&p[0], &p[1].exp()?)?;
    let actions = p[0].tape().constant(&d.matrix(&d.continuous));
    d.weighted(0, &pi.log_prob_per_dim(&actions)?)?
        .add(&d.weighted(1, &pi.entropy_per_dim()?)?)
}

fn tanh_normal<'t>(p: &[Var<'t, f64>], d: &Data) -> Result<Var<'t, f64>> {
    let pi = TanhNormal::from_log_std(&p[0], &p[1])?;
    let sample = pi.rsample(&d.matrix(&d.eps))?;
    d.weighted(0, &sample.action)?
        .add(&d.weighted(1, &sample.log_prob)?)?
        .add(&d.weighted(2, &pi.log_prob_per_dim(&sample.pre_tanh)?)?)
}

fn bernoulli<'t>(p: &[Var<'t, f64>], d: &Data) -> Result<Var<'t, f64>> {
    let pi = Bernoulli::from_logits(&p[0])?;
    let actions = p[0].tape().constant(&d.matrix(&d.binary));
    d.weighted(0, &pi.log_prob(&actions)?)?
        .add(&d.weighted(1, &pi.entropy()?)?)?
        .add(&d.weighted(2, &softplus(&p[0])?)?)
}

/// `(name, loss, whether the second parameter is `[A]` rather than `[B, A]`)`.
const LOSSES: &[(&str, Loss, Option<bool>)] = &[
    ("categorical", categorical, None),
    ("bernoulli", bernoulli, None),
    ("normal", normal, Some(true)),
    ("normal_from_std", normal_from_std, Some(false)),
    ("tanh_normal", tanh_normal, Some(false)),
];

fn params(d: &Data, second: Option<bool>, seed: u64, scale: f64) -> Vec<Param<f64>> {
    let mut rng = Rng::new(seed, "params");
    let mut draw = |shape: Vec<usize>, s: f64| {
        let n = shape.iter().product();
        let values = (0..n).map(|_| s * rng.normal_f64()).collect();
        Param::new("p", Tensor::from_vec(values, shape).unwrap()).unwrap()
    };
    let mut out = vec![draw(vec![d.batch, d.actions], scale)];
    match second {
        Some(true) => out.push(draw(vec![d.actions], 0.5)),
        Some(false) => out.push(draw(vec![d.batch, d.actions], 0.5)),
        None => {}
    }
    out
}

fn evaluate(loss: Loss, values: &[Tensor<f64>], d: &Data) -> f64 {
    let tape = Tape::new().no_grad();
    let vars: Vec<_> = values.iter().map(|v| tape.constant(v)).collect();
    loss(&vars, d).unwrap().to_scalar().unwrap()
}

proptest! {
    #![proptest_config(config(24))]

    #[test]
    fn prop_gradients_match_finite_differences(
        batch in 1usize..4,
        actions in 1usize..5,
        seed in any::<u64>(),
        scale in prop_oneof![Just(1.0f64), Just(4.0)],
    ) {
        let d = Data::new(batch, actions, seed);
        for &(name, loss, second) in LOSSES {
            let ps = params(&d, second, seed, scale);
            let tape = Tape::new();
            let vars: Vec<_> = ps.iter().map(|p| tape.param(p)).collect();
            let value = loss(&vars, &d).unwrap();
            let sources: Vec<&dyn Module<f64>> = ps.iter().map(|p| p as &dyn Module<f64>).collect();
            let grads = tape.gradient(&value, &sources).unwrap();
            let base: Vec<Tensor<f64>> = ps.iter().map(|p| p.value().clone()).collect();
            let h = 1e-6;
            for (k, p) in ps.iter().enumerate() {
                let analytic = grads.get(p).unwrap().to_vec().unwrap();
                let x = base[k].to_vec().unwrap();
                for i in 0..x.len() {
                    let shifted = |delta: f64| {
                        let mut values = base.clone();
                        let mut xi = x.clone();
                        xi[i] += delta;
                        values[k] = Tensor::from_vec(xi, base[k].shape().clone()).unwrap();
                        evaluate(loss, &values, &d)
                    };
                    let numeric = (shifted(h) - shifted(-h)) / (2.0 * h);
                    prop_assert!(
                        (analytic[i] - numeric).abs() <= 1e-5 * (1.0 + numeric.abs()),
                        "{name}: parameter {k}, element {i}: tape {} vs finite differences {numeric}",
                        analytic[i]
                    );
                }
            }
        }
    }
}

/// Every value, sample and gradient of every distribution on a batch large enough that
/// each kernel splits its work (`[4096, 16]`), on a `Cpu` with `par`, as bits.
fn everything(par: Par) -> Vec<Vec<u64>> {
    let cpu = Cpu::new(par);
    let d = Data::new(4096, 16, 2027);
    let mut out = Vec::new();
    for &(_, loss, second) in LOSSES {
        let ps: Vec<Param<f64>> = params(&d, second, 9, 3.0)
            .into_iter()
            .map(|p| {
                let t = p.value();
                Param::new(
                    "p",
                    Tensor::from_vec_on(&cpu, t.to_vec().unwrap(), t.shape().clone()).unwrap(),
                )
                .unwrap()
            })
            .collect();
        let tape = Tape::new_on(&cpu);
        let vars: Vec<_> = ps.iter().map(|p| tape.param(p)).collect();
        let value = loss(&vars, &d).unwrap();
        out.push(vec![value.to_scalar().unwrap().to_bits()]);
        let sources: Vec<&dyn Module<f64>> = ps.iter().map(|p| p as &dyn Module<f64>).collect();
        let grads = tape.gradient(&value, &sources).unwrap();
        for p in &ps {
            out.push(
                grads
                    .get(p)
                    .unwrap()
                    .to_vec()
                    .unwrap()
                    .iter()
                    .map(|g| g.to_bits())
                    .collect(),
            );
        }
    }
    // Per-row values and samples of the f32 types.
    let logits =
        Tensor::<f32>::rand_normal_on(&cpu, [4096, 16], 0.0, 3.0, &mut Rng::new(1, "logits"))
            .unwrap();
    let tape = Tape::new_on(&cpu);
    let pi = Categorical::from_logits(&tape.constant(&logits)).unwrap();
    let bits = |v: Vec<f32>| {
        v.iter()
            .map(|x| u64::from(x.to_bits()))
            .collect::<Vec<u64>>()
    };
    out.push(bits(pi.entropy().unwrap().to_vec().unwrap()));
    out.push(
        pi.sample(&mut Rng::new(1, "sample"))
            .unwrap()
            .iter()
            .map(|&a| a as u64)
            .collect(),
    );
    let normal = TanhNormal::from_log_std(
        &tape.constant(&logits),
        &tape.constant(&(&logits * 0.1f32).unwrap()),
    )
    .unwrap();
    let sample = normal.rsample_rng(&mut Rng::new(1, "eps")).unwrap();
    out.push(bits(sample.log_prob.to_vec().unwrap()));
    out.push(bits(sample.action.to_vec().unwrap()));
    out
}

#[test]
fn values_samples_and_gradients_have_the_same_bits_at_every_thread_count() {
    let runs = strategies::in_thread_pools(&[1, 2, 4], everything);
    let serial = everything(Par::Seq);
    for run in &runs {
        assert!(run == &serial, "a thread count changed the bits");
    }
}
