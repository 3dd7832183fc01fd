//! Persistent, named parameters.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rlgrad_core::{Cpu, Device, Error, Float, Result, Shape};
use rlgrad_tensor::{Tensor, TensorDevice};

/// The identity of a [`Param`]: unique in the process, so that a tape can tell two
/// parameters with equal names apart (a network and its target copy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParamId(u64);

impl ParamId {
    fn fresh() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// A trainable tensor with a stable, hierarchical name (`"actor/l1/weight"`): the name
/// is what optimizers, checkpoints and target-network updates match on.
///
/// A parameter outlives tapes: [`crate::Tape::param`] puts it on a tape for one step,
/// and an optimizer updates its value in place between steps
/// ([`crate::ApplyGradients`]). Cloning a parameter (or a module) makes a new
/// parameter with the same name and value but its own identity, which is what a target
/// network is.
///
/// ```
/// use rlgrad_autodiff::Param;
/// use rlgrad_tensor::Tensor;
/// let w = Param::new("critic/l1/weight", Tensor::<f32>::zeros([3, 2])?)?;
/// let target = w.clone();
/// assert_eq!((w.name(), w.value().dims()), ("critic/l1/weight", &[3, 2][..]));
/// assert_ne!(w.id(), target.id());
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
pub struct Param<T: Float = f32, D: Device = Cpu> {
    id: ParamId,
    name: Arc<str>,
    value: Tensor<T, D>,
    l2: Option<f64>,
}

impl<T: Float, D: Device> Param<T, D> {
    /// A parameter named `name` holding `value`. An error for an empty name.
    pub fn new(name: impl Into<String>, value: Tensor<T, D>) -> Result<Self> {
        let name = name.into();
        if name.is_empty() {
            return Err(Error::value(
                "Param::new",
                "name",
                "a non-empty name",
                "\"\"",
            ));
        }
        Ok(Self {
            id: ParamId::fresh(),
            name: name.into(),
            value,
            l2: None,
        })
    }

    /// The identity.
    pub fn id(&self) -> ParamId {
        self.id
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Renames the parameter ([`crate::nn::Module::name_by_path`]; the caller checked
    /// that `name` is not empty).
    pub(crate) fn set_name(&mut self, name: String) {
        self.name = name.into();
    }

    pub(crate) fn shared_name(&self) -> &Arc<str> {
        &self.name
    }

    /// The current value.
    pub fn value(&self) -> &Tensor<T, D> {
        &self.value
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        self.value.shape()
    }

    /// The coefficient `c` of this parameter's L2 penalty `c * sum(w^2)` (Keras'
    /// `kernel_regularizer=l2(c)`), if it has one; [`crate::nn::l2_penalty`] collects them.
    pub fn l2(&self) -> Option<f64> {
        self.l2
    }

    /// Sets the L2 penalty coefficient (`None`: no penalty). An error for a negative or
    /// non-finite coefficient.
    pub fn set_l2(&mut self, coefficient: Option<f64>) -> Result<()> {
        if let Some(c) = coefficient {
            rlgrad_core::check::non_negative("Param::set_l2", "coefficient", c)?;
        }
        self.l2 = coefficient;
        Ok(())
    }

    /// Replaces the value; an error when the shape differs (a parameter keeps its shape,
    /// so that optimizer state and checkpoints stay valid).
    pub fn set_value(&mut self, value: Tensor<T, D>) -> Result<()> {
        if value.shape() != self.value.shape() {
            return Err(Error::shape(
                "Param::set_value",
                "value",
                format_args!("a tensor of shape {} for `{}`", self.shape(), self.name),
                value.shape(),
            ));
        }
        self.value = value;
        Ok(())
    }

    /// The value's dense buffer for an in-place update (copy on write: a tape that
    /// recorded the old value keeps it), with the name borrowed beside it.
    pub(crate) fn name_and_buffer(&mut self) -> Result<(&str, &mut D::Buffer<T>)>
    where
        D: TensorDevice<T>,
    {
        Ok((&self.name, self.value.make_mut()?))
    }
}

impl<T: Float, D: Device> Clone for Param<T, D> {
    fn clone(&self) -> Self {
        Self {
            id: ParamId::fresh(),
            name: Arc::clone(&self.name),
            value: self.value.clone(),
            l2: self.l2,
        }
    }
}

impl<T: Float, D: Device> fmt::Debug for Param<T, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Param")
            .field("name", &self.name)
            .field("shape", self.value.shape())
            .field("l2", &self.l2)
            .finish()
    }
}
