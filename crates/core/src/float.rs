//! Element types: [`Element`] for anything a device buffer holds, [`Float`] for the
//! floating-point types the kernels compute in, and the runtime tag [`DType`].

use std::fmt::{self, Debug, Display, LowerExp};

/// Runtime tag of an [`Element`] type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// `f32`
    F32,
    /// `f64`
    F64,
    /// `u8` (boolean masks)
    U8,
    /// `u32` (lengths and offsets on a device)
    U32,
    /// `i64` (indices)
    I64,
}

impl DType {
    /// Size of one element in bytes.
    pub const fn size_in_bytes(self) -> usize {
        match self {
            Self::F32 | Self::U32 => 4,
            Self::F64 | Self::I64 => 8,
            Self::U8 => 1,
        }
    }

    /// The lower-case name used in messages and parity files (`"f32"`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::F32 => "f32",
            Self::F64 => "f64",
            Self::U8 => "u8",
            Self::U32 => "u32",
            Self::I64 => "i64",
        }
    }
}

impl Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A plain value a device buffer can hold.
///
/// Sealed: devices (the CUDA one among them) handle exactly the types of [`DType`].
pub trait Element:
    Copy + Send + Sync + Default + PartialEq + Debug + private::Sealed + 'static
{
    /// The runtime tag of this type.
    const DTYPE: DType;
}

mod private {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for f64 {}
    impl Sealed for u8 {}
    impl Sealed for u32 {}
    impl Sealed for i64 {}
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
}
impl Element for f64 {
    const DTYPE: DType = DType::F64;
}
impl Element for u8 {
    const DTYPE: DType = DType::U8;
}
impl Element for u32 {
    const DTYPE: DType = DType::U32;
}
impl Element for i64 {
    const DTYPE: DType = DType::I64;
}

/// The floating-point types rlgrad computes in: `f32` and `f64`.
///
/// On top of [`num_traits::Float`] it offers the conversions the kernels need and
/// *portable* transcendental functions. `f32::exp` calls the platform's libm, whose last
/// bit differs between glibc, musl, macOS and CUDA; the `*_portable` functions use the
/// `libm` crate (a Rust port of musl's libm), so a seed gives the same bits everywhere.
/// Every rlgrad kernel uses them; a device that implements the kernels must reproduce them.
pub trait Float:
    Element + num_traits::Float + num_traits::FloatConst + Display + LowerExp + Debug
{
    /// Machine epsilon (`f32::EPSILON`, `f64::EPSILON`).
    const EPSILON: Self;
    /// Number of mantissa bits, including the implicit one (24 or 53).
    const MANTISSA_DIGITS: u32;

    /// Rounds an `f64` to this type (round to nearest even).
    fn from_f64(value: f64) -> Self;
    /// Widens (or keeps) the value as `f64`, exactly.
    fn as_f64(self) -> f64;
    /// Rounds an element count to this type.
    fn from_usize(value: usize) -> Self;
    /// The raw bits, widened to `u64`, for bit-equality assertions.
    fn to_bits_u64(self) -> u64;
    /// The value whose raw bits are the low bits of `bits` (the inverse of
    /// [`Float::to_bits_u64`]), for tests that need arbitrary bit patterns.
    fn from_bits_u64(bits: u64) -> Self;

    /// `e^x`, bit-identical on every platform.
    fn exp_portable(self) -> Self;
    /// Natural logarithm, bit-identical on every platform.
    fn ln_portable(self) -> Self;
    /// Hyperbolic tangent, bit-identical on every platform.
    fn tanh_portable(self) -> Self;
    /// `self^exponent`, bit-identical on every platform.
    fn powf_portable(self, exponent: Self) -> Self;
    /// Sine, bit-identical on every platform.
    fn sin_portable(self) -> Self;
    /// Cosine, bit-identical on every platform.
    fn cos_portable(self) -> Self;
}

impl Float for f32 {
    const EPSILON: Self = f32::EPSILON;
    const MANTISSA_DIGITS: u32 = f32::MANTISSA_DIGITS;

