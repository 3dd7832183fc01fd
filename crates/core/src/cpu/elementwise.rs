//! Elementwise kernels. Each op gets its own copy of the loops (the `match` on the op sits
//! outside them and each arm calls [`UnaryOp::apply`] / [`BinaryOp::apply`] on a constant
//! variant), so that the loops vectorize and the canonical formula is still written once.
//! Each chunk of work is a `simd::Vectorized` job, compiled for the baseline, AVX2 and
//! AVX-512 and run at the widest width the CPU has (each element is the same scalar
//! formula at any width, so the bits do not change). Strided inputs are walked in runs
//! (pieces of rows); a run whose strides are 1 or 0 (a dense row, a broadcast value) gets
//! a plain slice loop, and a row added to every row (a bias) is sliced at row edges
//! without the walk. The `f32` exp, tanh and sigmoid of dense inputs run through the lane
//! versions of `crate::cpu::lanes` (the same bits).

use super::{CHUNK, Cpu, Run, check_output, check_view, dense, for_each_run, repeated_row, runs};
use crate::cpu::grain::{Family, grain};
use crate::cpu::lanes;
use crate::kernels::{BinaryOp, ElementwiseKernel, UnaryOp};
use crate::{Error, Float, Par, Result, View};

fn same_shape<T>(
    function: &'static str,
    argument: &'static str,
    reference: View<'_, Vec<T>>,
    other: View<'_, Vec<T>>,
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

/// `out[i] = f(x[i])` over a view (a copy for the identity).
#[inline(always)]
pub(super) fn map<T: Float>(
    par: Par,
    x: View<'_, Vec<T>>,
    out: &mut [T],
    f: impl Fn(T) -> T + Sync + Send,
) {
    chunked(par, out, |first, out| {
        crate::cpu::simd::widest(MapChunk {
            x,
            first,
            out,
            f: &f,
        })
    });
}

/// Calls `job(first, chunk)` for the [`CHUNK`]-sized chunks of `out` (`first` the index of
/// the chunk's first element), in parallel when `out` is long enough to pay for it.
fn chunked<T: Send>(par: Par, out: &mut [T], job: impl Fn(usize, &mut [T]) + Sync + Send) {
    par.for_work(out.len(), grain(Family::Elementwise))
        .for_each_chunk_mut(out, CHUNK, |ci, chunk| job(ci * CHUNK, chunk));
}

/// `out[i] = f(x[first + i])` for one chunk of [`map`], compiled for each instruction set
/// (the loops over dense pieces then run at the vector unit's full width).
struct MapChunk<'a, T, F> {
    x: View<'a, Vec<T>>,
    first: usize,
    out: &'a mut [T],
    f: &'a F,
}

impl<T: Float, F: Fn(T) -> T> crate::cpu::simd::Vectorized for MapChunk<'_, T, F> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let Self { x, first, out, f } = self;
        if let Some(src) = dense(x) {
            for (o, &v) in out.iter_mut().zip(&src[first..]) {
                *o = f(v);
            }
            return;
        }
        for Run {
            pos,
            starts: [s],
            strides: [st],
            count,
        } in runs([x.layout], first, out.len())
        {
            let run = &mut out[pos..pos + count];
            match st {
                1 => run
                    .iter_mut()
                    .zip(&x.buffer[s..s + count])
                    .for_each(|(o, &v)| *o = f(v)),
                0 => run.fill(f(x.buffer[s])),
                _ => run
                    .iter_mut()
                    .enumerate()
                    .for_each(|(i, o)| *o = f(x.buffer[s + i * st])),
            }
        }
    }
}

/// `out[i] = f(x[i])` for the `f32` lane functions of [`lanes`] (the bits of the scalar
/// `UnaryOp::apply`), [`lanes::LANES`] values at a time.
/// Returns `true` (done), for the caller's dispatch.
fn lane_map<F>(par: Par, f: F, x: &[f32], out: &mut [f32]) -> bool
where
    F: Fn(&[f32; lanes::LANES]) -> [f32; lanes::LANES] + Copy + Sync + Send,
{
    par.for_work(out.len(), grain(Family::Elementwise))
        .for_each_chunk_mut(out, CHUNK, |ci, chunk| {
            let x = &x[ci * CHUNK..ci * CHUNK + chunk.len()];
            crate::cpu::simd::widest(lanes::LaneMap { f, x, out: chunk });
        });
    true
}

