//! A replay buffer of transitions, as Fujimoto's `utils.ReplayBuffer` keeps them.

use rlgrad_checkpoint::{Checkpoint, Restore};
use rlgrad_core::{Error, Result, Rng};
use rlgrad_tensor::Tensor;

/// Transitions in a ring of `capacity` rows: state, action, next state, reward and
/// `not_done = 1 - terminated` (a truncated episode still bootstraps), all f32.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayBuffer {
    capacity: usize,
    state_dim: usize,
    action_dim: usize,
    states: Vec<f32>,
    actions: Vec<f32>,
    next_states: Vec<f32>,
    rewards: Vec<f32>,
    not_dones: Vec<f32>,
    next: usize,
}

/// A sampled minibatch, `[batch, *]` each.
#[derive(Debug, Clone)]
pub struct Batch {
    /// `[batch, state_dim]`.
    pub states: Tensor,
    /// `[batch, action_dim]`.
    pub actions: Tensor,
    /// `[batch, state_dim]`.
    pub next_states: Tensor,
    /// `[batch, 1]`.
    pub rewards: Tensor,
    /// `[batch, 1]`.
    pub not_dones: Tensor,
}

impl ReplayBuffer {
    /// An empty buffer; an error for a zero capacity or dimension.
    pub fn new(capacity: usize, state_dim: usize, action_dim: usize) -> Result<Self> {
        for (argument, value) in [
            ("capacity", capacity),
            ("state_dim", state_dim),
            ("action_dim", action_dim),
        ] {
            if value == 0 {
                return Err(Error::value("ReplayBuffer::new", argument, "at least 1", 0));
            }
        }
        Ok(Self {
            capacity,
            state_dim,
            action_dim,
            states: Vec::new(),
            actions: Vec::new(),
            next_states: Vec::new(),
            rewards: Vec::new(),
            not_dones: Vec::new(),
            next: 0,
        })
    }

    /// The number of transitions held.
    pub fn len(&self) -> usize {
        self.rewards.len()
    }

    /// Whether no transition is held.
    pub fn is_empty(&self) -> bool {
        self.rewards.is_empty()
    }

    /// Adds a transition, replacing the oldest once the buffer is full.
    pub fn push(
        &mut self,
        state: &[f32],
        action: &[f32],
        next_state: &[f32],
        reward: f32,
        terminated: bool,
    ) {
        let not_done = if terminated { 0.0 } else { 1.0 };
        if self.len() < self.capacity {
            self.states.extend_from_slice(state);
            self.actions.extend_from_slice(action);
            self.next_states.extend_from_slice(next_state);
            self.rewards.push(reward);
            self.not_dones.push(not_done);
        } else {
            let (s, a, i) = (self.state_dim, self.action_dim, self.next);
            self.states[i * s..(i + 1) * s].copy_from_slice(state);
            self.actions[i * a..(i + 1) * a].copy_from_slice(action);
            self.next_states[i * s..(i + 1) * s].copy_from_slice(next_state);
            self.rewards[i] = reward;
            self.not_dones[i] = not_done;
        }
        self.next = (self.next + 1) % self.capacity;
    }

    /// `batch` transitions drawn uniformly with replacement (`rng.below(len)` each, as
    /// NumPy's `randint` in Fujimoto's code). An error when the buffer is empty.
    pub fn sample(&self, batch: usize, rng: &mut Rng) -> Result<Batch> {
        if self.is_empty() {
            return Err(Error::empty(
                "ReplayBuffer::sample",
                "self",
                "at least one transition",
            ));
        }
        let rows: Vec<usize> = (0..batch)
            .map(|_| rng.below(self.len() as u64) as usize)
            .collect();
        let gather = |data: &[f32], width: usize| -> Result<Tensor> {
            let mut out = Vec::with_capacity(batch * width);
            for &r in &rows {
                out.extend_from_slice(&data[r * width..(r + 1) * width]);
            }
            Tensor::from_vec(out, [batch, width])
        };
        Ok(Batch {
            states: gather(&self.states, self.state_dim)?,
            actions: gather(&self.actions, self.action_dim)?,
            next_states: gather(&self.next_states, self.state_dim)?,
            rewards: gather(&self.rewards, 1)?,
            not_dones: gather(&self.not_dones, 1)?,
        })
    }

