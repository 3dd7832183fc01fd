//! The optimizer engine: parameters by name, parameter groups, slots, the step counter,
//! schedules and the opt-in finite check; state export/import is in [`state`].

use rlgrad_core::cpu::grain::{Family, grain};
use std::collections::{BTreeMap, BTreeSet, HashMap};

use rlgrad_core::cpu::alloc;
use rlgrad_core::cpu::optim::{self as cpu_kernel, Job};
use rlgrad_core::kernels::OptimKernel;
use rlgrad_core::kernels::optim::BufferJob;
use rlgrad_core::{Cpu, Device, Error, Float, Par, Result, check};
use smallvec::SmallVec;

use crate::rule::{ChunkUpdate, Rule, StepRule};
use crate::schedule::Schedule;

mod state;

pub use state::{GroupState, OptimizerState, ParamState, PreparedState};

/// One parameter at a slice-level step: its name, its values (updated in place) and its
/// gradient.
#[derive(Debug)]
pub struct Param<'a, T> {
    /// A name that stays the same from step to step (`"critic.fc1.weight"`).
    pub name: &'a str,
    /// The values.
    pub value: &'a mut [T],
    /// The gradient, as long as `value`.
    pub grad: &'a [T],
}

/// One parameter at a device-level step.
#[derive(Debug)]
pub struct DeviceParam<'a, T: Float, D: Device> {
    /// A name that stays the same from step to step.
    pub name: &'a str,
    /// The values, updated in place.
    pub value: &'a mut D::Buffer<T>,
    /// The gradient.
    pub grad: &'a D::Buffer<T>,
}

#[derive(Debug, Clone)]
struct Group<T: Float> {
    rule: Box<dyn Rule<T>>,
    schedule: Box<dyn Schedule>,
    /// `None` for the default group, which takes every parameter no other group names.
    members: Option<BTreeSet<String>>,
    last_lr: Option<f64>,
}

#[derive(Debug, Clone)]
struct Slots<B> {
    group: usize,
    steps: u64,
    /// The learning rate of the parameter's last update.
    last_lr: f64,
    len: usize,
    buffers: Vec<B>,
}

/// An optimizer: rules per parameter group, slots per parameter, a step counter.
///
/// `Optimizer<T>` keeps its slots on the host and steps plain slices ([`Optimizer::step`]);
/// `Optimizer<T, D>` keeps them on device `D` and steps device buffers
/// ([`Optimizer::step_on`]). Every parameter's update is one fused pass; all parameters of
/// a step run in one parallel region, in chunks that never change the bits.
///
/// It is `Clone` wherever the device's buffers are (on the host, always): a clone is an
/// independent optimizer with a copy of every slot, that steps exactly as the original.
/// GPU buffers are not `Clone` (a device copy can fail, and `clone` cannot say so): copy
/// a device optimizer with [`Optimizer::state`] and [`Optimizer::load_state`].
///
/// **The element type**: every rule steps `f32` and `f64` alike, so a constructor call
/// alone does not tell which; name it, `Optimizer::<f32>::new(..)` (the form every example
/// here uses), or let a type say it. `Optimizer` alone is `Optimizer<f32>`, as
/// `Tensor`, `Param` and the autodiff modules default to `f32`:
///
/// ```
/// use rlgrad_optim::{Adam, Optimizer};
///
/// let adam = Optimizer::<f32>::new(Adam::torch(), 1e-3)?;
/// let same: Optimizer = Optimizer::new(Adam::torch(), 1e-3)?; // Optimizer<f32>
/// struct Learner {
///     critic_adam: Optimizer, // a field, as `actor: Mlp` is one of f32
///     value_adam: Optimizer<f64>,
/// }
/// let learner = Learner {
///     critic_adam: Optimizer::new(Adam::torch(), 1e-3)?,
///     value_adam: Optimizer::new(Adam::torch(), 1e-3)?,
/// };
/// assert_eq!((adam.step_count(), same.step_count(), learner.value_adam.step_count()), (0, 0, 0));
/// # Ok::<(), rlgrad_optim::Error>(())
/// ```
///
/// Without either, nothing fixes it until the optimizer's first step:
///
/// ```compile_fail,E0283
/// use rlgrad_optim::{Adam, Optimizer};
/// let adam = Optimizer::new(Adam::torch(), 1e-3)?; // error: type annotations needed
/// # Ok::<(), rlgrad_optim::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Optimizer<T: Float = f32, D: Device = Cpu> {
    device: D,
    groups: Vec<Group<T>>,
    slots: BTreeMap<String, Slots<D::Buffer<T>>>,
    step: u64,
    check_finite: bool,
    expected_params: Option<BTreeSet<String>>,
}

