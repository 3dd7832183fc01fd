//! rlgrad-checkpoint: crash-safe training checkpoints in the safetensors format.
//!
//! - [`Checkpoint`]: named tensors (`f32`, `f64` and integer types, [`Scalar`]) under
//!   hierarchical names (`actor/l1/weight`), exact `u64` step counters, RNG stream
//!   positions ([`Checkpoint::put_rng`]) and string metadata (environment step, wall
//!   time, a JSON config), saved atomically as a [safetensors] file that
//!   `safetensors.numpy.load_file` and `safetensors.torch.load_file` open as they are.
//! - [`Restore`]: a plan of where every stored tensor goes. [`Checkpoint::restore`]
//!   matches by name, never by position, checks every name, dtype and shape first, and
//!   what each target's owner accepts (an optimizer's hyper-parameters), and reports all
//!   mismatches in one error; missing and extra entries are errors unless the plan allows
//!   them.
//! - [`State`]: a value's whole state under a prefix, restored through a plan; with
//!   feature `derive`, `#[derive(State)]` for a struct of them, so that an agent
//!   (networks, targets, optimizers, buffers, environments, counters, random streams) is
//!   saved by [`Checkpoint::from_state`] and restored by [`Checkpoint::restore_state`].
//! - [`CheckpointManager`]: numbered checkpoints in a directory, the newest `max_to_keep`
//!   kept, [`latest`](CheckpointManager::latest), and
//!   [`restore_latest`](CheckpointManager::restore_latest) that resumes after a crash
//!   (even one in the middle of a save).
//! - Feature `optim`: optimizer slots and step counters through rlgrad-optim's state
//!   export (`Checkpoint::put_optimizer`, `Restore::optimizer`), slots stored as tensors
//!   `PREFIX/PARAM/SLOT` in the shape of the parameter stored under `PARAM`.
//! - Feature `tensor`: `rlgrad_tensor::Tensor`s directly (`Checkpoint::put_tensor`,
//!   `Restore::tensor`).
//! - Feature `autodiff`: every parameter of an `rlgrad_autodiff` module under a prefix and
//!   its path in the module (`Checkpoint::put_module`, `Restore::module`):
//!   `put_module("policy", &policy)` stores `policy/l1/weight`.
//! - Feature `torch`: PyTorch `state_dict`s written by `safetensors.torch.save_file` into
//!   autodiff modules and back (`Checkpoint::load_torch_module`, `Restore::torch_module`,
//!   `Checkpoint::put_torch_module`, `TorchNames`), `Linear` weights transposed, keys
//!   mapped by prefix rules; see the `torch` module for the layouts and for why it lives
//!   here.
//!
//! # Example
//!
//! ```
//! use rlgrad_checkpoint::{Checkpoint, Restore};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("run.safetensors");
//! let weight = vec![0.25f32, -1.5, 3.0, 0.0];
//! let mut checkpoint = Checkpoint::new();
//! checkpoint.put("actor/l1/weight", &[2, 2], &weight)?;
//! checkpoint.put_scalar("progress/env_step", 40_000u64)?;
//! checkpoint.set_metadata("wall_time", "1718000000.25")?;
//! checkpoint.save(&path)?;
//!
//! let (mut restored, mut env_step) = (vec![0.0f32; 4], 0u64);
//! let mut plan = Restore::new();
//! plan.slice("actor/l1/weight", &[2, 2], &mut restored)
//!     .scalar("progress/env_step", &mut env_step);
//! let loaded = Checkpoint::load(&path)?;
//! loaded.restore(plan)?;
//! assert_eq!((restored, env_step), (weight, 40_000));
//! assert_eq!(loaded.metadata("wall_time"), Some("1718000000.25"));
//! # Ok::<(), rlgrad_core::Error>(())
//! ```
//!
//! # Guarantees
//!
//! - Round trips are bit-identical: values are stored as their little-endian bytes (NaN
//!   payloads and signed zeros included), counters as integers, RNG positions as exact
//!   integers, so a run resumed from a checkpoint continues with the same bits as one
//!   that never stopped.
//! - Saves are atomic: a temporary file in the same directory is written, fsynced and
//!   renamed over the target, and the directory is fsynced. A crash or a kill at any
//!   instant leaves the previous checkpoint or the new one, complete.
//! - Files are verified: every file rlgrad writes holds CRC32C checksums of each tensor
//!   and of its header, checked when it is read, so that a file with any byte changed
//!   anywhere in it is refused by [`Checkpoint::load`] with an error naming the file (and
//!   the tensor, for tensor data), never restored; files without checksums (Python's
//!   `safetensors`, older rlgrad) load unverified, as [`Checkpoint::is_verified`] reports.
//! - Bad input is an [`Error`], never a panic: truncated, corrupted or
//!   foreign files, unsupported dtypes, wrong shapes and dtypes, unwritable directories
//!   ([`Error::Io`] names the file and the operating system's
//!   reason). A failed restore writes nothing.
//!
//! [safetensors]: https://huggingface.co/docs/safetensors

#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod atomic;
mod checkpoint;
mod dtype;
mod manager;
#[cfg(feature = "autodiff")]
mod module;
#[cfg(feature = "optim")]
mod optim;
mod restore;
mod state;
#[cfg(feature = "tensor")]
mod tensor;
#[cfg(feature = "torch")]
pub mod torch;

pub use checkpoint::{Checkpoint, TensorInfo};
pub use dtype::{Dtype, Scalar};
pub use manager::{CheckpointManager, Saved};
pub use restore::Restore;
/// `#[derive(State)]` (feature `derive`): see [`State`].
#[cfg(feature = "derive")]
pub use rlgrad_derive::State;
pub use state::{State, restore_resized, state_path};

pub use rlgrad_core::{Error, Result};
#[cfg(feature = "torch")]
pub use torch::TorchNames;

/// The README's examples, compiled and run as doctests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
