//! Matmul on the Cpu: rlgrad's own blocked GEMM ([`super::gemm`]) in the canonical order
//! of [`MatmulKernel`], over every batch entry. Strided operands (transposed views) are
//! read directly by the packing, with no copy.

use super::gemm::{Epilogue, Strided, gemm};
use super::{Cpu, check_output, check_view};
use crate::kernels::{MatmulKernel, UnaryOp, check_bias, matmul_dims};
use crate::shape::RowCursor;
use crate::{Dims, Float, Layout, Result, Shape, View};

/// The dimensions of a product, `(m, k, n, batch)`, checked: both views inside their
/// buffers, `rhs` `[..., k, n]` fitting `lhs` `[..., m, k]`, `out` of `batch * m * n`.
fn product_dims<T>(
    function: &'static str,
    lhs: View<'_, Vec<T>>,
    rhs: View<'_, Vec<T>>,
    out: &[T],
) -> Result<(usize, usize, usize, usize)> {
    check_view(function, "lhs", lhs)?;
    check_view(function, "rhs", rhs)?;
    let (m, k, n, batch) = matmul_dims(function, lhs.layout.shape(), rhs.layout.shape())?;
    check_output(function, out, batch * m * n)?;
    Ok((m, k, n, batch))
}

/// A 2-D operand of the GEMM: the last two axes of `view` from element `start`.
fn operand<'a, T>(view: View<'a, Vec<T>>, start: usize) -> Strided<'a, T> {
    let strides = view.layout.strides();
    let nd = strides.len();
    Strided {
        data: view.buffer,
        offset: start,
        row_stride: strides[nd - 2],
        col_stride: strides[nd - 1],
    }
}

impl<T: Float> MatmulKernel<T> for Cpu {
    fn matmul(&self, lhs: View<'_, Vec<T>>, rhs: View<'_, Vec<T>>, out: &mut Vec<T>) -> Result<()> {
        let (m, k, n, _) = product_dims("Cpu::matmul", lhs, rhs, out)?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        if k == 0 {
            out.fill(T::zero());
            return Ok(());
        }
        let nd = lhs.layout.shape().ndim();
        if nd == 2 {
            // A plain product (every linear layer): no batch walk.
            let (a, b) = (
                operand(lhs, lhs.layout.offset()),
                operand(rhs, rhs.layout.offset()),
            );
            gemm(m, n, k, a, b, out, self.par(), None);
            return Ok(());
        }
        // Cursors over the batch dimensions: a layout of shape [batch..., 1] whose rows
        // are the batch entries, reusing the row walker.
        let batch_layout = |view: &View<'_, Vec<T>>| {
            let mut dims = Dims::from(&view.layout.shape().dims()[..nd - 2]);
            dims.push(1);
            let mut strides = Dims::from(&view.layout.strides()[..nd - 2]);
            strides.push(1);
            Layout::from_parts(Shape::from(dims), strides, view.layout.offset())
        };
        let (lb, rb) = (batch_layout(&lhs), batch_layout(&rhs));
        let (mut lc, mut rc) = (RowCursor::new(&lb, 0), RowCursor::new(&rb, 0));
        for dst in out.chunks_exact_mut(m * n) {
            gemm(
                m,
                n,
                k,
                operand(lhs, lc.start()),
                operand(rhs, rc.start()),
                dst,
                self.par(),
                None,
            );
            lc.advance();
            rc.advance();
        }
        Ok(())
    }

    /// Fused for 2-D operands with `k >= 1` and a bias of dense `[n]` elements (the bias
    /// and activation are applied to each tile of the output as the GEMM stores it);
    /// other operands return `Ok(false)`.
    fn matmul_bias(
        &self,
        lhs: View<'_, Vec<T>>,
        rhs: View<'_, Vec<T>>,
        bias: View<'_, Vec<T>>,
        activation: Option<UnaryOp<T>>,
        out: &mut Vec<T>,
    ) -> Result<bool> {
        let function = "Cpu::matmul_bias";
        let (m, k, n, _) = product_dims(function, lhs, rhs, out)?;
        check_view(function, "bias", bias)?;
        check_bias(function, bias.layout.shape(), n)?;
        if lhs.layout.shape().ndim() != 2 || k == 0 || m == 0 || !bias.layout.is_contiguous() {
            return Ok(false);
        }
        let start = bias.layout.offset();
        let epilogue = Epilogue {
            bias: &bias.buffer[start..start + n],
            activation,
        };
        let (a, b) = (
            operand(lhs, lhs.layout.offset()),
            operand(rhs, rhs.layout.offset()),
        );
        gemm(m, n, k, a, b, out, self.par(), Some(epilogue));
        Ok(true)
    }
}
