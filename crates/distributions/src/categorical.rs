//! The categorical distribution over `A` actions, one row of logits per batch entry.

use rlgrad_autodiff::Var;
use rlgrad_core::{Cpu, Error, Float, Result, Rng, check};
use rlgrad_tensor::TensorDevice;

use crate::check::matrix;

/// A batch of categorical distributions over `A` actions, from unnormalized logits
/// `[B, A]` (PyTorch's `Categorical(logits=...)`).
///
/// The logits are normalized once, at construction, by the stable log-softmax
/// `(x - max) - ln(sum(exp(x - max)))`: a row whose largest logit leads by 30 gives the
/// others log-probabilities near -30, not `-inf`. Everything else derives from these
/// log-probabilities `lp`: `probs = exp(lp)`, `log_prob(a) = lp[b, a_b]` and
/// `entropy = -sum_a probs * max(lp, MIN)`, where `MIN` is the most negative finite value
/// (PyTorch's clamp): a logit of `-inf` (an action masked out) gives probability 0 and
/// contributes 0 to the entropy and its gradient, not NaN.
///
/// ```
/// use rlgrad_autodiff::{Param, Tape};
/// use rlgrad_distributions::Categorical;
/// use rlgrad_tensor::Tensor;
/// let logits = Param::new("logits", Tensor::from_vec(vec![0.0f64, 0.0, 1.0, 3.0], [2, 2])?)?;
/// let tape = Tape::new();
/// let pi = Categorical::from_logits(&tape.param(&logits))?;
/// let log_prob = pi.log_prob(&[1, 1])?;
/// assert_eq!(log_prob.to_vec()?[0], -std::f64::consts::LN_2);
/// assert_eq!(pi.mode()?, [0, 1]);
/// let grads = tape.gradient(&log_prob.sum_all()?, &[&logits])?;
/// assert_eq!(grads.get(&logits)?.to_vec()?[..2], [-0.5, 0.5]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Categorical<'t, T: Float = f32, D: TensorDevice<T> = Cpu> {
    log_probs: Var<'t, T, D>,
}

impl<'t, T: Float, D: TensorDevice<T>> Categorical<'t, T, D> {
    /// The distributions of the rows of `logits`, `[B, A]` with `A >= 1`.
    pub fn from_logits(logits: &Var<'t, T, D>) -> Result<Self> {
        let function = "Categorical::from_logits";
        matrix(function, "logits", logits)?;
        let log_probs = logits.log_softmax(1).map_err(|e| e.in_function(function))?;
        Ok(Self { log_probs })
    }

    /// The batch size `B`.
    pub fn batch(&self) -> usize {
        self.log_probs.dims()[0]
    }

    /// The number of actions `A`.
    pub fn actions(&self) -> usize {
        self.log_probs.dims()[1]
    }

