use super::{CHUNK, Cpu, MIN_TASK, check_view, dense, for_each_run};
use crate::kernels::{BinaryOp, ElementwiseKernel, UnaryOp};
use crate::{Error, Float, Result, View};

fn same_shape<T>(
    function: &'static str,
    argument: &'static str,
    reference: View<'_, Vec<T>>,
    other: View<'_, Vec<T>>,
) -> Result<()> {
    if reference.layout.shape() == other.layout.shape() {
        Ok(())
    } else {
        Err(Error::shape(
            function,
            argument,
            reference.layout.shape(),
            other.layout.shape(),
        ))
    }
}

impl<T: Float> ElementwiseKernel<T> for Cpu {
    fn unary(&self, op: UnaryOp<T>, x: View<'_, Vec<T>>) -> Result<Vec<T>> {
        check_view("Cpu::unary", "x", x)?;
        let mut out = super::alloc::try_zeroed(x.layout.numel(), "Cpu::unary", "x")?;
        let par = self.par.for_work(out.len(), MIN_TASK);
        match dense(x) {
            Some(src) => par.for_each_chunk_mut(&mut out, CHUNK, |ci, chunk| {
                for (o, &v) in chunk.iter_mut().zip(&src[ci * CHUNK..]) {
                    *o = op.apply(v);
                }
            }),
            None => par.for_each_chunk_mut(&mut out, CHUNK, |ci, chunk| {
                for_each_run(
                    [x.layout],
                    ci * CHUNK,
                    chunk.len(),
                    |pos, [s], [st], count| {
                        for (i, o) in chunk[pos..pos + count].iter_mut().enumerate() {
                            *o = op.apply(x.buffer[s + i * st]);
                        }
                    },
                );
            }),
        }
        Ok(out)
    }

    fn binary(&self, op: BinaryOp, lhs: View<'_, Vec<T>>, rhs: View<'_, Vec<T>>) -> Result<Vec<T>> {
        check_view("Cpu::binary", "lhs", lhs)?;
        check_view("Cpu::binary", "rhs", rhs)?;
        same_shape("Cpu::binary", "rhs", lhs, rhs)?;
        let mut out = super::alloc::try_zeroed(lhs.layout.numel(), "Cpu::binary", "lhs")?;
        let par = self.par.for_work(out.len(), MIN_TASK);
        match (dense(lhs), dense(rhs)) {
            (Some(a), Some(b)) => par.for_each_chunk_mut(&mut out, CHUNK, |ci, chunk| {
                let (a, b) = (&a[ci * CHUNK..], &b[ci * CHUNK..]);
                for ((o, &x), &y) in chunk.iter_mut().zip(a).zip(b) {
                    *o = op.apply(x, y);
                }
            }),
            _ => par.for_each_chunk_mut(&mut out, CHUNK, |ci, chunk| {
                for_each_run(
                    [lhs.layout, rhs.layout],
                    ci * CHUNK,
                    chunk.len(),
                    |pos, [sa, sb], [ta, tb], count| {
                        for (i, o) in chunk[pos..pos + count].iter_mut().enumerate() {
                            *o = op.apply(lhs.buffer[sa + i * ta], rhs.buffer[sb + i * tb]);
                        }
                    },
                );
            }),
        }
        Ok(out)
    }

    fn select(
        &self,
        condition: View<'_, Vec<T>>,
        on_true: View<'_, Vec<T>>,
        on_false: View<'_, Vec<T>>,
    ) -> Result<Vec<T>> {
        check_view("Cpu::select", "condition", condition)?;
        check_view("Cpu::select", "on_true", on_true)?;
        check_view("Cpu::select", "on_false", on_false)?;
        same_shape("Cpu::select", "on_true", condition, on_true)?;
        same_shape("Cpu::select", "on_false", condition, on_false)?;
        let mut out =
            super::alloc::try_zeroed(condition.layout.numel(), "Cpu::select", "condition")?;
        let par = self.par.for_work(out.len(), MIN_TASK);
        par.for_each_chunk_mut(&mut out, CHUNK, |ci, chunk| {
            for_each_run(
                [condition.layout, on_true.layout, on_false.layout],
                ci * CHUNK,
                chunk.len(),
                |pos, [sc, st, sf], [tc, tt, tf], count| {
                    for (i, o) in chunk[pos..pos + count].iter_mut().enumerate() {
                        *o = if condition.buffer[sc + i * tc] != T::zero() {
                            on_true.buffer[st + i * tt]
                        } else {
                            on_false.buffer[sf + i * tf]
                        };
                    }
                },
            );
        });
        Ok(out)
    }
}
