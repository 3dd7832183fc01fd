//! rlgrad-cuda's integration tests, one module per file, in one binary: each test
//! binary compiles and links its own copy of the generic kernels, so one binary instead
//! of one per file saves most of the tests' build time.
//!
//! Kept apart: `golden`, the cross-device golden test the GPU runner reports on its own.

mod capture;
#[path = "../common/mod.rs"]
mod common;
mod edges;
mod generic;
mod host_math;
mod kernels;
mod ptx;