    #[inline]
    fn from_f64(value: f64) -> Self {
        value as f32
    }
    #[inline]
    fn as_f64(self) -> f64 {
        f64::from(self)
    }
    #[inline]
    fn from_usize(value: usize) -> Self {
        value as f32
    }
    #[inline]
    fn to_bits_u64(self) -> u64 {
        u64::from(self.to_bits())
    }
    #[inline]
    fn from_bits_u64(bits: u64) -> Self {
        // The low 32 bits: truncation is the point.
        f32::from_bits(bits as u32)
    }
    #[inline]
    fn exp_portable(self) -> Self {
        libm::expf(self)
    }
    #[inline]
    fn ln_portable(self) -> Self {
        libm::logf(self)
    }
    #[inline]
    fn tanh_portable(self) -> Self {
        libm::tanhf(self)
    }
    #[inline]
    fn powf_portable(self, exponent: Self) -> Self {
        libm::powf(self, exponent)
    }
    #[inline]
    fn sin_portable(self) -> Self {
        libm::sinf(self)
    }
    #[inline]
    fn cos_portable(self) -> Self {
        libm::cosf(self)
    }
}

impl Float for f64 {
    const EPSILON: Self = f64::EPSILON;
    const MANTISSA_DIGITS: u32 = f64::MANTISSA_DIGITS;

    #[inline]
    fn from_f64(value: f64) -> Self {
        value
    }
    #[inline]
    fn as_f64(self) -> f64 {
        self
    }
    #[inline]
    fn from_usize(value: usize) -> Self {
        value as f64
    }
    #[inline]
    fn to_bits_u64(self) -> u64 {
        self.to_bits()
    }
    #[inline]
    fn from_bits_u64(bits: u64) -> Self {
        f64::from_bits(bits)
    }
    #[inline]
    fn exp_portable(self) -> Self {
        libm::exp(self)
    }
    #[inline]
    fn ln_portable(self) -> Self {
        libm::log(self)
    }
    #[inline]
    fn tanh_portable(self) -> Self {
        libm::tanh(self)
    }
    #[inline]
    fn powf_portable(self, exponent: Self) -> Self {
        libm::pow(self, exponent)
    }
    #[inline]
    fn sin_portable(self) -> Self {
        libm::sin(self)
    }
    #[inline]
    fn cos_portable(self) -> Self {
        libm::cos(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_zero_is_the_exact_additive_identity() {
        for x in [
            0.0f32,
            -0.0,
            1.5,
            -2.0,
            f32::MIN_POSITIVE / 4.0,
            f32::INFINITY,
        ] {
            assert_eq!(
                (<f32 as num_traits::Float>::neg_zero() + x).to_bits(),
                x.to_bits()
            );
        }
        assert!((<f64 as num_traits::Float>::neg_zero() + f64::NAN).is_nan());
    }

    #[test]
    fn conversions_and_tags() {
        assert_eq!(<f32 as Float>::from_f64(0.1), 0.1f32);
        assert_eq!(1.5f32.as_f64(), 1.5);
        assert_eq!(f32::DTYPE.size_in_bytes(), 4);
        assert_eq!(DType::F64.to_string(), "f64");
        assert_eq!(<f64 as Float>::from_usize(3), 3.0);
        assert_eq!(1.0f32.to_bits_u64(), 0x3f80_0000);
    }

    #[test]
    fn portable_functions_are_accurate() {
        for x in [-3.0f64, -0.5, 0.0, 0.25, 2.0] {
            assert!((x.exp_portable() - x.exp()).abs() <= 1e-15 * x.exp());
            assert!((x.tanh_portable() - x.tanh()).abs() <= 1e-15);
            let xf = x as f32;
            assert!((xf.exp_portable() - xf.exp()).abs() <= 2e-7 * xf.exp());
        }
        assert_eq!(2.0f32.powf_portable(10.0), 1024.0);
        assert_eq!(1.0f64.ln_portable(), 0.0);
    }
}
