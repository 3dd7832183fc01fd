"""PyTorch twin of `cargo run --release --example sac`: CleanRL's `sac_continuous_action.py`
on Pendulum-v1 (Gymnasium), with the same networks, initialization, hyper-parameters and
data flow as rlgrad's `sac` module.

Actor 3-256-256 (ReLU) with mean and log_std heads (log_std = tanh mapped to [-5, 2]),
twin critics (state, action) 4-256-256-1, PyTorch's default initialization; 5000
uniformly random start steps, then actions sampled from the policy and one iteration per
step on 256 transitions from a replay buffer of 10^6; gamma 0.99, tau 0.005 every step,
Adam 3e-4 (actor) and 1e-3 (critics, temperature), 2 actor updates every 2 steps, the
temperature tuned towards an entropy of -1. The squashed log-density uses the stable
ln(1 - tanh(u)^2) = 2 (ln 2 - u - softplus(-2u)) as rlgrad's TanhNormal does, not
CleanRL's ln(scale * (1 - tanh(u)^2) + 1e-6). A truncated episode bootstraps.

    python examples/python/sac.py --seed 0 [--budget STEPS] [--threads N]
"""

import math

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import common
from td3 import ReplayBuffer

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


class SoftQNetwork(nn.Module):
    def __init__(self, state_dim, action_dim):
        super().__init__()
        self.fc1 = nn.Linear(state_dim + action_dim, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 1)

    def forward(self, state, action):
        x = F.relu(self.fc1(torch.cat([state, action], 1)))
        return self.fc3(F.relu(self.fc2(x)))


class Actor(nn.Module):
    def __init__(self, state_dim, action_dim, max_action):
        super().__init__()
        self.fc1 = nn.Linear(state_dim, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc_mean = nn.Linear(256, action_dim)
        self.fc_logstd = nn.Linear(256, action_dim)
        self.max_action = max_action

    def get_action(self, state):
        x = F.relu(self.fc2(F.relu(self.fc1(state))))
        mean = self.fc_mean(x)
        log_std = torch.tanh(self.fc_logstd(x))
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (log_std + 1)
        normal = torch.distributions.Normal(mean, log_std.exp())
        u = normal.rsample()
        log_det = 2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))
        log_prob = (normal.log_prob(u) - log_det).sum(1, keepdim=True)
        log_prob = log_prob - math.log(self.max_action) * u.shape[1]
        return torch.tanh(u) * self.max_action, log_prob


class SAC:
    def __init__(self, state_dim, action_dim, max_action):
        self.actor = Actor(state_dim, action_dim, max_action)
        self.qf1 = SoftQNetwork(state_dim, action_dim)
        self.qf2 = SoftQNetwork(state_dim, action_dim)
        self.qf1_target = SoftQNetwork(state_dim, action_dim)
        self.qf2_target = SoftQNetwork(state_dim, action_dim)
        self.qf1_target.load_state_dict(self.qf1.state_dict())
        self.qf2_target.load_state_dict(self.qf2.state_dict())
        self.q_optimizer = torch.optim.Adam(list(self.qf1.parameters()) + list(self.qf2.parameters()), lr=1e-3)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=3e-4)
        self.target_entropy = -float(action_dim)
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.a_optimizer = torch.optim.Adam([self.log_alpha], lr=1e-3)
        self.alpha = self.log_alpha.exp().item()
        self.gamma, self.tau, self.policy_frequency = 0.99, 0.005, 2

    def train(self, replay_buffer, global_step, batch_size=256):
        state, action, next_state, reward, not_done = replay_buffer.sample(batch_size)
        with torch.no_grad():
            next_action, next_log_pi = self.actor.get_action(next_state)
            min_q_next = torch.min(self.qf1_target(next_state, next_action), self.qf2_target(next_state, next_action))
            target_q = reward + not_done * self.gamma * (min_q_next - self.alpha * next_log_pi)
        qf_loss = F.mse_loss(self.qf1(state, action), target_q) + F.mse_loss(self.qf2(state, action), target_q)
        self.q_optimizer.zero_grad()
        qf_loss.backward()
        self.q_optimizer.step()
        if global_step % self.policy_frequency == 0:
            for _ in range(self.policy_frequency):
                pi, log_pi = self.actor.get_action(state)
                min_q_pi = torch.min(self.qf1(state, pi), self.qf2(state, pi))
                actor_loss = (self.alpha * log_pi - min_q_pi).mean()
                self.actor_optimizer.zero_grad()
                actor_loss.backward()
                self.actor_optimizer.step()
                with torch.no_grad():
                    _, log_pi = self.actor.get_action(state)
                alpha_loss = (-self.log_alpha.exp() * (log_pi + self.target_entropy)).mean()
                self.a_optimizer.zero_grad()
                alpha_loss.backward()
                self.a_optimizer.step()
                self.alpha = self.log_alpha.exp().item()
        with torch.no_grad():
            for net, target in ((self.qf1, self.qf1_target), (self.qf2, self.qf2_target)):
                for param, target_param in zip(net.parameters(), target.parameters()):
                    target_param.mul_(1 - self.tau).add_(param, alpha=self.tau)


def main():
    p = common.parser(__doc__, 50_000, "environment steps")
    args = p.parse_args()
    rng = common.setup(args)
    env = gym.make("Pendulum-v1")
    state_dim = env.observation_space.shape[0]
    action_dim = env.action_space.shape[0]
    max_action = float(env.action_space.high[0])
    agent = SAC(state_dim, action_dim, max_action)
    replay_buffer = ReplayBuffer(state_dim, action_dim, 1_000_000, rng)
    learning_starts = 5_000
    episodes = common.Episodes(window=10, threshold=-200.0)
    state, _ = env.reset(seed=args.seed)
    episode_return, t = 0.0, 0
    clock = common.Clock()
    while t < args.budget:
        if not args.no_early_stop and episodes.reached():
            break
        if t < learning_starts:
            action = rng.uniform(-max_action, max_action, size=action_dim).astype(np.float32)
        else:
            with torch.no_grad():
                action, _ = agent.actor.get_action(common.to_device(state).unsqueeze(0))
            action = action.cpu().numpy().flatten()
        next_state, reward, terminated, truncated, _ = env.step(action)
        replay_buffer.add(state, action, next_state, reward, terminated)
        state = next_state
        episode_return += reward
        t += 1
        if t > learning_starts:
            agent.train(replay_buffer, t)
        if terminated or truncated:
            episodes.push(t, episode_return)
            state, _ = env.reset()
            episode_return = 0.0
    seconds = clock.stop()
    common.finish(args, "sac", "steps", t, t, episodes, seconds)


if __name__ == "__main__":
    main()
