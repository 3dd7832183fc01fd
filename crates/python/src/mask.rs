//! `rlgrad.mask`: padded sequences of rlgrad-mask on NumPy arrays, batch-major
//! `[B, T, ...]`.

use numpy::{PyArrayDescrMethods, PyArrayDyn, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use rlgrad_mask::{ChopConfig, PadOrder, Sequences};

use crate::arrays::{Input, Real, by_dtype, error, input, par, product, to_numpy, value_error};

pub fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add_function(wrap_pyfunction!(sequence_mask, module)?)?;
    module.add_function(wrap_pyfunction!(pad, module)?)?;
    module.add_function(wrap_pyfunction!(unpad, module)?)?;
    module.add_function(wrap_pyfunction!(masked_mean, module)?)?;
    module.add_function(wrap_pyfunction!(masked_mean_backward, module)?)?;
    module.add_function(wrap_pyfunction!(masked_normalize, module)?)?;
    module.add_function(wrap_pyfunction!(masked_normalize_backward, module)?)?;
    module.add_function(wrap_pyfunction!(chop_lengths, module)?)?;
    Ok(())
}

/// Integer argument `name` (`lengths`, episode ids) as `i64`s: a 1-D NumPy array of any
/// integer dtype, or a sequence of Python ints.
fn integers(function: &str, name: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    let type_error = || {
        PyTypeError::new_err(format!(
            "{function}: argument `{name}` must be a 1-D array or sequence of integers"
        ))
    };
    if let Ok(array) = obj.cast::<PyUntypedArray>() {
        if !matches!(array.dtype().kind(), b'i' | b'u') {
            return Err(type_error());
        }
        if array.ndim() != 1 {
            return Err(value_error(
                function,
                name,
                format_args!("has shape {:?}, expected [B]", array.shape()),
            ));
        }
        // uint64 values above i64::MAX wrap negative here and are refused below.
        let as_i64 = obj.call_method1("astype", ("int64",))?;
        let as_i64 = as_i64.cast::<PyArrayDyn<i64>>().map_err(|_| type_error())?;
        return Ok(Input::from_array(function, name, as_i64)?.data().to_vec());
    }
    obj.extract::<Vec<i64>>().map_err(|_| type_error())
}

/// `lengths` as counts: negative lengths are a `ValueError`.
fn lengths(function: &str, obj: &Bound<'_, PyAny>) -> PyResult<Vec<usize>> {
    integers(function, "lengths", obj)?
        .into_iter()
        .enumerate()
        .map(|(b, len)| {
            usize::try_from(len).map_err(|_| {
                value_error(
                    function,
                    "lengths",
                    format_args!("holds {len} at index {b}, expected lengths >= 0"),
                )
            })
        })
        .collect()
}

/// sequence_mask(lengths, max_len=None)
/// --
///
/// The validity mask of padded sequences, `tf.sequence_mask`: bool [B, max_len] with
/// `mask[b, t] = t < lengths[b]`. `max_len=None` is the longest length; a smaller
/// `max_len` truncates. `lengths`: a 1-D integer array or sequence, each >= 0.
#[pyfunction]
#[pyo3(signature = (lengths, max_len=None))]
fn sequence_mask<'py>(
    py: Python<'py>,
    lengths: &Bound<'py, PyAny>,
    max_len: Option<usize>,
) -> PyResult<Bound<'py, PyAny>> {
    let lengths = self::lengths("sequence_mask", lengths)?;
    let mask = py
        .detach(|| rlgrad_mask::sequence_mask(&lengths, max_len))
        .map_err(|e| error("sequence_mask", e))?;
    to_numpy(
        py,
        mask.as_bools().to_vec(),
        &[mask.batch(), mask.max_len()],
    )
}

