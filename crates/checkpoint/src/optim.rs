//! Optimizer state in checkpoints (feature `optim`).
//!
//! An [`OptimizerState`] is stored in two parts. Its slots become tensors
//! `PREFIX/PARAM/SLOT` (the optimizer's element type, in the shape of the tensor stored as
//! `PARAM`, else 1-d) and its step counters become
//! exact `u64` scalars (`PREFIX/step`, `PREFIX/PARAM/steps`); everything else (rule names,
//! hyper-parameters, whatever fields the state gains later) stays as the state's own serde
//! JSON in the metadata entry `rlgrad.optimizer:PREFIX`, together with where each tensor
//! goes back. This crate never builds a state field by field, so new fields of
//! `OptimizerState` pass through untouched.

use rlgrad_core::{Device, Error, Float, Result};
use rlgrad_optim::{Optimizer, OptimizerState, PreparedState};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::checkpoint::{Checkpoint, RESERVED_PREFIX, checked_numel};
use crate::dtype::{Dtype, Scalar};
use crate::restore::{Need, Report, Restore, Target};
use crate::state::State;

/// What the metadata entry of a stored optimizer holds.
#[derive(Debug, Serialize, Deserialize)]
struct StoredLayout {
    /// The exported state's JSON with its slots emptied and its counters set to null.
    state: Value,
    /// `(parameter, slot, tensor name)` of every slot.
    slots: Vec<(String, String, String)>,
    /// `(JSON pointer into state, tensor name)` of every step counter.
    counters: Vec<(String, String)>,
}

fn metadata_key(prefix: &str) -> String {
    format!("{RESERVED_PREFIX}optimizer:{prefix}")
}

/// `token` escaped for a JSON pointer (RFC 6901).
fn pointer_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

impl Checkpoint {
    /// Stores `optimizer`'s exported state under `prefix`: slots as tensors
    /// `PREFIX/PARAM/SLOT`, step counters as `u64` scalars `PREFIX/step` and
    /// `PREFIX/PARAM/steps`, the rest as metadata. A slot has the shape of the tensor
    /// stored under its parameter's name in this checkpoint (Adam's `m` of a `[4, 64]`
    /// weight `actor/l1/weight` is `[4, 64]`, as PyTorch's `state_dict` has it), whether
    /// that tensor is put before or after the optimizer; without one it is 1-d (the
    /// optimizer knows its parameters' element counts, not their shapes). An error, with
    /// nothing stored, when `prefix` already holds an optimizer or one of these names is
    /// taken.
    ///
    /// ```
    /// use rlgrad_checkpoint::{Checkpoint, Restore};
    /// use rlgrad_optim::{Adam, Optimizer, Param};
    ///
    /// let mut adam = Optimizer::<f32>::new(Adam::torch(), 1e-3)?;
    /// let mut w = vec![1.0f32, -2.0];
    /// adam.step(&mut [Param { name: "actor/l1/weight", value: &mut w, grad: &[0.5, -0.5] }])?;
    ///
    /// let mut checkpoint = Checkpoint::new();
    /// checkpoint.put("actor/l1/weight", &[1, 2], &w)?;
    /// checkpoint.put_optimizer("optim", &adam)?;
    /// assert_eq!(checkpoint.read::<f32>("optim/actor/l1/weight/m", &[1, 2])?, [0.05, -0.05]);
    /// assert_eq!(checkpoint.read_scalar::<u64>("optim/step")?, 1);
    ///
    /// let mut resumed_w = vec![0.0f32; 2];
    /// let mut resumed = Optimizer::<f32>::new(Adam::torch(), 1e-3)?;
    /// let mut plan = Restore::new();
    /// plan.slice("actor/l1/weight", &[1, 2], &mut resumed_w)
    ///     .optimizer("optim", &mut resumed);
    /// checkpoint.restore(plan)?;
    /// assert_eq!((resumed_w, resumed.state()?), (w, adam.state()?));
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn put_optimizer<T, D>(&mut self, prefix: &str, optimizer: &Optimizer<T, D>) -> Result<()>
    where
        T: Float + Scalar + Serialize,
        D: Device,
    {
        self.put_optimizer_state(prefix, optimizer.state()?)
    }

