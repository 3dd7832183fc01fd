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
}

/// The checks every backend makes on the arguments of [`Collective::all_to_all`].
pub(crate) fn check_all_to_all(
    function: &'static str,
    send: &[Vec<u8>],
    size: usize,
) -> Result<()> {
    if send.len() != size {
        return Err(Error::shape(
            function,
            "send",
            format_args!("one message per rank ({size})"),
            send.len(),
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

/// Appends `x` as little-endian bytes (4 per `f32`, 8 per `f64`).
pub(crate) fn put_floats<T: Float>(out: &mut Vec<u8>, x: &[T]) {
    let width = std::mem::size_of::<T>();
    out.reserve(std::mem::size_of_val(x));
    for v in x {
        out.extend_from_slice(&v.to_bits_u64().to_le_bytes()[..width]);
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
        })
    }

    pub(crate) fn floats<T: Float>(&mut self, n: usize) -> Result<Vec<T>> {
        let width = std::mem::size_of::<T>();
        let bytes = self.take(n * width)?;
        Ok(bytes
            .chunks_exact(width)
            .map(|c| {
                let mut b = [0u8; 8];
                b[..width].copy_from_slice(c);
                T::from_bits_u64(u64::from_le_bytes(b))
            })
            .collect())
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
}
