//! [`CopyKernel`] on the GPU (`copy.cu`). Host index lists are uploaded: `index_select`'s
//! stay on the device while the same list comes again ([`IndexCache`]), `index_add`'s go
//! to scratch buffers; `index_add` groups its source slices by target on the host
//! (stably, so each target adds its slices in increasing index order, as the Cpu does).

use rlgrad_core::kernels::CopyKernel;
use rlgrad_core::{Error, Float, Result, View};

use crate::compile::Family;
use crate::device::{Cuda, CudaBuffer, check_len, check_view, grid};
use crate::strided::strided;

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

impl Cuda {
    /// The address of a dense copy of `x` (the view itself when it is dense), and the
    /// copy to release afterwards.
    fn dense_address<T: Float>(
        &self,
        function: &'static str,
        x: View<'_, CudaBuffer<T>>,
    ) -> Result<(u64, Option<CudaBuffer<T>>)> {
        if x.layout.is_contiguous() {
            let offset = (x.layout.offset() * T::DTYPE.size_in_bytes()) as u64;
            return Ok((self.ptr(x.buffer) + offset, None));
        }
        let mut dense = self.uninit::<T>(function, x.layout.numel())?;
        self.copy(x, &mut dense)?;
        Ok((self.ptr(&dense), Some(dense)))
    }
}

/// The device copy of the indices `index_select` used last: gathering several arrays with
/// the same indices (a replay sample's observations, actions, rewards...) uploads them
/// once, and a captured CUDA graph would find them where its recording left them.
#[derive(Default)]
pub(crate) struct IndexCache {
    last: Option<(Vec<usize>, CudaBuffer<u64>)>,
}

impl IndexCache {
    /// The device address of `indices` as `u64`s: the last upload's when they are the
    /// same, else a new upload that replaces it.
    fn device_copy(
        &mut self,
        gpu: &Cuda,
        function: &'static str,
        indices: &[usize],
    ) -> Result<u64> {
        if let Some((host, device)) = &self.last
            && host.as_slice() == indices
        {
            return Ok(gpu.ptr(device));
        }
        let device = gpu.upload_u64(function, indices.iter().copied())?;
        // Released to the stream's cache: kernels already queued that read it run first.
        if let Some((_, old)) = self.last.replace((indices.to_vec(), device)) {
            gpu.release(old);
        }
        let (_, device) = self.last.as_ref().expect("just stored");
        Ok(gpu.ptr(device))
    }
}

impl<T: Float> CopyKernel<T> for Cuda {
    fn copy(&self, x: View<'_, CudaBuffer<T>>, out: &mut CudaBuffer<T>) -> Result<()> {
        const F: &str = "Cuda::copy";
        check_view(F, "x", x)?;
        let n = x.layout.numel();
        check_len(F, "out", out, n)?;
        if n == 0 {
            return Ok(());
        }
        let [xs] = strided(F, [x.layout])?;
        let kernel = self.function::<T>(Family::Copy, "copy")?;
        self.launch(
            F,
            &kernel,
            grid(n),
            &[&self.ptr(x.buffer), &xs, &self.ptr(out), &(n as u64)],
        )
    }

    fn index_select(
        &self,
        x: View<'_, CudaBuffer<T>>,
        axis: usize,
        indices: &[usize],
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::index_select";
        check_view(F, "x", x)?;
        let shape = x.layout.shape();
        shape.check_axis(F, "axis", axis)?;
        let len = shape.dims()[axis];
        check_indices(F, indices, len, axis)?;
        let inner: usize = shape.dims()[axis + 1..].iter().product();
        let outer: usize = shape.dims()[..axis].iter().product();
        let n = outer * indices.len() * inner;
        check_len(F, "out", out, n)?;
        if n == 0 {
            return Ok(());
        }
        let (data, copy) = self.dense_address(F, x)?;
        let kernel = self.function::<T>(Family::Copy, "index_select")?;
        let mut cache = self.index_cache();
        let list = cache.device_copy(self, F, indices)?;
        self.launch(
            F,
            &kernel,
            grid(n),
            &[
                &data,
                &(len as u64),
                &(inner as u64),
                &list,
                &(indices.len() as u64),
                &self.ptr(out),
                &(n as u64),
            ],
        )?;
        drop(cache);
        if let Some(copy) = copy {
            self.release(copy);
        }
        Ok(())
    }

