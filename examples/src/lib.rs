//! rlgrad-examples: five agents trained end to end with rlgrad's crates, as library
//! modules that the examples (`cargo run --release --example ...`), the tests and
//! `cargo xtask demo` share.
//!
//! | module | agent | environment | target |
//! |---|---|---|---|
//! | [`actor_critic`] | the TensorFlow actor-critic tutorial | CartPole-v1 | mean return of the last 100 episodes >= 475 |
//! | [`td3`] | TD3 with Fujimoto's hyper-parameters; DDPG with its three additions off | Pendulum-v1 | mean return of the last 10 episodes >= -200 |
//! | [`sac`] | SAC with CleanRL's hyper-parameters and automatic entropy tuning | Pendulum-v1 | mean return of the last 10 episodes >= -200 |
//! | [`ppo`] | PPO with an LSTM policy and value (or an MLP, for comparison) | CartPole without velocities | mean return of the last 50 episodes >= 475 |
//! | [`ppo_dist`] | DD-PPO with MLPs on any number of workers (threads or MPI processes), the same final parameters for every count | CartPole-v1 | none: a fixed number of updates |
//!
//! The off-policy agents (TD3, DDPG, SAC) are [`off_policy::Learner`]s run by
//! [`off_policy::OffPolicy`], which shares the environment, the replay buffer, the random
//! warm-up and the logging between them.
//!
//! The actor-critic, TD3, DDPG, SAC and PPO train on any device ([`device::TrainDevice`]:
//! the Cpu, or a CUDA GPU with `--device cuda`) with the same bits; DD-PPO on the Cpu
//! only.
//!
//! [`run::train`] drives any agent: a rayon pool of the requested size, TensorBoard and
//! CSV scalars, checkpoints every N units (parameters, optimizer slots, random streams,
//! environments, buffers and counters), resume, a budget and a target, an `indicatif`
//! progress bar, the learning curve as a PNG and a `summary.json`.
//!
//! # Guarantees
//!
//! - The same seed gives the same bits at every thread count: every kernel underneath
//!   has one order of floating-point operations (`tests/integration/determinism.rs` trains each agent
//!   briefly with 1 and 2 threads and compares the whole final state, parameters,
//!   optimizer slots, random streams, environments and buffers, byte for byte).
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
pub mod device;
pub mod off_policy;
pub mod ppo;
pub mod ppo_dist;
pub mod run;
pub mod sac;
pub mod td3;
