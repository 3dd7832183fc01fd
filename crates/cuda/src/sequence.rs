//! [`SequenceKernel`] on the GPU (`sequence.cu` for pad, unpad and masked maps; the
//! canonical sum tree of `reduce.cu` for masked and per-sequence sums). The lengths and
//! their prefix sums are uploaded once per [`Sequences`] value and kept on the device
//! ([`SequenceCache`]).

use rlgrad_core::kernels::SequenceKernel;
use rlgrad_core::kernels::sequence::{MaskedMap, MaskedTerm, PadOrder, Sequences};
use rlgrad_core::{Error, Float, Result, check};

use crate::compile::Family;
use crate::device::{BLOCK, Cuda, CudaBuffer, Scalar, check_len, grid};
use crate::reduce::{Source, config};

/// `N * F` and `B * T * F`, or an error when they overflow.
fn sizes(function: &'static str, seqs: &Sequences, features: usize) -> Result<(usize, usize)> {
    Ok((
        check::product(function, "features", seqs.total(), features)?,
        check::product(function, "features", seqs.padded_steps(), features)?,
    ))
}

/// Most [`Sequences`] whose device copies a [`Cuda`] keeps.
const CACHED: usize = 16;
/// Most bytes of device copies kept beyond the most recently used one.
const CACHED_BYTES: usize = 64 << 20;

/// The device copies of the lengths and offsets of recently used [`Sequences`], the most
/// recently used first: a training loop over the same batch layout uploads them once,
/// and a captured CUDA graph finds them where its recording left them (as long as fewer
/// than 16 other layouts come between, the oldest being dropped first).
#[derive(Default)]
pub(crate) struct SequenceCache {
    entries: Vec<Cached>,
}

struct Cached {
    seqs: Sequences,
    lengths: CudaBuffer<u64>,
    offsets: CudaBuffer<u64>,
}

impl Cached {
    fn bytes(&self) -> usize {
        (self.lengths.len() + self.offsets.len()) * 8
    }
}

/// Units of a pad or unpad block: 256 threads with `UNROLL` = 4 units each.
const ITEM_UNITS: usize = BLOCK as usize * 4;

/// The steps per item of pad and unpad, and the items (`copy_rows`), for `features > 0`:
/// about [`ITEM_UNITS`] units of the size `pad_any` picks (a float4, a
/// double2, a pair, one element).
fn items<T: Float>(seqs: &Sequences, features: usize) -> (usize, usize) {
    let unit = match T::DTYPE.size_in_bytes() {
        4 if features.is_multiple_of(4) => 4,
        _ if features.is_multiple_of(2) => 2,
        _ => 1,
    };
    let rows = (ITEM_UNITS / (features / unit)).min(seqs.max_len()).max(1);
    (rows, seqs.batch() * seqs.max_len().div_ceil(rows))
}

impl Cuda {
    /// The device addresses of `seqs`' lengths and offsets (`u64` each), uploaded the
    /// first time these sequences come.
    fn device_sequences(&self, function: &'static str, seqs: &Sequences) -> Result<(u64, u64)> {
        let mut cache = self.sequence_cache();
        match cache.entries.iter().position(|cached| cached.seqs == *seqs) {
            Some(i) => cache.entries[..=i].rotate_right(1),
            None => {
                let cached = Cached {
                    seqs: seqs.clone(),
                    lengths: self.upload_u64(function, seqs.lengths().iter().copied())?,
                    offsets: self.upload_u64(function, seqs.offsets().iter().copied())?,
                };
                cache.entries.insert(0, cached);
                let mut bytes: usize = cache.entries[1..].iter().map(Cached::bytes).sum();
                while cache.entries.len() > CACHED || bytes > CACHED_BYTES {
                    // Released to the stream's cache: kernels already queued that read
                    // them run before any reuse.
                    let old = cache.entries.pop().expect("more than the newest entry");
                    bytes -= old.bytes();
                    self.release(old.lengths);
                    self.release(old.offsets);
                }
            }
        }
        let newest = &cache.entries[0];
        Ok((self.ptr(&newest.lengths), self.ptr(&newest.offsets)))
    }