/// Parameters a device step ([`Optimizer::step_on`]) gathers without allocating: a step of
/// more keeps working, and allocates its list of updates.
const STEP_PARAMS: usize = 32;

/// A parameter's name and slots, borrowed for one step.
type NamedSlots<'a, B> = (&'a str, &'a mut Slots<B>);

/// The next learning rate of `schedule`, after `step` completed steps, must be finite and
/// `>= 0`: PyTorch refuses a negative rate when the optimizer is built, not at its first
/// step.
fn check_schedule(function: &'static str, schedule: &dyn Schedule, step: u64) -> Result<()> {
    let lr = schedule.lr(step);
    if lr.is_finite() && lr >= 0.0 {
        Ok(())
    } else {
        Err(Error::value(
            function,
            "schedule",
            format_args!("a finite learning rate >= 0 for step {}", step + 1),
            lr,
        ))
    }
}

impl<T: Float> Optimizer<T, Cpu> {
    /// An optimizer on the host with `rule` and `schedule` for every parameter (a plain
    /// `f64` or `f32` is a constant learning rate). An error when the rule's
    /// hyper-parameters are invalid or the schedule's first learning rate is negative or
    /// not finite.
    ///
    /// ```
    /// use rlgrad_optim::{Adam, Optimizer, Param};
    /// let mut adam = Optimizer::<f32>::new(Adam::torch(), 1e-3)?;
    /// let mut w = vec![1.0f32, -2.0];
    /// adam.step(&mut [Param { name: "w", value: &mut w, grad: &[0.5, -0.5] }])?;
    /// assert_eq!(w, [1.0 - 1e-3, -2.0 + 1e-3]);
    /// assert!((adam.effective_lr(0)? - 1e-3 * (1.0f64 - 0.999).sqrt() / (1.0 - 0.9)).abs() < 1e-12);
    /// assert_eq!(adam.slot("w", "m")?, &[0.05, -0.05]);
    /// assert!(Optimizer::<f32>::new(Adam::torch(), -1e-3).is_err());
    /// # Ok::<(), rlgrad_optim::Error>(())
    /// ```
    pub fn new(rule: impl Rule<T> + 'static, schedule: impl Schedule + 'static) -> Result<Self> {
        Self::new_on(Cpu::default(), rule, schedule)
    }

