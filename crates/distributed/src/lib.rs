//! rlgrad-dist: data-parallel training whose gradients and statistics are bit-identical
//! for any number of workers, and to gradient accumulation on one worker.
//!
//! - [`Collective`]: the few collectives the reductions need (all-gather, all-to-all with
//!   sizes free per rank, broadcast, barrier, rank and size), over bytes; backends move
//!   bytes and never add floats. The large reductions use its packed forms
//!   ([`Collective::all_to_all_packed`], [`Collective::all_gather_packed`], returning a
//!   [`Packed`]), which send an owned buffer as it is and receive into one allocation.
//! - Backends: [`Local`] (workers as threads of one process, on std channels, with a
//!   timeout that turns a dead worker into an error naming its rank)
#![cfg_attr(
    feature = "mpi",
    doc = "  and [`Mpi`] (the system MPI through rsmpi, feature `mpi`, with a timeout too)."
)]
#![cfg_attr(
    not(feature = "mpi"),
    doc = "  and `Mpi` (the system MPI through rsmpi, behind the feature `mpi`, with a timeout too;",
    doc = "  these docs were built without it: `cargo doc -p rlgrad-dist --features mpi` documents",
    doc = "  it where MPI is installed)."
)]
//! - [`all_reduce`] and [`GradientReducer`]: the canonical sum over microbatches; the
//!   reducer works on a named parameter list, checks at the first step that every rank
//!   has the same one ([`check_same_params`]), and returns gradients by name for
//!   `rlgrad_optim::Optimizer::step`.
//! - [`global_sum`], [`global_mean`], [`global_mean_var`], [`global_standardize`],
//!   [`global_explained_variance`]: the statistics RL needs across workers (advantage
//!   normalization, explained variance, episode-return means), bitwise the
//!   single-process functions on the concatenated data.
//! - [`params_fingerprint`]: a stable hash of parameter bits, to compare runs.
//!
//! # The canonical tree, and why any world size gives the same bits
//!
//! The global batch is split into `M` microbatches by a microbatch size the user picks,
//! independently of the world size `W`. Their gradients `g_0 .. g_{M-1}` are summed in one
//! fixed binary tree over the microbatch index, the tree of rlgrad-core's canonical
//! reductions ([`rlgrad_core::reduce::tree_reduce`]): the node over `[lo, hi)` is
//! `S(lo, lo + p) + S(lo + p, hi)`, `p` the largest power of two below `hi - lo`, a leaf is
//! `S(i, i + 1) = g_i`. For `M` a power of two it is the balanced tree; for other `M` it is
//! the balanced trees of the binary digits of `M`, largest first, joined right to left
//! (`M = 6`: `(g0+g1)+(g2+g3)` plus `g4+g5`). Additions are element by element.
//!
//! With `W` workers, rank `r` owns the contiguous microbatches
//! [`owned_range`]`(M, W, r)` and computes their gradients. It evaluates the maximal nodes
//! of the tree that lie inside its range ([`subtree_roots`]: complete subtrees, one when
//! the range is aligned, at most two per level, so `O(log M)`, when it is not). The roots of
//! all ranks partition `0..M` into nodes of the tree. The parameter vector of length `P` is
//! cut into `W` contiguous shards; an all-to-all sends shard `k` of every root to rank `k`,
//! which evaluates the tree above the roots for its shard, in the canonical order; an
//! all-gather returns the whole reduced vector to every rank.
//!
//! **Argument.** Every node of the tree is `left + right` of its two children, and by
//! induction on the height its value depends only on the leaves below it and on the tree's
//! shape, not on which rank computed it: a node inside one rank's range is computed there
//! from the same two children as anywhere else; a node above the roots is computed by a
//! shard owner from the same two children (the roots, or nodes computed from them); the
//! additions are element-wise, so cutting the vector into shards changes no addition. The
//! tree depends on `M` alone, so the root (the sum) has the same bits for every `W`,
//! including `W = 1`, where the one rank owns everything: that is plain gradient
//! accumulation in the canonical order. Nothing here needs `W` to divide `M` or `M` to be a
//! power of two. Scaling (the mean, [`Scale::Mean`]) happens once, after the root.
//!
//! **Cost.** Compute: `M - 1` vector additions in all, as for any summation. Traffic per
//! rank with `R` roots: `R * P * (W - 1) / W` values out in the all-to-all and
//! `P * (W - 1) / W` in the all-gather; an aligned range (`R = 1`, e.g. `W` a power of two
//! dividing `M`) gives about `2P`, what a ring all-reduce sends; an unaligned one sends up
//! to `2 log2(M)` roots' shards. Memory: the rank keeps at most `log2` of its microbatch
//! count partial sums while it computes, and its roots. Latency: two collectives per step
//! (three at the first, which checks the parameter lists; none at `W = 1`). Short vectors (statistics)
//! travel whole in one all-gather instead; the bits are the same. Measured beside
//! `MPI_Allreduce` and PyTorch DDP (`cargo xtask compare --only D1`): the crate README.
//!
//! The statistics ([`global_mean_var`] and the others) apply the same argument to the leaves of
//! rlgrad-core's canonical sum (64 elements, 16 lanes) instead of microbatches; see
//! [`global_sum`].
//!
//! # Launching
//!
//! One machine, threads: [`Local::run`]. With MPI (feature `mpi`), one process per rank:
//! `mpirun -np 4 target/release/my_trainer` on one machine (`--oversubscribe` when there
//! are fewer cores than ranks); on a cluster, `mpirun -np 64 --hostfile hosts ...` or,
//! under Slurm, `srun -N 8 --ntasks-per-node=8 target/release/my_trainer` (Open MPI built
//! with Slurm support, as Debian's is). On GPUs (feature `nccl`), one rank per GPU:
//! `Nccl::local` for threads, `Nccl::from_mpi` (features `mpi` and `nccl`) for one
//! process per GPU under `mpirun` or `srun -N 4 --ntasks-per-node=8 --gpus-per-node=8`,
//! or `Nccl::join` with an `NcclId` handed out by any other launcher. Seed every
//! environment and sampler by its global index, never by rank, so that the data does not
//! depend on `W`.
//!
//! # Guarantees
//!
//! For the same microbatch gradients, every rank of every world size gets the same bits,
//! equal to the single-worker accumulation; the statistics equal the single-process
//! functions on the concatenated data. Public functions return [`rlgrad_core::Error`]: bad
//! arguments name the function and the argument; backend failures (a dead or stalled rank,
//! ranks that call different collectives or reduce different shapes) are errors naming
//! the rank, within the backend's timeout, never a silent reduction of unrelated buffers.
//!
//! # Example
//!
//! ```
//! use rlgrad_dist::{GradientReducer, Local, ParamSpec, Scale};
//! use std::time::Duration;
//!
//! // 10 microbatches whose gradients the ranks compute; any W gives the same bits.
//! let gradient = |i: usize| vec![vec![(i as f32).sin(), 1.0 / (1.0 + i as f32)]];
//! let train = |workers: usize| -> rlgrad_core::Result<Vec<f32>> {
//!     let per_rank = Local::run(workers, Duration::from_secs(30), |comm| {
//!         let mut reducer = GradientReducer::new(vec![ParamSpec::new("w", [2])], 10, Scale::Mean)?;
//!         Ok(reducer.reduce(comm, |i| Ok(gradient(i)))?.as_flat().to_vec())
//!     })?;
//!     Ok(per_rank[0].clone())
//! };
//! let one = train(1)?;
//! for workers in [2, 3, 4, 7] {
//!     let bits = |g: &[f32]| g.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
//!     assert_eq!(bits(&train(workers)?), bits(&one));
//! }
//! # Ok::<(), rlgrad_core::Error>(())
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

mod collective;
mod grads;
mod local;
#[cfg(feature = "mpi")]
mod mpi_backend;
#[cfg(feature = "nccl")]
mod nccl_backend;
mod params;
mod reduce;
mod stats;
mod tree;

pub use collective::{Collective, Packed};
pub use grads::{GradientReducer, ReducedGradients, Scale};
pub use local::Local;
#[cfg(feature = "mpi")]
pub use mpi_backend::Mpi;
#[cfg(feature = "nccl")]
pub use nccl_backend::{Nccl, NcclId};
pub use params::{ParamSpec, check_same_params, params_fingerprint};
pub use reduce::all_reduce;
pub use rlgrad_core::Fingerprint;
pub use rlgrad_core::{DType, Error, Result};
pub use stats::{
    global_explained_variance, global_mean, global_mean_var, global_standardize, global_sum,
};
pub use tree::{owned_range, subtree_roots};

/// The README's examples, compiled and run as doctests so that the README stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
