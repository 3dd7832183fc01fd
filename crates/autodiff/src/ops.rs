//! The differentiable ops of [`Var`]: arithmetic with broadcasting, scalar ops,
//! activations and other elementwise functions, reductions, shape ops, gathers, matmul and
//! softmax. Forward values are the tensor ops of `rlgrad-tensor` (canonical formulas);
//! errors name the `Var` op and, for shape mismatches, both shapes.

use std::ops::{Add, Div, Mul, Neg, Sub};

use rlgrad_core::kernels::UnaryOp;
use rlgrad_core::{Dims, Error, Float, Result, Shape};
use rlgrad_tensor::{Tensor, TensorDevice};
use smallvec::SmallVec;

use crate::backward::{Arith, Op, backward_from_output};
use crate::tape::Var;

macro_rules! unary_ops {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl<'t, T: Float, D: TensorDevice<T>> Var<'t, T, D> {
            $(
                $(#[$doc])*
                                #[track_caller]
                                pub fn $name(&self) -> Result<Self> {
                    self.unary(UnaryOp::$op, concat!("Var::", stringify!($name)))
                }
            )*
        }
    };
}

unary_ops! {
    /// `-x`
    neg => Neg;
    /// `|x|`; the gradient is `sign(x)`, 0 at 0.
    abs => Abs;
    /// `e^x`
    exp => Exp;
    /// `ln x`
    log => Log;
    /// `sqrt(x)`
    sqrt => Sqrt;
    /// `tanh x`
    tanh => Tanh;
    /// `max(x, 0)`; the gradient is 0 at 0 (PyTorch's convention).
    relu => Relu;
    /// `1 / (1 + e^-x)`
    sigmoid => Sigmoid;
    /// `x * x`
    square => Square;
}

macro_rules! binary_ops {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl<'t, T: Float, D: TensorDevice<T>> Var<'t, T, D> {
            $(
                $(#[$doc])*
                                #[track_caller]
                                pub fn $name(&self, rhs: &Self) -> Result<Self> {
                    self.arith(Arith::$op, rhs, concat!("Var::", stringify!($name)))
                }
            )*
        }
    };
}

binary_ops! {
    /// `self + rhs`, broadcasting; the backward sums over the broadcast axes.
    add => Add;
    /// `self - rhs`, broadcasting.
    sub => Sub;
    /// `self * rhs`, broadcasting.
    mul => Mul;
    /// `self / rhs`, broadcasting.
    div => Div;
    /// The elementwise larger value, broadcasting; on ties both inputs get half the
    /// gradient (PyTorch's `maximum`).
    maximum => Maximum;
    /// The elementwise smaller value, broadcasting (TD3's minimum of twin critics); ties
    /// share the gradient.
    minimum => Minimum;
}

