//! The native module `rlgrad._rlgrad` of the Python package `rlgrad`: rlgrad-returns,
//! rlgrad-mask and rlgrad-optim on NumPy arrays.
//!
//! The Python package (`python/rlgrad/`) re-exports these functions and classes as
//! `rlgrad.returns`, `rlgrad.mask` and `rlgrad.optim`, and ships the type stubs. Every
//! function:
//!
//! - takes `float32` or `float64` arrays (one dtype per call; the first array argument
//!   decides, any other float dtype is a `TypeError`) and returns arrays of that dtype;
//! - reads inputs in place, without a copy, when their memory is in the order the call
//!   reads (C order; for `rlgrad.returns`, the order of `rewards`, C or Fortran) and
//!   copies any other layout once into that order (the rule of each function's docstring);
//! - releases the GIL while rlgrad computes;
//! - raises `ValueError` with rlgrad's message for anything the Rust call refuses, and
//!   `TypeError` for a wrong type or dtype; no input panics.

mod arrays;
mod mask;
mod optim;
mod returns;

use pyo3::prelude::*;

/// The native half of the `rlgrad` package; import `rlgrad.returns`, `rlgrad.mask` and
/// `rlgrad.optim` instead.
#[pymodule]
fn _rlgrad(module: &Bound<'_, PyModule>) -> PyResult<()> {
    returns::register(module)?;
    mask::register(module)?;
    optim::register(module)?;
    Ok(())
}
