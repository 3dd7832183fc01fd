//! What the tape records for each op, its backward rule, and [`CustomOp`], the interface
//! through which an op brings its own rule ([`crate::Tape::custom`] records one).
//!
//! Every rule is written with tensor ops, so it runs on any device, in the order of
//! operations PyTorch's autograd formulas use (`derivatives.yaml`), so that gradients match
//! its reference values to the last bits where the forward does.

use rlgrad_core::kernels::{BinaryOp, UnaryOp};
use rlgrad_core::{Dims, Error, Float, Result, Shape};
use rlgrad_tensor::{Tensor, TensorDevice};
use smallvec::SmallVec;

/// A recorded input: the node it comes from, or `None` for a constant (no gradient).
pub(crate) type Input = Option<usize>;

/// A gradient sent to an input by a backward rule.
pub(crate) enum Grad<T: Float, D: TensorDevice<T>> {
    /// A gradient of the input's whole shape.
    Full(Tensor<T, D>),
    /// The gradient of the part `start..start + len` along `axis` of an input of shape
    /// `shape` (a `narrow`'s backward), zero elsewhere: the tape places the parts of one
    /// input together, instead of a zero-padded tensor of the whole shape for each (a
    /// recurrence that narrows one step out of `T` would otherwise cost `O(T^2)`).
    Part {
        axis: usize,
        start: usize,
        shape: Shape,
        grad: Tensor<T, D>,
    },
}

/// The binary ops with a gradient.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
    Minimum,
}

impl Arith {
    pub(crate) fn forward_op(self) -> BinaryOp {
        match self {
            Self::Add => BinaryOp::Add,
            Self::Sub => BinaryOp::Sub,
            Self::Mul => BinaryOp::Mul,
            Self::Div => BinaryOp::Div,
            Self::Maximum => BinaryOp::Maximum,
            Self::Minimum => BinaryOp::Minimum,
        }
    }
}

/// One recorded op: its inputs and what its backward rule needs.
// The nodes of a tape live in one reused `Vec`; boxing the common variants to shrink it
// would cost an allocation per recorded op.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Op<T: Float, D: TensorDevice<T>> {
    /// A parameter or a watched tensor.
    Leaf,
    Unary {
        input: usize,
        op: UnaryOp<T>,
        x: Tensor<T, D>,
        y: Tensor<T, D>,
    },
    Binary {
        lhs: Input,
        rhs: Input,
        op: Arith,
        a: Tensor<T, D>,
        b: Tensor<T, D>,
    },
    Select {
        condition: Tensor<T, D>,
        on_true: Input,
        on_false: Input,
        true_shape: Shape,
        false_shape: Shape,
    },
    /// Sum or mean over all elements (`axis = None`) or one axis.
    Sum {
        input: usize,
        axis: Option<usize>,
        keepdim: bool,
        in_shape: Shape,
        mean: bool,
    },
    /// Max or min over all elements or one axis: the gradient is shared equally by the
    /// elements equal to the result (`amax`/`amin`).
    Extremum {
        input: usize,
        axis: Option<usize>,
        keepdim: bool,
        x: Tensor<T, D>,
        y: Tensor<T, D>,
    },
    Matmul {
        lhs: Input,
        rhs: Input,
        a: Tensor<T, D>,
        b: Tensor<T, D>,
    },
    /// `activation(x @ w + bias)` in one node (a linear layer): the backward of the
    /// activation (from the output `y`), of the add and of the product, in the order the
    /// three nodes would run them.
    MatmulBias {
        x: Input,
        w: Input,
        bias: Input,
        x_value: Tensor<T, D>,
        w_value: Tensor<T, D>,
        bias_shape: Shape,
        /// The activation's backward from `y` ([`backward_from_output`]), if any.
        activation_backward: Option<BinaryOp>,
        y: Tensor<T, D>,
    },
    Reshape {
        input: usize,
        in_shape: Shape,
    },
    Permute {
        input: usize,
        order: Dims,
    },
    Broadcast {
        input: usize,
        in_shape: Shape,
    },
    Narrow {
        input: usize,
        axis: usize,
        start: usize,
        in_shape: Shape,
    },
    Concat {
        inputs: SmallVec<[(Input, usize); 4]>,
        axis: usize,
    },
    IndexSelect {
        input: usize,
        axis: usize,
        indices: Vec<usize>,
        size: usize,
    },
    Softmax {
        input: usize,
        axis: usize,
        y: Tensor<T, D>,
    },
    LogSoftmax {
        input: usize,
        axis: usize,
        y: Tensor<T, D>,
    },
    Custom(Box<CustomNode<T, D>>),
}

