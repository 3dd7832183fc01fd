//! The distributions over padded batches of sequences (`[B, T, ...]`, batch-major), for
//! recurrent policies: padding is selected out before any math, so whatever a padded
//! step holds (NaN, inf, stale values) reaches no value and no gradient.

use rlgrad_autodiff::{SequenceDevice, Sequences, Var};
use rlgrad_core::{Error, Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::{Bernoulli, Categorical, Normal, TanhNormal, TanhSample};

/// A distribution over the `B * T` steps of a padded batch of sequences, built from
/// batch-major parameters `[B, T, A]` and the batch's [`Sequences`].
///
/// Construction selects `+0` into every padded step of the parameters
/// ([`Var::zero_padding`], a selection, never a multiplication by a zero mask), then
/// flattens them to the `[B * T, A]` rows of the inner distribution ([`Padded::inner`]).
/// Actions are cleaned the same way before they are read (an out-of-range index or a
/// NaN at a padded step is ignored). Per-step results come back as `[B, T]` (or
/// `[B, T, A]` for samples) with `+0` selected at padded steps, and the `mean_*`
/// methods average over the valid steps only ([`Var::masked_mean`]: the mean of the
/// unpadded values, bit for bit, and gradient 0 at padding).
///
/// So every value and gradient is bitwise what the same batch with zero padding gives.
///
/// ```
/// use rlgrad_autodiff::{Param, Sequences, Tape};
/// use rlgrad_distributions::Padded;
/// use rlgrad_tensor::Tensor;
/// let seqs = Sequences::new(&[2, 1], Some(2))?; // B = 2, T = 2: step (1, 1) is padding
/// let nan = f64::NAN;
/// let logits = Param::new("logits", Tensor::from_vec(
///     vec![0.0, 0.0, 1.0, 2.0, 3.0, 1.0, nan, nan], [2, 2, 2])?)?;
/// let tape = Tape::new();
/// let pi = Padded::categorical(&tape.param(&logits), &seqs)?;
/// let actions = [0, 1, 1, usize::MAX]; // the padded step's action is never read
/// let loss = pi.mean_log_prob(&actions)?.add(&pi.mean_entropy()?)?;
/// assert!(loss.to_scalar()?.is_finite());
/// let grads = tape.gradient(&loss, &[&logits])?;
/// let g = grads.get(&logits)?.to_vec()?;
/// assert!(g.iter().all(|g| g.is_finite()));
/// assert_eq!(g[6..], [0.0, 0.0]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Padded<Dist> {
    inner: Dist,
    seqs: Sequences,
}

impl<Dist> Padded<Dist> {
    /// The distribution over the `B * T` flattened steps (padded steps included, with
    /// zero parameters), for what has no padded form here (`mode`, `sample`, `probs`).
    pub fn inner(&self) -> &Dist {
        &self.inner
    }

    /// The batch's sequences.
    pub fn sequences(&self) -> &Sequences {
        &self.seqs
    }

    /// `true` for the valid steps, batch-major (`B * T` flags).
    fn valid(&self) -> Result<Vec<bool>> {
        Ok(self.seqs.mask()?.as_bools().to_vec())
    }
}

/// `x` (`[B, T, A]` for `seqs`) with `+0` selected at padding, flattened to `[B * T, A]`.
fn rows<'t, T: Float, D: TensorDevice<T>>(
    function: &'static str,
    argument: &'static str,
    x: &Var<'t, T, D>,
    seqs: &Sequences,
) -> Result<Var<'t, T, D>> {
    let (b, t) = (seqs.batch(), seqs.max_len());
    match *x.dims() {
        [xb, xt, a] if (xb, xt) == (b, t) && a > 0 => x
            .zero_padding(seqs)
            .and_then(|clean| clean.reshape([b * t, a]))
            .map_err(|e| e.in_function(function)),
        _ => Err(Error::shape(
            function,
            argument,
            format_args!("[B, T, A] with [B, T] = [{b}, {t}] for the sequences and A >= 1"),
            x.shape(),
        )),
    }
}