    /// Stores an exported optimizer state under `prefix`, as
    /// [`Checkpoint::put_optimizer`] does.
    pub fn put_optimizer_state<T>(
        &mut self,
        prefix: &str,
        mut state: OptimizerState<T>,
    ) -> Result<()>
    where
        T: Scalar + Serialize,
    {
        const FUNCTION: &str = "Checkpoint::put_optimizer";
        let key = metadata_key(prefix);
        if self.metadata(&key).is_some() {
            return Err(Error::value(
                FUNCTION,
                "prefix",
                "a prefix without a stored optimizer",
                format_args!("`{prefix}`, which holds one"),
            ));
        }
        let mut slots = Vec::new();
        for (param, param_state) in &mut state.params {
            for (slot, values) in std::mem::take(&mut param_state.slots) {
                slots.push((param.clone(), slot, values));
            }
        }
        let mut skeleton = serde_json::to_value(&state)
            .map_err(|e| Error::value(FUNCTION, "optimizer", "a serializable state", e))?;
        let mut counters = Vec::new();
        let mut take_counter = |pointer: String, name: String| {
            let value = skeleton.pointer_mut(&pointer);
            if let Some(count) = value.as_ref().and_then(|v| v.as_u64()) {
                *value.expect("as_u64 found a value") = Value::Null;
                counters.push((pointer, name, count));
            }
        };
        take_counter("/step".to_owned(), format!("{prefix}/step"));
        for param in state.params.keys() {
            take_counter(
                format!("/params/{}/steps", pointer_token(param)),
                format!("{prefix}/{param}/steps"),
            );
        }

        let slot_names: Vec<String> = slots
            .iter()
            .map(|(param, slot, _)| format!("{prefix}/{param}/{slot}"))
            .collect();
        let mut all_names: Vec<&str> = counters
            .iter()
            .map(|(_, name, _)| name.as_str())
            .chain(slot_names.iter().map(String::as_str))
            .collect();
        all_names.sort_unstable();
        let taken: Vec<&str> = all_names
            .windows(2)
            .filter(|pair| pair[0] == pair[1])
            .map(|pair| pair[0])
            .chain(all_names.iter().copied().filter(|name| self.contains(name)))
            .collect();
        if !taken.is_empty() {
            return Err(Error::value(
                FUNCTION,
                "prefix",
                "tensor names not yet in the checkpoint",
                format_args!("{taken:?} taken"),
            ));
        }

        for (_, name, count) in &counters {
            self.put_scalar(name, *count)?;
        }
        for ((param, _, values), name) in slots.iter().zip(&slot_names) {
            match self.tensor_info(param).map(|info| info.shape.clone()) {
                Some(shape) if checked_numel(&shape) == Some(values.len()) => {
                    self.put(name, &shape, values)?;
                }
                Some(_) => self.put(name, &[values.len()], values)?,
                None => {
                    self.put(name, &[values.len()], values)?;
                    self.reshape_when_stored(param, name);
                }
            }
        }
        let layout = StoredLayout {
            state: skeleton,
            slots: slots
                .into_iter()
                .zip(slot_names)
                .map(|((param, slot, _), name)| (param, slot, name))
                .collect(),
            counters: counters
                .into_iter()
                .map(|(pointer, name, _)| (pointer, name))
                .collect(),
        };
        let json = serde_json::to_string(&layout).expect("a JSON value and strings serialize");
        self.set_reserved_metadata(key, json);
        Ok(())
    }

    /// The optimizer state stored under `prefix` (for inspection, or to edit before
    /// `load_state`). An error listing every problem when none is stored there or a part
    /// is missing, of the wrong dtype, or does not decode.
    pub fn optimizer_state<T>(&self, prefix: &str) -> Result<OptimizerState<T>>
    where
        T: Scalar + DeserializeOwned,
    {
        let mut report = Report::new(false);
        let state = decode_state(self, prefix, &mut report);
        report.into_result(
            "Checkpoint::optimizer_state",
            "a complete optimizer state under the prefix",
        )?;
        Ok(state.expect("a state decodes when nothing was reported"))
    }
}