/// A recorded custom op (boxed: custom ops are rare and large).
pub(crate) struct CustomNode<T: Float, D: TensorDevice<T>> {
    pub op: Box<dyn CustomOp<T, D>>,
    pub inputs: SmallVec<[Input; 4]>,
    pub values: SmallVec<[Tensor<T, D>; 4]>,
    pub output: Tensor<T, D>,
}

/// What backward rules need from the tape: a zero and a one to broadcast.
pub(crate) struct Constants<'a, T: Float, D: TensorDevice<T>> {
    pub zero: &'a Tensor<T, D>,
}

impl<T: Float, D: TensorDevice<T>> Op<T, D> {
    /// Whether the backward only moves the incoming gradient's values to the inputs
    /// (reshape, permute, narrow, concat), computing none: the tape's finite check skips
    /// what such a backward sends.
    pub(crate) fn backward_moves_values_only(&self) -> bool {
        matches!(
            self,
            Op::Reshape { .. } | Op::Permute { .. } | Op::Narrow { .. } | Op::Concat { .. }
        )
    }

    /// Calls `f` for every recorded (non-constant) input, in order.
    pub(crate) fn for_each_input(&self, mut f: impl FnMut(usize)) {
        let mut maybe = |input: &Input| {
            if let Some(i) = input {
                f(*i);
            }
        };
        match self {
            Self::Leaf => {}
            Self::Unary { input, .. }
            | Self::Sum { input, .. }
            | Self::Extremum { input, .. }
            | Self::Reshape { input, .. }
            | Self::Permute { input, .. }
            | Self::Broadcast { input, .. }
            | Self::Narrow { input, .. }
            | Self::IndexSelect { input, .. }
            | Self::Softmax { input, .. }
            | Self::LogSoftmax { input, .. } => f(*input),
            Self::Binary { lhs, rhs, .. } | Self::Matmul { lhs, rhs, .. } => {
                maybe(lhs);
                maybe(rhs);
            }
            Self::Select {
                on_true, on_false, ..
            } => {
                maybe(on_true);
                maybe(on_false);
            }
            Self::MatmulBias { x, w, bias, .. } => {
                maybe(x);
                maybe(w);
                maybe(bias);
            }
            Self::Concat { inputs, .. } => inputs.iter().for_each(|(input, _)| maybe(input)),
            Self::Custom(node) => node.inputs.iter().for_each(maybe),
        }
    }

