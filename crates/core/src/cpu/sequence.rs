//! The Cpu ragged-sequence kernels on plain slices (the slice level of `rlgrad-mask`),
//! following the canonical orders of [`crate::kernels::sequence`]. Work is split by whole
//! sequences (or whole steps, for time-major data); copies are `memcpy`s of valid rows.

use std::mem::MaybeUninit;

use super::alloc;
use super::reduce::slice::{plain_segments_sum, segments_sum};
use crate::cpu::grain::{Family, grain};
use crate::kernels::sequence::{MaskedMap, MaskedTerm, PadOrder, Sequences};
use crate::{Error, Float, Par, Result, check, reduce};

/// Elements per parallel piece of work.
const CHUNK: usize = 1 << 15;

fn check_len(
    function: &'static str,
    argument: &'static str,
    what: &str,
    want: usize,
    got: usize,
) -> Result<()> {
    if want == got {
        Ok(())
    } else {
        Err(Error::shape(
            function,
            argument,
            format_args!("{want} elements ({what})"),
            format_args!("{got} elements"),
        ))
    }
}

/// `N * F` and `B * T * F`, or an error when they overflow.
fn sizes(function: &'static str, seqs: &Sequences, features: usize) -> Result<(usize, usize)> {
    Ok((
        check::product(function, "features", seqs.total(), features)?,
        check::product(function, "features", seqs.padded_steps(), features)?,
    ))
}

/// Packed `[N, F]` to padded `[B, T, F]` or `[T, B, F]`, zeros outside the valid steps.
pub fn pad<T: Float>(
    par: Par,
    seqs: &Sequences,
    features: usize,
    order: PadOrder,
    flat: &[T],
    padded: &mut [T],
) -> Result<()> {
    let (packed_len, padded_len) = sizes("pad", seqs, features)?;
    check_len("pad", "flat", "[N, F]", packed_len, flat.len())?;
    check_len("pad", "padded", "[B, T, F]", padded_len, padded.len())?;
    // SAFETY: `copy_into_padded` writes only initialized values.
    let padded = unsafe { as_uninit(padded) };
    copy_into_padded(par, seqs, features, order, flat, padded, true);
    Ok(())
}

/// [`pad`] into a new buffer, every element written once. Below 32 MiB the
/// buffer is uninitialized memory and the padding is zeroed here: in a training loop the
/// allocator hands back the memory of the previous call, which a zeroed allocation
/// (`calloc`) would clear again before the copy. From 32 MiB on the buffer
/// is zeroed fresh pages of the OS and only the valid rows are written: padding pages the
/// copy never touches are never faulted in. An error when the host cannot allocate
/// `B * T * F` elements.
pub fn pad_new<T: Float>(
    par: Par,
    seqs: &Sequences,
    features: usize,
    order: PadOrder,
    flat: &[T],
) -> Result<Vec<T>> {
    let (packed_len, padded_len) = sizes("pad", seqs, features)?;
    check_len("pad", "flat", "[N, F]", packed_len, flat.len())?;
    if padded_len.saturating_mul(size_of::<T>()) >= FRESH_PAGES_FROM {
        let mut padded = alloc::try_zeroed(padded_len, "pad", "seqs")?;
        // SAFETY: `copy_into_padded` writes only initialized values.
        let out = unsafe { as_uninit(padded.as_mut_slice()) };
        copy_into_padded(par, seqs, features, order, flat, out, false);
        return Ok(padded);
    }
    let mut padded = alloc::try_with_capacity(padded_len, "pad", "seqs")?;
    copy_into_padded(
        par,
        seqs,
        features,
        order,
        flat,
        &mut padded.spare_capacity_mut()[..padded_len],
        true,
    );
    // SAFETY: with `zero_padding`, `copy_into_padded` writes all `padded_len` elements.
    unsafe { padded.set_len(padded_len) };
    Ok(padded)
}

/// Byte size from which a new buffer is better zeroed fresh pages than reused memory
/// written whole: glibc's allocator serves allocations below 32 MiB (its largest dynamic
/// `mmap` threshold) from memory it recycles, and maps larger ones fresh for each call.
const FRESH_PAGES_FROM: usize = 32 << 20;