    /// `pad` or `unpad` (`name`): from `from` into `to`.
    #[allow(clippy::too_many_arguments)]
    fn pad_kernel<T: Float>(
        &self,
        function: &'static str,
        name: &str,
        seqs: &Sequences,
        features: usize,
        order: PadOrder,
        from: &CudaBuffer<T>,
        to: &mut CudaBuffer<T>,
        padded_len: usize,
    ) -> Result<()> {
        if padded_len == 0 {
            return Ok(());
        }
        let (lengths, offsets) = self.device_sequences(function, seqs)?;
        let kernel = self.function::<T>(Family::Sequence, name)?;
        // One block per item of `rows` steps of a sequence (see sequence.cu).
        let (rows, items) = items::<T>(seqs, features);
        self.launch(
            function,
            &kernel,
            config(items.clamp(1, 1 << 20) as u32),
            &[
                &self.ptr(from),
                &lengths,
                &offsets,
                &(seqs.batch() as u64),
                &(seqs.max_len() as u64),
                &(features as u64),
                &i32::from(order == PadOrder::TimeMajor),
                &(rows as u64),
                &self.ptr(to),
            ],
        )
    }
}

impl<T: Float> SequenceKernel<T> for Cuda {
    fn pad(
        &self,
        seqs: &Sequences,
        features: usize,
        order: PadOrder,
        flat: &CudaBuffer<T>,
        padded: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::pad";
        let (packed_len, padded_len) = sizes(F, seqs, features)?;
        check_len(F, "flat", flat, packed_len)?;
        check_len(F, "padded", padded, padded_len)?;
        self.pad_kernel(F, "pad", seqs, features, order, flat, padded, padded_len)
    }

    fn unpad(
        &self,
        seqs: &Sequences,
        features: usize,
        order: PadOrder,
        padded: &CudaBuffer<T>,
        flat: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::unpad";
        let (packed_len, padded_len) = sizes(F, seqs, features)?;
        check_len(F, "padded", padded, padded_len)?;
        check_len(F, "flat", flat, packed_len)?;
        if packed_len == 0 {
            return Ok(());
        }
        self.pad_kernel(F, "unpad", seqs, features, order, padded, flat, padded_len)
    }

    fn masked_sum(
        &self,
        seqs: &Sequences,
        features: usize,
        x: &CudaBuffer<T>,
        term: MaskedTerm<'_, CudaBuffer<T>, T>,
    ) -> Result<T> {
        const F: &str = "Cuda::masked_sum";
        let (values, len) = sizes(F, seqs, features)?;
        check_len(F, "x", x, len)?;
        if let MaskedTerm::Product { other, .. } = term {
            check_len(F, "other", other, len)?;
        }
        if values == 0 {
            return Ok(T::zero());
        }
        let (code, shift, other) = match term {
            MaskedTerm::Value => (0, T::zero(), 0),
            MaskedTerm::SquaredDeviation { mean } => (1, mean, 0),
            MaskedTerm::Product { other, shift } => (2, shift, self.ptr(other)),
        };
        let (_, offsets) = self.device_sequences(F, seqs)?;
        let sum = self.uninit::<T>(F, 1)?;
        let source = Source::Masked {
            x: self.ptr(x),
            other,
            offsets,
            features: features as u64,
            batch: seqs.batch() as u64,
            row: (seqs.max_len() * features) as u64,
            total: values as u64,
            term: code,
            shift: Scalar::of(shift),
        };
        self.canonical_sums::<T>(F, source, 1, values, None, 0, self.ptr(&sum))?;
        let value = rlgrad_core::Device::download(self, &sum)?[0];
        self.release(sum);
        Ok(value)
    }

