//! The collective trait every backend implements, and the byte encoding of the messages.

use rlgrad_core::{Error, Float, Result};

/// The few collectives the canonical reductions need, over bytes.
///
/// Every rank calls the same collectives in the same order (SPMD), as with MPI. A backend
/// moves bytes and never adds floats: the reductions of this crate do every addition
/// themselves, in the canonical tree's order, which is why their results do not depend on
/// the backend or on the world size.
///
/// Failures (a worker that died or stopped answering within the backend's timeout, ranks
/// calling different collectives) are [`Error::Device`] errors whose message names the
/// rank.
pub trait Collective {
    /// This worker's rank, in `0..size()`.
    fn rank(&self) -> usize;

    /// The number of workers.
    fn size(&self) -> usize;

    /// Every rank's `send`, indexed by rank; the lengths may differ from rank to rank.
    fn all_gather(&self, send: &[u8]) -> Result<Vec<Vec<u8>>>;

    /// Personalized exchange: `send[r]` goes to rank `r` (one message per rank, lengths
    /// free); returns the message each rank sent to this one, indexed by the source rank.
    /// An error when `send.len() != size()`.
    fn all_to_all(&self, send: &[Vec<u8>]) -> Result<Vec<Vec<u8>>>;

    /// Rank `root`'s `data` replaces `data` on every rank (any length). An error when
    /// `root >= size()`.
    fn broadcast(&self, root: usize, data: &mut Vec<u8>) -> Result<()>;

    /// Returns once every rank has called it.
    fn barrier(&self) -> Result<()>;

    /// [`Collective::all_gather`] of an owned buffer, the messages received in one
    /// buffer: what large reductions use, since a backend can send `send` as it is and
    /// receive into one allocation. The default goes through `all_gather`.
    fn all_gather_packed(&self, send: Vec<u8>) -> Result<Packed> {
        Ok(Packed::from_messages(self.all_gather(&send)?))
    }

    /// [`Collective::all_to_all`] of one buffer holding the messages for ranks `0, 1, ..`
    /// back to back, `lengths[r]` bytes for rank `r`; the messages received come back in
    /// one buffer, in rank order. Errors: those of `all_to_all`, and `lengths` that do not
    /// add up to `send.len()`. The default goes through `all_to_all`.
    fn all_to_all_packed(&self, send: Vec<u8>, lengths: &[usize]) -> Result<Packed> {
        let function = "Collective::all_to_all_packed";
        check_all_to_all(function, "lengths", lengths.len(), self.size())?;
        let send = Packed::new(function, send, lengths)?;
        Ok(Packed::from_messages(
            self.all_to_all(&send.into_messages())?,
        ))
    }

    /// An empty buffer of at least `capacity` bytes to write a message into: a backend
    /// that keeps memory between collectives hands back one given to
    /// [`Collective::recycle`], whose pages are mapped already (a first touch of fresh
    /// memory costs as much as the copy into it). The default allocates.
    fn message_buffer(&self, capacity: usize) -> Vec<u8> {
        Vec::with_capacity(capacity)
    }

    /// Takes back a buffer no longer needed (a message sent, or a [`Packed`]'s through
    /// [`Packed::into_bytes`]) for [`Collective::message_buffer`] to reuse. The default
    /// frees it.
    fn recycle(&self, buffer: Vec<u8>) {
        drop(buffer);
    }
}

