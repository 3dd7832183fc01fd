//! Argument checks shared by the public functions of every crate.
//!
//! Each check returns the [`Error`] variant a caller expects, with the function and the
//! argument named, so that a public function validates its input in a few lines.

use crate::{Error, Float, Layout, Result};

/// `value` must be finite and lie in `[0, 1]` (discounts, lambda, Polyak tau).
pub fn unit_interval(function: &'static str, argument: &'static str, value: f64) -> Result<()> {
    if value.is_finite() && (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(Error::value(
            function,
            argument,
            "a finite value in [0, 1]",
            value,
        ))
    }
}

/// `value` must be finite and lie in `[0, 1)` (Adam's betas, momentum coefficients).
pub fn unit_interval_open(
    function: &'static str,
    argument: &'static str,
    value: f64,
) -> Result<()> {
    if value.is_finite() && (0.0..1.0).contains(&value) {
        Ok(())
    } else {
        Err(Error::value(
            function,
            argument,
            "a finite value in [0, 1)",
            value,
        ))
    }
}

/// `value` must be finite and `>= 0` (learning rates, weight decay).
pub fn non_negative(function: &'static str, argument: &'static str, value: f64) -> Result<()> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(Error::value(
            function,
            argument,
            "a finite value >= 0",
            value,
        ))
    }
}

/// `value` must be finite and `> 0` (epsilons, clip thresholds).
pub fn positive(function: &'static str, argument: &'static str, value: f64) -> Result<()> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(Error::value(
            function,
            argument,
            "a finite value > 0",
            value,
        ))
    }
}

/// A slice argument must have exactly `expected` elements.
pub fn len(
    function: &'static str,
    argument: &'static str,
    expected: usize,
    got: usize,
) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(Error::shape(
            function,
            argument,
            format_args!("{expected} elements"),
            format_args!("{got}"),
        ))
    }
}

/// Every element a view of `layout` addresses must lie inside its buffer of `buffer_len`
/// elements (each device's check of a [`View`](crate::View) before a kernel reads it).
pub fn inside_buffer(
    function: &'static str,
    argument: &'static str,
    layout: &Layout,
    buffer_len: usize,
) -> Result<()> {
    match layout.max_offset() {
        Some(last) if last >= buffer_len => Err(Error::shape(
            function,
            argument,
            format_args!("a view inside its buffer of {buffer_len} elements"),
            format_args!("a layout reaching element {last}"),
        )),
        _ => Ok(()),
    }
}

/// `rows * cols`, or an error naming `argument` when the product overflows `usize`.
pub fn product(
    function: &'static str,
    argument: &'static str,
    rows: usize,
    cols: usize,
) -> Result<usize> {
    rows.checked_mul(cols).ok_or_else(|| {
        Error::shape(
            function,
            argument,
            "an element count that fits in usize",
            format_args!("{rows} x {cols}"),
        )
    })
}

/// Every value must be finite: else [`Error::NonFinite`] naming `argument`, the first bad
/// index and its value (opt-in data checks: returns' `require_finite`, summaries, envs).
pub fn finite<T: Float>(
    function: &'static str,
    argument: &'static str,
    values: &[T],
) -> Result<()> {
    finite_where(function, argument, values, |_| true)
}

/// The index of the first NaN or infinity of `values`, `None` when every value is finite:
/// the scan behind opt-in finite checks that run at every step (the gradient tape's
/// `check_finite`), so it is a whole-block test the compiler vectorizes, with the element
/// located only inside a block that holds one.
///
/// ```
/// use rlgrad_core::check::first_non_finite;
/// let mut x = vec![1.0f32; 1000];
/// assert_eq!(first_non_finite(&x), None);
/// x[700] = f32::NAN;
/// x[900] = f32::INFINITY;
/// assert_eq!(first_non_finite(&x), Some(700));
/// ```
pub fn first_non_finite<T: Float>(values: &[T]) -> Option<usize> {
    first_where(values, |v| !v.is_finite())
}

