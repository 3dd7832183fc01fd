//! Save and restore: a run resumed from a checkpoint samples the same batches as one that
//! never stopped, uniform and prioritized.

use rlgrad_checkpoint::{Checkpoint, Restore};
use rlgrad_core::Rng;
use rlgrad_replay::{Batch, Config, ReplayBuffer, Transitions};

/// A training loop's use of a buffer: one push of `num_envs` random transitions per step,
/// then a batch, and for prioritized replay new priorities for it.
struct Run<T: rlgrad_core::Float> {
    buffer: ReplayBuffer<T>,
    env: Rng,
    replay: Rng,
}

impl<T: rlgrad_core::Float + rlgrad_checkpoint::Scalar> Run<T> {
    fn new(config: Config, seed: u64) -> Self {
        Self {
            buffer: ReplayBuffer::new(config).unwrap(),
            env: Rng::new(seed, "env"),
            replay: Rng::new(seed, "replay"),
        }
    }

    fn step(&mut self) -> Option<Batch<T>> {
        let c = *self.buffer.config();
        let mut draw = |n: usize| {
            (0..n)
                .map(|_| self.env.normal::<T>(0.0, 1.0))
                .collect::<Vec<T>>()
        };
        let (obs, actions, rewards) = (
            draw(c.num_envs * c.obs_dim),
            draw(c.num_envs * c.action_dim),
            draw(c.num_envs),
        );
        let next_obs = draw(c.num_envs * c.obs_dim);
        let flags: Vec<bool> = (0..2 * c.num_envs)
            .map(|_| self.env.uniform_f64() < 0.1)
            .collect();
        self.buffer
            .push(Transitions {
                obs: &obs,
                actions: &actions,
                rewards: &rewards,
                next_obs: &next_obs,
                terminated: &flags[..c.num_envs],
                truncated: &flags[c.num_envs..],
            })
            .unwrap();
        if self.buffer.len() < 8 {
            return None;
        }
        if c.alpha.is_some() {
            let batch = self
                .buffer
                .sample_prioritized(8, 0.4, &mut self.replay)
                .unwrap();
            let priorities: Vec<T> = (0..8)
                .map(|_| T::from_f64(self.env.uniform_f64() + 0.01))
                .collect();
            self.buffer
                .update_priorities(&batch.indices, &priorities)
                .unwrap();
            Some(batch)
        } else {
            Some(self.buffer.sample(8, &mut self.replay).unwrap())
        }
    }

    fn save(&self) -> Vec<u8> {
        let mut checkpoint = Checkpoint::new();
        self.buffer.save("replay", &mut checkpoint).unwrap();
        checkpoint.put_rng("rng/env", &self.env).unwrap();
        checkpoint.put_rng("rng/replay", &self.replay).unwrap();
        checkpoint.to_bytes().unwrap()
    }

    fn restore(config: Config, bytes: &[u8]) -> Self {
        let checkpoint = Checkpoint::from_bytes(bytes).unwrap();
        let mut run = Self::new(config, 12345);
        let mut plan = Restore::new();
        run.buffer
            .restore("replay", &checkpoint, &mut plan)
            .unwrap();
        plan.rng("rng/env", &mut run.env)
            .rng("rng/replay", &mut run.replay);
        checkpoint.restore(plan).unwrap();
        run
    }
}

fn resumes_bit_for_bit<T: rlgrad_core::Float + rlgrad_checkpoint::Scalar>(config: Config) {
    let mut uninterrupted = Run::<T>::new(config, 7);
    // 60 steps fill and wrap a ring of 40 transitions.
    for _ in 0..60 {
        uninterrupted.step();
    }
    let bytes = uninterrupted.save();
    let mut resumed = Run::<T>::restore(config, &bytes);
    assert_eq!(resumed.buffer, uninterrupted.buffer);
    for step in 0..50 {
        let (a, b) = (uninterrupted.step().unwrap(), resumed.step().unwrap());
        assert_eq!(a.indices, b.indices, "step {step}");
        let bits = |batch: &Batch<T>| {
            [
                &batch.obs,
                &batch.actions,
                &batch.rewards,
                &batch.next_obs,
                &batch.discounts,
                &batch.not_dones,
                &batch.weights,
            ]
            .iter()
            .flat_map(|v| v.iter().map(|x| x.as_f64().to_bits()))
            .collect::<Vec<u64>>()
        };
        assert_eq!(bits(&a), bits(&b), "step {step}");
    }
    assert_eq!(resumed.buffer, uninterrupted.buffer);
}

#[test]
fn a_resumed_uniform_buffer_samples_the_same_batches() {
    resumes_bit_for_bit::<f32>(Config::new(40, 3, 1).n_step(3, 0.99));
    resumes_bit_for_bit::<f64>(Config::new(40, 3, 2).num_envs(2).n_step(2, 0.9));
}