/// `[B, T, F...]` data: the sequences of `lengths` padded to `T`, and `F` values per step.
fn padded_input<'py, T: Real>(
    function: &'static str,
    name: &str,
    obj: &Bound<'py, PyAny>,
    lengths: &Bound<'py, PyAny>,
) -> PyResult<(Input<'py, T>, Sequences, usize)> {
    let x = input::<T>(function, name, obj)?;
    let lengths = self::lengths(function, lengths)?;
    let shape = x.shape();
    if shape.len() < 2 || shape[0] != lengths.len() {
        return Err(value_error(
            function,
            name,
            format_args!(
                "has shape {shape:?}, expected [B, T, ...] with B = {} sequences (len(lengths))",
                lengths.len()
            ),
        ));
    }
    let features = product(function, name, &shape[2..])?;
    let seqs = Sequences::new(&lengths, Some(shape[1])).map_err(|e| error(function, e))?;
    Ok((x, seqs, features))
}

/// pad(flat, lengths, max_len=None, *, threads=None)
/// --
///
/// Packed rows to a zero-padded batch (`tf.RaggedTensor.from_row_lengths(...).to_tensor()`):
/// `flat` [sum(lengths), ...] to [B, max_len, ...], row b taking the next `lengths[b]`
/// rows of `flat`, zeros after them. `max_len=None` is the longest length; a length above
/// `max_len` is a ValueError. A gather copy, parallel across sequences (`threads`: at most
/// that many rayon tasks). A C-contiguous `flat` is read in place, any other layout is
/// copied once.
#[pyfunction]
#[pyo3(signature = (flat, lengths, max_len=None, *, threads=None))]
fn pad<'py>(
    py: Python<'py>,
    flat: &Bound<'py, PyAny>,
    lengths: &Bound<'py, PyAny>,
    max_len: Option<usize>,
    threads: Option<i64>,
) -> PyResult<Bound<'py, PyAny>> {
    by_dtype!(
        "pad",
        "flat",
        flat,
        pad_of(py, flat, lengths, max_len, threads)
    )
}

fn pad_of<'py, T: Real>(
    py: Python<'py>,
    flat: &Bound<'py, PyAny>,
    lengths: &Bound<'py, PyAny>,
    max_len: Option<usize>,
    threads: Option<i64>,
) -> PyResult<Bound<'py, PyAny>> {
    const F: &str = "pad";
    let flat = input::<T>(F, "flat", flat)?;
    let seqs = Sequences::new(&self::lengths(F, lengths)?, max_len).map_err(|e| error(F, e))?;
    let shape = flat.shape();
    if shape.is_empty() || shape[0] != seqs.total() {
        return Err(value_error(
            F,
            "flat",
            format_args!(
                "has shape {shape:?}, expected [N, ...] with N = sum(lengths) = {}",
                seqs.total()
            ),
        ));
    }
    let features = product(F, "flat", &shape[1..])?;
    let mut out_shape = vec![seqs.batch(), seqs.max_len()];
    out_shape.extend_from_slice(&shape[1..]);
    let (data, par) = (flat.data(), par(F, threads)?);
    let padded = py
        .detach(|| rlgrad_mask::pad_with(par, &seqs, data, features, PadOrder::BatchMajor))
        .map_err(|e| error(F, e))?;
    to_numpy(py, padded, &out_shape)
}

/// unpad(padded, lengths, *, threads=None)
/// --
///
/// A padded batch back to packed rows: `padded` [B, T, ...] to [sum(lengths), ...], the
/// first `lengths[b]` steps of each row b. Whatever the padding holds (NaN, garbage) is
/// never read into the result. A scatter copy, parallel across sequences.
#[pyfunction]
#[pyo3(signature = (padded, lengths, *, threads=None))]
fn unpad<'py>(
    py: Python<'py>,
    padded: &Bound<'py, PyAny>,
    lengths: &Bound<'py, PyAny>,
    threads: Option<i64>,
) -> PyResult<Bound<'py, PyAny>> {
    by_dtype!(
        "unpad",
        "padded",
        padded,
        unpad_of(py, padded, lengths, threads)
    )
}

