//! [`ReduceKernel`] on the GPU (`reduce.cu`), and the canonical sum tree that the masked
//! and per-sequence sums of `sequence.rs` share.
//!
//! A reduction is a set of segments (one per output) whose elements come from a source;
//! the first level reduces groups of 128 leaves (8192 elements) of each segment to one
//! 16-lane vector, each further level groups of 128 vectors, until one vector per segment
//! is left; `sum_finish` folds its lanes. This is the canonical order of
//! `rlgrad_core::reduce` (see `reduce.cu` for why the levels compose to it).

use rlgrad_core::kernels::{CopyKernel, ReduceKernel, ReduceOp};
use rlgrad_core::{Error, Float, Result, View};

use crate::compile::Family;
use crate::device::{BLOCK, Cuda, CudaBuffer, KernelArg, Scalar, check_len, check_view, grid};

/// Elements per first-level block (128 leaves of 64).
const LEVEL_ONE: usize = 128 * 64;
/// Vectors per block of the later levels.
const LEVEL_GROUP: usize = 128;
/// Elements per block of the min/max levels.
const EXTREMUM_BLOCK: usize = BLOCK as usize * 16;

/// Where the first level reads a segment's elements (the `*Source` structs of reduce.cu).
pub(crate) enum Source {
    /// `sum_columns`: column `o` of a dense `[outer, len, inner]` array at `x`; with
    /// `means` (an address, 0 for none), `(x - means[o])^2`.
    Columns {
        x: u64,
        means: u64,
        len: usize,
        inner: usize,
    },
    /// `sum_sequences`: the `lengths[o] * features` valid values of row `o` (`row` wide).
    Sequences {
        x: u64,
        lengths: u64,
        row: usize,
        features: usize,
    },
    /// `sum_masked`: the packed valid values of a `[B, T, F]` array, one segment.
    Masked {
        x: u64,
        other: u64,
        offsets: u64,
        batch: usize,
        row: usize,
        total: usize,
        term: i32,
        shift: Scalar,
    },
}

fn blocks(function: &'static str, segments: usize, per_segment: usize) -> Result<u32> {
    segments
        .checked_mul(per_segment)
        .and_then(|b| u32::try_from(b).ok())
        .filter(|&b| b < 1 << 31)
        .ok_or_else(|| {
            Error::shape(
                function,
                "x",
                "fewer than 2^31 blocks of work",
                format_args!("{segments} segments of {per_segment} blocks"),
            )
        })
}

fn config(blocks: u32) -> cudarc::driver::LaunchConfig {
    cudarc::driver::LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl Cuda {
    /// The canonical sums of `segments` segments of at most `longest` elements, written
    /// to `out` (an address of `segments` elements), divided by `divisor` when given;
    /// segments with `lengths[o] == 0` (an address, 0 for none) get `+0`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn canonical_sums<T: Float>(
        &self,
        function: &'static str,
        source: Source,
        segments: usize,
        longest: usize,
        divisor: Option<T>,
        lengths: u64,
        out: u64,
    ) -> Result<()> {
        let mut per_segment = longest.div_ceil(LEVEL_ONE).max(1);
        let mut vectors = self.uninit::<T>(function, segments * per_segment * 16)?;
        let level = blocks(function, segments, per_segment)?;
        let v = self.ptr(&vectors);
        let bps = per_segment as u64;
        match source {
            Source::Columns {
                x,
                means,
                len,
                inner,
            } => {
                let kernel = self.function::<T>(Family::Reduce, "sum_columns")?;
                let args: [&dyn KernelArg; 6] =
                    [&x, &means, &(len as u64), &(inner as u64), &bps, &v];
                self.launch(function, &kernel, config(level), &args)?;
            }
            Source::Sequences {
                x,
                lengths,
                row,
                features,
            } => {
                let kernel = self.function::<T>(Family::Reduce, "sum_sequences")?;
                let args: [&dyn KernelArg; 6] =
                    [&x, &lengths, &(row as u64), &(features as u64), &bps, &v];
                self.launch(function, &kernel, config(level), &args)?;
            }
            Source::Masked {
                x,
                other,
                offsets,
                batch,
                row,
                total,
                term,
                shift,
            } => {
                let kernel = self.function::<T>(Family::Reduce, "sum_masked")?;
                let args: [&dyn KernelArg; 10] = [
                    &x,
                    &other,
                    &offsets,
                    &(batch as u64),
                    &(row as u64),
                    &(total as u64),
                    &term,
                    &shift,
                    &bps,
                    &v,
                ];
                self.launch(function, &kernel, config(level), &args)?;
            }
        }
        while per_segment > 1 {
            let count = per_segment;
            per_segment = count.div_ceil(LEVEL_GROUP);
            let next = self.uninit::<T>(function, segments * per_segment * 16)?;
            let kernel = self.function::<T>(Family::Reduce, "sum_vectors")?;
            let level = blocks(function, segments, per_segment)?;
            self.launch(
                function,
                &kernel,
                config(level),
                &[
                    &self.ptr(&vectors),
                    &(count as u64),
                    &(per_segment as u64),
                    &self.ptr(&next),
                ],
            )?;
            self.release(std::mem::replace(&mut vectors, next));
        }
        let kernel = self.function::<T>(Family::Reduce, "sum_finish")?;
        self.launch(
            function,
            &kernel,
            grid(segments),
            &[
                &self.ptr(&vectors),
                &(segments as u64),
                &i32::from(divisor.is_some()),
                &Scalar::of(divisor.unwrap_or_else(T::one)),
                &lengths,
                &out,
            ],
        )?;
        self.release(vectors);
        Ok(())
    }

    /// Min or max of every column of the dense `[outer, len, inner]` array at `x`.
    fn extrema<T: Float>(
        &self,
        is_max: bool,
        x: u64,
        len: usize,
        inner: usize,
        segments: usize,
        out: u64,
    ) -> Result<()> {
        const F: &str = "Cuda::reduce";
        let kernel = self.function::<T>(Family::Reduce, "extremum")?;
        let is_max = i32::from(is_max);
        let (mut input, mut input_index, mut count) = (x, 0u64, len);
        let mut held: Option<(CudaBuffer<T>, CudaBuffer<u64>)> = None;
        loop {
            let per_segment = count.div_ceil(EXTREMUM_BLOCK);
            let level = blocks(F, segments, per_segment)?;
            let last = per_segment == 1;
            let next = if last {
                None
            } else {
                Some((
                    self.uninit::<T>(F, segments * per_segment)?,
                    self.uninit::<u64>(F, segments * per_segment)?,
                ))
            };
            let (values, indices) = match &next {
                Some((v, i)) => (self.ptr(v), self.ptr(i)),
                None => (out, 0),
            };
            self.launch(
                F,
                &kernel,
                config(level),
                &[
                    &is_max,
                    &input,
                    &input_index,
                    &(count as u64),
                    &(inner as u64),
                    &(per_segment as u64),
                    &values,
                    &indices,
                ],
            )?;
            if let Some((v, i)) = held.take() {
                self.release(v);
                self.release(i);
            }
            if last {
                return Ok(());
            }
            (input, input_index, count) = (values, indices, per_segment);
            held = next;
        }
    }
}

