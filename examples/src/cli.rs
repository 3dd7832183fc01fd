//! The command line of the examples: the options every agent takes, the agent's own
//! flags, and the report printed at the end.

use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;

use rlgrad_core::{Cpu, Error, Result};

use crate::device::{DeviceKind, TrainDevice};
use crate::run::{Agent, Options, Outcome, Summary, train};

const PROGRAM: &str = "rlgrad-examples";

/// The options every example takes, for `--help`.
pub const COMMON_USAGE: &str = "  --seed N               seed of every random stream (default 0)
  --threads N            rayon threads (default: one per core); the results are the same
                         bits for every count
  --run-dir DIR          logs, checkpoints, learning curve, summary (default runs/NAME-seedN)
  --resume               continue from the latest checkpoint in the run directory
  --overwrite            remove what an earlier run left in the run directory first
  --budget N             train until N units are done
  --pause-at N           stop at N units with a checkpoint (--resume continues)
  --checkpoint-every N   save a checkpoint every N units (and at the end)
  --no-early-stop        train the whole budget, even after reaching the target
  --quiet                no progress bar
  --device cpu|cuda      where the networks train (default cpu; cuda: the first GPU, for
                         the actor-critic, TD3, DDPG, SAC and recurrent PPO); the same
                         bits on both, and a checkpoint of one resumes on the other
";

/// Command-line arguments, consumed flag by flag: the agent's own first, then the common
/// ones by [`Args::options`], which refuses whatever is left.
#[derive(Debug, Clone)]
pub struct Args {
    rest: Vec<String>,
}

impl Args {
    /// The process's arguments, program name left out.
    pub fn from_env() -> Self {
        Self::new(std::env::args().skip(1).collect())
    }

    /// Arguments from a list.
    pub fn new(args: Vec<String>) -> Self {
        Self { rest: args }
    }

    /// Whether `--help` or `-h` was given.
    pub fn wants_help(&self) -> bool {
        self.rest.iter().any(|a| a == "--help" || a == "-h")
    }

    /// Whether the flag `name` was given (and takes it out).
    pub fn flag(&mut self, name: &str) -> bool {
        let before = self.rest.len();
        self.rest.retain(|a| a != name);
        self.rest.len() != before
    }

    /// The value after `name`, parsed, if `name` was given (and takes both out). An
    /// error for a missing or unparsable value.
    pub fn value<T: FromStr>(&mut self, name: &'static str, expected: &str) -> Result<Option<T>> {
        let Some(at) = self.rest.iter().position(|a| a == name) else {
            return Ok(None);
        };
        let Some(text) = self.rest.get(at + 1).cloned() else {
            return Err(Error::value(PROGRAM, name, expected, "nothing"));
        };
        let value = text
            .parse()
            .map_err(|_| Error::value(PROGRAM, name, expected, format_args!("`{text}`")))?;
        self.rest.drain(at..=at + 1);
        Ok(Some(value))
    }

    /// The device `--device` names (and takes it out), the Cpu without one.
    pub fn device(&mut self) -> Result<DeviceKind> {
        Ok(self
            .value("--device", DeviceKind::CHOICES)?
            .unwrap_or_default())
    }

    /// An error for an argument nobody took out.
    pub fn finish(self) -> Result<()> {
        match self.rest.first() {
            Some(unknown) => Err(Error::value(
                PROGRAM,
                "arguments",
                "the options of --help",
                format_args!("`{unknown}`"),
            )),
            None => Ok(()),
        }
    }

