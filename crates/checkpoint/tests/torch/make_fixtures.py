"""Writes the PyTorch fixtures that crates/checkpoint/tests/torch_weights.rs reads.

Generated once and checked in, so that CI needs no torch. Made with torch 2.15.0 (CPU)
and safetensors 0.8.0 under Python 3; rerun from this directory with

    python make_fixtures.py

For each dtype (float64, float32) it builds, from torch.manual_seed(0):
  - `actor`: Fujimoto's TD3 actor, small (3 -> 8 -> 8 -> 2, relu, relu, tanh; max_action 1),
  - `lstm`: nn.LSTM(3, 4, batch_first=True),
  - `gru`: nn.GRU(3, 4, batch_first=True),
saves their state_dict with safetensors.torch.save_file (`nets_f64.safetensors`,
`nets_f32.safetensors`: keys `actor.l1.weight`, `lstm.weight_ih_l0`, ...), and runs them on
fixed inputs (from torch.manual_seed(1)) with zero initial states, saving inputs and
outputs to `outputs_f64.safetensors` / `outputs_f32.safetensors`:
  obs [2, 3], seq [2, 5, 3], actor [2, 2], lstm [2, 5, 4], lstm_h [2, 4], lstm_c [2, 4],
  gru [2, 5, 4], gru_h [2, 4].
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file


class Actor(nn.Module):
    def __init__(self, state_dim, action_dim, hidden):
        super().__init__()
        self.l1 = nn.Linear(state_dim, hidden)
        self.l2 = nn.Linear(hidden, hidden)
        self.l3 = nn.Linear(hidden, action_dim)

    def forward(self, state):
        a = F.relu(self.l1(state))
        a = F.relu(self.l2(a))
        return torch.tanh(self.l3(a))


class Nets(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = Actor(3, 2, 8)
        self.lstm = nn.LSTM(3, 4, batch_first=True)
        self.gru = nn.GRU(3, 4, batch_first=True)


def main():
    torch.set_num_threads(1)
    for dtype, suffix in [(torch.float64, "f64"), (torch.float32, "f32")]:
        torch.set_default_dtype(dtype)
        torch.manual_seed(0)
        nets = Nets()
        torch.manual_seed(1)
        obs = torch.randn(2, 3)
        seq = torch.randn(2, 5, 3)
        with torch.no_grad():
            actor = nets.actor(obs)
            lstm, (lstm_h, lstm_c) = nets.lstm(seq)
            gru, gru_h = nets.gru(seq)
        save_file(
            {k: v.contiguous() for k, v in nets.state_dict().items()},
            f"nets_{suffix}.safetensors",
        )
        outputs = {
            "obs": obs,
            "seq": seq,
            "actor": actor,
            "lstm": lstm,
            "lstm_h": lstm_h[0],
            "lstm_c": lstm_c[0],
            "gru": gru,
            "gru_h": gru_h[0],
        }
        save_file(
            {k: v.contiguous() for k, v in outputs.items()},
            f"outputs_{suffix}.safetensors",
        )
    print("torch", torch.__version__)


if __name__ == "__main__":
    main()
