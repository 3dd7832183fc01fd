//! The dense layer.

use rlgrad_core::kernels::{RandomKernel, UnaryOp};
use rlgrad_core::{Cpu, Device, Error, Float, Result, Rng};
use rlgrad_tensor::{Tensor, TensorDevice};

use super::{Activation, Forward, Module, child_path};
use crate::param::Param;
use crate::tape::{Tape, Var};

/// How a [`Linear`] layer's parameters start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Init {
    /// PyTorch's `nn.Linear`: weight and bias uniform in `[-1/sqrt(in), 1/sqrt(in))`
    /// (`kaiming_uniform_(a=sqrt(5))` for the weight).
    TorchDefault,
    /// Keras' `Dense`: Glorot-uniform weight in `[-l, l)` with `l = sqrt(6 / (in + out))`,
    /// zero bias.
    GlorotUniform,
}

/// `y = x @ weight + bias` with `weight: [in, out]` (Keras' kernel layout; PyTorch's
/// `nn.Linear` stores the transpose, `[out, in]`) and `bias: [out]`. Parameters are named
/// `{name}/weight` and `{name}/bias`, in that order.
///
/// Draws come from `rng` (weight in row-major order, then bias), so a seed and stream
/// reproduce a layer on every platform.
///
/// ```
/// use rlgrad_autodiff::nn::{Forward, Init, Linear};
/// use rlgrad_autodiff::Tape;
/// use rlgrad_core::Rng;
/// use rlgrad_tensor::Tensor;
/// let layer = Linear::<f32>::new("actor/l1", 3, 2, Init::GlorotUniform, &mut Rng::new(0, "init"))?;
/// let tape = Tape::new();
/// let y = layer.forward(&tape, &tape.constant(&Tensor::ones([5, 3])?))?;
/// assert_eq!(y.dims(), &[5, 2]);
/// assert_eq!(layer.bias().unwrap().value().to_vec()?, [0.0, 0.0]); // Keras: zero bias
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Linear<T: Float = f32, D: Device = Cpu> {
    weight: Param<T, D>,
    bias: Option<Param<T, D>>,
}

impl<T: Float> Linear<T, Cpu> {
    /// A layer of `inputs -> outputs` on the default [`Cpu`].
    pub fn new(
        name: &str,
        inputs: usize,
        outputs: usize,
        init: Init,
        rng: &mut Rng,
    ) -> Result<Self> {
        Self::new_on(&Cpu::default(), name, inputs, outputs, init, rng)
    }
}

impl<T: Float, D: Device> Linear<T, D> {
    /// A layer of `inputs -> outputs` on `device`. An error when `inputs` or `outputs` is
    /// zero or the weight is larger than the host can allocate.
    pub fn new_on(
        device: &D,
        name: &str,
        inputs: usize,
        outputs: usize,
        init: Init,
        rng: &mut Rng,
    ) -> Result<Self>
    where
        D: RandomKernel<T>,
    {
        for (argument, value) in [("inputs", inputs), ("outputs", outputs)] {
            if value == 0 {
                return Err(Error::value(
                    "Linear::new",
                    argument,
                    "at least 1 feature",
                    0,
                ));
            }
        }
        rlgrad_core::check::product("Linear::new", "outputs", inputs, outputs)?;
        // The sizes are valid: what can fail now is an allocation, reported as this call's.
        let in_new = |e: Error| e.in_function("Linear::new");
        let mut draw = |dims: &[usize], bound: T| {
            Tensor::rand_uniform_on(device, dims, -bound, bound, rng).map_err(in_new)
        };
        let (weight, bias) = match init {
            Init::TorchDefault => {
                let bound = T::from_f64(1.0 / (inputs as f64).sqrt());
                (draw(&[inputs, outputs], bound)?, draw(&[outputs], bound)?)
            }
            Init::GlorotUniform => {
                let limit = T::from_f64((6.0 / (inputs as f64 + outputs as f64)).sqrt());
                let w = draw(&[inputs, outputs], limit)?;
                (w, Tensor::zeros_on(device, [outputs]).map_err(in_new)?)
            }
        };
        Ok(Self {
            weight: Param::new(format!("{name}/weight"), weight)?,
            bias: Some(Param::new(format!("{name}/bias"), bias)?),
        })
    }

    /// A layer from its parameters: `weight` `[in, out]`, `bias` `[out]` or none. An
    /// error for other shapes.
    pub fn from_params(weight: Param<T, D>, bias: Option<Param<T, D>>) -> Result<Self> {
        if weight.shape().ndim() != 2 {
            return Err(Error::shape(
                "Linear::from_params",
                "weight",
                "[in, out]",
                weight.shape(),
            ));
        }
        if let Some(b) = &bias
            && b.shape().dims() != [weight.shape().dims()[1]]
        {
            return Err(Error::shape(
                "Linear::from_params",
                "bias",
                format_args!(
                    "[{}] to match weight {}",
                    weight.shape().dims()[1],
                    weight.shape()
                ),
                b.shape(),
            ));
        }
        Ok(Self { weight, bias })
    }