fn unpad_of<'py, T: Real>(
    py: Python<'py>,
    padded: &Bound<'py, PyAny>,
    lengths: &Bound<'py, PyAny>,
    threads: Option<i64>,
) -> PyResult<Bound<'py, PyAny>> {
    const F: &str = "unpad";
    let (x, seqs, features) = padded_input::<T>(F, "padded", padded, lengths)?;
    let mut out_shape = vec![seqs.total()];
    out_shape.extend_from_slice(&x.shape()[2..]);
    let (data, par) = (x.data(), par(F, threads)?);
    let flat = py
        .detach(|| rlgrad_mask::unpad_with(par, &seqs, data, features, PadOrder::BatchMajor))
        .map_err(|e| error(F, e))?;
    to_numpy(py, flat, &out_shape)
}

/// masked_mean(x, lengths)
/// --
///
/// The mean over the valid steps of `x` [B, T, ...] only (RLlib's `reduce_mean_valid`,
/// PyTorch's `x[mask].mean()`): `sum of x[b, t, ...] for t < lengths[b]` divided by their
/// number N*F, as a Python float (exact for float32). The sum runs in rlgrad's canonical
/// order over the valid values in packed order: bitwise equal to
/// `unpad(x, lengths)`'s mean at every thread count. Padding is selected away, never
/// multiplied by zero: NaN in padding does not reach the result. No valid value is a
/// ValueError.
#[pyfunction]
fn masked_mean(py: Python<'_>, x: &Bound<'_, PyAny>, lengths: &Bound<'_, PyAny>) -> PyResult<f64> {
    by_dtype!("masked_mean", "x", x, masked_mean_of(py, x, lengths))
}

fn masked_mean_of<T: Real>(
    py: Python<'_>,
    x: &Bound<'_, PyAny>,
    lengths: &Bound<'_, PyAny>,
) -> PyResult<f64> {
    const F: &str = "masked_mean";
    let (x, seqs, features) = padded_input::<T>(F, "x", x, lengths)?;
    let data = x.data();
    let mean = py
        .detach(|| rlgrad_mask::masked_mean(&seqs, data, features))
        .map_err(|e| error(F, e))?;
    Ok(mean.as_f64())
}

/// masked_mean_backward(x, lengths, grad=1.0)
/// --
///
/// The gradient of `masked_mean(x, lengths)` times the upstream gradient `grad`:
/// `grad / (N*F)` at valid steps, 0 at padding, shaped and typed like `x` (whose values
/// are not read).
#[pyfunction]
#[pyo3(signature = (x, lengths, grad=1.0))]
fn masked_mean_backward<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    lengths: &Bound<'py, PyAny>,
    grad: f64,
) -> PyResult<Bound<'py, PyAny>> {
    by_dtype!(
        "masked_mean_backward",
        "x",
        x,
        masked_mean_backward_of(py, x, lengths, grad)
    )
}

fn masked_mean_backward_of<'py, T: Real>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    lengths: &Bound<'py, PyAny>,
    grad: f64,
) -> PyResult<Bound<'py, PyAny>> {
    const F: &str = "masked_mean_backward";
    let (x, seqs, features) = padded_input::<T>(F, "x", x, lengths)?;
    let grad = T::from_f64(grad);
    let out = py
        .detach(|| rlgrad_mask::masked_mean_backward(&seqs, features, grad))
        .map_err(|e| error(F, e))?;
    to_numpy(py, out, x.shape())
}

/// masked_normalize(x, lengths, *, eps=1e-8, ddof=1)
/// --
///
/// Advantage normalization over the valid steps only: `(x - m) / (s + eps)` at valid
/// steps and 0 at padding, where `m` is the masked mean and
/// `s = sqrt(sum over valid (x - m)^2 / (N*F - ddof))`. The defaults are PyTorch's
/// `(adv - adv.mean()) / (adv.std() + 1e-8)` (CleanRL, SB3: unbiased std); `ddof=0` is
/// NumPy's. Errors (ValueError): `eps` negative or not finite, `N*F <= ddof`.
#[pyfunction]
#[pyo3(signature = (x, lengths, *, eps=1e-8, ddof=1))]
fn masked_normalize<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    lengths: &Bound<'py, PyAny>,
    eps: f64,
    ddof: usize,
) -> PyResult<Bound<'py, PyAny>> {
    by_dtype!(
        "masked_normalize",
        "x",
        x,
        masked_normalize_of(py, x, lengths, None, eps, ddof)
    )
}