/// A scale parameter: `[B, T, A]` like the location (padding selected out, flattened),
/// or a shape without the time axes that broadcasts over the rows (`[A]`, `[1, A]`).
fn scale_rows<'t, T: Float, D: TensorDevice<T>>(
    function: &'static str,
    argument: &'static str,
    x: &Var<'t, T, D>,
    seqs: &Sequences,
) -> Result<Var<'t, T, D>> {
    if x.shape().ndim() == 3 {
        rows(function, argument, x, seqs)
    } else {
        Ok(x.clone())
    }
}

/// Per-row values `[B * T]` (or `[B * T, A]`) back to `[B, T]` (`[B, T, A]`) with `+0`
/// selected at padding.
fn steps<'t, T: Float, D: TensorDevice<T>>(
    function: &'static str,
    per_row: Var<'t, T, D>,
    seqs: &Sequences,
) -> Result<Var<'t, T, D>> {
    let (b, t) = (seqs.batch(), seqs.max_len());
    let shape: Vec<usize> = [b, t]
        .into_iter()
        .chain(per_row.dims().iter().skip(1).copied())
        .collect();
    per_row
        .reshape(shape)
        .and_then(|v| v.zero_padding(seqs))
        .map_err(|e| e.in_function(function))
}

impl<Dist> Padded<Dist> {
    fn mean_of<'t, T: Float, D: SequenceDevice<T>>(
        &self,
        function: &'static str,
        per_step: Result<Var<'t, T, D>>,
    ) -> Result<Var<'t, T, D>> {
        per_step
            .and_then(|v| v.masked_mean(&self.seqs))
            .map_err(|e| e.in_function(function))
    }
}

impl<'t, T: Float, D: TensorDevice<T>> Padded<Categorical<'t, T, D>> {
    /// Categorical distributions from padded logits `[B, T, A]`.
    pub fn categorical(logits: &Var<'t, T, D>, seqs: &Sequences) -> Result<Self> {
        let function = "Padded::categorical";
        let rows = rows(function, "logits", logits, seqs)?;
        Ok(Self {
            inner: Categorical::from_logits(&rows).map_err(|e| e.in_function(function))?,
            seqs: seqs.clone(),
        })
    }

    /// The log-probability of `actions` (`B * T` indices, batch-major), `[B, T]`, `+0`
    /// at padding. The actions of padded steps are not read; a valid step's action must
    /// be below `A`.
    pub fn log_prob(&self, actions: &[usize]) -> Result<Var<'t, T, D>> {
        let function = "Padded::<Categorical>::log_prob";
        let valid = self.valid()?;
        if actions.len() != valid.len() {
            return Err(Error::shape(
                function,
                "actions",
                format_args!("{} action indices (B * T, batch-major)", valid.len()),
                format_args!("{} indices", actions.len()),
            ));
        }
        let clean: Vec<usize> = actions
            .iter()
            .zip(&valid)
            .map(|(&a, &v)| if v { a } else { 0 })
            .collect();
        let per_row = self
            .inner
            .log_prob(&clean)
            .map_err(|e| e.in_function(function))?;
        steps(function, per_row, &self.seqs)
    }

    /// The entropy of each step, `[B, T]`, `+0` at padding.
    pub fn entropy(&self) -> Result<Var<'t, T, D>> {
        let function = "Padded::<Categorical>::entropy";
        let per_row = self.inner.entropy().map_err(|e| e.in_function(function))?;
        steps(function, per_row, &self.seqs)
    }
}

impl<'t, T: Float, D: SequenceDevice<T>> Padded<Categorical<'t, T, D>> {
    /// The mean log-probability of `actions` over the valid steps, a scalar.
    pub fn mean_log_prob(&self, actions: &[usize]) -> Result<Var<'t, T, D>> {
        self.mean_of(
            "Padded::<Categorical>::mean_log_prob",
            self.log_prob(actions),
        )
    }

    /// The mean entropy over the valid steps, a scalar.
    pub fn mean_entropy(&self) -> Result<Var<'t, T, D>> {
        self.mean_of("Padded::<Categorical>::mean_entropy", self.entropy())
    }
}