/// `x` as memory for the kernels that write into possibly uninitialized buffers.
///
/// # Safety
///
/// Only initialized values are written through the result (those kernels write copies
/// and results, never `MaybeUninit::uninit()`), so `x` is initialized when it ends.
unsafe fn as_uninit<T: Float>(x: &mut [T]) -> &mut [MaybeUninit<T>] {
    // SAFETY: `MaybeUninit<T>` has the layout of `T`; the caller's contract keeps `x`
    // initialized.
    unsafe { &mut *(std::ptr::from_mut(x) as *mut [MaybeUninit<T>]) }
}

/// `dst[i] = src[i]`, into memory that may be uninitialized.
#[inline(always)]
fn write_copy<T: Copy>(dst: &mut [MaybeUninit<T>], src: &[T]) {
    assert_eq!(dst.len(), src.len(), "copies of equal lengths");
    // SAFETY: both slices hold `src.len()` elements of `T` (`MaybeUninit<T>` has `T`'s
    // layout), and a `&mut` and a `&` never overlap.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<T>(), src.len());
    }
}

/// The copy behind [`pad`] and [`pad_new`]; lengths are checked by the caller. With
/// `zero_padding` every element of `padded` is written.
fn copy_into_padded<T: Float>(
    par: Par,
    seqs: &Sequences,
    features: usize,
    order: PadOrder,
    flat: &[T],
    padded: &mut [MaybeUninit<T>],
    zero_padding: bool,
) {
    let padded_len = padded.len();
    if padded_len == 0 {
        // Nothing to write, and `T * F` or `B * F` below may not fit in usize; from here
        // on both are at most `B * T * F` and nonzero.
        return;
    }
    let (lengths, offsets, f) = (seqs.lengths(), seqs.offsets(), features);
    let par = par.for_work(padded_len, grain(Family::Sequence));
    match order {
        PadOrder::BatchMajor => {
            let per_sequence = seqs.max_len() * f;
            let sequences_per_chunk = CHUNK.div_ceil(per_sequence);
            par.for_each_chunk_mut(padded, sequences_per_chunk * per_sequence, |ci, chunk| {
                for (k, dst) in chunk.chunks_mut(per_sequence).enumerate() {
                    let b = ci * sequences_per_chunk + k;
                    let (valid, rest) = dst.split_at_mut(lengths[b] * f);
                    write_copy(valid, &flat[offsets[b] * f..offsets[b + 1] * f]);
                    if zero_padding {
                        rest.fill(MaybeUninit::new(T::zero()));
                    }
                }
            });
        }
        PadOrder::TimeMajor => {
            let per_step = seqs.batch() * f;
            let steps_per_chunk = CHUNK.div_ceil(per_step);
            par.for_each_chunk_mut(padded, steps_per_chunk * per_step, |ci, chunk| {
                for (k, row) in chunk.chunks_mut(per_step).enumerate() {
                    let t = ci * steps_per_chunk + k;
                    for (b, dst) in row.chunks_mut(f).enumerate() {
                        if t < lengths[b] {
                            let src = (offsets[b] + t) * f;
                            write_copy(dst, &flat[src..src + f]);
                        } else if zero_padding {
                            dst.fill(MaybeUninit::new(T::zero()));
                        }
                    }
                }
            });
        }
    }
}

/// [`unpad`] into a new buffer, allocated once `padded` has the right length; every
/// element is written once, into uninitialized memory (a zeroed buffer would be cleared
/// and then written, when the allocator hands back the previous call's memory). An error
/// when the host cannot allocate `N * F` elements.
pub fn unpad_new<T: Float>(
    par: Par,
    seqs: &Sequences,
    features: usize,
    order: PadOrder,
    padded: &[T],
) -> Result<Vec<T>> {
    let (packed_len, padded_len) = sizes("unpad", seqs, features)?;
    check_len("unpad", "padded", "[B, T, F]", padded_len, padded.len())?;
    let mut flat = alloc::try_with_capacity(packed_len, "unpad", "seqs")?;
    copy_from_padded(
        par,
        seqs,
        features,
        order,
        padded,
        &mut flat.spare_capacity_mut()[..packed_len],
    );
    // SAFETY: `copy_from_padded` writes every element of its `flat`.
    unsafe { flat.set_len(packed_len) };
    Ok(flat)
}

