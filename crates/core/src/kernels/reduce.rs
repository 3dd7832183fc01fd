use crate::{Device, Float, Result, View};

/// A reduction, in the canonical order of [`crate::reduce`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ReduceOp {
    /// Canonical sum (`+0` for no elements).
    Sum,
    /// `sum / n`; an error for no elements.
    Mean,
    /// Two-pass `sum((x - mean)^2) / (n - ddof)`; an error when `n <= ddof`.
    Var {
        /// Delta degrees of freedom: 0 for the population variance, 1 for the sample one.
        ddof: usize,
    },
    /// NaN-propagating minimum; an error for no elements.
    Min,
    /// NaN-propagating maximum; an error for no elements.
    Max,
}

impl ReduceOp {
    /// The fewest elements a reduction needs to have a value (0 for a sum, `ddof + 1` for
    /// a variance, 1 otherwise).
    pub fn min_len(self) -> usize {
        match self {
            Self::Sum => 0,
            Self::Mean | Self::Min | Self::Max => 1,
            Self::Var { ddof } => ddof.saturating_add(1),
        }
    }
}

/// Reductions over all elements or along one axis.
pub trait ReduceKernel<T: Float>: Device {
    /// Reduces every element of `x` (`axis = None`, an output of one element) or the
    /// elements along `axis` (a row-major output of `x`'s shape without that axis), writing
    /// every element of `out`. Each output is the canonical reduction of its elements taken
    /// in index order, so an axis reduction equals the full reduction of the same elements,
    /// bit for bit.
    fn reduce(
        &self,
        op: ReduceOp,
        x: View<'_, Self::Buffer<T>>,
        axis: Option<usize>,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;
}
