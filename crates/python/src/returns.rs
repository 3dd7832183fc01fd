//! `rlgrad.returns`: the estimators of rlgrad-returns on `[T]` / `[T, B]` arrays (axis 0
//! is time), read in place when C-ordered (time-major) or, for `[T, B]`, Fortran-ordered
//! (batch-major: `x.T` of a C-ordered `[B, T]` array).

use numpy::{PyArrayDyn, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use rlgrad_returns::{
    Episodes, FlagSlice, SliceEpisodes, SliceLayout, TimeMajor, Truncation, VtraceParams,
    discounted_returns_into, gae_into, lambda_returns_into, n_step_returns_into, vtrace_into,
};

use crate::arrays::{
    Input, Order, ReadOrder, Real, by_dtype, error, input, input_in, par, same_shape, to_numpy,
    to_numpy_in, type_error, value_error, zeroed,
};

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(discounted_cumsum, module)?)?;
    module.add_function(wrap_pyfunction!(standardize, module)?)?;
    module.add_function(wrap_pyfunction!(discounted_returns, module)?)?;
    module.add_function(wrap_pyfunction!(gae, module)?)?;
    module.add_function(wrap_pyfunction!(lambda_returns, module)?)?;
    module.add_function(wrap_pyfunction!(n_step_returns, module)?)?;
    module.add_function(wrap_pyfunction!(vtrace, module)?)?;
    Ok(())
}

/// The `[T, B]` arrays of one call: their shape (that of `rewards`), the order they are
/// read in (the order of `rewards`: Fortran for a Fortran-ordered `[T, B]` array, C
/// otherwise; the others are read in place when stored alike, copied once otherwise) and
/// the layout the kernels take.
struct Frame {
    shape: Vec<usize>,
    order: Order,
    layout: SliceLayout,
}

/// The keyword arguments of every estimator that say how it runs: `threads` (None or 0:
/// every thread of rlgrad's pool) and `require_finite` (refuse NaN and infinities in the
/// inputs, naming the argument and the first index).
#[derive(Debug, Clone, Copy)]
struct RunOptions {
    threads: Option<i64>,
    require_finite: bool,
}

impl Frame {
    /// The frame of `rewards`: `[T]` is one column, `[T, B]` B columns; its layout asks
    /// for finite inputs as `run` says.
    fn new<T: Real>(function: &str, rewards: &Input<'_, T>, run: RunOptions) -> PyResult<Self> {
        let shape = rewards.shape().to_vec();
        let time_major = match *shape {
            [t] => TimeMajor::new(t, 1),
            [t, b] => TimeMajor::new(t, b),
            _ => {
                return Err(value_error(
                    function,
                    "rewards",
                    format_args!("has shape {shape:?}, expected [T] or [T, B] (axis 0 is time)"),
                ));
            }
        };
        let order = rewards.order();
        let layout = match order {
            Order::C => time_major.into(),
            Order::Fortran => SliceLayout::batch_major(time_major.t, time_major.b),
        };
        let layout = if run.require_finite {
            layout.require_finite()
        } else {
            layout
        };
        Ok(Self {
            shape,
            order,
            layout,
        })
    }

    /// `[T, B]` array argument `name`, checked to have the shape of `rewards`, in the
    /// frame's order.
    fn input<'py, T: Real>(
        &self,
        function: &str,
        name: &str,
        obj: &Bound<'py, PyAny>,
    ) -> PyResult<Input<'py, T>> {
        self.check_shape(function, name, obj)?;
        input_in::<T>(function, name, obj, ReadOrder::In(self.order))
    }

    /// A `ValueError` when `obj` is an array of another shape than `rewards`, before any
    /// of its data is read (or copied into the frame's order).
    fn check_shape(&self, function: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<()> {
        match obj.cast::<PyUntypedArray>() {
            Ok(array) => same_shape(function, name, array.shape(), "rewards", &self.shape),
            Err(_) => Ok(()),
        }
    }

    /// An output computed in the frame's order, as an array of the frame's shape.
    fn output<'py, T: Real>(&self, py: Python<'py>, values: Vec<T>) -> PyResult<Bound<'py, PyAny>> {
        to_numpy_in(py, values, &self.shape, self.order)
    }
}

