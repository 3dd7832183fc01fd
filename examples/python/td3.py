"""PyTorch twin of `cargo run --release --example td3`: Fujimoto's TD3 (`TD3.py` and
`main.py` of github.com/sfujim/TD3) on Pendulum-v1 (Gymnasium), with the same networks,
initialization and hyper-parameters as rlgrad's `td3` module; `--ddpg` switches off the
twin critics, target policy smoothing and delayed updates, as the Rust example's.

Actor 3-256-256-1 (ReLU, max_action * tanh), critics (state, action) 4-256-256-1,
PyTorch's default initialization, Adam 3e-4, 25000 uniformly random start steps, then
exploration noise 0.1 * max_action and one iteration per step on 256 transitions from a
replay buffer of 10^6; gamma 0.99, tau 0.005, target noise 0.2 * max_action clipped at
0.5 * max_action, policy delay 2. A truncated episode bootstraps (not_done = 1 - terminated).

    python examples/python/td3.py --seed 0 [--ddpg] [--budget STEPS] [--threads N]
"""

import copy

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import common


class Actor(nn.Module):
    def __init__(self, state_dim, action_dim, max_action):
        super().__init__()
        self.l1 = nn.Linear(state_dim, 256)
        self.l2 = nn.Linear(256, 256)
        self.l3 = nn.Linear(256, action_dim)
        self.max_action = max_action

    def forward(self, state):
        a = F.relu(self.l1(state))
        a = F.relu(self.l2(a))
        return self.max_action * torch.tanh(self.l3(a))


class Critic(nn.Module):
    def __init__(self, state_dim, action_dim, twin):
        super().__init__()
        self.l1 = nn.Linear(state_dim + action_dim, 256)
        self.l2 = nn.Linear(256, 256)
        self.l3 = nn.Linear(256, 1)
        self.twin = twin
        if twin:
            self.l4 = nn.Linear(state_dim + action_dim, 256)
            self.l5 = nn.Linear(256, 256)
            self.l6 = nn.Linear(256, 1)

    def forward(self, state, action):
        sa = torch.cat([state, action], 1)
        q1 = self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))
        if not self.twin:
            return q1, None
        q2 = self.l6(F.relu(self.l5(F.relu(self.l4(sa)))))
        return q1, q2

    def Q1(self, state, action):
        sa = torch.cat([state, action], 1)
        return self.l3(F.relu(self.l2(F.relu(self.l1(sa)))))


class ReplayBuffer:
    def __init__(self, state_dim, action_dim, max_size, rng):
        self.max_size, self.ptr, self.size, self.rng = max_size, 0, 0, rng
        self.state = np.zeros((max_size, state_dim), dtype=np.float32)
        self.action = np.zeros((max_size, action_dim), dtype=np.float32)
        self.next_state = np.zeros((max_size, state_dim), dtype=np.float32)
        self.reward = np.zeros((max_size, 1), dtype=np.float32)
        self.not_done = np.zeros((max_size, 1), dtype=np.float32)

    def add(self, state, action, next_state, reward, terminated):
        self.state[self.ptr] = state
        self.action[self.ptr] = action
        self.next_state[self.ptr] = next_state
        self.reward[self.ptr] = reward
        self.not_done[self.ptr] = 1.0 - float(terminated)
        self.ptr = (self.ptr + 1) % self.max_size
        self.size = min(self.size + 1, self.max_size)

    def sample(self, batch_size):
        ind = self.rng.integers(0, self.size, size=batch_size)
        return (
            common.to_device(self.state[ind]),
            common.to_device(self.action[ind]),
            common.to_device(self.next_state[ind]),
            common.to_device(self.reward[ind]),
            common.to_device(self.not_done[ind]),
        )


class TD3:
    def __init__(self, state_dim, action_dim, max_action, ddpg):
        self.actor = Actor(state_dim, action_dim, max_action)
        self.actor_target = copy.deepcopy(self.actor)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=3e-4)
        self.critic = Critic(state_dim, action_dim, twin=not ddpg)
        self.critic_target = copy.deepcopy(self.critic)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=3e-4)
        self.max_action = max_action
        self.discount, self.tau = 0.99, 0.005
        self.policy_noise = None if ddpg else 0.2 * max_action
        self.noise_clip = 0.5 * max_action
        self.policy_freq = 1 if ddpg else 2
        self.total_it = 0

    def select_action(self, state):
        with torch.no_grad():
            return self.actor(common.to_device(state).unsqueeze(0)).cpu().numpy().flatten()

    def train(self, replay_buffer, batch_size=256):
        self.total_it += 1
        state, action, next_state, reward, not_done = replay_buffer.sample(batch_size)
        with torch.no_grad():
            next_action = self.actor_target(next_state)
            if self.policy_noise is not None:
                noise = (torch.randn_like(action) * self.policy_noise).clamp(-self.noise_clip, self.noise_clip)
                next_action = next_action + noise
            next_action = next_action.clamp(-self.max_action, self.max_action)
            target_q1, target_q2 = self.critic_target(next_state, next_action)
            target_q = target_q1 if target_q2 is None else torch.min(target_q1, target_q2)
            target_q = reward + not_done * self.discount * target_q
        current_q1, current_q2 = self.critic(state, action)
        critic_loss = F.mse_loss(current_q1, target_q)
        if current_q2 is not None:
            critic_loss = critic_loss + F.mse_loss(current_q2, target_q)
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()
        if self.total_it % self.policy_freq == 0:
            actor_loss = -self.critic.Q1(state, self.actor(state)).mean()
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()
            with torch.no_grad():
                for net, target in ((self.critic, self.critic_target), (self.actor, self.actor_target)):
                    for param, target_param in zip(net.parameters(), target.parameters()):
                        target_param.mul_(1 - self.tau).add_(param, alpha=self.tau)


def main():
    p = common.parser(__doc__, 100_000, "environment steps")
    p.add_argument("--ddpg", action="store_true", help="DDPG: one critic, no smoothing, no delay")
    args = p.parse_args()
    rng = common.setup(args)
    env = gym.make("Pendulum-v1")
    state_dim = env.observation_space.shape[0]
    action_dim = env.action_space.shape[0]
    max_action = float(env.action_space.high[0])
    policy = TD3(state_dim, action_dim, max_action, args.ddpg)
    replay_buffer = ReplayBuffer(state_dim, action_dim, 1_000_000, rng)
    start_steps, expl_noise = 25_000, 0.1
    episodes = common.Episodes(window=10, threshold=-200.0)
    state, _ = env.reset(seed=args.seed)
    episode_return, t = 0.0, 0
    clock = common.Clock()
    while t < args.budget:
        if not args.no_early_stop and episodes.reached():
            break
        if t < start_steps:
            action = rng.uniform(-max_action, max_action, size=action_dim).astype(np.float32)
        else:
            noise = rng.normal(0, max_action * expl_noise, size=action_dim)
            action = (policy.select_action(state) + noise).clip(-max_action, max_action).astype(np.float32)
        next_state, reward, terminated, truncated, _ = env.step(action)
        replay_buffer.add(state, action, next_state, reward, terminated)
        state = next_state
        episode_return += reward
        t += 1
        if t > start_steps:
            policy.train(replay_buffer)
        if terminated or truncated:
            episodes.push(t, episode_return)
            state, _ = env.reset()
            episode_return = 0.0
    seconds = clock.stop()
    common.finish(args, "ddpg" if args.ddpg else "td3", "steps", t, t, episodes, seconds)


if __name__ == "__main__":
    main()
