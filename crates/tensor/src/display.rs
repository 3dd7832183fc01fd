//! NumPy-like printing: nested brackets, columns aligned on the decimal point, trailing
//! zeros trimmed, scientific notation for very large or small magnitudes, and `...` for
//! tensors of more than 1000 elements (first and last three entries of each long axis).

use std::collections::HashMap;
use std::fmt;

use rlgrad_core::Float;

use crate::{Tensor, TensorDevice};

/// Tensors with more elements than this are summarized.
const SUMMARIZE_ABOVE: usize = 1000;
/// Entries kept at each end of a summarized axis.
const EDGE_ITEMS: usize = 3;
/// Decimal places of the positional format.
const PRECISION: usize = 4;

enum Style {
    Integers,
    Positional,
    Scientific,
}

fn choose_style<T: Float>(values: &[T]) -> Style {
    let finite: Vec<f64> = values
        .iter()
        .map(|v| v.as_f64())
        .filter(|v| v.is_finite())
        .collect();
    let max = finite.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let min_nonzero = finite
        .iter()
        .filter(|v| **v != 0.0)
        .fold(f64::INFINITY, |m, v| m.min(v.abs()));
    if max >= 1e8 || (min_nonzero < 1e-4 && min_nonzero.is_finite()) {
        Style::Scientific
    } else if finite.iter().all(|v| v.fract() == 0.0) {
        Style::Integers
    } else {
        Style::Positional
    }
}

/// One value split at the decimal point, so columns can align on it.
fn render<T: Float>(value: T, style: &Style) -> (String, String) {
    let v = value.as_f64();
    if v.is_nan() {
        return ("nan".into(), String::new());
    }
    if v.is_infinite() {
        return (if v > 0.0 { "inf" } else { "-inf" }.into(), String::new());
    }
    match style {
        Style::Integers => (format!("{v:.0}"), ".".into()),
        Style::Positional => {
            let text = format!("{v:.PRECISION$}");
            let trimmed = text.trim_end_matches('0');
            let (int, frac) = trimmed.split_once('.').unwrap_or((trimmed, ""));
            (int.to_owned(), format!(".{frac}"))
        }
        Style::Scientific => {
            let text = format!("{v:.PRECISION$e}");
            let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
            let exponent: i32 = exponent.parse().unwrap_or(0);
            let sign = if exponent < 0 { '-' } else { '+' };
            let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
            (
                int.to_owned(),
                format!(".{frac}e{sign}{:02}", exponent.abs()),
            )
        }
    }
}

/// The indices of an axis of length `len` that are printed (`None` marks the `...`).
fn shown(len: usize, summarize: bool) -> Vec<Option<usize>> {
    if summarize && len > 2 * EDGE_ITEMS {
        (0..EDGE_ITEMS)
            .map(Some)
            .chain(std::iter::once(None))
            .chain((len - EDGE_ITEMS..len).map(Some))
            .collect()
    } else {
        (0..len).map(Some).collect()
    }
}

struct Printer<'a> {
    cells: &'a HashMap<usize, (String, String)>,
    dims: &'a [usize],
    strides: Vec<usize>,
    int_width: usize,
    frac_width: usize,
    width: usize,
    summarize: bool,
}

impl Printer<'_> {
    fn cell(&self, index: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (int, frac) = &self.cells[&index];
        let aligned = if frac.is_empty() {
            // nan / inf: no decimal point to align on.
            int.clone()
        } else {
            format!(
                "{int:>iw$}{frac:<fw$}",
                iw = self.int_width,
                fw = self.frac_width
            )
        };
        write!(f, "{aligned:>width$}", width = self.width)
    }

    fn axis(&self, depth: usize, offset: usize, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        let entries = shown(self.dims[depth], self.summarize);
        let last_axis = depth + 1 == self.dims.len();
        for (k, entry) in entries.iter().enumerate() {
            if k > 0 {
                if last_axis {
                    f.write_str(", ")?;
                } else {
                    f.write_str(",")?;
                    for _ in 0..self.dims.len() - depth - 1 {
                        f.write_str("\n")?;
                    }
                    write!(f, "{:width$}", "", width = depth + 1)?;
                }
            }
            match entry {
                None => f.write_str("...")?,
                Some(i) if last_axis => self.cell(offset + i * self.strides[depth], f)?,
                Some(i) => self.axis(depth + 1, offset + i * self.strides[depth], f)?,
            }
        }
        f.write_str("]")
    }
}

