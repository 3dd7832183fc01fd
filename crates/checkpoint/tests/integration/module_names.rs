//! Where `put_module` stores a module's parameters: under the prefix and each parameter's
//! path in the module, the names `#[derive(State)]` gives a module field of that name; and
//! checkpoints written when it used the parameters' own names still restore.

use rlgrad_autodiff::nn::{Activation, Init, Mlp, Module};
use rlgrad_checkpoint::{Checkpoint, Restore, State};
use rlgrad_core::{Result, Rng};

fn policy(seed: u64) -> Result<Mlp> {
    Mlp::new(
        "policy",
        &[3, 4, 2],
        Activation::Tanh,
        Activation::Identity,
        Init::TorchDefault,
        &mut Rng::new(seed, "init"),
    )
}

fn bits(module: &Mlp) -> Result<Vec<Vec<u32>>> {
    module
        .parameters()
        .iter()
        .map(|p| Ok(p.value().to_vec()?.iter().map(|v| v.to_bits()).collect()))
        .collect()
}

#[derive(State)]
struct Agent {
    #[state(module)]
    policy: Mlp,
}

const PATHS: [&str; 4] = [
    "policy/l1/bias",
    "policy/l1/weight",
    "policy/l2/bias",
    "policy/l2/weight",
];

#[test]
fn put_module_stores_the_prefix_then_the_path_as_derive_state_does() -> Result<()> {
    let mut checkpoint = Checkpoint::new();
    checkpoint.put_module("policy", &policy(0)?)?;
    assert_eq!(checkpoint.names().collect::<Vec<_>>(), PATHS);

    let derived = Checkpoint::from_state(&Agent { policy: policy(0)? })?;
    assert_eq!(derived, checkpoint);

    // A network built under another name is stored by where it is, not what it is called.
    let mut renamed = Checkpoint::new();
    let mut other = policy(0)?;
    other.name_by_path("pi")?;
    renamed.put_module("policy", &other)?;
    assert_eq!(renamed.names().collect::<Vec<_>>(), PATHS);

    let mut fresh = policy(1)?;
    let mut plan = Restore::new();
    plan.module("policy", &mut fresh);
    checkpoint.restore(plan)?;
    assert_eq!(bits(&fresh)?, bits(&policy(0)?)?);
    Ok(())
}

/// A checkpoint of the former naming, `prefix/NAME`: each parameter's name after the
/// prefix, as `put_module` stored it before it stored paths.
fn former_naming(prefix: &str, module: &Mlp) -> Result<Checkpoint> {
    let mut checkpoint = Checkpoint::new();
    for p in module.parameters() {
        let name = if prefix.is_empty() {
            p.name().to_owned()
        } else {
            format!("{prefix}/{}", p.name())
        };
        checkpoint.put_tensor(&name, p.value())?;
    }
    let bytes = checkpoint.to_bytes()?;
    Checkpoint::from_bytes(&bytes)
}

#[test]
fn checkpoints_of_the_former_naming_still_restore() -> Result<()> {
    let saved = policy(0)?;
    // `put_module("policy", ..)` gave `policy/policy/l1/weight`, `put_module("", ..)`
    // gave `policy/l1/weight`; the same calls of `Restore::module` read both.
    let doubled = former_naming("policy", &saved)?;
    assert!(doubled.contains("policy/policy/l1/weight"));
    let bare = former_naming("", &saved)?;
    for (prefix, checkpoint) in [("policy", &doubled), ("", &bare)] {
        let mut fresh = policy(1)?;
        let mut plan = Restore::new();
        plan.module(prefix, &mut fresh);
        checkpoint.restore(plan)?;
        assert_eq!(bits(&fresh)?, bits(&saved)?, "prefix `{prefix}`");
    }

    // Neither name stored: the error names the path, where `put_module` stores it now.
    let mut fresh = policy(1)?;
    let before = bits(&fresh)?;
    let mut plan = Restore::new();
    plan.allow_extra(true).module("actor", &mut fresh);
    let message = doubled.restore(plan).unwrap_err().to_string();
    assert!(
        message.contains("`actor/l1/weight`: missing from the checkpoint"),
        "{message}"
    );
    assert_eq!(bits(&fresh)?, before);
    Ok(())
}
