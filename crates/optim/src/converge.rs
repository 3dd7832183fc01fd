//! The convergence test of TensorFlow's "optimizers with Core APIs" guide: minimize
//! `L(x) = 2x^4 + 3x^3 + 2` from `x = 2` in f32 with gradient descent, momentum and Adam,
//! and report whether each run converged, exploded or hit the iteration limit.
//!
//! Iteration `i` (from 1): `g = L'(x) = 8x^3 + 9x^2` (computed in f64 and rounded once to
//! f32, which reproduces TensorFlow's `pow`-based gradient bit for bit); if `g` is NaN the
//! run exploded at `i`; otherwise the optimizer steps, and if the new `x` equals the old one
//! the run converged at `i`. `cargo xtask converge` plots the paths.

use rlgrad_core::{Float, Result};

use crate::rule::{Rule, StepRule};
use crate::{Momentum, MomentumFlavor, Optimizer, Param, Sgd};

/// `L(x) = 2x^4 + 3x^3 + 2`.
pub fn loss(x: f64) -> f64 {
    2.0 * x.powi(4) + 3.0 * x.powi(3) + 2.0
}

/// `L'(x) = 8x^3 + 9x^2` at an f32 `x`, rounded once to f32.
pub fn gradient(x: f32) -> f32 {
    let x = f64::from(x);
    (8.0 * x.powi(3) + 9.0 * x.powi(2)) as f32
}

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// An update left `x` unchanged.
    Converged,
    /// The gradient became NaN.
    Exploded,
    /// Neither happened within the iteration limit.
    HitLimit,
}

impl Outcome {
    /// The parity vectors' code: 0 converged, 1 exploded, 2 hit the limit.
    pub fn code(self) -> u8 {
        match self {
            Self::Converged => 0,
            Self::Exploded => 1,
            Self::HitLimit => 2,
        }
    }
}

/// The optimizers of the guide.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GuideOptimizer {
    /// `x -= lr * g`.
    GradientDescent,
    /// The Core-APIs momentum: `change = lr * g + mu * change; x -= change`.
    Momentum {
        /// `mu`.
        momentum: f64,
    },
    /// The guide's Adam, a [`SeedAdam`] rule.
    Adam(SeedAdam),
}

/// One run's result.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// How it ended.
    pub outcome: Outcome,
    /// The iteration it ended at (`max_iters` when it hit the limit).
    pub iterations: usize,
    /// `x` when it stopped.
    pub final_x: f32,
    /// `x` after each update.
    pub path: Vec<f32>,
    /// The effective step size of each update (Adam's `alpha_t`, else the learning rate).
    pub effective_lr: Vec<f64>,
}

/// The Adam of the TF guide's `tf.Module`, a custom [`Rule`] (and an example of one):
/// `m = b1 m + (1 - b1) g`, `s = b2 s + (1 - b2) g^2`,
/// `x -= lr ((m / (1 - b1^t)) / (sqrt(s / (1 - b2^t)) + ep))`, with `1 - b^t` computed in
/// f64 and rounded to the element type. It differs from both PyTorch's and Keras' Adam in
/// where the bias corrections and epsilon go.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeedAdam {
    /// `beta_1`.
    pub beta_1: f64,
    /// `beta_2`.
    pub beta_2: f64,
    /// `ep`.
    pub ep: f64,
}

impl Default for SeedAdam {
    fn default() -> Self {
        Self {
            beta_1: 0.9,
            beta_2: 0.999,
            ep: 1e-7,
        }
    }
}

impl<T: Float> Rule<T> for SeedAdam {
    fn name(&self) -> &'static str {
        "seed_adam"
    }
    fn slot_names(&self) -> Vec<&'static str> {
        vec!["m", "s"]
    }
    fn effective_lr(&self, step: u64, lr: f64) -> f64 {
        let t = step.min(i32::MAX as u64) as i32;
        lr * (1.0 - self.beta_2.powi(t)).sqrt() / (1.0 - self.beta_1.powi(t))
    }
    fn step(&self, step: u64, lr: f64) -> StepRule<'_, T> {
        let t = step.min(i32::MAX as u64) as i32;
        let (b1, b2) = (T::from_f64(self.beta_1), T::from_f64(self.beta_2));
        let (one_minus_b1, one_minus_b2) = (
            T::from_f64(1.0 - self.beta_1),
            T::from_f64(1.0 - self.beta_2),
        );
        let bc1 = T::from_f64(1.0 - self.beta_1.powi(t));
        let bc2 = T::from_f64(1.0 - self.beta_2.powi(t));
        let (lr, ep) = (T::from_f64(lr), T::from_f64(self.ep));
        StepRule::Custom(Box::new(
            move |x: &mut [T], g: &[T], slots: &mut [&mut [T]]| {
                let [m, s] = slots else { return };
                for (((x, &g), m), s) in x.iter_mut().zip(g).zip(m.iter_mut()).zip(s.iter_mut()) {
                    *m = b1 * *m + one_minus_b1 * g;
                    *s = b2 * *s + one_minus_b2 * (g * g);
                    *x = *x - lr * ((*m / bc1) / ((*s / bc2).sqrt() + ep));
                }
            },
        ))
    }
}

/// Runs the guide's test: at most `max_iters` iterations from `init` with learning rate `lr`.
///
/// ```
/// use rlgrad_optim::converge::{run, GuideOptimizer, Outcome};
/// let gd = run(GuideOptimizer::GradientDescent, 0.1, 2.0, 2000)?;
/// assert_eq!(gd.outcome, Outcome::Exploded); // lr 0.1 overshoots
/// # Ok::<(), rlgrad_optim::Error>(())
/// ```
pub fn run(optimizer: GuideOptimizer, lr: f64, init: f32, max_iters: usize) -> Result<Run> {
    let mut opt: Optimizer<f32> = match optimizer {
        GuideOptimizer::GradientDescent => Optimizer::new(Sgd::default(), lr)?,
        GuideOptimizer::Momentum { momentum } => Optimizer::new(
            Momentum {
                momentum,
                ..Momentum::new(MomentumFlavor::Core)
            },
            lr,
        )?,
        GuideOptimizer::Adam(adam) => Optimizer::new(adam, lr)?,
    };
    let mut x = [init];
    let (mut path, mut effective_lr) = (Vec::new(), Vec::new());
    for i in 1..=max_iters {
        let g = gradient(x[0]);
        if g.is_nan() {
            return Ok(Run {
                outcome: Outcome::Exploded,
                iterations: i,
                final_x: x[0],
                path,
                effective_lr,
            });
        }
        let before = x[0];
        opt.step(&mut [Param {
            name: "x",
            value: &mut x,
            grad: &[g],
        }])?;
        path.push(x[0]);
        effective_lr.push(opt.effective_lr(0)?);
        if x[0] == before {
            return Ok(Run {
                outcome: Outcome::Converged,
                iterations: i,
                final_x: x[0],
                path,
                effective_lr,
            });
        }
    }
    Ok(Run {
        outcome: Outcome::HitLimit,
        iterations: max_iters,
        final_x: x[0],
        path,
        effective_lr,
    })
}
