//! PPO with a recurrent policy on CartPole without velocities, and the same PPO with a
//! memoryless policy for comparison.
//!
//! The hyper-parameters are RL Zoo's for sb3-contrib's `RecurrentPPO` on
//! `CartPoleNoVel-v1`: 8 environments, 32-step rollouts, 20 epochs of one minibatch,
//! gamma 0.98, GAE lambda 0.8, learning rate and clip range decaying linearly from 1e-3
//! and 0.2 to 0 over the budget, no entropy bonus, value coefficient 0.5, gradients
//! clipped to a global norm of 0.5, Adam with eps 1e-5; separate LSTMs (64 units) for the
//! policy and the value, each followed by a 64-unit ReLU layer; observations normalized
//! with running statistics (SB3's `VecNormalize` without reward normalization,
//! [`Normalizer`]).
//!
//! One unit of training is a rollout of `8 x 32` steps and its update:
//!
//! 1. **Rollout** from a [`VecEnv`] (same-step auto-reset): the LSTM states of each
//!    environment carry from step to step, are stored before every step, and restart at
//!    zero with each episode. A truncated episode's final observation gets its value from
//!    the critic's state after the last step: the truncation bootstrap.
//! 2. **Advantages** by [`rlgrad_returns::gae`] over the `[T, B]` rollout with
//!    Gymnasium's `terminated` / `truncated` flags and those final values.
//! 3. **Sequences**: the rollout, made batch-major, is cut by
//!    [`rlgrad_mask::chop_into_sequences`] at episode ends (and every 32 steps) into
//!    padded sequences, each starting from the LSTM states stored at its first step.
//! 4. **Update**: per epoch, the sequences are shuffled into minibatches of whole
//!    sequences ([`rlgrad_mask::SequenceBatch::minibatches`]); the LSTMs run over each
//!    padded minibatch, and the clipped surrogate, the value loss and the entropy are
//!    masked means over the valid steps ([`rlgrad_autodiff::Var::masked_mean`]), the
//!    advantages normalized over the valid steps ([`rlgrad_autodiff::Var::masked_normalize`],
//!    unbiased std, eps 1e-8, as SB3).
//!
//! With [`Memory::None`] the LSTMs are dense layers: the policy sees only the current
//! `[x, theta]`, and cannot know which way the pole moves.
//!
//! The networks, Adam and the tapes live on any [`TrainDevice`] (`--device cuda`), with
//! the Cpu's bits; the environments, the normalizer, the rollout, GAE and the chopping
//! into sequences stay on the host. A step of the rollout sends the observations and the
//! recurrent states in one transfer and reads back twice (the probabilities the actions
//! are drawn from, then what the rollout keeps); a minibatch goes to the device in one
//! transfer; its global-norm clip decides on the device
//! ([`rlgrad_autodiff::Gradients::clip_global_norm_on_device`], the same bits as reading
//! the norm back), and an update reads back only the diagnostics it logs, once at its end
//! (it logs every update).

mod normalize;
mod policy;

pub use normalize::Normalizer;
pub use policy::{Branch, Memory, Policy};

use rlgrad_autodiff::{ApplyGradients, Tape, Var};
use rlgrad_checkpoint::State;
use rlgrad_core::{Cpu, Error, Result, Rng};
use rlgrad_distributions::Categorical;
use rlgrad_envs::{CartPoleNoVelocity, VecEnv};
use rlgrad_mask::{ChopConfig, Column, SequenceBatch, Sequences, chop_into_sequences};
use rlgrad_optim::{Adam, Optimizer, Schedule};
use rlgrad_returns::{Episodes, TimeMajor, gae, transpose};
use rlgrad_tensor::Tensor;

use crate::cli::Build;
use crate::device::TrainDevice;
use crate::run::{Agent, EpisodeLog, Logger, Options, Target};

