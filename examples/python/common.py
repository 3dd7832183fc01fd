"""What the PyTorch twins of rlgrad's examples share: the command line, the episode log
and its target, and the summary they print and write (the same fields as the Rust
examples' `summary.json`, so that `cargo xtask examples-compare` reads both alike)."""

import argparse
import json
import time
from dataclasses import dataclass, field

import torch


def parser(description, default_budget, unit):
    """The options every twin takes, as the Rust examples name them."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--budget", type=int, default=default_budget, help=f"{unit} to train")
    p.add_argument("--no-early-stop", action="store_true", help="train the whole budget")
    p.add_argument("--out", help="write the summary JSON here")
    p.add_argument(
        "--device",
        choices=["cpu", "cuda"],
        default="cpu",
        help="where the networks train (cuda: the first GPU; the environments stay on the CPU)",
    )
    return p


def setup(args):
    """The thread count, seed and device of torch (tensors and modules are made on
    `--device`); returns the NumPy generator of the run."""
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: PyTorch sees no CUDA GPU on this machine")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.set_default_device(args.device)
    import numpy as np

    return np.random.default_rng(args.seed)


def to_device(array):
    """A NumPy array as a tensor on the run's device (shared with the array on the CPU)."""
    return torch.as_tensor(array, device=torch.get_default_device())


@dataclass
class Episodes:
    """Finished episodes: the environment step each ended at, and its return."""

    window: int
    threshold: float
    end_steps: list = field(default_factory=list)
    returns: list = field(default_factory=list)

    def push(self, end_step, episode_return):
        self.end_steps.append(int(end_step))
        self.returns.append(float(episode_return))

    def running_mean(self):
        last = self.returns[-self.window :]
        return sum(last) / len(last) if last else None

    def reached(self):
        return len(self.returns) >= self.window and self.running_mean() >= self.threshold

    def first_reaching(self):
        for i in range(self.window - 1, len(self.returns)):
            last = self.returns[i + 1 - self.window : i + 1]
            if sum(last) / self.window >= self.threshold:
                # Episodes count from 1, as in rlgrad's summary.json and console report.
                return {"episode": i + 1, "env_step": self.end_steps[i]}
        return None


class Clock:
    """Seconds of training, from construction to `stop`."""

    def __init__(self):
        self.start = time.perf_counter()

    def stop(self):
        return time.perf_counter() - self.start


def finish(args, agent, unit, units, env_steps, episodes, seconds):
    """Prints the summary and writes it to `--out`."""
    summary = {
        "agent": agent,
        "implementation": f"pytorch {torch.__version__}",
        "seed": args.seed,
        "threads": args.threads,
        "units": units,
        "unit": unit,
        "env_steps": env_steps,
        "episodes": len(episodes.returns),
        "final_score": episodes.running_mean(),
        "target": {"window": episodes.window, "threshold": episodes.threshold},
        "reached_at": episodes.first_reaching(),
        "session_seconds": seconds,
        "session_env_steps": env_steps,
        "env_steps_per_second": env_steps / seconds,
    }
    text = json.dumps(summary, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
