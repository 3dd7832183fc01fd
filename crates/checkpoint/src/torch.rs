//! PyTorch `state_dict`s in and out (feature `torch`): the parameters of an
//! `rlgrad_autodiff` module read from, and written to, a safetensors file of
//! `safetensors.torch.save_file(model.state_dict(), path)`, with the layouts converted.
//!
//! # Why here
//!
//! It is a checkpoint concern: the file is a safetensors file, which this crate reads and
//! writes, and the restore is a [`Restore`] plan like any other (every mismatch reported
//! at once, nothing written on error, combinable with the rest of an agent). Putting it in
//! autodiff's `nn` would make autodiff depend on safetensors; here it adds no dependency
//! beyond the `autodiff` feature.
//!
//! # Names
//!
//! An rlgrad parameter name (`actor/l1/weight`) becomes a PyTorch key in three steps
//! ([`TorchNames::key`]):
//!
//! 1. the longest prefix rule whose rlgrad prefix matches whole leading components is
//!    applied (`.prefix("actor", "")` turns `actor/l1/weight` into `l1/weight`;
//!    `.prefix("actor", "module.pi")` into `module.pi/l1/weight`);
//! 2. `/` becomes `.`;
//! 3. a recurrent parameter (`weight_ih`, `weight_hh`, `bias_ih`, `bias_hh`, rlgrad's
//!    one-layer [`Gru`](rlgrad_autodiff::nn::Gru) and [`Lstm`](rlgrad_autodiff::nn::Lstm))
//!    gets PyTorch's layer suffix `_l0`.
//!
//! # Layouts
//!
//! | rlgrad | PyTorch | conversion |
//! |---|---|---|
//! | `Linear` weight `[in, out]` (any 2-d parameter whose last name component is `weight`) | `nn.Linear.weight` `[out, in]` | transposed |
//! | `Linear` bias `[out]` | `bias` `[out]` | none |
//! | `Gru`/`Lstm` `weight_ih` `[G*H, F]`, `weight_hh` `[G*H, H]` | `weight_ih_l0`, `weight_hh_l0` | none |
//! | `Gru`/`Lstm` `bias_ih`, `bias_hh` `[G*H]` | `bias_ih_l0`, `bias_hh_l0` | none |
//! | `StackedGru`/`StackedLstm` `weight_ih_l{k}`, ..., `bias_hh_l{k}_reverse` | the same names | none |
//!
//! rlgrad's recurrent layers keep PyTorch's gate order (GRU `r, z, n`; LSTM `i, f, g, o`)
//! and both of its bias vectors (`b_hn` sits inside `r * (h W_hn^T + b_hn)`, so the two
//! GRU biases cannot be summed into one), so their tensors go across unchanged; only the
//! names change. Values are copied exactly: an import followed by an export gives the
//! file's bytes back.

