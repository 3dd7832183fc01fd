//! [`Series`]: a named scalar curve over steps, and its [`moving_average`].

use rlgrad_core::{Error, Result};

/// A named scalar curve: `(step, value)` points, as read back by
/// [`read_scalars`](crate::read_scalars) or collected during training, and as plotted.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Series {
    /// The curve's name (a TensorBoard tag: `train/episode_return`).
    pub name: String,
    /// The points, usually in increasing step order.
    pub points: Vec<(u64, f64)>,
}

impl Series {
    /// An empty series named `name`.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            points: Vec::new(),
        }
    }

    /// Appends the point `(step, value)`.
    pub fn push(&mut self, step: u64, value: f64) {
        self.points.push((step, value));
    }
}

/// The trailing moving average of `values` over `window` points:
/// `out[i] = (values[i+1-k] + ... + values[i]) / k` with `k = min(window, i + 1)`, each
/// sum taken left to right in f64. `window = 1` returns `values`. An error for
/// `window = 0`.
///
/// ```
/// use rlgrad_summary::moving_average;
/// assert_eq!(moving_average(&[1.0, 2.0, 3.0, 4.0], 2)?, [1.0, 1.5, 2.5, 3.5]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub fn moving_average(values: &[f64], window: usize) -> Result<Vec<f64>> {
    if window == 0 {
        return Err(Error::value(
            "moving_average",
            "window",
            "at least 1 point",
            0,
        ));
    }
    Ok((0..values.len())
        .map(|i| {
            let start = (i + 1).saturating_sub(window);
            let points = &values[start..=i];
            points.iter().sum::<f64>() / points.len() as f64
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moving_average_is_trailing_and_refuses_an_empty_window() {
        assert_eq!(moving_average(&[], 3).unwrap(), Vec::<f64>::new());
        assert_eq!(moving_average(&[2.0, 4.0], 1).unwrap(), [2.0, 4.0]);
        assert_eq!(
            moving_average(&[3.0, 6.0, 9.0, 0.0], 3).unwrap(),
            [3.0, 4.5, 6.0, 5.0]
        );
        assert!(moving_average(&[1.0], 0).is_err());
    }
}
