use crate::{Device, Float, Result, View, reduce};

/// A one-input elementwise op. [`UnaryOp::apply`] is its canonical definition.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum UnaryOp<T> {
    /// `-x`
    Neg,
    /// `|x|`
    Abs,
    /// `e^x` ([`Float::exp_portable`])
    Exp,
    /// `ln x` ([`Float::ln_portable`])
    Log,
    /// `sqrt(x)` (IEEE, correctly rounded)
    Sqrt,
    /// `tanh x` ([`Float::tanh_portable`])
    Tanh,
    /// `x` if `x > 0` or NaN, else `+0`
    Relu,
    /// `1 / (1 + e^-x)` for `x >= 0`, `e^x / (1 + e^x)` otherwise (no overflow)
    Sigmoid,
    /// `x * x`
    Square,
    /// `x^p` ([`Float::powf_portable`])
    Powf(T),
    /// `min` if `x < min`, `max` if `x > max`, else `x` (NaN stays NaN)
    Clamp {
        /// Lower bound.
        min: T,
        /// Upper bound.
        max: T,
    },
    /// `x + s`
    AddScalar(T),
    /// `x - s`
    SubScalar(T),
    /// `s - x`
    ScalarSub(T),
    /// `x * s`
    MulScalar(T),
    /// `x / s`
    DivScalar(T),
    /// `s / x`
    ScalarDiv(T),
}

impl<T: Float> UnaryOp<T> {
    /// The canonical scalar formula of the op.
    #[inline(always)]
    pub fn apply(self, x: T) -> T {
        match self {
            Self::Neg => -x,
            Self::Abs => x.abs(),
            Self::Exp => x.exp_portable(),
            Self::Log => x.ln_portable(),
            Self::Sqrt => x.sqrt(),
            Self::Tanh => x.tanh_portable(),
            Self::Relu => {
                if x > T::zero() || x.is_nan() {
                    x
                } else {
                    T::zero()
                }
            }
            Self::Sigmoid => {
                if x >= T::zero() {
                    T::one() / (T::one() + (-x).exp_portable())
                } else {
                    let e = x.exp_portable();
                    e / (T::one() + e)
                }
            }
            Self::Square => x * x,
            Self::Powf(p) => x.powf_portable(p),
            Self::Clamp { min, max } => {
                if x < min {
                    min
                } else if x > max {
                    max
                } else {
                    x
                }
            }
            Self::AddScalar(s) => x + s,
            Self::SubScalar(s) => x - s,
            Self::ScalarSub(s) => s - x,
            Self::MulScalar(s) => x * s,
            Self::DivScalar(s) => x / s,
            Self::ScalarDiv(s) => s / x,
        }
    }
}

/// A two-input elementwise op. [`BinaryOp::apply`] is its canonical definition.
/// Comparisons give `1` where true and `0` where false (NaN compares false, except `Ne`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`
    Div,
    /// The larger; NaN if either is NaN; `a` on ties.
    Maximum,
    /// The smaller; NaN if either is NaN; `a` on ties.
    Minimum,
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
    /// Relu's backward from its output: `a` (the gradient) where `b > 0`, else `+0`
    /// (a NaN output passes no gradient, as in PyTorch's `threshold_backward`).
    ReluBackward,
    /// Tanh's backward from its output: `a * (1 - b * b)` (PyTorch's `tanh_backward`).
    TanhBackward,
    /// Sigmoid's backward from its output: `a * (1 - b) * b` (PyTorch's
    /// `sigmoid_backward`).
    SigmoidBackward,
    /// Sqrt's backward from its output: `a / (b + b)` (PyTorch's `grad / (2 * result)`).
    SqrtBackward,
    /// Abs's backward from its input: `a * sign(b)`, with `sign(±0) = 0` and
    /// `sign(NaN) = NaN`.
    AbsBackward,
}

impl BinaryOp {
    /// Every op, in declaration order: what tests that must cover each op iterate (a new
    /// op goes here too).
    pub const ALL: [BinaryOp; 17] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
        BinaryOp::Eq,
        BinaryOp::Ne,
        BinaryOp::Lt,
        BinaryOp::Le,
        BinaryOp::Gt,
        BinaryOp::Ge,
        BinaryOp::ReluBackward,
        BinaryOp::TanhBackward,
        BinaryOp::SigmoidBackward,
        BinaryOp::SqrtBackward,
        BinaryOp::AbsBackward,
    ];

    /// The canonical scalar formula of the op.
    #[inline(always)]
    pub fn apply<T: Float>(self, a: T, b: T) -> T {
        let flag = |c: bool| if c { T::one() } else { T::zero() };
        match self {
            Self::Add => a + b,
            Self::Sub => a - b,
            Self::Mul => a * b,
            Self::Div => a / b,
            Self::Maximum => reduce::max2(a, b),
            Self::Minimum => reduce::min2(a, b),
            Self::Eq => flag(a == b),
            Self::Ne => flag(a != b),
            Self::Lt => flag(a < b),
            Self::Le => flag(a <= b),
            Self::Gt => flag(a > b),
            Self::Ge => flag(a >= b),
            Self::ReluBackward => {
                if b > T::zero() {
                    a
                } else {
                    T::zero()
                }
            }
            Self::TanhBackward => a * (T::one() - b * b),
            Self::SigmoidBackward => a * (T::one() - b) * b,
            Self::SqrtBackward => a / (b + b),
            Self::AbsBackward => {
                let sign = if b > T::zero() {
                    T::one()
                } else if b < T::zero() {
                    -T::one()
                } else if b == T::zero() {
                    T::zero()
                } else {
                    b
                };
                a * sign
            }
        }
    }
}

