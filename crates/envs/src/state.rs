//! Feature `checkpoint`: every environment is an `rlgrad_checkpoint::State`, its
//! [`Snapshot`] stored as one `u64` tensor under the prefix, so that an agent holding its
//! environments checkpoints them with the rest and resumes mid-episode.

use rlgrad_checkpoint::{Checkpoint, Restore, State};
use rlgrad_core::Result;

use crate::{CartPole, CartPoleNoVelocity, Env, Pendulum, Snapshot, VecEnv};

fn save_snapshot(env: &impl Snapshot, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()> {
    let words = env.snapshot();
    checkpoint.put(prefix, &[words.len()], &words)
}

/// A snapshot's length depends only on how the environment was built, so the fresh
/// environment's own snapshot tells the shape to expect. The snapshot is restored into
/// a copy first, so that a refused one (an invalid flag) leaves the whole plan unwritten.
fn restore_snapshot<'a, E: Snapshot + Clone>(env: &'a mut E, prefix: &str, plan: &mut Restore<'a>) {
    let len = env.snapshot().len();
    plan.with(prefix, &[len], move |words: &[u64]| {
        let mut staged = env.clone();
        staged.restore(words)?;
        Ok(Box::new(move || *env = staged))
    });
}

macro_rules! snapshot_state {
    ($($env:ty),* $(,)?) => {$(
        impl State for $env {
            fn save_state(&self, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()> {
                save_snapshot(self, prefix, checkpoint)
            }

            fn restore_state<'a>(
                &'a mut self,
                prefix: &str,
                _: &Checkpoint,
                plan: &mut Restore<'a>,
            ) -> Result<()> {
                restore_snapshot(self, prefix, plan);
                Ok(())
            }
        }
    )*};
}

snapshot_state!(CartPole, CartPoleNoVelocity, Pendulum);

impl<E: Env + Snapshot + Clone> State for VecEnv<E> {
    fn save_state(&self, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()> {
        save_snapshot(self, prefix, checkpoint)
    }

    fn restore_state<'a>(
        &'a mut self,
        prefix: &str,
        _: &Checkpoint,
        plan: &mut Restore<'a>,
    ) -> Result<()> {
        restore_snapshot(self, prefix, plan);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vector of Pendulums saved mid-episode resumes with the same steps; a snapshot of
    /// another number of environments is refused before anything is written.
    #[test]
    fn a_vector_env_resumes_mid_episode() -> Result<()> {
        let mut env = VecEnv::from_fn(2, Pendulum::new)?;
        env.reset(Some(3))?;
        env.step(&[0.5, -1.0])?;
        let mut checkpoint = Checkpoint::new();
        checkpoint.put_state("env", &env)?;
        let restore = |env: &mut VecEnv<Pendulum>| {
            let mut plan = Restore::new();
            plan.state("env", &checkpoint, env)?;
            checkpoint.restore(plan)
        };

        let mut resumed = VecEnv::from_fn(2, Pendulum::new)?;
        restore(&mut resumed)?;
        for _ in 0..3 {
            let rewards = resumed.step(&[1.0, 0.25])?.rewards.to_vec();
            assert_eq!(rewards, env.step(&[1.0, 0.25])?.rewards);
            assert_eq!(resumed.observations(), env.observations());
        }

        let mut wider = VecEnv::from_fn(3, Pendulum::new)?;
        wider.reset(Some(9))?;
        let before = wider.snapshot();
        let message = restore(&mut wider).unwrap_err().to_string();
        assert!(message.contains("expected U64"), "{message}");
        assert_eq!(wider.snapshot(), before);

        // A snapshot of the right length that the environment refuses (a reset flag of
        // 2), with another entry in the same plan: refused, and neither is written.
        let mut forged = env.snapshot();
        forged[0] = 2;
        let mut bad = Checkpoint::new();
        bad.put("env", &[forged.len()], &forged)?;
        bad.put_scalar("steps", 7u64)?;
        let (mut steps, before) = (0u64, resumed.snapshot());
        let mut plan = Restore::new();
        plan.state("env", &bad, &mut resumed)?
            .scalar("steps", &mut steps);
        assert!(bad.restore(plan).is_err());
        assert_eq!((steps, resumed.snapshot()), (0, before));
        Ok(())
    }
}
