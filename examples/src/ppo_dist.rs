//! DD-PPO on CartPole-v1 with MLP policy and value, data-parallel through rlgrad-dist:
//! the final parameters are the same bits on any number of workers.
//!
//! `num_envs` environments (16 by default) are spread over the `W` workers in contiguous
//! blocks ([`rlgrad_dist::owned_range`]); environment `e` is reset with `seed + e` and
//! samples its actions from its own stream `actions/e`, so the data depends on the global
//! environment index only, never on the rank. Every update:
//!
//! 1. each worker rolls out its environments for `rollout_steps` steps (the networks act
//!    row by row, and rlgrad's kernels give a row the same bits in any batch);
//! 2. GAE per environment with Gymnasium's terminated/truncated flags and the truncation
//!    bootstrap;
//! 3. the advantages are normalized over the whole global batch
//!    ([`rlgrad_dist::global_standardize`], environment-major order, unbiased std, eps 1e-8);
//! 4. `epochs` Adam steps, each on the gradient of the PPO loss (clipped surrogate plus
//!    `vf_coef` times the value loss) of the global batch: one microbatch per environment,
//!    the microbatch gradients reduced in the canonical tree
//!    ([`rlgrad_dist::GradientReducer`], mean over microbatches);
//! 5. the mean return of the episodes that ended ([`rlgrad_dist::global_mean`], in
//!    environment order).
//!
//! With `W = 1` the one worker accumulates the gradients of all microbatches: the same
//! microbatches, the same tree, so the same bits as any `W`.

use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module};
use rlgrad_autodiff::{Tape, Tensor};
use rlgrad_core::{Error, Result, Rng};
use rlgrad_dist::{
    Collective, GradientReducer, ParamSpec, Scale, global_mean, global_standardize, global_sum,
    owned_range, params_fingerprint,
};
use rlgrad_envs::{CartPole, VecEnv};
use rlgrad_optim::{Adam, Optimizer, Param};
use rlgrad_returns::{Episodes, TimeMajor, gae, transpose};

use crate::categorical;

/// The hyper-parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Environments over all workers. Default 16 (3 workers split them unevenly).
    pub num_envs: usize,
    /// Steps per environment per update. Default 64.
    pub rollout_steps: usize,
    /// Adam steps per update, each on the whole global batch. Default 4.
    pub epochs: usize,
    /// Hidden units of both networks (two tanh layers). Default 64.
    pub hidden: usize,
    /// The discount. Default 0.99.
    pub gamma: f32,
    /// GAE's lambda. Default 0.95.
    pub gae_lambda: f32,
    /// Adam's learning rate (PyTorch flavor). Default 1e-3.
    pub learning_rate: f64,
    /// The clip range. Default 0.2.
    pub clip_range: f32,
    /// Weight of the value loss. Default 0.5.
    pub vf_coef: f32,
    /// Seed of every stream and environment. Default 0.
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            num_envs: 16,
            rollout_steps: 64,
            epochs: 4,
            hidden: 64,
            gamma: 0.99,
            gae_lambda: 0.95,
            learning_rate: 1e-3,
            clip_range: 0.2,
            vf_coef: 0.5,
            seed: 0,
        }
    }
}

/// What one update did, the same on every worker.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateReport {
    /// The update's number, from 1.
    pub update: usize,
    /// The mean return of the episodes that ended during its rollout, over all workers
    /// (`None` when none ended).
    pub mean_return: Option<f32>,
    /// Episodes that ended during its rollout, over all workers.
    pub episodes: usize,
}

/// One worker's rollout, time-major `[T, B]` over its environments.
struct Rollout {
    observations: Vec<f32>,
    actions: Vec<usize>,
    log_probs: Vec<f32>,
    values: Vec<f32>,
    rewards: Vec<f32>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    final_values: Vec<f32>,
    /// The returns of the episodes that ended, per environment in time order.
    episode_returns: Vec<Vec<f32>>,
}