    /// One step over `params` (each name at most once): the `k`-th call uses learning rate
    /// `schedule.lr(k - 1)` of each parameter's group. Nothing changes when it returns an
    /// error: a length that differs from the parameter's state, a repeated name, a
    /// parameter set that differs from imported state, a non-finite gradient when
    /// [`Optimizer::check_finite`] is on, a schedule giving a negative or non-finite rate,
    /// slots the host cannot allocate.
    pub fn step(&mut self, params: &mut [Param<'_, T>]) -> Result<()> {
        for p in params.iter() {
            check::len("Optimizer::step", "grad", p.value.len(), p.grad.len())?;
        }
        if self.check_finite {
            for p in params.iter() {
                first_non_finite(p.name, p.grad)?;
            }
        }
        let shapes: SmallVec<[(&str, usize); 16]> =
            params.iter().map(|p| (p.name, p.value.len())).collect();
        let plan = self.plan(&shapes)?;
        let par = self.device.par();
        let Self {
            groups,
            slots,
            device,
            ..
        } = self;
        let mut created = Self::create_slots(groups, device, &plan)?;
        let rules = Self::step_rules(groups, &plan);
        let mut slots_by_param: HashMap<&str, &mut Slots<Vec<T>>> = slots
            .iter_mut()
            .chain(created.iter_mut())
            .map(|(name, s)| (name.as_str(), s))
            .collect();
        let mut jobs = Vec::new();
        let mut custom = Vec::new();
        for (param, p) in params.iter_mut().zip(&plan.params) {
            let buffers: Vec<&mut [T]> = slots_by_param
                .remove(param.name)
                .expect("the plan covers every parameter, with existing or created slots")
                .buffers
                .iter_mut()
                .map(Vec::as_mut_slice)
                .collect();
            match rules.of(p) {
                StepRule::Fused(update) => jobs.push(Job {
                    update: *update,
                    param: &mut *param.value,
                    grad: param.grad,
                    slots: buffers,
                }),
                StepRule::Custom(apply) => {
                    custom.push((apply, &mut *param.value, param.grad, buffers))
                }
            }
        }
        cpu_kernel::update_all(par, jobs)?;
        for (apply, value, grad, mut buffers) in custom {
            apply_custom(par, apply.as_ref(), value, grad, &mut buffers);
        }
        drop(rules);
        self.slots.append(&mut created);
        self.commit(&plan);
        Ok(())
    }
}

/// Runs a custom rule over a parameter in chunks, in parallel.
fn apply_custom<T: Float>(
    par: Par,
    apply: &ChunkUpdate<'_, T>,
    value: &mut [T],
    grad: &[T],
    slots: &mut [&mut [T]],
) {
    const CHUNK: usize = 1 << 14;
    let par = par.for_work(value.len(), grain(Family::Optim));
    let mut slot_chunks: Vec<_> = slots.iter_mut().map(|s| s.chunks_mut(CHUNK)).collect();
    let chunks: Vec<_> = value
        .chunks_mut(CHUNK)
        .zip(grad.chunks(CHUNK))
        .map(|(v, g)| {
            let s: Vec<&mut [T]> = slot_chunks
                .iter_mut()
                .map(|it| it.next().expect("slots have the parameter's length"))
                .collect();
            (v, g, s)
        })
        .collect();
    par.for_each_item(chunks, |(v, g, mut s)| apply(v, g, &mut s));
}

fn first_non_finite<T: Float>(name: &str, grad: &[T]) -> Result<()> {
    match rlgrad_core::check::first_non_finite(grad) {
        Some(i) => Err(Error::value(
            "Optimizer::step",
            "params",
            "finite gradients (check_finite is on)",
            format_args!("{} at element {i} of the gradient of `{name}`", grad[i]),
        )),
        None => Ok(()),
    }
}

/// A validated step: what each parameter does, and each group's learning rate.
struct Plan<'a> {
    params: SmallVec<[Planned<'a>; 16]>,
    /// `schedule.lr(completed steps)` per group, computed once per step.
    lrs: SmallVec<[f64; 4]>,
}

/// What one parameter does at this step.
struct Planned<'a> {
    name: &'a str,
    group: usize,
    /// The parameter's step number (1-based).
    step: u64,
    new_slots: Option<usize>,
}

/// A (group, per-parameter step) and its rule.
type KeyedRule<'g, T> = ((usize, u64), StepRule<'g, T>);

/// The rules of one step by (group, per-parameter step): usually one or two entries.
struct StepRules<'g, T>(SmallVec<[KeyedRule<'g, T>; 4]>);