/// RL Zoo's hyper-parameters for `CartPoleNoVel-v1`.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// An LSTM policy and value, or memoryless ones. Default LSTM.
    pub memory: Memory,
    /// Units of the LSTM (or dense layer) and of the hidden layer. Default 64.
    pub units: usize,
    /// Environments stepped together. Default 8.
    pub num_envs: usize,
    /// Steps per environment per rollout. Default 32.
    pub rollout_steps: usize,
    /// Passes over each rollout. Default 20.
    pub epochs: usize,
    /// Minibatches of whole sequences per epoch. Default 1 (RL Zoo's batch of 256 steps).
    pub minibatches: usize,
    /// The longest training sequence. Default 32.
    pub max_seq_len: usize,
    /// The discount. Default 0.98.
    pub gamma: f32,
    /// GAE's lambda. Default 0.8.
    pub gae_lambda: f32,
    /// The first learning rate, decaying linearly to 0 over the budget. Default 1e-3.
    pub learning_rate: f64,
    /// The first clip range, decaying linearly to 0 over the budget. Default 0.2.
    pub clip_range: f64,
    /// Weight of the entropy loss. Default 0.
    pub ent_coef: f32,
    /// Weight of the value loss. Default 0.5.
    pub vf_coef: f32,
    /// The global gradient norm clip. Default 0.5.
    pub max_grad_norm: f64,
    /// Adam's eps (SB3's). Default 1e-5.
    pub adam_eps: f64,
    /// Normalize observations with running statistics (RL Zoo's `normalize`). Default
    /// true.
    pub normalize_observations: bool,
    /// Reached at a mean return of 475 over the last 50 episodes.
    pub target: Target,
}

impl Config {
    /// RL Zoo's configuration with the LSTM policy.
    pub fn recurrent() -> Self {
        Self {
            memory: Memory::Lstm,
            units: 64,
            num_envs: 8,
            rollout_steps: 32,
            epochs: 20,
            minibatches: 1,
            max_seq_len: 32,
            gamma: 0.98,
            gae_lambda: 0.8,
            learning_rate: 1e-3,
            clip_range: 0.2,
            ent_coef: 0.0,
            vf_coef: 0.5,
            max_grad_norm: 0.5,
            adam_eps: 1e-5,
            normalize_observations: true,
            target: Target {
                window: 50,
                threshold: 475.0,
            },
        }
    }

    /// The same PPO with memoryless networks of the same shape.
    pub fn memoryless() -> Self {
        Self {
            memory: Memory::None,
            ..Self::recurrent()
        }
    }

    fn rollout_size(&self) -> u64 {
        (self.num_envs * self.rollout_steps) as u64
    }
}

/// Builds PPO on any device, its schedules over the budget: the example's `--device`.
impl Build for Config {
    type Agent<D: TrainDevice> = Ppo<D>;

    fn build<D: TrainDevice>(&self, options: &Options, device: &D) -> Result<Ppo<D>> {
        Ppo::new_on(device, self.clone(), options.seed, options.budget)
    }
}

/// SB3's linear schedule: the update that follows `u` rollouts of `rollout` steps uses
/// `base * (1 - u * rollout / total)` (0 at the end of the budget `total`), constant over
/// the `steps_per_update` optimizer steps of that update.
#[derive(Debug, Clone, Copy, PartialEq)]
struct LinearPerUpdate {
    base: f64,
    steps_per_update: u64,
    rollout: u64,
    total: u64,
}

impl LinearPerUpdate {
    /// SB3's `progress_remaining` during update `update` (1, 2, ...).
    fn remaining(&self, update: u64) -> f64 {
        (1.0 - (update * self.rollout) as f64 / self.total as f64).max(0.0)
    }
}

impl Schedule for LinearPerUpdate {
    fn lr(&self, step: u64) -> f64 {
        self.base * self.remaining(step / self.steps_per_update + 1)
    }

    // Saved with the optimizer's state, so that a resume with another budget is refused.
    fn spec(&self) -> Option<String> {
        Some(format!("{self:?}"))
    }
}

/// One rollout, time-major (`row = t * B + env`).
#[derive(Debug, Default)]
struct Rollout {
    observations: Vec<f32>,
    actions: Vec<usize>,
    log_probs: Vec<f32>,
    values: Vec<f32>,
    rewards: Vec<f32>,
    terminated: Vec<bool>,
    truncated: Vec<bool>,
    final_values: Vec<f32>,
    actor_states: Vec<f32>,
    critic_states: Vec<f32>,
}