/// One environment's steps: the microbatch whose gradient a worker computes.
struct Microbatch {
    observations: Vec<f32>,
    actions: Vec<usize>,
    log_probs: Vec<f32>,
    advantages: Vec<f32>,
    returns: Vec<f32>,
}

const OBS: usize = 4;

/// The agent on one worker.
#[derive(Debug)]
pub struct DdPpo {
    config: Config,
    actor: Mlp<f32>,
    critic: Mlp<f32>,
    adam: Optimizer<f32>,
    reducer: GradientReducer<f32>,
    envs: VecEnv<CartPole>,
    /// The global index of this worker's first environment.
    first_env: usize,
    action_rngs: Vec<Rng>,
    updates: usize,
}

impl DdPpo {
    /// The agent of worker `comm.rank()`: the same networks on every worker, its block of
    /// environments. Errors: a configuration without environments, steps or epochs; more
    /// workers than environments.
    pub fn new<C: Collective + ?Sized>(config: Config, comm: &C) -> Result<Self> {
        let function = "DdPpo::new";
        for (argument, value) in [
            ("num_envs", config.num_envs),
            ("rollout_steps", config.rollout_steps),
            ("epochs", config.epochs),
            ("hidden", config.hidden),
        ] {
            if value == 0 {
                return Err(Error::value(function, argument, "at least 1", 0));
            }
        }
        if comm.size() > config.num_envs {
            return Err(Error::value(
                function,
                "comm",
                format_args!("at most num_envs = {} workers", config.num_envs),
                comm.size(),
            ));
        }
        let mine = owned_range(config.num_envs, comm.size(), comm.rank())?;
        let sizes = |out: usize| [OBS, config.hidden, config.hidden, out];
        let actor = Mlp::new(
            "actor",
            &sizes(2),
            Activation::Tanh,
            Activation::Identity,
            Init::TorchDefault,
            &mut Rng::new(config.seed, "init/actor"),
        )?;
        let critic = Mlp::new(
            "critic",
            &sizes(1),
            Activation::Tanh,
            Activation::Identity,
            Init::TorchDefault,
            &mut Rng::new(config.seed, "init/critic"),
        )?;
        let specs = actor
            .parameters()
            .into_iter()
            .chain(critic.parameters())
            .map(|p| ParamSpec::new(p.name(), p.shape().dims().to_vec()))
            .collect();
        let reducer = GradientReducer::new(specs, config.num_envs, Scale::Mean)?;
        let mut envs = VecEnv::from_fn(mine.len(), CartPole::new)?;
        // Environment e (global index) gets seed + e, whatever the worker.
        envs.reset(Some(config.seed + mine.start as u64))?;
        let action_rngs = mine
            .clone()
            .map(|e| Rng::new(config.seed, &format!("actions/{e}")))
            .collect();
        Ok(Self {
            adam: Optimizer::new(Adam::torch(), config.learning_rate)?,
            config,
            actor,
            critic,
            reducer,
            envs,
            first_env: mine.start,
            action_rngs,
            updates: 0,
        })
    }

