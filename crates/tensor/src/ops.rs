//! Elementwise ops: unary, binary with NumPy broadcasting, scalar operands, comparisons
//! giving 0/1 masks, and `where_cond`. Each op's formula is the canonical one of
//! [`UnaryOp::apply`] / [`BinaryOp::apply`].

use std::ops::{Add, Div, Mul, Neg, Sub};

use rlgrad_core::kernels::{BinaryOp, UnaryOp};
use rlgrad_core::{Float, Result, Shape};

use crate::shape_ops::broadcast_layout;
use crate::{Tensor, TensorDevice};

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl<T: Float, D: TensorDevice<T>> Tensor<T, D> {
            $(
                $(#[$doc])*
                pub fn $name(&self) -> Result<Self> {
                    self.unary(UnaryOp::$op)
                }
            )*
        }
    };
}

unary_methods! {
    /// `-x`
    neg => Neg;
    /// `|x|`
    abs => Abs;
    /// `e^x` (portable libm; the same bits on every platform)
    exp => Exp;
    /// `ln x` (portable libm)
    log => Log;
    /// `sqrt(x)`
    sqrt => Sqrt;
    /// `tanh x` (portable libm)
    tanh => Tanh;
    /// `max(x, 0)`; NaN stays NaN
    relu => Relu;
    /// `1 / (1 + e^-x)`, computed without overflow for large `|x|`
    sigmoid => Sigmoid;
    /// `x * x`
    square => Square;
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl<T: Float, D: TensorDevice<T>> Tensor<T, D> {
            $(
                $(#[$doc])*
                pub fn $name(&self, rhs: &Self) -> Result<Self> {
                    self.binary_named(BinaryOp::$op, rhs, concat!("Tensor::", stringify!($name)))
                }
            )*
        }
    };
}

binary_methods! {
    /// `self + rhs`, broadcasting.
    add => Add;
    /// `self - rhs`, broadcasting.
    sub => Sub;
    /// `self * rhs`, broadcasting.
    mul => Mul;
    /// `self / rhs`, broadcasting.
    div => Div;
    /// The elementwise larger value, broadcasting; NaN if either is NaN.
    maximum => Maximum;
    /// The elementwise smaller value, broadcasting; NaN if either is NaN.
    minimum => Minimum;
    /// 1 where `self == rhs`, else 0.
    eq => Eq;
    /// 1 where `self != rhs`, else 0.
    ne => Ne;
    /// 1 where `self < rhs`, else 0.
    lt => Lt;
    /// 1 where `self <= rhs`, else 0.
    le => Le;
    /// 1 where `self > rhs`, else 0.
    gt => Gt;
    /// 1 where `self >= rhs`, else 0.
    ge => Ge;
}

impl<T: Float, D: TensorDevice<T>> Tensor<T, D> {
    /// `op.apply(x)` for every element: the door to every [`UnaryOp`], scalar ones included.
    pub fn unary(&self, op: UnaryOp<T>) -> Result<Self> {
        Self::from_kernel(&self.device, self.shape().clone(), |out| {
            self.device.unary(op, self.view(), out)
        })
    }

    /// `x^exponent` (portable libm).
    pub fn powf(&self, exponent: T) -> Result<Self> {
        self.unary(UnaryOp::Powf(exponent))
    }

    /// Each element limited to `[min, max]`; NaN stays NaN.
    pub fn clamp(&self, min: T, max: T) -> Result<Self> {
        self.unary(UnaryOp::Clamp { min, max })
    }