use rlgrad_autodiff::Param;
use rlgrad_autodiff::nn::Module;
use rlgrad_core::{Error, Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::checkpoint::Checkpoint;
use crate::dtype::Scalar;
use crate::restore::{Need, Report, Restore, Target};
use crate::tensor::{TensorSlot, staged_tensor};

/// The last name components of rlgrad's recurrent parameters, which PyTorch suffixes
/// with the layer (`_l0`).
const RECURRENT: [&str; 4] = ["weight_ih", "weight_hh", "bias_ih", "bias_hh"];

/// How rlgrad parameter names map to PyTorch `state_dict` keys: prefix rules, then `/`
/// to `.`, then `_l0` on recurrent parameters (see the [module docs](self)).
///
/// ```
/// use rlgrad_checkpoint::TorchNames;
///
/// let names = TorchNames::new().prefix("agent/actor", "").prefix("agent", "model");
/// assert_eq!(names.key("agent/actor/l1/weight"), "l1.weight");
/// assert_eq!(names.key("agent/critic/q1/bias"), "model.critic.q1.bias");
/// assert_eq!(names.key("policy/lstm/weight_ih"), "policy.lstm.weight_ih_l0");
/// assert_eq!(names.key("agent/actorish/w"), "model.actorish.w"); // whole components only
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TorchNames {
    prefixes: Vec<(String, String)>,
}

impl TorchNames {
    /// No prefix rules: `actor/l1/weight` is `actor.l1.weight`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a rule: parameters under the rlgrad prefix `rlgrad` (`/`-separated, whole
    /// components, or the full name) are under the PyTorch prefix `torch` (`.`-separated,
    /// empty to strip the prefix). The longest matching rlgrad prefix wins.
    pub fn prefix(mut self, rlgrad: &str, torch: &str) -> Self {
        self.prefixes.push((
            rlgrad.trim_end_matches('/').to_owned(),
            torch.trim_end_matches('.').to_owned(),
        ));
        self
    }

    /// The PyTorch key of the rlgrad parameter `name`.
    pub fn key(&self, name: &str) -> String {
        let rule = self
            .prefixes
            .iter()
            .filter(|(rlgrad, _)| {
                rlgrad.is_empty()
                    || name == rlgrad
                    || name
                        .strip_prefix(rlgrad.as_str())
                        .is_some_and(|rest| rest.starts_with('/'))
            })
            .max_by_key(|(rlgrad, _)| rlgrad.len());
        let mapped = match rule {
            None => name.to_owned(),
            Some((rlgrad, torch)) => {
                let rest = name[rlgrad.len()..].trim_start_matches('/');
                match (torch.is_empty(), rest.is_empty()) {
                    (true, _) => rest.to_owned(),
                    (false, true) => torch.clone(),
                    (false, false) => format!("{torch}/{rest}"),
                }
            }
        };
        let mut key = mapped.replace('/', ".");
        let last = key.rsplit('.').next().unwrap_or("");
        if RECURRENT.contains(&last) {
            key.push_str("_l0");
        }
        key
    }
}

/// Whether PyTorch stores parameter `name` of shape `dims` transposed: a 2-d `weight`
/// (a `Linear` weight, `[in, out]` here, `[out, in]` in PyTorch).
fn transposed(name: &str, dims: &[usize]) -> bool {
    dims.len() == 2 && name.rsplit('/').next() == Some("weight")
}

/// `values` of a row-major `[rows, cols]` matrix, transposed.
fn transpose<T: Copy>(values: &[T], rows: usize, cols: usize) -> Vec<T> {
    (0..cols)
        .flat_map(|c| (0..rows).map(move |r| values[r * cols + c]))
        .collect()
}

/// The shape PyTorch stores a parameter in.
fn torch_dims(name: &str, dims: &[usize]) -> Vec<usize> {
    if transposed(name, dims) {
        vec![dims[1], dims[0]]
    } else {
        dims.to_vec()
    }
}

impl Checkpoint {
    /// Stores every parameter of `module` as PyTorch's `state_dict` holds it: under its
    /// PyTorch key ([`TorchNames::key`]), `Linear` weights transposed to `[out, in]`, so
    /// that `model.load_state_dict(safetensors.torch.load_file(path))` loads the file
    /// [`Checkpoint::save`] writes. Errors as [`Checkpoint::put`] (two parameters with one
    /// key among them), with nothing stored.
    ///
    /// ```
    /// use rlgrad_autodiff::nn::{Activation, Init, Mlp, Module};
    /// use rlgrad_checkpoint::{Checkpoint, Restore, TorchNames};
    /// use rlgrad_core::Rng;
    ///
    /// // Fujimoto's TD3 actor; PyTorch's keys are `l1.weight`, `l1.bias`, ...
    /// let actor = Mlp::<f32>::new("actor", &[3, 8, 1], Activation::Relu, Activation::Tanh,
    ///                             Init::TorchDefault, &mut Rng::new(0, "init"))?;
    /// let names = TorchNames::new().prefix("actor", "");
    /// let mut state_dict = Checkpoint::new();
    /// state_dict.put_torch_module(&actor, &names)?;
    /// assert_eq!(state_dict.tensor_info("l1.weight").unwrap().shape, [8, 3]); // [out, in]
    ///
    /// let mut imported = Mlp::<f32>::new("actor", &[3, 8, 1], Activation::Relu,
    ///     Activation::Tanh, Init::TorchDefault, &mut Rng::new(1, "init"))?;
    /// state_dict.load_torch_module(&mut imported, &names)?;
    /// assert_eq!(imported.parameters()[0].value().to_vec()?,
    ///            actor.parameters()[0].value().to_vec()?);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn put_torch_module<T, D>(
        &mut self,
        module: &(impl Module<T, D> + ?Sized),
        names: &TorchNames,
    ) -> Result<()>
    where
        T: Float + Scalar,
        D: TensorDevice<T>,
    {
        const FUNCTION: &str = "Checkpoint::put_torch_module";
        let mut entries: Vec<(String, Vec<usize>, Vec<T>)> = Vec::new();
        let mut failed = None;
        module.visit(&mut |p| {
            if failed.is_some() {
                return;
            }
            let dims = p.value().dims().to_vec();
            match p.value().to_vec() {
                Ok(values) => {
                    let values = if transposed(p.name(), &dims) {
                        transpose(&values, dims[0], dims[1])
                    } else {
                        values
                    };
                    entries.push((names.key(p.name()), torch_dims(p.name(), &dims), values));
                }
                Err(e) => failed = Some(e.in_function(FUNCTION)),
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        let mut keys: Vec<&str> = entries.iter().map(|(key, _, _)| key.as_str()).collect();
        keys.sort_unstable();
        let taken: Vec<&str> = keys
            .windows(2)
            .filter(|pair| pair[0] == pair[1])
            .map(|pair| pair[0])
            .chain(keys.iter().copied().filter(|key| self.contains(key)))
            .collect();
        if !taken.is_empty() {
            return Err(Error::value(
                FUNCTION,
                "names",
                "a PyTorch key per parameter, not yet in the checkpoint",
                format_args!("{taken:?} taken"),
            ));
        }
        for (key, dims, values) in &entries {
            self.put(key, dims, values)
                .map_err(|e| e.in_function(FUNCTION))?;
        }
        Ok(())
    }

    /// Loads every parameter of `module` from this PyTorch `state_dict` (a file of
    /// `safetensors.torch.save_file`, read with [`Checkpoint::load`]), as
    /// [`Restore::torch_module`] describes, strictly like `load_state_dict(strict=True)`:
    /// a missing key, a key no parameter reads, a wrong shape or dtype is an error listing
    /// every problem, and nothing is written. Build a [`Restore`] plan with
    /// [`Restore::allow_extra`] to load part of a `state_dict` (an actor from a whole
    /// agent's).
    pub fn load_torch_module<T, D>(
        &self,
        module: &mut (impl Module<T, D> + ?Sized),
        names: &TorchNames,
    ) -> Result<()>
    where
        T: Float + Scalar,
        D: TensorDevice<T>,
    {
        let mut plan = Restore::new();
        plan.torch_module(module, names);
        self.restore(plan)
    }
}

/// A parameter restored from the PyTorch key `key`.
struct TorchTarget<'a, T: Float, D: TensorDevice<T>> {
    key: String,
    param: &'a mut Param<T, D>,
    /// The converted value on the parameter's device, once prepared.
    staged: Option<Tensor<T, D>>,
}

impl<T: Float + Scalar, D: TensorDevice<T>> Target for TorchTarget<'_, T, D> {
    fn name(&self) -> &str {
        &self.key
    }

    fn check(&mut self, checkpoint: &Checkpoint, report: &mut Report) {
        let (name, dims) = (self.param.name(), self.param.value().dims());
        let torch = torch_dims(name, dims);
        let layout = if transposed(name, dims) {
            ", transposed"
        } else {
            ""
        };
        if checkpoint.stored(&self.key).is_none() {
            if !report.allows_missing() {
                report.problem(
                    &self.key,
                    format_args!(
                        "missing from the state_dict (the PyTorch key of rlgrad `{name}` \
                         {dims:?}{layout})"
                    ),
                );
            }
            return;
        }
        let Some(stored) = report.find(checkpoint, &self.key, Need::Target) else {
            return;
        };
        if stored.info.dtype != <T as Scalar>::DTYPE || stored.info.shape != torch {
            let info = stored.info.clone();
            report.problem(
                &self.key,
                format_args!(
                    "expected {} {torch:?} for rlgrad `{name}` {dims:?}{layout}, found {info}",
                    <T as Scalar>::DTYPE
                ),
            );
        }
    }

    /// Decodes, converts the layout and uploads before anything is written.
    fn prepare(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        let Some(stored) = checkpoint.stored(&self.key) else {
            return Ok(());
        };
        let like = self.param.value();
        let dims = like.dims().to_vec();
        let mut values = vec![T::default(); like.numel()];
        T::decode_le_bytes(&stored.bytes, &mut values);
        if transposed(self.param.name(), &dims) {
            // Stored [out, in] = [dims[1], dims[0]].
            values = transpose(&values, dims[1], dims[0]);
        }
        self.staged = Some(staged_tensor(like, values)?);
        Ok(())
    }

    fn apply(mut self: Box<Self>, _checkpoint: &Checkpoint) {
        if let Some(value) = self.staged.take() {
            self.param.replace(value);
        }
    }
}

impl<'a> Restore<'a> {
    /// Every parameter of `module` from its PyTorch key ([`TorchNames::key`]) in a
    /// `state_dict`, converted to rlgrad's layout (`Linear` weights transposed from
    /// `[out, in]`). Checked like every target, with messages in both namings: a missing
    /// key, or one holding another dtype or shape, is a problem naming the key, the rlgrad
    /// parameter, and what was expected and found.
    pub fn torch_module<T, D>(
        &mut self,
        module: &'a mut (impl Module<T, D> + ?Sized),
        names: &TorchNames,
    ) -> &mut Self
    where
        T: Float + Scalar,
        D: TensorDevice<T>,
    {
        let mut params: Vec<&'a mut Param<T, D>> = Vec::new();
        module.visit_mut(&mut |p| params.push(p));
        for param in params {
            let key = names.key(param.name());
            self.push(TorchTarget {
                key,
                param,
                staged: None,
            });
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_follow_the_longest_whole_component_prefix() {
        let names = TorchNames::new()
            .prefix("actor", "")
            .prefix("actor/l1", "first")
            .prefix("critic/", "module.critic.");
        assert_eq!(names.key("actor/l2/weight"), "l2.weight");
        assert_eq!(names.key("actor/l1/bias"), "first.bias");
        assert_eq!(names.key("critic/q1/weight"), "module.critic.q1.weight");
        assert_eq!(names.key("critics/q1/weight"), "critics.q1.weight");
        assert_eq!(names.key("actor"), "");
        assert_eq!(names.key("gru/bias_hh"), "gru.bias_hh_l0");
        // A stacked layer's parameters carry PyTorch's names already.
        assert_eq!(
            names.key("encoder/weight_ih_l1_reverse"),
            "encoder.weight_ih_l1_reverse"
        );
        assert!(!transposed("encoder/weight_hh_l0", &[20, 5]));
        assert_eq!(
            TorchNames::new().prefix("", "net").key("l1/weight"),
            "net.l1.weight"
        );
    }

    #[test]
    fn transposes_are_row_major() {
        // [[1, 2, 3], [4, 5, 6]] -> [[1, 4], [2, 5], [3, 6]]
        assert_eq!(transpose(&[1, 2, 3, 4, 5, 6], 2, 3), [1, 4, 2, 5, 3, 6]);
        assert!(transposed("actor/l1/weight", &[3, 8]));
        assert!(!transposed("actor/l1/bias", &[8]));
        assert!(!transposed("lstm/weight_ih", &[16, 3]));
    }
}
