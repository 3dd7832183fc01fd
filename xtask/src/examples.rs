//! `cargo xtask demo` and `cargo xtask examples-compare`: the examples of `examples/`, run
//! as a user runs them.
//!
//! `examples-compare` times each agent's whole training in rlgrad and in its PyTorch twin
//! (`examples/python/`, Gymnasium's environments) in one sitting: the same budget, seed
//! and thread count, early stopping off, one side right after the other. The figure is
//! environment steps per second of the training loop, as each side's summary reports
//! it; rlgrad's includes its TensorBoard, CSV and checkpoint writing, the twins write
//! nothing.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::compare::{Machine, Peers, Snapshot, Versions, machine_line, utc_now};
use crate::isa::IsaSetting;

const DEMO_SEED: &str = "42";

/// The options of `cargo xtask examples-compare` (its `--help`).
pub const OPTIONS: &str = "\
  --only      agents among actor_critic, td3, ddpg, sac, ppo_lstm, ppo_mlp (default: all)
  --threads   rayon threads of rlgrad, intra-op threads of torch (default 1)
  --isa       cap both sides' vector instruction set: avx512, avx2 or sse2 (default:
              the CPU's widest; see xtask/src/isa.rs)
  --quick     short budgets (a smoke run, not a figure to cite)
  --seed      the seed of both sides (default 0)
  --device    cpu or cuda: where both sides' networks train (default cpu; cuda: the
              first GPU, for both; an error without one)
  --out       also write the JSON here
  --peers     the peer drivers, for their venv (default: $RLGRAD_PEERS, else
              ../shared/peers; venv: $PEERS_VENV, else ~/.cache/rlgrad-peers/venv)
";

/// One agent of the comparison: how each side runs it, and its budgets.
struct Agent {
    name: &'static str,
    example: &'static str,
    script: &'static str,
    flags: &'static [&'static str],
    unit: &'static str,
    budget: u64,
    quick_budget: u64,
}

/// The budgets cover a whole training: the actor-critic solves CartPole in a few hundred
/// episodes, TD3 and DDPG reach -200 soon after their 25000 random steps, SAC a few
/// thousand steps after its 5000, PPO trains for its whole 100000-step budget.
const AGENTS: [Agent; 6] = [
    Agent {
        name: "actor_critic",
        example: "actor_critic",
        script: "actor_critic.py",
        flags: &[],
        unit: "episodes",
        budget: 600,
        quick_budget: 50,
    },
    Agent {
        name: "td3",
        example: "td3",
        script: "td3.py",
        flags: &[],
        unit: "steps",
        budget: 35_000,
        quick_budget: 26_000,
    },
    Agent {
        name: "ddpg",
        example: "td3",
        script: "td3.py",
        flags: &["--ddpg"],
        unit: "steps",
        budget: 35_000,
        quick_budget: 26_000,
    },
    Agent {
        name: "sac",
        example: "sac",
        script: "sac.py",
        flags: &[],
        unit: "steps",
        budget: 15_000,
        quick_budget: 6_000,
    },
    Agent {
        name: "ppo_lstm",
        example: "recurrent_ppo",
        script: "recurrent_ppo.py",
        flags: &["--policy", "lstm"],
        unit: "steps",
        budget: 100_000,
        quick_budget: 4_096,
    },
    Agent {
        name: "ppo_mlp",
        example: "recurrent_ppo",
        script: "recurrent_ppo.py",
        flags: &["--policy", "mlp"],
        unit: "steps",
        budget: 100_000,
        quick_budget: 4_096,
    },
];

/// What both sides' summaries (`summary.json`, the twins' `--out`) say of a run.
#[derive(Debug, Clone, Deserialize, Serialize)]
struct RunSummary {
    env_steps: u64,
    episodes: u64,
    final_score: Option<f64>,
    session_seconds: f64,
    env_steps_per_second: f64,
}

