//! rlgrad-examples's integration tests, one module per file, in one binary: each test
//! binary compiles and links its own copy of the generic kernels, so one binary instead
//! of one per file saves most of the tests' build time.

mod determinism;
mod device;
mod padding;
mod ppo_dist;
mod ppo_dist_resume;
