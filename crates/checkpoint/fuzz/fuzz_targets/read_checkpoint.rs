//! Any bytes given to the checkpoint reader give a checkpoint or an error, never a panic,
//! and a checkpoint that decodes can be restored from (or refused) without a panic. A
//! checkpoint that passed rlgrad's checksums re-encodes to exactly the bytes it came from:
//! verification accepts nothing but the one encoding of its content.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlgrad_checkpoint::{Checkpoint, Restore};
use rlgrad_core::Rng;
use rlgrad_optim::{Adam, Optimizer};

fuzz_target!(|bytes: &[u8]| {
    let Ok(checkpoint) = Checkpoint::from_bytes(bytes) else {
        return;
    };
    let names: Vec<String> = checkpoint.names().map(str::to_owned).collect();
    for name in &names {
        let info = checkpoint
            .tensor_info(name)
            .expect("listed names are stored")
            .clone();
        let _ = checkpoint.read::<f32>(name, &info.shape);
        let _ = checkpoint.read::<u64>(name, &info.shape);
    }
    let (mut w, mut step) = ([0.0f32; 4], 0u64);
    let mut rng = Rng::new(0, "fuzz");
    let mut adam = Optimizer::<f32>::new(Adam::torch(), 1e-3).expect("valid hyper-parameters");
    let mut plan = Restore::new();
    plan.allow_missing(true)
        .slice("w", &[4], &mut w)
        .scalar("step", &mut step)
        .rng("rng", &mut rng)
        .optimizer("optim", &mut adam);
    let _ = checkpoint.restore(plan);
    let _ = checkpoint.optimizer_state::<f64>("optim");
    let encoded = checkpoint.to_bytes();
    if checkpoint.is_verified() {
        assert_eq!(encoded.ok().as_deref(), Some(bytes));
    }
});
