//! The plain stack of layers.

use std::fmt;

use rlgrad_core::{Cpu, Float, Result};
use rlgrad_tensor::TensorDevice;

use super::{Forward, Module};
use crate::param::Param;
use crate::tape::{Tape, Var};

/// Layers applied in order (PyTorch's `nn.Sequential`): any [`Forward`] module that is
/// `Clone` (a [`super::Linear`], an [`super::Activation`], an [`super::Mlp`], your own
/// derived module with a `Forward` impl), boxed. The parameters of layer `i` have the
/// path `i/...` (`0/weight`, as PyTorch names them); a sequential is `Clone` (a target
/// network) because its layers are.
///
/// ```
/// use rlgrad_autodiff::nn::{Activation, Forward, Init, Linear, Module, Sequential};
/// use rlgrad_autodiff::Tape;
/// use rlgrad_core::Rng;
/// use rlgrad_tensor::Tensor;
///
/// let mut rng = Rng::new(0, "init");
/// let q: Sequential = Sequential::new()
///     .push(Linear::new("l1", 4, 16, Init::TorchDefault, &mut rng)?)
///     .push(Activation::Relu)
///     .push(Linear::new("l2", 16, 1, Init::TorchDefault, &mut rng)?);
/// assert_eq!(q.len(), 3);
/// assert_eq!(q.named_parameters()[2].0, "2/weight");
/// let tape = Tape::new().no_grad();
/// let y = q.forward(&tape, &tape.constant(&Tensor::ones([8, 4])?))?;
/// assert_eq!(y.dims(), &[8, 1]);
/// let target = q.clone();
/// assert_ne!(target.parameters()[0].id(), q.parameters()[0].id());
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub struct Sequential<T: Float = f32, D: TensorDevice<T> = Cpu> {
    layers: Vec<Box<dyn Layer<T, D>>>,
}

/// A [`Forward`] module that can be cloned behind a box: what a [`Sequential`] holds.
/// Every `Forward + Clone + 'static` type is one.
pub trait Layer<T: Float = f32, D: TensorDevice<T> = Cpu>: Forward<T, D> {
    /// A boxed copy (new parameters with the same names and values, as `Clone` makes).
    fn boxed_clone(&self) -> Box<dyn Layer<T, D>>;
}

impl<T: Float, D: TensorDevice<T>, L: Forward<T, D> + Clone + 'static> Layer<T, D> for L {
    fn boxed_clone(&self) -> Box<dyn Layer<T, D>> {
        Box::new(self.clone())
    }
}

impl<T: Float, D: TensorDevice<T>> Sequential<T, D> {
    /// No layers: the identity.
    pub fn new() -> Self {
        Self { layers: Vec::new() }
    }

    /// This stack with `layer` appended.
    pub fn push(mut self, layer: impl Layer<T, D> + 'static) -> Self {
        self.layers.push(Box::new(layer));
        self
    }

    /// The number of layers.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// Whether there is no layer.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// The layers, in order.
    pub fn layers(&self) -> &[Box<dyn Layer<T, D>>] {
        &self.layers
    }
}

impl<T: Float, D: TensorDevice<T>> Default for Sequential<T, D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Float, D: TensorDevice<T>> Clone for Sequential<T, D> {
    fn clone(&self) -> Self {
        Self {
            layers: self.layers.iter().map(|l| l.boxed_clone()).collect(),
        }
    }
}

impl<T: Float, D: TensorDevice<T>> fmt::Debug for Sequential<T, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self
            .named_parameters()
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        f.debug_struct("Sequential")
            .field("layers", &self.layers.len())
            .field("parameters", &names)
            .finish()
    }
}

impl<T: Float, D: TensorDevice<T>> Module<T, D> for Sequential<T, D> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<T, D>)) {
        self.layers.visit(f);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<T, D>)) {
        self.layers.visit_mut(f);
    }
    /// Layer `i` under `prefix/i`.
    fn visit_named<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(&str, &'a Param<T, D>)) {
        self.layers.visit_named(prefix, f);
    }
    fn visit_named_mut<'a>(
        &'a mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &'a mut Param<T, D>),
    ) {
        self.layers.visit_named_mut(prefix, f);
    }
}

impl<T: Float, D: TensorDevice<T>> Forward<T, D> for Sequential<T, D> {
    /// The layers applied in order (errors are the failing layer's, which name it); the
    /// input itself for an empty stack.
    #[track_caller]
    fn forward<'t>(&self, tape: &'t Tape<T, D>, x: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        let mut h = x.clone();
        for layer in &self.layers {
            h = layer.forward(tape, &h)?;
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nn::{Activation, Init, Linear};
    use rlgrad_core::Rng;
    use rlgrad_tensor::Tensor;

    #[test]
    fn forward_is_the_layers_in_order_and_errors_name_the_layer() -> Result<()> {
        let mut rng = Rng::new(3, "init");
        let l1 = Linear::<f64>::new("a", 3, 4, Init::TorchDefault, &mut rng)?;
        let l2 = Linear::<f64>::new("b", 4, 2, Init::TorchDefault, &mut rng)?;
        let net = Sequential::new()
            .push(l1.clone())
            .push(Activation::Tanh)
            .push(l2.clone());
        let tape = Tape::new().no_grad();
        let x = tape.constant(&Tensor::rand_normal([5, 3], 0.0, 1.0, &mut rng)?);
        let by_hand = l2.forward(&tape, &l1.forward(&tape, &x)?.tanh()?)?;
        let y = net.forward(&tape, &x)?;
        let bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect::<Vec<_>>();
        assert_eq!(bits(y.to_vec()?), bits(by_hand.to_vec()?));
        let empty = Sequential::<f64>::new();
        assert_eq!(empty.forward(&tape, &x)?.to_vec()?, x.to_vec()?);
        let wrong = tape.constant(&Tensor::zeros([5, 7])?);
        let err = net.forward(&tape, &wrong).unwrap_err().to_string();
        assert!(
            err.contains("layer \"a\" expects 3 input features"),
            "{err}"
        );
        Ok(())
    }
}