/// `out[i] = f(a[i], b[i])` over two views of one shape.
#[inline(always)]
fn zip<T: Float>(
    par: Par,
    a: View<'_, Vec<T>>,
    b: View<'_, Vec<T>>,
    out: &mut [T],
    f: impl Fn(T, T) -> T + Sync + Send,
) {
    chunked(par, out, |first, out| {
        crate::cpu::simd::widest(ZipChunk {
            a,
            b,
            first,
            out,
            f: &f,
        })
    });
}

/// `out[i] = f(a[first + i], b[first + i])` for one chunk of [`zip`], compiled for each
/// instruction set.
struct ZipChunk<'a, T, F> {
    a: View<'a, Vec<T>>,
    b: View<'a, Vec<T>>,
    first: usize,
    out: &'a mut [T],
    f: &'a F,
}

impl<T: Float, F: Fn(T, T) -> T> crate::cpu::simd::Vectorized for ZipChunk<'_, T, F> {
    type Output = ();
    #[inline(always)]
    fn run(self) {
        let Self {
            a,
            b,
            first,
            out,
            f,
        } = self;
        let Some(dense_a) = dense(a) else {
            return zip_runs(a, b, first, out, f);
        };
        if let Some(b) = dense(b) {
            for ((o, &x), &y) in out.iter_mut().zip(&dense_a[first..]).zip(&b[first..]) {
                *o = f(x, y);
            }
        } else if let Some(row) = repeated_row(b) {
            // A bias added to every row: slices of the rows against the bias.
            let mut col = first % row.len();
            let mut pos = 0;
            while pos < out.len() {
                let count = (row.len() - col).min(out.len() - pos);
                let x = &dense_a[first + pos..first + pos + count];
                for ((o, &x), &y) in out[pos..pos + count].iter_mut().zip(x).zip(&row[col..]) {
                    *o = f(x, y);
                }
                pos += count;
                col = 0;
            }
        } else {
            zip_runs(a, b, first, out, f);
        }
    }
}

/// [`ZipChunk`] for views walked in runs (pieces of rows).
#[inline(always)]
fn zip_runs<T: Float>(
    a: View<'_, Vec<T>>,
    b: View<'_, Vec<T>>,
    first: usize,
    out: &mut [T],
    f: &impl Fn(T, T) -> T,
) {
    for Run {
        pos,
        starts: [sa, sb],
        strides: [ta, tb],
        count,
    } in runs([a.layout, b.layout], first, out.len())
    {
        let run = &mut out[pos..pos + count];
        match (ta, tb) {
            (1, 1) => {
                let (x, y) = (&a.buffer[sa..sa + count], &b.buffer[sb..sb + count]);
                for ((o, &x), &y) in run.iter_mut().zip(x).zip(y) {
                    *o = f(x, y);
                }
            }
            (1, 0) => {
                let y = b.buffer[sb];
                for (o, &x) in run.iter_mut().zip(&a.buffer[sa..sa + count]) {
                    *o = f(x, y);
                }
            }
            (0, 1) => {
                let x = a.buffer[sa];
                for (o, &y) in run.iter_mut().zip(&b.buffer[sb..sb + count]) {
                    *o = f(x, y);
                }
            }
            _ => {
                for (i, o) in run.iter_mut().enumerate() {
                    *o = f(a.buffer[sa + i * ta], b.buffer[sb + i * tb]);
                }
            }
        }
    }
}