    /// The gradients of the inputs from the gradient `g` of the output: `emit(input,
    /// gradient)` for every recorded input that `needs(input)`, each of the input's shape
    /// (or, for `Narrow`, the part of it that the output was).
    pub(crate) fn backward(
        &self,
        g: &Tensor<T, D>,
        constants: &Constants<'_, T, D>,
        needs: &dyn Fn(usize) -> bool,
        emit: &mut dyn FnMut(usize, Grad<T, D>) -> Result<()>,
    ) -> Result<()> {
        let wanted = |input: &Input| input.filter(|&i| needs(i));
        match self {
            Self::Leaf => Ok(()),
            Self::Unary { input, op, x, y } => {
                whole(emit, *input, unary_backward(*op, g, x, y, constants)?)
            }
            Self::Binary { lhs, rhs, op, a, b } => {
                binary_backward(*op, g, a, b, wanted(lhs), wanted(rhs), constants, emit)
            }
            Self::Select {
                condition,
                on_true,
                on_false,
                true_shape,
                false_shape,
            } => {
                let zero = constants.zero;
                if let Some(i) = wanted(on_true) {
                    whole(
                        emit,
                        i,
                        sum_to(&condition.where_cond(g, zero)?, true_shape)?,
                    )?;
                }
                if let Some(i) = wanted(on_false) {
                    whole(
                        emit,
                        i,
                        sum_to(&condition.where_cond(zero, g)?, false_shape)?,
                    )?;
                }
                Ok(())
            }
            Self::Sum {
                input,
                axis,
                keepdim,
                in_shape,
                mean,
            } => {
                let mut grad = g.clone();
                if *mean {
                    let count = match axis {
                        Some(a) => in_shape.dims()[*a],
                        None => in_shape.numel(),
                    };
                    grad = (&grad / T::from_usize(count))?;
                }
                whole(emit, *input, expand_back(&grad, *axis, *keepdim, in_shape)?)
            }
            Self::Extremum {
                input,
                axis,
                keepdim,
                x,
                y,
            } => {
                let y = expand_back(y, *axis, *keepdim, x.shape())?;
                let hits = x.eq(&y)?;
                let count = match axis {
                    Some(a) => hits.sum_axis(*a, true)?,
                    None => hits.reshape([hits.numel()])?.sum_axis(0, false)?,
                };
                let share = expand_back(g, *axis, *keepdim, x.shape())?.div(&count)?;
                whole(emit, *input, hits.mul(&share)?)
            }
            Self::Matmul { lhs, rhs, a, b } => {
                matmul_backward(g, a, b, wanted(lhs), wanted(rhs), emit)
            }
            Self::MatmulBias {
                x,
                w,
                bias,
                x_value,
                w_value,
                bias_shape,
                activation_backward,
                y,
            } => {
                let g = match activation_backward {
                    Some(backward) => g.binary(*backward, y)?,
                    None => g.clone(),
                };
                if let Some(i) = wanted(bias) {
                    whole(emit, i, sum_to(&g, bias_shape)?)?;
                }
                matmul_backward(&g, x_value, w_value, wanted(x), wanted(w), emit)
            }
            Self::Reshape { input, in_shape } => whole(emit, *input, g.reshape(in_shape)?),
            Self::Permute { input, order } => {
                let mut inverse = Dims::from_elem(0, order.len());
                for (i, &o) in order.iter().enumerate() {
                    inverse[o] = i;
                }
                whole(emit, *input, g.permute(&inverse)?)
            }
            Self::Broadcast { input, in_shape } => whole(emit, *input, sum_to(g, in_shape)?),
            Self::Narrow {
                input,
                axis,
                start,
                in_shape,
            } => emit(
                *input,
                Grad::Part {
                    axis: *axis,
                    start: *start,
                    shape: in_shape.clone(),
                    grad: g.clone(),
                },
            ),
            Self::Concat { inputs, axis } => {
                let mut start = 0;
                for &(input, len) in inputs {
                    if let Some(i) = wanted(&input) {
                        whole(emit, i, g.narrow(*axis, start, len)?)?;
                    }
                    start += len;
                }
                Ok(())
            }
            Self::IndexSelect {
                input,
                axis,
                indices,
                size,
            } => whole(emit, *input, g.index_add(*axis, indices, *size)?),
            Self::Softmax { input, axis, y } => {
                let dot = g.mul(y)?.sum_axis(*axis, true)?;
                whole(emit, *input, y.mul(&g.sub(&dot)?)?)
            }
            Self::LogSoftmax { input, axis, y } => {
                let total = g.sum_axis(*axis, true)?;
                whole(emit, *input, g.sub(&y.exp()?.mul(&total)?)?)
            }
            Self::Custom(node) => {
                let CustomNode {
                    op,
                    inputs,
                    values,
                    output,
                } = &**node;
                let refs: SmallVec<[&Tensor<T, D>; 4]> = values.iter().collect();
                let grads = op.backward(&refs, output, g)?;
                check_gradients(op.name(), &refs, &grads)?;
                for (input, grad) in inputs.iter().zip(grads) {
                    if let (Some(i), Some(grad)) = (wanted(input), grad) {
                        whole(emit, i, grad)?;
                    }
                }
                Ok(())
            }
        }
    }
}

