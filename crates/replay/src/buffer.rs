//! [`ReplayBuffer`]: the ring of transitions, n-step windows, sampling.

use rlgrad_core::{Error, Float, Result, Rng, check};

use crate::sum_tree::SumTree;

/// What a [`ReplayBuffer`] holds and how it forms its transitions. Build it with
/// [`Config::new`] and the setters; every default is listed there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// Transitions held at most, over all environments (a multiple of `num_envs`).
    pub capacity: usize,
    /// Elements of one observation.
    pub obs_dim: usize,
    /// Elements of one action.
    pub action_dim: usize,
    /// Environments pushed together, one transition each per [`ReplayBuffer::push`].
    /// Default 1.
    pub num_envs: usize,
    /// Steps of the return a sampled transition carries. Default 1 (the plain transition).
    pub n_step: usize,
    /// The discount of the n-step return, finite in `[0, 1]`. Default 0.99.
    pub gamma: f64,
    /// Prioritized replay's exponent `alpha` (finite, `>= 0`), or `None` for a uniform
    /// buffer. Default `None`.
    pub alpha: Option<f64>,
}

impl Config {
    /// A uniform buffer of `capacity` transitions of one environment, 1-step,
    /// `gamma = 0.99`.
    pub fn new(capacity: usize, obs_dim: usize, action_dim: usize) -> Self {
        Self {
            capacity,
            obs_dim,
            action_dim,
            num_envs: 1,
            n_step: 1,
            gamma: 0.99,
            alpha: None,
        }
    }

    /// `num_envs` environments pushed together ([`Transitions`] holds one step of each).
    pub fn num_envs(self, num_envs: usize) -> Self {
        Self { num_envs, ..self }
    }

    /// n-step returns with discount `gamma`.
    pub fn n_step(self, n_step: usize, gamma: f64) -> Self {
        Self {
            n_step,
            gamma,
            ..self
        }
    }

    /// Prioritized replay with exponent `alpha` (Schaul et al. 2016; 0.6 in the paper).
    pub fn prioritized(self, alpha: f64) -> Self {
        Self {
            alpha: Some(alpha),
            ..self
        }
    }

    fn check(&self, function: &'static str) -> Result<()> {
        for (argument, value) in [
            ("capacity", self.capacity),
            ("obs_dim", self.obs_dim),
            ("action_dim", self.action_dim),
            ("num_envs", self.num_envs),
            ("n_step", self.n_step),
        ] {
            if value == 0 {
                return Err(Error::value(function, argument, "at least 1", 0));
            }
        }
        if !self.capacity.is_multiple_of(self.num_envs) {
            return Err(Error::value(
                function,
                "capacity",
                format_args!("a multiple of num_envs = {}", self.num_envs),
                self.capacity,
            ));
        }
        check::unit_interval(function, "gamma", self.gamma)?;
        if let Some(alpha) = self.alpha {
            check::non_negative(function, "alpha", alpha)?;
        }
        // The storage must be addressable: capacity * max(obs_dim, action_dim) elements.
        check::product(function, "obs_dim", self.capacity, self.obs_dim)?;
        check::product(function, "action_dim", self.capacity, self.action_dim)?;
        Ok(())
    }
}

/// One step of every environment, as a vector environment returns it: row-major
/// `[num_envs, obs_dim]` observations, `[num_envs, action_dim]` actions,
/// `[num_envs]` rewards and flags.
///
/// `next_obs` is the observation the step led to: for a step that ended an episode, the
/// *final* observation of that episode (Gymnasium's `info["final_obs"]` under same-step
/// autoreset), never the reset observation. A truncated episode bootstraps from it.
#[derive(Debug, Clone, Copy)]
pub struct Transitions<'a, T> {
    /// `[num_envs, obs_dim]`.
    pub obs: &'a [T],
    /// `[num_envs, action_dim]`.
    pub actions: &'a [T],
    /// `[num_envs]`.
    pub rewards: &'a [T],
    /// `[num_envs, obs_dim]`.
    pub next_obs: &'a [T],
    /// `[num_envs]`: the episode ended in a terminal state (no bootstrap).
    pub terminated: &'a [bool],
    /// `[num_envs]`: the episode was cut by a time limit (bootstrap from `next_obs`).
    pub truncated: &'a [bool],
}

