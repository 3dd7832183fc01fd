"""PyTorch twin of `cargo run --release --example recurrent_ppo`: PPO with LSTM policy and
value networks (or, with `--policy mlp`, dense layers in their place) on CartPole-v1
without velocities (Gymnasium), with the same networks, initialization, data flow and
hyper-parameters as rlgrad's `ppo` module (RL Zoo's for sb3-contrib's RecurrentPPO on
CartPoleNoVel-v1).

8 environments (`SyncVectorEnv`, same-step autoreset), 32-step rollouts; observations
normalized with running statistics (SB3's VecNormalize, no reward normalization); the LSTM
states stored before every step and zeroed at every episode start; GAE (gamma 0.98,
lambda 0.8) with truncated episodes bootstrapped from the value of their final
observation (the critic's state after the last step); the batch-major rollout cut into
sequences at episode ends (at most 32 steps), each starting from its stored states; 20
epochs of one minibatch of whole sequences; the LSTMs run over packed padded sequences;
clipped surrogate, squared value error and entropy as means over the valid steps,
advantages normalized over the valid steps; loss = policy + 0 * entropy + 0.5 * value;
gradients clipped to a global norm of 0.5; Adam (eps 1e-5) with learning rate 1e-3 and
clip range 0.2 decaying linearly per update over the budget.

    python examples/python/recurrent_ppo.py --seed 0 [--policy lstm|mlp] [--budget STEPS]
"""

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

import common

NUM_ENVS, ROLLOUT_STEPS, EPOCHS, MINIBATCHES, MAX_SEQ_LEN = 8, 32, 20, 1, 32
GAMMA, GAE_LAMBDA, LEARNING_RATE, CLIP_RANGE = 0.98, 0.8, 1e-3, 0.2
ENT_COEF, VF_COEF, MAX_GRAD_NORM, UNITS = 0.0, 0.5, 0.5, 64


class NoVelocity(gym.ObservationWrapper):
    """CartPole's observation without the velocities: `[x, theta]`."""

    def __init__(self, env):
        super().__init__(env)
        high = env.observation_space.high[[0, 2]]
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)

    def observation(self, observation):
        return observation[[0, 2]]


class RunningMeanStd:
    """SB3's running mean and variance, and VecNormalize's normalization."""

    def __init__(self, dim):
        self.mean, self.var, self.count = np.zeros(dim), np.ones(dim), 1e-4

    def update(self, batch):
        batch_mean, batch_var, n = batch.mean(0), batch.var(0), batch.shape[0]
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean = self.mean + delta * n / total
        m2 = self.var * self.count + batch_var * n + delta**2 * self.count * n / total
        self.var, self.count = m2 / total, total

    def normalize(self, batch):
        return np.clip((batch - self.mean) / np.sqrt(self.var + 1e-8), -10, 10).astype(np.float32)


class Branch(nn.Module):
    """Encoder (an LSTM, or a dense ReLU layer), a hidden ReLU layer, a linear head."""

    def __init__(self, lstm, inputs, outputs):
        super().__init__()
        self.lstm = nn.LSTM(inputs, UNITS) if lstm else None
        self.dense = None if lstm else nn.Linear(inputs, UNITS)
        self.hidden = nn.Linear(UNITS, UNITS)
        self.head = nn.Linear(UNITS, outputs)

    def _head(self, features):
        return self.head(F.relu(self.hidden(features)))

    def step(self, x, state):
        """One step of `B` rows from `state` (`(h, c)`, `[1, B, H]` each)."""
        if self.lstm is None:
            return self._head(F.relu(self.dense(x))), state
        y, state = self.lstm(x.unsqueeze(0), state)
        return self._head(y[0]), state

    def run(self, x, lengths, state):
        """Padded batch-first sequences `[S, T, F]` -> outputs `[S * T, out]`."""
        s, t, f = x.shape
        if self.lstm is None:
            return self._head(F.relu(self.dense(x.reshape(s * t, f))))
        packed = pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        y, _ = self.lstm(packed, state)
        y, _ = pad_packed_sequence(y, batch_first=True, total_length=t)
        return self._head(y.reshape(s * t, UNITS))


def zeros_state(branch, batch):
    if branch.lstm is None:
        return None
    return (torch.zeros(1, batch, UNITS), torch.zeros(1, batch, UNITS))


def restart(state, rows):
    """Zeroes the recurrent state of the environments `rows` (new episodes)."""
    if state is not None and len(rows):
        for part in state:
            part[:, rows] = 0.0


