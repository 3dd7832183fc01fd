//! `rlgrad.optim`: rlgrad-optim's fused rules updating NumPy parameter arrays in place.

use std::collections::BTreeMap;

use numpy::{
    PyArrayDyn, PyArrayMethods, PyReadwriteArrayDyn, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use rlgrad_optim::{
    Adagrad, Adam, AdamW, Builtin, Domain, GroupState, Momentum, Optimizer, OptimizerState, Param,
    ParamState, Rmsprop, Sgd, Value,
};

use crate::arrays::{Input, Real, error, input, par, to_numpy, value_error};

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_class::<PyOptimizer>()?;
    module.add_function(wrap_pyfunction!(hyperparameters, module)?)
}

/// The built-in rules, each named once: [`AnyRule`], and what the constructor reads from
/// their tables ([`Builtin`]).
macro_rules! any_rule {
    ($($rule:ident),*) => {
        /// A built-in rule with its hyper-parameters.
        #[derive(Debug, Clone, Copy)]
        enum AnyRule {
            $($rule($rule)),*
        }

        impl AnyRule {
            /// Rule `rule` of `flavor`: the flavor's defaults, then the hyper-parameters given.
            fn new(rule: &str, flavor: &str, given: &[(String, Value)]) -> PyResult<Self> {
                $(if rule == <$rule as Builtin>::NAME {
                    return configure::<$rule>(flavor, given).map(Self::$rule);
                })*
                let names = [$(<$rule as Builtin>::NAME),*];
                Err(value_error(
                    "Optimizer",
                    "rule",
                    format_args!("is `{rule}`, expected one of {}", names.join(", ")),
                ))
            }

            /// The domain of hyper-parameter `name`, the same in every rule that takes it;
            /// `None` when no rule does.
            fn domain(name: &str) -> Option<Domain> {
                None$(.or_else(|| domain::<$rule>(name)))*
            }

            fn optimizer<T: Real>(self, lr: f64) -> rlgrad_optim::Result<Optimizer<T>> {
                match self {
                    $(Self::$rule(r) => Optimizer::new(r, lr)),*
                }
            }

            /// Every rule's [`table`], by rule name.
            fn tables(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
                let out = PyDict::new(py);
                $(out.set_item(<$rule as Builtin>::NAME, table::<$rule>(py)?)?;)*
                Ok(out)
            }
        }
    };
}

any_rule!(Sgd, Momentum, Adam, AdamW, Rmsprop, Adagrad);

/// `R` of `flavor` at that flavor's defaults, with the hyper-parameters `given`.
fn configure<R: Builtin>(flavor: &str, given: &[(String, Value)]) -> PyResult<R> {
    let Some(&(_, defaults)) = R::FLAVORS.iter().find(|(name, _)| *name == flavor) else {
        let names: Vec<String> = R::FLAVORS.iter().map(|(f, _)| format!("`{f}`")).collect();
        let expected = match names.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, others)) => format!("{} or {last}", others.join(", ")),
            None => String::new(),
        };
        return Err(value_error(
            "Optimizer",
            "flavor",
            format_args!("is `{flavor}`, expected {expected} for {}", R::NAME),
        ));
    };
    let mut rule = defaults();
    for (name, value) in given {
        let Some(entry) = R::HYPERPARAMETERS.iter().find(|h| h.name == name) else {
            let takes: Vec<&str> = R::HYPERPARAMETERS.iter().map(|h| h.name).collect();
            return Err(value_error(
                "Optimizer",
                name,
                format_args!(
                    "is not a hyper-parameter of {} (it takes {takes:?})",
                    R::NAME
                ),
            ));
        };
        entry
            .set(&mut rule, *value)
            .map_err(|e| error("Optimizer", e))?;
    }
    Ok(rule)
}

fn domain<R: Builtin>(name: &str) -> Option<Domain> {
    R::HYPERPARAMETERS
        .iter()
        .find(|h| h.name == name)
        .map(|h| h.domain)
}

/// The Python type of a hyper-parameter of `domain`.
fn python_type(domain: Domain) -> &'static str {
    match domain {
        Domain::Switch => "bool",
        _ => "float",
    }
}