/// masked_normalize_backward(x, lengths, grad, *, eps=1e-8, ddof=1)
/// --
///
/// The gradient of `masked_normalize(x, lengths, eps=eps, ddof=ddof)` for the upstream
/// gradient `grad` (shaped like `x`; its padding is ignored), with respect to `x`: 0 at
/// padding. With `g` the valid upstream gradients, `m` and `s` the masked mean and std and
/// `d = s + eps`: `dx = (g - mean(g)) / d - (x - m) * sum(g * (x - m)) / ((N*F - ddof) * s * d^2)`.
#[pyfunction]
#[pyo3(signature = (x, lengths, grad, *, eps=1e-8, ddof=1))]
fn masked_normalize_backward<'py>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    lengths: &Bound<'py, PyAny>,
    grad: &Bound<'py, PyAny>,
    eps: f64,
    ddof: usize,
) -> PyResult<Bound<'py, PyAny>> {
    by_dtype!(
        "masked_normalize_backward",
        "x",
        x,
        masked_normalize_of(py, x, lengths, Some(grad), eps, ddof)
    )
}

/// [`masked_normalize`], or its backward when `grad` is given.
fn masked_normalize_of<'py, T: Real>(
    py: Python<'py>,
    x: &Bound<'py, PyAny>,
    lengths: &Bound<'py, PyAny>,
    grad: Option<&Bound<'py, PyAny>>,
    eps: f64,
    ddof: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let function = match grad {
        Some(_) => "masked_normalize_backward",
        None => "masked_normalize",
    };
    let (x, seqs, features) = padded_input::<T>(function, "x", x, lengths)?;
    let grad = grad
        .map(|g| {
            let g = input::<T>(function, "grad", g)?;
            crate::arrays::same_shape(function, "grad", g.shape(), "x", x.shape())?;
            Ok::<_, PyErr>(g)
        })
        .transpose()?;
    let (data, eps) = (x.data(), T::from_f64(eps));
    let upstream = grad.as_ref().map(Input::data);
    let out = py
        .detach(|| match upstream {
            Some(g) => rlgrad_mask::masked_normalize_backward(&seqs, data, features, eps, ddof, g),
            None => rlgrad_mask::masked_normalize(&seqs, data, features, eps, ddof),
        })
        .map_err(|e| error(function, e))?;
    to_numpy(py, out, x.shape())
}

/// _chop_lengths(ids, max_seq_len)
/// --
///
/// RLlib's sequence cutting (`rlgrad.mask.chop_into_sequences` calls it): walking the
/// rows in order, a new sequence starts where the id differs from the previous row's or
/// the current sequence already has `max_seq_len` rows. Returns `(seq_lens, starts)` as
/// int64 arrays.
#[pyfunction]
#[pyo3(name = "_chop_lengths")]
fn chop_lengths<'py>(
    py: Python<'py>,
    ids: &Bound<'py, PyAny>,
    max_seq_len: usize,
) -> PyResult<(Bound<'py, PyAny>, Bound<'py, PyAny>)> {
    let ids = integers("chop_into_sequences", "episode_ids", ids)?;
    let batch = py
        .detach(|| rlgrad_mask::chop_into_sequences::<f32>(&ids, &[], ChopConfig::new(max_seq_len)))
        .map_err(|e| error("chop_into_sequences", e))?;
    let as_i64 = |values: &[usize]| values.iter().map(|&v| v as i64).collect::<Vec<_>>();
    let lengths = as_i64(batch.seqs().lengths());
    let starts = as_i64(batch.starts());
    let (s, t) = (lengths.len(), starts.len());
    Ok((to_numpy(py, lengths, &[s])?, to_numpy(py, starts, &[t])?))
}