/// `bootstrap`: `[B]` for `[T, B]` data, `[]` (or a Python float) for `[T]` data.
fn bootstrap<T: Real>(
    function: &str,
    obj: &Bound<'_, PyAny>,
    rewards: &[usize],
) -> PyResult<Vec<T>> {
    if obj.cast::<PyArrayDyn<T>>().is_err() && obj.cast::<numpy::PyUntypedArray>().is_err() {
        let value: f64 = obj.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "{function}: argument `bootstrap` must be a float or a numpy.ndarray of {}",
                T::NAME
            ))
        })?;
        if rewards.len() != 1 {
            return Err(value_error(
                function,
                "bootstrap",
                "must be an array of shape [B] for [T, B] rewards, got a float",
            ));
        }
        return Ok(vec![T::from_f64(value)]);
    }
    let array = input::<T>(function, "bootstrap", obj)?;
    let want: &[usize] = match rewards {
        [_] => &[],
        [_, b] => &[*b],
        _ => &[],
    };
    if array.shape() != want && !(rewards.len() == 1 && array.shape() == [1]) {
        return Err(value_error(
            function,
            "bootstrap",
            format_args!(
                "has shape {:?}, expected {want:?} (V(s_T) of each column of `rewards` {rewards:?})",
                array.shape()
            ),
        ));
    }
    Ok(array.data().to_vec())
}

/// Episode-end flags, each 0 or 1, of any bool, integer or float dtype (whatever the
/// data's dtype). Gymnasium's `bool` arrays, `uint8` masks and floats of the data's dtype
/// are read in place (rlgrad-returns refuses values other than 0 and 1 in them); other
/// dtypes are checked while they are copied into bytes.
enum Flags<'py, T: Real> {
    Bools(Input<'py, bool>),
    Bytes(Input<'py, u8>),
    Values(Input<'py, T>),
    Copied(Vec<u8>),
}

/// The element types of flags that are copied into bytes.
trait FlagElement: numpy::Element + Copy + Default + PartialEq + std::fmt::Display {
    const ZERO: Self;
    const ONE: Self;
}

macro_rules! flag_elements {
    ($zero:literal, $one:literal: $($t:ty),*) => {
        $(impl FlagElement for $t {
            const ZERO: Self = $zero;
            const ONE: Self = $one;
        })*
    };
}
flag_elements!(0, 1: i8, i16, i32, i64, u16, u32, u64);
flag_elements!(0.0, 1.0: f32, f64);

/// What a flag argument takes, for type errors.
const FLAG_DTYPES: &str = "bool, an integer or a float dtype (flags are 0 or 1)";

impl<'py, T: Real> Flags<'py, T> {
    /// `[T, B]` flag argument `name`, checked to have the shape of `rewards`, in the
    /// frame's order.
    fn new(
        function: &'static str,
        name: &'static str,
        obj: &Bound<'py, PyAny>,
        frame: &Frame,
    ) -> PyResult<Self> {
        frame.check_shape(function, name, obj)?;
        let order = ReadOrder::In(frame.order);
        if obj.cast::<PyArrayDyn<bool>>().is_ok() {
            return Input::new_in(function, name, FLAG_DTYPES, obj, order).map(Self::Bools);
        }
        if obj.cast::<PyArrayDyn<u8>>().is_ok() {
            return Input::new_in(function, name, FLAG_DTYPES, obj, order).map(Self::Bytes);
        }
        if obj.cast::<PyArrayDyn<T>>().is_ok() {
            return Input::new_in(function, name, FLAG_DTYPES, obj, order).map(Self::Values);
        }
        macro_rules! copied_as {
            ($($t:ty),*) => {
                $(if obj.cast::<PyArrayDyn<$t>>().is_ok() {
                    return Self::copied::<$t>(function, name, obj, frame);
                })*
            };
        }
        copied_as!(i8, i16, i32, i64, u16, u32, u64, f32, f64);
        Err(type_error(function, name, FLAG_DTYPES, obj))
    }

    /// Flags of element type `X` as bytes, each checked to be 0 or 1: any other value is
    /// a `ValueError` naming the argument and the step and column of the first one, in
    /// the words of the Rust kernels' own check of the flags they read in place.
    fn copied<X: FlagElement>(
        function: &'static str,
        name: &'static str,
        obj: &Bound<'py, PyAny>,
        frame: &Frame,
    ) -> PyResult<Self> {
        let flags =
            Input::<X>::new_in(function, name, FLAG_DTYPES, obj, ReadOrder::In(frame.order))?;
        flags
            .data()
            .iter()
            .enumerate()
            .map(|(i, &flag)| match flag {
                f if f == X::ZERO => Ok(0),
                f if f == X::ONE => Ok(1),
                _ => Err(error(
                    function,
                    frame.layout.invalid_flag(function, name, i, flag),
                )),
            })
            .collect::<PyResult<Vec<u8>>>()
            .map(Self::Copied)
    }

    fn slice(&self) -> FlagSlice<'_, T> {
        match self {
            Self::Bools(a) => FlagSlice::from(a.data()),
            Self::Bytes(a) => FlagSlice::from(a.data()),
            Self::Values(a) => FlagSlice::from(a.data()),
            Self::Copied(bytes) => FlagSlice::from(bytes.as_slice()),
        }
    }
}

/// The episode arguments of an estimator, read and checked: the [`Episodes`] they describe
/// borrows from here.
struct EpisodeArgs<'py, T: Real> {
    gamma: Option<T>,
    discounts: Option<Input<'py, T>>,
    terminated: Option<Flags<'py, T>>,
    truncated: Option<Flags<'py, T>>,
    /// No termination where only truncation flags were given.
    no_termination: Vec<u8>,
    final_values: Vec<T>,
}