fn table<R: Builtin>(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let out = PyDict::new(py);
    let flavors: Vec<&str> = R::FLAVORS.iter().map(|(name, _)| *name).collect();
    out.set_item("flavors", flavors)?;
    let mut entries = Vec::with_capacity(R::HYPERPARAMETERS.len());
    for h in R::HYPERPARAMETERS {
        let defaults = PyDict::new(py);
        for (flavor, rule) in R::FLAVORS {
            match h.get(&rule()) {
                Value::Number(v) => defaults.set_item(flavor, v)?,
                Value::Switch(on) => defaults.set_item(flavor, on)?,
            }
        }
        entries.push((h.name, python_type(h.domain), defaults));
    }
    out.set_item("hyperparameters", entries)?;
    Ok(out)
}

/// The hyper-parameters given as keywords, read as PyO3 reads a declared keyword
/// argument: a name no rule takes is the TypeError of an unexpected keyword, a value that
/// does not convert is the conversion's TypeError noting the name, and None is the
/// rule's default.
fn given(keywords: &Bound<'_, PyDict>) -> PyResult<Vec<(String, Value)>> {
    let mut named = Vec::with_capacity(keywords.len());
    for (key, value) in keywords.iter() {
        let name: String = key.extract()?;
        let Some(domain) = AnyRule::domain(&name) else {
            return Err(PyTypeError::new_err(format!(
                "Optimizer.__new__() got an unexpected keyword argument '{name}'"
            )));
        };
        named.push((name, domain, value));
    }
    let mut given = Vec::with_capacity(named.len());
    for (name, domain, value) in named {
        if value.is_none() {
            continue;
        }
        let converted = match domain {
            Domain::Switch => value.extract::<bool>().map(Value::Switch),
            _ => value.extract::<f64>().map(Value::Number),
        };
        match converted {
            Ok(v) => given.push((name, v)),
            Err(e) => {
                let py = keywords.py();
                // PyO3's note on a declared argument that failed to convert.
                let _ = e
                    .value(py)
                    .call_method1("add_note", (format!("while processing '{name}'"),));
                return Err(e);
            }
        }
    }
    Ok(given)
}

/// Every built-in rule's table: its flavors and each hyper-parameter's name, Python type
/// and default per flavor (what the package's tests check `optim.py` and `optim.pyi`
/// against).
#[pyfunction(name = "_hyperparameters")]
fn hyperparameters(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    AnyRule::tables(py)
}

/// The optimizer of one dtype; both until the first step or loaded state decides.
#[derive(Debug)]
enum Inner {
    Undecided(Box<Optimizer<f32>>, Box<Optimizer<f64>>),
    F32(Box<Optimizer<f32>>),
    F64(Box<Optimizer<f64>>),
}

/// Optimizer(rule, lr, *, flavor="torch", threads=None, **hyperparameters)
/// --
///
/// An rlgrad optimizer updating NumPy parameter arrays in place, one fused pass per
/// parameter, bit-identical at every thread count. Build it through the rule classes
/// (`Sgd`, `Momentum`, `Adam`, `AdamW`, `Rmsprop`, `Adagrad`), whose docstrings carry the
/// update formulas and defaults.
///
/// `step(params, grads)` takes two dicts keyed by parameter name. The parameter dtype
/// (float32 or float64) is fixed by the first step or by loaded state. State (slots,
/// step counter, learning rates) lives here: `slot(name, slot)`, `effective_lr()`,
/// `state_dict()` / `load_state_dict(state)` (a dict of NumPy arrays: `np.savez` it).
#[pyclass(subclass, module = "rlgrad.optim", name = "Optimizer")]
#[derive(Debug)]
pub struct PyOptimizer {
    inner: Inner,
    shapes: BTreeMap<String, Vec<usize>>,
}

/// `$body` with `$opt` bound to the decided optimizer (`Undecided`: both, in turn).
macro_rules! each {
    ($self:expr, $opt:ident => $body:expr) => {
        match &mut $self.inner {
            Inner::Undecided(a, b) => {
                {
                    let $opt = a.as_mut();
                    $body;
                }
                let $opt = b.as_mut();
                $body
            }
            Inner::F32(a) => {
                let $opt = a.as_mut();
                $body
            }
            Inner::F64(b) => {
                let $opt = b.as_mut();
                $body
            }
        }
    };
}

/// `$body` with `$opt` bound to one optimizer (`Undecided`: the f64 one, whose answers
/// about learning rates and steps are those of both).
macro_rules! one {
    ($self:expr, $opt:ident => $body:expr) => {
        match &$self.inner {
            Inner::Undecided(_, b) | Inner::F64(b) => {
                let $opt = b.as_ref();
                $body
            }
            Inner::F32(a) => {
                let $opt = a.as_ref();
                $body
            }
        }
    };
}

