//! `#[derive(State)]`: an agent of networks, target networks, optimizers, counters and
//! random streams saved in one call, written to a file and restored into a fresh agent,
//! trains on with the bits of an agent that never stopped; a checkpoint that does not fit
//! is refused as a whole and nothing is written.

use rlgrad_autodiff::losses::{Reduction, mse_loss};
use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module};
use rlgrad_autodiff::{ApplyGradients, Tape};
use rlgrad_checkpoint::{Checkpoint, Restore, State};
use rlgrad_core::{Result, Rng};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_tensor::Tensor;

/// The state of a small actor-critic-like learner.
#[derive(State)]
struct Agent {
    #[state(module)]
    net: Mlp,
    #[state(module)]
    target: Mlp,
    adam: Optimizer<f32>,
    batches: Rng,
    updates: u64,
    baseline: Tensor<f64>,
    exploration: Option<Rng>,
    noise: Rng,
    #[state(resize)]
    losses: Vec<f32>,
    #[state(skip)]
    tau: f64,
}

/// A tuple struct and a generic one, each a `State` through its fields.
#[derive(State)]
struct Counters(u64, #[state(skip)] &'static str, i32);

#[derive(State)]
struct Pair<S> {
    left: S,
    right: S,
}

impl Agent {
    fn new(seed: u64, exploration: bool) -> Result<Self> {
        let mut init = Rng::new(seed, "init");
        let net = Mlp::new(
            "net",
            &[3, 8, 1],
            Activation::Tanh,
            Activation::Identity,
            Init::TorchDefault,
            &mut init,
        )?;
        Ok(Self {
            target: net.clone(),
            net,
            adam: Optimizer::new(Adam::torch(), 1e-2)?,
            batches: Rng::new(seed, "batches"),
            updates: 0,
            baseline: Tensor::zeros([2])?,
            exploration: exploration.then(|| Rng::new(seed, "exploration")),
            noise: Rng::new(seed, "noise"),
            losses: Vec::new(),
            tau: 0.05,
        })
    }

    /// One Adam step on a fresh batch, then the target's Polyak update and the counters.
    fn step(&mut self) -> Result<()> {
        let x = Tensor::<f32>::rand_normal([8, 3], 0.0, 1.0, &mut self.batches)?;
        let y = x.matmul(&Tensor::from_vec(vec![1.0f32, -2.0, 0.5], [3, 1])?)?;
        let tape = Tape::new();
        let prediction = self.net.forward(&tape, &tape.constant(&x))?;
        let loss = mse_loss(&prediction, &tape.constant(&y), Reduction::Mean)?;
        self.losses.push(loss.to_scalar()?);
        let grads = tape.gradient(&loss, &[&self.net])?;
        self.adam.apply_gradients(&mut self.net, &grads)?;
        self.target.soft_update_from(&self.net, self.tau)?;
        self.updates += 1;
        let drift = Tensor::from_vec(vec![self.noise.normal_f64(), self.noise.normal_f64()], [2])?;
        self.baseline = self.baseline.add(&drift)?;
        Ok(())
    }

    /// Every value that a resumed run must reproduce, as bits.
    fn bits(&self) -> Result<Vec<u64>> {
        let mut bits = Vec::new();
        for p in self
            .net
            .parameters()
            .into_iter()
            .chain(self.target.parameters())
        {
            bits.extend(p.value().to_vec()?.iter().map(|v| u64::from(v.to_bits())));
        }
        bits.extend(self.baseline.to_vec()?.iter().map(|v| v.to_bits()));
        bits.extend(self.losses.iter().map(|v| u64::from(v.to_bits())));
        bits.push(self.updates);
        Ok(bits)
    }
}

#[test]
fn an_agent_resumed_from_one_call_trains_on_with_the_same_bits() -> Result<()> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.safetensors");
    let mut agent = Agent::new(5, false)?;
    for _ in 0..4 {
        agent.step()?;
    }
    Checkpoint::from_state(&agent)?.save(&path)?;

    let mut resumed = Agent::new(6, false)?;
    Checkpoint::load(&path)?.restore_state(&mut resumed)?;
    assert_eq!(resumed.bits()?, agent.bits()?);
    for _ in 0..3 {
        agent.step()?;
        resumed.step()?;
    }
    assert_eq!(resumed.bits()?, agent.bits()?);
    assert_eq!(resumed.adam.state()?, agent.adam.state()?);
    Ok(())
}