/// A minibatch of `len` transitions, each field a contiguous row-major host vector.
///
/// For the transition starting at stored step `t` whose n-step window ends at step `k`
/// (`m = k - t + 1` steps), the target of a critic is
/// `rewards[i] + discounts[i] * V(next_obs[i])`.
#[derive(Debug, Clone, PartialEq)]
pub struct Batch<T> {
    /// The stored positions of the transitions (for [`ReplayBuffer::update_priorities`]).
    pub indices: Vec<usize>,
    /// `[len, obs_dim]`: the observation at `t`.
    pub obs: Vec<T>,
    /// `[len, action_dim]`: the action at `t`.
    pub actions: Vec<T>,
    /// `[len]`: `r_t + gamma (r_{t+1} + gamma (... + gamma r_k))`, evaluated from `r_k`
    /// backwards (one multiply and one add per step). `r_t` itself for 1 step.
    pub rewards: Vec<T>,
    /// `[len, obs_dim]`: the next observation of step `k`.
    pub next_obs: Vec<T>,
    /// `[len]`: `gamma^m` (`gamma` multiplied by itself left to right, `m - 1` products),
    /// or 0 when step `k` terminated.
    pub discounts: Vec<T>,
    /// `[len]`: 0 when step `k` terminated, else 1 (Fujimoto's `not_done`).
    pub not_dones: Vec<T>,
    /// `[len]`: importance-sampling weights of prioritized sampling, 1 for uniform.
    pub weights: Vec<T>,
}

impl<T> Batch<T> {
    /// An empty batch to sample into ([`ReplayBuffer::sample_into`] reuses its
    /// allocations).
    pub fn new() -> Self {
        Self {
            indices: Vec::new(),
            obs: Vec::new(),
            actions: Vec::new(),
            rewards: Vec::new(),
            next_obs: Vec::new(),
            discounts: Vec::new(),
            not_dones: Vec::new(),
            weights: Vec::new(),
        }
    }

    /// The number of transitions.
    pub fn len(&self) -> usize {
        self.indices.len()
    }

    /// Whether the batch holds no transition.
    pub fn is_empty(&self) -> bool {
        self.indices.is_empty()
    }

    fn clear(&mut self) {
        self.indices.clear();
        self.obs.clear();
        self.actions.clear();
        self.rewards.clear();
        self.next_obs.clear();
        self.discounts.clear();
        self.not_dones.clear();
        self.weights.clear();
    }
}

impl<T> Default for Batch<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// A fixed-capacity ring of transitions of `num_envs` environments, with n-step returns,
/// seeded uniform sampling and, optionally, proportional prioritized replay.
///
/// Storage is time-major like `rlgrad-returns`' `[T, B]` data: `capacity / num_envs`
/// rows of `num_envs` transitions; transition `(row, env)` is stored at position
/// `row * num_envs + env`, and the next step of the same environment is in the next row.
/// Once the ring is full, a push overwrites its oldest row.
///
/// # n-step windows
///
/// The transition at position `(row, env)` reads steps `t, t+1, ..., k` of its
/// environment, where `k` is the first of: `t + n - 1`; the first step that terminated or
/// was truncated; the newest stored step (the row before the write position). A window
/// never crosses an episode end and never crosses the write position into older data.
/// Termination at `k` gives a discount of 0 (no bootstrap); truncation at `k` bootstraps
/// from `next_obs` of `k` (the episode's final observation) with `gamma^m`; a window cut
/// at `n` steps or at the newest step bootstraps from there likewise. These are the
/// semantics of `rlgrad_returns::n_step_returns` with Gymnasium's flags: for zero values,
/// `rewards` is bit for bit its n-step return (tested), and a window at the newest step
/// is cut as its windows are at the end of a batch.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayBuffer<T: Float = f32> {
    pub(crate) config: Config,
    pub(crate) rows: usize,
    pub(crate) gamma: T,
    pub(crate) obs: Vec<T>,
    pub(crate) actions: Vec<T>,
    pub(crate) rewards: Vec<T>,
    pub(crate) next_obs: Vec<T>,
    /// Per transition: bit 0 terminated, bit 1 truncated.
    pub(crate) flags: Vec<u8>,
    /// `[write_row, filled_rows]`, as `u64` so that a checkpoint restores them in place.
    pub(crate) cursor: [u64; 2],
    pub(crate) priorities: Option<Priorities>,
}