/// Messages from every rank, back to back in one buffer, indexed by rank: what
/// [`Collective::all_gather_packed`] and [`Collective::all_to_all_packed`] return.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Packed {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Packed {
    /// Messages of `lengths[r]` bytes, back to back in `bytes`. An error of `function`
    /// when the lengths do not add up to `bytes.len()`.
    pub fn new(function: &'static str, bytes: Vec<u8>, lengths: &[usize]) -> Result<Self> {
        let ends: Vec<usize> = lengths
            .iter()
            .scan(0usize, |end, &n| {
                *end = end.saturating_add(n);
                Some(*end)
            })
            .collect();
        if ends.last().copied().unwrap_or(0) != bytes.len() {
            return Err(Error::shape(
                function,
                "lengths",
                format_args!("lengths adding up to the {} bytes sent", bytes.len()),
                format_args!("{lengths:?}"),
            ));
        }
        Ok(Self { bytes, ends })
    }

    /// The messages, one per rank.
    pub fn from_messages(messages: Vec<Vec<u8>>) -> Self {
        let lengths: Vec<usize> = messages.iter().map(Vec::len).collect();
        let bytes = messages.concat();
        Self::new("Packed::from_messages", bytes, &lengths).expect("lengths of the messages")
    }

    /// The number of messages (the world size).
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no messages.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Rank `rank`'s message, `None` when `rank >= self.len()`.
    pub fn get(&self, rank: usize) -> Option<&[u8]> {
        let end = *self.ends.get(rank)?;
        let start = rank.checked_sub(1).map_or(0, |r| self.ends[r]);
        Some(&self.bytes[start..end])
    }

    /// The messages in rank order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> {
        (0..self.len()).map(|r| self.get(r).expect("a rank below len"))
    }

    /// The buffer of every message, back to back.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }

    /// The messages as vectors, in rank order.
    pub fn into_messages(self) -> Vec<Vec<u8>> {
        self.iter().map(<[u8]>::to_vec).collect()
    }
}

/// The checks every backend makes on the arguments of [`Collective::all_to_all`]:
/// `messages` (the length of `argument`) is one per rank.
pub(crate) fn check_all_to_all(
    function: &'static str,
    argument: &'static str,
    messages: usize,
    size: usize,
) -> Result<()> {
    if messages != size {
        return Err(Error::shape(
            function,
            argument,
            format_args!("one message per rank ({size})"),
            messages,
        ));
    }
    Ok(())
}

/// An error for a zero `timeout` of a backend's waits (every wait would fail at once).
pub(crate) fn check_timeout(function: &'static str, timeout: std::time::Duration) -> Result<()> {
    if timeout.is_zero() {
        return Err(Error::value(
            function,
            "timeout",
            "a positive duration",
            format_args!("{timeout:?}"),
        ));
    }
    Ok(())
}

/// The checks every backend makes on the arguments of [`Collective::broadcast`].
pub(crate) fn check_root(function: &'static str, root: usize, size: usize) -> Result<()> {
    if root >= size {
        return Err(Error::out_of_range(
            function,
            "root",
            format_args!("a rank below the world size {size}"),
            root,
        ));
    }
    Ok(())
}

/// Appends `x` as little-endian bytes (4 per `f32`, 8 per `f64`): one copy of its memory
/// on little-endian targets, where that is the encoding (a gradient of 16M floats is
/// copied at memory speed, not element by element).
pub(crate) fn put_floats<T: Float>(out: &mut Vec<u8>, x: &[T]) {
    #[cfg(target_endian = "little")]
    out.extend_from_slice(float_bytes(x));
    #[cfg(not(target_endian = "little"))]
    {
        let width = std::mem::size_of::<T>();
        out.reserve(std::mem::size_of_val(x));
        for v in x {
            out.extend_from_slice(&v.to_bits_u64().to_le_bytes()[..width]);
        }
    }
}

/// The memory of `x`, which on a little-endian target is its little-endian encoding.
#[cfg(target_endian = "little")]
fn float_bytes<T: Float>(x: &[T]) -> &[u8] {
    // SAFETY: `Float` needs the sealed `Element` and `num_traits::Float`, so it is `f32`
    // or `f64`, which have no padding; the bytes are `size_of_val(x)` long from `x`'s
    // start, `u8` has alignment 1, and the borrow of `x` keeps them alive and unchanged
    // for the returned lifetime.
    unsafe { std::slice::from_raw_parts(x.as_ptr().cast::<u8>(), std::mem::size_of_val(x)) }
}

/// `x`'s memory to write, on a little-endian target its little-endian encoding.
#[cfg(target_endian = "little")]
fn float_bytes_mut<T: Float>(x: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `float_bytes`, with the exclusive borrow of `x`; every byte pattern
    // of the right length is a valid `f32` or `f64`, so any bytes written leave valid
    // values.
    unsafe { std::slice::from_raw_parts_mut(x.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(x)) }
}