impl<T: Float, D: TensorDevice<T>> fmt::Display for Tensor<T, D> {
    /// ```
    /// use rlgrad_tensor::Tensor;
    /// let t = Tensor::from_vec(vec![1.0f32, 2.5, -3.25, 4.0], [2, 2])?;
    /// assert_eq!(t.to_string(), "[[ 1.  ,  2.5 ],\n [-3.25,  4.  ]]");
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let data = match self.to_vec() {
            Ok(data) => data,
            Err(e) => return write!(f, "<tensor {} not readable: {e}>", self.shape()),
        };
        let dims = self.dims();
        let summarize = data.len() > SUMMARIZE_ABOVE;
        let strides = self.shape().strides().to_vec();
        // Only the printed elements decide the style and the column widths.
        let mut printed = Vec::new();
        collect_shown(dims, &strides, 0, 0, summarize, &mut printed);
        let style = choose_style(&printed.iter().map(|&i| data[i]).collect::<Vec<_>>());
        // Rendered by element index, the printed elements only (a few when summarized).
        let cells: HashMap<usize, (String, String)> = printed
            .iter()
            .map(|&i| (i, render(data[i], &style)))
            .collect();
        if dims.is_empty() {
            let (int, frac) = &cells[&0];
            return write!(f, "{int}{frac}");
        }
        let (finite, non_finite): (Vec<usize>, Vec<usize>) =
            printed.iter().partition(|&&i| !cells[&i].1.is_empty());
        let int_width = finite.iter().map(|&i| cells[&i].0.len()).max().unwrap_or(0);
        let frac_width = finite.iter().map(|&i| cells[&i].1.len()).max().unwrap_or(0);
        let width = non_finite
            .iter()
            .map(|&i| cells[&i].0.len())
            .fold(int_width + frac_width, usize::max);
        Printer {
            cells: &cells,
            dims,
            strides,
            int_width,
            frac_width,
            width,
            summarize,
        }
        .axis(0, 0, f)
    }
}

fn collect_shown(
    dims: &[usize],
    strides: &[usize],
    depth: usize,
    offset: usize,
    summarize: bool,
    out: &mut Vec<usize>,
) {
    if depth == dims.len() {
        out.push(offset);
        return;
    }
    for i in shown(dims[depth], summarize).into_iter().flatten() {
        collect_shown(
            dims,
            strides,
            depth + 1,
            offset + i * strides[depth],
            summarize,
            out,
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::Tensor;

    #[test]
    fn prints_like_numpy() {
        let t = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]).unwrap();
        assert_eq!(t.to_string(), "[[1., 2., 3.],\n [4., 5., 6.]]");
        let t =
            Tensor::from_vec(vec![0.5f32, 1.0, -2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [2, 2, 2]).unwrap();
        assert_eq!(
            t.to_string(),
            "[[[ 0.5,  1. ],\n  [-2. ,  3. ]],\n\n [[ 4. ,  5. ],\n  [ 6. ,  7. ]]]"
        );
        assert_eq!(Tensor::scalar(2.5f32).to_string(), "2.5");
        let t = Tensor::from_vec(vec![1e-5f64, 1.0, f64::NAN, f64::NEG_INFINITY], [4]).unwrap();
        assert_eq!(
            t.to_string(),
            "[1.0000e-05, 1.0000e+00,        nan,       -inf]"
        );
        assert_eq!(Tensor::<f32>::zeros([0]).unwrap().to_string(), "[]");
    }

    #[test]
    fn summarizes_large_tensors() {
        let t = Tensor::<f32>::arange(0.0, 2000.0, 1.0).unwrap();
        assert_eq!(
            t.to_string(),
            "[   0.,    1.,    2., ..., 1997., 1998., 1999.]"
        );
    }
}