/// Where `final_values` of truncated steps come from when not given.
enum NextValue<'a, T> {
    /// `values[t + 1]`, and `bootstrap` at the last step (GAE, V-trace).
    Values(&'a [T], &'a [T]),
    /// `next_values[t]` (TD(lambda), n-step).
    NextValues(&'a [T]),
    /// Nothing: `final_values` is required with `truncated`.
    Required,
}

#[allow(clippy::too_many_arguments)]
fn episode_args<'py, T: Real>(
    function: &'static str,
    frame: &Frame,
    gamma: Option<f64>,
    discounts: Option<&Bound<'py, PyAny>>,
    terminated: Option<&Bound<'py, PyAny>>,
    truncated: Option<&Bound<'py, PyAny>>,
    final_values: Option<&Bound<'py, PyAny>>,
    next: NextValue<'_, T>,
) -> PyResult<EpisodeArgs<'py, T>> {
    let mut args = EpisodeArgs {
        gamma: gamma.map(T::from_f64),
        discounts: None,
        terminated: None,
        truncated: None,
        no_termination: Vec::new(),
        final_values: Vec::new(),
    };
    if let Some(d) = discounts {
        if gamma.is_some() || terminated.is_some() || truncated.is_some() || final_values.is_some()
        {
            return Err(value_error(
                function,
                "discounts",
                "replaces gamma, terminated, truncated and final_values: pass gamma=None and none of the others",
            ));
        }
        args.discounts = Some(frame.input::<T>(function, "discounts", d)?);
        return Ok(args);
    }
    if gamma.is_none() {
        return Err(value_error(
            function,
            "gamma",
            "is required (None only together with `discounts`)",
        ));
    }
    if let Some(t) = terminated {
        args.terminated = Some(Flags::new(function, "terminated", t, frame)?);
    }
    match (truncated, final_values) {
        (None, Some(_)) => {
            return Err(value_error(
                function,
                "final_values",
                "is read only at truncated steps: pass `truncated` too",
            ));
        }
        (None, None) => {}
        (Some(tr), given) => {
            args.truncated = Some(Flags::new(function, "truncated", tr, frame)?);
            if args.terminated.is_none() {
                args.no_termination = vec![0; frame.shape.iter().product()];
            }
            args.final_values = match (given, next) {
                (Some(fv), _) => frame
                    .input::<T>(function, "final_values", fv)?
                    .data()
                    .to_vec(),
                (None, NextValue::Values(values, bootstrap)) => {
                    next_row_values(frame.layout, values, bootstrap)
                }
                (None, NextValue::NextValues(next_values)) => next_values.to_vec(),
                (None, NextValue::Required) => {
                    return Err(value_error(
                        function,
                        "final_values",
                        "is required with `truncated`: V(final observation) at each truncated step",
                    ));
                }
            };
        }
    }
    Ok(args)
}

/// `values[t + 1]` of every step, and `bootstrap` at the last one, stored in `layout`.
fn next_row_values<T: Real>(layout: SliceLayout, values: &[T], bootstrap: &[T]) -> Vec<T> {
    let TimeMajor { t, b, .. } = layout.shape();
    let mut out = Vec::with_capacity(values.len());
    if layout.is_batch_major() {
        // Each column's steps are adjacent: its values from step 1 on, then its bootstrap.
        for (column, &last) in values.chunks_exact(t.max(1)).zip(bootstrap).take(b) {
            out.extend_from_slice(&column[1..]);
            out.push(last);
        }
    } else {
        out.extend_from_slice(values.get(b..).unwrap_or_default());
        out.extend_from_slice(bootstrap);
    }
    out.truncate(values.len());
    out
}