/// `$body` with `$f` bound to `$op`'s scalar formula ([`UnaryOp::apply`]) as a closure of
/// its own per op: the match is decided once, so that a loop calling `$f` is compiled for
/// that one formula (and vectorizes) rather than matching per element.
macro_rules! with_formula {
    ($op:expr, |$f:ident| $body:expr) => {
        match $op {
            UnaryOp::Neg => {
                let $f = move |v| UnaryOp::Neg.apply(v);
                $body
            }
            UnaryOp::Abs => {
                let $f = move |v| UnaryOp::Abs.apply(v);
                $body
            }
            UnaryOp::Exp => {
                let $f = move |v| UnaryOp::Exp.apply(v);
                $body
            }
            UnaryOp::Log => {
                let $f = move |v| UnaryOp::Log.apply(v);
                $body
            }
            UnaryOp::Sqrt => {
                let $f = move |v| UnaryOp::Sqrt.apply(v);
                $body
            }
            UnaryOp::Tanh => {
                let $f = move |v| UnaryOp::Tanh.apply(v);
                $body
            }
            UnaryOp::Relu => {
                let $f = move |v| UnaryOp::Relu.apply(v);
                $body
            }
            UnaryOp::Sigmoid => {
                let $f = move |v| UnaryOp::Sigmoid.apply(v);
                $body
            }
            UnaryOp::Square => {
                let $f = move |v| UnaryOp::Square.apply(v);
                $body
            }
            UnaryOp::Powf(p) => {
                let $f = move |v| UnaryOp::Powf(p).apply(v);
                $body
            }
            UnaryOp::Clamp { min, max } => {
                let $f = move |v| UnaryOp::Clamp { min, max }.apply(v);
                $body
            }
            UnaryOp::AddScalar(s) => {
                let $f = move |v| UnaryOp::AddScalar(s).apply(v);
                $body
            }
            UnaryOp::SubScalar(s) => {
                let $f = move |v| UnaryOp::SubScalar(s).apply(v);
                $body
            }
            UnaryOp::ScalarSub(s) => {
                let $f = move |v| UnaryOp::ScalarSub(s).apply(v);
                $body
            }
            UnaryOp::MulScalar(s) => {
                let $f = move |v| UnaryOp::MulScalar(s).apply(v);
                $body
            }
            UnaryOp::DivScalar(s) => {
                let $f = move |v| UnaryOp::DivScalar(s).apply(v);
                $body
            }
            UnaryOp::ScalarDiv(s) => {
                let $f = move |v| UnaryOp::ScalarDiv(s).apply(v);
                $body
            }
        }
    };
}
pub(super) use with_formula;

impl<T: Float> ElementwiseKernel<T> for Cpu {
    fn unary(&self, op: UnaryOp<T>, x: View<'_, Vec<T>>, out: &mut Vec<T>) -> Result<()> {
        check_view("Cpu::unary", "x", x)?;
        check_output("Cpu::unary", out, x.layout.numel())?;
        let par = self.par;
        if let Some(x) = dense(x)
            && let (Some(x), Some(out)) = (lanes::as_f32(x), lanes::as_f32_mut(out))
        {
            let done = match op {
                UnaryOp::Exp => lane_map(par, lanes::expf, x, out),
                UnaryOp::Tanh => lane_map(par, lanes::tanhf, x, out),
                UnaryOp::Sigmoid => lane_map(par, lanes::sigmoid, x, out),
                _ => false,
            };
            if done {
                return Ok(());
            }
        }
        with_formula!(op, |formula| map::<T>(par, x, out, formula));
        Ok(())
    }

    fn binary(
        &self,
        op: BinaryOp,
        lhs: View<'_, Vec<T>>,
        rhs: View<'_, Vec<T>>,
        out: &mut Vec<T>,
    ) -> Result<()> {
        check_view("Cpu::binary", "lhs", lhs)?;
        check_view("Cpu::binary", "rhs", rhs)?;
        same_shape("Cpu::binary", "rhs", lhs, rhs)?;
        check_output("Cpu::binary", out, lhs.layout.numel())?;
        let par = self.par;
        macro_rules! each {
            ($($variant:ident),* $(,)?) => {
                match op {
                    $(BinaryOp::$variant => zip(par, lhs, rhs, out, |a, b| BinaryOp::$variant.apply(a, b)),)*
                }
            };
        }
        each!(
            Add,
            Sub,
            Mul,
            Div,
            Maximum,
            Minimum,
            Eq,
            Ne,
            Lt,
            Le,
            Gt,
            Ge,
            ReluBackward,
            TanhBackward,
            SigmoidBackward,
            SqrtBackward,
            AbsBackward,
        );
        Ok(())
    }

