//! Matmul on the Cpu: rlgrad's own blocked GEMM ([`super::gemm`]) in the canonical order
//! of [`MatmulKernel`], over every batch entry. Strided operands (transposed views) are
//! read directly by the packing, with no copy.

use super::gemm::{Strided, gemm};
use super::{Cpu, check_output, check_view};
use crate::kernels::MatmulKernel;
use crate::shape::RowCursor;
use crate::{Dims, Error, Float, Layout, Result, Shape, View};

impl<T: Float> MatmulKernel<T> for Cpu {
    fn matmul(&self, lhs: View<'_, Vec<T>>, rhs: View<'_, Vec<T>>, out: &mut Vec<T>) -> Result<()> {
        check_view("Cpu::matmul", "lhs", lhs)?;
        check_view("Cpu::matmul", "rhs", rhs)?;
        let (ls, rs) = (lhs.layout.shape().dims(), rhs.layout.shape().dims());
        let nd = ls.len();
        if nd < 2 || rs.len() != nd || ls[..nd - 2] != rs[..nd - 2] || ls[nd - 1] != rs[nd - 2] {
            return Err(Error::shape(
                "Cpu::matmul",
                "rhs",
                format_args!(
                    "[..., k, n] fitting lhs of shape {} ([..., m, k])",
                    lhs.layout.shape()
                ),
                rhs.layout.shape(),
            ));
        }
        let (m, k, n) = (ls[nd - 2], ls[nd - 1], rs[nd - 1]);
        let batch: usize = ls[..nd - 2].iter().product();
        check_output("Cpu::matmul", out, batch * m * n)?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        if k == 0 {
            out.fill(T::zero());
            return Ok(());
        }
        let operand = |buffer, start, strides: &[usize]| Strided {
            data: buffer,
            offset: start,
            row_stride: strides[nd - 2],
            col_stride: strides[nd - 1],
        };
        let (l_strides, r_strides) = (lhs.layout.strides(), rhs.layout.strides());
        if nd == 2 {
            // A plain product (every linear layer): no batch walk.
            let (a, b) = (
                operand(lhs.buffer, lhs.layout.offset(), l_strides),
                operand(rhs.buffer, rhs.layout.offset(), r_strides),
            );
            gemm(m, n, k, a, b, out, self.par());
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
                operand(lhs.buffer, lc.start(), l_strides),
                operand(rhs.buffer, rc.start(), r_strides),
                dst,
                self.par(),
            );
            lc.advance();
            rc.advance();
        }
        Ok(())
    }
}
