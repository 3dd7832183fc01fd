"""Writes the PyTorch fixtures that crates/autodiff/tests/stacked_parity.rs reads.

Generated once and checked in, so that the tests need no torch. Made with torch 2.15.0
(CPU) under Python 3, in float64; rerun from this directory with

    python make_rnn_fixtures.py

Each case builds a `torch.nn.LSTM` or `torch.nn.GRU` (batch_first=True) from
torch.manual_seed(seed), runs it on a padded batch through
`pack_padded_sequence(enforce_sorted=False)` and `pad_packed_sequence(total_length=T)`
(the lengths are unsorted, include 1 and T), and records in `rnn_f64.json`:

  - the configuration, the lengths and the input `x` [B, T, F], whose padded steps hold
    random values (packing never reads them, so neither may rlgrad);
  - every parameter in `state_dict` order (`weight_ih_l0`, ..., `bias_hh_l1_reverse`);
  - the initial states when the case has them (`h0`, and `c0` for an LSTM), else none
    (zeros);
  - `output` [B, T, D * H], `h_n` (and `c_n`) [L * D, B, H];
  - fixed weights `w_output`, `w_h` (and `w_c`) and the gradients of
    `loss = sum(output * w_output) + sum(h_n * w_h) (+ sum(c_n * w_c))` with respect to
    every parameter, `x` and the initial states.

Tensors are `{"shape": [...], "data": [...]}` with the data row-major; Python writes
each float64 as its shortest round-trip decimal, so the JSON holds the exact values.
"""

import json

import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

BATCH, STEPS, FEATURES, HIDDEN = 4, 6, 3, 5
LENGTHS = [4, 6, 1, 3]

CASES = [
    # name, cell, num_layers, bidirectional, initial states, lengths, seed
    ("lstm_2_layers_bidirectional", "lstm", 2, True, True, LENGTHS, 10),
    ("gru_2_layers_bidirectional", "gru", 2, True, True, LENGTHS, 11),
    ("lstm_3_layers", "lstm", 3, False, False, LENGTHS, 12),
    ("gru_1_layer_bidirectional_full_lengths", "gru", 1, True, False, [STEPS] * BATCH, 13),
]


def tensor(t):
    t = t.detach().contiguous()
    return {"shape": list(t.shape), "data": t.reshape(-1).tolist()}


def case(name, cell, num_layers, bidirectional, initial, lengths, seed):
    torch.manual_seed(seed)
    kind = nn.LSTM if cell == "lstm" else nn.GRU
    rnn = kind(FEATURES, HIDDEN, num_layers=num_layers, bidirectional=bidirectional,
               batch_first=True)
    directions = 2 if bidirectional else 1
    state_shape = (num_layers * directions, BATCH, HIDDEN)
    x = torch.randn(BATCH, STEPS, FEATURES, requires_grad=True)
    states = {}
    if initial:
        states["h0"] = torch.randn(*state_shape, requires_grad=True)
        if cell == "lstm":
            states["c0"] = torch.randn(*state_shape, requires_grad=True)
    hx = None
    if initial:
        hx = (states["h0"], states["c0"]) if cell == "lstm" else states["h0"]

    packed = pack_padded_sequence(x, torch.tensor(lengths), batch_first=True,
                                  enforce_sorted=False)
    out, last = rnn(packed, hx)
    output, _ = pad_packed_sequence(out, batch_first=True, total_length=STEPS)
    finals = {"h_n": last[0], "c_n": last[1]} if cell == "lstm" else {"h_n": last}

    weights = {"w_output": torch.randn(*output.shape)}
    for key in finals:
        weights["w_" + key[0]] = torch.randn(*state_shape)
    loss = (output * weights["w_output"]).sum()
    for key, value in finals.items():
        loss = loss + (value * weights["w_" + key[0]]).sum()
    sources = dict(rnn.named_parameters(), x=x, **states)
    grads = torch.autograd.grad(loss, list(sources.values()))

    return {
        "name": name,
        "cell": cell,
        "input_size": FEATURES,
        "hidden_size": HIDDEN,
        "num_layers": num_layers,
        "bidirectional": bidirectional,
        "lengths": lengths,
        "x": tensor(x),
        "params": [{"name": k, **tensor(v)} for k, v in rnn.state_dict().items()],
        "initial": {k: tensor(v) for k, v in states.items()},
        "output": tensor(output),
        "final": {k: tensor(v) for k, v in finals.items()},
        "weights": {k: tensor(v) for k, v in weights.items()},
        "grads": {k: tensor(g) for k, g in zip(sources, grads)},
    }


def main():
    torch.set_num_threads(1)
    torch.set_default_dtype(torch.float64)
    cases = [case(*c) for c in CASES]
    with open("rnn_f64.json", "w") as f:
        json.dump({"torch": torch.__version__, "cases": cases}, f)
        f.write("\n")
    print("torch", torch.__version__)


if __name__ == "__main__":
    main()
