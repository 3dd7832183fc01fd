//! The training driver the three agents share: run directory, TensorBoard and CSV logs,
//! checkpoints every N units, resume, budget and target, progress bar, learning curve and
//! the run's summary.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rlgrad_checkpoint::{Checkpoint, CheckpointManager, Restore, State, state_path};
use rlgrad_core::{Error, Result};
use rlgrad_summary::{
    CsvWriter, CurveOptions, EventWriter, Series, WriterOptions, plot_learning_curves,
};

use crate::device::DeviceKind;

/// How a training run goes: where it writes, how long it trains, how it is checkpointed.
/// The budget and the checkpoint interval are in the agent's unit ([`Agent::UNIT`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// The seed of every random stream (initialization, actions, noise, environments).
    pub seed: u64,
    /// The rayon threads the run uses; `None`: rayon's default (one per core). The
    /// results are the same bits for every count.
    pub threads: Option<usize>,
    /// Where the logs, checkpoints, learning curve and summary go; `None`:
    /// `runs/<agent name>-seed<seed>`.
    pub run_dir: Option<PathBuf>,
    /// Continue from the latest checkpoint in `run_dir`.
    pub resume: bool,
    /// Remove what an earlier run left in `run_dir` first.
    pub overwrite: bool,
    /// Train until this many units are done (in all sessions together).
    pub budget: u64,
    /// Stop this session once this many units are done, with a checkpoint; a later
    /// `resume` continues (`None`: train to the budget).
    pub pause_at: Option<u64>,
    /// Save a checkpoint whenever the units done pass a multiple of this (and at the end).
    pub checkpoint_every: u64,
    /// Stop once the agent reaches its target.
    pub stop_at_target: bool,
    /// Show a progress bar on stderr.
    pub progress: bool,
    /// Where the networks train: what the examples' command line ([`crate::cli`])
    /// builds the agent on ([`train`] trains the agent it is given). A checkpoint
    /// resumes on either device.
    pub device: DeviceKind,
}

impl Options {
    /// The defaults for agent `A` with `seed`: its default budget and checkpoint
    /// interval, the run directory `runs/<name>-seed<seed>`, all threads, a progress bar,
    /// stopping at the target, on the Cpu.
    pub fn new<A: Agent>(seed: u64) -> Self {
        Self {
            seed,
            threads: None,
            run_dir: None,
            resume: false,
            overwrite: false,
            budget: A::DEFAULT_BUDGET,
            pause_at: None,
            checkpoint_every: A::DEFAULT_CHECKPOINT_EVERY,
            stop_at_target: true,
            progress: true,
            device: DeviceKind::Cpu,
        }
    }
}

/// When an agent has learned its task: the mean return of the last `window` episodes is
/// at least `threshold`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Target {
    /// Episodes in the running mean.
    pub window: usize,
    /// The running mean to reach.
    pub threshold: f64,
}

/// Every finished episode: the environment step it ended at and its return. The
/// learning curve, the running mean and the target test read it; checkpoints keep it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EpisodeLog {
    end_steps: Vec<u64>,
    returns: Vec<f64>,
}

/// Both vectors at the one stored length of `returns`, so that a checkpoint whose two
/// entries differ in length is refused rather than giving a log that indexes past its
/// end.
impl State for EpisodeLog {
    fn save_state(&self, prefix: &str, checkpoint: &mut Checkpoint) -> Result<()> {
        self.end_steps
            .save_state(&state_path(prefix, "end_steps"), checkpoint)?;
        self.returns
            .save_state(&state_path(prefix, "returns"), checkpoint)
    }

    fn restore_state<'a>(
        &'a mut self,
        prefix: &str,
        checkpoint: &Checkpoint,
        plan: &mut Restore<'a>,
    ) -> Result<()> {
        let returns = state_path(prefix, "returns");
        let len = match checkpoint.tensor_info(&returns) {
            Some(info) if info.shape.len() == 1 => info.shape[0],
            // The plan reports the entry as missing, or as of another shape.
            _ => self.returns.len(),
        };
        plan.vec(
            &state_path(prefix, "end_steps"),
            &[len],
            &mut self.end_steps,
        )
        .vec(&returns, &[len], &mut self.returns);
        Ok(())
    }
}