#[pymethods]
impl PyOptimizer {
    #[new]
    #[pyo3(signature = (rule, lr, *, flavor="torch", threads=None, **hyperparameters))]
    fn new(
        rule: &str,
        lr: f64,
        flavor: &str,
        threads: Option<i64>,
        hyperparameters: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Self> {
        let given = match hyperparameters {
            Some(keywords) => given(keywords)?,
            None => Vec::new(),
        };
        let rule = AnyRule::new(rule, flavor, &given)?;
        let mut a = Box::new(
            rule.optimizer::<f32>(lr)
                .map_err(|e| error("Optimizer", e))?,
        );
        let mut b = Box::new(
            rule.optimizer::<f64>(lr)
                .map_err(|e| error("Optimizer", e))?,
        );
        let par = par("Optimizer", threads)?;
        a.set_par(par);
        b.set_par(par);
        Ok(Self {
            inner: Inner::Undecided(a, b),
            shapes: BTreeMap::new(),
        })
    }

    /// One step: `params` and `grads` are dicts with the same keys (parameter names that
    /// stay the same from step to step); each parameter is updated in place. Parameters
    /// must be writeable C-contiguous float32/float64 arrays (the update writes their
    /// memory; any other layout is a ValueError, never a silent copy); gradients have the
    /// parameter's shape and dtype, in any layout (non-C-contiguous ones are copied once).
    /// With `require_finite=True` a gradient holding a NaN or an infinity is a ValueError
    /// naming the parameter and the first such index (off by default, as in PyTorch: the
    /// NaN then reaches the parameters). A step that raises changes nothing.
    #[pyo3(signature = (params, grads, *, require_finite=false))]
    fn step(
        &mut self,
        py: Python<'_>,
        params: &Bound<'_, PyDict>,
        grads: &Bound<'_, PyDict>,
        require_finite: bool,
    ) -> PyResult<()> {
        each!(self, opt => opt.check_finite(require_finite));
        let first = params.values().into_iter().next();
        let dtype = match (&self.inner, first) {
            (Inner::F32(_), _) => crate::arrays::Dtype::F32,
            (Inner::F64(_), _) => crate::arrays::Dtype::F64,
            (Inner::Undecided(..), Some(p)) => {
                crate::arrays::dtype("Optimizer.step", "params", &p)?
            }
            (Inner::Undecided(..), None) => crate::arrays::Dtype::F32,
        };
        let shapes = match (dtype, &mut self.inner) {
            (crate::arrays::Dtype::F32, Inner::F32(opt)) => step(py, opt, params, grads)?,
            (crate::arrays::Dtype::F64, Inner::F64(opt)) => step(py, opt, params, grads)?,
            (crate::arrays::Dtype::F32, Inner::Undecided(opt, _)) => {
                let shapes = step(py, opt, params, grads)?;
                self.decide(crate::arrays::Dtype::F32);
                shapes
            }
            (crate::arrays::Dtype::F64, Inner::Undecided(_, opt)) => {
                let shapes = step(py, opt, params, grads)?;
                self.decide(crate::arrays::Dtype::F64);
                shapes
            }
            _ => unreachable!("the dtype was read from the optimizer"),
        };
        self.shapes.extend(shapes);
        Ok(())
    }

    /// The step size of the last step (`group` 0, the only one): Adam's
    /// `alpha_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)`, Adagrad's decayed rate
    /// `lr / (1 + (t - 1) * lr_decay)`, the learning rate for the other rules. A
    /// ValueError before the first step.
    #[pyo3(signature = (group=0))]
    fn effective_lr(&self, group: usize) -> PyResult<f64> {
        one!(self, opt => opt.effective_lr(group).map_err(|e| error("Optimizer.effective_lr", e)))
    }

    /// The step size parameter `name`'s last update applied, at its own step count.
    fn effective_lr_of(&self, name: &str) -> PyResult<f64> {
        one!(self, opt => opt.effective_lr_of(name).map_err(|e| error("Optimizer.effective_lr_of", e)))
    }

    /// The learning rate of the last step (`None` before the first).
    #[pyo3(signature = (group=0))]
    fn last_lr(&self, group: usize) -> Option<f64> {
        one!(self, opt => opt.last_lr(group))
    }

    /// Completed steps.
    #[getter]
    fn step_count(&self) -> u64 {
        one!(self, opt => opt.step_count())
    }

    /// The names of the slots this rule keeps per parameter (`m`, `v`, `v_max`,
    /// `momentum_buffer`, `velocity`, `change`, `square_avg`, `grad_avg`, `sum`).
    #[getter]
    fn slot_names(&self) -> Vec<&'static str> {
        one!(self, opt => opt.rule(0).map(|r| r.slot_names()).unwrap_or_default())
    }

