//! rlgrad-checkpoint's integration tests, one module per file, in one binary: each test
//! binary compiles and links its own copy of the generic kernels, so one binary instead
//! of one per file saves most of the tests' build time.
//!
//! Kept apart: `killed_during_save`, a harness of its own that kills a child process.

mod bad_input;
mod derive_state;
mod module_names;
mod optimizer_hyperparameters;
mod optimizer_slot_shapes;
mod resume;
mod resume_module;
mod torch_weights;
mod unwritable;

/// Every slot's values as bits, by parameter and slot.
fn slot_bits(state: &rlgrad_optim::OptimizerState<f32>) -> Vec<(String, String, Vec<u32>)> {
    state
        .params
        .iter()
        .flat_map(|(param, p)| {
            p.slots.iter().map(move |(slot, values)| {
                let bits = values.iter().map(|v| v.to_bits()).collect();
                (param.clone(), slot.clone(), bits)
            })
        })
        .collect()
}