impl EpisodeLog {
    /// Records an episode that ended at environment step `end_step` with `episode_return`.
    pub fn push(&mut self, end_step: u64, episode_return: f64) {
        self.end_steps.push(end_step);
        self.returns.push(episode_return);
    }

    /// The number of episodes.
    pub fn len(&self) -> usize {
        self.returns.len()
    }

    /// Whether no episode finished yet.
    pub fn is_empty(&self) -> bool {
        self.returns.is_empty()
    }

    /// The returns, in order.
    pub fn returns(&self) -> &[f64] {
        &self.returns
    }

    /// The environment step each episode ended at.
    pub fn end_steps(&self) -> &[u64] {
        &self.end_steps
    }

    /// The mean return of the `window` episodes ending with episode `last` (fewer at
    /// the start), summed in order in f64. `last` must be an episode's index.
    fn mean_ending_at(&self, last: usize, window: usize) -> f64 {
        let first = (last + 1).saturating_sub(window.max(1));
        let values = &self.returns[first..=last];
        values.iter().sum::<f64>() / values.len() as f64
    }

    /// The mean return of the last `window` episodes (fewer if fewer finished; `None`
    /// for none).
    pub fn running_mean(&self, window: usize) -> Option<f64> {
        let last = self.len().checked_sub(1)?;
        Some(self.mean_ending_at(last, window))
    }

    /// Whether the last `target.window` episodes average at least `target.threshold`.
    pub fn reached(&self, target: Target) -> bool {
        self.len() >= target.window.max(1)
            && self.mean_ending_at(self.len() - 1, target.window) >= target.threshold
    }

    /// The first episode (index, end step) after which [`EpisodeLog::reached`] held.
    pub fn first_reaching(&self, target: Target) -> Option<(usize, u64)> {
        (target.window.max(1) - 1..self.len())
            .find(|&i| self.mean_ending_at(i, target.window) >= target.threshold)
            .map(|i| (i, self.end_steps[i]))
    }

    /// The returns as a curve over environment steps, named `name`.
    pub fn series(&self, name: &str) -> Series {
        let mut series = Series::new(name);
        for (&step, &r) in self.end_steps.iter().zip(&self.returns) {
            series.push(step, r);
        }
        series
    }
}

/// An agent the driver can train: it advances by units (an episode, an environment
/// step, a rollout and its update), keeps its episode log, and saves and restores its
/// whole state (parameters, optimizer slots, random streams, environments, buffers,
/// counters: its [`State`], usually `#[derive(State)]`) so that a resumed run continues
/// with the bits of an uninterrupted one.
pub trait Agent: State {
    /// What a unit is (`"episodes"`, `"steps"`).
    const UNIT: &'static str;
    /// The default budget, in units.
    const DEFAULT_BUDGET: u64;
    /// The default checkpoint interval, in units.
    const DEFAULT_CHECKPOINT_EVERY: u64;

    /// The short name of the agent (`td3`, `ddpg`), for run directories and reports.
    fn name(&self) -> &'static str;

    /// One unit of training; scalars go to `log`.
    fn advance(&mut self, log: &mut Logger) -> Result<()>;

    /// The units done: by default the environment steps, for agents whose unit is a
    /// step.
    fn units(&self) -> u64 {
        self.env_steps()
    }

    /// The environment steps taken.
    fn env_steps(&self) -> u64;

    /// The finished episodes.
    fn episodes(&self) -> &EpisodeLog;

    /// When the task counts as learned.
    fn target(&self) -> Target;

    /// The hyper-parameters and seed, as text: a checkpoint made under other ones is
    /// not resumed.
    fn describe(&self) -> String;
}

/// The scalar logs of a run: TensorBoard and CSV, the same values in both.
#[derive(Debug)]
pub struct Logger {
    events: EventWriter,
    csv: CsvWriter,
}

impl Logger {
    fn open(dir: &Path) -> Result<Self> {
        Ok(Self {
            events: EventWriter::create(dir, WriterOptions::default())?,
            csv: CsvWriter::open(dir.join("scalars.csv"), WriterOptions::default())?,
        })
    }

