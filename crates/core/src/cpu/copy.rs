use super::{CHUNK, Cpu, MIN_TASK, check_view, dense_or_copy};
use crate::kernels::CopyKernel;
use crate::{Error, Float, Result, View};

impl<T: Float> CopyKernel<T> for Cpu {
    fn copy(&self, x: View<'_, Vec<T>>) -> Result<Vec<T>> {
        check_view("Cpu::copy", "x", x)?;
        Ok(dense_or_copy(self.par, x).into_owned())
    }

    fn index_select(&self, x: View<'_, Vec<T>>, axis: usize, indices: &[usize]) -> Result<Vec<T>> {
        check_view("Cpu::index_select", "x", x)?;
        let shape = x.layout.shape();
        shape.check_axis("Cpu::index_select", "axis", axis)?;
        let len = shape.dims()[axis];
        if let Some(&bad) = indices.iter().find(|&&i| i >= len) {
            return Err(Error::out_of_range(
                "Cpu::index_select",
                "indices",
                format_args!("indices below {len}, the size of axis {axis}"),
                bad,
            ));
        }
        let inner: usize = shape.dims()[axis + 1..].iter().product();
        let outer: usize = shape.dims()[..axis].iter().product();
        let data = dense_or_copy(self.par, x);
        let mut out = super::alloc::try_zeroed(
            outer * indices.len() * inner,
            "Cpu::index_select",
            "indices",
        )?;
        if inner == 0 {
            return Ok(out);
        }
        let rows_per_chunk = CHUNK.div_ceil(inner);
        let par = self.par.for_work(out.len(), MIN_TASK);
        par.for_each_chunk_mut(&mut out, rows_per_chunk * inner, |ci, chunk| {
            for (r, row) in chunk.chunks_mut(inner).enumerate() {
                let out_row = ci * rows_per_chunk + r;
                let (o, k) = (out_row / indices.len(), out_row % indices.len());
                let src = (o * len + indices[k]) * inner;
                row.copy_from_slice(&data[src..src + inner]);
            }
        });
        Ok(out)
    }

    fn concat(&self, parts: &[View<'_, Vec<T>>], axis: usize) -> Result<Vec<T>> {
        let Some(first) = parts.first() else {
            return Err(Error::empty("Cpu::concat", "parts", "at least one part"));
        };
        let shape = first.layout.shape();
        shape.check_axis("Cpu::concat", "axis", axis)?;
        for part in parts {
            check_view("Cpu::concat", "parts", *part)?;
            let other = part.layout.shape();
            let agrees = other.ndim() == shape.ndim()
                && other
                    .dims()
                    .iter()
                    .zip(shape.dims())
                    .enumerate()
                    .all(|(i, (a, b))| i == axis || a == b);
            if !agrees {
                return Err(Error::shape(
                    "Cpu::concat",
                    "parts",
                    format_args!("shapes equal to {shape} except along axis {axis}"),
                    other,
                ));
            }
        }
        let outer: usize = shape.dims()[..axis].iter().product();
        let inner: usize = shape.dims()[axis + 1..].iter().product();
        let dense: Vec<_> = parts.iter().map(|p| dense_or_copy(self.par, *p)).collect();
        let blocks: Vec<usize> = parts
            .iter()
            .map(|p| p.layout.shape().dims()[axis] * inner)
            .collect();
        let total: usize = blocks.iter().sum();
        let mut out = super::alloc::try_with_capacity(outer * total, "Cpu::concat", "parts")?;
        for o in 0..outer {
            for (data, &block) in dense.iter().zip(&blocks) {
                out.extend_from_slice(&data[o * block..(o + 1) * block]);
            }
        }
        Ok(out)
    }
}
