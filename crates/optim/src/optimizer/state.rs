//! An optimizer's state exported and imported by parameter name ([`OptimizerState`]):
//! what a checkpoint stores, checked against the optimizer it is loaded into.

use std::collections::BTreeMap;

use rlgrad_core::{Cpu, Device, Error, Float, Result};

use super::{Group, Optimizer, Slots};
use crate::rule::RuleSpec;
#[cfg(doc)]
use crate::{Rule, Schedule};

/// An optimizer's exported state: the step counter, each group's last learning rate and
/// hyper-parameters, and every parameter's slots, by name. Plain data, so that a
/// checkpoint can store it (with the `serde` feature, it is `Serialize` and
/// `Deserialize`; state exported before `groups` and [`ParamState::group`] existed
/// deserializes with them empty, and loads unverified).
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct OptimizerState<T> {
    /// Completed optimizer steps (also the position of every group's schedule).
    pub step: u64,
    /// The learning rate each parameter group used at the last step, by group index
    /// (`None` before the first step).
    pub last_lrs: Vec<Option<f64>>,
    /// Each group's rule, hyper-parameters and schedule, by group index (empty: unverified).
    #[cfg_attr(feature = "serde", serde(default))]
    pub groups: Vec<GroupState>,
    /// Per parameter: every parameter that has taken a step.
    pub params: BTreeMap<String, ParamState<T>>,
}

/// What a parameter group's next step depends on besides the slots and the step counter.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct GroupState {
    /// The rule, its flavor and options.
    pub rule: RuleSpec,
    /// The rule's numeric hyper-parameters ([`Rule::hyperparameters`]), exact; a name
    /// missing here is unverified.
    pub hyperparameters: BTreeMap<String, f64>,
    /// The learning-rate schedule ([`Schedule::spec`]); `None`: unverified.
    pub schedule: Option<String>,
}

/// One parameter's exported state.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ParamState<T> {
    /// What gives the slots their meaning: the rule of the parameter's group, its flavor
    /// and options (`adam (torch; amsgrad)`).
    pub rule: RuleSpec,
    /// The index of the parameter's group (`None`: unverified).
    #[cfg_attr(feature = "serde", serde(default))]
    pub group: Option<usize>,
    /// The parameter's element count (every slot has as many).
    pub len: usize,
    /// Steps this parameter took (bias corrections count these).
    pub steps: u64,
    /// The learning rate of this parameter's last update.
    pub last_lr: f64,
    /// The slots by name (none for plain SGD).
    pub slots: BTreeMap<String, Vec<T>>,
}

impl<T: Float> Group<T> {
    /// What exported state records of this group.
    fn state(&self) -> GroupState {
        GroupState {
            rule: self.rule.spec(),
            hyperparameters: self
                .rule
                .hyperparameters()
                .into_iter()
                .map(|(name, value)| (name.to_owned(), value))
                .collect(),
            schedule: self.schedule.spec(),
        }
    }
}

impl GroupState {
    /// Refuses `saved` unless group `index` of this optimizer, whose state is `self`,
    /// would take the steps it was saved to take: the same rule, and the same value of
    /// every hyper-parameter (and the same schedule) that both record.
    fn check_resumes(&self, index: usize, saved: &GroupState) -> Result<()> {
        const FUNCTION: &str = "Optimizer::load_state";
        if saved.rule != self.rule {
            return Err(Error::state(
                FUNCTION,
                "state",
                format_args!("rule {} for group {index}", self.rule),
                format_args!("rule {} saved with the state", saved.rule),
            ));
        }
        let mut here = Vec::new();
        let mut there = Vec::new();
        if let (Some(mine), Some(theirs)) = (&self.schedule, &saved.schedule)
            && mine != theirs
        {
            here.push(format!("lr {mine}"));
            there.push(format!("lr {theirs}"));
        }
        for (name, mine) in &self.hyperparameters {
            if let Some(theirs) = saved.hyperparameters.get(name)
                && theirs.to_bits() != mine.to_bits()
            {
                here.push(format!("{name} {mine:?}"));
                there.push(format!("{name} {theirs:?}"));
            }
        }
        if here.is_empty() {
            return Ok(());
        }
        Err(Error::state(
            FUNCTION,
            "state",
            format_args!(
                "the hyper-parameters of this optimizer's group {index} ({}): {}",
                self.rule,
                here.join(", ")
            ),
            format_args!(
                "{} saved with the state (to resume with other values, build the optimizer \
                 with the saved ones and change them after loading: \
                 Optimizer::set_schedule, Optimizer::set_rule)",
                there.join(", ")
            ),
        ))
    }
}