impl Rollout {
    fn clear(&mut self) {
        self.observations.clear();
        self.actions.clear();
        self.log_probs.clear();
        self.values.clear();
        self.rewards.clear();
        self.terminated.clear();
        self.truncated.clear();
        self.final_values.clear();
        self.actor_states.clear();
        self.critic_states.clear();
    }
}

/// The training sequences of one rollout and the recurrent states they start from.
#[derive(Debug)]
struct Chopped {
    /// Columns: observations, actions, old log-probabilities, advantages, returns.
    batch: SequenceBatch<f32>,
    /// Batch-major rows (`env * T + t`) of the states stored before each step.
    actor_states: Vec<f32>,
    critic_states: Vec<f32>,
}

/// Per-update sums of the losses and diagnostics, and the minibatches they sum over.
#[derive(Debug, Default)]
struct UpdateStats {
    policy_loss: f64,
    value_loss: f64,
    entropy: f64,
    approx_kl: f64,
    clip_fraction: f64,
    minibatches: usize,
}

/// What a minibatch step leaves of its losses for the log, in this order, `[5]`.
const DIAGNOSTICS: usize = 5;

impl UpdateStats {
    /// The sums of the minibatches' diagnostics (each `[DIAGNOSTICS]`, left on the
    /// device by the steps), in f64 in minibatch order: one read for the whole update.
    fn sum<D: TrainDevice>(diagnostics: &[Tensor<f32, D>]) -> Result<Self> {
        let mut stats = Self::default();
        if diagnostics.is_empty() {
            return Ok(stats);
        }
        let all = Tensor::concat(&diagnostics.iter().collect::<Vec<_>>(), 0)?.to_vec()?;
        for step in all.chunks_exact(DIAGNOSTICS) {
            let [policy, value, entropy, kl, clip_fraction] =
                <[f32; DIAGNOSTICS]>::try_from(step).expect("chunks of DIAGNOSTICS");
            stats.policy_loss += f64::from(policy);
            stats.value_loss += f64::from(value);
            stats.entropy -= f64::from(entropy);
            stats.approx_kl += f64::from(kl);
            stats.clip_fraction += f64::from(clip_fraction);
            stats.minibatches += 1;
        }
        Ok(stats)
    }
}

/// A minibatch of padded sequences as [`ppo_losses`] reads it: batch-major `[S, T, ...]`
/// columns (`S` sequences padded to `T` steps, as [`SequenceBatch`] holds them) and each
/// sequence's initial recurrent states. What the padded steps hold does not matter: the
/// loss selects them out before any arithmetic.
#[derive(Debug, Clone, Copy)]
pub struct Minibatch<'a> {
    /// The sequences' lengths and padded length.
    pub seqs: &'a Sequences,
    /// `[S, T, observation width]`.
    pub observations: &'a [f32],
    /// `[S, T]`, action indices as floats.
    pub actions: &'a [f32],
    /// `[S, T]`, the log-probabilities of the actions when they were taken.
    pub old_log_probs: &'a [f32],
    /// `[S, T]`, GAE advantages (normalized by the loss over the valid steps).
    pub advantages: &'a [f32],
    /// `[S, T]`, the value targets.
    pub returns: &'a [f32],
    /// `[S, actor state width]`: each sequence's actor state at its first step.
    pub actor_state0: &'a [f32],
    /// `[S, critic state width]`.
    pub critic_state0: &'a [f32],
}

/// The terms of the PPO loss of a minibatch, on its tape (on device `D`).
#[derive(Debug)]
pub struct Losses<'t, D: TrainDevice = Cpu> {
    /// `policy + ent_coef * entropy + vf_coef * value`, what the update differentiates.
    pub total: Var<'t, f32, D>,
    /// The clipped surrogate, negated: `-masked_mean(min(A r, A clip(r)))`.
    pub policy: Var<'t, f32, D>,
    /// `masked_mean((returns - V)^2)`.
    pub value: Var<'t, f32, D>,
    /// The entropy, negated: `-masked_mean(H)`.
    pub entropy: Var<'t, f32, D>,
    /// `log pi(a|s) - log pi_old(a|s)`, `[S, T]`.
    pub log_ratio: Var<'t, f32, D>,
    /// `exp(log_ratio)`, `[S, T]`.
    pub ratio: Var<'t, f32, D>,
}