#[derive(Debug, Serialize)]
struct Side {
    #[serde(flatten)]
    summary: RunSummary,
    /// Cores other processes kept busy meanwhile: above ~0.2 the figure is not quiet.
    other_cores_busy: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Case {
    agent: &'static str,
    unit: &'static str,
    budget: u64,
    rlgrad: Side,
    pytorch: Side,
    /// rlgrad's environment steps per second over PyTorch's.
    ratio: f64,
}

#[derive(Debug, Serialize)]
struct Sitting {
    date: String,
    machine: Machine,
    versions: Versions,
    machine_line: String,
    /// The vector instruction set both sides ran in (`--isa`).
    isa: IsaSetting,
    threads: usize,
    seed: u64,
    /// Where both sides' networks trained (`--device`).
    device: String,
    quick: bool,
    cases: Vec<Case>,
}

/// `cargo xtask demo`: the actor-critic on CartPole, trained to its target with a progress
/// bar; the example prints where its learning curve, logs and checkpoint are. What it
/// builds, and how long a first build takes, the launcher (xtask/launcher) has said before
/// this driver was built.
pub fn demo() -> Result<(), String> {
    let run_dir = crate::root().join("runs/demo");
    let run_dir = run_dir.to_string_lossy();
    crate::cargo(
        &[
            "run",
            "--release",
            "-p",
            "rlgrad-examples",
            "--example",
            "actor_critic",
            "--",
            "--seed",
            DEMO_SEED,
            "--run-dir",
            &run_dir,
            "--overwrite",
        ],
        &[],
    )
}

struct Options {
    agents: Vec<&'static Agent>,
    threads: usize,
    /// `--isa`'s level, checked against the CPU when the sitting starts.
    isa: Option<String>,
    quick: bool,
    seed: u64,
    device: &'static str,
    out: Option<PathBuf>,
    peers: Option<PathBuf>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut options = Self {
            agents: AGENTS.iter().collect(),
            threads: 1,
            isa: None,
            quick: false,
            seed: 0,
            device: "cpu",
            out: None,
            peers: None,
        };
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let mut value = || {
                rest.next().ok_or_else(|| {
                    format!("{arg} needs a value (`cargo xtask examples-compare --help`)")
                })
            };
            match arg.as_str() {
                "--only" => {
                    options.agents = value()?
                        .split(',')
                        .map(|name| {
                            AGENTS
                                .iter()
                                .find(|a| a.name == name.trim())
                                .ok_or_else(|| {
                                    format!(
                                        "--only: no agent `{name}` (actor_critic, td3, ddpg, sac, \
                                     ppo_lstm, ppo_mlp)"
                                    )
                                })
                        })
                        .collect::<Result<_, _>>()?;
                }
                "--threads" => {
                    let text = value()?;
                    options.threads = text.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                        format!("--threads takes a positive integer, got `{text}`")
                    })?;
                }
                "--seed" => {
                    let text = value()?;
                    options.seed = text
                        .parse()
                        .map_err(|_| format!("--seed takes an unsigned integer, got `{text}`"))?;
                }
                "--isa" => options.isa = Some(value()?.clone()),
                "--device" => {
                    options.device = match value()?.as_str() {
                        "cpu" => "cpu",
                        "cuda" => "cuda",
                        other => {
                            return Err(format!("--device takes cpu or cuda, got `{other}`"));
                        }
                    };
                }
                "--quick" => options.quick = true,
                "--out" => options.out = Some(PathBuf::from(value()?)),
                "--peers" => options.peers = Some(PathBuf::from(value()?)),
                other => {
                    return Err(format!(
                        "examples-compare: unknown argument `{other}` \
                         (`cargo xtask examples-compare --help`)"
                    ));
                }
            }
        }
        Ok(options)
    }
}

