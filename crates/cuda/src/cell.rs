//! [`CellKernel`] on the GPU (`cell.cu`): one thread per unit of each row, the canonical
//! element formulas of `rlgrad_core::kernels::cell`.

use rlgrad_core::kernels::CellKernel;
use rlgrad_core::kernels::cell::{LstmBackward, LstmForward};
use rlgrad_core::{Float, Result};

use crate::compile::Family;
use crate::device::{Cuda, CudaBuffer, grid};

impl<T: Float> CellKernel<T> for Cuda {
    fn lstm_cell(
        &self,
        batch: usize,
        hidden: usize,
        buffers: LstmForward<'_, CudaBuffer<T>>,
    ) -> Result<()> {
        const F: &str = "Cuda::lstm_cell";
        buffers.check(F, batch, hidden, CudaBuffer::len)?;
        let LstmForward {
            gates,
            c,
            cache,
            state,
        } = buffers;
        let units = batch * hidden;
        if units == 0 {
            return Ok(());
        }
        let kernel = self.function::<T>(Family::Cell, "lstm_cell")?;
        self.launch(
            F,
            &kernel,
            grid(units),
            &[
                &self.ptr(gates),
                &self.ptr(c),
                &self.ptr(cache),
                &self.ptr(state),
                &(batch as u64),
                &(hidden as u64),
            ],
        )
    }

    fn lstm_cell_backward(
        &self,
        batch: usize,
        hidden: usize,
        buffers: LstmBackward<'_, CudaBuffer<T>>,
    ) -> Result<()> {
        const F: &str = "Cuda::lstm_cell_backward";
        buffers.check(F, batch, hidden, CudaBuffer::len)?;
        let LstmBackward {
            cache,
            c,
            grad_state,
            grad_gates,
            grad_c,
        } = buffers;
        let units = batch * hidden;
        if units == 0 {
            return Ok(());
        }
        let kernel = self.function::<T>(Family::Cell, "lstm_cell_backward")?;
        self.launch(
            F,
            &kernel,
            grid(units),
            &[
                &self.ptr(cache),
                &self.ptr(c),
                &self.ptr(grad_state),
                &self.ptr(grad_gates),
                &self.ptr(grad_c),
                &(batch as u64),
                &(hidden as u64),
            ],
        )
    }
}
