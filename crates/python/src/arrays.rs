//! NumPy arrays in and out: dtype dispatch, inputs borrowed when their memory is in the
//! order a call reads (copied once otherwise), fallible outputs, and errors as Python
//! exceptions.

use numpy::ndarray::{ArrayViewD, Ix1, Ix2};
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

/// rlgrad's error, raised from Python function `function`, as the exception a caller can
/// act on: `ValueError` with the message, naming `function` where the Rust error named
/// the Rust function that found it (`MemoryError` when the host could not allocate).
pub fn error(function: &'static str, e: Error) -> PyErr {
    let message = e.in_function(function).to_string();
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

/// The `TypeError` for array argument `name` of `function`, which is not a NumPy array
/// of `want` (the dtypes it takes).
pub fn type_error(function: &str, name: &str, want: &str, obj: &Bound<'_, PyAny>) -> PyErr {
    PyTypeError::new_err(format!(
        "{function}: argument `{name}` must be a numpy.ndarray of {want}, got {}",
        describe(obj)
    ))
}

/// The float dtype of array argument `name`; a `TypeError` for anything else.
pub fn dtype(function: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Dtype> {
    if obj.cast::<PyArrayDyn<f32>>().is_ok() {
        Ok(Dtype::F32)
    } else if obj.cast::<PyArrayDyn<f64>>().is_ok() {
        Ok(Dtype::F64)
    } else {
        Err(type_error(function, name, "float32 or float64", obj))
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

/// The order in which a call reads an array's values: C (row-major; time-major for
/// `[T, B]` data) or Fortran (column-major; batch-major for `[T, B]` data, such as `x.T`
/// of a C-ordered `[B, T]` array).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    C,
    Fortran,
}

/// The order an input is read in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadOrder {
    /// This order, whatever the array's memory (copied once when it is stored otherwise).
    In(Order),
    /// The array's own order: Fortran for a Fortran-contiguous 2-D array (batch-major
    /// `[T, B]` data), C otherwise.
    Own,
}

/// An input array: borrowed from NumPy when its memory is contiguous in the order the call
/// reads, else copied once into that order.
pub struct Input<'py, T: Element> {
    array: PyReadonlyArrayDyn<'py, T>,
    order: Order,
    /// The values in `order`, when the array's memory is not.
    copy: Option<Vec<T>>,
}

impl<'py, T: Element + Copy + Default> Input<'py, T> {
    /// Array argument `name` of `function` as an input of element type `T` in C order; a
    /// `TypeError` for another type or dtype (`want` names the dtypes the argument takes).
    pub fn new(function: &str, name: &str, want: &str, obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        Self::new_in(function, name, want, obj, ReadOrder::In(Order::C))
    }

    /// The same, read in `order`.
    pub fn new_in(
        function: &str,
        name: &str,
        want: &str,
        obj: &Bound<'py, PyAny>,
        order: ReadOrder,
    ) -> PyResult<Self> {
        let array = obj
            .cast::<PyArrayDyn<T>>()
            .map_err(|_| type_error(function, name, want, obj))?;
        Self::from_array_in(function, name, array, order)
    }

    /// [`Input::new`] for an array known to have element type `T`.
    pub fn from_array(
        function: &str,
        name: &str,
        array: &Bound<'py, PyArrayDyn<T>>,
    ) -> PyResult<Self> {
        Self::from_array_in(function, name, array, ReadOrder::In(Order::C))
    }

    fn from_array_in(
        function: &str,
        name: &str,
        array: &Bound<'py, PyArrayDyn<T>>,
        order: ReadOrder,
    ) -> PyResult<Self> {
        let array = array
            .try_readonly()
            .map_err(|e| value_error(function, name, format_args!("cannot be read: {e}")))?;
        let fortran_2d =
            array.ndim() == 2 && array.is_fortran_contiguous() && !array.is_c_contiguous();
        let order = match order {
            ReadOrder::In(order) => order,
            ReadOrder::Own if fortran_2d => Order::Fortran,
            ReadOrder::Own => Order::C,
        };
        let in_place = array.as_slice().is_ok()
            && match order {
                Order::C => array.is_c_contiguous(),
                Order::Fortran => array.is_fortran_contiguous(),
            };
        let copy = if in_place {
            None
        } else {
            Some(copy_in(function, name, &array, order)?)
        };
        Ok(Self { array, order, copy })
    }

    /// The values in [`Input::order`].
    pub fn data(&self) -> &[T] {
        match &self.copy {
            Some(values) => values,
            None => self
                .array
                .as_slice()
                .expect("checked contiguous in its order when the input was made"),
        }
    }

    /// The order of [`Input::data`].
    pub fn order(&self) -> Order {
        self.order
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        self.array.shape()
    }
}

/// The values of `array` in `order`: a blocked transpose of the memory of a 2-D array that
/// is contiguous in the other order, else one pass in `order` over a view of its rank.
fn copy_in<T: Element + Copy + Default>(
    function: &str,
    name: &str,
    array: &PyReadonlyArrayDyn<'_, T>,
    order: Order,
) -> PyResult<Vec<T>> {
    let view = array.as_array();
    if let ([rows, cols], Ok(memory)) = (view.shape(), array.as_slice()) {
        // Contiguous, but not in `order`: the memory holds the transpose.
        let (rows, cols) = match order {
            Order::C => (*cols, *rows),
            Order::Fortran => (*rows, *cols),
        };
        return rlgrad_returns::transpose(memory, rows, cols, 1).map_err(|e| {
            PyMemoryError::new_err(format!(
                "{function}: argument `{name}` cannot be copied into {order:?} order: {e}"
            ))
        });
    }
    let view: ArrayViewD<'_, T> = match order {
        Order::C => view,
        Order::Fortran => view.reversed_axes(),
    };
    // Iterators of a fixed rank: the dynamic-rank one costs about 20 ns an element.
    let mut values = Vec::with_capacity(view.len());
    if let Ok(v) = view.view().into_dimensionality::<Ix1>() {
        values.extend(v.iter().copied());
    } else if let Ok(v) = view.view().into_dimensionality::<Ix2>() {
        for row in v.rows() {
            values.extend(row.iter().copied());
        }
    } else {
        values.extend(view.iter().copied());
    }
    Ok(values)
}

