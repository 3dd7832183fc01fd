//! rlgrad-optim: optimizers you can see into.

pub mod converge;
mod optimizer;
mod rule;
mod schedule;

pub use optimizer::{DeviceParam, Optimizer, OptimizerState, Param, ParamState};
pub use rule::{
    Adagrad, Adam, AdamW, ChunkUpdate, Flavor, Momentum, MomentumFlavor, Rmsprop, Rule, Sgd,
    StepRule,
};
pub use schedule::{Constant, Cosine, Exponential, LinearWarmup, Schedule, Sequence, StepDecay};
