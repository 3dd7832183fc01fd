"""PyTorch DDP on Gloo (CPU) beside rlgrad-dist: the peer side of `cargo xtask compare --only D1`.

Usage:
    python ddp.py allreduce --world W [--floats N] [--reps R] [--warmup K]
    python ddp.py ppo --world W --updates U [--envs 16] [--steps 64] [--epochs 4] [--hidden 64] [--seed 0]

Starts W processes (one thread each), which meet through a file rendezvous (no network), and
prints one JSON line on stdout from rank 0:

- allreduce: `torch.distributed.all_reduce` (SUM) of N float32 values per rank, each call after a
  barrier, checked against the exact sum; {"mode", "impl", "world", "floats", "samples_ns",
  "median_ns", "torch"}.
- ppo: the update of rlgrad's `ppo_dist` example in DDP: E CartPole-v1 environments split in
  contiguous blocks over the ranks, each seeded and sampled by its global index (never the rank),
  T steps each, GAE(0.99, 0.95) with the truncation bootstrap, advantages standardized over the
  global batch, then K Adam steps (lr 1e-3) on the clipped PPO loss of the whole batch, the
  gradients averaged by DDP. Each update is timed on rank 0 after a barrier; the first is a warm-up
  and left out. {"mode", "impl", "world", "updates", "envs", "steps", "epochs", "samples_ns",
  "median_ns", "fingerprint" (sha256 of the parameters' bytes, 16 hex digits),
  "last_mean_return", "torch"}.
"""

import argparse
import datetime
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time


def parse_args():
    """The command line; a user's mistakes end here as argparse errors, not in a worker's traceback."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=["allreduce", "ppo"])
    ap.add_argument("--world", type=int, required=True)
    ap.add_argument("--floats", type=int, default=1 << 24)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--updates", type=int, default=20)
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.world < 1:
        ap.error("--world must be at least 1")
    if args.floats < 1 or args.reps < 1 or args.warmup < 0:
        ap.error("--floats and --reps must be at least 1, --warmup at least 0")
    too_small = min(args.envs, args.steps, args.epochs, args.hidden) < 1 or args.envs * args.steps < 2
    if args.mode == "ppo" and too_small:  # the std of the advantages needs two samples
        ap.error("--envs, --steps, --epochs and --hidden must be at least 1, --envs x --steps at least 2")
    if args.mode == "ppo" and args.updates < 2:
        ap.error("--updates must be at least 2 (the first is a warm-up)")
    if args.mode == "ppo" and args.envs % args.world:
        # DDP averages the ranks' mean losses, the whole batch's mean only for equal shares.
        ap.error(f"--world {args.world} does not divide --envs {args.envs}")
    return args


def worker(rank, args, rendezvous, result_path):
    """One rank: one thread, Gloo through the shared file, then the selected measurement."""
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["MKL_NUM_THREADS"] = "1"
    os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group(
        "gloo", rank=rank, world_size=args.world, init_method=f"file://{rendezvous}",
        timeout=datetime.timedelta(seconds=300),
    )
    try:
        result = allreduce(args, torch, dist) if args.mode == "allreduce" else ppo(args, torch, dist)
        if rank == 0:
            result.update(world=args.world, torch=torch.__version__)
            with open(result_path, "w") as f:  # a file, not a pipe: no size at which it blocks
                json.dump(result, f)
        # Gloo aborts a rank whose peer tears down while it still sends or receives.
        dist.barrier()
    finally:
        dist.destroy_process_group()


def allreduce(args, torch, dist):
    """Times the bare collective that DDP's gradient averaging is made of, checked exact."""
    rank, world = dist.get_rank(), args.world
    tensor = torch.empty(args.floats, dtype=torch.float32)
    samples = []
    for rep in range(args.warmup + args.reps):
        tensor.fill_(rank + 1.0)  # small integers: the sum is exact in any order
        dist.barrier()
        start = time.perf_counter_ns()
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        elapsed = time.perf_counter_ns() - start
        if rep >= args.warmup:
            samples.append(elapsed)
    expected = world * (world + 1) / 2
    if not bool((tensor == expected).all()):
        raise RuntimeError(f"all_reduce gave {tensor[:4].tolist()}..., expected {expected}")
    return {"mode": "allreduce", "impl": "torch.distributed all_reduce (gloo)", "floats": args.floats,
            "samples_ns": samples, "median_ns": statistics.median(samples)}