impl<'py, T: Real> EpisodeArgs<'py, T> {
    fn episodes(&self) -> SliceEpisodes<'_, T> {
        if let Some(d) = &self.discounts {
            return Episodes::Discounts(d.data());
        }
        let gamma = self.gamma.unwrap_or_else(T::zero);
        let terminated = match &self.terminated {
            Some(flags) => flags.slice(),
            None => FlagSlice::Bytes(&self.no_termination),
        };
        match &self.truncated {
            Some(truncated) => Episodes::Flags {
                gamma,
                terminated,
                truncation: Some(Truncation {
                    truncated: truncated.slice(),
                    final_values: &self.final_values,
                }),
            },
            None if self.terminated.is_some() => Episodes::Flags {
                gamma,
                terminated,
                truncation: None,
            },
            None => Episodes::Constant { gamma },
        }
    }
}

/// discounted_cumsum(x, gamma, *, standardize=False, require_finite=False)
/// --
///
/// The discounted cumulative sum of one trajectory `x` ([T]):
/// `G_t = x_t + gamma * G_{t+1}`, `G_T = 0` (the TF actor-critic tutorial's expected
/// returns). With `standardize=True`, `(G - mean(G)) / (std(G) + eps)` with the population
/// std (ddof 0) and `eps = 1.1920929e-07` (float32's machine epsilon), as the tutorial
/// does; `standardize(G, eps, ddof)` gives other conventions.
///
/// `gamma` in [0, 1]. A float32 or float64 array in, the same dtype out; any layout (a
/// non-contiguous `x` is copied once). `require_finite=True` refuses a NaN or an infinity
/// in `x` (a ValueError naming the first index).
#[pyfunction]
#[pyo3(signature = (x, gamma, *, standardize=false, require_finite=false))]
fn discounted_cumsum<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    gamma: f64,
    standardize: bool,
    require_finite: bool,
) -> PyResult<Bound<'py, PyAny>> {
    by_dtype!(
        "discounted_cumsum",
        "x",
        x,
        discounted_cumsum_of(py, x, gamma, standardize, require_finite)
    )
}

fn discounted_cumsum_of<'py, T: Real>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    gamma: f64,
    standardize: bool,
    require_finite: bool,
) -> PyResult<Bound<'py, PyAny>> {
    const F: &str = "discounted_cumsum";
    let x = input::<T>(F, "x", x)?;
    if x.shape().len() != 1 {
        return Err(value_error(
            F,
            "x",
            format_args!("has shape {:?}, expected one trajectory [T]", x.shape()),
        ));
    }
    let data = x.data();
    finite_if(F, "x", data, require_finite)?;
    let gamma = T::from_f64(gamma);
    let eps = T::from_f64(f64::from(f32::EPSILON));
    let out = py.detach(|| {
        let g = rlgrad_returns::discounted_cumsum(data, gamma)?;
        if standardize {
            rlgrad_returns::standardize(&g, eps, 0)
        } else {
            Ok(g)
        }
    });
    to_numpy(py, out.map_err(|e| error(F, e))?, x.shape())
}

/// With `require_finite`, a `ValueError` naming `argument` and the first index of a NaN or
/// an infinity in `values`.
fn finite_if<T: Real>(
    function: &'static str,
    argument: &'static str,
    values: &[T],
    require_finite: bool,
) -> PyResult<()> {
    if require_finite {
        rlgrad_core::check::finite(function, argument, values).map_err(|e| error(function, e))?;
    }
    Ok(())
}

/// standardize(x, eps, ddof=0, *, require_finite=False)
/// --
///
/// `(x - mean(x)) / (std(x) + eps)` over every element of `x` (any shape), with
/// `std = sqrt(sum((x - mean)^2) / (n - ddof))`; sums in rlgrad's canonical order, so the
/// bits do not depend on the thread count. PyTorch/CleanRL/SB3 advantage normalization
/// `(adv - adv.mean()) / (adv.std() + 1e-8)` is `standardize(adv, 1e-8, 1)`; NumPy's and
/// TF's population std is `ddof=0`. A single element with `eps=0` gives NaN (0/0).
///
/// Errors (ValueError): `eps` negative or not finite; `n <= ddof` for a non-empty `x`; with
/// `require_finite=True`, a NaN or an infinity in `x`.
#[pyfunction]
#[pyo3(signature = (x, eps, ddof=0, *, require_finite=false))]
fn standardize<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    eps: f64,
    ddof: usize,
    require_finite: bool,
) -> PyResult<Bound<'py, PyAny>> {
    by_dtype!(
        "standardize",
        "x",
        x,
        standardize_of(py, x, eps, ddof, require_finite)
    )
}