/// Host slices sent to `device` in one transfer (each transfer costs a round trip on a
/// GPU, whatever its size), each handed back as a tensor of its shape: views of the one
/// buffer, with the bits of separate uploads.
fn upload<D: TrainDevice, const N: usize>(
    device: &D,
    parts: [(&[f32], &[usize]); N],
) -> Result<[Tensor<f32, D>; N]> {
    let len = parts.iter().map(|(values, _)| values.len()).sum();
    let mut data = Vec::with_capacity(len);
    for (values, _) in &parts {
        data.extend_from_slice(values);
    }
    let all = Tensor::from_vec_on(device, data, [len])?;
    let mut start = 0;
    let mut tensors = Vec::with_capacity(N);
    for (values, shape) in parts {
        tensors.push(all.narrow(0, start, values.len())?.reshape(shape)?);
        start += values.len();
    }
    Ok(tensors.try_into().expect("one tensor per part"))
}

/// SB3's PPO loss of `batch` under `policy` with clip range `clip` and `config`'s
/// coefficients: the clipped surrogate, the value loss and the entropy as masked means
/// over the valid steps, the advantages normalized over the valid steps. The minibatch
/// goes to the tape's device in one transfer.
///
/// Padding is selected out at the entrance ([`Var::zero_padding`] of every column,
/// [`Branch::run`] for the observations, action 0 at padded steps), never multiplied by a
/// zero mask: the losses and every gradient are bitwise
/// those of zero padding, whatever the padded steps of `batch` hold (NaN, inf, stale
/// values), which a test checks.
pub fn ppo_losses<'t, D: TrainDevice>(
    policy: &Policy<D>,
    tape: &'t Tape<f32, D>,
    batch: &Minibatch<'_>,
    clip: f32,
    config: &Config,
) -> Result<Losses<'t, D>> {
    let seqs = batch.seqs;
    let (s, t) = (seqs.batch(), seqs.max_len());
    let dim = batch.observations.len() / (s * t).max(1);
    let [
        x,
        old_log_probs,
        advantages,
        returns,
        actor_state0,
        critic_state0,
    ] = upload(
        tape.device(),
        [
            (batch.observations, &[s, t, dim]),
            (batch.old_log_probs, &[s, t]),
            (batch.advantages, &[s, t]),
            (batch.returns, &[s, t]),
            (batch.actor_state0, &[s, policy.actor.state_width()]),
            (batch.critic_state0, &[s, policy.critic.state_width()]),
        ],
    )?;
    let column = |values: &Tensor<f32, D>| tape.constant(values).zero_padding(seqs);
    // The branches select the observations' padding out themselves.
    let x = tape.constant(&x);
    let old_log_probs = column(&old_log_probs)?;
    let advantages = column(&advantages)?.masked_normalize(seqs, 1e-8, 1)?;
    let returns = column(&returns)?;
    // An action index is not arithmetic, but a padded one must still be a valid index.
    let valid = seqs.mask()?;
    let actions: Vec<usize> = batch
        .actions
        .iter()
        .zip(valid.as_bools())
        .map(|(&a, &valid)| if valid { a as usize } else { 0 })
        .collect();

    let logits = policy.actor.run(tape, &x, seqs, &actor_state0)?;
    let values = policy
        .critic
        .run(tape, &x, seqs, &critic_state0)?
        .reshape([s, t])?;
    let all_log_probs = logits.log_softmax(1)?;
    let log_probs = all_log_probs
        .gather(1, &actions, [s * t, 1])?
        .reshape([s, t])?;
    let entropy = all_log_probs
        .exp()?
        .mul(&all_log_probs)?
        .sum(1, false)?
        .neg()?
        .reshape([s, t])?;

    let log_ratio = log_probs.sub(&old_log_probs)?;
    let ratio = log_ratio.exp()?;
    let surrogate = advantages.mul(&ratio)?;
    let clipped = advantages.mul(&ratio.clamp(1.0 - clip, 1.0 + clip)?)?;
    let policy_loss = surrogate.minimum(&clipped)?.masked_mean(seqs)?.neg()?;
    let value_loss = returns.sub(&values)?.square()?.masked_mean(seqs)?;
    let entropy_loss = entropy.masked_mean(seqs)?.neg()?;
    let total = policy_loss
        .add(&entropy_loss.mul_scalar(config.ent_coef)?)?
        .add(&value_loss.mul_scalar(config.vf_coef)?)?;
    Ok(Losses {
        total,
        policy: policy_loss,
        value: value_loss,
        entropy: entropy_loss,
        log_ratio,
        ratio,
    })
}