/// Array argument `name` with element type `T`, the dtype the call's first array decided.
pub fn input<'py, T: Real>(
    function: &str,
    name: &str,
    obj: &Bound<'py, PyAny>,
) -> PyResult<Input<'py, T>> {
    Input::new(function, name, T::NAME, obj)
}

/// [`input`], read in `order`.
pub fn input_in<'py, T: Real>(
    function: &str,
    name: &str,
    obj: &Bound<'py, PyAny>,
    order: ReadOrder,
) -> PyResult<Input<'py, T>> {
    Input::new_in(function, name, T::NAME, obj, order)
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
    rlgrad_core::cpu::alloc::try_zeroed(len, function, "output").map_err(|e| error(function, e))
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

/// `values`, stored in `order`, as a NumPy array of shape `shape` without a copy: for
/// Fortran order, the C-ordered array of the reversed shape, transposed (a view).
pub fn to_numpy_in<'py, T: Element>(
    py: Python<'py>,
    values: Vec<T>,
    shape: &[usize],
    order: Order,
) -> PyResult<Bound<'py, PyAny>> {
    match order {
        Order::C => to_numpy(py, values, shape),
        Order::Fortran => {
            let reversed: Vec<usize> = shape.iter().rev().copied().collect();
            to_numpy(py, values, &reversed)?.getattr("T")
        }
    }
}

/// `threads=` of `function` as a [`Par`]: `None` or 0 for every thread of rlgrad's rayon
/// pool (`RAYON_NUM_THREADS`, else one per core), 1 for the calling thread alone, `n` for
/// at most `n` tasks; a negative count is a `ValueError` naming the argument.
pub fn par(function: &str, threads: Option<i64>) -> PyResult<Par> {
    match threads.map(usize::try_from) {
        None => Ok(Par::rayon(0)),
        Some(Ok(n)) => Ok(Par::rayon(n)),
        Some(Err(_)) => Err(value_error(
            function,
            "threads",
            format_args!(
                "must be None or 0 (every thread of rlgrad's pool), 1 (the calling thread) or \
                 a larger count of tasks, got {}",
                threads.unwrap_or_default()
            ),
        )),
    }
}

/// The product of `dims`, or a `ValueError` naming `name` on overflow.
pub fn product(function: &str, name: &str, dims: &[usize]) -> PyResult<usize> {
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| value_error(function, name, "has more elements than fit in memory"))
}
