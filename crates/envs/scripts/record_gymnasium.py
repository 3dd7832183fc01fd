#!/usr/bin/env python3
"""Records Gymnasium trajectories that rlgrad-envs' tests replay.

Run from anywhere: `python3 crates/envs/scripts/record_gymnasium.py`. The script makes a
virtual environment under the workspace's `target/gymnasium-venv` with pinned Gymnasium
and NumPy, runs itself there, and writes `crates/envs/tests/data/*.json`.

Every float is written so that reading it back is exact: f64 values as Python's shortest
round-trip repr; f32 values (observations, Pendulum's actions) as NumPy's shortest float32
repr, checked here to round-trip through a double (which is how Rust reads them: parse to
f64, then `as f32`).

What is recorded:
- rng.json: the first raw 64-bit outputs of `np.random.default_rng(seed)` (SeedSequence ->
  PCG64, Gymnasium's `np_random`), and `uniform` draws, for small and multi-word seeds;
- resets.json: reset states and observations of CartPole-v1 and Pendulum-v1 for many seeds,
  and the state of a second `reset()` without a seed (the generator goes on);
- cartpole.json / pendulum.json: whole episodes through termination and the 500/200-step
  truncation, a few steps past the episode end, with the float64 state after each step;
- vector.json: `SyncVectorEnv` in the same-step autoreset mode, with the final
  observations of the episodes that ended.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

GYMNASIUM = "gymnasium==1.4.0"
NUMPY = "numpy==2.4.6"

HERE = Path(__file__).resolve().parent
CRATE = HERE.parent
WORKSPACE = CRATE.parent.parent
VENV = WORKSPACE / "target" / "gymnasium-venv"
DATA = CRATE / "tests" / "data"


def ensure_venv():
    """Re-executes this script inside the pinned virtual environment."""
    python = VENV / "bin" / "python"
    if Path(sys.prefix).resolve() == VENV.resolve():
        return
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", GYMNASIUM, NUMPY], check=True
    )
    os.execv(str(python), [str(python), __file__, *sys.argv[1:]])


ensure_venv()

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402


def f32(value):
    """A float32 as the double whose repr is NumPy's shortest float32 repr."""
    value = np.float32(value)
    short = float(str(value))
    if np.float32(short) != value:
        raise AssertionError(f"{value!r} does not round-trip through {short!r}")
    return short


def f32s(values):
    return [f32(v) for v in values]


def f64s(values):
    return [float(v) for v in values]


def write(name, payload):
    payload = {
        "gymnasium": gym.__version__,
        "numpy": np.__version__,
        "recorded_by": "crates/envs/scripts/record_gymnasium.py",
        **payload,
    }
    DATA.mkdir(parents=True, exist_ok=True)
    text = json.dumps(payload, separators=(",", ":"), allow_nan=False)
    (DATA / name).write_text(text + "\n")
    print(f"wrote {DATA / name} ({len(text)} bytes)")


# Seeds of one and two 32-bit words of entropy, zero and u64::MAX included.
BIG_SEEDS = [0, 1, 42, 2**32 - 1, 2**32, 2**40 + 12345, 2**63 + 5, 2**64 - 1]


def record_rng():
    streams = []
    for seed in BIG_SEEDS:
        rng = np.random.default_rng(seed)
        raw = [int(x) for x in rng.bit_generator.random_raw(6)]
        rng = np.random.default_rng(seed)
        uniform = f64s(rng.uniform(low=-0.05, high=0.05, size=(3,)))
        streams.append({"seed": seed, "raw": raw, "uniform_pm005": uniform})
    write("rng.json", {"streams": streams})


def unwrapped_state(env):
    return f64s(env.unwrapped.state)


def record_resets():
    cases = []
    for env_id in ["CartPole-v1", "Pendulum-v1"]:
        env = gym.make(env_id)
        for seed in list(range(64)) + BIG_SEEDS[3:]:
            obs, _ = env.reset(seed=seed)
            state = unwrapped_state(env)
            again, _ = env.reset()
            cases.append(
                {
                    "env": env_id,
                    "seed": seed,
                    "state": state,
                    "observation": f32s(obs),
                    "next_reset_state": unwrapped_state(env),
                    "next_reset_observation": f32s(again),
                }
            )
    write("resets.json", {"cases": cases})