/// The agent: policy and value networks, Adam and the tapes on device `D`; the
/// environments and their recurrent states, two random streams (`actions`,
/// `minibatches`) on the host.
#[derive(Debug, State)]
pub struct Ppo<D: TrainDevice = Cpu> {
    #[state(skip)]
    config: Config,
    #[state(skip)]
    seed: u64,
    #[state(skip)]
    budget: u64,
    #[state(module)]
    policy: Policy<D>,
    adam: Optimizer<f32, D>,
    #[state(skip)]
    schedule: LinearPerUpdate,
    env: VecEnv<CartPoleNoVelocity>,
    normalizer: Option<Normalizer>,
    /// What the policy sees of the environments' observations, `[B, obs]`.
    observations: Vec<f32>,
    actor_state: Vec<f32>,
    critic_state: Vec<f32>,
    actions_rng: Rng,
    minibatch_rng: Rng,
    episodes: EpisodeLog,
    env_steps: u64,
    updates: u64,
    #[state(skip)]
    no_grad: Tape<f32, D>,
    #[state(skip)]
    tape: Tape<f32, D>,
    #[state(skip)]
    rollout: Rollout,
}

impl Ppo {
    /// A fresh agent on the Cpu whose schedules run over `budget` environment steps:
    /// networks drawn from stream `init` of `seed`, environments reset with `seed + i`.
    pub fn new(config: Config, seed: u64, budget: u64) -> Result<Self> {
        Self::new_on(&Cpu::default(), config, seed, budget)
    }
}

impl<D: TrainDevice> Ppo<D> {
    /// [`Ppo::new`]'s agent on `device`, with its bits on every device.
    pub fn new_on(device: &D, config: Config, seed: u64, budget: u64) -> Result<Self> {
        if budget == 0 {
            return Err(Error::value("Ppo::new", "budget", "at least 1 step", 0));
        }
        let mut env = VecEnv::from_fn(config.num_envs, CartPoleNoVelocity::new)?;
        env.reset(Some(seed))?;
        let dim = env.single_observation_space().dim();
        let mut normalizer = config.normalize_observations.then(|| Normalizer::new(dim));
        let observations = observe(&mut normalizer, env.observations());
        let policy = Policy::new_on(
            device,
            config.memory,
            dim,
            2,
            config.units,
            &mut Rng::new(seed, "init"),
        )?;
        let schedule = LinearPerUpdate {
            base: config.learning_rate,
            steps_per_update: (config.epochs * config.minibatches) as u64,
            rollout: config.rollout_size(),
            total: budget,
        };
        let adam = Optimizer::new_on(
            device.clone(),
            Adam {
                eps: config.adam_eps,
                ..Adam::torch()
            },
            schedule,
        )?;
        let b = config.num_envs;
        Ok(Self {
            actor_state: vec![0.0; b * policy.actor.state_width()],
            critic_state: vec![0.0; b * policy.critic.state_width()],
            policy,
            adam,
            schedule,
            env,
            normalizer,
            observations,
            actions_rng: Rng::new(seed, "actions"),
            minibatch_rng: Rng::new(seed, "minibatches"),
            episodes: EpisodeLog::default(),
            env_steps: 0,
            updates: 0,
            no_grad: Tape::new_on(device).no_grad(),
            tape: Tape::new_on(device),
            rollout: Rollout::default(),
            config,
            seed,
            budget,
        })
    }

    /// The networks.
    pub fn policy(&self) -> &Policy<D> {
        &self.policy
    }

