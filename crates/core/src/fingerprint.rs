//! [`Fingerprint`], the one stable hash of the workspace: parameter fingerprints that
//! ranks and runs compare, the golden tests' hashes of output bits, and the names of
//! cached compiled kernels.

use crate::Float;

/// A stable 64-bit hash (FNV-1a): the same value in every process, build and platform, so
/// that ranks and runs can compare fingerprints. Not a cryptographic hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fingerprint(u64);

impl Default for Fingerprint {
    fn default() -> Self {
        Self::new()
    }
}

impl Fingerprint {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    /// The hash of nothing.
    pub fn new() -> Self {
        Self(Self::OFFSET)
    }

    /// Feeds `bytes`.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(Self::PRIME);
        }
    }

    /// Feeds `v` as 8 little-endian bytes.
    pub fn write_u64(&mut self, v: u64) {
        self.write(&v.to_le_bytes());
    }

    /// Feeds the bits of every value of `x` (little-endian, 4 bytes per `f32`, 8 per
    /// `f64`): `-0.0` and `0.0` differ, and so do NaNs of different payloads.
    pub fn write_floats<T: Float>(&mut self, x: &[T]) {
        let width = std::mem::size_of::<T>();
        for v in x {
            self.write(&v.to_bits_u64().to_le_bytes()[..width]);
        }
    }

    /// The hash so far.
    pub fn finish(&self) -> u64 {
        self.0
    }
}