    fn index_add(
        &self,
        x: View<'_, CudaBuffer<T>>,
        axis: usize,
        indices: &[usize],
        size: usize,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::index_add";
        check_view(F, "x", x)?;
        let shape = x.layout.shape();
        shape.check_axis(F, "axis", axis)?;
        if shape.dims()[axis] != indices.len() {
            return Err(Error::shape(
                F,
                "indices",
                format_args!("one index per slice of axis {axis} of {shape}"),
                format_args!("{} indices", indices.len()),
            ));
        }
        check_indices(F, indices, size, axis)?;
        let inner: usize = shape.dims()[axis + 1..].iter().product();
        let outer: usize = shape.dims()[..axis].iter().product();
        let n = outer * size * inner;
        check_len(F, "out", out, n)?;
        if n == 0 {
            return Ok(());
        }
        // Source slices grouped by target, in increasing index inside each group.
        let mut starts = vec![0usize; size + 1];
        for &target in indices {
            starts[target + 1] += 1;
        }
        for t in 0..size {
            starts[t + 1] += starts[t];
        }
        let mut fill = starts.clone();
        let mut order = vec![0usize; indices.len()];
        for (i, &target) in indices.iter().enumerate() {
            order[fill[target]] = i;
            fill[target] += 1;
        }
        let (data, copy) = self.dense_address(F, x)?;
        let order = self.upload_u64(F, order.into_iter())?;
        let starts = self.upload_u64(F, starts.into_iter())?;
        let kernel = self.function::<T>(Family::Copy, "index_add")?;
        self.launch(
            F,
            &kernel,
            grid(n),
            &[
                &data,
                &(indices.len() as u64),
                &(inner as u64),
                &(size as u64),
                &self.ptr(&order),
                &self.ptr(&starts),
                &self.ptr(out),
                &(n as u64),
            ],
        )?;
        self.release(order);
        self.release(starts);
        if let Some(copy) = copy {
            self.release(copy);
        }
        Ok(())
    }

    fn concat(
        &self,
        parts: &[View<'_, CudaBuffer<T>>],
        axis: usize,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::concat";
        let Some(first) = parts.first() else {
            return Err(Error::empty(F, "parts", "at least one part"));
        };
        let shape = first.layout.shape();
        shape.check_axis(F, "axis", axis)?;
        for part in parts {
            check_view(F, "parts", *part)?;
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
                    F,
                    "parts",
                    format_args!("shapes equal to {shape} except along axis {axis}"),
                    other,
                ));
            }
        }
        let outer: usize = shape.dims()[..axis].iter().product();
        let inner: usize = shape.dims()[axis + 1..].iter().product();
        let width = |part: &View<'_, CudaBuffer<T>>| part.layout.shape().dims()[axis] * inner;
        let total: usize = parts.iter().map(width).sum();
        check_len(F, "out", out, outer * total)?;
        let kernel = self.function::<T>(Family::Copy, "concat_part")?;
        let mut column = 0;
        for part in parts {
            let n = part.layout.numel();
            if n > 0 {
                let [ps] = strided(F, [part.layout])?;
                self.launch(
                    F,
                    &kernel,
                    grid(n),
                    &[
                        &self.ptr(part.buffer),
                        &ps,
                        &(width(part) as u64),
                        &(total as u64),
                        &(column as u64),
                        &self.ptr(out),
                        &(n as u64),
                    ],
                )?;
            }
            column += width(part);
        }
        Ok(())
    }
}