    /// The normalized log-probabilities `[B, A]` (PyTorch's `Categorical.logits`).
    pub fn log_probs(&self) -> &Var<'t, T, D> {
        &self.log_probs
    }

    /// The probabilities `[B, A]`, `exp` of [`Categorical::log_probs`].
    pub fn probs(&self) -> Result<Var<'t, T, D>> {
        self.log_probs
            .exp()
            .map_err(|e| e.in_function("Categorical::probs"))
    }

    /// The log-probability of action `actions[b]` in row `b`, `[B]`. An error when
    /// `actions` does not hold `B` indices or an index is not below `A`.
    pub fn log_prob(&self, actions: &[usize]) -> Result<Var<'t, T, D>> {
        let function = "Categorical::log_prob";
        let (batch, count) = (self.batch(), self.actions());
        if actions.len() != batch {
            return Err(Error::shape(
                function,
                "actions",
                format_args!("{batch} action indices, one per row"),
                format_args!("{} indices", actions.len()),
            ));
        }
        if let Some((b, &a)) = actions.iter().enumerate().find(|&(_, &a)| a >= count) {
            return Err(Error::out_of_range(
                function,
                "actions",
                format_args!("action indices below A = {count}"),
                format_args!("{a} at batch entry {b}"),
            ));
        }
        self.log_probs
            .gather(1, actions, [batch, 1])
            .and_then(|lp| lp.reshape([batch]))
            .map_err(|e| e.in_function(function))
    }

    /// The entropy of each row, `[B]`: `-sum_a p * max(lp, MIN)` summed in action order.
    pub fn entropy(&self) -> Result<Var<'t, T, D>> {
        let function = "Categorical::entropy";
        let clamped = self.log_probs.clamp(T::min_value(), T::max_value())?;
        self.probs()?
            .mul(&clamped)
            .and_then(|p_lp| p_lp.sum(1, false))
            .and_then(|s| s.neg())
            .map_err(|e| e.in_function(function))
    }

    /// The most likely action of each row (the first one on ties; NaN is never chosen
    /// over a number).
    pub fn mode(&self) -> Result<Vec<usize>> {
        let values = self.log_probs.to_vec()?;
        Ok(values
            .chunks(self.actions())
            .map(|row| {
                let mut best = 0;
                for (a, &v) in row.iter().enumerate() {
                    if v > row[best] || (row[best].is_nan() && !v.is_nan()) {
                        best = a;
                    }
                }
                best
            })
            .collect())
    }

    /// One action per row drawn from `rng`, `B` indices.
    ///
    /// Row by row in batch order, one `u = rng.uniform_f64()` each: the first action whose
    /// cumulative probability (the `T` probabilities summed in f64 in action order)
    /// exceeds `u`; when rounding leaves the total at or below `u`, the last action of
    /// nonzero probability. An action of probability 0 is never drawn. So the draws
    /// depend on the seed and the bits of the probabilities only (the same at any thread
    /// count). An error when a probability is not finite (NaN logits).
    pub fn sample(&self, rng: &mut Rng) -> Result<Vec<usize>> {
        self.sample_rows("Categorical::sample", |_| rng.uniform_f64())
    }

    /// One action per row, row `b` drawn from the `b`-th generator of `rngs` by the rule
    /// of [`Categorical::sample`]. With one stream per environment (seeded by its global
    /// index), an environment's actions do not depend on which others share its batch:
    /// the same however environments are spread over workers or batched.
    ///
    /// An error when `rngs` yields fewer than `B` generators (extra ones are not used) or
    /// a probability is not finite; on an error no generator has advanced.
    ///
    /// ```
    /// use rlgrad_autodiff::Tape;
    /// use rlgrad_core::Rng;
    /// use rlgrad_distributions::Categorical;
    /// use rlgrad_tensor::Tensor;
    /// let tape = Tape::new().no_grad();
    /// let logits = tape.constant(&Tensor::from_vec(vec![0.0f32, 1.0, 2.0, 0.0, 0.0, 0.0], [2, 3])?);
    /// let pi = Categorical::from_logits(&logits)?;
    /// let mut streams: Vec<Rng> = (0..2).map(|env| Rng::new(7, &format!("env{env}"))).collect();
    /// let both = pi.sample_each(&mut streams)?;
    /// let second_alone = Categorical::from_logits(&logits.narrow(0, 1, 1)?)?
    ///     .sample(&mut Rng::new(7, "env1"))?;
    /// assert_eq!(both[1], second_alone[0]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn sample_each<'r>(
        &self,
        rngs: impl IntoIterator<Item = &'r mut Rng>,
    ) -> Result<Vec<usize>> {
        let function = "Categorical::sample_each";
        let batch = self.batch();
        let mut rngs: Vec<&mut Rng> = rngs.into_iter().take(batch).collect();
        if rngs.len() < batch {
            return Err(Error::shape(
                function,
                "rngs",
                format_args!("{batch} generators, one per row"),
                format_args!("{}", rngs.len()),
            ));
        }
        self.sample_rows(function, |b| rngs[b].uniform_f64())
    }

    /// The draws of [`Categorical::sample`], row `b` with the uniform `uniform(b)`; no
    /// uniform is drawn when a probability is not finite.
    fn sample_rows(
        &self,
        function: &'static str,
        mut uniform: impl FnMut(usize) -> f64,
    ) -> Result<Vec<usize>> {
        let probs = self.log_probs.value().exp()?.to_vec()?;
        check::finite(function, "logits", &probs)?;
        Ok(probs
            .chunks(self.actions())
            .enumerate()
            .map(|(b, row)| {
                let u = uniform(b);
                let mut cumulative = 0.0;
                let mut last = 0;
                for (a, &p) in row.iter().enumerate() {
                    if p > T::zero() {
                        last = a;
                    }
                    cumulative += p.as_f64();
                    if u < cumulative && p > T::zero() {
                        return a;
                    }
                }
                last
            })
            .collect())
    }
}