fn unary_backward<T: Float, D: TensorDevice<T>>(
    op: UnaryOp<T>,
    g: &Tensor<T, D>,
    x: &Tensor<T, D>,
    y: &Tensor<T, D>,
    constants: &Constants<'_, T, D>,
) -> Result<Tensor<T, D>> {
    if let Some(backward) = backward_from_output(op) {
        return g.binary(backward, y);
    }
    let fused = |op: BinaryOp, saved: &Tensor<T, D>| g.binary(op, saved);
    match op {
        UnaryOp::Neg | UnaryOp::ScalarSub(_) => g.neg(),
        UnaryOp::AddScalar(_) | UnaryOp::SubScalar(_) => Ok(g.clone()),
        UnaryOp::MulScalar(s) => g * s,
        UnaryOp::DivScalar(s) => g / s,
        UnaryOp::ScalarDiv(_) => (&g.mul(y)? / x)?.neg(),
        UnaryOp::Abs => fused(BinaryOp::AbsBackward, x),
        UnaryOp::Exp => g.mul(y),
        UnaryOp::Log => g.div(x),
        UnaryOp::Square => g.mul(&(x * T::from_f64(2.0))?),
        UnaryOp::Powf(p) if p == T::zero() => constants.zero.broadcast_to(g.shape().clone()),
        UnaryOp::Powf(p) => g.mul(&(&x.powf(p - T::one())? * p)?),
        UnaryOp::Clamp { .. } => x.eq(y)?.where_cond(g, constants.zero),
        _ => Err(rlgrad_core::Error::value(
            "Tape::gradient",
            "loss",
            "ops with a backward rule",
            format_args!("{op:?}"),
        )),
    }
}

/// The fused backward op of an activation whose gradient needs only its output `y`
/// (`g.binary(op, y)`); `None` for the others.
pub(crate) fn backward_from_output<T>(activation: UnaryOp<T>) -> Option<BinaryOp> {
    match activation {
        UnaryOp::Sqrt => Some(BinaryOp::SqrtBackward),
        UnaryOp::Tanh => Some(BinaryOp::TanhBackward),
        UnaryOp::Relu => Some(BinaryOp::ReluBackward),
        UnaryOp::Sigmoid => Some(BinaryOp::SigmoidBackward),
        _ => None,
    }
}

/// The gradients of `a @ b` from the gradient `g` of the product: `g @ b^T` to `lhs`, then
/// `a^T @ g` to `rhs` (each summed over broadcast batch dimensions).
fn matmul_backward<T: Float, D: TensorDevice<T>>(
    g: &Tensor<T, D>,
    a: &Tensor<T, D>,
    b: &Tensor<T, D>,
    lhs: Option<usize>,
    rhs: Option<usize>,
    emit: &mut dyn FnMut(usize, Grad<T, D>) -> Result<()>,
) -> Result<()> {
    if let Some(i) = lhs {
        whole(emit, i, sum_to(&g.matmul(&b.t()?)?, a.shape())?)?;
    }
    if let Some(i) = rhs {
        // A transposed weight (`x @ W^T`, every linear layer) gets `(g^T a)^T`: the same
        // products summed in the same order as `a^T g`, but the transpose node then hands
        // `W` a dense gradient, so that a weight used at every step of a recurrence
        // accumulates dense tensors, not views.
        let transposed = [a.ndim(), b.ndim(), g.ndim()] == [2; 3]
            && !b.is_contiguous()
            && b.t()?.is_contiguous();
        let grad = if transposed {
            g.t()?.matmul(a)?.t()?
        } else {
            a.t()?.matmul(g)?
        };
        whole(emit, i, sum_to(&grad, b.shape())?)?;
    }
    Ok(())
}

