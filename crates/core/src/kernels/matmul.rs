use crate::kernels::UnaryOp;
use crate::{Device, Error, Float, Result, Shape, View};

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

/// An error naming `function` unless `bias` is `[n]`, one value per column of the product,
/// as [`MatmulKernel::matmul_bias`] takes it.
pub fn check_bias(function: &'static str, bias: &Shape, n: usize) -> Result<()> {
    if bias.dims() == [n] {
        return Ok(());
    }
    Err(Error::shape(
        function,
        "bias",
        format_args!("[{n}] (one value per column of lhs @ rhs)"),
        bias,
    ))
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
