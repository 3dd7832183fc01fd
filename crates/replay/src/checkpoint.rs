//! Replay buffers in `rlgrad-checkpoint` checkpoints (feature `checkpoint`).

use rlgrad_checkpoint::{Checkpoint, Restore, Scalar, State, state_path};
use rlgrad_core::{Error, Float, Result};

use crate::buffer::{Config, ReplayBuffer};

/// `prefix/name`, or `name` for an empty prefix (as checkpoints name module parameters).
/// The metadata key holding the configuration of the buffer stored under `prefix`.
fn config_key(prefix: &str) -> String {
    format!("replay_config:{prefix}")
}

/// The configuration and element type as one exact string (floats as their bits).
fn config_string<T: Scalar>(config: &Config) -> String {
    let Config {
        capacity,
        obs_dim,
        action_dim,
        num_envs,
        n_step,
        gamma,
        alpha,
    } = *config;
    let alpha = alpha.map_or_else(
        || "none".to_owned(),
        |a| format!("{a} ({:#x})", a.to_bits()),
    );
    format!(
        "dtype={}, capacity={capacity}, obs_dim={obs_dim}, action_dim={action_dim}, \
         num_envs={num_envs}, n_step={n_step}, gamma={gamma} ({:#x}), alpha={alpha}",
        T::DTYPE,
        gamma.to_bits()
    )
}

const NAMES: [&str; 6] = ["obs", "actions", "rewards", "next_obs", "flags", "cursor"];
const PRIORITY_NAMES: [&str; 3] = ["priority_sum", "priority_min", "max_priority"];

impl<T: Float + Scalar> ReplayBuffer<T> {
    fn entry_names(&self, prefix: &str) -> Vec<String> {
        let priority_names: &[&str] = if self.priorities.is_some() {
            &PRIORITY_NAMES
        } else {
            &[]
        };
        NAMES
            .iter()
            .chain(priority_names)
            .map(|name| state_path(prefix, name))
            .collect()
    }