    /// Stores the held transitions and the ring position under `prefix/`.
    pub fn save(&self, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()> {
        let (n, s, a) = (self.len(), self.state_dim, self.action_dim);
        checkpoint.put(&format!("{prefix}/states"), &[n, s], &self.states)?;
        checkpoint.put(&format!("{prefix}/actions"), &[n, a], &self.actions)?;
        checkpoint.put(&format!("{prefix}/next_states"), &[n, s], &self.next_states)?;
        checkpoint.put(&format!("{prefix}/rewards"), &[n], &self.rewards)?;
        checkpoint.put(&format!("{prefix}/not_dones"), &[n], &self.not_dones)?;
        checkpoint.put_scalar(&format!("{prefix}/next"), self.next as u64)
    }

    /// Sizes this buffer for what `checkpoint` holds under `prefix/`, and asks `plan` to
    /// fill it; `next` receives the ring position (see [`ReplayBuffer::set_next`]).
    pub fn restore<'a>(
        &'a mut self,
        prefix: &str,
        checkpoint: &Checkpoint,
        plan: &mut Restore<'a>,
        next: &'a mut u64,
    ) -> Result<()> {
        let name = format!("{prefix}/rewards");
        let n = match checkpoint.tensor_info(&name) {
            Some(info) if info.shape.len() == 1 && info.shape[0] <= self.capacity => info.shape[0],
            other => {
                return Err(Error::state(
                    "ReplayBuffer::restore",
                    "checkpoint",
                    format_args!("`{name}` of at most {} transitions", self.capacity),
                    format_args!("{:?}", other.map(|info| &info.shape)),
                ));
            }
        };
        let (s, a) = (self.state_dim, self.action_dim);
        self.states = vec![0.0; n * s];
        self.actions = vec![0.0; n * a];
        self.next_states = vec![0.0; n * s];
        self.rewards = vec![0.0; n];
        self.not_dones = vec![0.0; n];
        plan.slice(&format!("{prefix}/states"), &[n, s], &mut self.states)
            .slice(&format!("{prefix}/actions"), &[n, a], &mut self.actions)
            .slice(
                &format!("{prefix}/next_states"),
                &[n, s],
                &mut self.next_states,
            )
            .slice(&name, &[n], &mut self.rewards)
            .slice(&format!("{prefix}/not_dones"), &[n], &mut self.not_dones)
            .scalar(&format!("{prefix}/next"), next);
        Ok(())
    }

    /// Sets the ring position read back by [`ReplayBuffer::restore`]; an error when it is
    /// not a row of the ring.
    pub fn set_next(&mut self, next: u64) -> Result<()> {
        match usize::try_from(next) {
            Ok(next) if next < self.capacity => {
                self.next = next;
                Ok(())
            }
            _ => Err(Error::out_of_range(
                "ReplayBuffer::set_next",
                "next",
                format_args!("a row below the capacity {}", self.capacity),
                next,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_buffer_replaces_its_oldest_and_round_trips() {
        let mut buffer = ReplayBuffer::new(3, 2, 1).unwrap();
        assert!(buffer.sample(1, &mut Rng::new(0, "replay")).is_err());
        for i in 0..4 {
            let x = i as f32;
            buffer.push(&[x, x], &[x], &[x + 1.0, x + 1.0], x, i == 1);
        }
        assert_eq!(buffer.len(), 3);
        assert_eq!(buffer.rewards, [3.0, 1.0, 2.0]);
        assert_eq!(buffer.not_dones, [1.0, 0.0, 1.0]);
        let batch = buffer.sample(5, &mut Rng::new(0, "replay")).unwrap();
        assert_eq!(batch.states.dims(), &[5, 2]);

        let mut checkpoint = Checkpoint::new();
        buffer.save("replay", &mut checkpoint).unwrap();
        let mut restored = ReplayBuffer::new(3, 2, 1).unwrap();
        let mut next = 0;
        let mut plan = Restore::new();
        restored
            .restore("replay", &checkpoint, &mut plan, &mut next)
            .unwrap();
        checkpoint.restore(plan).unwrap();
        restored.set_next(next).unwrap();
        assert_eq!(restored, buffer);
        assert!(restored.set_next(3).is_err());
    }
}