#[test]
fn fields_are_named_by_path_and_skipped_fields_are_not_stored() -> Result<()> {
    let checkpoint = Checkpoint::from_state(&Agent::new(1, true)?)?;
    let names: Vec<&str> = checkpoint.names().collect();
    for name in [
        "net/l1/weight",
        "target/l1/weight",
        "target/l2/bias",
        "batches",
        "updates",
        "baseline",
        "exploration",
        "noise",
        "losses",
    ] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
    assert!(!names.iter().any(|name| name.starts_with("tau")));

    let mut counters = Counters(7, "label", -3);
    let saved = Checkpoint::from_state(&counters)?;
    assert_eq!(saved.names().collect::<Vec<_>>(), ["0", "2"]);
    counters = Counters(0, "other", 0);
    saved.restore_state(&mut counters)?;
    assert_eq!((counters.0, counters.1, counters.2), (7, "other", -3));

    let pair = Pair {
        left: 1.5f64,
        right: -2.0,
    };
    let mut checkpoint = Checkpoint::new();
    checkpoint.put_state("pair", &pair)?;
    let mut restored = Pair {
        left: 0.0f64,
        right: 0.0,
    };
    let mut plan = Restore::new();
    plan.state("pair", &checkpoint, &mut restored)?;
    checkpoint.restore(plan)?;
    assert_eq!((restored.left, restored.right), (1.5, -2.0));

    // A plain `Vec` keeps its length and refuses another; `#[state(resize)]` takes it.
    let saved = Checkpoint::from_state(&Pair {
        left: vec![1.0f32; 3],
        right: vec![],
    })?;
    let mut shorter = Pair {
        left: vec![0.0f32; 2],
        right: vec![],
    };
    let message = saved.restore_state(&mut shorter).unwrap_err().to_string();
    assert!(
        message.contains("`left`: expected F32 [2], found F32 [3]"),
        "{message}"
    );
    assert_eq!(shorter.left, [0.0; 2]);
    Ok(())
}

#[test]
fn a_checkpoint_that_does_not_fit_is_refused_and_nothing_is_written() -> Result<()> {
    let mut saved = Agent::new(2, false)?;
    saved.step()?;
    let checkpoint = Checkpoint::from_state(&saved)?;

    // An agent that grew an exploration stream and a wider hidden layer.
    let mut other = Agent::new(3, true)?;
    other.net = Mlp::new(
        "net",
        &[3, 9, 1],
        Activation::Tanh,
        Activation::Identity,
        Init::TorchDefault,
        &mut Rng::new(3, "init"),
    )?;
    other.target = other.net.clone();
    other.step()?;
    let before = other.bits()?;
    let message = checkpoint
        .restore_state(&mut other)
        .unwrap_err()
        .to_string();
    assert!(
        message.contains("`exploration`: missing from the checkpoint"),
        "{message}"
    );
    assert!(
        message.contains("`net/l1/weight`: expected F32 [3, 9], found F32 [3, 8]"),
        "{message}"
    );
    assert_eq!(other.bits()?, before);
    assert_eq!(other.updates, 1);
    Ok(())
}

/// A refusal that only the optimizer itself can make (another learning rate, checked
/// after every name, dtype and shape matched) still writes nothing: not the networks
/// before it, not the counters after it.
#[test]
fn an_optimizer_that_refuses_its_state_leaves_the_whole_agent_unwritten() -> Result<()> {
    let mut saved = Agent::new(2, false)?;
    saved.step()?;
    let checkpoint = Checkpoint::from_state(&saved)?;

    let mut other = Agent::new(3, false)?;
    other.adam = Optimizer::new(Adam::torch(), 5e-3)?;
    other.step()?;
    let (before, adam) = (other.bits()?, other.adam.state()?);
    let message = checkpoint
        .restore_state(&mut other)
        .unwrap_err()
        .to_string();
    assert!(message.contains("Optimizer::load_state"), "{message}");
    assert_eq!(other.bits()?, before);
    assert_eq!(other.adam.state()?, adam);

    other.adam = Optimizer::new(Adam::torch(), 1e-2)?;
    checkpoint.restore_state(&mut other)?;
    assert_eq!(other.bits()?, saved.bits()?);
    Ok(())
}
