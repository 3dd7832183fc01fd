//! [`ElementwiseKernel`] on the GPU (`elementwise.cu`): the canonical formulas of
//! [`UnaryOp::apply`] and [`BinaryOp::apply`], transcendentals from the `libm` ports.

use rlgrad_core::kernels::{BinaryOp, ElementwiseKernel, UnaryOp};
use rlgrad_core::{Error, Float, Result, View};

use crate::compile::Family;
use crate::device::{Cuda, CudaBuffer, Scalar, check_len, check_view, grid};
use crate::strided::strided;

/// An op added to rlgrad-core after this device was written.
fn unknown(function: &'static str, op: impl std::fmt::Debug) -> Error {
    Error::value(
        function,
        "op",
        "an op the Cuda device implements",
        format_args!("{op:?}"),
    )
}

/// The op's code in `unary_apply` and its two scalars.
fn unary_code<T: Float>(op: UnaryOp<T>) -> Result<(i32, T, T)> {
    let zero = T::zero();
    Ok(match op {
        UnaryOp::Neg => (0, zero, zero),
        UnaryOp::Abs => (1, zero, zero),
        UnaryOp::Exp => (2, zero, zero),
        UnaryOp::Log => (3, zero, zero),
        UnaryOp::Sqrt => (4, zero, zero),
        UnaryOp::Tanh => (5, zero, zero),
        UnaryOp::Relu => (6, zero, zero),
        UnaryOp::Sigmoid => (7, zero, zero),
        UnaryOp::Square => (8, zero, zero),
        UnaryOp::Powf(p) => (9, p, zero),
        UnaryOp::Clamp { min, max } => (10, min, max),
        UnaryOp::AddScalar(s) => (11, s, zero),
        UnaryOp::SubScalar(s) => (12, s, zero),
        UnaryOp::ScalarSub(s) => (13, s, zero),
        UnaryOp::MulScalar(s) => (14, s, zero),
        UnaryOp::DivScalar(s) => (15, s, zero),
        UnaryOp::ScalarDiv(s) => (16, s, zero),
        other => return Err(unknown("Cuda::unary", other)),
    })
}

/// The op's code in `binary_apply`.
fn binary_code(op: BinaryOp) -> Result<i32> {
    Ok(match op {
        BinaryOp::Add => 0,
        BinaryOp::Sub => 1,
        BinaryOp::Mul => 2,
        BinaryOp::Div => 3,
        BinaryOp::Maximum => 4,
        BinaryOp::Minimum => 5,
        BinaryOp::Eq => 6,
        BinaryOp::Ne => 7,
        BinaryOp::Lt => 8,
        BinaryOp::Le => 9,
        BinaryOp::Gt => 10,
        BinaryOp::Ge => 11,
        BinaryOp::ReluBackward => 12,
        BinaryOp::TanhBackward => 13,
        BinaryOp::SigmoidBackward => 14,
        BinaryOp::SqrtBackward => 15,
        BinaryOp::AbsBackward => 16,
        other => return Err(unknown("Cuda::binary", other)),
    })
}

fn same_shape<T>(
    function: &'static str,
    argument: &'static str,
    reference: View<'_, CudaBuffer<T>>,
    other: View<'_, CudaBuffer<T>>,
) -> Result<()> {
    if reference.layout.shape() == other.layout.shape() {
        Ok(())
    } else {
        Err(Error::shape(
            function,
            argument,
            reference.layout.shape(),
            other.layout.shape(),
        ))
    }
}

impl<T: Float> ElementwiseKernel<T> for Cuda {
    fn unary(
        &self,
        op: UnaryOp<T>,
        x: View<'_, CudaBuffer<T>>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::unary";
        check_view(F, "x", x)?;
        let n = x.layout.numel();
        check_len(F, "out", out, n)?;
        if n == 0 {
            return Ok(());
        }
        let [xs] = strided(F, [x.layout])?;
        let (code, a, b) = unary_code(op)?;
        let kernel = self.function::<T>(Family::Elementwise, "unary")?;
        self.launch(
            F,
            &kernel,
            grid(n),
            &[
                &code,
                &self.ptr(x.buffer),
                &xs,
                &self.ptr(out),
                &(n as u64),
                &Scalar::of(a),
                &Scalar::of(b),
            ],
        )
    }

    fn binary(
        &self,
        op: BinaryOp,
        lhs: View<'_, CudaBuffer<T>>,
        rhs: View<'_, CudaBuffer<T>>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::binary";
        check_view(F, "lhs", lhs)?;
        check_view(F, "rhs", rhs)?;
        same_shape(F, "rhs", lhs, rhs)?;
        let n = lhs.layout.numel();
        check_len(F, "out", out, n)?;
        if n == 0 {
            return Ok(());
        }
        let [ls, rs] = strided(F, [lhs.layout, rhs.layout])?;
        let code = binary_code(op)?;
        let kernel = self.function::<T>(Family::Elementwise, "binary")?;
        let (l, r, o) = (self.ptr(lhs.buffer), self.ptr(rhs.buffer), self.ptr(out));
        self.launch(
            F,
            &kernel,
            grid(n),
            &[&code, &l, &ls, &r, &rs, &o, &(n as u64)],
        )
    }

    fn select(
        &self,
        condition: View<'_, CudaBuffer<T>>,
        on_true: View<'_, CudaBuffer<T>>,
        on_false: View<'_, CudaBuffer<T>>,
        out: &mut CudaBuffer<T>,
    ) -> Result<()> {
        const F: &str = "Cuda::select";
        check_view(F, "condition", condition)?;
        check_view(F, "on_true", on_true)?;
        check_view(F, "on_false", on_false)?;
        same_shape(F, "on_true", condition, on_true)?;
        same_shape(F, "on_false", condition, on_false)?;
        let n = condition.layout.numel();
        check_len(F, "out", out, n)?;
        if n == 0 {
            return Ok(());
        }
        let [cs, ts, fs] = strided(F, [condition.layout, on_true.layout, on_false.layout])?;
        let kernel = self.function::<T>(Family::Elementwise, "select")?;
        let (c, t, f, o) = (
            self.ptr(condition.buffer),
            self.ptr(on_true.buffer),
            self.ptr(on_false.buffer),
            self.ptr(out),
        );
        self.launch(
            F,
            &kernel,
            grid(n),
            &[&c, &cs, &t, &ts, &f, &fs, &o, &(n as u64)],
        )
    }
}
