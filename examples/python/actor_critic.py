"""PyTorch twin of `cargo run --release --example actor_critic`: the TensorFlow
actor-critic tutorial on CartPole-v1 (Gymnasium), with the same network, initialization,
losses and hyper-parameters as rlgrad's `actor_critic` module.

One network (shared 128-unit ReLU layer, a policy head and a value head, Glorot-uniform
weights and zero biases as Keras' Dense), one Adam step (lr 0.01, eps 1e-7) per episode on
standardized discounted returns (gamma 0.99, population std, eps = float32 eps), the actor
loss with the advantage detached, a Huber critic loss summed. The episode is played
without a graph, then the loss runs over the episode as one batch, as in the Rust agent.
PyTorch's Adam adds eps outside the bias correction (Keras adds it to the uncorrected
sqrt(v)); with eps = 1e-7 the two differ far below the updates' size.

    python examples/python/actor_critic.py --seed 42 [--budget EPISODES] [--threads N]
"""

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import common


class ActorCritic(nn.Module):
    def __init__(self, observations, actions, hidden):
        super().__init__()
        self.common = nn.Linear(observations, hidden)
        self.actor = nn.Linear(hidden, actions)
        self.critic = nn.Linear(hidden, 1)
        for layer in (self.common, self.actor, self.critic):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)

    def forward(self, x):
        hidden = F.relu(self.common(x))
        return self.actor(hidden), self.critic(hidden)


def discounted_cumsum(rewards, gamma):
    returns = np.zeros(len(rewards), dtype=np.float32)
    total = np.float32(0.0)
    for t in range(len(rewards) - 1, -1, -1):
        total = np.float32(rewards[t] + gamma * total)
        returns[t] = total
    return returns


def main():
    args = common.parser(__doc__, 10_000, "episodes").parse_args()
    rng = common.setup(args)
    env = gym.make("CartPole-v1")
    model = ActorCritic(4, 2, 128)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01, eps=1e-7)
    gamma = np.float32(0.99)
    eps = np.finfo(np.float32).eps
    episodes = common.Episodes(window=100, threshold=475.0)
    env_steps = 0
    observation, _ = env.reset(seed=args.seed)
    clock = common.Clock()
    while len(episodes.returns) < args.budget:
        if not args.no_early_stop and episodes.reached():
            break
        observations, actions, rewards = [], [], []
        done = False
        while not done:
            observations.append(observation)
            with torch.no_grad():
                logits, _ = model(common.to_device(observation).unsqueeze(0))
                probabilities = torch.softmax(logits, 1)[0].cpu().numpy()
            action = min(int(np.searchsorted(np.cumsum(probabilities, dtype=np.float64), rng.random(), side="right")), 1)
            observation, reward, terminated, truncated, _ = env.step(action)
            actions.append(action)
            rewards.append(reward)
            env_steps += 1
            done = terminated or truncated
        episodes.push(env_steps, sum(rewards))
        observation, _ = env.reset()

        returns = discounted_cumsum(np.asarray(rewards, dtype=np.float32), gamma)
        returns = (returns - returns.mean()) / (returns.std() + eps)
        logits, values = model(common.to_device(np.stack(observations)))
        log_probs = F.log_softmax(logits, 1).gather(1, torch.tensor(actions).unsqueeze(1))
        returns = common.to_device(returns).unsqueeze(1)
        advantages = (returns - values).detach()
        actor_loss = -(log_probs * advantages).sum()
        critic_loss = F.huber_loss(values, returns, reduction="sum", delta=1.0)
        optimizer.zero_grad()
        (actor_loss + critic_loss).backward()
        optimizer.step()
    seconds = clock.stop()
    common.finish(args, "actor_critic", "episodes", len(episodes.returns), env_steps, episodes, seconds)


if __name__ == "__main__":
    main()