def gae(rewards, values, bootstrap, terminated, truncated, final_values):
    """Advantages and returns of a `[T, B]` rollout, Gymnasium's flags: a termination cuts,
    a truncation bootstraps from the value of the final observation."""
    advantages = np.zeros_like(rewards)
    last = np.zeros(rewards.shape[1], dtype=np.float32)
    for t in reversed(range(rewards.shape[0])):
        next_value = bootstrap if t == rewards.shape[0] - 1 else values[t + 1]
        ended = terminated[t] | truncated[t]
        next_value = np.where(ended, np.where(terminated[t], 0.0, final_values[t]), next_value)
        delta = rewards[t] + GAMMA * next_value - values[t]
        last = delta + GAMMA * GAE_LAMBDA * np.where(ended, 0.0, last)
        advantages[t] = last
    return advantages, advantages + values


def chop(ended):
    """Sequences of the batch-major rollout: (start row, length) pieces of episodes, at most
    MAX_SEQ_LEN long, as rlgrad's `chop_into_sequences`."""
    sequences = []
    for env in range(NUM_ENVS):
        start = 0
        for t in range(ROLLOUT_STEPS):
            if ended[env, t] or t == ROLLOUT_STEPS - 1 or t + 1 - start == MAX_SEQ_LEN:
                sequences.append((env * ROLLOUT_STEPS + start, t + 1 - start))
                start = t + 1
    return sequences