macro_rules! comparisons {
    ($($(#[$doc:meta])* $name:ident;)*) => {
        impl<'t, T: Float, D: TensorDevice<T>> Var<'t, T, D> {
            $(
                $(#[$doc])*
                                pub fn $name(&self, rhs: &Self) -> Result<Tensor<T, D>> {
                    self.value().$name(rhs.value()).map_err(|e| e.in_function(concat!("Var::", stringify!($name))))
                }
            )*
        }
    };
}

comparisons! {
    /// A 0/1 mask of `self == rhs` (a constant: comparisons have no gradient).
    eq;
    /// A 0/1 mask of `self != rhs`.
    ne;
    /// A 0/1 mask of `self < rhs`.
    lt;
    /// A 0/1 mask of `self <= rhs`.
    le;
    /// A 0/1 mask of `self > rhs`.
    gt;
    /// A 0/1 mask of `self >= rhs`.
    ge;
}

impl<'t, T: Float, D: TensorDevice<T>> Var<'t, T, D> {
    #[track_caller]
    fn unary(&self, op: UnaryOp<T>, function: &'static str) -> Result<Self> {
        let y = self
            .value()
            .unary(op)
            .map_err(|e| e.in_function(function))?;
        let input = self.node();
        self.tape()
            .record(function, y.clone(), &[self], || Op::Unary {
                input: input.expect("recorded ops have a tracked input"),
                op,
                x: self.value().clone(),
                y,
            })
    }

    #[track_caller]
    fn arith(&self, op: Arith, rhs: &Self, function: &'static str) -> Result<Self> {
        self.tape().check_same(function, "rhs", rhs)?;
        let value = self
            .value()
            .binary(op.forward_op(), rhs.value())
            .map_err(|e| e.in_function(function))?;
        let (lhs, rhs_node) = (self.node(), rhs.node());
        self.tape()
            .record(function, value, &[self, rhs], || Op::Binary {
                lhs,
                rhs: rhs_node,
                op,
                a: self.value().clone(),
                b: rhs.value().clone(),
            })
    }

    /// `x^exponent`; the gradient is `exponent * x^(exponent - 1)` (0 for exponent 0).
    #[track_caller]
    pub fn powf(&self, exponent: T) -> Result<Self> {
        self.unary(UnaryOp::Powf(exponent), "Var::powf")
    }

    /// Each element limited to `[min, max]`; the gradient passes where `min <= x <= max`
    /// and is 0 elsewhere (PyTorch's `clamp`).
    #[track_caller]
    pub fn clamp(&self, min: T, max: T) -> Result<Self> {
        if !matches!(
            min.partial_cmp(&max),
            Some(std::cmp::Ordering::Less | std::cmp::Ordering::Equal)
        ) {
            return Err(Error::value(
                "Var::clamp",
                "max",
                format_args!("a bound >= min = {min}"),
                max,
            ));
        }
        self.unary(UnaryOp::Clamp { min, max }, "Var::clamp")
    }

    /// `self + s`.
    #[track_caller]
    pub fn add_scalar(&self, s: T) -> Result<Self> {
        self.unary(UnaryOp::AddScalar(s), "Var::add_scalar")
    }

    /// `self * s`.
    #[track_caller]
    pub fn mul_scalar(&self, s: T) -> Result<Self> {
        self.unary(UnaryOp::MulScalar(s), "Var::mul_scalar")
    }

    /// `on_true` where `condition != 0`, else `on_false`, all three broadcasting together;
    /// each branch gets the gradient where it was chosen.
    #[track_caller]
    pub fn where_cond(condition: &Tensor<T, D>, on_true: &Self, on_false: &Self) -> Result<Self> {
        let function = "Var::where_cond";
        on_true.tape().check_same(function, "on_false", on_false)?;
        let value = condition
            .where_cond(on_true.value(), on_false.value())
            .map_err(|e| e.in_function(function))?;
        let (t, f) = (on_true.node(), on_false.node());
        on_true
            .tape()
            .record(function, value.clone(), &[on_true, on_false], || {
                Op::Select {
                    condition: condition.clone(),
                    on_true: t,
                    on_false: f,
                    true_shape: on_true.shape().clone(),
                    false_shape: on_false.shape().clone(),
                }
            })
    }

    #[track_caller]
    fn sum_like(
        &self,
        axis: Option<usize>,
        keepdim: bool,
        mean: bool,
        function: &'static str,
    ) -> Result<Self> {
        let value = self
            .reduce_value(axis, keepdim, mean)
            .map_err(|e| e.in_function(function))?;
        let input = self.node();
        self.tape().record(function, value, &[self], || Op::Sum {
            input: input.expect("recorded ops have a tracked input"),
            axis,
            keepdim,
            in_shape: self.shape().clone(),
            mean,
        })
    }

    fn reduce_value(&self, axis: Option<usize>, keepdim: bool, mean: bool) -> Result<Tensor<T, D>> {
        let x = self.value();
        match (axis, mean) {
            (Some(a), false) => x.sum_axis(a, keepdim),
            (Some(a), true) => x.mean_axis(a, keepdim),
            (None, false) => x.reshape([x.numel()])?.sum_axis(0, false),
            (None, true) => x.reshape([x.numel()])?.mean_axis(0, false),
        }
    }

    /// The sum of all elements, a scalar (shape `[]`).
    #[track_caller]
    pub fn sum_all(&self) -> Result<Self> {
        self.sum_like(None, false, false, "Var::sum_all")
    }

    /// The mean of all elements; an error for none.
    #[track_caller]
    pub fn mean_all(&self) -> Result<Self> {
        self.sum_like(None, false, true, "Var::mean_all")
    }

    /// Sums along `axis`, keeping it with size 1 if `keepdim`.
    #[track_caller]
    pub fn sum(&self, axis: usize, keepdim: bool) -> Result<Self> {
        self.sum_like(Some(axis), keepdim, false, "Var::sum")
    }

    /// Means along `axis`; an error when the axis is empty.
    #[track_caller]
    pub fn mean(&self, axis: usize, keepdim: bool) -> Result<Self> {
        self.sum_like(Some(axis), keepdim, true, "Var::mean")
    }

    #[track_caller]
    fn extremum(
        &self,
        axis: Option<usize>,
        keepdim: bool,
        max: bool,
        function: &'static str,
    ) -> Result<Self> {
        let x = self.value();
        let value = match axis {
            Some(a) if max => x.max_axis(a, keepdim),
            Some(a) => x.min_axis(a, keepdim),
            None if max => x.reshape([x.numel()])?.max_axis(0, false),
            None => x.reshape([x.numel()])?.min_axis(0, false),
        }
        .map_err(|e| e.in_function(function))?;
        let input = self.node();
        self.tape()
            .record(function, value.clone(), &[self], || Op::Extremum {
                input: input.expect("recorded ops have a tracked input"),
                axis,
                keepdim,
                x: x.clone(),
                y: value,
            })
    }

    /// The largest element (a scalar); the gradient is shared equally by the elements
    /// equal to it. An error for an empty variable.
    #[track_caller]
    pub fn max_all(&self) -> Result<Self> {
        self.extremum(None, false, true, "Var::max_all")
    }

    /// The largest element along `axis` (`amax`: ties share the gradient).
    #[track_caller]
    pub fn max(&self, axis: usize, keepdim: bool) -> Result<Self> {
        self.extremum(Some(axis), keepdim, true, "Var::max")
    }

    /// The smallest element (a scalar); ties share the gradient.
    #[track_caller]
    pub fn min_all(&self) -> Result<Self> {
        self.extremum(None, false, false, "Var::min_all")
    }

    /// The smallest element along `axis` (`amin`: ties share the gradient).
    #[track_caller]
    pub fn min(&self, axis: usize, keepdim: bool) -> Result<Self> {
        self.extremum(Some(axis), keepdim, false, "Var::min")
    }

    /// `self @ rhs` for `[..., m, k] @ [..., k, n]` with broadcast batch dimensions.
    #[track_caller]
    pub fn matmul(&self, rhs: &Self) -> Result<Self> {
        let function = "Var::matmul";
        self.tape().check_same(function, "rhs", rhs)?;
        let value = self
            .value()
            .matmul(rhs.value())
            .map_err(|e| e.in_function(function))?;
        let (lhs, rhs_node) = (self.node(), rhs.node());
        self.tape()
            .record(function, value, &[self, rhs], || Op::Matmul {
                lhs,
                rhs: rhs_node,
                a: self.value().clone(),
                b: rhs.value().clone(),
            })
    }

    /// A linear layer in one op: `activation(self @ weight + bias)` for `self: [m, k]`,
    /// `weight: [k, n]` and `bias: [n]` ([`Tensor::matmul_bias`]), recorded as one node.
    ///
    /// Values and gradients are the bits of `self.matmul(weight)?.add(bias)?` followed by
    /// the activation (the backward runs the same rules in the same order); what it saves
    /// is two passes over the output each way and two nodes. The activations fused are
    /// those whose gradient comes from their output (`Relu`, `Tanh`, `Sigmoid`, `Sqrt`) and
    /// none; any other unary op is applied as its own op after the fused product and bias.
    ///
    /// ```
    /// use rlgrad_autodiff::{Param, Tape};
    /// use rlgrad_core::kernels::UnaryOp;
    /// use rlgrad_tensor::Tensor;
    /// let w = Param::new("w", Tensor::from_vec(vec![1.0f32, -1.0], [1, 2])?)?;
    /// let b = Param::new("b", Tensor::from_vec(vec![0.5f32, 0.5], [2])?)?;
    /// let tape = Tape::new();
    /// let x = tape.constant(&Tensor::from_vec(vec![2.0f32], [1, 1])?);
    /// let y = x.matmul_bias(&tape.param(&w), &tape.param(&b), Some(UnaryOp::Relu))?;
    /// assert_eq!(y.to_vec()?, [2.5, 0.0]); // relu([2 + 0.5, -2 + 0.5])
    /// let grads = tape.gradient(&y.sum_all()?, &[&w, &b])?;
    /// assert_eq!(grads.get(&w)?.to_vec()?, [2.0, 0.0]);
    /// assert_eq!(grads.get(&b)?.to_vec()?, [1.0, 0.0]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    #[track_caller]
    pub fn matmul_bias(
        &self,
        weight: &Self,
        bias: &Self,
        activation: Option<UnaryOp<T>>,
    ) -> Result<Self> {
        let function = "Var::matmul_bias";
        self.tape().check_same(function, "weight", weight)?;
        self.tape().check_same(function, "bias", bias)?;
        let activation_backward = activation.and_then(backward_from_output);
        if let Some(op) = activation
            && activation_backward.is_none()
        {
            return self.matmul_bias(weight, bias, None)?.unary(op, function);
        }
        let y = self
            .value()
            .matmul_bias(weight.value(), bias.value(), activation)
            .map_err(|e| e.in_function(function))?;
        let (x, w, b) = (self.node(), weight.node(), bias.node());
        self.tape()
            .record(function, y.clone(), &[self, weight, bias], || {
                Op::MatmulBias {
                    x,
                    w,
                    bias: b,
                    x_value: self.value().clone(),
                    w_value: weight.value().clone(),
                    bias_shape: bias.shape().clone(),
                    activation_backward,
                    y,
                }
            })
    }

    #[track_caller]
    fn view_op(
        &self,
        value: Tensor<T, D>,
        function: &'static str,
        op: impl FnOnce(usize) -> Op<T, D>,
    ) -> Result<Self> {
        let input = self.node();
        self.tape().record_view(function, value, &[self], || {
            op(input.expect("recorded ops have a tracked input"))
        })
    }

    /// The same elements in another shape.
    #[track_caller]
    pub fn reshape(&self, shape: impl Into<Shape>) -> Result<Self> {
        let value = self
            .value()
            .reshape(shape)
            .map_err(|e| e.in_function("Var::reshape"))?;
        self.view_op(value, "Var::reshape", |input| Op::Reshape {
            input,
            in_shape: self.shape().clone(),
        })
    }

    /// Axis `axis` (size 1) removed.
    #[track_caller]
    pub fn squeeze(&self, axis: usize) -> Result<Self> {
        let value = self
            .value()
            .squeeze(axis)
            .map_err(|e| e.in_function("Var::squeeze"))?;
        self.reshape(value.shape().clone())
    }

    /// A new axis of size 1 at `axis`.
    #[track_caller]
    pub fn unsqueeze(&self, axis: usize) -> Result<Self> {
        let value = self
            .value()
            .unsqueeze(axis)
            .map_err(|e| e.in_function("Var::unsqueeze"))?;
        self.reshape(value.shape().clone())
    }

    /// The axes reordered: axis `i` of the result is axis `order[i]` of `self`.
    #[track_caller]
    pub fn permute(&self, order: &[usize]) -> Result<Self> {
        let value = self
            .value()
            .permute(order)
            .map_err(|e| e.in_function("Var::permute"))?;
        self.view_op(value, "Var::permute", |input| Op::Permute {
            input,
            order: Dims::from(order),
        })
    }

    /// Axes `a` and `b` swapped.
    #[track_caller]
    pub fn transpose(&self, a: usize, b: usize) -> Result<Self> {
        let function = "Var::transpose";
        self.shape().check_axis(function, "a", a)?;
        self.shape().check_axis(function, "b", b)?;
        let mut order: Dims = (0..self.shape().ndim()).collect();
        order.swap(a, b);
        self.permute(&order)
    }

    /// The last two axes swapped; an error below two dimensions.
    #[track_caller]
    pub fn t(&self) -> Result<Self> {
        let ndim = self.shape().ndim();
        if ndim < 2 {
            return Err(Error::shape(
                "Var::t",
                "self",
                "at least 2 dimensions",
                self.shape(),
            ));
        }
        self.transpose(ndim - 2, ndim - 1)
    }

    /// This variable repeated to `shape` by broadcasting; the backward sums.
    #[track_caller]
    pub fn broadcast_to(&self, shape: impl Into<Shape>) -> Result<Self> {
        let value = self
            .value()
            .broadcast_to(shape)
            .map_err(|e| e.in_function("Var::broadcast_to"))?;
        self.view_op(value, "Var::broadcast_to", |input| Op::Broadcast {
            input,
            in_shape: self.shape().clone(),
        })
    }

    /// `len` entries of `axis` from `start`.
    #[track_caller]
    pub fn narrow(&self, axis: usize, start: usize, len: usize) -> Result<Self> {
        let value = self
            .value()
            .narrow(axis, start, len)
            .map_err(|e| e.in_function("Var::narrow"))?;
        self.view_op(value, "Var::narrow", |input| Op::Narrow {
            input,
            axis,
            start,
            in_shape: self.shape().clone(),
        })
    }

    /// The entries `indices` of `axis` (indices may repeat: their gradients add up).
    #[track_caller]
    pub fn index_select(&self, axis: usize, indices: &[usize]) -> Result<Self> {
        let value = self
            .value()
            .index_select(axis, indices)
            .map_err(|e| e.in_function("Var::index_select"))?;
        let size = self.dims()[axis];
        self.view_op(value, "Var::index_select", |input| Op::IndexSelect {
            input,
            axis,
            indices: indices.to_vec(),
            size,
        })
    }

    /// PyTorch's `gather`: the output has `index_shape` (as many dimensions as `self`, no
    /// larger than `self` along every axis but `axis`), and element `p` of the output is
    /// the element of `self` at `p` with coordinate `axis` replaced by `index[p]` (`index`
    /// row-major). The log-probability of the chosen action is
    /// `log_probs.gather(1, &actions, [batch, 1])`.
    ///
    /// ```
    /// use rlgrad_autodiff::{Param, Tape};
    /// use rlgrad_tensor::Tensor;
    /// let logits = Param::new("logits", Tensor::from_vec(vec![-0.1f32, -2.0, -1.5, -0.3], [2, 2])?)?;
    /// let tape = Tape::new();
    /// let chosen = tape.param(&logits).gather(1, &[0, 1], [2, 1])?;
    /// assert_eq!(chosen.to_vec()?, [-0.1, -0.3]);
    /// let grads = tape.gradient(&chosen.sum_all()?, &[&logits])?;
    /// assert_eq!(grads.get(&logits)?.to_vec()?, [1.0, 0.0, 0.0, 1.0]);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    #[track_caller]
    pub fn gather(
        &self,
        axis: usize,
        index: &[usize],
        index_shape: impl Into<Shape>,
    ) -> Result<Self> {
        let function = "Var::gather";
        let index_shape = index_shape.into();
        let dims = self.dims();
        self.shape().check_axis(function, "axis", axis)?;
        let fits = index_shape.ndim() == dims.len()
            && index_shape
                .dims()
                .iter()
                .zip(dims)
                .enumerate()
                .all(|(d, (&i, &s))| d == axis || i <= s);
        if !fits {
            return Err(Error::shape(
                function,
                "index_shape",
                format_args!(
                    "{} dimensions no larger than {} except along axis {axis}",
                    dims.len(),
                    self.shape()
                ),
                &index_shape,
            ));
        }
        let count = index_shape.numel_for(function, "index_shape")?;
        if index.len() != count {
            return Err(Error::shape(
                function,
                "index",
                format_args!("{count} indices for index_shape {index_shape}"),
                format_args!("{} indices", index.len()),
            ));
        }
        if let Some(&bad) = index.iter().find(|&&i| i >= dims[axis]) {
            return Err(Error::out_of_range(
                function,
                "index",
                format_args!("indices below {}, the size of axis {axis}", dims[axis]),
                bad,
            ));
        }
        let strides = self.shape().strides();
        let index_strides = index_shape.strides();
        let flat: Vec<usize> = index
            .iter()
            .enumerate()
            .map(|(p, &i)| {
                let mut offset = 0;
                let mut rest = p;
                for (d, &stride) in index_strides.iter().enumerate() {
                    let coordinate = rest / stride;
                    rest %= stride;
                    offset += if d == axis { i } else { coordinate } * strides[d];
                }
                offset
            })
            .collect();
        self.reshape([self.value().numel()])?
            .index_select(0, &flat)?
            .reshape(index_shape)
    }

    /// `vars` joined along `axis` (all of one tape).
    #[track_caller]
    pub fn concat(vars: &[&Self], axis: usize) -> Result<Self> {
        let function = "Var::concat";
        let Some(first) = vars.first() else {
            return Err(Error::empty(function, "vars", "at least one variable"));
        };
        for v in vars {
            first.tape().check_same(function, "vars", v)?;
        }
        let values: SmallVec<[&Tensor<T, D>; 4]> = vars.iter().map(|v| v.value()).collect();
        let value = Tensor::concat(&values, axis).map_err(|e| e.in_function(function))?;
        let inputs: SmallVec<[(Option<usize>, usize); 4]> =
            vars.iter().map(|v| (v.node(), v.dims()[axis])).collect();
        first
            .tape()
            .record_view(function, value, vars, || Op::Concat { inputs, axis })
    }

    /// `vars` (all of one shape) stacked along a new axis `axis`.
    #[track_caller]
    pub fn stack(vars: &[&Self], axis: usize) -> Result<Self> {
        let expanded = vars
            .iter()
            .map(|v| v.unsqueeze(axis))
            .collect::<Result<SmallVec<[Self; 4]>>>()
            .map_err(|e| e.in_function("Var::stack"))?;
        let refs: SmallVec<[&Self; 4]> = expanded.iter().collect();
        Self::concat(&refs, axis).map_err(|e| e.in_function("Var::stack"))
    }

    /// The softmax along `axis`: `exp(x - max) / sum(exp(x - max))`.
    #[track_caller]
    pub fn softmax(&self, axis: usize) -> Result<Self> {
        let function = "Var::softmax";
        let x = self.value();
        let shifted = x
            .sub(&x.max_axis(axis, true)?)
            .map_err(|e| e.in_function(function))?;
        let e = shifted.exp()?;
        let y = Tensor::div(&e, &e.sum_axis(axis, true)?)?;
        let input = self.node();
        self.tape()
            .record(function, y.clone(), &[self], || Op::Softmax {
                input: input.expect("recorded ops have a tracked input"),
                axis,
                y,
            })
    }

    /// The log-softmax along `axis`: `(x - max) - ln(sum(exp(x - max)))`, stable for
    /// large logits.
    #[track_caller]
    pub fn log_softmax(&self, axis: usize) -> Result<Self> {
        let function = "Var::log_softmax";
        let x = self.value();
        let shifted = x
            .sub(&x.max_axis(axis, true)?)
            .map_err(|e| e.in_function(function))?;
        let y = Tensor::sub(&shifted, &shifted.exp()?.sum_axis(axis, true)?.log()?)?;
        let input = self.node();
        self.tape()
            .record(function, y.clone(), &[self], || Op::LogSoftmax {
                input: input.expect("recorded ops have a tracked input"),
                axis,
                y,
            })
    }
}

// Operators return `Result` (see "Operators" in the crate docs): an op on a variable of a
// consumed tape, of another tape, or one whose device cannot allocate is an error, and a
// failed broadcast is one too. Scalars on the left are `s op x` in one op (`ScalarSub`,
// `ScalarDiv`: the bits of the scalar formula, not of a negation or reciprocal after it).
macro_rules! var_operators {
    ($($trait:ident $method:ident $scalar:ident $reversed:ident;)*) => {$(
        impl<'t, T: Float, D: TensorDevice<T>> $trait<&Var<'t, T, D>> for &Var<'t, T, D> {
            type Output = Result<Var<'t, T, D>>;
                        #[track_caller]
                        fn $method(self, rhs: &Var<'t, T, D>) -> Self::Output {
                Var::$method(self, rhs)
            }
        }
        impl<'t, T: Float, D: TensorDevice<T>> $trait<Var<'t, T, D>> for Var<'t, T, D> {
            type Output = Result<Var<'t, T, D>>;
                        #[track_caller]
                        fn $method(self, rhs: Var<'t, T, D>) -> Self::Output {
                Var::$method(&self, &rhs)
            }
        }
        impl<'t, T: Float, D: TensorDevice<T>> $trait<T> for &Var<'t, T, D> {
            type Output = Result<Var<'t, T, D>>;
                        #[track_caller]
                        fn $method(self, rhs: T) -> Self::Output {
                self.unary(UnaryOp::$scalar(rhs), concat!("Var::", stringify!($method)))
            }
        }
        impl<'t, T: Float, D: TensorDevice<T>> $trait<T> for Var<'t, T, D> {
            type Output = Result<Var<'t, T, D>>;
                        #[track_caller]
                        fn $method(self, rhs: T) -> Self::Output {
                self.unary(UnaryOp::$scalar(rhs), concat!("Var::", stringify!($method)))
            }
        }
        var_operators!(@left $trait $method $reversed f32);
        var_operators!(@left $trait $method $reversed f64);
    )*};
    (@left $trait:ident $method:ident $reversed:ident $float:ty) => {
        impl<'t, D: TensorDevice<$float>> $trait<&Var<'t, $float, D>> for $float {
            type Output = Result<Var<'t, $float, D>>;
                        #[track_caller]
                        fn $method(self, rhs: &Var<'t, $float, D>) -> Self::Output {
                rhs.unary(UnaryOp::$reversed(self), concat!("Var::", stringify!($method)))
            }
        }
        impl<'t, D: TensorDevice<$float>> $trait<Var<'t, $float, D>> for $float {
            type Output = Result<Var<'t, $float, D>>;
                        #[track_caller]
                        fn $method(self, rhs: Var<'t, $float, D>) -> Self::Output {
                rhs.unary(UnaryOp::$reversed(self), concat!("Var::", stringify!($method)))
            }
        }
    };
}

var_operators! {
    Add add AddScalar AddScalar;
    Sub sub SubScalar ScalarSub;
    Mul mul MulScalar MulScalar;
    Div div DivScalar ScalarDiv;
}

impl<'t, T: Float, D: TensorDevice<T>> Neg for &Var<'t, T, D> {
    type Output = Result<Var<'t, T, D>>;
    #[track_caller]
    fn neg(self) -> Self::Output {
        Var::neg(self)
    }
}

impl<'t, T: Float, D: TensorDevice<T>> Neg for Var<'t, T, D> {
    type Output = Result<Var<'t, T, D>>;
    #[track_caller]
    fn neg(self) -> Self::Output {
        Var::neg(&self)
    }
}