    /// Steps every environment `rollout_steps` times, recording the rollout; returns
    /// `V(s_T)` of each environment, the bootstrap of the last step.
    fn collect(&mut self) -> Result<Vec<f32>> {
        let b = self.config.num_envs;
        let dim = self.env.single_observation_space().dim();
        let widths = [
            self.policy.actor.state_width(),
            self.policy.critic.state_width(),
        ];
        let tape = &self.no_grad;
        let rollout = &mut self.rollout;
        rollout.clear();
        for _ in 0..self.config.rollout_steps {
            rollout.observations.extend_from_slice(&self.observations);
            rollout.actor_states.extend_from_slice(&self.actor_state);
            rollout.critic_states.extend_from_slice(&self.critic_state);
            let [x, actor_state, critic_state] = upload(
                tape.device(),
                [
                    (&self.observations, &[b, dim]),
                    (&self.actor_state, &[b, widths[0]]),
                    (&self.critic_state, &[b, widths[1]]),
                ],
            )?;
            let x = tape.constant(&x);
            let (logits, actor_next) = self.policy.actor.step(tape, &x, &actor_state)?;
            let (values, critic_next) = self.policy.critic.step(tape, &x, &critic_state)?;
            let pi = Categorical::from_logits(&logits)?;
            let actions = pi.sample(&mut self.actions_rng)?;
            // What the rollout keeps of the step, read back at once: each environment's
            // log-probability of its action, its value and its next states.
            let log_probs = pi.log_prob(&actions)?.reshape([b, 1])?;
            let mut kept = vec![&log_probs, &values];
            kept.extend(actor_next.iter().chain(&critic_next));
            let rows = Var::concat(&kept, 1)?.to_vec()?;
            self.actor_state.clear();
            self.critic_state.clear();
            for row in rows.chunks_exact(2 + widths[0] + widths[1]) {
                let (actor, critic) = row[2..].split_at(widths[0]);
                rollout.log_probs.push(row[0]);
                rollout.values.push(row[1]);
                self.actor_state.extend_from_slice(actor);
                self.critic_state.extend_from_slice(critic);
            }
            let step = self.env.step(&actions)?;
            rollout.actions.extend_from_slice(&actions);
            rollout.rewards.extend_from_slice(step.rewards);
            rollout.terminated.extend_from_slice(step.terminated);
            rollout.truncated.extend_from_slice(step.truncated);
            self.observations = observe(&mut self.normalizer, step.observations);
            let bootstrapped: Vec<bool> = (0..b)
                .map(|i| step.truncated[i] && !step.terminated[i])
                .collect();
            if bootstrapped.contains(&true) {
                let last = scaled(&self.normalizer, step.final_observations);
                let final_values =
                    values_of(&self.policy.critic, tape, b, &last, &self.critic_state)?;
                rollout.final_values.extend((0..b).map(|i| {
                    if bootstrapped[i] {
                        final_values[i]
                    } else {
                        0.0
                    }
                }));
            } else {
                rollout.final_values.extend(std::iter::repeat_n(0.0, b));
            }
            self.env_steps += b as u64;
            for episode in step.finished {
                self.episodes.push(self.env_steps, episode.episode_return);
                let restart = |state: &mut [f32], width: usize| {
                    state[episode.env * width..(episode.env + 1) * width].fill(0.0);
                };
                restart(&mut self.actor_state, widths[0]);
                restart(&mut self.critic_state, widths[1]);
            }
        }
        // The bootstrap value sees what the policy sees: the normalized observations.
        values_of(
            &self.policy.critic,
            tape,
            b,
            &self.observations,
            &self.critic_state,
        )
    }
    /// The rollout's advantages and returns, made batch-major and cut into sequences.
    fn chop(&self, bootstrap: &[f32]) -> Result<Chopped> {
        let (t, b) = (self.config.rollout_steps, self.config.num_envs);
        let r = &self.rollout;
        let out = gae(
            TimeMajor::new(t, b),
            &r.rewards,
            &r.values,
            bootstrap,
            Episodes::gymnasium(
                self.config.gamma,
                &r.terminated,
                &r.truncated,
                &r.final_values,
            ),
            self.config.gae_lambda,
        )?;
        let dim = r.observations.len() / (t * b);
        let actions: Vec<f32> = r.actions.iter().map(|&a| a as f32).collect();
        let ended: Vec<bool> = r
            .terminated
            .iter()
            .zip(&r.truncated)
            .map(|(&a, &b)| a || b)
            .collect();
        let ended = transpose(&ended, t, b, 1)?;
        // An id per episode piece: a new one after each end and at each environment's
        // first step.
        let mut ids = Vec::with_capacity(t * b);
        let mut id = 0i64;
        for (row, &end) in ended.iter().enumerate() {
            if row % t == 0 {
                id += 1;
            }
            ids.push(id);
            if end {
                id += 1;
            }
        }
        let observations = transpose(&r.observations, t, b, dim)?;
        let actions = transpose(&actions, t, b, 1)?;
        let log_probs = transpose(&r.log_probs, t, b, 1)?;
        let advantages = transpose(&out.advantages, t, b, 1)?;
        let returns = transpose(&out.returns, t, b, 1)?;
        let config = ChopConfig {
            require_contiguous_episodes: true,
            ..ChopConfig::new(self.config.max_seq_len)
        };
        let columns = [
            (&observations, dim),
            (&actions, 1),
            (&log_probs, 1),
            (&advantages, 1),
            (&returns, 1),
        ]
        .map(|(data, width)| Column { data, width });
        let batch = chop_into_sequences(&ids, &columns, config)?;
        let actor_width = self.policy.actor.state_width();
        let critic_width = self.policy.critic.state_width();
        Ok(Chopped {
            batch,
            actor_states: transpose(&r.actor_states, t, b, actor_width)?,
            critic_states: transpose(&r.critic_states, t, b, critic_width)?,
        })
    }

