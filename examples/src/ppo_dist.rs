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
//!
//! # Devices
//!
//! [`DdPpo::new_on`] puts every worker's networks, tapes and Adam state on a device (a GPU
//! through `rlgrad_cuda::Cuda`): the rollout's forward passes, the microbatch gradients
//! and the Adam step run there. The gradients travel through the host for the reduction
//! (the [`Collective`] backends reduce host buffers) and go back up for the step
//! ([`Gradients::from_fn`]). Every device gives the Cpu's bits, so the fingerprint is the
//! same on any device and any number of workers.
//!
//! # Checkpoints
//!
//! [`DdPpo::save`] gathers what the next update depends on to rank 0, which writes it as
//! one checkpoint (atomically, through [`CheckpointManager`]): the parameters and Adam's
//! state (the same on every rank), the update counter, and per global environment `e`,
//! under `envs/{e}`, the environment's snapshot (mid-episode included) and its action
//! stream `actions/e`. [`DdPpo::resume`] on any number of workers reads it on rank 0,
//! broadcasts it, and every rank takes the environments it owns: the next update is the
//! one the saving run would have made, bit for bit.

use std::ops::Range;
use std::path::Path;

use rlgrad_autodiff::nn::{Activation, Forward, Init, Mlp, Module};
use rlgrad_autodiff::{ApplyGradients, Gradients, Param, Tape, Tensor};
use rlgrad_checkpoint::{Checkpoint, CheckpointManager, Restore, State};
use rlgrad_core::{Cpu, Error, Result, Rng};
use rlgrad_dist::{
    Collective, GradientReducer, ParamSpec, Scale, global_mean, global_standardize, global_sum,
    owned_range, params_fingerprint,
};
use rlgrad_distributions::Categorical;
use rlgrad_envs::{CartPole, VecEnv};
use rlgrad_optim::{Adam, Optimizer};
use rlgrad_returns::{Episodes, TimeMajor, gae, transpose};

use crate::device::TrainDevice;

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
    /// The update's number, from 1 (counting the updates of the run it resumed).
    pub update: u64,
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

/// Checkpoints kept in a run directory: the newest three.
const KEEP: Option<usize> = Some(3);

/// What every rank holds the same bits of, checkpointed whole.
#[derive(Debug, State)]
struct Learner<D: TrainDevice> {
    #[state(module)]
    actor: Mlp<f32, D>,
    #[state(module)]
    critic: Mlp<f32, D>,
    adam: Optimizer<f32, D>,
    updates: u64,
}

/// The actor's parameters, then the critic's: one module, so that one Adam step updates
/// both.
struct Networks<'a, D: TrainDevice>(&'a mut Mlp<f32, D>, &'a mut Mlp<f32, D>);

impl<D: TrainDevice> Module<f32, D> for Networks<'_, D> {
    fn visit<'a>(&'a self, f: &mut dyn FnMut(&'a Param<f32, D>)) {
        self.0.visit(f);
        self.1.visit(f);
    }
    fn visit_mut<'a>(&'a mut self, f: &mut dyn FnMut(&'a mut Param<f32, D>)) {
        self.0.visit_mut(f);
        self.1.visit_mut(f);
    }
}

/// Global environment `e` and its action stream `actions/e`: what its data depends on
/// besides the parameters, checkpointed under `envs/{e}` whichever rank owns it.
#[derive(Debug, State)]
struct EnvSlot {
    env: VecEnv<CartPole>,
    actions: Rng,
}

impl EnvSlot {
    /// Environment `e` of a fresh run: reset with `seed + e`, whatever the worker.
    fn new(seed: u64, e: usize) -> Result<Self> {
        let mut env = VecEnv::from_fn(1, CartPole::new)?;
        let env_seed = seed.checked_add(e as u64).ok_or_else(|| {
            Error::out_of_range(
                "DdPpo::new",
                "seed",
                format_args!("a seed <= u64::MAX - {e} (environment e gets seed + e)"),
                seed,
            )
        })?;
        env.reset(Some(env_seed))?;
        Ok(Self {
            env,
            actions: Rng::new(seed, &format!("actions/{e}")),
        })
    }

