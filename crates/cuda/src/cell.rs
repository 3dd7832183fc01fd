//! [`CellKernel`] on the GPU (`cell.cu`): one thread per unit of each row, the canonical
//! element formulas of `rlgrad_core::kernels::cell`.

use rlgrad_core::kernels::CellKernel;
use rlgrad_core::kernels::cell::{LstmBackward, LstmForward, check_cell_buffers};
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
        let LstmForward {
            gates,
            c,
            cache,
            state,
        } = buffers;
        check_cell_buffers(
            F,
            batch,
            hidden,
            &[
                ("gates", 4, gates.len()),
                ("c", 1, c.len()),
                ("cache", 5, cache.len()),
                ("state", 2, state.len()),
            ],
        )?;
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
        let LstmBackward {
            cache,
            c,
            grad_state,
            grad_gates,
            grad_c,
        } = buffers;
        check_cell_buffers(
            F,
            batch,
            hidden,
            &[
                ("cache", 5, cache.len()),
                ("c", 1, c.len()),
                ("grad_state", 2, grad_state.len()),
                ("grad_gates", 4, grad_gates.len()),
                ("grad_c", 1, grad_c.len()),
            ],
        )?;
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