/// `cargo xtask examples-compare`.
pub fn compare(args: &[String]) -> Result<(), String> {
    let options = Options::parse(args)?;
    let isa = IsaSetting::new(options.isa.as_deref())?;
    let root = crate::root();
    let peers = Peers::locate(options.peers.clone(), &root)?;
    let python = peers.venv.join("bin/python");
    peers.ensure_gymnasium()?;
    crate::cargo(
        &["build", "--release", "-p", "rlgrad-examples", "--examples"],
        &[],
    )?;
    let out_dir = crate::compare::target_dir(&root).join("examples-compare");
    let binaries = crate::compare::target_dir(&root).join("release/examples");
    let mut cases = Vec::new();
    for agent in &options.agents {
        let budget = if options.quick {
            agent.quick_budget
        } else {
            agent.budget
        };
        let common = [
            "--seed".to_owned(),
            options.seed.to_string(),
            "--threads".to_owned(),
            options.threads.to_string(),
            "--budget".to_owned(),
            budget.to_string(),
            "--no-early-stop".to_owned(),
            "--device".to_owned(),
            options.device.to_owned(),
        ];
        let run_dir = out_dir.join(agent.name);
        let mut rust = Command::new(binaries.join(agent.example));
        rust.args(agent.flags)
            .args(&common)
            .args(["--quiet", "--overwrite", "--run-dir"])
            .arg(&run_dir)
            .envs(&isa.rlgrad_env);
        let rlgrad = timed_run(rust, &run_dir.join("summary.json"), agent.name)?;
        let twin_out = out_dir.join(format!("{}-pytorch.json", agent.name));
        let mut twin = Command::new(&python);
        twin.arg(root.join("examples/python").join(agent.script))
            .args(agent.flags)
            .args(&common)
            .arg("--out")
            .arg(&twin_out)
            .envs(&isa.peer_env)
            // The twin prints its summary, which the table shows.
            .stdout(std::process::Stdio::null());
        let pytorch = timed_run(twin, &twin_out, agent.name)?;
        let ratio = rlgrad.summary.env_steps_per_second / pytorch.summary.env_steps_per_second;
        println!(
            "{} ({budget} {}): rlgrad {:.0} steps/s, PyTorch {:.0} steps/s: {ratio:.2}x",
            agent.name,
            agent.unit,
            rlgrad.summary.env_steps_per_second,
            pytorch.summary.env_steps_per_second
        );
        cases.push(Case {
            agent: agent.name,
            unit: agent.unit,
            budget,
            rlgrad,
            pytorch,
            ratio,
        });
    }
    let machine = Machine::this_one();
    let versions = Versions::of(&root, torch_version(&python));
    let sitting = Sitting {
        date: utc_now(),
        machine_line: format!("{}; {}", machine_line(&machine, &versions), isa.describe()),
        machine,
        versions,
        isa,
        threads: options.threads,
        seed: options.seed,
        device: options.device.to_owned(),
        quick: options.quick,
        cases,
    };
    print!("{}", table(&sitting));
    let json = serde_json::to_string_pretty(&sitting).map_err(|e| e.to_string())?;
    let latest = out_dir.join("latest.json");
    for path in std::iter::once(&latest).chain(options.out.as_ref()) {
        std::fs::write(path, &json).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    println!("JSON: {}", latest.display());
    Ok(())
}

/// Runs `command`, which writes its summary to `summary`, and measures the other load.
fn timed_run(mut command: Command, summary: &Path, agent: &str) -> Result<Side, String> {
    // A summary left by an earlier sitting must not pass for this run's.
    let _ = std::fs::remove_file(summary);
    let before = Snapshot::now();
    let status = command
        .status()
        .map_err(|e| format!("{agent}: cannot run {:?}: {e}", command.get_program()))?;
    let after = Snapshot::now();
    if !status.success() {
        return Err(format!(
            "{agent}: {:?} failed ({status})",
            command.get_program()
        ));
    }
    let text = std::fs::read_to_string(summary)
        .map_err(|e| format!("{agent}: no summary at {}: {e}", summary.display()))?;
    let summary: RunSummary = serde_json::from_str(&text)
        .map_err(|e| format!("{agent}: unreadable summary {}: {e}", summary.display()))?;
    Ok(Side {
        summary,
        other_cores_busy: before.zip(after).map(|(b, a)| b.other_cores(&a)),
    })
}

/// `{"torch": version}` of the venv, for the machine line.
fn torch_version(python: &Path) -> std::collections::BTreeMap<String, String> {
    Command::new(python)
        .args(["-c", "import torch; print(torch.__version__)"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .into_iter()
        .map(|version| ("torch".to_owned(), version))
        .collect()
}

fn table(sitting: &Sitting) -> String {
    let quiet = |side: &Side| match side.other_cores_busy {
        Some(busy) if busy > 0.2 => format!(" (load {busy:.1})"),
        _ => String::new(),
    };
    let mut text = format!(
        "\n{} {}\n{} thread(s), seed {}, networks on the {}{}\n\n| agent | budget | rlgrad steps/s \
         | PyTorch steps/s | rlgrad / PyTorch | final score (rlgrad, PyTorch) |\n\
         |---|---|---|---|---|---|\n",
        sitting.date,
        sitting.machine_line,
        sitting.threads,
        sitting.seed,
        if sitting.device == "cuda" {
            "GPU"
        } else {
            "CPU"
        },
        if sitting.quick { ", quick budgets" } else { "" },
    );
    let score = |s: &RunSummary| s.final_score.map_or("-".to_owned(), |v| format!("{v:.1}"));
    for case in &sitting.cases {
        text.push_str(&format!(
            "| {} | {} {} | {:.0}{} | {:.0}{} | {:.2}x | {}, {} |\n",
            case.agent,
            case.budget,
            case.unit,
            case.rlgrad.summary.env_steps_per_second,
            quiet(&case.rlgrad),
            case.pytorch.summary.env_steps_per_second,
            quiet(&case.pytorch),
            case.ratio,
            score(&case.rlgrad.summary),
            score(&case.pytorch.summary),
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(words: &[&str]) -> Result<Options, String> {
        Options::parse(&words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>())
    }

    #[test]
    fn the_device_reaches_both_sides_and_anything_else_is_refused() {
        assert_eq!(parse(&[]).unwrap().device, "cpu");
        assert_eq!(parse(&["--device", "cuda"]).unwrap().device, "cuda");
        let refused = parse(&["--device", "gpu"]).err().unwrap();
        assert!(
            refused.contains("--device") && refused.contains("`gpu`"),
            "{refused}"
        );
        assert!(parse(&["--device"]).is_err());
    }
}