    /// Records `value` under `tag` at environment step `step`.
    pub fn scalar(&mut self, tag: &str, step: u64, value: f64) -> Result<()> {
        self.events.scalar(tag, step, value)?;
        self.csv.scalar(tag, step, value)
    }

    fn close(self) -> Result<()> {
        self.events.close()?;
        self.csv.close()
    }
}

/// What a finished session reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The agent's name.
    pub agent: &'static str,
    /// The seed.
    pub seed: u64,
    /// The rayon threads used.
    pub threads: usize,
    /// Units done (all sessions).
    pub units: u64,
    /// What a unit is.
    pub unit: &'static str,
    /// Environment steps (all sessions).
    pub env_steps: u64,
    /// Finished episodes (all sessions).
    pub episodes: usize,
    /// The mean return of the last `target.window` episodes.
    pub final_score: Option<f64>,
    /// The target.
    pub target: Target,
    /// The first episode (its index, from 0) and environment step at which the target
    /// held; `summary.json` and the console report give the episode's number, from 1.
    pub reached_at: Option<(usize, u64)>,
    /// Seconds this session trained (the loop, its logs and checkpoints).
    pub seconds: f64,
    /// Environment steps this session took.
    pub session_env_steps: u64,
    /// The run directory.
    pub run_dir: PathBuf,
    /// The learning curve, `None` before any episode finished.
    pub curve: Option<PathBuf>,
}

impl Summary {
    /// Environment steps per second of this session's training.
    pub fn steps_per_second(&self) -> f64 {
        self.session_env_steps as f64 / self.seconds
    }

    /// The summary as JSON (what `summary.json` holds).
    pub fn to_json(&self) -> String {
        // Episodes count from 1 here, as in the console report.
        let reached = self
            .reached_at
            .map(|(index, step)| serde_json::json!({"episode": index + 1, "env_step": step}));
        let json = serde_json::json!({
            "agent": self.agent,
            "seed": self.seed,
            "threads": self.threads,
            "units": self.units,
            "unit": self.unit,
            "env_steps": self.env_steps,
            "episodes": self.episodes,
            "final_score": self.final_score,
            "target": {"window": self.target.window, "threshold": self.target.threshold},
            "reached_at": reached,
            "session_seconds": self.seconds,
            "session_env_steps": self.session_env_steps,
            "env_steps_per_second": self.steps_per_second(),
        });
        format!("{json:#}\n")
    }
}

/// What a training session ends with.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// What the session did.
    pub summary: Summary,
    /// The agent's whole state at the end (its [`State`]: parameters, optimizer slots,
    /// random streams, environments, buffers, counters), for bit comparisons: a
    /// checkpoint has one encoding, so two runs ended alike exactly when
    /// [`Checkpoint::to_bytes`] agrees.
    pub state: Checkpoint,
    /// Every finished episode.
    pub episodes: EpisodeLog,
}

fn io(function: &'static str, action: &'static str, path: &Path, e: std::io::Error) -> Error {
    Error::io(function, action, path, e)
}

/// Trains the agent `make` builds, in a rayon pool of `options.threads` threads (the
/// agent is built in the pool, so that its devices use it), as `options` says: resumes
/// from the latest checkpoint if asked, trains until the budget, the pause point or the
/// target, checkpoints every `options.checkpoint_every` units and at the end, and writes
/// the learning curve (`learning_curve.png`) and `summary.json` into the run directory.
pub fn train<A, F>(options: &Options, make: F) -> Result<Outcome>
where
    A: Agent,
    F: FnOnce() -> Result<A> + Send,
{
    const FUNCTION: &str = "train";
    let mut builder = rayon::ThreadPoolBuilder::new();
    if let Some(threads) = options.threads {
        if threads == 0 {
            return Err(Error::value(FUNCTION, "threads", "at least 1", 0));
        }
        builder = builder.num_threads(threads);
    }
    let pool = builder
        .build()
        .map_err(|e| Error::state(FUNCTION, "threads", "a rayon thread pool", e.to_string()))?;
    pool.install(|| train_in_pool(options, make()?))
}

