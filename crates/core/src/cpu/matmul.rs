//! Matmul on the Cpu through the `gemm` crate (the GEMM behind candle): it takes the
//! parallelism per call, reads arbitrary strides (so transposed views need no copy), and
//! splits work across threads by output blocks, never along `k`, so the result is bitwise
//! identical for every thread count. `matrixmultiply` was the lighter alternative; `gemm`
//! won on speed at the sizes RL networks use and on the per-call thread setting.

use super::{Cpu, check_view};
use crate::kernels::MatmulKernel;
use crate::shape::RowCursor;
use crate::{Error, Float, Layout, Par, Result, Shape, View};

impl<T: Float> MatmulKernel<T> for Cpu {
    fn matmul(&self, lhs: View<'_, Vec<T>>, rhs: View<'_, Vec<T>>) -> Result<Vec<T>> {
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
        let mut out = super::alloc::try_zeroed(batch * m * n, "Cpu::matmul", "lhs")?;
        if m == 0 || n == 0 || k == 0 {
            return Ok(out);
        }
        // Cursors over the batch dimensions: a layout of shape [batch..., 1] whose rows
        // are the batch entries, reusing the row walker.
        let batch_layout = |view: &View<'_, Vec<T>>| {
            let mut dims: Vec<usize> = view.layout.shape().dims()[..nd - 2].to_vec();
            dims.push(1);
            let mut strides: Vec<usize> = view.layout.strides()[..nd - 2].to_vec();
            strides.push(1);
            Layout::from_parts(Shape::from(dims), strides.into(), view.layout.offset())
        };
        let (lb, rb) = (batch_layout(&lhs), batch_layout(&rhs));
        let (mut lc, mut rc) = (RowCursor::new(&lb, 0), RowCursor::new(&rb, 0));
        let (l_strides, r_strides) = (lhs.layout.strides(), rhs.layout.strides());
        let parallelism = match self.par() {
            Par::Seq => gemm::Parallelism::None,
            Par::Rayon(threads) => gemm::Parallelism::Rayon(threads.get()),
        };
        for dst in out.chunks_exact_mut(m * n) {
            // SAFETY: `check_view` proved that every element of both views lies inside
            // its buffer, so the pointers with these strides stay in bounds for the
            // m x k and k x n matrices of this batch entry; `dst` is a dense m x n
            // matrix owned by this loop iteration.
            unsafe {
                gemm::gemm(
                    m,
                    n,
                    k,
                    dst.as_mut_ptr(),
                    1,
                    n as isize,
                    false,
                    lhs.buffer.as_ptr().add(lc.start()),
                    l_strides[nd - 1] as isize,
                    l_strides[nd - 2] as isize,
                    rhs.buffer.as_ptr().add(rc.start()),
                    r_strides[nd - 1] as isize,
                    r_strides[nd - 2] as isize,
                    T::zero(),
                    T::one(),
                    false,
                    false,
                    false,
                    parallelism,
                );
            }
            lc.advance();
            rc.advance();
        }
        Ok(out)
    }
}