impl<'t, T: Float, D: TensorDevice<T>> Padded<Normal<'t, T, D>> {
    /// Normals from padded means `[B, T, A]` and log standard deviations, `[B, T, A]`
    /// (padded too) or a shape that broadcasts over the steps (`[A]`).
    pub fn normal(mean: &Var<'t, T, D>, log_std: &Var<'t, T, D>, seqs: &Sequences) -> Result<Self> {
        let function = "Padded::normal";
        let mean = rows(function, "mean", mean, seqs)?;
        let log_std = scale_rows(function, "log_std", log_std, seqs)?;
        Ok(Self {
            inner: Normal::from_log_std(&mean, &log_std).map_err(|e| e.in_function(function))?,
            seqs: seqs.clone(),
        })
    }

    /// The log-density of `actions` (`[B, T, A]`, padding not read) summed over the
    /// action dimension, `[B, T]`, `+0` at padding.
    pub fn log_prob(&self, actions: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        let function = "Padded::<Normal>::log_prob";
        let actions = rows(function, "actions", actions, &self.seqs)?;
        let per_row = self
            .inner
            .log_prob(&actions)
            .map_err(|e| e.in_function(function))?;
        steps(function, per_row, &self.seqs)
    }

    /// The entropy summed over the action dimension, `[B, T]`, `+0` at padding.
    pub fn entropy(&self) -> Result<Var<'t, T, D>> {
        let function = "Padded::<Normal>::entropy";
        let per_row = self.inner.entropy().map_err(|e| e.in_function(function))?;
        steps(function, per_row, &self.seqs)
    }

    /// `mean + std * eps` for noise `eps` (`[B, T, A]`), `[B, T, A]`, `+0` at padding.
    pub fn rsample(&self, eps: &Tensor<T, D>) -> Result<Var<'t, T, D>> {
        let function = "Padded::<Normal>::rsample";
        let eps = self.inner.mean().tape().constant(eps);
        let eps = rows(function, "eps", &eps, &self.seqs)?;
        let per_row = self
            .inner
            .rsample(eps.value())
            .map_err(|e| e.in_function(function))?;
        steps(function, per_row, &self.seqs)
    }
}

impl<'t, T: Float, D: SequenceDevice<T>> Padded<Normal<'t, T, D>> {
    /// The mean log-density of `actions` over the valid steps, a scalar.
    pub fn mean_log_prob(&self, actions: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        self.mean_of("Padded::<Normal>::mean_log_prob", self.log_prob(actions))
    }

    /// The mean entropy over the valid steps, a scalar.
    pub fn mean_entropy(&self) -> Result<Var<'t, T, D>> {
        self.mean_of("Padded::<Normal>::mean_entropy", self.entropy())
    }
}

impl<'t, T: Float, D: TensorDevice<T>> Padded<TanhNormal<'t, T, D>> {
    /// Tanh-squashed normals from padded means `[B, T, A]` and log standard deviations
    /// (`[B, T, A]` or broadcasting over the steps).
    pub fn tanh_normal(
        mean: &Var<'t, T, D>,
        log_std: &Var<'t, T, D>,
        seqs: &Sequences,
    ) -> Result<Self> {
        let function = "Padded::tanh_normal";
        let mean = rows(function, "mean", mean, seqs)?;
        let log_std = scale_rows(function, "log_std", log_std, seqs)?;
        Ok(Self {
            inner: TanhNormal::from_log_std(&mean, &log_std)
                .map_err(|e| e.in_function(function))?,
            seqs: seqs.clone(),
        })
    }