    fn fresh(seed: u64, envs: Range<usize>) -> Result<Vec<Self>> {
        envs.map(|e| Self::new(seed, e)).collect()
    }

    fn prefix(e: usize) -> String {
        format!("envs/{e}")
    }

    fn save_all(checkpoint: &mut Checkpoint, first: usize, slots: &[Self]) -> Result<()> {
        for (e, slot) in (first..).zip(slots) {
            checkpoint.put_state(&Self::prefix(e), slot)?;
        }
        Ok(())
    }

    fn plan_all<'a>(
        plan: &mut Restore<'a>,
        checkpoint: &Checkpoint,
        first: usize,
        slots: &'a mut [Self],
    ) -> Result<()> {
        for (e, slot) in (first..).zip(slots) {
            plan.state(&Self::prefix(e), checkpoint, slot)?;
        }
        Ok(())
    }
}

/// The agent on one worker, its networks on device `D`.
#[derive(Debug)]
pub struct DdPpo<D: TrainDevice = Cpu> {
    config: Config,
    device: D,
    learner: Learner<D>,
    reducer: GradientReducer<f32>,
    /// This worker's environments, global indices from `first_env`.
    envs: Vec<EnvSlot>,
    first_env: usize,
}

impl DdPpo {
    /// The agent of worker `comm.rank()`: the same networks on every worker, its block of
    /// environments. Errors: a configuration without environments, steps or epochs; more
    /// workers than environments.
    pub fn new<C: Collective + ?Sized>(config: Config, comm: &C) -> Result<Self> {
        Self::new_on(&Cpu::default(), config, comm)
    }

    /// Refuses, on every rank, a `dir` that holds checkpoints already, for a run that
    /// starts afresh there (on any device): its saves would replace or fall below them.
    pub fn check_fresh<C: Collective + ?Sized>(comm: &C, dir: &Path) -> Result<()> {
        let function = "DdPpo::check_fresh";
        let checked = if comm.rank() == 0 {
            match CheckpointManager::new(dir, KEEP)?.latest()? {
                Some(saved) => Err(Error::state(
                    function,
                    "dir",
                    "a run directory without checkpoints (or resume from them)",
                    format_args!("checkpoint {} in {}", saved.number, dir.display()),
                )),
                None => Ok(Vec::new()),
            }
        } else {
            Ok(Vec::new())
        };
        from_root(comm, function, checked).map(drop)
    }

    /// [`DdPpo::resume_on`] on the Cpu.
    pub fn resume<C: Collective + ?Sized>(config: Config, comm: &C, dir: &Path) -> Result<Self> {
        Self::resume_on(&Cpu::default(), config, comm, dir)
    }
}