/// Sends `grad`, of `input`'s whole shape.
fn whole<T: Float, D: TensorDevice<T>>(
    emit: &mut dyn FnMut(usize, Grad<T, D>) -> Result<()>,
    input: usize,
    grad: Tensor<T, D>,
) -> Result<()> {
    emit(input, Grad::Full(grad))
}

#[allow(clippy::too_many_arguments)]
fn binary_backward<T: Float, D: TensorDevice<T>>(
    op: Arith,
    g: &Tensor<T, D>,
    a: &Tensor<T, D>,
    b: &Tensor<T, D>,
    lhs: Option<usize>,
    rhs: Option<usize>,
    constants: &Constants<'_, T, D>,
    emit: &mut dyn FnMut(usize, Grad<T, D>) -> Result<()>,
) -> Result<()> {
    let mut send = |input: Option<usize>,
                    grad: &dyn Fn() -> Result<Tensor<T, D>>,
                    shape: &Shape| {
        match input {
            Some(i) => whole(emit, i, sum_to(&grad()?, shape)?),
            None => Ok(()),
        }
    };
    match op {
        Arith::Add => {
            send(lhs, &|| Ok(g.clone()), a.shape())?;
            send(rhs, &|| Ok(g.clone()), b.shape())
        }
        Arith::Sub => {
            send(lhs, &|| Ok(g.clone()), a.shape())?;
            send(rhs, &|| g.neg(), b.shape())
        }
        Arith::Mul => {
            send(lhs, &|| g.mul(b), a.shape())?;
            send(rhs, &|| g.mul(a), b.shape())
        }
        Arith::Div => {
            send(lhs, &|| g.div(b), a.shape())?;
            // PyTorch: -grad * self / (other * other)
            send(rhs, &|| g.neg()?.mul(a)?.div(&b.mul(b)?), b.shape())
        }
        Arith::Maximum | Arith::Minimum => {
            // PyTorch: ties share the gradient equally; otherwise it goes to the winner.
            let ties = a.eq(b)?;
            let shared = ties.where_cond(&(g * T::from_f64(0.5))?, g)?;
            let a_wins = if op == Arith::Maximum {
                a.gt(b)?
            } else {
                a.lt(b)?
            };
            let b_wins = if op == Arith::Maximum {
                a.lt(b)?
            } else {
                a.gt(b)?
            };
            let zero = constants.zero;
            send(lhs, &|| b_wins.where_cond(zero, &shared), a.shape())?;
            send(rhs, &|| a_wins.where_cond(zero, &shared), b.shape())
        }
    }
}

/// `g` summed over the axes along which `shape` was broadcast to `g`'s shape (the
/// backward of broadcasting), leading axes first.
pub(crate) fn sum_to<T: Float, D: TensorDevice<T>>(
    g: &Tensor<T, D>,
    shape: &Shape,
) -> Result<Tensor<T, D>> {
    if g.shape() == shape {
        return Ok(g.clone());
    }
    let mut grad = g.clone();
    while grad.ndim() > shape.ndim() {
        grad = grad.sum_axis(0, false)?;
    }
    for (axis, &dim) in shape.dims().iter().enumerate() {
        if dim == 1 && grad.dims()[axis] != 1 {
            grad = grad.sum_axis(axis, true)?;
        }
    }
    Ok(grad)
}