    /// `"float32"` or `"float64"` once a step or loaded state decided it, else `None`.
    #[getter]
    fn dtype(&self) -> Option<&'static str> {
        match self.inner {
            Inner::Undecided(..) => None,
            Inner::F32(_) => Some(f32::NAME),
            Inner::F64(_) => Some(f64::NAME),
        }
    }

    /// A copy of slot `slot` of parameter `name`, shaped like the parameter. A ValueError
    /// (listing the valid names) for an unknown parameter or slot.
    fn slot<'py>(&self, py: Python<'py>, name: &str, slot: &str) -> PyResult<Bound<'py, PyAny>> {
        const F: &str = "Optimizer.slot";
        let shape = self.shape(name);
        match &self.inner {
            Inner::F32(opt) => to_numpy(
                py,
                opt.slot(name, slot).map_err(|e| error(F, e))?.to_vec(),
                &shape,
            ),
            Inner::Undecided(_, opt) | Inner::F64(opt) => to_numpy(
                py,
                opt.slot(name, slot).map_err(|e| error(F, e))?.to_vec(),
                &shape,
            ),
        }
    }

    /// Sets the learning rate of group `group` (0, the only one) from the next step on:
    /// how a run resumes with another rate, since `load_state_dict` refuses state saved
    /// with another one. A ValueError (changing nothing) for a rate that is negative or
    /// not finite.
    #[pyo3(signature = (lr, group=0))]
    fn set_lr(&mut self, lr: f64, group: usize) -> PyResult<()> {
        each!(self, opt => opt.set_schedule(group, lr).map_err(|e| error("Optimizer.set_lr", e))?);
        Ok(())
    }

    /// The state as a dict of NumPy arrays (`np.savez(path, **opt.state_dict())` stores
    /// it): `step`; per group g (only 0) `groups/g/rule`, `groups/g/last_lr` (NaN before
    /// the first step), `groups/g/schedule` and `groups/g/hyperparameters/<name>`; per
    /// parameter `params/<name>/steps`, `params/<name>/last_lr`, `params/<name>/len`,
    /// `params/<name>/group` and `params/<name>/slots/<slot>` (exact values, shaped like
    /// the parameter).
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match &self.inner {
            Inner::F32(opt) => self.export(py, opt),
            Inner::Undecided(_, opt) | Inner::F64(opt) => self.export(py, opt),
        }
    }

    /// Restores a `state_dict()`, so that the next step is exactly the one the saved
    /// optimizer would have taken. The hyper-parameters are not taken from the state but
    /// checked against this optimizer's: another rule, flavor or value is a ValueError
    /// naming both. Slots fix the dtype. On error nothing changes.
    fn load_state_dict(&mut self, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let has = |dtype: &str| -> PyResult<bool> {
            for (key, value) in state.iter() {
                let key: String = key.extract()?;
                if key.starts_with("params/")
                    && key.contains("/slots/")
                    && let Ok(array) = value.cast::<PyUntypedArray>()
                    && array.dtype().to_string() == dtype
                {
                    return Ok(true);
                }
            }
            Ok(false)
        };
        let dtype = if has(f32::NAME)? {
            Some(crate::arrays::Dtype::F32)
        } else if has(f64::NAME)? {
            Some(crate::arrays::Dtype::F64)
        } else {
            None
        };
        let mut shapes = BTreeMap::new();
        match (dtype, &mut self.inner) {
            (Some(crate::arrays::Dtype::F32), Inner::F32(opt) | Inner::Undecided(opt, _)) => {
                load(opt, state, &mut shapes)?;
                self.decide(crate::arrays::Dtype::F32);
            }
            (Some(crate::arrays::Dtype::F64), Inner::F64(opt) | Inner::Undecided(_, opt)) => {
                load(opt, state, &mut shapes)?;
                self.decide(crate::arrays::Dtype::F64);
            }
            (Some(_), _) => {
                return Err(PyTypeError::new_err(format!(
                    "Optimizer.load_state_dict: argument `state` holds slots of another dtype than this optimizer's {}",
                    self.dtype().unwrap_or("?")
                )));
            }
            (None, Inner::Undecided(a, b)) => {
                // No slot fixes the dtype: both must take the state, or neither does.
                let (mut a2, mut b2) = (a.clone(), b.clone());
                load(&mut a2, state, &mut shapes)?;
                load(&mut b2, state, &mut shapes)?;
                (*a, *b) = (a2, b2);
            }
            (None, _) => each!(self, opt => load(opt, state, &mut shapes)?),
        }
        self.shapes = shapes;
        Ok(())
    }

    fn __repr__(&self) -> String {
        let rule = one!(self, opt => opt.rule(0).map(|r| r.spec().to_string()).unwrap_or_default());
        let lr = one!(self, opt => opt.state().ok().and_then(|s| s.groups.first().cloned()));
        let hyper = lr
            .map(|g| {
                g.hyperparameters
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default();
        format!("Optimizer({rule}; {hyper}; steps={})", self.step_count())
    }
}

impl PyOptimizer {
    fn decide(&mut self, dtype: crate::arrays::Dtype) {
        let inner = std::mem::replace(
            &mut self.inner,
            Inner::F32(Box::new(
                AnyRule::Sgd(Sgd::default())
                    .optimizer(0.0)
                    .expect("plain SGD with lr 0 is valid"),
            )),
        );
        self.inner = match (inner, dtype) {
            (Inner::Undecided(a, _), crate::arrays::Dtype::F32) => Inner::F32(a),
            (Inner::Undecided(_, b), crate::arrays::Dtype::F64) => Inner::F64(b),
            (decided, _) => decided,
        };
    }

    fn shape(&self, name: &str) -> Vec<usize> {
        self.shapes.get(name).cloned().unwrap_or_default()
    }

    fn export<'py, T: Real>(
        &self,
        py: Python<'py>,
        opt: &Optimizer<T>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let state = opt.state().map_err(|e| error("Optimizer.state_dict", e))?;
        let np = py.import("numpy")?;
        let out = PyDict::new(py);
        out.set_item("step", np.getattr("uint64")?.call1((state.step,))?)?;
        let f64_of = |v: f64| np.getattr("float64")?.call1((v,));
        let str_of = |s: &str| np.getattr("str_")?.call1((s,));
        for (g, (group, last_lr)) in state.groups.iter().zip(&state.last_lrs).enumerate() {
            out.set_item(format!("groups/{g}/rule"), str_of(&group.rule.to_string())?)?;
            out.set_item(
                format!("groups/{g}/last_lr"),
                f64_of(last_lr.unwrap_or(f64::NAN))?,
            )?;
            if let Some(schedule) = &group.schedule {
                out.set_item(format!("groups/{g}/schedule"), str_of(schedule)?)?;
            }
            for (name, value) in &group.hyperparameters {
                out.set_item(
                    format!("groups/{g}/hyperparameters/{name}"),
                    f64_of(*value)?,
                )?;
            }
        }
        for (name, param) in state.params {
            let shape = match self.shapes.get(&name) {
                Some(shape) => shape.clone(),
                None => vec![param.len],
            };
            out.set_item(
                format!("params/{name}/steps"),
                np.getattr("uint64")?.call1((param.steps,))?,
            )?;
            out.set_item(format!("params/{name}/last_lr"), f64_of(param.last_lr)?)?;
            out.set_item(
                format!("params/{name}/len"),
                np.getattr("uint64")?.call1((param.len,))?,
            )?;
            out.set_item(
                format!("params/{name}/group"),
                np.getattr("int64")?
                    .call1((param.group.map_or(-1, |g| g as i64),))?,
            )?;
            for (slot, values) in param.slots {
                out.set_item(
                    format!("params/{name}/slots/{slot}"),
                    to_numpy(py, values, &shape)?,
                )?;
            }
        }
        Ok(out)
    }
}