    /// Rollout, advantages, `epochs` reduced gradient steps; the report is the same on
    /// every worker.
    pub fn update<C: Collective + ?Sized>(&mut self, comm: &C) -> Result<UpdateReport> {
        let rollout = self.collect()?;
        let microbatches = self.microbatches(comm, &rollout)?;
        for _ in 0..self.config.epochs {
            let (actor, critic, config) = (&self.actor, &self.critic, &self.config);
            let first = self.first_env;
            let reduced = self.reducer.reduce(comm, |e| {
                microbatch_gradients(actor, critic, config, &microbatches[e - first])
            })?;
            let mut grads = reduced.iter();
            let mut values: Vec<(String, Vec<f32>, &[f32])> = Vec::new();
            for p in self
                .actor
                .parameters()
                .into_iter()
                .chain(self.critic.parameters())
            {
                let (name, grad) = grads.next().expect("the reducer has every parameter");
                values.push((name.to_owned(), p.value().to_vec()?, grad));
            }
            let mut params: Vec<Param<'_, f32>> = values
                .iter_mut()
                .map(|(name, value, grad)| Param {
                    name: name.as_str(),
                    value: value.as_mut_slice(),
                    grad,
                })
                .collect();
            self.adam.step(&mut params)?;
            let mut new_values = values.into_iter().map(|(_, v, _)| v);
            let mut result = Ok(());
            let mut set = |p: &mut rlgrad_autodiff::Param<f32>| {
                let value = new_values.next().expect("one value per parameter");
                if let Err(e) =
                    Tensor::from_vec(value, p.shape().clone()).and_then(|t| p.set_value(t))
                {
                    result = Err(e);
                }
            };
            self.actor.visit_mut(&mut set);
            self.critic.visit_mut(&mut set);
            result?;
        }
        self.updates += 1;
        let returns: Vec<f32> = rollout.episode_returns.concat();
        let ones = vec![1.0f32; returns.len()];
        let episodes = global_sum(comm, &ones)? as usize;
        let mean_return = if episodes == 0 {
            None
        } else {
            Some(global_mean(comm, &returns)?)
        };
        Ok(UpdateReport {
            update: self.updates,
            mean_return,
            episodes,
        })
    }

    /// The fingerprint of every parameter's bits, in name order
    /// ([`rlgrad_dist::params_fingerprint`]).
    pub fn fingerprint(&self) -> Result<u64> {
        let values: Vec<(String, Vec<f32>)> = self
            .actor
            .parameters()
            .into_iter()
            .chain(self.critic.parameters())
            .map(|p| Ok((p.name().to_owned(), p.value().to_vec()?)))
            .collect::<Result<_>>()?;
        let named: Vec<(&str, &[f32])> = values
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        Ok(params_fingerprint(&named))
    }

    fn collect(&mut self) -> Result<Rollout> {
        let (t, b) = (self.config.rollout_steps, self.envs.num_envs());
        let mut r = Rollout {
            observations: Vec::with_capacity(t * b * OBS),
            actions: Vec::with_capacity(t * b),
            log_probs: Vec::with_capacity(t * b),
            values: Vec::with_capacity(t * b),
            rewards: Vec::with_capacity(t * b),
            terminated: Vec::with_capacity(t * b),
            truncated: Vec::with_capacity(t * b),
            final_values: Vec::with_capacity(t * b),
            episode_returns: vec![Vec::new(); b],
        };
        for _ in 0..t {
            let obs = self.envs.observations().to_vec();
            let tape = Tape::new().no_grad();
            let x = tape.constant(&Tensor::from_vec(obs.clone(), [b, OBS])?);
            let log_probs = self
                .actor
                .forward(&tape, &x)?
                .log_softmax(1)?
                .value()
                .to_vec()?;
            let values = self.critic.forward(&tape, &x)?.value().to_vec()?;
            for (row, rng) in log_probs.chunks_exact(2).zip(&mut self.action_rngs) {
                let probabilities: Vec<f32> = row.iter().map(|l| l.exp()).collect();
                let a = categorical::sample(&probabilities, rng);
                r.actions.push(a);
                r.log_probs.push(row[a]);
            }
            r.observations.extend_from_slice(&obs);
            r.values.extend_from_slice(&values);
            let step = self.envs.step(&r.actions[r.actions.len() - b..])?;
            r.rewards.extend_from_slice(step.rewards);
            r.terminated.extend_from_slice(step.terminated);
            r.truncated.extend_from_slice(step.truncated);
            for e in step.finished {
                r.episode_returns[e.env].push(e.episode_return as f32);
            }
            // V(final observation) for the truncation bootstrap.
            let finals = step.final_observations.to_vec();
            let x = tape.constant(&Tensor::from_vec(finals, [b, OBS])?);
            r.final_values
                .extend(self.critic.forward(&tape, &x)?.value().to_vec()?);
        }
        Ok(r)
    }

