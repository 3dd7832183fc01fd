//! [`ReduceKernel`] on the GPU (`reduce.cu`), and the canonical sum tree that the masked
//! and per-sequence sums of `sequence.rs` share.
//!
//! A reduction is a set of segments (one per output) whose elements come from a source.
//! The sum of one contiguous run (a whole tensor, its mean and variance) is one launch of
//! `sum_contiguous`, a persistent grid over 64 KB groups that the last block to finish
//! combines; other sources run in levels: the first reduces groups of 128 leaves (8192
//! elements) of each segment to one 16-lane vector, each further level groups of 128
//! vectors, until one vector per segment is left; `sum_finish` folds its lanes. Segments
//! of at most 8192 elements (a linear layer's bias gradient over a batch, a sequence's
//! sum) take one launch, `sum_*_once`, whose block folds the lanes itself. Both are
//! the canonical order of `rlgrad_core::reduce` (see `reduce.cu` for why the pieces compose
//! to it).

use rlgrad_core::kernels::{CopyKernel, ReduceKernel, ReduceOp};
use rlgrad_core::{Error, Float, Result, View};

use crate::compile::Family;
use crate::device::{BLOCK, Cuda, CudaBuffer, KernelArg, Scalar, check_len, check_view, grid};

/// Elements per first-level block (128 leaves of 64).
const LEVEL_ONE: usize = 128 * 64;
/// Vectors per block of the later levels.
const LEVEL_GROUP: usize = 128;
/// Bytes per group of `sum_contiguous` (`Contiguous<T>::GROUP_LEN` elements).
const CONTIGUOUS_GROUP_BYTES: usize = 64 << 10;
/// The fan-in of `sum_contiguous`'s combining tree (`FAN_IN`).
const FAN_IN: usize = 64;
/// `sum_contiguous`'s tickets (`SUM_TICKETS`).
const SUM_TICKETS: usize = 1 << 17;
/// Elements per block of the min/max levels.
const EXTREMUM_BLOCK: usize = BLOCK as usize * 16;

/// Where the first level reads a segment's elements (the `*Source` structs of reduce.cu),
/// in the kernels' words (addresses and counts as `u64`).
pub(crate) enum Source {
    /// `sum_columns`: column `o` of a dense `[outer, len, inner]` array at `x`; with
    /// `means` (an address, 0 for none), `(x - means[o])^2`.
    Columns {
        x: u64,
        means: u64,
        len: u64,
        inner: u64,
    },
    /// `sum_sequences`: the `lengths[o] * features` valid values of row `o` (`row` wide).
    Sequences {
        x: u64,
        lengths: u64,
        row: u64,
        features: u64,
    },
    /// `sum_masked`: the packed valid values of a `[B, T, F]` array, one segment.
    Masked {
        x: u64,
        other: u64,
        offsets: u64,
        features: u64,
        batch: u64,
        row: u64,
        total: u64,
        term: i32,
        shift: Scalar,
    },
}

