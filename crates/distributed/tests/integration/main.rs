//! rlgrad-dist's integration tests, one module per file, in one binary: each test
//! binary compiles and links its own copy of the generic kernels, so one binary instead
//! of one per file saves most of the tests' build time.
//!
//! Kept apart: `mpi`, `mpi_timeout`, `nccl_mpi` (harnesses of their own, run under
//! mpirun) and `nccl` (built only with the `nccl` feature).

#[path = "../common/mod.rs"]
mod common;
mod training;
mod world_size;
