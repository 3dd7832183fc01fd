use crate::kernels::UnaryOp;
use crate::{Device, Error, Float, Result, Shape, View};

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

/// Data movement: materializing views, gathering and scattering along an axis,
/// concatenating. Every kernel writes every element of its (dense, row-major) output.
pub trait CopyKernel<T: Float>: Device {
    /// `out` = the elements of `x` in row-major order.
    fn copy(&self, x: View<'_, Self::Buffer<T>>, out: &mut Self::Buffer<T>) -> Result<()>;

    /// `out` = the slices `indices[i]` of `x` along `axis`, stacked along `axis` in the
    /// order given (indices may repeat). An error when an index is out of range.
    fn index_select(
        &self,
        x: View<'_, Self::Buffer<T>>,
        axis: usize,
        indices: &[usize],
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// The adjoint of [`CopyKernel::index_select`]: `out` has `x`'s shape with axis `axis`
    /// of size `size`; it starts at zero and slice `i` of `x` along `axis` is added to slice
    /// `indices[i]` of `out`, for `i` in increasing order (so repeated indices accumulate
    /// in a fixed order). An error when an index is `>= size`.
    fn index_add(
        &self,
        x: View<'_, Self::Buffer<T>>,
        axis: usize,
        indices: &[usize],
        size: usize,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// `out` = `parts` joined along `axis`; all parts have equal dimensions except `axis`.
    fn concat(
        &self,
        parts: &[View<'_, Self::Buffer<T>>],
        axis: usize,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;
}

/// Matrix multiplication of row-major batches: `lhs` is `[..., m, k]`, `rhs` is
/// `[..., k, n]` with the same batch dimensions (broadcast by the caller through stride-0
/// views), the output a dense `[..., m, n]` that the kernel overwrites.
///
/// # Canonical order
///
/// Every output is a chain of fused multiply-adds over `k` in increasing order, starting
/// from `-0`: `acc = fma(lhs[i, 0], rhs[0, j], -0)`, then
/// `acc = fma(lhs[i, p], rhs[p, j], acc)` for `p = 1..k` (one rounding per step, IEEE
/// `fusedMultiplyAdd`); `k = 0` gives `+0`. This is the one place where rlgrad uses a fused
/// multiply-add, because the canonical formula says so: the result is the same bits on
/// every device, thread count, blocking and vector width, and on every CPU (a CPU without
/// FMA instructions computes the same `fma` in software, slowly).
pub trait MatmulKernel<T: Float>: Device {
    /// `out = lhs @ rhs`.
    fn matmul(
        &self,
        lhs: View<'_, Self::Buffer<T>>,
        rhs: View<'_, Self::Buffer<T>>,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// A linear layer in one pass, where the device fuses it: `out = activation(lhs @
    /// rhs + bias)` for `lhs: [m, k]`, `rhs: [k, n]` and `bias: [n]` added to every row.
    /// Each output is the canonical chain, then `+ bias[j]`
    /// ([`crate::kernels::BinaryOp::Add`]), then `activation` ([`UnaryOp::apply`]): the
    /// bits of the three ops run one after the other, without writing and reading the
    /// product twice more.
    ///
    /// Returns `Ok(false)` and leaves `out` as it is where the device does not fuse these
    /// operands (the default: a device without the fused kernel), so that the caller runs
    /// the three ops instead; errors as [`MatmulKernel::matmul`], and for a `bias` that is
    /// not `[n]`.
    fn matmul_bias(
        &self,
        lhs: View<'_, Self::Buffer<T>>,
        rhs: View<'_, Self::Buffer<T>>,
        bias: View<'_, Self::Buffer<T>>,
        activation: Option<UnaryOp<T>>,
        out: &mut Self::Buffer<T>,
    ) -> Result<bool> {
        let _ = (lhs, rhs, bias, activation, out);
        Ok(false)
    }
}

/// The dimensions `(m, k, n, batch)` of `lhs @ rhs` for a [`MatmulKernel`]: an error naming
/// `function` unless `rhs` is `[..., k, n]` fitting `lhs` `[..., m, k]` with the same batch
/// dimensions (`batch` is their product).
pub fn matmul_dims(
    function: &'static str,
    lhs: &Shape,
    rhs: &Shape,
) -> Result<(usize, usize, usize, usize)> {
    let (ls, rs) = (lhs.dims(), rhs.dims());
    let nd = ls.len();
    if nd < 2 || rs.len() != nd || ls[..nd - 2] != rs[..nd - 2] || ls[nd - 1] != rs[nd - 2] {
        return Err(Error::shape(
            function,
            "rhs",
            format_args!("[..., k, n] fitting lhs of shape {lhs} ([..., m, k])"),
            rhs,
        ));
    }
    let batch = ls[..nd - 2].iter().product();
    Ok((ls[nd - 2], ls[nd - 1], rs[nd - 1], batch))
}