/// Decodes what [`put_floats`] wrote into `out`, `bytes` being `out`'s size exactly.
pub(crate) fn decode_into<T: Float>(out: &mut [T], bytes: &[u8]) {
    debug_assert_eq!(bytes.len(), std::mem::size_of_val(out));
    #[cfg(target_endian = "little")]
    float_bytes_mut(out).copy_from_slice(bytes);
    #[cfg(not(target_endian = "little"))]
    for (v, c) in out
        .iter_mut()
        .zip(bytes.chunks_exact(std::mem::size_of::<T>()))
    {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        *v = T::from_bits_u64(u64::from_le_bytes(b));
    }
}

/// `left += decoded(right)`, element by element, `right` holding `left.len()` encoded
/// floats: read in place when they are aligned for `T`, decoded in blocks otherwise.
pub(crate) fn add_encoded<T: Float>(left: &mut [T], right: &[u8]) {
    debug_assert_eq!(right.len(), std::mem::size_of_val(left));
    #[cfg(target_endian = "little")]
    {
        // SAFETY: `Float` is `f32` or `f64` (see `float_bytes`), for which every bit
        // pattern is a valid value; `align_to` only yields the correctly aligned middle part.
        let (head, values, tail) = unsafe { right.align_to::<T>() };
        if head.is_empty() && tail.is_empty() {
            for (l, r) in left.iter_mut().zip(values) {
                *l = *l + *r;
            }
            return;
        }
    }
    const BLOCK: usize = 1024;
    let mut block = [T::zero(); BLOCK];
    let width = std::mem::size_of::<T>();
    for (l, r) in left.chunks_mut(BLOCK).zip(right.chunks(BLOCK * width)) {
        let block = &mut block[..l.len()];
        decode_into(block, r);
        for (l, r) in l.iter_mut().zip(block.iter()) {
            *l = *l + *r;
        }
    }
}