/// Padded `[B, T, F]` or `[T, B, F]` to packed `[N, F]`; padding is never read.
pub fn unpad<T: Float>(
    par: Par,
    seqs: &Sequences,
    features: usize,
    order: PadOrder,
    padded: &[T],
    flat: &mut [T],
) -> Result<()> {
    let (packed_len, padded_len) = sizes("unpad", seqs, features)?;
    check_len("unpad", "padded", "[B, T, F]", padded_len, padded.len())?;
    check_len("unpad", "flat", "[N, F]", packed_len, flat.len())?;
    // SAFETY: `copy_from_padded` writes only initialized values.
    let flat = unsafe { as_uninit(flat) };
    copy_from_padded(par, seqs, features, order, padded, flat);
    Ok(())
}

/// A sequence's index and its packed rows, still to be written.
type SequenceRows<'a, T> = (usize, &'a mut [MaybeUninit<T>]);

/// The copy behind [`unpad`] and [`unpad_new`], which writes every element of `flat`;
/// lengths are checked by the caller.
fn copy_from_padded<T: Float>(
    par: Par,
    seqs: &Sequences,
    features: usize,
    order: PadOrder,
    padded: &[T],
    flat: &mut [MaybeUninit<T>],
) {
    let packed_len = flat.len();
    let (f, t_max, batch) = (features, seqs.max_len(), seqs.batch());
    let par = par.for_work(packed_len, grain(Family::Sequence));
    // Each sequence's packed rows, handed out in groups of about CHUNK elements.
    let mut groups: Vec<Vec<SequenceRows<'_, T>>> = Vec::new();
    let mut group_len = CHUNK;
    let mut rest = flat;
    for (b, &len) in seqs.lengths().iter().enumerate() {
        let (rows, tail) = rest.split_at_mut(len * f);
        rest = tail;
        if group_len >= CHUNK {
            groups.push(Vec::new());
            group_len = 0;
        }
        group_len += rows.len().max(1);
        groups
            .last_mut()
            .expect("a group was pushed")
            .push((b, rows));
    }
    par.for_each_item(groups, |group| {
        for (b, rows) in group {
            match order {
                PadOrder::BatchMajor => {
                    let src = b * t_max * f;
                    write_copy(rows, &padded[src..src + rows.len()]);
                }
                PadOrder::TimeMajor => {
                    for (t, dst) in rows.chunks_mut(f.max(1)).enumerate() {
                        let src = (t * batch + b) * f;
                        write_copy(dst, &padded[src..src + f]);
                    }
                }
            }
        }
    });
}

/// The canonical sum of `term(x)` over the valid values of the `[B, T, F]` array `x`, in
/// packed order.
pub fn masked_sum<T: Float>(
    par: Par,
    seqs: &Sequences,
    features: usize,
    x: &[T],
    term: MaskedTerm<'_, [T], T>,
) -> Result<T> {
    let (values, len) = sizes("masked_sum", seqs, features)?;
    check_len("masked_sum", "x", "[B, T, F]", len, x.len())?;
    if let MaskedTerm::Product { other, .. } = term {
        check_len("masked_sum", "other", "[B, T, F]", len, other.len())?;
    }
    if values == 0 {
        return Ok(T::zero());
    }
    // Sequence `s` holds the packed values `offsets[s] * F .. offsets[s + 1] * F`, which
    // sit at `s * T * F ..` of `x`; every product is at most `N * F` or `B * T * F`.
    let scaled: Vec<usize>;
    let offsets = if features == 1 {
        seqs.offsets()
    } else {
        let mut buffer = alloc::try_with_capacity(seqs.offsets().len(), "masked_sum", "seqs")?;
        buffer.extend(seqs.offsets().iter().map(|&o| o * features));
        scaled = buffer;
        &scaled
    };
    let row = seqs.max_len() * features;
    // The sequences' offsets and the lengths checked above are `check_segments`'s
    // conditions: the unchecked sums do not walk the offsets a second time.
    Ok(match term {
        MaskedTerm::Value => plain_segments_sum(par, offsets, row, x),
        MaskedTerm::SquaredDeviation { mean } => {
            segments_sum(par, offsets, row, x, x, |v, _| (v - mean) * (v - mean))
        }
        MaskedTerm::Product { other, shift } => {
            segments_sum(par, offsets, row, x, other, |v, w| (v - shift) * w)
        }
    })
}