/// Decodes the state stored under `prefix`, reporting every problem; `Some` exactly when
/// it decoded without one.
fn decode_state<T>(
    checkpoint: &Checkpoint,
    prefix: &str,
    report: &mut Report,
) -> Option<OptimizerState<T>>
where
    T: Scalar + DeserializeOwned,
{
    let problems_before = report.problem_count();
    let Some(json) = checkpoint.metadata(&metadata_key(prefix)) else {
        if !report.allows_missing() {
            report.problem(prefix, "no optimizer state stored under this prefix");
        }
        return None;
    };
    let layout: StoredLayout = match serde_json::from_str(json) {
        Ok(layout) => layout,
        Err(e) => {
            report.problem(prefix, format_args!("unreadable optimizer layout: {e}"));
            return None;
        }
    };
    let mut skeleton = layout.state;
    for (pointer, name) in &layout.counters {
        let Some(stored) = report.expect(checkpoint, name, Need::Part, Dtype::U64, &[]) else {
            continue;
        };
        let mut count = [0u64];
        u64::decode_le_bytes(&stored.bytes, &mut count);
        match skeleton.pointer_mut(pointer) {
            Some(place) => *place = Value::from(count[0]),
            None => report.problem(name, format_args!("no place `{pointer}` in the state")),
        }
    }
    let mut slot_values = Vec::with_capacity(layout.slots.len());
    for (param, slot, name) in layout.slots {
        let Some(stored) = report.find(checkpoint, &name, Need::Part) else {
            continue;
        };
        // Any shape: the parameter's, or 1-d as slots were stored before they had shapes
        // (the optimizer checks the element count).
        if stored.info.dtype != <T as Scalar>::DTYPE {
            report.problem(
                &name,
                format_args!(
                    "expected {} of any shape, found {}",
                    <T as Scalar>::DTYPE,
                    stored.info
                ),
            );
            continue;
        }
        let mut values =
            vec![T::default(); stored.bytes.len() / <T as Scalar>::DTYPE.size_in_bytes()];
        T::decode_le_bytes(&stored.bytes, &mut values);
        slot_values.push((param, slot, name, values));
    }
    let mut state: OptimizerState<T> = match serde_json::from_value(skeleton) {
        Ok(state) => state,
        Err(e) => {
            report.problem(
                prefix,
                format_args!("the optimizer state does not decode: {e}"),
            );
            return None;
        }
    };
    for (param, slot, name, values) in slot_values {
        match state.params.get_mut(&param) {
            Some(param_state) => {
                param_state.slots.insert(slot, values);
            }
            None => report.problem(
                &name,
                format_args!("a slot of parameter `{param}`, which the state lacks"),
            ),
        }
    }
    (report.problem_count() == problems_before).then_some(state)
}

struct OptimizerTarget<'a, T: Float, D: Device> {
    prefix: String,
    optimizer: &'a mut Optimizer<T, D>,
    state: Option<OptimizerState<T>>,
    prepared: Option<PreparedState<T, D>>,
}

impl<T, D> Target for OptimizerTarget<'_, T, D>
where
    T: Float + Scalar + DeserializeOwned,
    D: Device,
{
    fn name(&self) -> &str {
        &self.prefix
    }

    fn check(&mut self, checkpoint: &Checkpoint, report: &mut Report) {
        self.state = decode_state(checkpoint, &self.prefix, report);
    }

    /// The optimizer's own checks (rule, hyper-parameters, schedule, slots), without
    /// changing it.
    fn prepare(&mut self, _checkpoint: &Checkpoint) -> Result<()> {
        if let Some(state) = self.state.take() {
            self.prepared = Some(self.optimizer.prepare_state(state)?);
        }
        Ok(())
    }

    fn apply(self: Box<Self>, _checkpoint: &Checkpoint) {
        if let Some(prepared) = self.prepared {
            self.optimizer
                .install_state(prepared)
                .expect("prepared by this optimizer, so for its groups");
        }
    }
}