fn standardize_of<'py, T: Real>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    eps: f64,
    ddof: usize,
    require_finite: bool,
) -> PyResult<Bound<'py, PyAny>> {
    const F: &str = "standardize";
    let x = input::<T>(F, "x", x)?;
    let data = x.data();
    finite_if(F, "x", data, require_finite)?;
    let eps = T::from_f64(eps);
    let out = py.detach(|| rlgrad_returns::standardize(data, eps, ddof));
    to_numpy(py, out.map_err(|e| error(F, e))?, x.shape())
}

/// discounted_returns(rewards, bootstrap, *, gamma, terminated=None, truncated=None, final_values=None, discounts=None, threads=None, require_finite=False)
/// --
///
/// Discounted returns `G_t = r'_t + d_t * G_{t+1}`, `G_T = bootstrap`, per column of
/// `rewards` ([T] or [T, B]; axis 0 is time).
///
/// Episode ends: `terminated[t]` (0 or 1, of a bool, integer or float dtype; any other
/// value is a ValueError naming the step and column) ends the episode at step t: `d_t = 0`, nothing after it is used. `truncated[t]` (a time limit) also
/// cuts, but bootstraps: `r'_t = r_t + gamma * final_values[t]`, with `final_values[t]` =
/// V(final observation) of the truncated episode (required here). Otherwise `d_t = gamma`.
/// `discounts` ([T, B], rlax's per-step `gamma * (1 - done)`) replaces all of them
/// (`gamma=None`). `bootstrap` is V(s_T): [B], or [] / a float for [T] rewards.
///
/// Layouts, `threads` and `require_finite` as in `gae`.
#[pyfunction]
#[pyo3(signature = (rewards, bootstrap, *, gamma, terminated=None, truncated=None, final_values=None, discounts=None, threads=None, require_finite=false))]
#[allow(clippy::too_many_arguments)]
fn discounted_returns<'py>(
    py: Python<'py>,
    rewards: &Bound<'py, PyAny>,
    bootstrap: &Bound<'py, PyAny>,
    gamma: Option<f64>,
    terminated: Option<&Bound<'py, PyAny>>,
    truncated: Option<&Bound<'py, PyAny>>,
    final_values: Option<&Bound<'py, PyAny>>,
    discounts: Option<&Bound<'py, PyAny>>,
    threads: Option<i64>,
    require_finite: bool,
) -> PyResult<Bound<'py, PyAny>> {
    by_dtype!(
        "discounted_returns",
        "rewards",
        rewards,
        discounted_returns_of(
            py,
            rewards,
            bootstrap,
            gamma,
            [terminated, truncated, final_values, discounts],
            RunOptions {
                threads,
                require_finite
            }
        )
    )
}

fn discounted_returns_of<'py, T: Real>(
    py: Python<'py>,
    rewards: &Bound<'py, PyAny>,
    bootstrap_obj: &Bound<'py, PyAny>,
    gamma: Option<f64>,
    [terminated, truncated, final_values, discounts]: [Option<&Bound<'py, PyAny>>; 4],
    run: RunOptions,
) -> PyResult<Bound<'py, PyAny>> {
    const F: &str = "discounted_returns";
    let rewards = input_in::<T>(F, "rewards", rewards, ReadOrder::Own)?;
    let frame = Frame::new(F, &rewards, run)?;
    let bootstrap = bootstrap::<T>(F, bootstrap_obj, &frame.shape)?;
    let args = episode_args(
        F,
        &frame,
        gamma,
        discounts,
        terminated,
        truncated,
        final_values,
        NextValue::Required,
    )?;
    let mut out = zeroed::<T>(F, rewards.data().len())?;
    let (r, episodes, par, layout) = (
        rewards.data(),
        args.episodes(),
        par(F, run.threads)?,
        frame.layout,
    );
    py.detach(|| discounted_returns_into(par, layout, r, episodes, &bootstrap, &mut out))
        .map_err(|e| error(F, e))?;
    frame.output(py, out)
}