def main():
    p = common.parser(__doc__, 100_000, "environment steps")
    p.add_argument("--policy", choices=["lstm", "mlp"], default="lstm")
    args = p.parse_args()
    rng = common.setup(args)
    make = lambda: NoVelocity(gym.make("CartPole-v1"))  # noqa: E731
    envs = gym.vector.SyncVectorEnv([make] * NUM_ENVS, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    lstm = args.policy == "lstm"
    actor, critic = Branch(lstm, 2, 2), Branch(lstm, 2, 1)
    parameters = list(actor.parameters()) + list(critic.parameters())
    optimizer = torch.optim.Adam(parameters, lr=LEARNING_RATE, eps=1e-5)
    normalizer = RunningMeanStd(2)
    raw, _ = envs.reset(seed=args.seed)
    normalizer.update(raw)
    observations = normalizer.normalize(raw)
    actor_state, critic_state = zeros_state(actor, NUM_ENVS), zeros_state(critic, NUM_ENVS)
    episodes = common.Episodes(window=50, threshold=475.0)
    episode_returns = np.zeros(NUM_ENVS)
    env_steps, updates = 0, 0
    rollout = ROLLOUT_STEPS * NUM_ENVS
    clock = common.Clock()
    while env_steps < args.budget:
        if not args.no_early_stop and episodes.reached():
            break
        # Rollout, time-major.
        T, B = ROLLOUT_STEPS, NUM_ENVS
        obs_buf = np.zeros((T, B, 2), dtype=np.float32)
        actions = np.zeros((T, B), dtype=np.int64)
        log_probs, values, rewards = (np.zeros((T, B), dtype=np.float32) for _ in range(3))
        terminated, truncated = np.zeros((T, B), dtype=bool), np.zeros((T, B), dtype=bool)
        final_values = np.zeros((T, B), dtype=np.float32)
        states = {"actor": [], "critic": []}
        with torch.no_grad():
            for t in range(T):
                obs_buf[t] = observations
                for name, state in (("actor", actor_state), ("critic", critic_state)):
                    if state is not None:
                        states[name].append((state[0][0].clone(), state[1][0].clone()))
                x = common.to_device(observations)
                logits, actor_state = actor.step(x, actor_state)
                value, critic_state = critic.step(x, critic_state)
                all_log_probs = F.log_softmax(logits, 1).cpu().numpy()
                probabilities = torch.softmax(logits, 1).cpu().numpy()
                u = rng.random(B)
                action = np.minimum((np.cumsum(probabilities.astype(np.float64), 1) <= u[:, None]).sum(1), 1)
                log_probs[t] = all_log_probs[np.arange(B), action]
                values[t] = value[:, 0].cpu().numpy()
                raw, reward, term, trunc, info = envs.step(action)
                actions[t], rewards[t], terminated[t], truncated[t] = action, reward, term, trunc
                normalizer.update(raw)
                observations = normalizer.normalize(raw)
                bootstrapped = trunc & ~term
                if bootstrapped.any():
                    last = normalizer.normalize(np.stack([info["final_obs"][i] if info["_final_obs"][i] else raw[i] for i in range(B)]))
                    final, _ = critic.step(common.to_device(last), critic_state)
                    final_values[t] = np.where(bootstrapped, final[:, 0].cpu().numpy(), 0.0)
                env_steps += B
                episode_returns += reward
                ended = np.flatnonzero(term | trunc)
                for i in ended:
                    episodes.push(env_steps, episode_returns[i])
                    episode_returns[i] = 0.0
                restart(actor_state, ended)
                restart(critic_state, ended)
            bootstrap, _ = critic.step(common.to_device(observations), critic_state)
        advantages, returns = gae(rewards, values, bootstrap[:, 0].cpu().numpy(), terminated, truncated, final_values)

        # Batch-major rows (env * T + t) and sequences.
        def rows(a):
            return np.ascontiguousarray(np.swapaxes(a, 0, 1)).reshape(B * T, *a.shape[2:])

        obs_rows, action_rows, old_log_prob_rows = rows(obs_buf), rows(actions), rows(log_probs)
        advantage_rows, return_rows = rows(advantages), rows(returns)
        state_rows = {
            name: tuple(torch.stack(parts, 0).transpose(0, 1).reshape(B * T, UNITS) for parts in zip(*seq))
            for name, seq in states.items()
            if seq
        }
        sequences = chop(rows(terminated | truncated).reshape(B, T))
        updates += 1
        remaining = max(1.0 - updates * rollout / args.budget, 0.0)
        for group in optimizer.param_groups:
            group["lr"] = LEARNING_RATE * remaining
        clip = CLIP_RANGE * remaining
        for _ in range(EPOCHS):
            # rlgrad's `SequenceBatch::minibatches`: shuffled whole sequences, cut into
            # MINIBATCHES groups of about equal valid steps.
            order = rng.permutation(len(sequences))
            total = sum(length for _, length in sequences)
            groups, steps = [[]], 0
            for placed, s in enumerate(order):
                share_reached = steps * MINIBATCHES >= len(groups) * total
                must_move = len(order) - placed == MINIBATCHES - len(groups)
                if groups[-1] and len(groups) < MINIBATCHES and (share_reached or must_move):
                    groups.append([])
                groups[-1].append(sequences[s])
                steps += sequences[s][1]
            for group in groups:
                starts = [start for start, _ in group]
                # pack_padded_sequence takes the lengths on the CPU.
                lengths = torch.tensor([length for _, length in group], device="cpu")
                S, Tm = len(group), int(lengths.max())
                index = np.full((S, Tm), -1)
                for k, (start, length) in enumerate(group):
                    index[k, :length] = np.arange(start, start + length)
                mask = common.to_device(index >= 0).float()
                safe = np.maximum(index, 0)
                valid = mask.sum()

                def pad(a):
                    return common.to_device(a[safe]) * mask.reshape(S, Tm, *([1] * (a.ndim - 1)))

                def state0(name):
                    if name not in state_rows:
                        return None
                    h, c = state_rows[name]
                    return (h[starts].unsqueeze(0), c[starts].unsqueeze(0))

                x = pad(obs_rows)
                logits = actor.run(x, lengths, state0("actor"))
                value = critic.run(x, lengths, state0("critic")).reshape(S, Tm)
                all_log_probs = F.log_softmax(logits, 1)
                log_prob = all_log_probs.gather(1, common.to_device(action_rows[safe]).reshape(-1, 1)).reshape(S, Tm)
                entropy = -(all_log_probs.exp() * all_log_probs).sum(1).reshape(S, Tm)
                adv = pad(advantage_rows)
                mean = (adv * mask).sum() / valid
                std = torch.sqrt((((adv - mean) * mask) ** 2).sum() / (valid - 1))
                adv = (adv - mean) / (std + 1e-8)
                ratio = torch.exp(log_prob - pad(old_log_prob_rows))
                surrogate = torch.min(adv * ratio, adv * torch.clamp(ratio, 1 - clip, 1 + clip))
                policy_loss = -(surrogate * mask).sum() / valid
                value_loss = (((pad(return_rows) - value) ** 2) * mask).sum() / valid
                entropy_loss = -(entropy * mask).sum() / valid
                loss = policy_loss + ENT_COEF * entropy_loss + VF_COEF * value_loss
                optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(parameters, MAX_GRAD_NORM)
                optimizer.step()
    seconds = clock.stop()
    name = "recurrent_ppo" if lstm else "ppo_mlp"
    common.finish(args, name, "steps", env_steps, env_steps, episodes, seconds)


if __name__ == "__main__":
    main()
