//! [`State`]: a value a checkpoint holds under a prefix, and restores through a
//! [`Restore`] plan; the building block of a whole agent's checkpoint in one call.

use rlgrad_core::{Result, Rng};

use crate::checkpoint::Checkpoint;
use crate::dtype::Scalar;
use crate::restore::Restore;

/// A value whose whole state a [`Checkpoint`] holds: its entries are stored under a
/// prefix by [`State::save_state`] and put back through a [`Restore`] plan by
/// [`State::restore_state`], so that a struct of states (an agent: networks, target
/// networks, optimizers, replay buffer, environments, step counters, random streams)
/// saves and restores in one call and every check of the plan covers all of it at once.
///
/// Implemented for the [`Scalar`] types (a step counter under the prefix itself, shape
/// `[]`), `Vec`s of them (one tensor `[len]`), [`Rng`] (its
/// stream position), `Option<S>` (nothing for `None`), and behind features for
/// `rlgrad_optim::Optimizer` (`optim`) and `rlgrad_tensor::Tensor` (`tensor`). Other crates
/// implement it for their own types (`rlgrad-replay`'s buffer, `rlgrad-envs`'
/// environments). With feature `derive`, `#[derive(State)]` writes it for a struct:
/// each field under `prefix/field`, `#[state(module)]` for an autodiff module (every
/// parameter under its path, `Checkpoint::put_module`), `#[state(resize)]` for
/// a `Vec` restored at the stored length ([`restore_resized`]; a plain `Vec` keeps its
/// length and refuses another), `#[state(skip)]` for what is configuration rather than
/// state.
///
/// ```
/// use rlgrad_checkpoint::{Checkpoint, State};
/// use rlgrad_core::Rng;
///
/// #[derive(State)]
/// struct Learner {
///     updates: u64,
///     noise: Rng,
///     #[state(resize)]
///     episode_returns: Vec<f64>,
///     #[state(skip)]
///     batch_size: usize,
/// }
///
/// let mut learner = Learner {
///     updates: 12,
///     noise: Rng::new(1, "noise"),
///     episode_returns: vec![-180.5, -140.0],
///     batch_size: 64,
/// };
/// learner.noise.normal_f64();
/// let checkpoint = Checkpoint::from_state(&learner)?;
/// assert_eq!(checkpoint.names().collect::<Vec<_>>(), ["episode_returns", "noise", "updates"]);
///
/// let mut resumed = Learner {
///     updates: 0,
///     noise: Rng::new(1, "noise"),
///     episode_returns: Vec::new(),
///     batch_size: 64,
/// };
/// checkpoint.restore_state(&mut resumed)?;
/// assert_eq!((resumed.updates, &resumed.episode_returns), (12, &learner.episode_returns));
/// assert_eq!(resumed.noise.normal_f64(), learner.noise.normal_f64());
///
/// // A checkpoint that does not hold the whole state is refused, and nothing is written.
/// let mut partial = Checkpoint::new();
/// partial.put_scalar("updates", 40u64)?;
/// let message = partial.restore_state(&mut resumed).unwrap_err().to_string();
/// assert!(message.contains("`noise`: missing from the checkpoint"), "{message}");
/// assert_eq!(resumed.updates, 12);
/// # Ok::<(), rlgrad_core::Error>(())
/// ```
///
/// A field that is not a state is an error at the field, and so is an unknown attribute:
///
/// ```compile_fail,E0277
/// use rlgrad_checkpoint::State;
/// #[derive(State)]
/// struct Learner {
///     updates: u64,
///     batch_size: usize, // error: `usize: State` is not satisfied; needs `#[state(skip)]`
/// }
/// ```
///
/// ```compile_fail
/// use rlgrad_checkpoint::State;
/// #[derive(State)]
/// struct Learner {
///     #[state(skipp)] // error: unknown `state` attribute `skipp`; expected `skip`, `module` or `resize`
///     updates: u64,
/// }
/// ```
///
/// ```compile_fail
/// use rlgrad_checkpoint::State;
/// #[derive(State)]
/// struct Learner {
///     #[state(skip, resize)] // error: one of `skip`, `module` and `resize` per field
///     returns: Vec<f64>,
/// }
/// ```
pub trait State {
    /// Stores every entry of this value under `prefix` (`prefix/...`; a scalar or an RNG
    /// under `prefix` itself). Errors as [`Checkpoint::put`] (an empty or taken name).
    fn save_state(&self, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()>;

    /// Adds to `plan` a target for every entry [`State::save_state`] stores under
    /// `prefix`. Nothing is written before the plan is applied; `checkpoint` is the one
    /// the plan will be applied to, for values whose size is stored (a replay buffer's
    /// fill). An error when `checkpoint` cannot hold this value's state (a buffer saved
    /// with another capacity).
    fn restore_state<'a>(
        &'a mut self,
        prefix: &str,
        checkpoint: &Checkpoint,
        plan: &mut Restore<'a>,
    ) -> Result<()>;
}