/// gae(rewards, values, bootstrap, *, gamma, lam, terminated=None, truncated=None, final_values=None, discounts=None, threads=None, require_finite=False)
/// --
///
/// Generalized advantage estimation over `rewards` and `values` ([T] or
/// [T, B]; axis 0 is time), returning `(advantages, returns)`:
///
///     delta_t = r'_t + d_t * V(s_{t+1}) - V(s_t)      (V(s_T) = bootstrap)
///     A_t     = delta_t + lam * d_t * A_{t+1}          (A_T = 0)
///     returns = A + values
///
/// `bootstrap` is V(s_T): [B], or [] / a float for [T] data. `terminated[t]` (0 or 1, of a
/// bool, integer or float dtype) means the episode ended at step t: `d_t = 0`, nothing after it is used.
/// `truncated[t]` (a time limit) also cuts, but bootstraps:
/// `r'_t = r_t + gamma * final_values[t]`. Without `final_values`, the value of the final
/// observation is taken from the next row, `values[t + 1]` (`bootstrap` at the last row):
/// Gymnasium 1.x's next-step autoreset, where the row after a truncation holds the final
/// observation. With same-step autoreset pass `final_values` (V of
/// `info["final_obs"]`). Elsewhere `d_t = gamma`. `discounts` ([T, B], rlax) replaces
/// gamma and the flags (`gamma=None`). This is SB3's / CleanRL's GAE loop, plus correct
/// truncation.
///
/// Layouts: the [T, B] arrays are read in place, without a copy, when stored like
/// `rewards`: all C-ordered (time-major, SB3's and CleanRL's [n_steps, n_envs] buffers) or
/// all Fortran-ordered (batch-major: a C-ordered [B, T] array passed as `x.T`, TorchRL's
/// and RLlib's layout). An array stored otherwise is copied once into the order of
/// `rewards`. Results are new arrays shaped like `rewards` and stored in its order, as
/// NumPy's ufuncs keep their inputs' order (for batch-major input, `adv.T` is a C-ordered
/// [B, T] array; `np.ascontiguousarray` gives time-major); the bits are the same in both
/// orders. `threads`: at most that many rayon tasks (None or 0: all of rlgrad's pool, 1:
/// the calling thread alone); bits never depend on it. `require_finite=True` refuses a NaN
/// or an infinity in any input the call reads (a ValueError naming the argument and the
/// first index); off by default, when non-finite inputs give non-finite results.
#[pyfunction]
#[pyo3(signature = (rewards, values, bootstrap, *, gamma, lam, terminated=None, truncated=None, final_values=None, discounts=None, threads=None, require_finite=false))]
#[allow(clippy::too_many_arguments)]
fn gae<'py>(
    py: Python<'py>,
    rewards: &Bound<'py, PyAny>,
    values: &Bound<'py, PyAny>,
    bootstrap: &Bound<'py, PyAny>,
    gamma: Option<f64>,
    lam: f64,
    terminated: Option<&Bound<'py, PyAny>>,
    truncated: Option<&Bound<'py, PyAny>>,
    final_values: Option<&Bound<'py, PyAny>>,
    discounts: Option<&Bound<'py, PyAny>>,
    threads: Option<i64>,
    require_finite: bool,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    by_dtype!(
        "gae",
        "rewards",
        rewards,
        value_estimator(
            py,
            "gae",
            [rewards, values, bootstrap],
            gamma,
            ValueEstimator::Gae { lam },
            [terminated, truncated, final_values, discounts],
            RunOptions {
                threads,
                require_finite
            }
        )
    )
}

/// The estimators over values and a bootstrap, each returning two arrays.
enum ValueEstimator<'a, 'py> {
    /// `(advantages, returns)`.
    Gae { lam: f64 },
    /// `(vs, pg_advantages)`.
    Vtrace {
        rhos: &'a Bound<'py, PyAny>,
        lam: f64,
        clip_rho: f64,
        clip_pg_rho: f64,
    },
}

/// A [`ValueEstimator`]'s kernel and its arguments.
enum Kernel<'d, T> {
    Gae(T),
    Vtrace(&'d [T], VtraceParams<T>),
}

