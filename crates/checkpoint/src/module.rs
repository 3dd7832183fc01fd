//! `rlgrad_autodiff` modules in checkpoints (feature `autodiff`): every parameter under
//! its path in the module, matched by name on restore.

use rlgrad_autodiff::Param;
use rlgrad_autodiff::nn::{Module, child_path};
use rlgrad_core::{Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::checkpoint::Checkpoint;
use crate::dtype::Scalar;
use crate::restore::{Report, Restore, Target};
use crate::tensor::{TensorSlot, TensorTarget};

impl Checkpoint {
    /// Stores every parameter of `module` under `prefix/` and its path in the module
    /// ([`Module::visit_named`], PyTorch's `state_dict` keys with `/`):
    /// `put_module("policy", &policy)` stores `policy/l1/weight` for the first layer of an
    /// [`Mlp`](rlgrad_autodiff::nn::Mlp), whatever name the network was built with, and
    /// `policy/l1/weight` is also where `#[derive(State)]` puts a `#[state(module)]`
    /// field named `policy`. A module and its target copy, whose parameters share their
    /// names, are told apart by their prefixes. Errors as [`Checkpoint::put`] (a name
    /// stored twice among them).
    ///
    /// ```
    /// use rlgrad_autodiff::nn::{Activation, Init, Mlp, Module};
    /// use rlgrad_checkpoint::{Checkpoint, Restore};
    /// use rlgrad_core::Rng;
    ///
    /// let mut rng = Rng::new(0, "init");
    /// let actor = Mlp::<f32>::new("actor", &[3, 8, 2], Activation::Relu, Activation::Tanh,
    ///                             Init::TorchDefault, &mut rng)?;
    /// let mut checkpoint = Checkpoint::new();
    /// checkpoint.put_module("actor", &actor)?;
    /// checkpoint.put_module("actor_target", &actor.clone())?;
    /// assert!(checkpoint.contains("actor/l2/bias"));
    /// assert!(checkpoint.contains("actor_target/l2/bias"));
    ///
    /// let mut fresh = Mlp::<f32>::new("actor", &[3, 8, 2], Activation::Relu, Activation::Tanh,
    ///                                 Init::TorchDefault, &mut Rng::new(1, "init"))?;
    /// let mut plan = Restore::new();
    /// plan.allow_extra(true).module("actor", &mut fresh);
    /// checkpoint.restore(plan)?;
    /// assert_eq!(fresh.parameters()[0].value().to_vec()?, actor.parameters()[0].value().to_vec()?);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn put_module<T, D>(
        &mut self,
        prefix: &str,
        module: &(impl Module<T, D> + ?Sized),
    ) -> Result<()>
    where
        T: Float + Scalar,
        D: TensorDevice<T>,
    {
        let mut result = Ok(());
        module.visit_named(prefix, &mut |path, p| {
            if result.is_ok() {
                result = self.put_tensor(path, p.value());
            }
        });
        result
    }
}

impl<T: Float + Scalar, D: TensorDevice<T>> TensorSlot for &mut Param<T, D> {
    type Element = T;
    type Device = D;
    fn current(&self) -> &Tensor<T, D> {
        self.value()
    }
    fn replace(&mut self, value: Tensor<T, D>) {
        self.set_value(value)
            .expect("a value of the parameter's own shape, on its device");
    }
}

/// A parameter restored from the entry at its path, or, in a file that has no entry
/// there, from `prefix/NAME` (its own name), where `put_module` stored it before it
/// stored paths: so that those files still restore.
struct ParamTarget<'a, T: Float + Scalar, D: TensorDevice<T>> {
    target: TensorTarget<&'a mut Param<T, D>>,
    former_name: String,
}

impl<T: Float + Scalar, D: TensorDevice<T>> Target for ParamTarget<'_, T, D> {
    fn name(&self) -> &str {
        self.target.name()
    }

    fn check(&mut self, checkpoint: &Checkpoint, report: &mut Report) {
        if !checkpoint.contains(&self.target.name) && checkpoint.contains(&self.former_name) {
            self.target.name = std::mem::take(&mut self.former_name);
        }
        self.target.check(checkpoint, report);
    }

    fn prepare(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        self.target.prepare(checkpoint)
    }

    fn apply(self: Box<Self>, checkpoint: &Checkpoint) {
        Box::new(self.target).apply(checkpoint);
    }
}

impl<'a> Restore<'a> {
    /// Every parameter of `module` from the entry [`Checkpoint::put_module`] stores it
    /// under (same prefix: `prefix/PATH`), checked like every target: dtype and shape
    /// must match, and a parameter without an entry is missing. A checkpoint written
    /// when `put_module` stored parameters under `prefix/NAME` (their names, which
    /// doubled the prefix of `put_module("policy", &policy)` into
    /// `policy/policy/l1/weight`) restores too: a parameter whose path is not stored is
    /// read from that name.
    pub fn module<T, D>(
        &mut self,
        prefix: &str,
        module: &'a mut (impl Module<T, D> + ?Sized),
    ) -> &mut Self
    where
        T: Float + Scalar,
        D: TensorDevice<T>,
    {
        module.visit_named_mut(prefix, &mut |path, param| {
            let former_name = child_path(prefix, param.name());
            self.push(ParamTarget {
                target: TensorTarget {
                    name: path.to_owned(),
                    slot: param,
                    staged: None,
                },
                former_name,
            });
        });
        self
    }
}