/// One step of `opt` over the dicts, the GIL released during the update; the shapes of
/// the parameters stepped.
fn step<T: Real>(
    py: Python<'_>,
    opt: &mut Optimizer<T>,
    params: &Bound<'_, PyDict>,
    grads: &Bound<'_, PyDict>,
) -> PyResult<Vec<(String, Vec<usize>)>> {
    const F: &str = "Optimizer.step";
    if params.len() != grads.len() {
        return Err(value_error(
            F,
            "grads",
            format_args!(
                "has {} entries, expected one per parameter ({})",
                grads.len(),
                params.len()
            ),
        ));
    }
    let mut names = Vec::with_capacity(params.len());
    let mut values: Vec<PyReadwriteArrayDyn<'_, T>> = Vec::with_capacity(params.len());
    let mut gradients: Vec<Input<'_, T>> = Vec::with_capacity(params.len());
    for (key, value) in params.iter() {
        let name: String = key.extract().map_err(|_| {
            PyTypeError::new_err(format!("{F}: parameter names must be str, got {key}"))
        })?;
        let array = value.cast::<PyArrayDyn<T>>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{F}: parameter `{name}` must be a numpy.ndarray of {} (the optimizer's dtype)",
                T::NAME
            ))
        })?;
        if !array.is_c_contiguous() {
            return Err(value_error(
                F,
                "params",
                format_args!(
                    "`{name}` is not C-contiguous: an in-place update needs the parameter's own memory in C order (np.ascontiguousarray, then keep that array)"
                ),
            ));
        }
        let writable = array.try_readwrite().map_err(|e| {
            value_error(
                F,
                "params",
                format_args!("`{name}` cannot be updated in place: {e}"),
            )
        })?;
        let grad = grads
            .get_item(&key)?
            .ok_or_else(|| value_error(F, "grads", format_args!("has no gradient for `{name}`")))?;
        let grad = input::<T>(F, "grads", &grad)?;
        if grad.shape() != writable.shape() {
            return Err(value_error(
                F,
                "grads",
                format_args!(
                    "`{name}` has shape {:?}, expected {:?} like the parameter",
                    grad.shape(),
                    writable.shape()
                ),
            ));
        }
        names.push(name);
        values.push(writable);
        gradients.push(grad);
    }
    let shapes: Vec<(String, Vec<usize>)> = names
        .iter()
        .zip(&values)
        .map(|(n, v)| (n.clone(), v.shape().to_vec()))
        .collect();
    let mut slices = Vec::with_capacity(values.len());
    for (name, value) in names.iter().zip(values.iter_mut()) {
        let slice = value
            .as_slice_mut()
            .map_err(|e| value_error(F, "params", format_args!("`{name}` is not writable: {e}")))?;
        slices.push(slice);
    }
    let mut batch: Vec<Param<'_, T>> = names
        .iter()
        .zip(slices)
        .zip(&gradients)
        .map(|((name, value), grad)| Param {
            name,
            value,
            grad: grad.data(),
        })
        .collect();
    py.detach(|| opt.step(&mut batch))
        .map_err(|e| error(F, e))?;
    Ok(shapes)
}

