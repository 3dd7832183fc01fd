use super::{CHUNK, Cpu, check_output, check_view, dense_or_copy, for_each_run};
use crate::cpu::grain::{Family, grain};
use crate::kernels::CopyKernel;
use crate::{Error, Float, Result, View};

/// `Ok` when every index is below `len`, the size of axis `axis`.
fn check_indices(function: &'static str, indices: &[usize], len: usize, axis: usize) -> Result<()> {
    match indices.iter().find(|&&i| i >= len) {
        Some(&bad) => Err(Error::out_of_range(
            function,
            "indices",
            format_args!("indices below {len}, the size of axis {axis}"),
            bad,
        )),
        None => Ok(()),
    }
}

impl<T: Float> CopyKernel<T> for Cpu {
    fn copy(&self, x: View<'_, Vec<T>>, out: &mut Vec<T>) -> Result<()> {
        check_view("Cpu::copy", "x", x)?;
        check_output("Cpu::copy", out, x.layout.numel())?;
        super::elementwise::map(self.par, x, out, |v| v);
        Ok(())
    }

    fn index_select(
        &self,
        x: View<'_, Vec<T>>,
        axis: usize,
        indices: &[usize],
        out: &mut Vec<T>,
    ) -> Result<()> {
        check_view("Cpu::index_select", "x", x)?;
        let shape = x.layout.shape();
        shape.check_axis("Cpu::index_select", "axis", axis)?;
        let len = shape.dims()[axis];
        check_indices("Cpu::index_select", indices, len, axis)?;
        let inner: usize = shape.dims()[axis + 1..].iter().product();
        let outer: usize = shape.dims()[..axis].iter().product();
        check_output("Cpu::index_select", out, outer * indices.len() * inner)?;
        if inner == 0 || out.is_empty() {
            return Ok(());
        }
        let data = dense_or_copy("Cpu::index_select", self.par, x)?;
        let rows_per_chunk = CHUNK.div_ceil(inner);
        let par = self.par.for_work(out.len(), grain(Family::Elementwise));
        par.for_each_chunk_mut(out, rows_per_chunk * inner, |ci, chunk| {
            for (r, row) in chunk.chunks_mut(inner).enumerate() {
                let out_row = ci * rows_per_chunk + r;
                let (o, k) = (out_row / indices.len(), out_row % indices.len());
                let src = (o * len + indices[k]) * inner;
                row.copy_from_slice(&data[src..src + inner]);
            }
        });
        Ok(())
    }

    fn index_add(
        &self,
        x: View<'_, Vec<T>>,
        axis: usize,
        indices: &[usize],
        size: usize,
        out: &mut Vec<T>,
    ) -> Result<()> {
        check_view("Cpu::index_add", "x", x)?;
        let shape = x.layout.shape();
        shape.check_axis("Cpu::index_add", "axis", axis)?;
        if shape.dims()[axis] != indices.len() {
            return Err(Error::shape(
                "Cpu::index_add",
                "indices",
                format_args!("one index per slice of axis {axis} of {shape}"),
                format_args!("{} indices", indices.len()),
            ));
        }
        check_indices("Cpu::index_add", indices, size, axis)?;
        let inner: usize = shape.dims()[axis + 1..].iter().product();
        let outer: usize = shape.dims()[..axis].iter().product();
        check_output("Cpu::index_add", out, outer * size * inner)?;
        out.fill(T::zero());
        if inner == 0 || indices.is_empty() {
            return Ok(());
        }
        let data = dense_or_copy("Cpu::index_add", self.par, x)?;
        // Each task owns whole outer blocks of `out`, and inside a block adds the source
        // slices in index order, so the order of additions never depends on the threads.
        let block = size * inner;
        if block == 0 {
            return Ok(());
        }
        let blocks_per_chunk = CHUNK.div_ceil(block);
        let par = self.par.for_work(out.len(), grain(Family::Elementwise));
        par.for_each_chunk_mut(out, blocks_per_chunk * block, |ci, chunk| {
            for (b, target) in chunk.chunks_mut(block).enumerate() {
                let o = ci * blocks_per_chunk + b;
                for (i, &index) in indices.iter().enumerate() {
                    let src = (o * indices.len() + i) * inner;
                    let dst = &mut target[index * inner..(index + 1) * inner];
                    for (d, &v) in dst.iter_mut().zip(&data[src..src + inner]) {
                        *d = *d + v;
                    }
                }
            }
        });
        Ok(())
    }

    fn concat(&self, parts: &[View<'_, Vec<T>>], axis: usize, out: &mut Vec<T>) -> Result<()> {
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
        let block = |part: &View<'_, Vec<T>>| part.layout.shape().dims()[axis] * inner;
        let total: usize = parts.iter().map(block).sum();
        check_output("Cpu::concat", out, outer * total)?;
        // Part by part: each part's elements go to their column range of every outer row.
        let mut column = 0;
        for part in parts {
            let width = block(part);
            for_each_run(
                [part.layout],
                0,
                part.layout.numel(),
                |pos, [s], [st], count| {
                    let (o, c) = (pos / width, pos % width);
                    let dst = &mut out[o * total + column + c..][..count];
                    for (i, d) in dst.iter_mut().enumerate() {
                        *d = part.buffer[s + i * st];
                    }
                },
            );
            column += width;
        }
        Ok(())
    }
}