/// The canonical sum of each sequence's valid values of the `[B, T, F]` array `x`.
pub fn sequence_sums<T: Float>(
    par: Par,
    seqs: &Sequences,
    features: usize,
    x: &[T],
    sums: &mut [T],
) -> Result<()> {
    let (values, len) = sizes("sequence_sums", seqs, features)?;
    check_len("sequence_sums", "x", "[B, T, F]", len, x.len())?;
    check_len("sequence_sums", "sums", "[B]", seqs.batch(), sums.len())?;
    if len == 0 {
        // No values: every sum is empty, and `T * F` may not fit in usize.
        sums.fill(T::zero());
        return Ok(());
    }
    let (lengths, row) = (seqs.lengths(), seqs.max_len() * features);
    let per_chunk = CHUNK.div_ceil(row);
    let par = par.for_work(values, grain(Family::Sequence));
    par.for_each_chunk_mut(sums, per_chunk, |ci, chunk| {
        for (k, sum) in chunk.iter_mut().enumerate() {
            let b = ci * per_chunk + k;
            *sum = reduce::sum(&x[b * row..b * row + lengths[b] * features], Par::Seq);
        }
    });
    Ok(())
}

/// `out = map(x)` at the valid values of the `[B, T, F]` arrays, `+0` at padding; `x`
/// may be `None` for maps that do not read it.
pub fn masked_map<T: Float>(
    par: Par,
    seqs: &Sequences,
    features: usize,
    x: Option<&[T]>,
    map: MaskedMap<'_, [T], T>,
    out: &mut [T],
) -> Result<()> {
    // SAFETY: `masked_map_uninit` writes only initialized values.
    let out = unsafe { as_uninit(out) };
    masked_map_uninit(par, seqs, features, x, map, out)
}

/// [`masked_map`] into a new buffer, `function` naming the caller in errors. Every element
/// is written once, into uninitialized memory: a zeroed buffer would be written twice
/// (`calloc` clears reused heap memory), which cost 1.2 µs of W5's 7.6 µs. (`pad_new`
/// does the same for buffers the allocator recycles.) An error when the host cannot allocate `B * T * F`
/// elements.
pub fn masked_map_new<T: Float>(
    par: Par,
    function: &'static str,
    seqs: &Sequences,
    features: usize,
    x: Option<&[T]>,
    map: MaskedMap<'_, [T], T>,
) -> Result<Vec<T>> {
    let len = check::product(function, "features", seqs.padded_steps(), features)?;
    let mut out = alloc::try_with_capacity(len, function, "seqs")?;
    masked_map_uninit(
        par,
        seqs,
        features,
        x,
        map,
        &mut out.spare_capacity_mut()[..len],
    )?;
    // SAFETY: `masked_map_uninit` returned `Ok`, so it wrote all `len` elements.
    unsafe { out.set_len(len) };
    Ok(out)
}

/// [`masked_map`] into memory that may be uninitialized: on `Ok`, every element of `out`
/// is written.
fn masked_map_uninit<T: Float>(
    par: Par,
    seqs: &Sequences,
    features: usize,
    x: Option<&[T]>,
    map: MaskedMap<'_, [T], T>,
    out: &mut [MaybeUninit<T>],
) -> Result<()> {
    let (_, len) = sizes("masked_map", seqs, features)?;
    let x = match x {
        Some(x) => {
            check_len("masked_map", "x", "[B, T, F]", len, x.len())?;
            x
        }
        None if map.reads_x() => {
            return Err(Error::empty(
                "masked_map",
                "x",
                format_args!("an input for {map:?}"),
            ));
        }
        None => &[],
    };
    check_len("masked_map", "out", "[B, T, F]", len, out.len())?;
    match map {
        MaskedMap::PerSequence(values) => {
            check_len("masked_map", "values", "[B]", seqs.batch(), values.len())?;
        }
        MaskedMap::StandardizeBackward { grad, .. } => {
            check_len("masked_map", "grad", "[B, T, F]", len, grad.len())?;
        }
        _ => {}
    }
    if len == 0 {
        return Ok(());
    }
    // A sequence's row of `T * F` values (at most `B * T * F`): `len_b * F` valid ones,
    // then padding.
    let (lengths, row) = (seqs.lengths(), seqs.max_len() * features);
    let per_chunk = CHUNK.div_ceil(row);
    let par = par.for_work(len, grain(Family::Sequence));
    par.for_each_chunk_mut(out, per_chunk * row, |ci, chunk| {
        for (k, row_out) in chunk.chunks_mut(row).enumerate() {
            let b = ci * per_chunk + k;
            let (valid, padding) = row_out.split_at_mut(lengths[b] * features);
            let range = b * row..b * row + valid.len();
            // The match is hoisted out of the loops so that each one vectorizes.
            match map {
                MaskedMap::Fill(value) => valid.fill(MaybeUninit::new(value)),
                MaskedMap::PerSequence(values) => valid.fill(MaybeUninit::new(values[b])),
                MaskedMap::Scale { shift, scale } => {
                    for (o, &v) in valid.iter_mut().zip(&x[range]) {
                        o.write((v - shift) * scale);
                    }
                }
                MaskedMap::Standardize { mean, denominator } => {
                    for (o, &v) in valid.iter_mut().zip(&x[range]) {
                        o.write((v - mean) / denominator);
                    }
                }
                MaskedMap::StandardizeBackward { .. } => {
                    for ((o, &v), i) in valid.iter_mut().zip(&x[range.clone()]).zip(range) {
                        o.write(map.apply(v, b, i));
                    }
                }
            }
            padding.fill(MaybeUninit::new(T::zero()));
        }
    });
    Ok(())
}