/// The index of the first element of `values` for which `invalid` holds: whole blocks
/// are tested with a branch-free reduction, compiled for each instruction set, and only a
/// block that holds such an element is searched for it ([`first_non_finite`], the
/// episode flags' check).
pub(crate) fn first_where<X: Copy>(values: &[X], invalid: impl Fn(X) -> bool) -> Option<usize> {
    crate::cpu::simd::widest(FirstWhere { values, invalid })
}

/// [`first_where`], compiled for each instruction set.
struct FirstWhere<'a, X, P> {
    values: &'a [X],
    invalid: P,
}

impl<X: Copy, P: Fn(X) -> bool> crate::cpu::simd::Vectorized for FirstWhere<'_, X, P> {
    type Output = Option<usize>;

    #[inline(always)]
    fn run(self) -> Option<usize> {
        const BLOCK: usize = 256;
        let Self { values, invalid } = self;
        let block = values
            .chunks(BLOCK)
            .position(|block| block.iter().fold(false, |bad, &v| bad | invalid(v)))?;
        let start = block * BLOCK;
        values[start..]
            .iter()
            .position(|&v| invalid(v))
            .map(|i| start + i)
    }
}

/// [`finite`] for the values at the indices `read` selects (those a computation reads).
pub fn finite_where<T: Float>(
    function: &'static str,
    argument: &'static str,
    values: &[T],
    read: impl Fn(usize) -> bool,
) -> Result<()> {
    match (0..values.len()).find(|&i| !values[i].is_finite() && read(i)) {
        None => Ok(()),
        Some(index) => Err(Error::NonFinite {
            function,
            argument,
            index,
            value: values[index].as_f64(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_view_must_stay_inside_its_buffer() {
        let layout = Layout::contiguous(crate::Shape::new(&[2, 3]));
        assert!(inside_buffer("f", "x", &layout, 6).is_ok());
        let err = inside_buffer("f", "x", &layout, 5).unwrap_err();
        assert_eq!(
            err.to_string(),
            "f: argument `x` has the wrong shape: expected a view inside its buffer of 5 elements, got a layout reaching element 5"
        );
        let empty = Layout::contiguous(crate::Shape::new(&[0, 3]));
        assert!(inside_buffer("f", "x", &empty, 0).is_ok());
    }

    #[test]
    fn finite_names_the_first_bad_index_it_reads() {
        assert!(finite("f", "x", &[1.0f32, -0.0]).is_ok());
        let err = finite("f", "x", &[1.0f64, f64::INFINITY, f64::NAN]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "f: argument `x` holds a non-finite value at index 1: inf"
        );
        // NaN at an index the computation does not read is not an error.
        assert!(finite_where("f", "x", &[f32::NAN, 2.0], |i| i == 1).is_ok());
    }

    #[test]
    fn domains() {
        assert!(unit_interval("f", "gamma", 1.0).is_ok());
        assert!(unit_interval("f", "gamma", 0.0).is_ok());
        assert!(unit_interval("f", "gamma", 1.0 + 1e-12).is_err());
        assert!(unit_interval("f", "gamma", f64::NAN).is_err());
        assert!(unit_interval_open("f", "beta1", 1.0).is_err());
        assert!(unit_interval_open("f", "beta1", 0.999).is_ok());
        assert!(non_negative("f", "lr", -0.0).is_ok());
        assert!(non_negative("f", "lr", -1e-9).is_err());
        assert!(non_negative("f", "lr", f64::INFINITY).is_err());
        assert!(positive("f", "eps", 0.0).is_err());
        assert!(len("f", "values", 3, 4).is_err());
        assert!(product("f", "layout", usize::MAX, 2).is_err());
        let err = positive("clip", "max_norm", -1.0).unwrap_err();
        assert_eq!(
            err.to_string(),
            "clip: argument `max_norm` is invalid: expected a finite value > 0, got -1"
        );
    }
}