/// Appends `v` as 8 little-endian bytes.
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Reads what [`put_floats`] and [`put_u64`] wrote; a short or malformed message is an
/// error of `function` naming the rank that sent it.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    function: &'static str,
    from: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8], function: &'static str, from: usize) -> Self {
        Self {
            bytes,
            function,
            from,
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() < n {
            return Err(Error::Device {
                function: self.function,
                device: format!("rank {}", self.from),
                message: format!(
                    "a message from rank {} ends early: {n} more bytes expected, {} left \
                     (the ranks do not run the same program or the same collectives)",
                    self.from,
                    self.bytes.len()
                ),
                cause: None,
            });
        }
        let (head, tail) = self.bytes.split_at(n);
        self.bytes = tail;
        Ok(head)
    }

    pub(crate) fn u64(&mut self) -> Result<u64> {
        let bytes = self.take(8)?;
        Ok(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    }

    pub(crate) fn usize(&mut self) -> Result<usize> {
        let v = self.u64()?;
        usize::try_from(v).map_err(|_| Error::Device {
            function: self.function,
            device: format!("rank {}", self.from),
            message: format!(
                "rank {} sent a count ({v}) that does not fit usize",
                self.from
            ),
            cause: None,
        })
    }

    pub(crate) fn floats<T: Float>(&mut self, n: usize) -> Result<Vec<T>> {
        let mut values = vec![T::zero(); n];
        self.floats_into(&mut values)?;
        Ok(values)
    }

    /// Reads `out.len()` floats into `out`.
    pub(crate) fn floats_into<T: Float>(&mut self, out: &mut [T]) -> Result<()> {
        let bytes = self.float_bytes::<T>(out.len())?;
        decode_into(out, bytes);
        Ok(())
    }

    /// The encoding of `n` floats, not decoded.
    pub(crate) fn float_bytes<T: Float>(&mut self, n: usize) -> Result<&'a [u8]> {
        let bytes = n.saturating_mul(std::mem::size_of::<T>());
        self.take(bytes)
    }

    /// The bytes not read yet.
    pub(crate) fn rest(self) -> &'a [u8] {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_round_trip_bit_for_bit() {
        let x32 = [
            1.5f32,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            f32::MIN_POSITIVE / 2.0,
        ];
        let x64 = [1.5f64, -0.0, f64::NAN, f64::NEG_INFINITY, 1e-310];
        let mut bytes = Vec::new();
        put_floats(&mut bytes, &x32);
        put_u64(&mut bytes, 7);
        put_floats(&mut bytes, &x64);
        assert_eq!(bytes.len(), 5 * 4 + 8 + 5 * 8);
        let mut r = Reader::new(&bytes, "test", 0);
        let y32: Vec<f32> = r.floats(5).unwrap();
        assert_eq!(r.usize().unwrap(), 7);
        let y64: Vec<f64> = r.floats(5).unwrap();
        assert!(r.rest().is_empty());
        for (a, b) in x32.iter().zip(&y32) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
        for (a, b) in x64.iter().zip(&y64) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
        let err = Reader::new(&bytes[..3], "test", 2).u64().unwrap_err();
        assert!(err.to_string().contains("rank 2"), "{err}");
    }

    fn check_encoded_sums<T: Float>() {
        let left: Vec<T> = (0..2500)
            .map(|i| T::from_f64((i as f64 * 0.37).sin()))
            .collect();
        let right: Vec<T> = (0..2500)
            .map(|i| T::from_f64((i as f64 * 0.11).cos() * 1e-3))
            .collect();
        let bits = |x: &[T]| x.iter().map(|v| v.to_bits_u64()).collect::<Vec<_>>();
        let expected: Vec<T> = left.iter().zip(&right).map(|(&a, &b)| a + b).collect();
        for offset in [0, 1] {
            let mut bytes = vec![0u8; offset];
            put_floats(&mut bytes, &right);
            let mut sum = left.clone();
            add_encoded(&mut sum, &bytes[offset..]);
            assert_eq!(bits(&sum), bits(&expected), "offset {offset}");
        }
    }

    #[test]
    fn encoded_floats_add_as_decoded_ones_aligned_or_not() {
        check_encoded_sums::<f32>();
        check_encoded_sums::<f64>();
    }

    #[test]
    fn packed_messages_index_by_rank_and_check_their_lengths() {
        let packed = Packed::new("test", b"abcdef".to_vec(), &[2, 0, 4]).unwrap();
        assert_eq!(packed.len(), 3);
        assert_eq!(packed.get(0), Some(&b"ab"[..]));
        assert_eq!(packed.get(1), Some(&b""[..]));
        assert_eq!(packed.get(2), Some(&b"cdef"[..]));
        assert_eq!(packed.get(3), None);
        assert_eq!(packed.iter().count(), 3);
        assert_eq!(
            Packed::from_messages(packed.clone().into_messages()),
            packed
        );
        let err = Packed::new("test", b"abc".to_vec(), &[2, 2]).unwrap_err();
        assert_eq!(err.argument(), Some("lengths"));
        assert!(Packed::default().is_empty());
    }

    #[test]
    fn the_packed_collectives_deliver_what_the_plain_ones_do() {
        let out = crate::Local::run(3, crate::Local::DEFAULT_TIMEOUT, |comm| {
            let r = comm.rank() as u8;
            let sends: Vec<Vec<u8>> = (0..3).map(|k| vec![r * 10 + k; k as usize + 1]).collect();
            let lengths: Vec<usize> = sends.iter().map(Vec::len).collect();
            let packed = comm.all_to_all_packed(sends.concat(), &lengths)?;
            assert_eq!(packed.into_messages(), comm.all_to_all(&sends)?);
            let gathered = comm.all_gather_packed(vec![r; comm.rank()])?;
            assert_eq!(
                gathered.into_messages(),
                comm.all_gather(&vec![r; comm.rank()])?
            );
            let err = comm.all_to_all_packed(vec![0; 3], &[1, 1]).unwrap_err();
            Ok(err.argument().map(str::to_owned))
        })
        .unwrap();
        assert!(
            out.iter().all(|a| a.as_deref() == Some("lengths")),
            "{out:?}"
        );
    }
}