    /// The common options for agent `A`, from what is left; an error for an unknown
    /// argument.
    pub fn options<A: Agent>(mut self) -> Result<Options> {
        let seed = self.value("--seed", "an unsigned integer")?.unwrap_or(0);
        let mut options = Options::new::<A>(seed);
        if let Some(threads) = self.value("--threads", "a thread count >= 1")? {
            options.threads = Some(threads);
        }
        options.run_dir = self.value::<PathBuf>("--run-dir", "a directory")?;
        options.resume = self.flag("--resume");
        options.overwrite = self.flag("--overwrite");
        if let Some(budget) = self.value("--budget", "a number of units")? {
            options.budget = budget;
        }
        options.pause_at = self.value("--pause-at", "a number of units")?;
        if let Some(every) = self.value("--checkpoint-every", "a number of units >= 1")? {
            options.checkpoint_every = every;
        }
        options.stop_at_target = !self.flag("--no-early-stop");
        options.progress = !self.flag("--quiet");
        options.device = self.device()?;
        self.finish()?;
        if options.resume && options.overwrite {
            return Err(Error::value(
                PROGRAM,
                "--overwrite",
                "either --resume or --overwrite",
                "both",
            ));
        }
        Ok(options)
    }
}

/// The report of a finished session: what was reached, the score, where the files are.
pub fn report(summary: &Summary) -> String {
    let target = summary.target;
    let reached = match summary.reached_at {
        Some((episode, step)) => format!(
            "reached at episode {} (environment step {step})",
            episode + 1
        ),
        None => "not reached".to_owned(),
    };
    let score = summary
        .final_score
        .map_or("no episode finished".to_owned(), |s| format!("{s:.2}"));
    let curve = summary
        .curve
        .as_ref()
        .map_or("none (no episode)".to_owned(), |p| p.display().to_string());
    format!(
        "{agent}, seed {seed}, {threads} thread(s): {episodes} episodes, {steps} environment \
         steps\n\
         final score (mean return of the last {window} episodes): {score}\n\
         target (mean of the last {window} >= {threshold}): {reached}\n\
         this session: {seconds:.1} s, {rate:.0} environment steps/s\n\
         learning curve: {curve}\n\
         TensorBoard:    tensorboard --logdir {dir}\n\
         CSV:            {dir}/scalars.csv\n\
         checkpoints:    {dir}/checkpoints\n\
         summary:        {dir}/summary.json",
        agent = summary.agent,
        seed = summary.seed,
        threads = summary.threads,
        steps = summary.env_steps,
        episodes = summary.episodes,
        window = target.window,
        threshold = target.threshold,
        seconds = summary.seconds,
        rate = summary.steps_per_second(),
        dir = summary.run_dir.display(),
    )
}

/// An agent that trains on any [`TrainDevice`]: how an example builds it there (its
/// configuration, usually).
pub trait Build: Sync {
    /// The agent on device `D`.
    type Agent<D: TrainDevice>: Agent;

    /// The agent for `options` on `device`.
    fn build<D: TrainDevice>(&self, options: &Options, device: &D) -> Result<Self::Agent<D>>;
}

/// Trains the agent `build` makes on the device `options.device` names ([`train`]); an
/// error naming `--device` and why when it is `cuda` and there is no GPU.
pub fn train_on_device<B: Build>(options: &Options, build: &B) -> Result<Outcome> {
    match options.device {
        DeviceKind::Cpu => train(options, || build.build(options, &Cpu::default())),
        DeviceKind::Cuda => {
            let gpu = DeviceKind::open_cuda()?;
            train(options, || build.build(options, &gpu))
        }
    }
}

/// The `main` of an example: `--help`, the agent's own flags (`parse` takes them out of
/// the arguments and returns how to build the agent), the common options, training on
/// the device `--device` names, and the report; errors go to stderr with a failing exit
/// code.
pub fn main<B: Build>(usage: &str, parse: impl FnOnce(&mut Args) -> Result<B>) -> ExitCode {
    run_main(usage, |mut args| {
        let build = parse(&mut args)?;
        let options = args.options::<B::Agent<Cpu>>()?;
        train_on_device(&options, &build)
    })
}

/// `--help`, or `session` on the process's arguments and its report; an error goes to
/// stderr with a failing exit code.
fn run_main(usage: &str, session: impl FnOnce(Args) -> Result<Outcome>) -> ExitCode {
    let args = Args::from_env();
    if args.wants_help() {
        print!("{usage}\ncommon options:\n{COMMON_USAGE}");
        return ExitCode::SUCCESS;
    }
    match session(args) {
        Ok(outcome) => {
            println!("{}", report(&outcome.summary));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
