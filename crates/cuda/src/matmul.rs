//! [`MatmulKernel`] on the GPU (`matmul.cu`): rlgrad's canonical GEMM (a fused
//! multiply-add chain over `k` for every output), not cuBLAS, so the bits are the Cpu's.

use cudarc::driver::LaunchConfig;
use rlgrad_core::kernels::{MatmulKernel, matmul_dims};
use rlgrad_core::{Dims, Error, Float, Layout, Result, Shape, View};

use crate::compile::Family;
use crate::device::{BLOCK, Cuda, CudaBuffer, check_len, check_view};
use crate::strided::strided;

/// Output tile edge of a block (`TILE_M`, `TILE_N` in matmul.cu).
const TILE: usize = 64;
/// Most batch entries side by side in the grid (its z dimension).
const MAX_GRID_Z: usize = 65_535;

/// The layout over the batch dimensions of an operand: entry `i` starts at its offset.
fn batch_layout<T>(view: &View<'_, CudaBuffer<T>>, nd: usize) -> Layout {
    Layout::from_parts(
        Shape::from(&view.layout.shape().dims()[..nd - 2]),
        Dims::from(&view.layout.strides()[..nd - 2]),
        view.layout.offset(),
    )
}

impl<T: Float> MatmulKernel<T> for Cuda {
    fn matmul(
        &self,
        lhs: View<'_, CudaBuffer<T>>,
        rhs: View<'_, CudaBuffer<T>>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::matmul";
        check_view(F, "lhs", lhs)?;
        check_view(F, "rhs", rhs)?;
        let (m, k, n, batch) = matmul_dims(F, lhs.layout.shape(), rhs.layout.shape())?;
        let nd = lhs.layout.shape().ndim();
        check_len(F, "out", out, batch * m * n)?;
        if batch * m * n == 0 {
            return Ok(());
        }
        if k == 0 {
            return self.zero(F, out);
        }
        let [lb, rb] = strided(F, [&batch_layout(&lhs, nd), &batch_layout(&rhs, nd)])?;
        let (l_strides, r_strides) = (lhs.layout.strides(), rhs.layout.strides());
        let config = LaunchConfig {
            grid_dim: (
                n.div_ceil(TILE) as u32,
                m.div_ceil(TILE) as u32,
                batch.min(MAX_GRID_Z) as u32,
            ),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        if m.div_ceil(TILE) > MAX_GRID_Z {
            return Err(Error::shape(
                F,
                "lhs",
                format_args!("at most {} rows", MAX_GRID_Z * TILE),
                m,
            ));
        }
        let kernel = self.function::<T>(Family::Matmul, "matmul")?;
        self.launch(
            F,
            &kernel,
            config,
            &[
                &self.ptr(lhs.buffer),
                &lb,
                &(l_strides[nd - 2] as u64),
                &(l_strides[nd - 1] as u64),
                &self.ptr(rhs.buffer),
                &rb,
                &(r_strides[nd - 2] as u64),
                &(r_strides[nd - 1] as u64),
                &self.ptr(out),
                &(m as u64),
                &(n as u64),
                &(k as u64),
                &(batch as u64),
            ],
        )
    }
}
