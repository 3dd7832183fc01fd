//! [`SequenceKernel`] on the GPU (`sequence.cu` for pad, unpad and masked maps; the
//! canonical sum tree of `reduce.cu` for masked and per-sequence sums). The lengths and
//! their prefix sums are uploaded from the host [`Sequences`] on each call.

use rlgrad_core::kernels::SequenceKernel;
use rlgrad_core::kernels::sequence::{MaskedMap, MaskedTerm, PadOrder, Sequences};
use rlgrad_core::{Error, Float, Result, check};

use crate::compile::Family;
use crate::device::{Cuda, CudaBuffer, Scalar, check_len, grid};
use crate::reduce::Source;

/// `N * F` and `B * T * F`, or an error when they overflow.
fn sizes(function: &'static str, seqs: &Sequences, features: usize) -> Result<(usize, usize)> {
    Ok((
        check::product(function, "features", seqs.total(), features)?,
        check::product(function, "features", seqs.padded_steps(), features)?,
    ))
}

/// The sequences' lengths and offsets (scaled by `scale`) on the device.
struct Uploaded {
    lengths: CudaBuffer<u64>,
    offsets: CudaBuffer<u64>,
}

impl Cuda {
    fn upload_sequences(
        &self,
        function: &'static str,
        seqs: &Sequences,
        scale: usize,
    ) -> Result<Uploaded> {
        Ok(Uploaded {
            lengths: self.upload_u64(function, seqs.lengths().iter().copied())?,
            offsets: self.upload_u64(function, seqs.offsets().iter().map(|&o| o * scale))?,
        })
    }

    fn release_sequences(&self, uploaded: Uploaded) {
        self.release(uploaded.lengths);
        self.release(uploaded.offsets);
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
        let uploaded = self.upload_sequences(function, seqs, 1)?;
        let kernel = self.function::<T>(Family::Sequence, name)?;
        // Each thread moves up to four elements; the grid covers the padded units.
        let units = padded_len.div_ceil(if features.is_multiple_of(4) { 4 } else { 1 });
        self.launch(
            function,
            &kernel,
            grid(units),
            &[
                &self.ptr(from),
                &self.ptr(&uploaded.lengths),
                &self.ptr(&uploaded.offsets),
                &(seqs.batch() as u64),
                &(seqs.max_len() as u64),
                &(features as u64),
                &i32::from(order == PadOrder::TimeMajor),
                &self.ptr(to),
            ],
        )?;
        self.release_sequences(uploaded);
        Ok(())
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
        let uploaded = self.upload_sequences(F, seqs, features)?;
        let sum = self.uninit::<T>(F, 1)?;
        let source = Source::Masked {
            x: self.ptr(x),
            other,
            offsets: self.ptr(&uploaded.offsets),
            batch: seqs.batch(),
            row: seqs.max_len() * features,
            total: values,
            term: code,
            shift: Scalar::of(shift),
        };
        self.canonical_sums::<T>(F, source, 1, values, None, 0, self.ptr(&sum))?;
        let value = rlgrad_core::Device::download(self, &sum)?[0];
        self.release_sequences(uploaded);
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
        let uploaded = self.upload_sequences(F, seqs, 1)?;
        let longest = seqs.lengths().iter().copied().max().unwrap_or(0) * features;
        let source = Source::Sequences {
            x: self.ptr(x),
            lengths: self.ptr(&uploaded.lengths),
            row: seqs.max_len() * features,
            features,
        };
        let lengths = self.ptr(&uploaded.lengths);
        self.canonical_sums::<T>(
            F,
            source,
            seqs.batch(),
            longest,
            None,
            lengths,
            self.ptr(sums),
        )?;
        self.release_sequences(uploaded);
        Ok(())
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
        let uploaded = self.upload_sequences(F, seqs, 1)?;
        let kernel = self.function::<T>(Family::Sequence, "masked_map")?;
        self.launch(
            F,
            &kernel,
            grid(len),
            &[
                &x,
                &values,
                &self.ptr(&uploaded.lengths),
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
        )?;
        self.release_sequences(uploaded);
        Ok(())
    }
}
