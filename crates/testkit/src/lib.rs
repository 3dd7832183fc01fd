//! rlgrad-testkit: what the workspace's tests share, as a dev-dependency.
//!
//! - [`golden`]: the cross-device golden test: fixed inputs through every kernel family
//!   of the device traits, the bits of every output hashed, and the committed hashes
//!   every device (the Cpu at every instruction set, thread count and ISA, and Cuda) must
//!   give;
//! - [`strategies`]: proptest strategies for shapes, edge-case floats and ragged lengths,
//!   a case count that `cargo xtask proptest --cases N` raises, and the runners that call
//!   a test at every instruction set and thread split ([`strategies::every_isa_and_split`])
//!   or in thread pools of given sizes ([`strategies::in_thread_pools`]).
//!
//! It is not published: test support lives here rather than behind features of
//! `rlgrad-core`, so that core (and every crate above it) is compiled once per profile in
//! the whole build, whichever crates' tests run.

#![forbid(unsafe_code)]

pub mod golden;
pub mod strategies;