    /// The log-density of the actions `tanh(pre_tanh)` (`pre_tanh` `[B, T, A]`, padding
    /// not read) summed over the action dimension, `[B, T]`, `+0` at padding.
    pub fn log_prob(&self, pre_tanh: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        let function = "Padded::<TanhNormal>::log_prob";
        let pre_tanh = rows(function, "pre_tanh", pre_tanh, &self.seqs)?;
        let per_row = self
            .inner
            .log_prob(&pre_tanh)
            .map_err(|e| e.in_function(function))?;
        steps(function, per_row, &self.seqs)
    }

    /// A reparameterized sample for noise `eps` (`[B, T, A]`): `pre_tanh` and `action`
    /// `[B, T, A]`, `log_prob` `[B, T]`, each `+0` at padding.
    pub fn rsample(&self, eps: &Tensor<T, D>) -> Result<TanhSample<'t, T, D>> {
        let function = "Padded::<TanhNormal>::rsample";
        let eps = self.inner.normal().mean().tape().constant(eps);
        let eps = rows(function, "eps", &eps, &self.seqs)?;
        let sample = self
            .inner
            .rsample(eps.value())
            .map_err(|e| e.in_function(function))?;
        Ok(TanhSample {
            pre_tanh: steps(function, sample.pre_tanh, &self.seqs)?,
            action: steps(function, sample.action, &self.seqs)?,
            log_prob: steps(function, sample.log_prob, &self.seqs)?,
        })
    }
}

impl<'t, T: Float, D: SequenceDevice<T>> Padded<TanhNormal<'t, T, D>> {
    /// The mean log-density of `tanh(pre_tanh)` over the valid steps, a scalar.
    pub fn mean_log_prob(&self, pre_tanh: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        self.mean_of(
            "Padded::<TanhNormal>::mean_log_prob",
            self.log_prob(pre_tanh),
        )
    }
}

impl<'t, T: Float, D: TensorDevice<T>> Padded<Bernoulli<'t, T, D>> {
    /// Bernoulli distributions from padded logits `[B, T, A]`.
    pub fn bernoulli(logits: &Var<'t, T, D>, seqs: &Sequences) -> Result<Self> {
        let function = "Padded::bernoulli";
        let rows = rows(function, "logits", logits, seqs)?;
        Ok(Self {
            inner: Bernoulli::from_logits(&rows).map_err(|e| e.in_function(function))?,
            seqs: seqs.clone(),
        })
    }

    /// The log-probability of `actions` (`[B, T, A]`, 0 or 1 at valid steps, padding not
    /// read) summed over the action dimension, `[B, T]`, `+0` at padding.
    pub fn log_prob(&self, actions: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        let function = "Padded::<Bernoulli>::log_prob";
        let actions = rows(function, "actions", actions, &self.seqs)?;
        // Padding holds +0 now, which passes the 0-or-1 check.
        self.inner.check_actions(function, &actions)?;
        let per_row = self
            .inner
            .density(&actions)
            .and_then(|lp| lp.sum(1, false))
            .map_err(|e| e.in_function(function))?;
        steps(function, per_row, &self.seqs)
    }

    /// The entropy summed over the action dimension, `[B, T]`, `+0` at padding.
    pub fn entropy(&self) -> Result<Var<'t, T, D>> {
        let function = "Padded::<Bernoulli>::entropy";
        let per_row = self.inner.entropy().map_err(|e| e.in_function(function))?;
        steps(function, per_row, &self.seqs)
    }
}

impl<'t, T: Float, D: SequenceDevice<T>> Padded<Bernoulli<'t, T, D>> {
    /// The mean log-probability of `actions` over the valid steps, a scalar.
    pub fn mean_log_prob(&self, actions: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        self.mean_of("Padded::<Bernoulli>::mean_log_prob", self.log_prob(actions))
    }

    /// The mean entropy over the valid steps, a scalar.
    pub fn mean_entropy(&self) -> Result<Var<'t, T, D>> {
        self.mean_of("Padded::<Bernoulli>::mean_entropy", self.entropy())
    }
}