impl<'g, T> StepRules<'g, T> {
    fn find(&self, p: &Planned<'_>) -> Option<&StepRule<'g, T>> {
        self.0
            .iter()
            .find(|(key, _)| *key == (p.group, p.step))
            .map(|(_, rule)| rule)
    }

    /// The rule of `p`, which `Optimizer::step_rules` made.
    fn of(&self, p: &Planned<'_>) -> &StepRule<'g, T> {
        self.find(p)
            .expect("step_rules made a rule for every planned parameter")
    }
}

impl<T: Float, D: Device> Optimizer<T, D> {
    /// An optimizer whose slots live on `device`. Errors as [`Optimizer::new`].
    pub fn new_on(
        device: D,
        rule: impl Rule<T> + 'static,
        schedule: impl Schedule + 'static,
    ) -> Result<Self> {
        rule.validate()?;
        check_schedule("Optimizer::new", &schedule, 0)?;
        Ok(Self {
            device,
            groups: vec![Group {
                rule: Box::new(rule),
                schedule: Box::new(schedule),
                members: None,
                last_lr: None,
            }],
            slots: BTreeMap::new(),
            step: 0,
            check_finite: false,
            expected_params: None,
        })
    }

    /// A parameter group with its own rule (and so its own hyper-parameters) and schedule,
    /// for the named parameters; returns its index (the default group is 0). An error when
    /// a parameter already belongs to another group or already has state, or for the
    /// errors of [`Optimizer::new`].
    ///
    /// ```
    /// use rlgrad_optim::{Adam, Optimizer, Param, Sgd};
    /// let mut opt = Optimizer::<f64>::new(Adam::torch(), 1e-3)?;
    /// let slow = opt.add_group(&["embedding"], Sgd::default(), 1e-4)?;
    /// let (mut e, mut w) = (vec![1.0], vec![1.0]);
    /// opt.step(&mut [
    ///     Param { name: "embedding", value: &mut e, grad: &[1.0] },
    ///     Param { name: "w", value: &mut w, grad: &[1.0] },
    /// ])?;
    /// assert_eq!(e, [1.0 - 1e-4]);
    /// assert_eq!(opt.last_lr(slow), Some(1e-4));
    /// # Ok::<(), rlgrad_optim::Error>(())
    /// ```
    pub fn add_group(
        &mut self,
        params: &[&str],
        rule: impl Rule<T> + 'static,
        schedule: impl Schedule + 'static,
    ) -> Result<usize> {
        rule.validate()?;
        check_schedule("Optimizer::add_group", &schedule, 0)?;
        for &name in params {
            let taken = self
                .groups
                .iter()
                .any(|g| g.members.as_ref().is_some_and(|m| m.contains(name)));
            if taken || self.slots.contains_key(name) {
                return Err(Error::value(
                    "Optimizer::add_group",
                    "params",
                    "parameters without a group and without state",
                    format_args!("`{name}`"),
                ));
            }
        }
        self.groups.push(Group {
            rule: Box::new(rule),
            schedule: Box::new(schedule),
            members: Some(params.iter().map(|s| (*s).to_owned()).collect()),
            last_lr: None,
        });
        Ok(self.groups.len() - 1)
    }

    /// Turns the finite check on or off: when on, a step whose gradients hold a NaN or an
    /// infinity changes nothing and returns an error naming the first such parameter.
    pub fn check_finite(&mut self, on: bool) {
        self.check_finite = on;
    }

    /// Completed optimizer steps.
    pub fn step_count(&self) -> u64 {
        self.step
    }

    /// The learning rate group `group` used at the last step (`None` before the first).
    pub fn last_lr(&self, group: usize) -> Option<f64> {
        self.groups.get(group)?.last_lr
    }

    /// The step size group `group` effectively applied at the last step, at the
    /// optimizer's step count: Adam's `alpha_t = lr sqrt(1 - beta2^t) / (1 - beta1^t)`
    /// with `t` = [`Optimizer::step_count`], Adagrad's decayed rate, the learning rate for
    /// the others. That is the value of every parameter of the group that took every step;
    /// a parameter that joined later counts its own steps, and
    /// [`Optimizer::effective_lr_of`] gives its value. An error for an unknown group or
    /// before the first step.
    pub fn effective_lr(&self, group: usize) -> Result<f64> {
        let g = self.group("Optimizer::effective_lr", group)?;
        let lr = g.last_lr.ok_or_else(|| {
            Error::empty("Optimizer::effective_lr", "group", "a step taken first")
        })?;
        Ok(g.rule.effective_lr(self.step, lr))
    }

    /// The step size parameter `param`'s last update effectively applied: its rule's
    /// effective rate at the parameter's own step count, with the learning rate of that
    /// update (Adam's `alpha_t` with `t` the steps this parameter took).
    ///
    /// ```
    /// use rlgrad_optim::{Adam, Optimizer, Param};
    /// let mut opt = Optimizer::<f64>::new(Adam::torch(), 1e-3)?;
    /// let (mut a, mut b) = (vec![1.0], vec![1.0]);
    /// opt.step(&mut [Param { name: "a", value: &mut a, grad: &[1.0] }])?;
    /// opt.step(&mut [
    ///     Param { name: "a", value: &mut a, grad: &[1.0] },
    ///     Param { name: "b", value: &mut b, grad: &[1.0] }, // joins at the second step
    /// ])?;
    /// let alpha = |t: i32| 1e-3 * (1.0 - 0.999f64.powi(t)).sqrt() / (1.0 - 0.9f64.powi(t));
    /// assert!((opt.effective_lr(0)? - alpha(2)).abs() < 1e-15);
    /// assert!((opt.effective_lr_of("a")? - alpha(2)).abs() < 1e-15);
    /// assert!((opt.effective_lr_of("b")? - alpha(1)).abs() < 1e-15); // its first step
    /// # Ok::<(), rlgrad_optim::Error>(())
    /// ```
    pub fn effective_lr_of(&self, param: &str) -> Result<f64> {
        let state = self.param_state("Optimizer::effective_lr_of", param)?;
        let rule = &self.groups[state.group].rule;
        Ok(rule.effective_lr(state.steps, state.last_lr))
    }

    /// The rule of group `group`.
    pub fn rule(&self, group: usize) -> Option<&dyn Rule<T>> {
        self.groups.get(group).map(|g| g.rule.as_ref())
    }

    /// Replaces group `group`'s schedule, keeping the slots and the step counter: the next
    /// step uses `schedule.lr(step_count())`. This is how a run resumes with another
    /// learning rate, since [`Optimizer::load_state`] refuses state saved with another
    /// schedule: build the optimizer as saved, load, then set the new schedule. An error,
    /// changing nothing, for an unknown group or a next rate that is negative or not
    /// finite.
    ///
    /// ```
    /// use rlgrad_optim::{Adam, Optimizer, Param};
    /// let mut opt = Optimizer::<f32>::new(Adam::torch(), 3e-4)?;
    /// let mut w = vec![1.0f32];
    /// opt.step(&mut [Param { name: "w", value: &mut w, grad: &[0.5] }])?;
    /// let saved = opt.state()?;
    ///
    /// let mut other_lr = Optimizer::<f32>::new(Adam::torch(), 1e-3)?;
    /// let err = other_lr.load_state(saved.clone()).unwrap_err();
    /// assert!(err.to_string().contains("lr 0.001, got lr 0.0003 saved with the state"), "{err}");
    ///
    /// let mut resumed = Optimizer::<f32>::new(Adam::torch(), 3e-4)?; // as saved
    /// resumed.load_state(saved)?;
    /// resumed.set_schedule(0, 1e-3)?; // then the new learning rate
    /// resumed.step(&mut [Param { name: "w", value: &mut w, grad: &[0.5] }])?;
    /// assert_eq!(resumed.last_lr(0), Some(1e-3));
    /// # Ok::<(), rlgrad_optim::Error>(())
    /// ```
    pub fn set_schedule(&mut self, group: usize, schedule: impl Schedule + 'static) -> Result<()> {
        const FUNCTION: &str = "Optimizer::set_schedule";
        self.group(FUNCTION, group)?;
        check_schedule(FUNCTION, &schedule, self.step)?;
        self.groups[group].schedule = Box::new(schedule);
        Ok(())
    }

    /// Replaces group `group`'s rule with one that reads the slots as it does (the same
    /// [`Rule::spec`] and slot names) but has other hyper-parameters, keeping the slots:
    /// how a run resumes with, say, another `beta1` or weight decay, since
    /// [`Optimizer::load_state`] refuses state saved with other values. An error, changing
    /// nothing, for an unknown group, invalid hyper-parameters, or a rule whose slots mean
    /// something else (naming both rules).
    ///
    /// ```
    /// use rlgrad_optim::{Adam, AdamW, Optimizer};
    /// let mut opt = Optimizer::<f32>::new(Adam::torch(), 1e-3)?;
    /// opt.set_rule(0, Adam { weight_decay: 1e-2, ..Adam::torch() })?;
    /// let err = opt.set_rule(0, AdamW::default()).unwrap_err();
    /// assert!(err.to_string().contains("adam (torch)") && err.to_string().contains("adamw"));
    /// # Ok::<(), rlgrad_optim::Error>(())
    /// ```
    pub fn set_rule(&mut self, group: usize, rule: impl Rule<T> + 'static) -> Result<()> {
        const FUNCTION: &str = "Optimizer::set_rule";
        let current = &self.group(FUNCTION, group)?.rule;
        rule.validate()?;
        let (spec, slots) = (rule.spec(), rule.slot_names());
        if spec != current.spec() || slots != current.slot_names() {
            return Err(Error::state(
                FUNCTION,
                "rule",
                format_args!(
                    "a rule whose slots mean what group {group}'s do: {} with slots {:?}",
                    current.spec(),
                    current.slot_names()
                ),
                format_args!("{spec} with slots {slots:?}"),
            ));
        }
        self.groups[group].rule = Box::new(rule);
        Ok(())
    }

    /// Group `group`, or an error naming `function`.
    fn group(&self, function: &'static str, group: usize) -> Result<&Group<T>> {
        self.groups.get(group).ok_or_else(|| {
            Error::out_of_range(
                function,
                "group",
                format_args!("a group below {}", self.groups.len()),
                group,
            )
        })
    }

    /// The group a parameter belongs to.
    fn group_of(&self, name: &str) -> usize {
        self.groups
            .iter()
            .position(|g| g.members.as_ref().is_some_and(|m| m.contains(name)))
            .unwrap_or(0)
    }

    /// The state of parameter `param`, or an error naming `function`.
    fn param_state(&self, function: &'static str, param: &str) -> Result<&Slots<D::Buffer<T>>> {
        self.slots.get(param).ok_or_else(|| {
            Error::value(
                function,
                "param",
                format_args!(
                    "a parameter with state (one of the {} that took a step)",
                    self.slots.len()
                ),
                format_args!("`{param}`"),
            )
        })
    }

    /// The index of slot `slot` of parameter `param`, or an error naming `function` and,
    /// for an unknown slot, the valid names.
    fn slot_index(
        &self,
        function: &'static str,
        param: &str,
        slot: &str,
    ) -> Result<(&Slots<D::Buffer<T>>, usize)> {
        let state = self.param_state(function, param)?;
        let rule = &self.groups[state.group].rule;
        let names = rule.slot_names();
        match names.iter().position(|s| *s == slot) {
            Some(index) => Ok((state, index)),
            None => Err(Error::value(
                function,
                "slot",
                format_args!("one of the slots of {}: {names:?}", rule.spec()),
                format_args!("`{slot}`"),
            )),
        }
    }

    /// Validates a step and decides what each parameter does, changing nothing. (It
    /// allocates nothing for a step of up to 16 parameters that all have state, so that a
    /// warmed-up training loop does not allocate.)
    fn plan<'a>(&self, params: &[(&'a str, usize)]) -> Result<Plan<'a>> {
        let mut names: SmallVec<[&str; 16]> = params.iter().map(|&(name, _)| name).collect();
        names.sort_unstable();
        if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(Error::value(
                "Optimizer::step",
                "params",
                "each parameter once",
                format_args!("`{}` twice", pair[0]),
            ));
        }
        if let Some(expected) = &self.expected_params {
            let given: BTreeSet<String> = names.iter().map(|s| (*s).to_owned()).collect();
            if &given != expected {
                return Err(Error::state(
                    "Optimizer::step",
                    "params",
                    format_args!("the parameters of the imported state {expected:?}"),
                    format_args!("{given:?}"),
                ));
            }
        }
        let mut lrs = SmallVec::with_capacity(self.groups.len());
        for (index, group) in self.groups.iter().enumerate() {
            let lr = group.schedule.lr(self.step);
            if !(lr.is_finite() && lr >= 0.0) {
                return Err(Error::value(
                    "Optimizer::step",
                    "schedule",
                    format_args!("a finite learning rate >= 0 for group {index}"),
                    lr,
                ));
            }
            lrs.push(lr);
        }
        let params = params
            .iter()
            .map(|&(name, len)| {
                let group = self.group_of(name);
                match self.slots.get(name) {
                    Some(slots) if slots.len != len => Err(Error::state(
                        "Optimizer::step",
                        "params",
                        format_args!("`{name}` with {} elements, as its state", slots.len),
                        len,
                    )),
                    Some(slots) => Ok(Planned {
                        name,
                        group,
                        step: slots.steps + 1,
                        new_slots: None,
                    }),
                    None => Ok(Planned {
                        name,
                        group,
                        step: 1,
                        new_slots: Some(len),
                    }),
                }
            })
            .collect::<Result<SmallVec<_>>>()?;
        Ok(Plan { params, lrs })
    }

    /// The state of the parameters seen for the first time, all or none, for the caller to
    /// add once the step succeeded. (An associated function so that callers can hold the
    /// step's rules, which borrow the groups, while the slots change.)
    fn create_slots(
        groups: &[Group<T>],
        device: &D,
        plan: &Plan<'_>,
    ) -> Result<BTreeMap<String, Slots<D::Buffer<T>>>> {
        let mut created = BTreeMap::new();
        for p in &plan.params {
            if let Some(len) = p.new_slots {
                let rule = &groups[p.group].rule;
                let buffers = rule
                    .slot_names()
                    .iter()
                    .map(|slot| match rule.slot_init(slot) {
                        init if init == T::zero() => device.alloc_zeros(len),
                        init => {
                            let mut host = alloc::try_zeroed(len, "Optimizer::step", "params")?;
                            host.fill(init);
                            device.upload_vec(host)
                        }
                    })
                    .collect::<Result<Vec<_>>>()?;
                created.insert(
                    p.name.to_owned(),
                    Slots {
                        group: p.group,
                        steps: 0,
                        last_lr: plan.lrs[p.group],
                        len,
                        buffers,
                    },
                );
            }
        }
        Ok(created)
    }

    /// The fused or custom update of every (group, per-parameter step) of this step: the
    /// step-only scalars are computed once here, on the host.
    fn step_rules<'g>(groups: &'g [Group<T>], plan: &Plan<'_>) -> StepRules<'g, T> {
        let mut rules = StepRules(SmallVec::new());
        for p in &plan.params {
            if rules.find(p).is_none() {
                let rule = groups[p.group].rule.step(p.step, plan.lrs[p.group]);
                rules.0.push(((p.group, p.step), rule));
            }
        }
        rules
    }

    /// Records a finished step.
    fn commit(&mut self, plan: &Plan<'_>) {
        for (group, &lr) in self.groups.iter_mut().zip(&plan.lrs) {
            group.last_lr = Some(lr);
        }
        for p in &plan.params {
            if let Some(slots) = self.slots.get_mut(p.name) {
                slots.steps = p.step;
                slots.last_lr = plan.lrs[p.group];
            }
        }
        self.step += 1;
        self.expected_params = None;
    }
}

