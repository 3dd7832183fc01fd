use super::{Cpu, check_view, dense_or_copy};
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
    fn reduce(&self, op: ReduceOp, x: View<'_, Vec<T>>, axis: Option<usize>) -> Result<Vec<T>> {
        check_view("Cpu::reduce", "x", x)?;
        let shape = x.layout.shape();
        let Some(axis) = axis else {
            check_count(op, shape.numel())?;
            let data = dense_or_copy(self.par, x);
            return Ok(vec![reduce_slice(op, &data, self.par)]);
        };
        shape.check_axis("Cpu::reduce", "axis", axis)?;
        let dims = shape.dims();
        let len = dims[axis];
        let inner: usize = dims[axis + 1..].iter().product();
        let outputs: usize = dims[..axis].iter().product::<usize>() * inner;
        if outputs == 0 {
            return Ok(Vec::new());
        }
        check_count(op, len)?;
        let data = dense_or_copy(self.par, x);
        let mut out = super::alloc::try_zeroed(outputs, "Cpu::reduce", "x")?;
        // Few outputs: parallelize inside each reduction; many: across outputs.
        let (outer_par, inner_par) = if outputs < self.par.threads() {
            (Par::Seq, self.par)
        } else {
            (self.par, Par::Seq)
        };
        let chunk = CHUNK.div_ceil(len.max(1));
        outer_par.for_each_chunk_mut(&mut out, chunk, |ci, values| {
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
        Ok(out)
    }
}