impl<D: TrainDevice> DdPpo<D> {
    /// [`DdPpo::new`]'s agent with its networks on `device` (drawn on the host, then
    /// uploaded): the same bits as on the Cpu.
    pub fn new_on<C: Collective + ?Sized>(device: &D, config: Config, comm: &C) -> Result<Self> {
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
        // Checked here, for every rank alike: a rank that failed alone would leave the
        // others waiting in their first collective.
        let last_env = config.num_envs as u64 - 1;
        if config.seed.checked_add(last_env).is_none() {
            return Err(Error::out_of_range(
                function,
                "config.seed",
                format_args!("a seed <= u64::MAX - {last_env} (environment e gets seed + e)"),
                config.seed,
            ));
        }
        let mine = owned_range(config.num_envs, comm.size(), comm.rank())?;
        let sizes = |out: usize| [OBS, config.hidden, config.hidden, out];
        let actor = Mlp::new_on(
            device,
            "actor",
            &sizes(2),
            Activation::Tanh,
            Activation::Identity,
            Init::TorchDefault,
            &mut Rng::new(config.seed, "init/actor"),
        )?;
        let critic = Mlp::new_on(
            device,
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
        Ok(Self {
            learner: Learner {
                actor,
                critic,
                adam: Optimizer::new_on(device.clone(), Adam::torch(), config.learning_rate)?,
                updates: 0,
            },
            device: device.clone(),
            reducer,
            envs: EnvSlot::fresh(config.seed, mine.clone())?,
            first_env: mine.start,
            config,
        })
    }

    /// Gradient accumulation in `groups` groups per worker: each worker reduces its
    /// microbatches as `groups` workers would own them, group by group
    /// ([`GradientReducer::with_groups`]), so one worker with `groups = K` makes the
    /// additions of `K` workers; the parameters are the same bits for every grouping and
    /// worker count. An error for `groups == 0`.
    pub fn with_accumulation(mut self, groups: usize) -> Result<Self> {
        self.reducer = self.reducer.with_groups(groups)?;
        Ok(self)
    }

    /// What a checkpoint's metadata `run` holds: a checkpoint resumes only the run it
    /// describes (the worker count is not part of it).
    pub fn describe(&self) -> String {
        format!("ppo_dist {:?}", self.config)
    }

    /// The number of updates made, resumed ones included.
    pub fn updates(&self) -> u64 {
        self.learner.updates
    }

    /// Saves the whole run as checkpoint number [`DdPpo::updates`] in `dir`, called by
    /// every rank after the same update: every rank sends its environments and action
    /// streams to rank 0 (in global order), which alone writes one checkpoint, atomically,
    /// keeping the newest three. Every rank returns rank 0's outcome, so that a failed
    /// save stops every rank with the same error rather than leaving them waiting on rank 0.
    pub fn save<C: Collective + ?Sized>(&self, comm: &C, dir: &Path) -> Result<()> {
        let function = "DdPpo::save";
        let mut mine = Checkpoint::new();
        EnvSlot::save_all(&mut mine, self.first_env, &self.envs)?;
        // CartPole's state is a few dozen words per environment: gathering it on every
        // rank costs nothing next to a gradient step, and Collective has no plain gather.
        let gathered = comm.all_gather(&mine.to_bytes()?)?;
        let written = if comm.rank() == 0 {
            self.write_checkpoint(comm.size(), &gathered, dir)
        } else {
            Ok(())
        };
        from_root(comm, function, written.map(|()| Vec::new())).map(drop)
    }

    /// Rank 0's part of [`DdPpo::save`]: every rank's environments, each checked as it is
    /// read back into its own slot, then written with the learner's state.
    fn write_checkpoint(&self, workers: usize, gathered: &[Vec<u8>], dir: &Path) -> Result<()> {
        let mut checkpoint = Checkpoint::from_state(&self.learner)?;
        checkpoint.set_metadata("run", self.describe())?;
        for (rank, bytes) in gathered.iter().enumerate() {
            let theirs = owned_range(self.config.num_envs, workers, rank)?;
            let mut slots = EnvSlot::fresh(self.config.seed, theirs.clone())?;
            let part = Checkpoint::from_bytes(bytes)?;
            let mut plan = Restore::new();
            EnvSlot::plan_all(&mut plan, &part, theirs.start, &mut slots)?;
            part.restore(plan)?;
            EnvSlot::save_all(&mut checkpoint, theirs.start, &slots)?;
        }
        CheckpointManager::new(dir, KEEP)?.save(self.learner.updates, &checkpoint)?;
        Ok(())
    }

    /// The agent of worker `comm.rank()` on `device`, continuing the run saved last in `dir` by
    /// [`DdPpo::save`] on any number of workers: rank 0 reads the checkpoint and
    /// broadcasts it, every rank restores the learner and the environments it owns
    /// among `comm.size()` workers. Errors, the same on every rank: no checkpoint in
    /// `dir`, one that is damaged, or one of another run (another [`Config`]: its
    /// [`DdPpo::describe`] differs), with nothing resumed.
    pub fn resume_on<C: Collective + ?Sized>(
        device: &D,
        config: Config,
        comm: &C,
        dir: &Path,
    ) -> Result<Self> {
        let function = "DdPpo::resume";
        let mut agent = Self::new_on(device, config, comm)?;
        let read = if comm.rank() == 0 {
            latest_checkpoint(function, dir)
        } else {
            Ok(Vec::new())
        };
        let checkpoint = Checkpoint::from_bytes(&from_root(comm, function, read)?)?;
        let saved = checkpoint.metadata("run").unwrap_or("no run");
        if saved != agent.describe() {
            return Err(Error::state(
                function,
                "config",
                format_args!("the run of the checkpoint in {}: {saved}", dir.display()),
                agent.describe(),
            ));
        }
        // Every environment is read back, not only this rank's, so that every rank checks
        // the whole checkpoint and refuses it alike.
        let mut all = EnvSlot::fresh(agent.config.seed, 0..agent.config.num_envs)?;
        let mut plan = Restore::new();
        plan.state("", &checkpoint, &mut agent.learner)?;
        EnvSlot::plan_all(&mut plan, &checkpoint, 0, &mut all)?;
        checkpoint.restore(plan)?;
        let mine = agent.first_env..agent.first_env + agent.envs.len();
        agent.envs = all.drain(mine).collect();
        Ok(agent)
    }

    /// Rollout, advantages, `epochs` reduced gradient steps; the report is the same on
    /// every worker.
    pub fn update<C: Collective + ?Sized>(&mut self, comm: &C) -> Result<UpdateReport> {
        let rollout = self.collect()?;
        let microbatches = self.microbatches(comm, &rollout)?;
        for _ in 0..self.config.epochs {
            let (actor, critic, config) = (&self.learner.actor, &self.learner.critic, &self.config);
            let (first, device) = (self.first_env, &self.device);
            let reduced = self.reducer.reduce(comm, |e| {
                microbatch_gradients(device, actor, critic, config, &microbatches[e - first])
            })?;
            let Learner {
                actor,
                critic,
                adam,
                ..
            } = &mut self.learner;
            let mut networks = Networks(actor, critic);
            let grads = Gradients::from_fn(&networks, |p| {
                let grad = reduced
                    .get(p.name())
                    .expect("the reducer has every parameter");
                Tensor::from_vec_on(device, grad.to_vec(), p.shape().clone())
            })?;
            adam.apply_gradients(&mut networks, &grads)?;
        }
        self.learner.updates += 1;
        let returns: Vec<f32> = rollout.episode_returns.concat();
        let ones = vec![1.0f32; returns.len()];
        let episodes = global_sum(comm, &ones)? as usize;
        let mean_return = if episodes == 0 {
            None
        } else {
            Some(global_mean(comm, &returns)?)
        };
        Ok(UpdateReport {
            update: self.learner.updates,
            mean_return,
            episodes,
        })
    }

    /// The fingerprint of every parameter's bits, in name order
    /// ([`rlgrad_dist::params_fingerprint`]).
    pub fn fingerprint(&self) -> Result<u64> {
        let values: Vec<(String, Vec<f32>)> = self
            .learner
            .actor
            .parameters()
            .into_iter()
            .chain(self.learner.critic.parameters())
            .map(|p| Ok((p.name().to_owned(), p.value().to_vec()?)))
            .collect::<Result<_>>()?;
        let named: Vec<(&str, &[f32])> = values
            .iter()
            .map(|(n, v)| (n.as_str(), v.as_slice()))
            .collect();
        Ok(params_fingerprint(&named))
    }

    /// `[B, OBS]`: the observations this worker's environments act on next.
    fn observations(&self) -> Vec<f32> {
        self.envs
            .iter()
            .flat_map(|slot| slot.env.observations())
            .copied()
            .collect()
    }

    fn collect(&mut self) -> Result<Rollout> {
        let (t, b) = (self.config.rollout_steps, self.envs.len());
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
            let obs = self.observations();
            let tape = Tape::new_on(&self.device).no_grad();
            let x = tape.constant(&Tensor::from_vec_on(&self.device, obs.clone(), [b, OBS])?);
            let pi = Categorical::from_logits(&self.learner.actor.forward(&tape, &x)?)?;
            let actions = pi.sample_each(self.envs.iter_mut().map(|slot| &mut slot.actions))?;
            r.log_probs.extend(pi.log_prob(&actions)?.to_vec()?);
            r.actions.extend_from_slice(&actions);
            let values = self.learner.critic.forward(&tape, &x)?.value().to_vec()?;
            r.observations.extend_from_slice(&obs);
            r.values.extend_from_slice(&values);
            let mut finals = Vec::with_capacity(b * OBS);
            for (e, (&a, slot)) in actions.iter().zip(&mut self.envs).enumerate() {
                let step = slot.env.step(&[a])?;
                r.rewards.extend_from_slice(step.rewards);
                r.terminated.extend_from_slice(step.terminated);
                r.truncated.extend_from_slice(step.truncated);
                finals.extend_from_slice(step.final_observations);
                for finished in step.finished {
                    r.episode_returns[e].push(finished.episode_return as f32);
                }
            }
            // V(final observation) for the truncation bootstrap.
            let x = tape.constant(&Tensor::from_vec_on(&self.device, finals, [b, OBS])?);
            r.final_values
                .extend(self.learner.critic.forward(&tape, &x)?.value().to_vec()?);
        }
        Ok(r)
    }