/// A float64 scalar of the state dict.
fn number(state: &Bound<'_, PyDict>, key: &str) -> PyResult<Option<f64>> {
    state.get_item(key)?.map(|v| v.extract::<f64>()).transpose()
}

/// A count of the state dict.
fn count(state: &Bound<'_, PyDict>, key: &str) -> PyResult<Option<u64>> {
    state.get_item(key)?.map(|v| v.extract::<u64>()).transpose()
}

fn missing(key: &str) -> PyErr {
    value_error(
        "Optimizer.load_state_dict",
        "state",
        format_args!("has no `{key}`"),
    )
}

/// Loads a state dict into `opt` (nothing changes on error), recording the slot shapes.
fn load<T: Real>(
    opt: &mut Optimizer<T>,
    state: &Bound<'_, PyDict>,
    shapes: &mut BTreeMap<String, Vec<usize>>,
) -> PyResult<()> {
    const F: &str = "Optimizer.load_state_dict";
    let own = opt.state().map_err(|e| error(F, e))?;
    let step = count(state, "step")?.ok_or_else(|| missing("step"))?;
    let mut groups = Vec::new();
    let mut last_lrs = Vec::new();
    for (g, group) in own.groups.iter().enumerate() {
        let prefix = format!("groups/{g}/");
        let rule_key = format!("{prefix}rule");
        let rule: String = state
            .get_item(&rule_key)?
            .ok_or_else(|| missing(&rule_key))?
            .str()?
            .to_string();
        if rule != group.rule.to_string() {
            return Err(value_error(
                F,
                "state",
                format_args!(
                    "was saved by rule {rule}, this optimizer's group {g} is {}",
                    group.rule
                ),
            ));
        }
        let lr_key = format!("{prefix}last_lr");
        let last_lr = number(state, &lr_key)?.ok_or_else(|| missing(&lr_key))?;
        last_lrs.push((!last_lr.is_nan()).then_some(last_lr));
        let schedule = match state.get_item(format!("{prefix}schedule"))? {
            Some(s) => Some(s.str()?.to_string()),
            None => None,
        };
        let mut hyperparameters = BTreeMap::new();
        let hp_prefix = format!("{prefix}hyperparameters/");
        for (key, value) in state.iter() {
            let key: String = key.extract()?;
            if let Some(name) = key.strip_prefix(&hp_prefix) {
                hyperparameters.insert(name.to_owned(), value.extract::<f64>()?);
            }
        }
        groups.push(GroupState {
            rule: group.rule.clone(),
            hyperparameters,
            schedule,
        });
    }
    let mut params: BTreeMap<String, ParamState<T>> = BTreeMap::new();
    for (key, value) in state.iter() {
        let key: String = key.extract()?;
        let Some(rest) = key.strip_prefix("params/") else {
            continue;
        };
        let Some((name, field)) = rest.rsplit_once('/') else {
            return Err(value_error(
                F,
                "state",
                format_args!("has a bad key `{key}`"),
            ));
        };
        // `params/<name>/slots/<slot>`: the name ends before `/slots`.
        let (name, slot) = match name.rsplit_once('/') {
            Some((param, "slots")) => (param, Some(field)),
            _ => (name, None),
        };
        let entry = params.entry(name.to_owned()).or_insert_with(|| ParamState {
            rule: groups
                .first()
                .map(|g| g.rule.clone())
                .unwrap_or_else(|| rlgrad_optim::RuleSpec::new("none")),
            group: None,
            len: 0,
            steps: 0,
            last_lr: 0.0,
            slots: BTreeMap::new(),
        });
        match (slot, field) {
            (Some(slot), _) => {
                let array = Input::<T>::new(F, "state", T::NAME, &value)?;
                shapes.insert(name.to_owned(), array.shape().to_vec());
                entry.slots.insert(slot.to_owned(), array.data().to_vec());
            }
            (None, "steps") => entry.steps = value.extract()?,
            (None, "last_lr") => entry.last_lr = value.extract()?,
            (None, "len") => entry.len = value.extract()?,
            (None, "group") => {
                let g: i64 = value.extract()?;
                entry.group = usize::try_from(g).ok();
                if let Some(group) = entry.group.and_then(|g| groups.get(g)) {
                    entry.rule = group.rule.clone();
                }
            }
            (None, other) => {
                return Err(value_error(
                    F,
                    "state",
                    format_args!("has an unknown key `{key}` (field `{other}`)"),
                ));
            }
        }
    }
    for (name, param) in &params {
        if param.slots.is_empty() && !opt_rule_has_no_slots(opt) {
            return Err(value_error(
                F,
                "state",
                format_args!("has no slots for parameter `{name}`"),
            ));
        }
        if param.slots.is_empty() && !shapes.contains_key(name) {
            shapes.insert(name.clone(), Vec::new());
        }
    }
    opt.load_state(OptimizerState {
        step,
        last_lrs,
        groups,
        params,
    })
    .map_err(refused_load)
}

/// A refused load's error, raised from `load_state_dict`, its advice in the Python API's
/// terms: the Rust crate's names the methods that change hyper-parameters after loading,
/// of which Python has `set_lr`.
fn refused_load(e: rlgrad_optim::Error) -> PyErr {
    const RUST_ADVICE: &str =
        "change them after loading: Optimizer::set_schedule, Optimizer::set_rule";
    const PYTHON_ADVICE: &str = "change the learning rate after loading with \
                                 Optimizer.set_lr; the other hyper-parameters resume as saved";
    let message = e.in_function("Optimizer.load_state_dict").to_string();
    PyValueError::new_err(message.replace(RUST_ADVICE, PYTHON_ADVICE))
}

fn opt_rule_has_no_slots<T: Real>(opt: &Optimizer<T>) -> bool {
    opt.rule(0).is_none_or(|r| r.slot_names().is_empty())
}