    /// Stores the buffer under `prefix/`: the stored transitions (`obs`, `actions`,
    /// `rewards`, `next_obs` as `T`, `flags` as `u8`: bit 0 terminated, bit 1
    /// truncated), the ring position `cursor` (`[write_row, filled_rows]`, `u64`), for
    /// prioritized replay the whole sum and min trees and the largest priority (`f64`),
    /// and the configuration as the metadata entry `replay_config:PREFIX`. Sampling
    /// draws from the caller's `Rng`: store it too ([`Checkpoint::put_rng`]) to resume
    /// the same batches. An error, with nothing stored, when one of these names is taken.
    ///
    /// ```
    /// use rlgrad_checkpoint::{Checkpoint, Restore};
    /// use rlgrad_replay::{Config, ReplayBuffer, Transitions};
    ///
    /// let mut buffer = ReplayBuffer::<f32>::new(Config::new(100, 2, 1))?;
    /// buffer.push(Transitions { obs: &[0.0, 1.0], actions: &[0.5], rewards: &[1.0],
    ///     next_obs: &[1.0, 2.0], terminated: &[false], truncated: &[false] })?;
    /// let mut checkpoint = Checkpoint::new();
    /// buffer.save("replay", &mut checkpoint)?;
    ///
    /// let mut resumed = ReplayBuffer::<f32>::new(Config::new(100, 2, 1))?;
    /// let mut plan = Restore::new();
    /// resumed.restore("replay", &checkpoint, &mut plan)?;
    /// checkpoint.restore(plan)?;
    /// assert_eq!(resumed, buffer);
    /// # Ok::<(), rlgrad_core::Error>(())
    /// ```
    pub fn save(&self, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()> {
        const FUNCTION: &str = "ReplayBuffer::save";
        let key = config_key(prefix);
        let names = self.entry_names(prefix);
        let taken: Vec<&str> = names
            .iter()
            .map(String::as_str)
            .filter(|name| checkpoint.contains(name))
            .collect();
        if !taken.is_empty() || checkpoint.metadata(&key).is_some() {
            return Err(Error::value(
                FUNCTION,
                "prefix",
                format_args!("names not yet in the checkpoint: {names:?} and metadata `{key}`"),
                format_args!("`{prefix}`, with {taken:?} taken"),
            ));
        }
        let len = self.len();
        let Config {
            obs_dim,
            action_dim,
            ..
        } = self.config;
        let put = |checkpoint: &mut Checkpoint| -> Result<()> {
            checkpoint.put(&names[0], &[len, obs_dim], &self.obs)?;
            checkpoint.put(&names[1], &[len, action_dim], &self.actions)?;
            checkpoint.put(&names[2], &[len], &self.rewards)?;
            checkpoint.put(&names[3], &[len, obs_dim], &self.next_obs)?;
            checkpoint.put(&names[4], &[len], &self.flags)?;
            checkpoint.put(&names[5], &[2], &self.cursor)?;
            if let Some(p) = &self.priorities {
                let nodes = p.tree.nodes();
                checkpoint.put(&names[6], &[nodes], &p.tree.sum)?;
                checkpoint.put(&names[7], &[nodes], &p.tree.min)?;
                checkpoint.put(&names[8], &[1], &p.max_priority)?;
            }
            checkpoint.set_metadata(&key, config_string::<T>(&self.config))
        };
        put(checkpoint).map_err(|e| e.in_function(FUNCTION))
    }

    /// Adds to `plan` the entries [`ReplayBuffer::save`] stored under `prefix/`, after
    /// checking, from `checkpoint`, that they were saved by a buffer of this configuration
    /// and element type and that the ring position is valid. Nothing changes before the
    /// plan is applied (the buffer is then resized to what the checkpoint holds), so a
    /// refused plan leaves the buffer as it was.
    pub fn restore<'a>(
        &'a mut self,
        prefix: &str,
        checkpoint: &Checkpoint,
        plan: &mut Restore<'a>,
    ) -> Result<()> {
        const FUNCTION: &str = "ReplayBuffer::restore";
        let key = config_key(prefix);
        let expected = config_string::<T>(&self.config);
        match checkpoint.metadata(&key) {
            Some(found) if found == expected => {}
            found => {
                return Err(Error::state(
                    FUNCTION,
                    "checkpoint",
                    format_args!("metadata `{key}` = `{expected}`"),
                    format_args!("{:?}", found),
                ));
            }
        }
        let names = self.entry_names(prefix);
        let cursor = checkpoint
            .read::<u64>(&names[5], &[2])
            .map_err(|e| e.in_function(FUNCTION))?;
        let (write_row, filled_rows) = (cursor[0], cursor[1]);
        let rows = self.rows as u64;
        let valid = filled_rows <= rows
            && write_row < rows
            && (filled_rows == rows || write_row == filled_rows);
        if !valid {
            return Err(Error::state(
                FUNCTION,
                "checkpoint",
                format_args!(
                    "`{}` = [write_row, filled_rows] of a ring of {rows} rows",
                    names[5]
                ),
                format_args!("{cursor:?}"),
            ));
        }
        let Config {
            obs_dim,
            action_dim,
            num_envs,
            ..
        } = self.config;
        let len = filled_rows as usize * num_envs;
        // Sized when the plan is applied: a refused plan leaves the buffer as it was.
        plan.vec(&names[0], &[len, obs_dim], &mut self.obs)
            .vec(&names[1], &[len, action_dim], &mut self.actions)
            .vec(&names[2], &[len], &mut self.rewards)
            .vec(&names[3], &[len, obs_dim], &mut self.next_obs)
            .vec(&names[4], &[len], &mut self.flags)
            .slice(&names[5], &[2], &mut self.cursor);
        if let Some(p) = &mut self.priorities {
            let nodes = p.tree.nodes();
            plan.slice(&names[6], &[nodes], &mut p.tree.sum)
                .slice(&names[7], &[nodes], &mut p.tree.min)
                .slice(&names[8], &[1], &mut p.max_priority);
        }
        Ok(())
    }

    /// Replaces the buffer by the one stored under `prefix/` of `checkpoint` (other
    /// entries are ignored), or returns an error and leaves it as it was. Errors as
    /// [`ReplayBuffer::restore`] and [`Checkpoint::restore`].
    pub fn load(&mut self, prefix: &str, checkpoint: &Checkpoint) -> Result<()> {
        let mut plan = Restore::new();
        plan.allow_extra(true);
        self.restore(prefix, checkpoint, &mut plan)?;
        checkpoint.restore(plan)
    }
}

/// [`ReplayBuffer::save`] and [`ReplayBuffer::restore`] under the state's prefix, so that a
/// buffer is a field of a `#[derive(State)]` agent.
impl<T: Float + Scalar> State for ReplayBuffer<T> {
    fn save_state(&self, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()> {
        self.save(prefix, checkpoint)
    }

    fn restore_state<'a>(
        &'a mut self,
        prefix: &str,
        checkpoint: &Checkpoint,
        plan: &mut Restore<'a>,
    ) -> Result<()> {
        self.restore(prefix, checkpoint, plan)
    }
}