    /// GAE, globally normalized advantages, and one microbatch per environment.
    fn microbatches<C: Collective + ?Sized>(
        &self,
        comm: &C,
        r: &Rollout,
    ) -> Result<Vec<Microbatch>> {
        let (t, b) = (self.config.rollout_steps, self.envs.len());
        let tape = Tape::new_on(&self.device).no_grad();
        let observations = Tensor::from_vec_on(&self.device, self.observations(), [b, OBS])?;
        let x = tape.constant(&observations);
        let bootstrap = self.learner.critic.forward(&tape, &x)?.value().to_vec()?;
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

/// The bytes of the latest checkpoint in `dir`.
fn latest_checkpoint(function: &'static str, dir: &Path) -> Result<Vec<u8>> {
    let latest = CheckpointManager::new(dir, KEEP)?.latest()?;
    let Some(saved) = latest else {
        return Err(Error::state(
            function,
            "dir",
            "a directory holding a checkpoint",
            format_args!("none in {}", dir.display()),
        ));
    };
    std::fs::read(&saved.path).map_err(|e| Error::io(function, "read", &saved.path, e))
}

/// Rank 0's `outcome` on every rank: its bytes, or its error (rank 0's own error there,
/// one that quotes it elsewhere), so that what rank 0 alone does (reading, writing a
/// file) succeeds or fails on every rank together instead of leaving the others waiting
/// in their next collective.
fn from_root<C: Collective + ?Sized>(
    comm: &C,
    function: &'static str,
    outcome: Result<Vec<u8>>,
) -> Result<Vec<u8>> {
    const OK: u8 = 0;
    let mut message = match &outcome {
        Ok(bytes) => [&[OK], bytes.as_slice()].concat(),
        Err(e) => [&[OK + 1], e.to_string().as_bytes()].concat(),
    };
    comm.broadcast(0, &mut message)?;
    if comm.rank() == 0 {
        return outcome;
    }
    match message.split_first() {
        Some((&OK, bytes)) => Ok(bytes.to_vec()),
        _ => Err(Error::Device {
            function,
            device: "rank 0".to_owned(),
            message: String::from_utf8_lossy(message.get(1..).unwrap_or_default()).into_owned(),
            cause: None,
        }),
    }
}

/// The gradients of one microbatch's PPO loss, actor parameters then critic parameters.
fn microbatch_gradients<D: TrainDevice>(
    device: &D,
    actor: &Mlp<f32, D>,
    critic: &Mlp<f32, D>,
    config: &Config,
    mb: &Microbatch,
) -> Result<Vec<Vec<f32>>> {
    let t = mb.actions.len();
    let tape = Tape::new_on(device);
    let on_device = |v: &[f32], shape: &[usize]| Tensor::from_vec_on(device, v.to_vec(), shape);
    let column = |v: &[f32]| -> Result<_> { Ok(tape.constant(&on_device(v, &[t])?)) };
    let x = tape.constant(&on_device(&mb.observations, &[t, OBS])?);
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