fn value_estimator<'py, T: Real>(
    py: Python<'py>,
    function: &'static str,
    [rewards, values, bootstrap_obj]: [&Bound<'py, PyAny>; 3],
    gamma: Option<f64>,
    estimator: ValueEstimator<'_, 'py>,
    [terminated, truncated, final_values, discounts]: [Option<&Bound<'py, PyAny>>; 4],
    run: RunOptions,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let rewards = input_in::<T>(function, "rewards", rewards, ReadOrder::Own)?;
    let frame = Frame::new(function, &rewards, run)?;
    let values = frame.input::<T>(function, "values", values)?;
    let rhos;
    // What the kernel needs, without the Python objects (the GIL is released for it).
    let kernel = match estimator {
        ValueEstimator::Gae { lam } => Kernel::Gae(T::from_f64(lam)),
        ValueEstimator::Vtrace {
            rhos: given,
            lam,
            clip_rho,
            clip_pg_rho,
        } => {
            rhos = frame.input::<T>(function, "rhos", given)?;
            let params = VtraceParams {
                lambda: T::from_f64(lam),
                clip_rho: T::from_f64(clip_rho),
                clip_pg_rho: T::from_f64(clip_pg_rho),
            };
            Kernel::Vtrace(rhos.data(), params)
        }
    };
    let bootstrap = bootstrap::<T>(function, bootstrap_obj, &frame.shape)?;
    let args = episode_args(
        function,
        &frame,
        gamma,
        discounts,
        terminated,
        truncated,
        final_values,
        NextValue::Values(values.data(), &bootstrap),
    )?;
    let layout = frame.layout;
    let len = rewards.data().len();
    let (mut first, mut second) = (zeroed::<T>(function, len)?, zeroed::<T>(function, len)?);
    let par = par(function, run.threads)?;
    let (r, v, episodes) = (rewards.data(), values.data(), args.episodes());
    py.detach(|| match kernel {
        Kernel::Gae(lam) => gae_into(
            par,
            layout,
            r,
            v,
            &bootstrap,
            episodes,
            lam,
            &mut first,
            Some(&mut second),
        ),
        Kernel::Vtrace(rho, params) => vtrace_into(
            par,
            layout,
            r,
            v,
            &bootstrap,
            rho,
            episodes,
            params,
            &mut first,
            &mut second,
        ),
    })
    .map_err(|e| error(function, e))?;
    Ok((frame.output(py, first)?, frame.output(py, second)?))
}

/// lambda_returns(rewards, next_values, *, gamma, lam, terminated=None, truncated=None, final_values=None, discounts=None, threads=None, require_finite=False)
/// --
///
/// TD(lambda) returns (`rlax.lambda_returns`) over [T] / [T, B] data, from
/// next-state values `next_values[t] = V(s_{t+1})`:
///
///     G_t = r'_t + d_t * ((1 - lam) * nv_t + lam * G_{t+1}),   G_T = nv_{T-1}
///
/// `lam=1` gives Monte-Carlo returns bootstrapped at the end, `lam=0` one-step TD targets.
/// Episode ends as in `gae`; without `final_values`, a truncated step bootstraps on
/// `next_values[t]`. Layouts, `threads` and `require_finite` as in `gae`.
#[pyfunction]
#[pyo3(signature = (rewards, next_values, *, gamma, lam, terminated=None, truncated=None, final_values=None, discounts=None, threads=None, require_finite=false))]
#[allow(clippy::too_many_arguments)]
fn lambda_returns<'py>(
    py: Python<'py>,
    rewards: &Bound<'py, PyAny>,
    next_values: &Bound<'py, PyAny>,
    gamma: Option<f64>,
    lam: f64,
    terminated: Option<&Bound<'py, PyAny>>,
    truncated: Option<&Bound<'py, PyAny>>,
    final_values: Option<&Bound<'py, PyAny>>,
    discounts: Option<&Bound<'py, PyAny>>,
    threads: Option<i64>,
    require_finite: bool,
) -> PyResult<Bound<'py, PyAny>> {
    by_dtype!(
        "lambda_returns",
        "rewards",
        rewards,
        next_value_estimator(
            py,
            "lambda_returns",
            [rewards, next_values],
            gamma,
            Estimator::Lambda(lam),
            [terminated, truncated, final_values, discounts],
            RunOptions {
                threads,
                require_finite
            }
        )
    )
}

/// n_step_returns(rewards, next_values, *, gamma, n, terminated=None, truncated=None, final_values=None, discounts=None, threads=None, require_finite=False)
/// --
///
/// n-step bootstrapped returns (`rlax.n_step_bootstrapped_returns`) over [T] /
/// [T, B] data, from next-state values `next_values[t] = V(s_{t+1})`: with
/// `k = min(t + n - 1, T - 1)`,
///
///     G_t = r'_t + d_t * (r'_{t+1} + d_{t+1} * (... + d_k * nv_k))
///
/// Windows reaching the end of the batch bootstrap on `nv_{T-1}`; `n` may exceed T,
/// `n = 0` is an error. Episode ends as in `lambda_returns`; layouts, `threads` and
/// `require_finite` as in `gae`.
#[pyfunction]
#[pyo3(signature = (rewards, next_values, *, gamma, n, terminated=None, truncated=None, final_values=None, discounts=None, threads=None, require_finite=false))]
#[allow(clippy::too_many_arguments)]
fn n_step_returns<'py>(
    py: Python<'py>,
    rewards: &Bound<'py, PyAny>,
    next_values: &Bound<'py, PyAny>,
    gamma: Option<f64>,
    n: usize,
    terminated: Option<&Bound<'py, PyAny>>,
    truncated: Option<&Bound<'py, PyAny>>,
    final_values: Option<&Bound<'py, PyAny>>,
    discounts: Option<&Bound<'py, PyAny>>,
    threads: Option<i64>,
    require_finite: bool,
) -> PyResult<Bound<'py, PyAny>> {
    by_dtype!(
        "n_step_returns",
        "rewards",
        rewards,
        next_value_estimator(
            py,
            "n_step_returns",
            [rewards, next_values],
            gamma,
            Estimator::NStep(n),
            [terminated, truncated, final_values, discounts],
            RunOptions {
                threads,
                require_finite
            }
        )
    )
}

