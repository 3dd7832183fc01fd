//! rlgrad-autodiff's integration tests, one module per file, in one binary: each test
//! binary compiles and links its own copy of the generic kernels, so one binary instead
//! of one per file saves most of the tests' build time.
//!
//! Kept apart, each its own binary: `allocations` (a counting global allocator) and
//! `golden` (it caps the process-wide instruction set while it runs).

mod derive;
mod gradients;
mod huge_sizes;
mod narrow;
mod non_finite;
mod operators;
#[path = "../common/padded.rs"]
mod padded;
mod padding;
mod recurrent;
mod stacked;
mod stacked_parity;
mod tape;