    /// GAE, globally normalized advantages, and one microbatch per environment.
    fn microbatches<C: Collective + ?Sized>(
        &self,
        comm: &C,
        r: &Rollout,
    ) -> Result<Vec<Microbatch>> {
        let (t, b) = (self.config.rollout_steps, self.envs.num_envs());
        let tape = Tape::new().no_grad();
        let x = tape.constant(&Tensor::from_vec(
            self.envs.observations().to_vec(),
            [b, OBS],
        )?);
        let bootstrap = self.critic.forward(&tape, &x)?.value().to_vec()?;
        let out = gae(
            TimeMajor::new(t, b),
            &r.rewards,
            &r.values,
            &bootstrap,
            Episodes::gymnasium(
                self.config.gamma,
                &r.terminated,
                &r.truncated,
                &r.final_values,
            ),
            self.config.gae_lambda,
        )?;
        // Environment-major, so that the global array is the same for every W.
        let advantages = transpose(&out.advantages, t, b, 1)?;
        let returns = transpose(&out.returns, t, b, 1)?;
        let normalized = global_standardize(comm, &advantages, 1e-8, 1)?;
        let observations = transpose(&r.observations, t, b, OBS)?;
        let actions = transpose(&r.actions, t, b, 1)?;
        let log_probs = transpose(&r.log_probs, t, b, 1)?;
        Ok((0..b)
            .map(|e| Microbatch {
                observations: observations[e * t * OBS..(e + 1) * t * OBS].to_vec(),
                actions: actions[e * t..(e + 1) * t].to_vec(),
                log_probs: log_probs[e * t..(e + 1) * t].to_vec(),
                advantages: normalized[e * t..(e + 1) * t].to_vec(),
                returns: returns[e * t..(e + 1) * t].to_vec(),
            })
            .collect())
    }
}

/// The gradients of one microbatch's PPO loss, actor parameters then critic parameters.
fn microbatch_gradients(
    actor: &Mlp<f32>,
    critic: &Mlp<f32>,
    config: &Config,
    mb: &Microbatch,
) -> Result<Vec<Vec<f32>>> {
    let t = mb.actions.len();
    let tape = Tape::new();
    let column =
        |v: &[f32]| -> Result<_> { Ok(tape.constant(&Tensor::from_vec(v.to_vec(), [t])?)) };
    let x = tape.constant(&Tensor::from_vec(mb.observations.clone(), [t, OBS])?);
    let log_probs = actor
        .forward(&tape, &x)?
        .log_softmax(1)?
        .gather(1, &mb.actions, [t, 1])?
        .reshape([t])?;
    let values = critic.forward(&tape, &x)?.reshape([t])?;
    let advantages = column(&mb.advantages)?;
    let ratio = log_probs.sub(&column(&mb.log_probs)?)?.exp()?;
    let clip = config.clip_range;
    let surrogate = advantages.mul(&ratio)?;
    let clipped = advantages.mul(&ratio.clamp(1.0 - clip, 1.0 + clip)?)?;
    let policy_loss = surrogate.minimum(&clipped)?.mean_all()?.neg()?;
    let value_loss = column(&mb.returns)?.sub(&values)?.square()?.mean_all()?;
    let loss = policy_loss.add(&value_loss.mul_scalar(config.vf_coef)?)?;
    let grads = tape.gradient(&loss, &[actor, critic])?;
    actor
        .parameters()
        .into_iter()
        .chain(critic.parameters())
        .map(|p| grads.get(p)?.to_vec())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlgrad_dist::Local;

    #[test]
    fn more_workers_than_environments_is_an_error() {
        let config = Config {
            num_envs: 2,
            ..Config::default()
        };
        let err = Local::run(3, Local::DEFAULT_TIMEOUT, |c| {
            DdPpo::new(config.clone(), c).map(drop)
        })
        .unwrap_err();
        assert_eq!(err.argument(), Some("comm"));
    }
}
