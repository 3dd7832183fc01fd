//! rlgrad-core's integration tests, one module per file, in one binary: each test
//! binary compiles and links its own copy of the generic kernels, so one binary instead
//! of one per file saves most of the tests' build time.
//!
//! Kept apart: `golden`, which caps the process-wide instruction set while it runs.

mod kernel_outputs;
mod no_panics;
mod reduce_conformance;