/// An error unless `op` has a value for `len` elements.
fn check_count(op: ReduceOp, len: usize) -> Result<()> {
    let needed = op.min_len();
    if len >= needed {
        Ok(())
    } else {
        Err(Error::empty(
            "Cuda::reduce",
            "x",
            format_args!("at least {needed} elements per reduction for {op:?}, got {len}"),
        ))
    }
}

impl<T: Float> ReduceKernel<T> for Cuda {
    fn reduce(
        &self,
        op: ReduceOp,
        x: View<'_, CudaBuffer<T>>,
        axis: Option<usize>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::reduce";
        check_view(F, "x", x)?;
        let dims = x.layout.shape().dims();
        let (len, inner, outputs) = match axis {
            None => (x.layout.numel(), 1, 1),
            Some(axis) => {
                x.layout.shape().check_axis(F, "axis", axis)?;
                let inner: usize = dims[axis + 1..].iter().product();
                let outer: usize = dims[..axis].iter().product();
                (dims[axis], inner, outer * inner)
            }
        };
        check_len(F, "out", out, outputs)?;
        if outputs == 0 {
            return Ok(());
        }
        check_count(op, len)?;
        if len == 0 {
            // Only a sum has a value here: +0.
            return self.zero(F, out);
        }
        // A dense copy of a strided view, as the Cpu makes one.
        let copy = if x.layout.is_contiguous() {
            None
        } else {
            let mut dense = self.uninit::<T>(F, x.layout.numel())?;
            self.copy(x, &mut dense)?;
            Some(dense)
        };
        let data = match &copy {
            Some(dense) => self.ptr(dense),
            None => self.ptr(x.buffer) + (x.layout.offset() * T::DTYPE.size_in_bytes()) as u64,
        };
        let target = self.ptr(out);
        let columns = |means| Source::Columns {
            x: data,
            means,
            len,
            inner,
        };
        let count = T::from_usize(len);
        match op {
            ReduceOp::Sum => {
                self.canonical_sums::<T>(F, columns(0), outputs, len, None, 0, target)?
            }
            ReduceOp::Mean => {
                self.canonical_sums(F, columns(0), outputs, len, Some(count), 0, target)?
            }
            ReduceOp::Var { ddof } => {
                let means = self.uninit::<T>(F, outputs)?;
                let m = self.ptr(&means);
                self.canonical_sums(F, columns(0), outputs, len, Some(count), 0, m)?;
                let divisor = T::from_usize(len - ddof);
                self.canonical_sums(F, columns(m), outputs, len, Some(divisor), 0, target)?;
                self.release(means);
            }
            ReduceOp::Min | ReduceOp::Max => self.extrema::<T>(
                matches!(op, ReduceOp::Max),
                data,
                len,
                inner,
                outputs,
                target,
            )?,
            _ => {
                return Err(Error::value(
                    F,
                    "op",
                    "a reduction this device knows",
                    format_args!("{op:?}"),
                ));
            }
        }
        if let Some(dense) = copy {
            self.release(dense);
        }
        Ok(())
    }
}