fn train_in_pool<A: Agent>(options: &Options, mut agent: A) -> Result<Outcome> {
    const FUNCTION: &str = "train";
    if options.checkpoint_every == 0 {
        return Err(Error::value(
            FUNCTION,
            "checkpoint_every",
            "at least 1 unit",
            0,
        ));
    }
    let default_dir =
        || PathBuf::from("runs").join(format!("{}-seed{}", agent.name(), options.seed));
    let dir = &options.run_dir.clone().unwrap_or_else(default_dir);
    if options.overwrite && dir.exists() {
        fs::remove_dir_all(dir).map_err(|e| io(FUNCTION, "remove", dir, e))?;
    }
    let checkpoints = CheckpointManager::new(dir.join("checkpoints"), Some(3))?;
    let latest = checkpoints.load_latest()?;
    match (options.resume, latest) {
        (true, Some((_, checkpoint))) => {
            let saved = checkpoint.metadata("run").unwrap_or("nothing");
            if saved != agent.describe() {
                return Err(Error::state(
                    FUNCTION,
                    "resume",
                    format_args!("a checkpoint of this run: {}", agent.describe()),
                    format_args!("one of {saved}"),
                ));
            }
            checkpoint.restore_state(&mut agent)?;
        }
        (true, None) => {
            return Err(Error::state(
                FUNCTION,
                "resume",
                format_args!("a checkpoint in {}", checkpoints.dir().display()),
                "none",
            ));
        }
        (false, Some((number, _))) => {
            return Err(Error::state(
                FUNCTION,
                "run_dir",
                "a run directory without checkpoints (or resume, or overwrite)",
                format_args!("checkpoint {number} in {}", checkpoints.dir().display()),
            ));
        }
        (false, None) => {}
    }
    let mut logger = Logger::open(dir)?;
    let bar = progress_bar(options, &agent)?;
    let target = agent.target();
    let save = |agent: &A| -> Result<()> {
        let mut checkpoint = Checkpoint::from_state(agent)?;
        checkpoint.set_metadata("run", agent.describe())?;
        checkpoints.save(agent.units(), &checkpoint).map(drop)
    };
    let started = Instant::now();
    let (steps_before, mut saved_at) = (agent.env_steps(), agent.units());
    loop {
        let units = agent.units();
        let paused = options.pause_at.is_some_and(|p| units >= p);
        let reached = options.stop_at_target && agent.episodes().reached(target);
        if units >= options.budget || paused || reached {
            break;
        }
        let episodes_before = agent.episodes().len();
        agent.advance(&mut logger)?;
        let episodes = agent.episodes();
        for i in episodes_before..episodes.len() {
            let step = episodes.end_steps()[i];
            logger.scalar("episode/return", step, episodes.returns()[i])?;
            let mean = episodes.mean_ending_at(i, target.window);
            logger.scalar("episode/running_mean", step, mean)?;
        }
        bar.set_position(agent.units());
        if episodes.len() > episodes_before {
            bar.set_message(progress_message(episodes, target));
        }
        if agent.units() / options.checkpoint_every > saved_at / options.checkpoint_every {
            save(&agent)?;
            saved_at = agent.units();
        }
    }
    if saved_at != agent.units() || checkpoints.latest()?.is_none() {
        save(&agent)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    bar.finish();
    logger.close()?;
    let episodes = agent.episodes();
    let curve = if episodes.is_empty() {
        None
    } else {
        let path = dir.join("learning_curve.png");
        let chart = CurveOptions {
            title: format!("{} (seed {})", agent.name(), options.seed),
            x_label: "environment steps".into(),
            y_label: "episode return".into(),
            smoothing: target.window,
            ..CurveOptions::default()
        };
        plot_learning_curves(&path, &[episodes.series("episode return")], &chart)?;
        Some(path)
    };
    let summary = Summary {
        agent: agent.name(),
        seed: options.seed,
        threads: rayon::current_num_threads(),
        units: agent.units(),
        unit: A::UNIT,
        env_steps: agent.env_steps(),
        episodes: episodes.len(),
        final_score: episodes.running_mean(target.window),
        target,
        reached_at: episodes.first_reaching(target),
        seconds,
        session_env_steps: agent.env_steps() - steps_before,
        run_dir: dir.clone(),
        curve,
    };
    let path = dir.join("summary.json");
    fs::write(&path, summary.to_json()).map_err(|e| io(FUNCTION, "write", &path, e))?;
    Ok(Outcome {
        summary,
        state: Checkpoint::from_state(&agent)?,
        episodes: agent.episodes().clone(),
    })
}

fn progress_bar<A: Agent>(options: &Options, agent: &A) -> Result<ProgressBar> {
    if !options.progress {
        return Ok(ProgressBar::hidden());
    }
    let bar = ProgressBar::with_draw_target(Some(options.budget), ProgressDrawTarget::stderr());
    let style = ProgressStyle::with_template(
        "{prefix} {bar:30} {pos}/{len} {msg} [{elapsed_precise}, eta {eta}]",
    )
    .map_err(|e| Error::state("train", "progress", "a valid template", e.to_string()))?;
    bar.set_style(style);
    bar.set_prefix(format!("{} ({})", agent.name(), A::UNIT));
    bar.set_position(agent.units());
    bar.set_message(progress_message(agent.episodes(), agent.target()));
    Ok(bar)
}

fn progress_message(episodes: &EpisodeLog, target: Target) -> String {
    match episodes.running_mean(target.window) {
        Some(mean) => format!(
            "| running return {mean:.1} (last {}, target {})",
            target.window, target.threshold
        ),
        None => "| no episode yet".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_mean_and_first_reaching() {
        let mut log = EpisodeLog::default();
        assert_eq!(log.running_mean(3), None);
        for (i, r) in [1.0, 2.0, 6.0, 7.0, 1.0].into_iter().enumerate() {
            log.push(10 * (i as u64 + 1), r);
        }
        assert_eq!(log.running_mean(3), Some((6.0 + 7.0 + 1.0) / 3.0));
        assert_eq!(log.running_mean(10), Some(17.0 / 5.0));
        let target = Target {
            window: 2,
            threshold: 6.5,
        };
        assert_eq!(log.first_reaching(target), Some((3, 40)));
        assert!(!log.reached(target));
        let never = Target {
            window: 6,
            threshold: 0.0,
        };
        assert_eq!(log.first_reaching(never), None);
    }

    #[test]
    fn summary_json_and_the_console_report_count_episodes_alike() {
        let summary = Summary {
            agent: "actor-critic",
            seed: 42,
            threads: 1,
            units: 614,
            unit: "episodes",
            env_steps: 90_000,
            episodes: 614,
            final_score: Some(475.5),
            target: Target {
                window: 100,
                threshold: 475.0,
            },
            reached_at: Some((613, 89_000)),
            seconds: 3.0,
            session_env_steps: 90_000,
            run_dir: PathBuf::from("runs/demo"),
            curve: None,
        };
        let json: serde_json::Value = serde_json::from_str(&summary.to_json()).unwrap();
        assert_eq!(json["reached_at"]["episode"], 614);
        assert_eq!(json["episodes"], 614);
        let report = crate::cli::report(&summary);
        assert!(report.contains("reached at episode 614 "), "{report}");
    }

    #[test]
    fn episode_log_round_trips_through_a_checkpoint() {
        let mut log = EpisodeLog::default();
        log.push(500, 500.0);
        log.push(700, 200.0);
        let checkpoint = Checkpoint::from_state(&log).unwrap();
        let mut restored = EpisodeLog::default();
        checkpoint.restore_state(&mut restored).unwrap();
        assert_eq!(restored, log);

        // Entries of different lengths are refused, and nothing is written.
        let mut uneven = Checkpoint::new();
        uneven.put("end_steps", &[1], &[500u64]).unwrap();
        uneven.put("returns", &[2], &[500.0f64, 200.0]).unwrap();
        let mut fresh = EpisodeLog::default();
        let message = uneven.restore_state(&mut fresh).unwrap_err().to_string();
        assert!(
            message.contains("`end_steps`: expected U64 [2]"),
            "{message}"
        );
        assert!(fresh.is_empty());
    }
}