    /// One gradient step on the minibatch `batch` of `sequences` with clip range `clip`;
    /// its diagnostics (`[DIAGNOSTICS]`) left on the device.
    fn learn_minibatch(
        &mut self,
        sequences: &Chopped,
        batch: &SequenceBatch<f32>,
        clip: f32,
    ) -> Result<Tensor<f32, D>> {
        let column = |k: usize| batch.column(k).expect("five columns were chopped");
        let gather_states = |states: &[f32], width: usize| -> Vec<f32> {
            batch
                .starts()
                .iter()
                .flat_map(|&row| &states[row * width..(row + 1) * width])
                .copied()
                .collect()
        };
        let actor_state0 = gather_states(&sequences.actor_states, self.policy.actor.state_width());
        let critic_state0 =
            gather_states(&sequences.critic_states, self.policy.critic.state_width());
        let minibatch = Minibatch {
            seqs: batch.seqs(),
            observations: column(0),
            actions: column(1),
            old_log_probs: column(2),
            advantages: column(3),
            returns: column(4),
            actor_state0: &actor_state0,
            critic_state0: &critic_state0,
        };
        self.tape.reset();
        let tape = &self.tape;
        let losses = ppo_losses(&self.policy, tape, &minibatch, clip, &self.config)?;
        let mut grads = tape.gradient(&losses.total, &[&self.policy])?;
        // Decided on the device (the same bits): a GPU does not wait here for the norm.
        grads.clip_global_norm_on_device(self.config.max_grad_norm)?;
        self.adam.apply_gradients(&mut self.policy, &grads)?;

        // SB3's diagnostics: approx_kl = mean((ratio - 1) - log_ratio), and the share of
        // steps whose ratio left the clip range.
        let seqs = minibatch.seqs;
        let (log_ratio, ratio) = (losses.log_ratio.detach(), losses.ratio.detach());
        let kl = ratio.add_scalar(-1.0)?.sub(&log_ratio)?.masked_mean(seqs)?;
        let clip = tape.constant(&Tensor::full_on(tape.device(), (), clip)?);
        let outside = tape.constant(&ratio.add_scalar(-1.0)?.abs()?.gt(&clip)?);
        let clip_fraction = outside.masked_mean(seqs)?;
        let diagnostics = [
            &losses.policy,
            &losses.value,
            &losses.entropy,
            &kl,
            &clip_fraction,
        ];
        Tensor::stack(&diagnostics.map(Var::value), 0)
    }

