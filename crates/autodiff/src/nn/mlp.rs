//! Multi-layer perceptrons.

use rlgrad_core::kernels::RandomKernel;
use rlgrad_core::{Cpu, Device, Error, Float, Result, Rng};
use rlgrad_tensor::TensorDevice;

use super::{Activation, Forward, Init, Linear, Module, child_path};
use crate::param::Param;
use crate::tape::{Tape, Var};

/// Dense layers with an activation between them: `sizes = [8, 64, 64, 1]` makes
/// `8 -> 64 -> 64 -> 1` with `hidden` after the first two layers and `output` after the
/// last. Layers are named `{name}/l1`, `{name}/l2`, ... (Fujimoto's TD3 names).
///
/// ```
/// use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module};
/// use rlgrad_autodiff::Tape;
/// use rlgrad_core::Rng;
/// use rlgrad_tensor::Tensor;
/// let actor = Mlp::<f32>::new("actor", &[17, 400, 300, 6], Activation::Relu, Activation::Tanh,
///                             Init::TorchDefault, &mut Rng::new(0, "init"))?;
/// assert_eq!(actor.num_parameters(), 17 * 400 + 400 + 400 * 300 + 300 + 300 * 6 + 6);
/// assert_eq!(actor.parameters()[2].name(), "actor/l2/weight");
/// let tape = Tape::new().no_grad();
/// let a = actor.forward(&tape, &tape.constant(&Tensor::zeros([2, 17])?))?;
/// assert_eq!(a.dims(), &[2, 6]);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Mlp<T: Float = f32, D: Device = Cpu> {
    layers: Vec<Linear<T, D>>,
    hidden: Activation,
    output: Activation,
}

impl<T: Float> Mlp<T, Cpu> {
    /// An MLP on the default [`Cpu`].
    pub fn new(
        name: &str,
        sizes: &[usize],
        hidden: Activation,
        output: Activation,
        init: Init,
        rng: &mut Rng,
    ) -> Result<Self> {
        Self::new_on(&Cpu::default(), name, sizes, hidden, output, init, rng)
    }
}

impl<T: Float, D: Device> Mlp<T, D> {
    /// An MLP on `device`. An error for fewer than two sizes or a zero size.
    pub fn new_on(
        device: &D,
        name: &str,
        sizes: &[usize],
        hidden: Activation,
        output: Activation,
        init: Init,
        rng: &mut Rng,
    ) -> Result<Self>
    where
        D: RandomKernel<T>,
    {
        if sizes.len() < 2 {
            return Err(Error::shape(
                "Mlp::new",
                "sizes",
                "at least an input and an output size",
                format_args!("{sizes:?}"),
            ));
        }
        // Every layer's size is checked before the first one allocates.
        for pair in sizes.windows(2) {
            rlgrad_core::check::product("Mlp::new", "sizes", pair[0], pair[1])?;
        }
        let layers = sizes
            .windows(2)
            .enumerate()
            .map(|(i, pair)| {
                Linear::new_on(
                    device,
                    &format!("{name}/l{}", i + 1),
                    pair[0],
                    pair[1],
                    init,
                    rng,
                )
            })
            .collect::<Result<Vec<_>>>()
            .map_err(|e| e.in_function("Mlp::new"))?;
        Ok(Self {
            layers,
            hidden,
            output,
        })
    }

    /// The layers.
    pub fn layers(&self) -> &[Linear<T, D>] {
        &self.layers
    }

    /// The layers, mutably (to set regularizers, say).
    pub fn layers_mut(&mut self) -> &mut [Linear<T, D>] {
        &mut self.layers
    }
}

impl<T: Float, D: Device> Module<T, D> for Mlp<T, D> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<T, D>)) {
        for layer in &self.layers {
            layer.visit(f);
        }
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<T, D>)) {
        for layer in &mut self.layers {
            layer.visit_mut(f);
        }
    }
    /// `prefix/l1/weight`, `prefix/l1/bias`, `prefix/l2/weight`, ... (the layer names of
    /// [`Mlp::new`]).
    fn visit_named<'a>(&'a self, prefix: &str, f: &mut dyn FnMut(&str, &'a Param<T, D>)) {
        for (i, layer) in self.layers.iter().enumerate() {
            layer.visit_named(&child_path(prefix, &format!("l{}", i + 1)), f);
        }
    }
    fn visit_named_mut<'a>(
        &'a mut self,
        prefix: &str,
        f: &mut dyn FnMut(&str, &'a mut Param<T, D>),
    ) {
        for (i, layer) in self.layers.iter_mut().enumerate() {
            layer.visit_named_mut(&child_path(prefix, &format!("l{}", i + 1)), f);
        }
    }
}

impl<T: Float, D: TensorDevice<T>> Forward<T, D> for Mlp<T, D> {
    #[track_caller]
    fn forward<'t>(&self, tape: &'t Tape<T, D>, x: &Var<'t, T, D>) -> Result<Var<'t, T, D>> {
        let last = self.layers.len() - 1;
        let mut h = x.clone();
        for (i, layer) in self.layers.iter().enumerate() {
            let activation = if i == last { self.output } else { self.hidden };
            h = layer.forward_activated(tape, &h, activation)?;
        }
        Ok(h)
    }
}