def run_episode(env, seed, policy, extra_steps):
    """Resets with `seed`, steps `policy` until the episode ends, then `extra_steps` more."""
    obs, _ = env.reset(seed=seed)
    episode = {
        "seed": seed,
        "reset_state": unwrapped_state(env),
        "reset_observation": f32s(obs),
        "actions": [],
        "states": [],
        "observations": [],
        "rewards": [],
        "terminated": [],
        "truncated": [],
    }
    remaining = None
    while remaining != 0:
        action = policy(obs)
        obs, reward, terminated, truncated, _ = env.step(action)
        episode["actions"].append(action)
        episode["states"].append(unwrapped_state(env))
        episode["observations"].append(f32s(obs))
        episode["rewards"].append(float(reward))
        episode["terminated"].append(bool(terminated))
        episode["truncated"].append(bool(truncated))
        if remaining is None and (terminated or truncated):
            remaining = extra_steps
        elif remaining is not None:
            remaining -= 1
    return episode


def record_cartpole():
    env = gym.make("CartPole-v1")
    policy_rng = np.random.default_rng(2024)
    episodes = []
    for seed in range(8):
        episodes.append(
            run_episode(env, seed, lambda _: int(policy_rng.integers(2)), extra_steps=0)
        )
    # Steps after termination: reward 0 and Gymnasium's warning.
    episodes.append(
        run_episode(env, 11, lambda _: int(policy_rng.integers(2)), extra_steps=4)
    )
    # A linear controller balances the pole until the 500-step truncation.
    gains = np.array([0.0, 0.1, 1.0, 0.3])
    episodes.append(
        run_episode(env, 100, lambda obs: int(np.dot(gains, obs) > 0), extra_steps=2)
    )
    write("cartpole.json", {"max_episode_steps": 500, "episodes": episodes})


def record_pendulum():
    env = gym.make("Pendulum-v1")
    policy_rng = np.random.default_rng(7)
    # Torques inside and outside [-2, 2]: Gymnasium clips them.
    special = [2.0, -2.0, 2.5, -2.5, 1e6, -1e6, 0.0, -0.0, 1e-30, 3.0]

    def torques():
        step = 0
        while True:
            if step < len(special):
                yield special[step]
            else:
                yield float(policy_rng.uniform(-3.0, 3.0))
            step += 1

    episodes = []
    for seed in range(3):
        stream = torques()
        episodes.append(
            run_episode(
                env,
                seed,
                lambda _: np.array([f32(next(stream))], dtype=np.float32),
                extra_steps=2,
            )
        )
    for episode in episodes:
        episode["actions"] = [f32(a[0]) for a in episode["actions"]]
    write("pendulum.json", {"max_episode_steps": 200, "episodes": episodes})


def record_vector(env_id, num_envs, seed, steps, action):
    envs = gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP},
    )
    obs, _ = envs.reset(seed=seed)
    run = {
        "env": env_id,
        "num_envs": num_envs,
        "seed": seed,
        "reset_observations": [f32s(row) for row in obs],
        "actions": [],
        "observations": [],
        "rewards": [],
        "terminated": [],
        "truncated": [],
        "final_observations": [],
    }
    for _ in range(steps):
        actions = action()
        obs, rewards, terminated, truncated, info = envs.step(actions)
        run["actions"].append(
            [f32(a[0]) if np.ndim(a) else int(a) for a in actions]
        )
        run["observations"].append([f32s(row) for row in obs])
        run["rewards"].append(f64s(rewards))
        run["terminated"].append([bool(x) for x in terminated])
        run["truncated"].append([bool(x) for x in truncated])
        finals = []
        if "final_obs" in info:
            for i, ended in enumerate(info["_final_obs"]):
                if ended:
                    finals.append({"env": i, "observation": f32s(info["final_obs"][i])})
        run["final_observations"].append(finals)
    return run


def record_vectors():
    policy_rng = np.random.default_rng(99)
    cartpole = record_vector(
        "CartPole-v1", 4, 7, 250, lambda: policy_rng.integers(2, size=4)
    )
    pendulum = record_vector(
        "Pendulum-v1",
        2,
        11,
        402,
        lambda: policy_rng.uniform(-2.5, 2.5, size=(2, 1)).astype(np.float32),
    )
    write("vector.json", {"runs": [cartpole, pendulum]})


if __name__ == "__main__":
    record_rng()
    record_resets()
    record_cartpole()
    record_pendulum()
    record_vectors()