    /// This layer with Keras' `kernel_regularizer=l2(c)` on its weight: `c * sum(w^2)`,
    /// collected by [`super::l2_penalty`]. The bias is not regularized.
    pub fn with_kernel_l2(mut self, c: f64) -> Result<Self> {
        self.weight.set_l2(Some(c))?;
        Ok(self)
    }

    /// The weight, `[in, out]`.
    pub fn weight(&self) -> &Param<T, D> {
        &self.weight
    }

    /// The bias, `[out]`.
    pub fn bias(&self) -> Option<&Param<T, D>> {
        self.bias.as_ref()
    }

    /// The layer's path: its weight's name without the `/weight` (or PyTorch's `.weight`)
    /// suffix, `actor/l1` for a layer built as `Linear::new("actor/l1", ..)`. Errors of
    /// [`Forward::forward`] name it.
    pub fn name(&self) -> &str {
        let weight = self.weight.name();
        weight
            .strip_suffix("/weight")
            .or_else(|| weight.strip_suffix(".weight"))
            .unwrap_or(weight)
    }

    /// The number of input features.
    pub fn inputs(&self) -> usize {
        self.weight.shape().dims()[0]
    }

    /// The number of output features.
    pub fn outputs(&self) -> usize {
        self.weight.shape().dims()[1]
    }
}

impl<T: Float, D: Device> Module<T, D> for Linear<T, D> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<T, D>)) {
        f(&self.weight);
        if let Some(b) = &self.bias {
            f(b);
        }
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<T, D>)) {
        f(&mut self.weight);
        if let Some(b) = &mut self.bias {
            f(b);
        }
    }
    /// `prefix/weight` and `prefix/bias` (PyTorch's `nn.Linear` paths).
    fn visit_named<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(&str, &'a Param<T, D>)) {
        f(&child_path(prefix, "weight"), &self.weight);
        if let Some(b) = &self.bias {
            f(&child_path(prefix, "bias"), b);
        }
    }
    fn visit_named_mut<'a>(
        &'a mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &'a mut Param<T, D>),
    ) {
        f(&child_path(prefix, "weight"), &mut self.weight);
        if let Some(b) = &mut self.bias {
            f(&child_path(prefix, "bias"), b);
        }
    }
}

impl<T: Float, D: TensorDevice<T>> Linear<T, D> {
    /// `activation(x @ weight + bias)`: the layer and its activation, the bits of
    /// [`Forward::forward`] followed by [`Activation::apply`]. A 2-D `x` with a bias runs
    /// as one op ([`Var::matmul_bias`]: two passes over the output fewer each way); a
    /// batched `x` (`[..., in]`) or a layer without bias runs the ops one by one.
    #[track_caller]
    pub fn forward_activated<'t>(
        &self,
        tape: &'t Tape<T, D>,
        x: &Var<'t, T, D>,
        activation: Activation,
    ) -> Result<Var<'t, T, D>> {
        const FUNCTION: &str = "Linear::forward";
        let inputs = self.inputs();
        let features = x.dims().last().copied();
        if features != Some(inputs) {
            return Err(Error::shape(
                FUNCTION,
                "x",
                format_args!(
                    "[..., {inputs}]: layer \"{}\" expects {inputs} input features",
                    self.name()
                ),
                format_args!(
                    "{} ({} features)",
                    x.shape(),
                    features.map_or_else(|| "no".to_owned(), |f| f.to_string())
                ),
            ));
        }
        let in_forward = |e: rlgrad_core::Error| e.in_function(FUNCTION);
        let weight = tape.param(&self.weight);
        let bias = self.bias.as_ref().map(|b| tape.param(b));
        match bias {
            Some(bias) if x.shape().ndim() == 2 => {
                let activation = match activation {
                    Activation::Relu => Some(UnaryOp::Relu),
                    Activation::Tanh => Some(UnaryOp::Tanh),
                    Activation::Sigmoid => Some(UnaryOp::Sigmoid),
                    Activation::Identity => None,
                };
                x.matmul_bias(&weight, &bias, activation)
                    .map_err(in_forward)
            }
            bias => {
                let y = x.matmul(&weight).map_err(in_forward)?;
                let y = match bias {
                    Some(bias) => y.add(&bias)?,
                    None => y,
                };
                activation.apply(&y)
            }
        }
    }
}

impl<T: Float, D: TensorDevice<T>> Forward<T, D> for Linear<T, D> {
    #[track_caller]
    fn forward<'t>(&self, tape: &'t Tape<T, D>, x: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        self.forward_activated(tape, x, Activation::Identity)
    }
}