#[test]
fn a_resumed_prioritized_buffer_samples_the_same_batches() {
    resumes_bit_for_bit::<f32>(Config::new(40, 3, 1).n_step(3, 0.99).prioritized(0.6));
    resumes_bit_for_bit::<f64>(Config::new(40, 2, 1).num_envs(4).prioritized(0.7));
}

#[test]
fn a_checkpoint_of_another_buffer_is_refused_and_load_changes_nothing() {
    let config = Config::new(40, 3, 1).n_step(3, 0.99);
    let mut run = Run::<f32>::new(config, 1);
    for _ in 0..10 {
        run.step();
    }
    let checkpoint = Checkpoint::from_bytes(&run.save()).unwrap();

    let mut other = ReplayBuffer::<f32>::new(config.n_step(2, 0.99)).unwrap();
    let message = other.load("replay", &checkpoint).unwrap_err().to_string();
    assert!(
        message.starts_with("ReplayBuffer::restore: argument `checkpoint`"),
        "{message}"
    );
    assert!(
        message.contains("n_step=2") && message.contains("n_step=3"),
        "{message}"
    );
    let mut wider = ReplayBuffer::<f64>::new(config).unwrap();
    assert!(
        wider
            .load("replay", &checkpoint)
            .unwrap_err()
            .to_string()
            .contains("dtype=F64")
    );
    assert!(other.is_empty() && wider.is_empty());

    let mut same = ReplayBuffer::<f32>::new(config).unwrap();
    assert!(same.load("elsewhere", &checkpoint).is_err());
    same.load("replay", &checkpoint).unwrap();
    assert_eq!(same, run.buffer);

    // A ring position that is not one: refused before anything is written.
    let mut forged = Checkpoint::new();
    for name in checkpoint.names() {
        let info = checkpoint.tensor_info(name).unwrap().clone();
        match info.dtype {
            rlgrad_checkpoint::Dtype::F32 => forged
                .put(
                    name,
                    &info.shape,
                    &checkpoint.read::<f32>(name, &info.shape).unwrap(),
                )
                .unwrap(),
            rlgrad_checkpoint::Dtype::U8 => forged
                .put(
                    name,
                    &info.shape,
                    &checkpoint.read::<u8>(name, &info.shape).unwrap(),
                )
                .unwrap(),
            rlgrad_checkpoint::Dtype::U64 if name == "replay/cursor" => {
                forged.put(name, &[2], &[41u64, 10]).unwrap()
            }
            _ => forged
                .put(
                    name,
                    &info.shape,
                    &checkpoint.read::<u64>(name, &info.shape).unwrap(),
                )
                .unwrap(),
        }
    }
    for (key, value) in checkpoint.metadata_entries() {
        if !key.starts_with("rlgrad.") {
            forged.set_metadata(key, value).unwrap();
        }
    }
    let mut target = ReplayBuffer::<f32>::new(config).unwrap();
    let message = target.load("replay", &forged).unwrap_err().to_string();
    assert!(message.contains("write_row, filled_rows"), "{message}");
    assert!(target.is_empty());

    // Saving twice under one prefix is refused, with nothing stored.
    let mut twice = Checkpoint::new();
    run.buffer.save("replay", &mut twice).unwrap();
    let names = twice.names().count();
    assert!(run.buffer.save("replay", &mut twice).is_err());
    assert_eq!(twice.names().count(), names);
}

/// Restored through a plan with the rest of an agent (as a `#[derive(State)]` field): a
/// plan refused for another target's sake leaves a filled buffer exactly as it was, and
/// the accepted plan restores it.
#[test]
fn a_refused_plan_leaves_a_filled_buffer_as_it_was() {
    use rlgrad_checkpoint::State;

    let config = Config::new(40, 3, 1).n_step(3, 0.99).prioritized(0.6);
    let mut saved = Run::<f32>::new(config, 1);
    for _ in 0..30 {
        saved.step();
    }
    let mut checkpoint = Checkpoint::new();
    saved.buffer.save_state("replay", &mut checkpoint).unwrap();
    checkpoint.put_scalar("steps", 30u64).unwrap();

    let mut filled = Run::<f32>::new(config, 2);
    for _ in 0..7 {
        filled.step();
    }
    let before = filled.buffer.clone();
    let mut steps = [0u32; 1];
    let mut plan = Restore::new();
    plan.state("replay", &checkpoint, &mut filled.buffer)
        .unwrap()
        .slice("steps", &[], &mut steps);
    let message = checkpoint.restore(plan).unwrap_err().to_string();
    assert!(message.contains("`steps`: expected U32 []"), "{message}");
    assert_eq!(filled.buffer, before);

    let mut steps = 0u64;
    let mut plan = Restore::new();
    plan.state("replay", &checkpoint, &mut filled.buffer)
        .unwrap()
        .scalar("steps", &mut steps);
    checkpoint.restore(plan).unwrap();
    assert_eq!((&filled.buffer, steps), (&saved.buffer, 30));
}