    /// `epochs` passes of minibatch steps over the rollout's sequences.
    fn learn(&mut self, sequences: &Chopped) -> Result<UpdateStats> {
        let clip = (self.config.clip_range * self.schedule.remaining(self.updates + 1)) as f32;
        let mut diagnostics = Vec::new();
        for _ in 0..self.config.epochs {
            let groups = sequences
                .batch
                .minibatches(self.config.minibatches, &mut self.minibatch_rng)?;
            for group in groups {
                let batch = sequences.batch.select(&group)?;
                diagnostics.push(self.learn_minibatch(sequences, &batch, clip)?);
            }
        }
        UpdateStats::sum(&diagnostics)
    }
}

/// `V(s)` of the `b` rows of `observations` (`[b, obs]`) from the critic's recurrent
/// states `state` (`[b, state_width]`), read back: the bootstraps of the rollout.
fn values_of<D: TrainDevice>(
    critic: &Branch<D>,
    tape: &Tape<f32, D>,
    b: usize,
    observations: &[f32],
    state: &[f32],
) -> Result<Vec<f32>> {
    let [x, state] = upload(
        tape.device(),
        [
            (observations, &[b, observations.len() / b]),
            (state, &[b, critic.state_width()]),
        ],
    )?;
    let (values, _) = critic.step(tape, &tape.constant(&x), &state)?;
    values.to_vec()
}

/// The policy's view of environment observations `raw`: normalized after adding them
/// to the statistics (what `VecNormalize` does with every reset and step), or as they are.
fn observe(normalizer: &mut Option<Normalizer>, raw: &[f32]) -> Vec<f32> {
    match normalizer {
        Some(normalizer) => {
            normalizer.update(raw);
            normalizer.normalize(raw)
        }
        None => raw.to_vec(),
    }
}

/// `raw` normalized with the current statistics, not added to them (`VecNormalize`'s
/// final observations), or as it is.
fn scaled(normalizer: &Option<Normalizer>, raw: &[f32]) -> Vec<f32> {
    match normalizer {
        Some(normalizer) => normalizer.normalize(raw),
        None => raw.to_vec(),
    }
}

impl<D: TrainDevice> Agent for Ppo<D> {
    const UNIT: &'static str = "steps";
    /// RL Zoo's `n_timesteps`.
    const DEFAULT_BUDGET: u64 = 100_000;
    const DEFAULT_CHECKPOINT_EVERY: u64 = 10_000;

    fn name(&self) -> &'static str {
        match self.config.memory {
            Memory::Lstm => "recurrent_ppo",
            Memory::None => "ppo_mlp",
        }
    }

    /// A rollout and its update.
    fn advance(&mut self, log: &mut Logger) -> Result<()> {
        let bootstrap = self.collect()?;
        let sequences = self.chop(&bootstrap)?;
        let stats = self.learn(&sequences)?;
        self.updates += 1;
        let n = stats.minibatches as f64;
        let step = self.env_steps;
        log.scalar("train/policy_loss", step, stats.policy_loss / n)?;
        log.scalar("train/value_loss", step, stats.value_loss / n)?;
        log.scalar("train/entropy", step, stats.entropy / n)?;
        log.scalar("train/approx_kl", step, stats.approx_kl / n)?;
        log.scalar("train/clip_fraction", step, stats.clip_fraction / n)?;
        let lr = self.config.learning_rate * self.schedule.remaining(self.updates);
        log.scalar("train/learning_rate", step, lr)
    }

    fn env_steps(&self) -> u64 {
        self.env_steps
    }

    fn episodes(&self) -> &EpisodeLog {
        &self.episodes
    }

    fn target(&self) -> Target {
        self.config.target
    }

    fn describe(&self) -> String {
        format!(
            "{:?}, budget {}, seed {}",
            self.config, self.budget, self.seed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_is_sb3s_linear_decay_per_update() {
        let schedule = LinearPerUpdate {
            base: 1e-3,
            steps_per_update: 20,
            rollout: 256,
            total: 1024,
        };
        // Update 1 (optimizer steps 0..20) already counts its own rollout, as SB3 does.
        assert_eq!(schedule.lr(0), 1e-3 * 0.75);
        assert_eq!(schedule.lr(19), 1e-3 * 0.75);
        assert_eq!(schedule.lr(20), 1e-3 * 0.5);
        assert_eq!(schedule.lr(79), 0.0);
        assert_eq!(schedule.lr(1000), 0.0);
    }
}