/// `prefix/child`, or `child` alone for an empty prefix: where [`State`] implementations
/// put their parts (what `#[derive(State)]` calls for each field).
///
/// ```
/// assert_eq!(rlgrad_checkpoint::state_path("agent", "actor"), "agent/actor");
/// assert_eq!(rlgrad_checkpoint::state_path("", "actor"), "actor");
/// ```
pub fn state_path(prefix: &str, child: &str) -> String {
    if prefix.is_empty() {
        child.to_owned()
    } else {
        format!("{prefix}/{child}")
    }
}

impl<T: Scalar> State for T {
    fn save_state(&self, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()> {
        checkpoint.put_scalar(prefix, *self)
    }

    fn restore_state<'a>(
        &'a mut self,
        prefix: &str,
        _: &Checkpoint,
        plan: &mut Restore<'a>,
    ) -> Result<()> {
        plan.scalar(prefix, self);
        Ok(())
    }
}

impl State for Rng {
    fn save_state(&self, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()> {
        checkpoint.put_rng(prefix, self)
    }

    fn restore_state<'a>(
        &'a mut self,
        prefix: &str,
        _: &Checkpoint,
        plan: &mut Restore<'a>,
    ) -> Result<()> {
        plan.rng(prefix, self);
        Ok(())
    }
}

impl<S: State> State for Option<S> {
    fn save_state(&self, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()> {
        match self {
            Some(state) => state.save_state(prefix, checkpoint),
            None => Ok(()),
        }
    }

    fn restore_state<'a>(
        &'a mut self,
        prefix: &str,
        checkpoint: &Checkpoint,
        plan: &mut Restore<'a>,
    ) -> Result<()> {
        match self {
            Some(state) => state.restore_state(prefix, checkpoint, plan),
            None => Ok(()),
        }
    }
}

impl<T: Scalar> State for Vec<T> {
    fn save_state(&self, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()> {
        checkpoint.put(prefix, &[self.len()], self)
    }

    /// At the vector's own length, as a slice: a checkpoint of another length is refused
    /// (per-feature statistics of another observation size). A vector that grows between
    /// checkpoints (a log) is restored at the stored length by [`restore_resized`]
    /// (`#[state(resize)]`).
    fn restore_state<'a>(
        &'a mut self,
        prefix: &str,
        _: &Checkpoint,
        plan: &mut Restore<'a>,
    ) -> Result<()> {
        plan.slice(prefix, &[self.len()], self);
        Ok(())
    }
}

/// Restores `values`, saved by its [`State`] impl under `prefix`, at the length stored
/// in `checkpoint` (resized when the plan is applied): for a vector that grows between
/// checkpoints, such as a log of episode returns. What `#[derive(State)]` calls for a
/// `#[state(resize)]` field.
pub fn restore_resized<'a, T: Scalar>(
    values: &'a mut Vec<T>,
    prefix: &str,
    checkpoint: &Checkpoint,
    plan: &mut Restore<'a>,
) -> Result<()> {
    let len = match checkpoint.tensor_info(prefix) {
        Some(info) if info.shape.len() == 1 => info.shape[0],
        // The plan reports the entry as missing, or as of another shape.
        _ => values.len(),
    };
    plan.vec(prefix, &[len], values);
    Ok(())
}

impl Checkpoint {
    /// A checkpoint of `state`'s whole state (every entry at its own name, no prefix), for
    /// a struct of states; a single scalar, RNG or tensor needs a name: use
    /// [`Checkpoint::put_state`]. Errors as [`State::save_state`].
    pub fn from_state(state: &(impl State + ?Sized)) -> Result<Self> {
        let mut checkpoint = Self::new();
        checkpoint.put_state("", state)?;
        Ok(checkpoint)
    }

    /// Stores `state` under `prefix` ([`State::save_state`]).
    pub fn put_state(&mut self, prefix: &str, state: &(impl State + ?Sized)) -> Result<()> {
        state.save_state(prefix, self)
    }

    /// Restores `state` from this checkpoint, saved by [`Checkpoint::from_state`]: every
    /// entry must be `state`'s and every part of `state` stored, with its dtype and shape;
    /// otherwise one error lists every mismatch and nothing is written. For a part of a
    /// checkpoint, or one that may miss entries, build the plan yourself with
    /// [`Restore::state`].
    pub fn restore_state(&self, state: &mut (impl State + ?Sized)) -> Result<()> {
        let mut plan = Restore::new();
        plan.state("", self, state)?;
        self.restore(plan)
    }
}

impl<'a> Restore<'a> {
    /// Adds the targets of `state`, stored under `prefix` in `checkpoint`
    /// ([`State::restore_state`]). Apply the plan to the same `checkpoint`.
    pub fn state(
        &mut self,
        prefix: &str,
        checkpoint: &Checkpoint,
        state: &'a mut (impl State + ?Sized),
    ) -> Result<&mut Self> {
        state.restore_state(prefix, checkpoint, self)?;
        Ok(self)
    }
}