/// The estimators over next-state values.
enum Estimator {
    Lambda(f64),
    NStep(usize),
}

fn next_value_estimator<'py, T: Real>(
    py: Python<'py>,
    function: &'static str,
    [rewards, next_values]: [&Bound<'py, PyAny>; 2],
    gamma: Option<f64>,
    estimator: Estimator,
    [terminated, truncated, final_values, discounts]: [Option<&Bound<'py, PyAny>>; 4],
    run: RunOptions,
) -> PyResult<Bound<'py, PyAny>> {
    let rewards = input_in::<T>(function, "rewards", rewards, ReadOrder::Own)?;
    let frame = Frame::new(function, &rewards, run)?;
    let next_values = frame.input::<T>(function, "next_values", next_values)?;
    let layout = frame.layout;
    let args = episode_args(
        function,
        &frame,
        gamma,
        discounts,
        terminated,
        truncated,
        final_values,
        NextValue::NextValues(next_values.data()),
    )?;
    let mut out = zeroed::<T>(function, rewards.data().len())?;
    let (r, nv, episodes, par) = (
        rewards.data(),
        next_values.data(),
        args.episodes(),
        par(function, run.threads)?,
    );
    py.detach(|| match estimator {
        Estimator::Lambda(lam) => {
            lambda_returns_into(par, layout, r, nv, episodes, T::from_f64(lam), &mut out)
        }
        Estimator::NStep(n) => n_step_returns_into(par, layout, r, nv, episodes, n, &mut out),
    })
    .map_err(|e| error(function, e))?;
    frame.output(py, out)
}

/// vtrace(rewards, values, bootstrap, rhos, *, gamma, lam=1.0, clip_rho=1.0, clip_pg_rho=1.0, terminated=None, truncated=None, final_values=None, discounts=None, threads=None, require_finite=False)
/// --
///
/// V-trace (Espeholt et al. 2018) in rlax's form over [T] / [T, B] data (axis 0 is time),
/// returning `(vs, pg_advantages)`. `rhos` are importance ratios pi/mu (not logs),
/// `bootstrap` = V(s_T):
///
///     td_t = min(clip_rho, rho_t) * (r'_t + d_t * v_{t+1} - v_t)
///     e_t  = td_t + d_t * lam * min(1, rho_t) * e_{t+1},   e_T = 0
///     vs   = values + e
///     q_t  = r'_t + d_t * (lam * vs_{t+1} + (1 - lam) * v_{t+1})   (t < T-1)
///     q_{T-1} = r'_{T-1} + d_{T-1} * bootstrap
///     pg_advantages = min(clip_pg_rho, rho_t) * (q_t - v_t)
///
/// Episode ends, layouts, `threads` and `require_finite` as in `gae`.
#[pyfunction]
#[pyo3(signature = (rewards, values, bootstrap, rhos, *, gamma, lam=1.0, clip_rho=1.0, clip_pg_rho=1.0, terminated=None, truncated=None, final_values=None, discounts=None, threads=None, require_finite=false))]
#[allow(clippy::too_many_arguments)]
fn vtrace<'py>(
    py: Python<'py>,
    rewards: &Bound<'py, PyAny>,
    values: &Bound<'py, PyAny>,
    bootstrap: &Bound<'py, PyAny>,
    rhos: &Bound<'py, PyAny>,
    gamma: Option<f64>,
    lam: f64,
    clip_rho: f64,
    clip_pg_rho: f64,
    terminated: Option<&Bound<'py, PyAny>>,
    truncated: Option<&Bound<'py, PyAny>>,
    final_values: Option<&Bound<'py, PyAny>>,
    discounts: Option<&Bound<'py, PyAny>>,
    threads: Option<i64>,
    require_finite: bool,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    by_dtype!(
        "vtrace",
        "rewards",
        rewards,
        value_estimator(
            py,
            "vtrace",
            [rewards, values, bootstrap],
            gamma,
            ValueEstimator::Vtrace {
                rhos,
                lam,
                clip_rho,
                clip_pg_rho
            },
            [terminated, truncated, final_values, discounts],
            RunOptions {
                threads,
                require_finite
            }
        )
    )
}