impl<T: Float, D: Device> Optimizer<T, D> {
    /// The exported state: the step counter, each group's last learning rate, rule,
    /// numeric hyper-parameters ([`Rule::hyperparameters`]) and schedule
    /// ([`Schedule::spec`]), and every parameter's group, slots, length, step count and
    /// rule, keyed by parameter name (for checkpoints). Loading it into an optimizer built
    /// the same way resumes bit for bit; [`Optimizer::load_state`] refuses any other
    /// hyper-parameter or schedule, naming both values, and [`Optimizer::set_schedule`] /
    /// [`Optimizer::set_rule`] change them after loading.
    ///
    /// Slots are the element type's exact values. A text format must keep them exact:
    /// `serde_json` does only with its `float_roundtrip` feature (without it, about one
    /// f64 slot value in ten comes back one ulp off, and the resumed run drifts);
    /// binary formats keep them as they are.
    pub fn state(&self) -> Result<OptimizerState<T>> {
        let params = self
            .slots
            .iter()
            .map(|(name, state)| {
                let rule = &self.groups[state.group].rule;
                let slots = rule
                    .slot_names()
                    .into_iter()
                    .zip(&state.buffers)
                    .map(|(slot, buffer)| Ok((slot.to_owned(), self.device.download(buffer)?)))
                    .collect::<Result<BTreeMap<_, _>>>()?;
                Ok((
                    name.clone(),
                    ParamState {
                        rule: rule.spec(),
                        group: Some(state.group),
                        len: state.len,
                        steps: state.steps,
                        last_lr: state.last_lr,
                        slots,
                    },
                ))
            })
            .collect::<Result<BTreeMap<_, _>>>()?;
        Ok(OptimizerState {
            step: self.step,
            last_lrs: self.groups.iter().map(|g| g.last_lr).collect(),
            groups: self.groups.iter().map(Group::state).collect(),
            params,
        })
    }

    /// Replaces the state with an exported one, so that the next step is exactly the one
    /// the saved optimizer would have taken. The state must come from an optimizer with as
    /// many groups; each parameter's recorded group, rule (name, flavor, options) and slot
    /// names must be those it has here, and each slot must hold the recorded length.
    /// When the state has parameters, the next step must pass exactly them (an empty
    /// state, exported before the first step, constrains nothing). The step counter and
    /// the last learning rates come back with it, so [`Optimizer::last_lr`] and
    /// [`Optimizer::effective_lr`] answer as before the export. On error nothing changes.
    ///
    /// **Hyper-parameters are not overridden, they are checked**: a state saved with
    /// another learning-rate schedule or another value of any numeric hyper-parameter
    /// (exact f64 values) is refused, naming each one and both values, since this
    /// optimizer's configuration lives in your code and neither it nor the saved one may
    /// silently win (PyTorch's `load_state_dict` lets the saved one win). To resume with
    /// another learning rate, build the optimizer as saved, load, then call
    /// [`Optimizer::set_schedule`] ([`Optimizer::set_rule`] for other hyper-parameters).
    /// What a state does not record is unverified: everything but the rule in state
    /// exported before these checks existed, a custom rule's hyper-parameters without
    /// [`Rule::hyperparameters`], a custom schedule without [`Schedule::spec`].
    ///
    /// ```
    /// use rlgrad_optim::{Flavor, Optimizer, Param, Rmsprop};
    /// let torch = Rmsprop { momentum: 0.9, ..Rmsprop::torch() };
    /// let mut opt = Optimizer::<f32>::new(torch, 1e-2)?;
    /// let mut w = vec![1.0f32; 3];
    /// opt.step(&mut [Param { name: "w", value: &mut w, grad: &[0.1; 3] }])?;
    /// let state = opt.state()?;
    /// // The Keras momentum buffer includes the learning rate: refused, naming both.
    /// let mut keras = Optimizer::<f32>::new(Rmsprop { flavor: Flavor::Keras, ..torch }, 1e-2)?;
    /// let err = keras.load_state(state.clone()).unwrap_err();
    /// assert!(err.to_string().contains("rmsprop (keras; momentum)"), "{err}");
    /// assert!(err.to_string().contains("rmsprop (torch; momentum)"), "{err}");
    /// let mut resumed = Optimizer::<f32>::new(torch, 1e-2)?;
    /// resumed.load_state(state)?;
    /// assert_eq!(resumed.last_lr(0), Some(1e-2));
    /// # Ok::<(), rlgrad_optim::Error>(())
    /// ```
    pub fn load_state(&mut self, state: OptimizerState<T>) -> Result<()> {
        let prepared = self.prepare_state(state)?;
        self.install_state(prepared)
    }

