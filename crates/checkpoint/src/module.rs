//! `rlgrad_autodiff` modules in checkpoints (feature `autodiff`): every parameter under
//! its own name, matched by name on restore.

use rlgrad_autodiff::Param;
use rlgrad_autodiff::nn::Module;
use rlgrad_core::{Float, Result};
use rlgrad_tensor::{Tensor, TensorDevice};

use crate::checkpoint::Checkpoint;
use crate::dtype::Scalar;
use crate::restore::Restore;
use crate::tensor::{TensorSlot, TensorTarget};

/// `prefix/name`, or `name` for an empty prefix.
fn entry_name(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_owned()
    } else {
        format!("{prefix}/{name}")
    }
}

impl Checkpoint {
    /// Stores every parameter of `module` under `prefix/` and its name (`actor/l1/weight`
    /// for the parameter `l1/weight` and the prefix `actor`; the name alone for an empty
    /// prefix). Errors as [`Checkpoint::put`] (a name stored twice among them).
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
    /// checkpoint.put_module("", &actor)?;
    /// assert!(checkpoint.contains("actor/l2/bias"));
    ///
    /// let mut fresh = Mlp::<f32>::new("actor", &[3, 8, 2], Activation::Relu, Activation::Tanh,
    ///                                 Init::TorchDefault, &mut Rng::new(1, "init"))?;
    /// let mut plan = Restore::new();
    /// plan.module("", &mut fresh);
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
        self.put_params(|put| module.visit(&mut |p| put(&entry_name(prefix, p.name()), p)))
    }

    /// Stores every parameter of `module` under `prefix/` and its path in the module
    /// ([`Module::visit_named`]: `actor_target/l1/weight` for the field `l1` of a
    /// derived module), so that a module and its target copy, whose parameters share
    /// their names, are told apart by where they are. What `#[derive(State)]` calls for a
    /// `#[state(module)]` field. Errors as [`Checkpoint::put`].
    pub fn put_module_by_path<T, D>(
        &mut self,
        prefix: &str,
        module: &(impl Module<T, D> + ?Sized),
    ) -> Result<()>
    where
        T: Float + Scalar,
        D: TensorDevice<T>,
    {
        self.put_params(|put| module.visit_named(prefix, put))
    }

    /// Stores each parameter that `visit` hands over under the name it comes with; the
    /// first error stops the storing.
    fn put_params<T, D>(
        &mut self,
        visit: impl FnOnce(&mut dyn FnMut(&str, &Param<T, D>)),
    ) -> Result<()>
    where
        T: Float + Scalar,
        D: TensorDevice<T>,
    {
        let mut result = Ok(());
        visit(&mut |name, p| {
            if result.is_ok() {
                result = self.put_tensor(name, p.value());
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

impl<'a> Restore<'a> {
    /// Every parameter of `module` from the entry named as [`Checkpoint::put_module`]
    /// stores it (same prefix), checked like every target: dtype and shape must match, and
    /// a parameter without an entry is missing.
    pub fn module<T, D>(
        &mut self,
        prefix: &str,
        module: &'a mut (impl Module<T, D> + ?Sized),
    ) -> &mut Self
    where
        T: Float + Scalar,
        D: TensorDevice<T>,
    {
        let mut params: Vec<&'a mut Param<T, D>> = Vec::new();
        module.visit_mut(&mut |p| params.push(p));
        for param in params {
            let name = entry_name(prefix, param.name());
            self.push(TensorTarget {
                name,
                slot: param,
                staged: None,
            });
        }
        self
    }

    /// Every parameter of `module` from the entry named as
    /// [`Checkpoint::put_module_by_path`] stores it (same prefix), checked as
    /// [`Restore::module`] checks.
    pub fn module_by_path<T, D>(
        &mut self,
        prefix: &str,
        module: &'a mut (impl Module<T, D> + ?Sized),
    ) -> &mut Self
    where
        T: Float + Scalar,
        D: TensorDevice<T>,
    {
        module.visit_named_mut(prefix, &mut |path, param| {
            self.push(TensorTarget {
                name: path.to_owned(),
                slot: param,
                staged: None,
            });
        });
        self
    }
}