mod device {
    use super::super::Cpu;
    use crate::kernels::sequence::{MaskedMap, MaskedTerm, PadOrder, SequenceKernel, Sequences};
    use crate::{Float, Result};

    impl<T: Float> SequenceKernel<T> for Cpu {
        fn pad(
            &self,
            seqs: &Sequences,
            features: usize,
            order: PadOrder,
            flat: &Vec<T>,
            padded: &mut Vec<T>,
        ) -> Result<()> {
            super::pad(self.par(), seqs, features, order, flat, padded)
        }

        fn unpad(
            &self,
            seqs: &Sequences,
            features: usize,
            order: PadOrder,
            padded: &Vec<T>,
            flat: &mut Vec<T>,
        ) -> Result<()> {
            super::unpad(self.par(), seqs, features, order, padded, flat)
        }

        fn masked_sum(
            &self,
            seqs: &Sequences,
            features: usize,
            x: &Vec<T>,
            term: MaskedTerm<'_, Vec<T>, T>,
        ) -> Result<T> {
            super::masked_sum(self.par(), seqs, features, x, term.map(Vec::as_slice))
        }

        fn sequence_sums(
            &self,
            seqs: &Sequences,
            features: usize,
            x: &Vec<T>,
            sums: &mut Vec<T>,
        ) -> Result<()> {
            super::sequence_sums(self.par(), seqs, features, x, sums)
        }

        fn masked_map(
            &self,
            seqs: &Sequences,
            features: usize,
            x: Option<&Vec<T>>,
            map: MaskedMap<'_, Vec<T>, T>,
            out: &mut Vec<T>,
        ) -> Result<()> {
            super::masked_map(
                self.par(),
                seqs,
                features,
                x.map(Vec::as_slice),
                map.map(Vec::as_slice),
                out,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pad_new` and `unpad_new` write every element of buffers the allocator recycles
    /// (below 32 MiB: dirtied by an earlier buffer of the same size) and of fresh pages
    /// (from 32 MiB on), in both orders.
    #[test]
    fn new_buffers_hold_the_values_and_positive_zero_padding_whatever_memory_they_get() {
        for (lengths, max_len, features) in [
            (vec![3, 0, 5, 1], 6, 3),
            (vec![700, 1, 1000, 40], 1100, 2000),
        ] {
            let seqs = Sequences::new(&lengths, Some(max_len)).unwrap();
            let total: usize = lengths.iter().sum();
            let flat: Vec<f32> = (0..total * features).map(|i| i as f32 + 0.5).collect();
            for order in [PadOrder::BatchMajor, PadOrder::TimeMajor] {
                for _ in 0..2 {
                    drop(vec![f32::NAN; max_len * lengths.len() * features]);
                    let padded = pad_new(Par::rayon(2), &seqs, features, order, &flat).unwrap();
                    let mut want = vec![f32::NAN; padded.len()];
                    pad(Par::Seq, &seqs, features, order, &flat, &mut want).unwrap();
                    assert!(
                        padded
                            .iter()
                            .zip(&want)
                            .all(|(a, b)| a.to_bits() == b.to_bits())
                    );
                    drop(vec![f32::NAN; flat.len()]);
                    let unpadded = unpad_new(Par::rayon(2), &seqs, features, order, &padded);
                    assert_eq!(unpadded.unwrap(), flat);
                }
            }
        }
    }
}