/// Prioritized replay's state: the tree of `p^alpha` and the largest priority seen.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Priorities {
    pub(crate) alpha: f64,
    pub(crate) tree: SumTree,
    /// `[max_priority]`: what new transitions get, before the exponent.
    pub(crate) max_priority: [f64; 1],
}

pub(crate) const TERMINATED: u8 = 1;
pub(crate) const TRUNCATED: u8 = 2;

impl<T: Float> ReplayBuffer<T> {
    /// An empty buffer. An error for a zero capacity, dimension, `num_envs` or `n_step`,
    /// a capacity that is not a multiple of `num_envs`, `gamma` outside `[0, 1]` or a
    /// negative or non-finite `alpha`.
    pub fn new(config: Config) -> Result<Self> {
        config.check("ReplayBuffer::new")?;
        Ok(Self {
            config,
            rows: config.capacity / config.num_envs,
            gamma: T::from_f64(config.gamma),
            obs: Vec::new(),
            actions: Vec::new(),
            rewards: Vec::new(),
            next_obs: Vec::new(),
            flags: Vec::new(),
            cursor: [0, 0],
            priorities: config.alpha.map(|alpha| Priorities {
                alpha,
                tree: SumTree::new(config.capacity),
                max_priority: [1.0],
            }),
        })
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The number of transitions held.
    pub fn len(&self) -> usize {
        self.filled_rows() * self.config.num_envs
    }

    /// Whether no transition is held.
    pub fn is_empty(&self) -> bool {
        self.filled_rows() == 0
    }

    /// Whether the ring is full (the next push overwrites the oldest row).
    pub fn is_full(&self) -> bool {
        self.filled_rows() == self.rows
    }

    pub(crate) fn write_row(&self) -> usize {
        self.cursor[0] as usize
    }

    pub(crate) fn filled_rows(&self) -> usize {
        self.cursor[1] as usize
    }

    /// Adds one step of every environment, overwriting the oldest row once the ring is
    /// full. With prioritized replay the new transitions get the largest priority seen so
    /// far (1 at first). An error, with nothing stored, when a slice does not have its
    /// `num_envs * dim` elements.
    pub fn push(&mut self, step: Transitions<'_, T>) -> Result<()> {
        const FUNCTION: &str = "ReplayBuffer::push";
        let Config {
            num_envs,
            obs_dim,
            action_dim,
            ..
        } = self.config;
        check::len(FUNCTION, "obs", num_envs * obs_dim, step.obs.len())?;
        check::len(
            FUNCTION,
            "actions",
            num_envs * action_dim,
            step.actions.len(),
        )?;
        check::len(FUNCTION, "rewards", num_envs, step.rewards.len())?;
        check::len(
            FUNCTION,
            "next_obs",
            num_envs * obs_dim,
            step.next_obs.len(),
        )?;
        check::len(FUNCTION, "terminated", num_envs, step.terminated.len())?;
        check::len(FUNCTION, "truncated", num_envs, step.truncated.len())?;

        let flags = step
            .terminated
            .iter()
            .zip(step.truncated)
            .map(|(&term, &trunc)| (u8::from(term) * TERMINATED) | (u8::from(trunc) * TRUNCATED));
        let row = self.write_row();
        if self.filled_rows() < self.rows {
            // Rows fill in order until the ring is full: `row == filled_rows`.
            self.obs.extend_from_slice(step.obs);
            self.actions.extend_from_slice(step.actions);
            self.rewards.extend_from_slice(step.rewards);
            self.next_obs.extend_from_slice(step.next_obs);
            self.flags.extend(flags);
            self.cursor[1] += 1;
        } else {
            let (o, a) = (num_envs * obs_dim, num_envs * action_dim);
            self.obs[row * o..(row + 1) * o].copy_from_slice(step.obs);
            self.actions[row * a..(row + 1) * a].copy_from_slice(step.actions);
            self.rewards[row * num_envs..(row + 1) * num_envs].copy_from_slice(step.rewards);
            self.next_obs[row * o..(row + 1) * o].copy_from_slice(step.next_obs);
            for (slot, flag) in self.flags[row * num_envs..(row + 1) * num_envs]
                .iter_mut()
                .zip(flags)
            {
                *slot = flag;
            }
        }
        if let Some(p) = &mut self.priorities {
            let leaf = libm::pow(p.max_priority[0], p.alpha);
            for env in 0..num_envs {
                p.tree.set(row * num_envs + env, leaf);
            }
        }
        self.cursor[0] = ((row + 1) % self.rows) as u64;
        Ok(())
    }

    /// Forgets every transition (and priority); the configuration stays.
    pub fn clear(&mut self) {
        *self = Self::new(self.config).expect("a configuration checked when it was built");
    }

    /// `batch_size` positions drawn uniformly with replacement, then gathered
    /// ([`ReplayBuffer::gather`]); weights are 1. Algorithm: `rng.below(len)` once per
    /// transition, in order (Lemire's method, as `Rng::below` documents; with one
    /// environment and 1-step returns the positions are those of Fujimoto's
    /// `np.random.randint(0, size, batch_size)` in role, not in value). The same seed and
    /// stream position give the same positions on every platform.
    ///
    /// An error when the buffer holds fewer than `batch_size` transitions (sampling from
    /// too few is almost always a training loop that started too early) or `batch_size`
    /// is 0.
    pub fn sample(&self, batch_size: usize, rng: &mut Rng) -> Result<Batch<T>> {
        let mut batch = Batch::new();
        self.sample_into(batch_size, rng, &mut batch)?;
        Ok(batch)
    }

    /// [`ReplayBuffer::sample`] into `batch`, reusing its allocations. On an error `batch`
    /// and `rng` are untouched.
    pub fn sample_into(
        &self,
        batch_size: usize,
        rng: &mut Rng,
        batch: &mut Batch<T>,
    ) -> Result<()> {
        self.check_batch_size("ReplayBuffer::sample", batch_size)?;
        let len = self.len() as u64;
        let indices: Vec<usize> = (0..batch_size).map(|_| rng.below(len) as usize).collect();
        self.gather_unchecked(&indices, batch);
        batch.weights.resize(batch_size, T::one());
        Ok(())
    }

    fn check_batch_size(&self, function: &'static str, batch_size: usize) -> Result<()> {
        if batch_size == 0 {
            return Err(Error::value(function, "batch_size", "at least 1", 0));
        }
        if batch_size > self.len() {
            return Err(Error::out_of_range(
                function,
                "batch_size",
                format_args!("at most the {} transitions stored", self.len()),
                batch_size,
            ));
        }
        Ok(())
    }

    /// The transitions at stored positions `indices` (each below [`ReplayBuffer::len`]),
    /// with their n-step windows; weights are 1. An error naming the first position out of
    /// range.
    pub fn gather(&self, indices: &[usize]) -> Result<Batch<T>> {
        self.check_indices("ReplayBuffer::gather", indices)?;
        let mut batch = Batch::new();
        self.gather_unchecked(indices, &mut batch);
        batch.weights.resize(indices.len(), T::one());
        Ok(batch)
    }

    fn check_indices(&self, function: &'static str, indices: &[usize]) -> Result<()> {
        match indices.iter().position(|&i| i >= self.len()) {
            None => Ok(()),
            Some(at) => Err(Error::out_of_range(
                function,
                "indices",
                format_args!("positions below the {} transitions stored", self.len()),
                format_args!("{} at index {at}", indices[at]),
            )),
        }
    }

    /// Fills `batch` (weights cleared) from valid `indices`.
    fn gather_unchecked(&self, indices: &[usize], batch: &mut Batch<T>) {
        let Config {
            num_envs,
            obs_dim,
            action_dim,
            n_step,
            ..
        } = self.config;
        batch.clear();
        batch.indices.extend_from_slice(indices);
        let oldest = (self.write_row() + self.rows - self.filled_rows()) % self.rows;
        let newest_age = self.filled_rows() - 1;
        for &index in indices {
            let (row, env) = (index / num_envs, index % num_envs);
            let age = (row + self.rows - oldest) % self.rows;
            let steps = n_step.min(newest_age - age + 1);
            // The window: `t = index`, then the same environment row by row to `k`.
            let mut last = index;
            let mut m = 1;
            loop {
                if self.flags[last] != 0 || m == steps {
                    break;
                }
                last = ((last / num_envs + 1) % self.rows) * num_envs + env;
                m += 1;
            }
            // rewards: from r_k backwards, acc = r_j + gamma * acc.
            let mut acc = self.rewards[last];
            let mut j = last;
            for _ in 1..m {
                j = ((j / num_envs + self.rows - 1) % self.rows) * num_envs + env;
                acc = self.rewards[j] + self.gamma * acc;
            }
            debug_assert_eq!(j, index);
            let terminated = self.flags[last] & TERMINATED != 0;
            let discount = if terminated {
                T::zero()
            } else {
                let mut d = self.gamma;
                for _ in 1..m {
                    d = d * self.gamma;
                }
                d
            };
            batch
                .obs
                .extend_from_slice(&self.obs[index * obs_dim..(index + 1) * obs_dim]);
            batch
                .actions
                .extend_from_slice(&self.actions[index * action_dim..(index + 1) * action_dim]);
            batch.rewards.push(acc);
            batch
                .next_obs
                .extend_from_slice(&self.next_obs[last * obs_dim..(last + 1) * obs_dim]);
            batch.discounts.push(discount);
            batch
                .not_dones
                .push(if terminated { T::zero() } else { T::one() });
        }
    }

    /// `batch_size` transitions drawn in proportion to their priorities `p_i^alpha`
    /// (Schaul et al. 2016, proportional variant), with importance-sampling weights
    /// `w_i = (N P(i))^-beta / max_j w_j`, `P(i) = p_i^alpha / sum_j p_j^alpha`, `N` the
    /// transitions stored, the maximum over every stored transition (`min_j P(j)`).
    ///
    /// Algorithm (stratified, as the paper): with `S` the tree's total, transition `i`
    /// of the batch is the leaf where the prefix sum passes `(i + u_i) * S / batch_size`,
    /// `u_i = rng.uniform_f64()` drawn in order. Everything is computed in `f64` with
    /// `libm`'s `pow` and rounded to `T` once, so the same seed gives the same batch on
    /// every platform.
    ///
    /// An error when the buffer was not built with [`Config::prioritized`], for `beta`
    /// not finite in `[0, 1]`, and as [`ReplayBuffer::sample`] for `batch_size`.
    pub fn sample_prioritized(
        &self,
        batch_size: usize,
        beta: f64,
        rng: &mut Rng,
    ) -> Result<Batch<T>> {
        let mut batch = Batch::new();
        self.sample_prioritized_into(batch_size, beta, rng, &mut batch)?;
        Ok(batch)
    }

    /// [`ReplayBuffer::sample_prioritized`] into `batch`. On an error `batch` and `rng`
    /// are untouched.
    pub fn sample_prioritized_into(
        &self,
        batch_size: usize,
        beta: f64,
        rng: &mut Rng,
        batch: &mut Batch<T>,
    ) -> Result<()> {
        const FUNCTION: &str = "ReplayBuffer::sample_prioritized";
        let p = self.priorities(FUNCTION)?;
        check::unit_interval(FUNCTION, "beta", beta)?;
        self.check_batch_size(FUNCTION, batch_size)?;
        let total = p.tree.total();
        let min = p.tree.min();
        if !(total.is_finite() && total > 0.0 && min.is_finite() && min > 0.0) {
            return Err(Error::state(
                FUNCTION,
                "self",
                "a finite total priority above 0",
                format_args!("total {total}, smallest {min}"),
            ));
        }
        let segment = total / batch_size as f64;
        let mut draws = rng.clone();
        let mut indices = Vec::with_capacity(batch_size);
        for i in 0..batch_size {
            let index = p.tree.find((i as f64 + draws.uniform_f64()) * segment);
            if index >= self.len() {
                // Only a corrupted tree (a bad checkpoint) leads outside the stored data.
                return Err(Error::state(
                    FUNCTION,
                    "self",
                    "priorities only on stored transitions",
                    format_args!("a positive priority at position {index}"),
                ));
            }
            indices.push(index);
        }
        *rng = draws;
        let n = self.len() as f64;
        let max_weight = libm::pow(n * (min / total), -beta);
        self.gather_unchecked(&indices, batch);
        batch.weights.extend(indices.iter().map(|&i| {
            let weight = libm::pow(n * (p.tree.get(i) / total), -beta);
            T::from_f64(weight / max_weight)
        }));
        Ok(())
    }

    fn priorities(&self, function: &'static str) -> Result<&Priorities> {
        self.priorities.as_ref().ok_or_else(|| {
            Error::state(
                function,
                "self",
                "a buffer built with Config::prioritized",
                "a uniform buffer",
            )
        })
    }

    /// Sets the priorities of the transitions at `indices` (as a batch returns them) to
    /// `priorities` (usually `|td_error| + eps`), stored as `p^alpha`; the largest priority
    /// seen is what new transitions get. A position given twice takes its last priority.
    /// An error, with nothing changed, for a uniform buffer, slices of different lengths,
    /// a position not stored, or a priority that is not finite and above 0 (NaN included:
    /// the error names its index).
    pub fn update_priorities(&mut self, indices: &[usize], priorities: &[T]) -> Result<()> {
        const FUNCTION: &str = "ReplayBuffer::update_priorities";
        self.priorities(FUNCTION)?;
        check::len(FUNCTION, "priorities", indices.len(), priorities.len())?;
        self.check_indices(FUNCTION, indices)?;
        check::finite(FUNCTION, "priorities", priorities)?;
        if let Some(at) = priorities.iter().position(|&p| p <= T::zero()) {
            return Err(Error::value(
                FUNCTION,
                "priorities",
                "priorities above 0",
                format_args!("{} at index {at}", priorities[at]),
            ));
        }
        let p = self.priorities.as_mut().expect("checked above");
        for (&index, &priority) in indices.iter().zip(priorities) {
            let priority = priority.as_f64();
            p.tree.set(index, libm::pow(priority, p.alpha));
            if priority > p.max_priority[0] {
                p.max_priority[0] = priority;
            }
        }
        Ok(())
    }

    /// The priority `p^alpha` the tree holds for the transition at `index`; `None` for a
    /// uniform buffer or a position not stored.
    pub fn priority(&self, index: usize) -> Option<f64> {
        match &self.priorities {
            Some(p) if index < self.len() => Some(p.tree.get(index)),
            _ => None,
        }
    }
}
