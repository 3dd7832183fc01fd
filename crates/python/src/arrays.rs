//! NumPy arrays in and out: dtype dispatch, borrowed C-contiguous inputs (a copy for any
//! other layout), fallible outputs, and errors as Python exceptions.

use numpy::{
    Element, PyArrayDyn, PyArrayMethods, PyReadonlyArrayDyn, PyUntypedArray, PyUntypedArrayMethods,
};
use pyo3::exceptions::{PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use rlgrad_returns::{Error, Float, Par};

/// The float element types of the bindings.
pub trait Real: Float + Element + Send + Sync {
    /// The NumPy name of the type.
    const NAME: &'static str;
}

impl Real for f32 {
    const NAME: &'static str = "float32";
}

impl Real for f64 {
    const NAME: &'static str = "float64";
}

/// The float dtype of a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    F32,
    F64,
}

/// rlgrad's error as the Python exception a caller can act on: `ValueError` with the
/// message (`MemoryError` when the host could not allocate).
pub fn error(e: Error) -> PyErr {
    let message = e.to_string();
    if message.contains("cannot allocate") {
        PyMemoryError::new_err(message)
    } else {
        PyValueError::new_err(message)
    }
}

/// A `ValueError` naming the function and the argument.
pub fn value_error(function: &str, argument: &str, message: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(format!("{function}: argument `{argument}` {message}"))
}

/// What `obj` is, for messages: `ndarray of int64`, `list`, ...
fn describe(obj: &Bound<'_, PyAny>) -> String {
    match obj.cast::<PyUntypedArray>() {
        Ok(array) => format!("a numpy.ndarray of {}", array.dtype()),
        Err(_) => match obj.get_type().name() {
            Ok(name) => format!("{name}"),
            Err(_) => "an object of unknown type".to_owned(),
        },
    }
}

/// The float dtype of array argument `name`; a `TypeError` for anything else.
pub fn dtype(function: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Dtype> {
    if obj.cast::<PyArrayDyn<f32>>().is_ok() {
        Ok(Dtype::F32)
    } else if obj.cast::<PyArrayDyn<f64>>().is_ok() {
        Ok(Dtype::F64)
    } else {
        Err(PyTypeError::new_err(format!(
            "{function}: argument `{name}` must be a numpy.ndarray of float32 or float64, got {}",
            describe(obj)
        )))
    }
}

/// Calls `$f::<f32>(..)` or `$f::<f64>(..)` as the dtype of array argument `$name` says.
macro_rules! by_dtype {
    ($function:expr, $name:expr, $obj:expr, $f:ident($($arg:expr),* $(,)?)) => {
        match $crate::arrays::dtype($function, $name, $obj)? {
            $crate::arrays::Dtype::F32 => $f::<f32>($($arg),*),
            $crate::arrays::Dtype::F64 => $f::<f64>($($arg),*),
        }
    };
}
pub(crate) use by_dtype;

/// An input array: borrowed from NumPy when it is C-contiguous, else copied once into C
/// order.
pub struct Input<'py, T: Element> {
    array: PyReadonlyArrayDyn<'py, T>,
    /// The values in C order, when the array is not C-contiguous.
    copy: Option<Vec<T>>,
}

impl<'py, T: Element + Copy> Input<'py, T> {
    /// Array argument `name` of `function` as an input of element type `T`; a `TypeError`
    /// for another type or dtype (`want` names the dtypes the argument takes).
    pub fn new(function: &str, name: &str, want: &str, obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        let array = obj.cast::<PyArrayDyn<T>>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{function}: argument `{name}` must be a numpy.ndarray of {want}, got {}",
                describe(obj)
            ))
        })?;
        Self::from_array(function, name, array)
    }

    /// The same for an array known to have element type `T`.
    pub fn from_array(
        function: &str,
        name: &str,
        array: &Bound<'py, PyArrayDyn<T>>,
    ) -> PyResult<Self> {
        let array = array
            .try_readonly()
            .map_err(|e| value_error(function, name, format_args!("cannot be read: {e}")))?;
        let copy = (!array.is_c_contiguous() || array.as_slice().is_err())
            .then(|| array.as_array().iter().copied().collect());
        Ok(Self { array, copy })
    }

    /// The values in C order.
    pub fn data(&self) -> &[T] {
        match &self.copy {
            Some(values) => values,
            None => self
                .array
                .as_slice()
                .expect("checked C-contiguous when the input was made"),
        }
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.array.shape()
    }
}

/// Array argument `name` with element type `T`, the dtype the call's first array decided.
pub fn input<'py, T: Real>(
    function: &str,
    name: &str,
    obj: &Bound<'py, PyAny>,
) -> PyResult<Input<'py, T>> {
    Input::new(function, name, T::NAME, obj)
}

/// A `ValueError` unless `got` equals `want` (the shape of `like`).
pub fn same_shape(
    function: &str,
    name: &str,
    got: &[usize],
    like: &str,
    want: &[usize],
) -> PyResult<()> {
    if got == want {
        Ok(())
    } else {
        Err(value_error(
            function,
            name,
            format_args!("has shape {got:?}, expected {want:?} like `{like}`"),
        ))
    }
}

/// A zeroed output of `len` elements, allocated fallibly with `alloc_zeroed`: large
/// outputs come as fresh zero pages that the kernel filling them writes once; small ones
/// are cleared by the allocator.
pub fn zeroed<T: Real>(function: &'static str, len: usize) -> PyResult<Vec<T>> {
    rlgrad_core::cpu::alloc::try_zeroed(len, function, "output").map_err(error)
}

/// `values` as a NumPy array of shape `shape`, without a copy (NumPy owns the `Vec`).
pub fn to_numpy<'py, T: Element>(
    py: Python<'py>,
    values: Vec<T>,
    shape: &[usize],
) -> PyResult<Bound<'py, PyAny>> {
    Ok(numpy::PyArray1::from_vec(py, values)
        .reshape(shape.to_vec())?
        .into_any())
}

/// `threads=` as a [`Par`]: `None` or 0 for every thread of rlgrad's rayon pool
/// (`RAYON_NUM_THREADS`), 1 for the calling thread, `n` for at most `n` tasks.
pub fn par(threads: Option<usize>) -> Par {
    Par::rayon(threads.unwrap_or(0))
}

/// The product of `dims`, or a `ValueError` naming `name` on overflow.
pub fn product(function: &str, name: &str, dims: &[usize]) -> PyResult<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| value_error(function, name, "has more elements than fit in memory"))
}