    fn sequence_sums(
        &self,
        seqs: &Sequences,
        features: usize,
        x: &CudaBuffer<T>,
        sums: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::sequence_sums";
        let (_, len) = sizes(F, seqs, features)?;
        check_len(F, "x", x, len)?;
        check_len(F, "sums", sums, seqs.batch())?;
        if seqs.batch() == 0 {
            return Ok(());
        }
        if len == 0 {
            return self.zero(F, sums);
        }
        let (lengths, _) = self.device_sequences(F, seqs)?;
        let longest = seqs.lengths().iter().copied().max().unwrap_or(0) * features;
        let source = Source::Sequences {
            x: self.ptr(x),
            lengths,
            row: (seqs.max_len() * features) as u64,
            features: features as u64,
        };
        self.canonical_sums::<T>(
            F,
            source,
            seqs.batch(),
            longest,
            None,
            lengths,
            self.ptr(sums),
        )
    }

    fn masked_map(
        &self,
        seqs: &Sequences,
        features: usize,
        x: Option<&CudaBuffer<T>>,
        map: MaskedMap<'_, CudaBuffer<T>, T>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::masked_map";
        let (_, len) = sizes(F, seqs, features)?;
        let x = match x {
            Some(x) => {
                check_len(F, "x", x, len)?;
                self.ptr(x)
            }
            None if map.reads_x() => {
                return Err(Error::empty(F, "x", format_args!("an input for {map:?}")));
            }
            None => 0,
        };
        check_len(F, "out", out, len)?;
        let zero = T::zero();
        let (kind, values, [a, b, c, d]): (i32, u64, [T; 4]) = match map {
            MaskedMap::Fill(value) => (0, 0, [value, zero, zero, zero]),
            MaskedMap::PerSequence(values) => {
                check_len(F, "values", values, seqs.batch())?;
                (1, self.ptr(values), [zero; 4])
            }
            MaskedMap::Scale { shift, scale } => (2, 0, [shift, scale, zero, zero]),
            MaskedMap::Standardize { mean, denominator } => (3, 0, [mean, denominator, zero, zero]),
            MaskedMap::StandardizeBackward {
                grad,
                grad_mean,
                mean,
                denominator,
                coefficient,
            } => {
                check_len(F, "grad", grad, len)?;
                (
                    4,
                    self.ptr(grad),
                    [grad_mean, mean, denominator, coefficient],
                )
            }
        };
        if len == 0 {
            return Ok(());
        }
        let (lengths, _) = self.device_sequences(F, seqs)?;
        let kernel = self.function::<T>(Family::Sequence, "masked_map")?;
        self.launch(
            F,
            &kernel,
            grid(len),
            &[
                &x,
                &values,
                &lengths,
                &((seqs.max_len() * features) as u64),
                &(features as u64),
                &kind,
                &Scalar::of(a),
                &Scalar::of(b),
                &Scalar::of(c),
                &Scalar::of(d),
                &self.ptr(out),
                &(len as u64),
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use std::fmt::Write;

    use rlgrad_core::{Cpu, Rng};

    use super::*;
    use crate::host::Emulator;

    fn hex_line(values: impl ExactSizeIterator<Item = u64>) -> String {
        let len = values.len();
        let bits: Vec<String> = values.map(|v| format!("{v:x}")).collect();
        format!("{len} {}", bits.join(" "))
    }

    /// `pad` and `unpad` through the host emulation against the Cpu's bits: lengths with
    /// 0 and 1, sequences longer than an item, feature counts of every unit (1, 2, 3, 4,
    /// 6, 64, 65), both pad orders, grids smaller than the items. The padded input of
    /// unpad holds random bits (NaN among them) in its padding, which must not show; the
    /// outputs start as a value no kernel writes, which must not remain.
    fn emulated_pads_give_the_cpus_bits<T: Float>() {
        let Some(emulator) = Emulator::build(
            (
                "host_sequence.cpp",
                include_str!("../tests/host_sequence.cpp"),
            ),
            ("sequence.cu", include_str!("cuda/sequence.cu")),
        ) else {
            return;
        };
        let mut rng = Rng::new(38, "cuda-sequence-host");
        let cpu = Cpu::seq();
        let batches: [Vec<usize>; 5] = [
            vec![0],
            vec![1],
            vec![3, 0, 5, 1, 0],
            vec![1100, 0, 1025, 1, 7],
            (0..40).map(|i| (i * 37) % 150).collect(),
        ];
        let (mut input, mut expected) = (String::new(), Vec::new());
        for (i, lengths) in batches.iter().enumerate() {
            let seqs = Sequences::new(lengths, None).unwrap();
            for (j, features) in [1, 2, 3, 4, 6, 64, 65].into_iter().enumerate() {
                if seqs.max_len() > 1000 && features > 4 {
                    continue;
                }
                let (packed, padded) = sizes("test", &seqs, features).unwrap();
                if padded == 0 {
                    // Nothing to launch (`pad_kernel` returns).
                    continue;
                }
                let (rows, items) = items::<T>(&seqs, features);
                let grid = [items, 3, 1][(i + j) % 3];
                let flat: Vec<T> = (0..packed).map(|_| rng.normal(0.0, 1.0)).collect();
                let garbage: Vec<T> = (0..padded)
                    .map(|_| {
                        T::from_bits_u64(rng.next_u64() >> (64 - 8 * T::DTYPE.size_in_bytes()))
                    })
                    .collect();
                for order in [PadOrder::BatchMajor, PadOrder::TimeMajor] {
                    let mut want_padded = vec![T::zero(); padded];
                    cpu.pad(&seqs, features, order, &flat, &mut want_padded)
                        .unwrap();
                    let mut want_flat = vec![T::zero(); packed];
                    cpu.unpad(&seqs, features, order, &garbage, &mut want_flat)
                        .unwrap();
                    for (name, from, want) in
                        [("pad", &flat, want_padded), ("unpad", &garbage, want_flat)]
                    {
                        writeln!(
                            input,
                            "{} {name} {grid} {} {} {features} {} {rows} {}\n{}\n{}\n{}",
                            T::DTYPE.name(),
                            seqs.batch(),
                            seqs.max_len(),
                            i32::from(order == PadOrder::TimeMajor),
                            want.len(),
                            hex_line(seqs.lengths().iter().map(|&l| l as u64)),
                            hex_line(seqs.offsets().iter().map(|&o| o as u64)),
                            hex_line(from.iter().map(|v| v.to_bits_u64())),
                        )
                        .unwrap();
                        let what = format!("{name} of {lengths:?} x {features} {order:?}");
                        expected.push((what, want));
                    }
                }
            }
        }
        let stdout = emulator.run(input);
        let mut lines = stdout.lines();
        for (what, want) in &expected {
            let got: Vec<u64> = lines
                .by_ref()
                .take(want.len())
                .map(|l| u64::from_str_radix(l, 16).unwrap())
                .collect();
            assert_eq!(got.len(), want.len(), "{what}: the output's length");
            let differing = (0..want.len())
                .filter(|&i| got[i] != want[i].to_bits_u64())
                .count();
            assert_eq!(
                differing, 0,
                "{what}: elements differing from the Cpu's bits"
            );
        }
        assert!(lines.next().is_none(), "more output than outputs");
        println!(
            "host emulation: {} pads and unpads, the Cpu's bits",
            expected.len()
        );
    }

    #[test]
    fn emulated_pads_give_the_cpus_bits_in_f32() {
        emulated_pads_give_the_cpus_bits::<f32>();
    }

    #[test]
    fn emulated_pads_give_the_cpus_bits_in_f64() {
        emulated_pads_give_the_cpus_bits::<f64>();
    }
}