/// A reduction's output gradient `g` spread back over the input `shape` (a broadcast
/// view): the reduced axis is restored when it was not kept.
fn expand_back<T: Float, D: TensorDevice<T>>(
    g: &Tensor<T, D>,
    axis: Option<usize>,
    keepdim: bool,
    shape: &Shape,
) -> Result<Tensor<T, D>> {
    let kept = match axis {
        Some(a) if !keepdim => g.unsqueeze(a)?,
        _ => g.clone(),
    };
    kept.broadcast_to(shape.clone())
}

/// An op with a hand-written gradient.
///
/// [`CustomOp::forward`] computes the output from the input values; [`CustomOp::backward`]
/// gets the same inputs, the output and the gradient of the loss with respect to the
/// output, and returns one gradient per input (`None` for an input that gets none, such as
/// an integer index passed as a tensor). Each gradient must have its input's shape; the
/// tape checks it and reports the op by name otherwise.
///
/// A softplus, `ln(1 + e^x)`, whose derivative is the sigmoid:
///
/// ```
/// use rlgrad_autodiff::{CustomOp, Param, Tape};
/// use rlgrad_core::Result;
/// use rlgrad_tensor::Tensor;
///
/// struct Softplus;
///
/// impl CustomOp<f64> for Softplus {
///     fn name(&self) -> &str {
///         "softplus"
///     }
///     fn forward(&self, inputs: &[&Tensor<f64>]) -> Result<Tensor<f64>> {
///         (&inputs[0].exp()? + 1.0)?.log()
///     }
///     fn backward(
///         &self,
///         inputs: &[&Tensor<f64>],
///         _output: &Tensor<f64>,
///         grad: &Tensor<f64>,
///     ) -> Result<Vec<Option<Tensor<f64>>>> {
///         Ok(vec![Some(grad.mul(&inputs[0].sigmoid()?)?)])
///     }
/// }
///
/// let x = Param::new("x", Tensor::from_vec(vec![0.0, 2.0], [2])?)?;
/// let tape = Tape::<f64>::new();
/// let y = tape.custom(Softplus, &[&tape.param(&x)])?.sum_all()?;
/// let grads = tape.gradient(&y, &[&x])?;
/// let dx = grads.get(&x)?.to_vec()?;
/// assert_eq!(dx[0], 0.5);
/// assert!((dx[1] - 1.0 / (1.0 + (-2.0f64).exp())).abs() < 1e-15);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub trait CustomOp<T: Float = f32, D: TensorDevice<T> = rlgrad_core::Cpu>: Send + 'static {
    /// A name for messages.
    fn name(&self) -> &str;

    /// The output for `inputs`.
    fn forward(&self, inputs: &[&Tensor<T, D>]) -> Result<Tensor<T, D>>;

    /// One gradient per input, from the gradient `grad` of the output.
    fn backward(
        &self,
        inputs: &[&Tensor<T, D>],
        output: &Tensor<T, D>,
        grad: &Tensor<T, D>,
    ) -> Result<Vec<Option<Tensor<T, D>>>>;
}

/// `Ok` when a custom op returned one gradient per input, each of its input's shape.
pub(crate) fn check_gradients<T: Float, D: TensorDevice<T>>(
    name: &str,
    inputs: &[&Tensor<T, D>],
    grads: &[Option<Tensor<T, D>>],
) -> Result<()> {
    if grads.len() != inputs.len() {
        return Err(Error::shape(
            "Tape::gradient",
            "loss",
            format_args!(
                "one gradient per input ({}) from custom op `{name}`",
                inputs.len()
            ),
            format_args!("{} gradients", grads.len()),
        ));
    }
    for (i, (input, grad)) in inputs.iter().zip(grads).enumerate() {
        if let Some(grad) = grad
            && grad.shape() != input.shape()
        {
            return Err(Error::shape(
                "Tape::gradient",
                "loss",
                format_args!(
                    "a gradient of shape {} for input {i} of custom op `{name}`",
                    input.shape()
                ),
                grad.shape(),
            ));
        }
    }
    Ok(())
}