/// Elementwise kernels. Inputs are strided views; the output is a dense row-major buffer
/// of the inputs' (common) shape that the caller provides ([`crate::Device::alloc_output`])
/// and the kernel overwrites entirely; an output of another length is an error. Binary and
/// select inputs must already have equal shapes: broadcasting is expressed by the caller as
/// stride-0 dimensions.
pub trait ElementwiseKernel<T: Float>: Device {
    /// `out = op.apply(x)` for every element.
    fn unary(
        &self,
        op: UnaryOp<T>,
        x: View<'_, Self::Buffer<T>>,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// `out = op.apply(lhs, rhs)` for every element pair.
    fn binary(
        &self,
        op: BinaryOp,
        lhs: View<'_, Self::Buffer<T>>,
        rhs: View<'_, Self::Buffer<T>>,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;

    /// `out = on_true` where `condition != 0` (NaN counts as true), else `on_false`.
    fn select(
        &self,
        condition: View<'_, Self::Buffer<T>>,
        on_true: View<'_, Self::Buffer<T>>,
        on_false: View<'_, Self::Buffer<T>>,
        out: &mut Self::Buffer<T>,
    ) -> Result<()>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_all_lists_every_op_once() {
        use BinaryOp::*;
        // Exhaustive here (the enum is non_exhaustive only outside this crate): a new op
        // fails to compile here, a reminder to give it a place in `ALL`.
        for op in BinaryOp::ALL {
            match op {
                Add | Sub | Mul | Div | Maximum | Minimum | Eq | Ne | Lt | Le | Gt | Ge
                | ReluBackward | TanhBackward | SigmoidBackward | SqrtBackward | AbsBackward => {}
            }
        }
        let distinct: std::collections::HashSet<_> = BinaryOp::ALL.into_iter().collect();
        assert_eq!(distinct.len(), BinaryOp::ALL.len());
    }

    #[test]
    fn canonical_formulas() {
        assert_eq!(UnaryOp::Relu.apply(-0.0f32).to_bits(), 0.0f32.to_bits());
        assert!(UnaryOp::<f32>::Relu.apply(f32::NAN).is_nan());
        assert_eq!(UnaryOp::Sigmoid.apply(-1000.0f64), 0.0);
        assert_eq!(UnaryOp::Sigmoid.apply(1000.0f64), 1.0);
        assert_eq!(UnaryOp::Sigmoid.apply(0.0f32), 0.5);
        assert_eq!(
            UnaryOp::Clamp {
                min: -1.0,
                max: 1.0
            }
            .apply(3.0f32),
            1.0
        );
        assert_eq!(UnaryOp::ScalarSub(1.0).apply(3.0f32), -2.0);
        assert_eq!(BinaryOp::Lt.apply(1.0f32, 2.0), 1.0);
        assert_eq!(BinaryOp::Ne.apply(f32::NAN, f32::NAN), 1.0);
        assert_eq!(BinaryOp::Eq.apply(f32::NAN, f32::NAN), 0.0);
        assert!(BinaryOp::Maximum.apply(1.0f64, f64::NAN).is_nan());
        assert_eq!(BinaryOp::ReluBackward.apply(3.0f32, 0.0), 0.0);
        assert_eq!(BinaryOp::ReluBackward.apply(3.0f32, f32::NAN), 0.0);
        assert_eq!(BinaryOp::ReluBackward.apply(3.0f32, 1e-30), 3.0);
        assert_eq!(BinaryOp::TanhBackward.apply(2.0f64, 0.5), 1.5);
        assert_eq!(BinaryOp::SigmoidBackward.apply(4.0f64, 0.5), 1.0);
        assert_eq!(BinaryOp::SqrtBackward.apply(1.0f64, 2.0), 0.25);
        assert_eq!(BinaryOp::AbsBackward.apply(2.0f32, -0.0), 0.0);
        assert_eq!(BinaryOp::AbsBackward.apply(2.0f32, -3.0), -2.0);
        assert!(BinaryOp::AbsBackward.apply(2.0f32, f32::NAN).is_nan());
    }
}