    /// [`Optimizer::load_state`]'s checks and uploads, without changing the optimizer:
    /// a state that [`Optimizer::install_state`] then puts in place without any further
    /// check that can fail. For restoring several things at once (an agent from a
    /// checkpoint), where every part must be accepted before any is written.
    ///
    /// ```
    /// use rlgrad_optim::{Adam, Optimizer, Param};
    /// let mut opt = Optimizer::<f32>::new(Adam::torch(), 1e-3)?;
    /// let mut w = vec![1.0f32];
    /// opt.step(&mut [Param { name: "w", value: &mut w, grad: &[1.0] }])?;
    /// let mut fresh = Optimizer::<f32>::new(Adam::torch(), 1e-3)?;
    /// let prepared = fresh.prepare_state(opt.state()?)?;
    /// assert_eq!(fresh.state()?.step, 0); // nothing changed yet
    /// fresh.install_state(prepared)?;
    /// assert_eq!(fresh.state()?, opt.state()?);
    /// # Ok::<(), rlgrad_optim::Error>(())
    /// ```
    pub fn prepare_state(&self, state: OptimizerState<T>) -> Result<PreparedState<T, D>> {
        const FUNCTION: &str = "Optimizer::load_state";
        let groups = self.groups.len();
        if state.last_lrs.len() != groups {
            return Err(Error::state(
                FUNCTION,
                "state",
                format_args!("the state of an optimizer with {groups} groups"),
                format_args!("a state of {} groups", state.last_lrs.len()),
            ));
        }
        // State exported before `groups` existed has none.
        if !state.groups.is_empty() && state.groups.len() != groups {
            return Err(Error::state(
                FUNCTION,
                "state",
                format_args!("the hyper-parameters of {groups} groups"),
                format_args!("those of {}", state.groups.len()),
            ));
        }
        for (index, (saved, group)) in state.groups.iter().zip(&self.groups).enumerate() {
            group.state().check_resumes(index, saved)?;
        }
        let mut slots = BTreeMap::new();
        for (name, param) in state.params {
            let group = self.group_of(&name);
            if let Some(saved) = param.group
                && saved != group
            {
                return Err(Error::state(
                    FUNCTION,
                    "state",
                    format_args!("`{name}` in group {group}, as this optimizer groups it"),
                    format_args!("`{name}` in group {saved} saved with the state"),
                ));
            }
            let rule = &self.groups[group].rule;
            let spec = rule.spec();
            let names = rule.slot_names();
            let got: Vec<&str> = param.slots.keys().map(String::as_str).collect();
            let mut want = names.clone();
            want.sort_unstable();
            if param.rule != spec || got != want {
                return Err(Error::state(
                    FUNCTION,
                    "state",
                    format_args!("rule {spec} with slots {names:?} for `{name}`"),
                    format_args!("rule {} with slots {got:?}", param.rule),
                ));
            }
            if let Some((slot, values)) = param.slots.iter().find(|(_, v)| v.len() != param.len) {
                return Err(Error::state(
                    FUNCTION,
                    "state",
                    format_args!("slot `{slot}` of `{name}` with {} elements", param.len),
                    format_args!("{} elements", values.len()),
                ));
            }
            let mut by_name = param.slots;
            let buffers = names
                .iter()
                .map(|slot| {
                    let values = by_name.remove(*slot).expect("slot names were checked");
                    self.device.upload_vec(values)
                })
                .collect::<Result<Vec<_>>>()?;
            slots.insert(
                name,
                Slots {
                    group,
                    steps: param.steps,
                    last_lr: param.last_lr,
                    len: param.len,
                    buffers,
                },
            );
        }
        Ok(PreparedState {
            slots,
            step: state.step,
            last_lrs: state.last_lrs,
        })
    }

    /// Puts in place a state from [`Optimizer::prepare_state`] of an optimizer with as many
    /// groups as this one (in practice, this one); an error, with nothing changed,
    /// otherwise.
    pub fn install_state(&mut self, prepared: PreparedState<T, D>) -> Result<()> {
        if prepared.last_lrs.len() != self.groups.len() {
            return Err(Error::state(
                "Optimizer::install_state",
                "prepared",
                format_args!("a state prepared for {} groups", self.groups.len()),
                format_args!("one for {}", prepared.last_lrs.len()),
            ));
        }
        let PreparedState {
            slots,
            step,
            last_lrs,
        } = prepared;
        self.expected_params = (!slots.is_empty()).then(|| slots.keys().cloned().collect());
        self.slots = slots;
        self.step = step;
        for (group, lr) in self.groups.iter_mut().zip(last_lrs) {
            group.last_lr = lr;
        }
        Ok(())
    }
}

/// An [`OptimizerState`] checked against an optimizer and uploaded to its device
/// ([`Optimizer::prepare_state`]), ready for [`Optimizer::install_state`].
pub struct PreparedState<T: Float, D: Device = Cpu> {
    slots: BTreeMap<String, Slots<D::Buffer<T>>>,
    step: u64,
    last_lrs: Vec<Option<f64>>,
}

impl<T: Float, D: Device> std::fmt::Debug for PreparedState<T, D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedState")
            .field("params", &self.slots.keys().collect::<Vec<_>>())
            .field("step", &self.step)
            .field("last_lrs", &self.last_lrs)
            .finish()
    }
}
