pub(crate) mod slice;

use super::{Cpu, check_output, check_view, dense_or_copy};
use crate::kernels::{ReduceKernel, ReduceOp};
use crate::{Error, Float, Par, Result, View, reduce};

/// Elements per parallel piece of an axis reduction.
const CHUNK: usize = 1 << 14;

/// An error unless `op` has a value for `len` elements.
fn check_count(op: ReduceOp, len: usize) -> Result<()> {
    let needed = op.min_len();
    if len >= needed {
        Ok(())
    } else {
        Err(Error::empty(
            "Cpu::reduce",
            "x",
            format_args!("at least {needed} elements per reduction for {op:?}, got {len}"),
        ))
    }
}

/// One reduction of a dense slice that [`check_count`] accepted.
fn reduce_slice<T: Float>(op: ReduceOp, x: &[T], par: Par) -> T {
    let value = match op {
        ReduceOp::Sum => Ok(reduce::sum(x, par)),
        ReduceOp::Mean => reduce::mean(x, par),
        ReduceOp::Var { ddof } => reduce::var(x, ddof, par),
        ReduceOp::Min => reduce::min(x, par),
        ReduceOp::Max => reduce::max(x, par),
    };
    value.expect("check_count accepted the element count")
}

impl<T: Float> ReduceKernel<T> for Cpu {
    fn reduce(
        &self,
        op: ReduceOp,
        x: View<'_, Vec<T>>,
        axis: Option<usize>,
        out: &mut Vec<T>,
    ) -> Result<()> {
        check_view("Cpu::reduce", "x", x)?;
        let shape = x.layout.shape();
        let Some(axis) = axis else {
            check_count(op, shape.numel())?;
            check_output("Cpu::reduce", out, 1)?;
            let data = dense_or_copy("Cpu::reduce", self.par, x)?;
            out[0] = reduce_slice(op, &data, self.par);
            return Ok(());
        };
        shape.check_axis("Cpu::reduce", "axis", axis)?;
        let dims = shape.dims();
        let len = dims[axis];
        let inner: usize = dims[axis + 1..].iter().product();
        let outputs: usize = dims[..axis].iter().product::<usize>() * inner;
        check_output("Cpu::reduce", out, outputs)?;
        if outputs == 0 {
            return Ok(());
        }
        check_count(op, len)?;
        let data = dense_or_copy("Cpu::reduce", self.par, x)?;
        if inner > 1 && len > 0 && !matches!(op, ReduceOp::Min | ReduceOp::Max) {
            // Reducing a non-last axis: every outer block is a [len, inner] matrix whose
            // columns are reduced side by side.
            for (block, sums) in data.chunks(len * inner).zip(out.chunks_mut(inner)) {
                column_reduction(op, block, len, inner, self.par, sums);
            }
            return Ok(());
        }
        // Few outputs: parallelize inside each reduction; many: across outputs.
        let (outer_par, inner_par) = if outputs < self.par.threads() {
            (Par::Seq, self.par)
        } else {
            (self.par, Par::Seq)
        };
        let chunk = CHUNK.div_ceil(len.max(1));
        outer_par.for_each_chunk_mut(out, chunk, |ci, values| {
            let mut column = Vec::new();
            for (j, value) in values.iter_mut().enumerate() {
                let index = ci * chunk + j;
                let base = (index / inner) * len * inner + index % inner;
                *value = if inner == 1 {
                    reduce_slice(op, &data[base..base + len], inner_par)
                } else {
                    column.clear();
                    column.extend((0..len).map(|t| data[base + t * inner]));
                    reduce_slice(op, &column, inner_par)
                };
            }
        });
        Ok(())
    }
}

/// Sum, mean or variance of every column of the `[rows, cols]` matrix `x`, bitwise the
/// slice reduction of each column ([`reduce::sum_columns`]).
fn column_reduction<T: Float>(
    op: ReduceOp,
    x: &[T],
    rows: usize,
    cols: usize,
    par: Par,
    out: &mut [T],
) {
    reduce::sum_columns(x, rows, cols, par, |v, _| v, out);
    let count = T::from_usize(rows);
    match op {
        ReduceOp::Sum => {}
        ReduceOp::Mean => out.iter_mut().for_each(|s| *s = *s / count),
        ReduceOp::Var { ddof } => {
            let means: Vec<T> = out.iter().map(|&s| s / count).collect();
            reduce::sum_columns(
                x,
                rows,
                cols,
                par,
                |v, c| (v - means[c]) * (v - means[c]),
                out,
            );
            let divisor = T::from_usize(rows - ddof);
            out.iter_mut().for_each(|s| *s = *s / divisor);
        }
        ReduceOp::Min | ReduceOp::Max => unreachable!("extrema are reduced column by column"),
    }
}