/// The vectors (of 16 lanes) and the tickets of `sum_contiguous`'s combining tree over
/// `groups` groups: every level with more than one vector keeps them, and has a ticket per
/// node of the level above.
fn combining_tree(groups: usize) -> (usize, usize) {
    let (mut vectors, mut tickets, mut count) = (0, 0, groups);
    while count > 1 {
        vectors += count;
        count = count.div_ceil(FAN_IN);
        tickets += count;
    }
    (vectors, tickets)
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

/// `blocks` blocks of [`BLOCK`] threads.
pub(crate) fn config(blocks: u32) -> cudarc::driver::LaunchConfig {
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
        if let Source::Columns {
            x,
            means,
            len,
            inner: 1,
        } = source
            && segments == 1
            && self.sum_contiguous(function, x, means, len as usize, divisor, out)?
        {
            return Ok(());
        }
        let mut per_segment = longest.div_ceil(LEVEL_ONE).max(1);
        // The source's own arguments, then `tail`, to its level-1 kernel (`once`: the one
        // that also folds the lanes). On the stack: every column sum launches through here.
        let launch_source = |once: bool, tail: &[&dyn KernelArg], blocks: u32| -> Result<()> {
            let (names, head): ([&str; 2], &[&dyn KernelArg]) = match &source {
                Source::Columns {
                    x,
                    means,
                    len,
                    inner,
                } => (["sum_columns", "sum_columns_once"], &[x, means, len, inner]),
                Source::Sequences {
                    x,
                    lengths,
                    row,
                    features,
                } => (
                    ["sum_sequences", "sum_sequences_once"],
                    &[x, lengths, row, features],
                ),
                Source::Masked {
                    x,
                    other,
                    offsets,
                    features,
                    batch,
                    row,
                    total,
                    term,
                    shift,
                } => (
                    ["sum_masked", "sum_masked_once"],
                    &[x, other, offsets, features, batch, row, total, term, shift],
                ),
            };
            let kernel = self.function::<T>(Family::Reduce, names[usize::from(once)])?;
            let count = head.len() + tail.len();
            let mut args: [&dyn KernelArg; 13] = [&0u64; 13];
            args[..head.len()].copy_from_slice(head);
            args[head.len()..count].copy_from_slice(tail);
            self.launch(function, &kernel, config(blocks), &args[..count])
        };
        if per_segment == 1 {
            // One block per segment: it folds the lanes itself (`sum_*_once`), one launch.
            let (divide, divisor) = (
                i32::from(divisor.is_some()),
                Scalar::of(divisor.unwrap_or_else(T::one)),
            );
            let blocks = blocks(function, segments, 1)?;
            return launch_source(true, &[&divide, &divisor, &lengths, &out], blocks);
        }
        let mut vectors = self.uninit::<T>(function, segments * per_segment * 16)?;
        let level = blocks(function, segments, per_segment)?;
        let v = self.ptr(&vectors);
        let bps = per_segment as u64;
        launch_source(false, &[&bps, &v], level)?;
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

    /// `sum_contiguous` over the `len` (> 0) elements at `x`: the canonical sum, of
    /// `(x - means[0])^2` with `means` (an address, 0 for none), divided by `divisor` when
    /// given, into `out`. `false` (nothing launched) when its tickets do not cover `len`.
    fn sum_contiguous<T: Float>(
        &self,
        function: &'static str,
        x: u64,
        means: u64,
        len: usize,
        divisor: Option<T>,
        out: u64,
    ) -> Result<bool> {
        let groups = len.div_ceil(CONTIGUOUS_GROUP_BYTES / T::DTYPE.size_in_bytes());
        let (vectors, tickets) = combining_tree(groups);
        if tickets > SUM_TICKETS {
            return Ok(false);
        }
        let kernel = self.function::<T>(Family::Reduce, "sum_contiguous")?;
        let resident = self.resident_blocks::<T>(Family::Reduce, "sum_contiguous")?;
        let partials = self.uninit::<T>(function, vectors * 16)?;
        self.launch(
            function,
            &kernel,
            config(resident.min(groups as u32)),
            &[
                &x,
                &(len as u64),
                &means,
                &i32::from(divisor.is_some()),
                &Scalar::of(divisor.unwrap_or_else(T::one)),
                &self.ptr(&partials),
                &out,
            ],
        )?;
        self.release(partials);
        Ok(true)
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
            len: len as u64,
            inner: inner as u64,
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

#[cfg(test)]
mod tests {
    use std::fmt::Write;

    use rlgrad_core::{Cpu, Layout, Rng, Shape};

    use super::*;
    use crate::host::Emulator;

    /// `len` values: normal, with NaN, ±inf and -0 sprinkled in when `specials`.
    fn values<T: Float>(rng: &mut Rng, len: usize, specials: bool) -> Vec<T> {
        (0..len)
            .map(|i| match i % 4099 {
                7 if specials => T::from_f64(f64::NAN),
                100 if specials => T::from_f64(f64::INFINITY),
                2000 if specials => T::from_f64(f64::NEG_INFINITY),
                3 | 4000 => -T::zero(),
                _ => rng.normal(0.0, 1e3),
            })
            .collect()
    }

    fn hex<T: Float>(x: T) -> String {
        format!("{:x}", x.to_bits_u64())
    }

    /// What the Cpu gives for `op` over `x`.
    fn cpu_reduce<T: Float>(op: ReduceOp, x: &[T]) -> T {
        let layout = Layout::contiguous(Shape::new(&[x.len()]));
        let mut out = vec![T::zero()];
        Cpu::seq()
            .reduce(op, View::new(&x.to_vec(), &layout), None, &mut out)
            .unwrap();
        out[0]
    }

    /// `sum_contiguous` through the host emulation against the Cpu's sum, mean and
    /// variance (the second pass with the Cpu's mean), every ticket checked to be back at 0
    /// after each launch; runs of at most 4 groups launch twice (the second finds the
    /// tickets the first left), and larger ones are sums launched once (on 2 cores, the
    /// emulation's 256 threads per block made every run of 64 groups cost seconds):
    /// sizes around the leaves, the 64 KB groups and the combining tree's nodes of 64
    /// groups, up to a few million, runs at aligned and unaligned offsets, grids smaller
    /// and larger than the groups, NaN, ±inf and -0 among the values (and runs of -0
    /// only, whose sum is -0 only if every padding is -0). What it cannot see: a load
    /// that is misaligned on the GPU (x86 loads it), races between blocks.
    fn emulated_sum_gives_the_cpus_bits<T: Float>() {
        let Some(emulator) = Emulator::build(
            ("host_reduce.cpp", include_str!("../tests/host_reduce.cpp")),
            ("reduce.cu", include_str!("cuda/reduce.cu")),
        ) else {
            return;
        };
        let mut rng = Rng::new(38, "cuda-reduce-host");
        let group = CONTIGUOUS_GROUP_BYTES / T::DTYPE.size_in_bytes();
        let width = 16 / T::DTYPE.size_in_bytes();
        // (n, grid, offset, only -0): the grids walk the groups in one block, in a few, in
        // one block each and with blocks to spare; 2 * 64 + 1 groups on 128 blocks complete
        // the single-group third node (and climb) while the first is still counting.
        let cases = [
            (1, 1, 0, false),
            (63, 1, 1, false),
            (64, 1, width + 1, false),
            (65, 3, width, true),
            (1000, 2, 0, false),
            (group - 1, 1, 1, false),
            (group, 2, width + 1, false),
            (group + 1, 2, width, false),
            (2 * group + 1, 2, 1, true),
            (3 * group + 17, 3, 0, false),
            (FAN_IN * group, 7, 1, false),
            (FAN_IN * group + 1, 66, 0, false),
            (2 * FAN_IN * group + 1, 2 * FAN_IN as u32, width, false),
            (2 * FAN_IN * group + 5 * group, 3, 0, false),
        ];
        // Runs past a few groups: the sum only (the means and divisors are the same code at
        // every size), one launch.
        let small = |n: usize| n <= 4 * group;
        let launches = |n: usize| if small(n) { 2 } else { 1 };
        let (mut input, mut expected) = (String::new(), Vec::new());
        for (i, &(n, grid, offset, zeros)) in cases.iter().enumerate() {
            let buffer: Vec<T> = if zeros {
                vec![-T::zero(); offset + n]
            } else {
                values(&mut rng, offset + n, i % 3 != 0)
            };
            let x = &buffer[offset..];
            let mean = cpu_reduce(ReduceOp::Mean, x);
            let count = T::from_usize(n);
            let runs = [
                (ReduceOp::Sum, None, None),
                (ReduceOp::Mean, Some(count), None),
                (
                    ReduceOp::Var { ddof: 1 },
                    Some(T::from_usize(n - 1)),
                    Some(mean),
                ),
            ];
            let runs = if small(n) { &runs[..] } else { &runs[..1] };
            for &(op, divisor, mean) in runs {
                if n == 1 && mean.is_some() {
                    continue;
                }
                let bits: Vec<String> = buffer.iter().map(|&v| hex(v)).collect();
                writeln!(
                    input,
                    "{} {grid} {} {offset} {n} {} {} {}\n{} {}",
                    T::DTYPE.name(),
                    launches(n),
                    i32::from(divisor.is_some()),
                    hex(divisor.unwrap_or_else(T::one)),
                    mean.map_or_else(|| "-".to_owned(), hex),
                    buffer.len(),
                    bits.join(" ")
                )
                .unwrap();
                expected.push((
                    format!("{op:?} of {n} at offset {offset}"),
                    cpu_reduce(op, x),
                    launches(n),
                ));
            }
        }
        let stdout = emulator.run(input);
        let mut lines = stdout.lines();
        for (what, want, launches) in &expected {
            for launch in ["first", "second"].into_iter().take(*launches) {
                let got = T::from_bits_u64(u64::from_str_radix(lines.next().unwrap(), 16).unwrap());
                assert!(
                    got.to_bits_u64() == want.to_bits_u64() || (got.is_nan() && want.is_nan()),
                    "{what}, {launch} launch: Cpu {want:e}, emulated {got:e}"
                );
            }
        }
        assert!(lines.next().is_none(), "more output than results");
        println!("host emulation: {} sums, the Cpu's bits", expected.len());
    }

    /// `sum_columns_once` (level 1 and the lanes' fold in one launch, one block per
    /// column) on the host against the Cpu's sums, means and variances of each column
    /// of `[outer, len, inner]` arrays: columns of 1 element up to the 8192 one block
    /// holds, strided (`inner > 1`) and not, NaN and infinities among the values.
    fn emulated_column_sums_give_the_cpus_bits<T: Float>() {
        let Some(emulator) = Emulator::build(
            ("host_reduce.cpp", include_str!("../tests/host_reduce.cpp")),
            ("reduce.cu", include_str!("cuda/reduce.cu")),
        ) else {
            return;
        };
        let mut rng = Rng::new(39, "cuda-columns-host");
        let (mut input, mut expected) = (String::new(), Vec::new());
        for (i, &(outer, len, inner)) in [
            (1, 1, 1),
            (2, 5, 3),
            (1, 64, 7),
            (3, 257, 2),
            (1, LEVEL_ONE, 2),
            (2, 4095, 1),
        ]
        .iter()
        .enumerate()
        {
            let data = values::<T>(&mut rng, outer * len * inner, i % 2 == 1);
            let column = |o: usize| -> Vec<T> {
                let (a, c) = (o / inner, o % inner);
                (0..len).map(|p| data[(a * len + p) * inner + c]).collect()
            };
            let columns: Vec<Vec<T>> = (0..outer * inner).map(column).collect();
            let bits: Vec<String> = data.iter().map(|&v| hex(v)).collect();
            let means: Vec<T> = columns
                .iter()
                .map(|c| cpu_reduce(ReduceOp::Mean, c))
                .collect();
            let runs = [
                (ReduceOp::Sum, None, None),
                (ReduceOp::Mean, Some(T::from_usize(len)), None),
                (
                    ReduceOp::Var { ddof: 1 },
                    Some(T::from_usize(len.max(2) - 1)),
                    Some(&means),
                ),
            ];
            for (op, divisor, means) in runs {
                if len == 1 && means.is_some() {
                    continue;
                }
                let means_text = means.map_or_else(
                    || "-".to_owned(),
                    |m| m.iter().map(|&v| hex(v)).collect::<Vec<_>>().join(" "),
                );
                writeln!(
                    input,
                    "{} columns {outer} {len} {inner} {} {} {means_text}\n{} {}",
                    T::DTYPE.name(),
                    i32::from(divisor.is_some()),
                    hex(divisor.unwrap_or_else(T::one)),
                    data.len(),
                    bits.join(" ")
                )
                .unwrap();
                for (o, c) in columns.iter().enumerate() {
                    expected.push((
                        format!("{op:?} of column {o} of [{outer}, {len}, {inner}]"),
                        cpu_reduce(op, c),
                    ));
                }
            }
        }
        let stdout = emulator.run(input);
        let mut lines = stdout.lines();
        for (what, want) in &expected {
            let got = T::from_bits_u64(u64::from_str_radix(lines.next().unwrap(), 16).unwrap());
            assert!(
                got.to_bits_u64() == want.to_bits_u64() || (got.is_nan() && want.is_nan()),
                "{what}: Cpu {want:e}, emulated {got:e}"
            );
        }
        assert!(lines.next().is_none(), "more output than results");
    }

    #[test]
    fn emulated_column_sums_give_the_cpus_bits_in_f32() {
        emulated_column_sums_give_the_cpus_bits::<f32>();
    }

    #[test]
    fn emulated_column_sums_give_the_cpus_bits_in_f64() {
        emulated_column_sums_give_the_cpus_bits::<f64>();
    }

    #[test]
    fn emulated_sum_gives_the_cpus_bits_in_f32() {
        emulated_sum_gives_the_cpus_bits::<f32>();
    }

    #[test]
    fn emulated_sum_gives_the_cpus_bits_in_f64() {
        emulated_sum_gives_the_cpus_bits::<f64>();
    }

    #[test]
    fn the_combining_tree_has_a_level_per_fan_in() {
        assert_eq!(combining_tree(1), (0, 0));
        assert_eq!(combining_tree(2), (2, 1));
        assert_eq!(combining_tree(64), (64, 1));
        assert_eq!(combining_tree(65), (65 + 2, 2 + 1));
        // The most groups the tickets cover: 2^36 f32 elements.
        assert!(combining_tree(1 << 22).1 <= SUM_TICKETS);
    }
}