    /// `op.apply(self, rhs)` for every element pair, broadcasting: the door to every
    /// [`BinaryOp`], the fused backward ops of autodiff included.
    ///
    /// ```
    /// use rlgrad_core::kernels::BinaryOp;
    /// use rlgrad_tensor::Tensor;
    /// let grad = Tensor::from_vec(vec![1.0f32, 1.0], [2])?;
    /// let relu_out = Tensor::from_vec(vec![0.0f32, 2.0], [2])?;
    /// assert_eq!(grad.binary(BinaryOp::ReluBackward, &relu_out)?.to_vec()?, [0.0, 1.0]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn binary(&self, op: BinaryOp, rhs: &Self) -> Result<Self> {
        self.binary_named(op, rhs, "Tensor::binary")
    }

    fn binary_named(&self, op: BinaryOp, rhs: &Self, function: &'static str) -> Result<Self> {
        let shape = Shape::broadcast(function, self.shape(), rhs.shape())?;
        let (l, r) = (
            broadcast_layout(&self.layout, &shape),
            broadcast_layout(&rhs.layout, &shape),
        );
        Self::from_kernel(&self.device, shape, |out| {
            self.device.binary(
                op,
                rlgrad_core::View::new(&self.buffer, &l),
                rlgrad_core::View::new(&rhs.buffer, &r),
                out,
            )
        })
    }

    /// `on_true` where `self != 0` (NaN counts as true), else `on_false`; all three
    /// broadcast together.
    ///
    /// ```
    /// use rlgrad_tensor::Tensor;
    /// let x = Tensor::from_vec(vec![-1.0f32, 2.0, -3.0], [3])?;
    /// let zero = Tensor::scalar(0.0f32);
    /// let positive = x.gt(&zero)?;
    /// assert_eq!(positive.where_cond(&x, &zero)?.to_vec()?, [0.0, 2.0, 0.0]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn where_cond(&self, on_true: &Self, on_false: &Self) -> Result<Self> {
        let function = "Tensor::where_cond";
        let shape = Shape::broadcast(function, self.shape(), on_true.shape())?;
        let shape = Shape::broadcast(function, &shape, on_false.shape())?;
        let layouts = [&self.layout, &on_true.layout, &on_false.layout]
            .map(|layout| broadcast_layout(layout, &shape));
        Self::from_kernel(&self.device, shape, |out| {
            self.device.select(
                rlgrad_core::View::new(&self.buffer, &layouts[0]),
                rlgrad_core::View::new(&on_true.buffer, &layouts[1]),
                rlgrad_core::View::new(&on_false.buffer, &layouts[2]),
                out,
            )
        })
    }
}

// Operators return `Result` (as candle's do): a failed broadcast is an error, not a panic.
macro_rules! tensor_operators {
    ($($trait:ident $method:ident $scalar_op:ident $reversed:ident;)*) => {$(
        impl<T: Float, D: TensorDevice<T>> $trait<&Tensor<T, D>> for &Tensor<T, D> {
            type Output = Result<Tensor<T, D>>;
            fn $method(self, rhs: &Tensor<T, D>) -> Self::Output {
                Tensor::$method(self, rhs)
            }
        }
        impl<T: Float, D: TensorDevice<T>> $trait<Tensor<T, D>> for Tensor<T, D> {
            type Output = Result<Tensor<T, D>>;
            fn $method(self, rhs: Tensor<T, D>) -> Self::Output {
                Tensor::$method(&self, &rhs)
            }
        }
        impl<T: Float, D: TensorDevice<T>> $trait<T> for &Tensor<T, D> {
            type Output = Result<Tensor<T, D>>;
            fn $method(self, rhs: T) -> Self::Output {
                self.unary(UnaryOp::$scalar_op(rhs))
            }
        }
        impl<T: Float, D: TensorDevice<T>> $trait<T> for Tensor<T, D> {
            type Output = Result<Tensor<T, D>>;
            fn $method(self, rhs: T) -> Self::Output {
                self.unary(UnaryOp::$scalar_op(rhs))
            }
        }
        impl<D: TensorDevice<f32>> $trait<&Tensor<f32, D>> for f32 {
            type Output = Result<Tensor<f32, D>>;
            fn $method(self, rhs: &Tensor<f32, D>) -> Self::Output {
                rhs.unary(UnaryOp::$reversed(self))
            }
        }
        impl<D: TensorDevice<f64>> $trait<&Tensor<f64, D>> for f64 {
            type Output = Result<Tensor<f64, D>>;
            fn $method(self, rhs: &Tensor<f64, D>) -> Self::Output {
                rhs.unary(UnaryOp::$reversed(self))
            }
        }
    )*};
}

tensor_operators! {
    Add add AddScalar AddScalar;
    Sub sub SubScalar ScalarSub;
    Mul mul MulScalar MulScalar;
    Div div DivScalar ScalarDiv;
}

impl<T: Float, D: TensorDevice<T>> Neg for &Tensor<T, D> {
    type Output = Result<Tensor<T, D>>;
    fn neg(self) -> Self::Output {
        Tensor::neg(self)
    }
}

impl<T: Float, D: TensorDevice<T>> Neg for Tensor<T, D> {
    type Output = Result<Tensor<T, D>>;
    fn neg(self) -> Self::Output {
        Tensor::neg(&self)
    }
}