impl<T: Float, D: OptimKernel<T>> Optimizer<T, D> {
    /// [`Optimizer::step`] for parameters in device buffers: the fused update of the
    /// device's [`OptimKernel`]. Custom rules run on the host only and are an error here.
    /// Every check runs before the first update, so an error of the checks changes
    /// nothing; a device that fails in the middle of the updates leaves the parameters (and
    /// their slots) it already updated updated, without counting the step.
    pub fn step_on(&mut self, params: &mut [DeviceParam<'_, T, D>]) -> Result<()> {
        for p in params.iter() {
            check::len(
                "Optimizer::step_on",
                "grad",
                self.device.buffer_len(p.value),
                self.device.buffer_len(p.grad),
            )?;
        }
        if self.check_finite {
            for p in params.iter() {
                first_non_finite(p.name, &self.device.host_values(p.grad)?)?;
            }
        }
        let shapes: SmallVec<[(&str, usize); 16]> = params
            .iter()
            .map(|p| (p.name, self.device.buffer_len(p.value)))
            .collect();
        let plan = self.plan(&shapes)?;
        let Self {
            groups,
            slots,
            device,
            ..
        } = self;
        let rules = Self::step_rules(groups, &plan);
        if let Some(p) = plan
            .params
            .iter()
            .find(|p| matches!(rules.of(p), StepRule::Custom(_)))
        {
            return Err(Error::value(
                "Optimizer::step_on",
                "params",
                "parameters whose rule has a fused kernel",
                format_args!(
                    "`{}` with the custom rule `{}`",
                    p.name,
                    groups[p.group].rule.name()
                ),
            ));
        }
        let mut created = Self::create_slots(groups, device, &plan)?;
        let mut jobs: SmallVec<[BufferJob<'_, T, D::Buffer<T>>; STEP_PARAMS]> = SmallVec::new();
        // Both maps are keyed by name; `created` holds the names `slots` lacks, so each
        // parameter's state is borrowed once, from one of them.
        let mut states: SmallVec<[NamedSlots<'_, D::Buffer<T>>; STEP_PARAMS]> = slots
            .iter_mut()
            .chain(created.iter_mut())
            .map(|(name, state)| (name.as_str(), state))
            .collect();
        for (param, p) in params.iter_mut().zip(&plan.params) {
            let at = states
                .iter()
                .position(|(name, _)| *name == param.name)
                .expect("the plan covers every parameter, with existing or created slots");
            let (_, state) = states.swap_remove(at);
            if let StepRule::Fused(update) = rules.of(p) {
                jobs.push(BufferJob {
                    update: *update,
                    param: &mut *param.value,
                    grad: param.grad,
                    slots: state.buffers.iter_mut().collect(),
                });
            }
        }
        device.update_all(&mut jobs)?;
        drop((jobs, states, rules));
        self.slots.append(&mut created);
        self.commit(&plan);
        Ok(())
    }
}

impl<T: Float, D: Device> Optimizer<T, D> {
    /// Slot `slot` of parameter `param`, copied to the host. An error for a parameter
    /// without state, and for a slot its rule does not keep (the message lists the valid
    /// names).
    pub fn slot_values(&self, param: &str, slot: &str) -> Result<Vec<T>> {
        let (state, index) = self.slot_index("Optimizer::slot_values", param, slot)?;
        self.device.download(&state.buffers[index])
    }
}

impl<T: Float> Optimizer<T, Cpu> {
    /// Slot `slot` of parameter `param`, without a copy. An error for a parameter without
    /// state, and for a slot its rule does not keep (the message lists the valid names).
    ///
    /// ```
    /// use rlgrad_optim::{Adam, Optimizer, Param};
    /// let mut opt = Optimizer::<f32>::new(Adam::torch(), 1e-3)?;
    /// let mut w = vec![1.0f32];
    /// opt.step(&mut [Param { name: "w", value: &mut w, grad: &[1.0] }])?;
    /// let err = opt.slot("w", "exp_avg").unwrap_err(); // PyTorch's name for `m`
    /// assert!(err.to_string().contains(r#"["m", "v"]"#), "{err}");
    /// # Ok::<(), rlgrad_optim::Error>(())
    /// ```
    pub fn slot(&self, param: &str, slot: &str) -> Result<&[T]> {
        let (state, index) = self.slot_index("Optimizer::slot", param, slot)?;
        Ok(&state.buffers[index])
    }

    /// Sets the parallelism of the host updates (the bits never depend on it).
    pub fn set_par(&mut self, par: Par) {
        self.device = Cpu::new(par);
    }
}