impl<'a> Restore<'a> {
    /// Loads the optimizer state stored under `prefix` by [`Checkpoint::put_optimizer`]
    /// into `optimizer`, through its `load_state`. Parameters are matched by name, and the
    /// optimizer must be built as the saved one was: a state saved with another rule,
    /// hyper-parameter or learning-rate schedule is refused, naming the hyper-parameter
    /// and both values. To resume with another learning rate, restore into the optimizer
    /// as saved, then call `optimizer.set_schedule(group, schedule)`.
    pub fn optimizer<T, D>(&mut self, prefix: &str, optimizer: &'a mut Optimizer<T, D>) -> &mut Self
    where
        T: Float + Scalar + DeserializeOwned,
        D: Device,
    {
        self.push(OptimizerTarget {
            prefix: prefix.to_owned(),
            optimizer,
            state: None,
            prepared: None,
        })
    }
}

/// An optimizer's slots, step counters and hyper-parameters under `prefix`
/// ([`Checkpoint::put_optimizer`], [`Restore::optimizer`]).
impl<T, D> State for Optimizer<T, D>
where
    T: Float + Scalar + Serialize + DeserializeOwned,
    D: Device,
{
    fn save_state(&self, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()> {
        checkpoint.put_optimizer(prefix, self)
    }

    fn restore_state<'a>(
        &'a mut self,
        prefix: &str,
        _: &Checkpoint,
        plan: &mut Restore<'a>,
    ) -> Result<()> {
        plan.optimizer(prefix, self);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use rlgrad_optim::{Adam, Momentum, MomentumFlavor, Param};

    use super::*;

    fn stepped_adam() -> Optimizer<f64> {
        let mut adam = Optimizer::<f64>::new(Adam::torch(), 1e-2).unwrap();
        let (mut a, mut b) = (vec![1.0, 2.0, 3.0], vec![-1.0]);
        for _ in 0..3 {
            adam.step(&mut [
                Param {
                    name: "actor/l1/weight",
                    value: &mut a,
                    grad: &[0.1, -0.2, 0.3],
                },
                Param {
                    name: "critic.b~",
                    value: &mut b,
                    grad: &[0.7],
                },
            ])
            .unwrap();
        }
        adam
    }

    #[test]
    fn state_round_trips_through_bytes_with_integer_counters() {
        let adam = stepped_adam();
        let mut c = Checkpoint::new();
        c.put_optimizer("optim", &adam).unwrap();
        let c = Checkpoint::from_bytes(&c.to_bytes().unwrap()).unwrap();
        assert_eq!(c.tensor_info("optim/step").unwrap().dtype, Dtype::U64);
        assert_eq!(c.read_scalar::<u64>("optim/critic.b~/steps").unwrap(), 3);
        assert_eq!(c.tensor_info("optim/actor/l1/weight/v").unwrap().shape, [3]);
        assert_eq!(
            c.optimizer_state::<f64>("optim").unwrap(),
            adam.state().unwrap()
        );
    }

    #[test]
    fn every_problem_is_reported_and_nothing_is_stored_on_a_clash() {
        let adam = stepped_adam();
        let mut c = Checkpoint::new();
        c.put("optim/step", &[], &[1u64]).unwrap();
        assert!(c.put_optimizer("optim", &adam).is_err());
        assert_eq!(c.names().count(), 1);

        let mut c = Checkpoint::new();
        c.put_optimizer("optim", &adam).unwrap();
        assert!(c.put_optimizer("optim", &adam).is_err());
        let message = c.optimizer_state::<f32>("optim").unwrap_err().to_string();
        assert!(message.contains("4 mismatches"), "{message}");
        assert!(
            message.contains("`optim/actor/l1/weight/m`: expected F32 of any shape, found F64 [3]")
        );
        assert!(c.optimizer_state::<f64>("other").is_err());
    }

    #[test]
    fn restore_refuses_a_different_rule_and_changes_nothing() {
        let adam = stepped_adam();
        let mut c = Checkpoint::new();
        c.put_optimizer("optim", &adam).unwrap();
        let mut momentum =
            Optimizer::<f64>::new(Momentum::new(MomentumFlavor::Torch), 1e-2).unwrap();
        let mut weights = [5.0f64];
        c.put("w", &[1], &[1.0f64]).unwrap();
        let mut plan = Restore::new();
        plan.slice("w", &[1], &mut weights)
            .optimizer("optim", &mut momentum);
        assert!(c.restore(plan).is_err());
        assert_eq!(weights, [5.0]);
        assert!(momentum.state().unwrap().params.is_empty());
    }
}
