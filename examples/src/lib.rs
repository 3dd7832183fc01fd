//! rlgrad-examples: four agents trained end to end with rlgrad's crates, as library
//! modules that the examples (`cargo run --release --example ...`), the tests and
//! `cargo xtask demo` share.
//!
//! | module | agent | environment | target |
//! |---|---|---|---|
//! | [`actor_critic`] | the TensorFlow actor-critic tutorial | CartPole-v1 | mean return of the last 100 episodes >= 475 |
//! | [`td3`] | TD3 with Fujimoto's hyper-parameters; DDPG with its three additions off | Pendulum-v1 | mean return of the last 10 episodes >= -200 |
//! | [`ppo`] | PPO with an LSTM policy and value (or an MLP, for comparison) | CartPole without velocities | mean return of the last 50 episodes >= 475 |
//! | [`ppo_dist`] | DD-PPO with MLPs on any number of workers (threads or MPI processes), the same final parameters for every count | CartPole-v1 | none: a fixed number of updates |
//!
//! [`run::train`] drives any of them: a rayon pool of the requested size, TensorBoard and
//! CSV scalars, checkpoints every N units (parameters, optimizer slots, random streams,
//! environments, buffers and counters), resume, a budget and a target, an `indicatif`
//! progress bar, the learning curve as a PNG and a `summary.json`.
//!
//! # Guarantees
//!
//! - The same seed gives the same bits at every thread count: every kernel underneath
//!   has one order of floating-point operations (`tests/determinism.rs` trains each agent
//!   briefly with 1 and 2 threads and compares the final parameters bit for bit).
//! - A run paused and resumed from its checkpoint ends with the bits of an uninterrupted
//!   one (same test file).
//!
//! # Example: a few episodes of the actor-critic
//!
//! ```
//! use rlgrad_examples::actor_critic::{ActorCritic, Config};
//! use rlgrad_examples::run::{train, Agent, Options};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let options = Options {
//!     run_dir: Some(dir.path().to_path_buf()),
//!     budget: 3,
//!     progress: false,
//!     ..Options::new::<ActorCritic>(42)
//! };
//! let outcome = train(&options, || ActorCritic::new(Config::default(), 42))?;
//! assert_eq!(outcome.summary.episodes, 3);
//! assert!(dir.path().join("learning_curve.png").exists());
//! assert!(dir.path().join("checkpoints/ckpt-3.safetensors").exists());
//! # Ok::<(), rlgrad_core::Error>(())
//! ```

pub mod actor_critic;
pub mod cli;
pub mod off_policy;
pub mod ppo;
pub mod ppo_dist;
pub mod run;
pub mod sac;
pub mod td3;
