//! Element types of stored tensors: the runtime tag [`Dtype`] and the Rust types that
//! read and write them ([`Scalar`]).

use std::fmt;

/// The element type of a stored tensor, as safetensors names it.
///
/// Every type a safetensors file written by NumPy or PyTorch commonly holds can be
/// listed ([`Checkpoint::tensor_info`](crate::Checkpoint::tensor_info)); the ones with a
/// native Rust type ([`Scalar`]) can also be read and written. A file holding another
/// type (8-bit floats, complex numbers) is refused when it is loaded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dtype {
    /// `bool` (one byte, NumPy and PyTorch's boolean tensors); listed, not readable.
    Bool,
    /// `u8`
    U8,
    /// `i8`
    I8,
    /// `u16`
    U16,
    /// `i16`
    I16,
    /// IEEE half precision; listed, not readable.
    F16,
    /// bfloat16; listed, not readable.
    Bf16,
    /// `u32`
    U32,
    /// `i32`
    I32,
    /// `f32`
    F32,
    /// `u64` (step counters, RNG positions)
    U64,
    /// `i64`
    I64,
    /// `f64`
    F64,
}

impl Dtype {
    /// Bytes per element.
    pub const fn size_in_bytes(self) -> usize {
        match self {
            Self::Bool | Self::U8 | Self::I8 => 1,
            Self::U16 | Self::I16 | Self::F16 | Self::Bf16 => 2,
            Self::U32 | Self::I32 | Self::F32 => 4,
            Self::U64 | Self::I64 | Self::F64 => 8,
        }
    }

    /// The name safetensors writes in a file's header (`"F32"`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Bool => "BOOL",
            Self::U8 => "U8",
            Self::I8 => "I8",
            Self::U16 => "U16",
            Self::I16 => "I16",
            Self::F16 => "F16",
            Self::Bf16 => "BF16",
            Self::U32 => "U32",
            Self::I32 => "I32",
            Self::F32 => "F32",
            Self::U64 => "U64",
            Self::I64 => "I64",
            Self::F64 => "F64",
        }
    }

    /// The safetensors tag; `None` for a type this crate does not handle.
    pub(crate) fn from_safetensors(dtype: safetensors::Dtype) -> Option<Self> {
        use safetensors::Dtype as S;
        Some(match dtype {
            S::BOOL => Self::Bool,
            S::U8 => Self::U8,
            S::I8 => Self::I8,
            S::U16 => Self::U16,
            S::I16 => Self::I16,
            S::F16 => Self::F16,
            S::BF16 => Self::Bf16,
            S::U32 => Self::U32,
            S::I32 => Self::I32,
            S::F32 => Self::F32,
            S::U64 => Self::U64,
            S::I64 => Self::I64,
            S::F64 => Self::F64,
            _ => return None,
        })
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type a checkpoint reads and writes exactly: its values are stored as their
/// little-endian bytes, so a round trip gives the same bits (NaN payloads and signed zeros
/// included) on every platform.
///
/// Sealed: implemented for `u8`, `i8`, `u16`, `i16`, `u32`, `i32`, `u64`, `i64`, `f32`
/// and `f64`.
pub trait Scalar: Copy + Default + fmt::Debug + private::Sealed + 'static {
    /// The stored element type.
    const DTYPE: Dtype;
    /// Appends the little-endian bytes of `values` to `out`.
    #[doc(hidden)]
    fn extend_le_bytes(values: &[Self], out: &mut Vec<u8>);
    /// Decodes little-endian `bytes` (a whole number of elements) into `out`, which has
    /// exactly one slot per element.
    #[doc(hidden)]
    fn decode_le_bytes(bytes: &[u8], out: &mut [Self]);
}

mod private {
    pub trait Sealed {}
}

macro_rules! scalar {
    ($($t:ty => $dtype:ident),* $(,)?) => {$(
        impl private::Sealed for $t {}
        impl Scalar for $t {
            const DTYPE: Dtype = Dtype::$dtype;
            fn extend_le_bytes(values: &[Self], out: &mut Vec<u8>) {
                out.reserve(std::mem::size_of_val(values));
                for v in values {
                    out.extend_from_slice(&v.to_le_bytes());
                }
            }
            fn decode_le_bytes(bytes: &[u8], out: &mut [Self]) {
                const SIZE: usize = std::mem::size_of::<$t>();
                for (v, chunk) in out.iter_mut().zip(bytes.chunks_exact(SIZE)) {
                    *v = <$t>::from_le_bytes(chunk.try_into().expect("chunks_exact gives SIZE bytes"));
                }
            }
        }
    )*};
}

scalar!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
    u64 => U64, i64 => I64, f32 => F32, f64 => F64,
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_the_rust_types() {
        fn size<T: Scalar>() -> (usize, usize) {
            (T::DTYPE.size_in_bytes(), std::mem::size_of::<T>())
        }
        for (stored, native) in [
            size::<u8>(),
            size::<i8>(),
            size::<u16>(),
            size::<i16>(),
            size::<u32>(),
            size::<i32>(),
            size::<u64>(),
            size::<i64>(),
            size::<f32>(),
            size::<f64>(),
        ] {
            assert_eq!(stored, native);
        }
    }

    #[test]
    fn every_dtype_maps_from_safetensors_with_its_name_and_size() {
        use safetensors::Dtype as S;
        for stored in [
            S::BOOL,
            S::U8,
            S::I8,
            S::U16,
            S::I16,
            S::F16,
            S::BF16,
            S::U32,
            S::I32,
            S::F32,
            S::U64,
            S::I64,
            S::F64,
        ] {
            let dtype = Dtype::from_safetensors(stored).unwrap();
            // The header rlgrad writes names a dtype as safetensors reads it back.
            assert_eq!(dtype.name(), stored.to_string());
            assert_eq!(stored.bitsize(), 8 * dtype.size_in_bytes());
        }
        assert_eq!(Dtype::from_safetensors(S::C64), None);
    }

    #[test]
    fn bytes_round_trip_keeps_every_bit() {
        let values = [
            0.0f32,
            -0.0,
            f32::NAN,
            f32::from_bits(0x7fc0_1234),
            1e-45,
            -3.5,
        ];
        let mut bytes = Vec::new();
        f32::extend_le_bytes(&values, &mut bytes);
        let mut back = [0.0f32; 6];
        f32::decode_le_bytes(&bytes, &mut back);
        assert_eq!(values.map(f32::to_bits), back.map(f32::to_bits));
        assert_eq!(&bytes[4..8], &[0, 0, 0, 0x80]);
    }
}