def ppo(args, torch, dist):
    """Times the DD-PPO update of rlgrad's example; the data depend on the global env index, not W."""
    import gymnasium as gym
    import numpy as np
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    rank, world = dist.get_rank(), args.world
    mine = range(rank * args.envs // world, (rank + 1) * args.envs // world)
    envs = [gym.make("CartPole-v1") for _ in mine]
    observations = [env.reset(seed=args.seed + e)[0] for env, e in zip(envs, mine)]
    generators = [torch.Generator().manual_seed(args.seed * 1_000_003 + e) for e in mine]
    episode_returns = [0.0 for _ in mine]

    def mlp(outputs):
        return nn.Sequential(nn.Linear(4, args.hidden), nn.Tanh(), nn.Linear(args.hidden, args.hidden), nn.Tanh(),
                             nn.Linear(args.hidden, outputs))

    class ActorCritic(nn.Module):
        def __init__(self):
            super().__init__()
            self.actor, self.critic = mlp(2), mlp(1)

        def forward(self, x):
            return self.actor(x), self.critic(x).squeeze(-1)

    torch.manual_seed(args.seed)
    model = DistributedDataParallel(ActorCritic())
    net = model.module
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    gamma, lam, clip, vf_coef = 0.99, 0.95, 0.2, 0.5
    b, t_steps = len(envs), args.steps

    def global_sum(*values):
        total = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(total)
        return total.tolist()

    def update():
        nonlocal observations
        obs = np.zeros((t_steps, b, 4), np.float32)
        actions = np.zeros((t_steps, b), np.int64)
        log_probs = np.zeros((t_steps, b), np.float32)
        values = np.zeros((t_steps + 1, b), np.float32)
        rewards = np.zeros((t_steps, b), np.float32)
        terminated = np.zeros((t_steps, b), np.float32)
        done = np.zeros((t_steps, b), np.float32)
        final_values = np.zeros((t_steps, b), np.float32)
        finished = []
        with torch.no_grad():
            for t in range(t_steps):
                x = torch.as_tensor(np.stack(observations))
                logits, value = net(x)
                probs = torch.softmax(logits, -1)
                picked = [int(torch.multinomial(probs[i], 1, generator=generators[i])) for i in range(b)]
                obs[t], actions[t], values[t] = x.numpy(), picked, value.numpy()
                log_probs[t] = torch.log_softmax(logits, -1)[torch.arange(b), picked].numpy()
                finals = []
                for i, env in enumerate(envs):
                    o, r, term, trunc, _ = env.step(picked[i])
                    rewards[t, i], terminated[t, i], done[t, i] = r, term, term or trunc
                    episode_returns[i] += r
                    if term or trunc:
                        finished.append(episode_returns[i])
                        episode_returns[i] = 0.0
                        if trunc and not term:
                            finals.append((i, o))
                        o, _ = env.reset()
                    observations[i] = o
                if finals:
                    v = net.critic(torch.as_tensor(np.stack([o for _, o in finals]))).squeeze(-1).numpy()
                    for (i, _), vi in zip(finals, v):
                        final_values[t, i] = vi
            values[t_steps] = net.critic(torch.as_tensor(np.stack(observations))).squeeze(-1).numpy()
        advantages = np.zeros((t_steps, b), np.float32)
        next_advantage = np.zeros(b, np.float32)
        for t in reversed(range(t_steps)):
            truncated = done[t] * (1 - terminated[t])
            next_value = np.where(truncated > 0, final_values[t], values[t + 1]) * (1 - terminated[t])
            delta = rewards[t] + gamma * next_value - values[t]
            next_advantage = delta + gamma * lam * (1 - done[t]) * next_advantage
            advantages[t] = next_advantage
        returns = advantages + values[:t_steps]
        total, count = global_sum(float(advantages.sum(dtype=np.float64)), advantages.size)
        mean = total / count
        (squares,) = global_sum(float(((advantages - mean) ** 2).sum(dtype=np.float64)))
        normalized = (advantages - mean) / (np.sqrt(squares / (count - 1)) + 1e-8)
        x = torch.as_tensor(obs.reshape(-1, 4))
        a = torch.as_tensor(actions.reshape(-1))
        old = torch.as_tensor(log_probs.reshape(-1))
        adv = torch.as_tensor(normalized.reshape(-1), dtype=torch.float32)
        ret = torch.as_tensor(returns.reshape(-1))
        for _ in range(args.epochs):
            logits, value = model(x)
            ratio = torch.exp(torch.log_softmax(logits, -1).gather(1, a[:, None]).squeeze(1) - old)
            policy_loss = -torch.min(adv * ratio, adv * ratio.clamp(1 - clip, 1 + clip)).mean()
            loss = policy_loss + vf_coef * ((ret - value) ** 2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        returns_sum, episodes = global_sum(sum(finished), len(finished))
        return returns_sum / episodes if episodes else None

    samples, mean_return = [], None
    for u in range(args.updates):
        dist.barrier()
        start = time.perf_counter_ns()
        mean_return = update()
        if u > 0:
            samples.append(time.perf_counter_ns() - start)
    digest = hashlib.sha256()
    for _, p in net.named_parameters():
        digest.update(p.detach().numpy().astype("<f4").tobytes())
    return {"mode": "ppo", "impl": "torch DDP (gloo)", "updates": args.updates, "envs": args.envs,
            "steps": args.steps, "epochs": args.epochs, "samples_ns": samples,
            "median_ns": statistics.median(samples), "fingerprint": digest.hexdigest()[:16],
            "last_mean_return": mean_return}


def main():
    """Starts the ranks and prints rank 0's JSON only once every rank has exited cleanly."""
    args = parse_args()
    import torch.multiprocessing as mp

    context = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        rendezvous, result_path = os.path.join(tmp, "rendezvous"), os.path.join(tmp, "result.json")
        processes = [context.Process(target=worker, args=(r, args, rendezvous, result_path))
                     for r in range(args.world)]
        for p in processes:
            p.start()
        for p in processes:
            p.join()
        failed = [r for r, p in enumerate(processes) if p.exitcode != 0]
        if failed:
            print(f"ddp.py: rank(s) {failed} failed (exit codes {[processes[r].exitcode for r in failed]})",
                  file=sys.stderr)
            sys.exit(1)
        with open(result_path) as f:
            print(json.dumps(json.load(f)))


if __name__ == "__main__":
    main()