    fn select(
        &self,
        condition: View<'_, Vec<T>>,
        on_true: View<'_, Vec<T>>,
        on_false: View<'_, Vec<T>>,
        out: &mut Vec<T>,
    ) -> Result<()> {
        check_view("Cpu::select", "condition", condition)?;
        check_view("Cpu::select", "on_true", on_true)?;
        check_view("Cpu::select", "on_false", on_false)?;
        same_shape("Cpu::select", "on_true", condition, on_true)?;
        same_shape("Cpu::select", "on_false", condition, on_false)?;
        check_output("Cpu::select", out, condition.layout.numel())?;
        let par = self.par.for_work(out.len(), grain(Family::Elementwise));
        par.for_each_chunk_mut(out, CHUNK, |ci, chunk| {
            for_each_run(
                [condition.layout, on_true.layout, on_false.layout],
                ci * CHUNK,
                chunk.len(),
                |pos, [sc, st, sf], [tc, tt, tf], count| {
                    for (i, o) in chunk[pos..pos + count].iter_mut().enumerate() {
                        *o = if condition.buffer[sc + i * tc] != T::zero() {
                            on_true.buffer[st + i * tt]
                        } else {
                            on_false.buffer[sf + i * tf]
                        };
                    }
                },
            );
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Device, Layout, Rng};

    #[test]
    fn a_row_added_to_every_row_is_the_elementwise_formula() {
        // Rows that straddle the chunk edges (7 does not divide 16K), a row of one, the
        // row on either side, and a row at an offset in its buffer.
        for (rows, len) in [(5000, 7), (40_000, 1), (3, 64)] {
            let x: Vec<f64> = (0..rows * len).map(|i| i as f64 * 0.5).collect();
            let row: Vec<f64> = (0..len + 3).map(|i| 1000.0 + i as f64).collect();
            let dense = Layout::contiguous(crate::Shape::from([rows, len]));
            let repeated = Layout::from_parts(
                crate::Shape::from([rows, len]),
                crate::Dims::from_slice(&[0, 1]),
                3,
            );
            for par in [Par::Seq, Par::rayon(3)] {
                let cpu = Cpu::new(par);
                let mut out = cpu.alloc_zeros::<f64>(rows * len).unwrap();
                let (x_view, row_view) = (View::new(&x, &dense), View::new(&row, &repeated));
                cpu.binary(BinaryOp::Sub, x_view, row_view, &mut out)
                    .unwrap();
                for (i, &got) in out.iter().enumerate() {
                    assert_eq!(got, x[i] - row[3 + i % len], "{rows} x {len} at {i}");
                }
                cpu.binary(BinaryOp::Sub, row_view, x_view, &mut out)
                    .unwrap();
                for (i, &got) in out.iter().enumerate() {
                    assert_eq!(
                        got,
                        row[3 + i % len] - x[i],
                        "{rows} x {len} at {i}, swapped"
                    );
                }
            }
        }
    }

    #[test]
    fn lane_transcendentals_are_the_scalar_formulas() {
        let mut rng = Rng::new(6, "lanes");
        // An odd length (a short last group), a size that splits over tasks, and the
        // values that send a group to the scalar fallback.
        for len in [1, 37, 3 * grain(Family::Elementwise) + 5] {
            let mut x: Vec<f32> = (0..len).map(|_| rng.normal(0.0, 6.0)).collect();
            for (i, special) in [f32::NAN, f32::INFINITY, -100.0, 95.0, 1e-30, -0.0]
                .into_iter()
                .enumerate()
            {
                x[(i * 7919) % len] = special;
            }
            let layout = Layout::contiguous(crate::Shape::from([len]));
            for par in [Par::Seq, Par::rayon(2)] {
                let cpu = Cpu::new(par);
                for op in [UnaryOp::Exp, UnaryOp::Tanh, UnaryOp::Sigmoid] {
                    let mut out = cpu.alloc_zeros::<f32>(len).unwrap();
                    cpu.unary(op, View::new(&x, &layout), &mut out).unwrap();
                    for (i, (&got, &v)) in out.iter().zip(&x).enumerate() {
                        let want = op.apply(v);
                        assert!(
                            got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                            "{op:?}({v:e}) at {i}: {got:e} instead of {want:e}"
                        );
                    }
                }
            }
        }
    }
}
