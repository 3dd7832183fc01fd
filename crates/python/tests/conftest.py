"""Shared helpers: the parity vectors (``parity/*.json`` of the repository, schema in
``parity/README.md``) and the Rust crates' results on them (written by
``cargo xtask pytest`` into ``$RLGRAD_RUST_OUTPUTS``)."""

import json
import os
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[3]
PARITY_DIR = Path(os.environ.get("RLGRAD_PARITY_DIR", REPO / "parity"))
RUST_OUTPUTS = os.environ.get("RLGRAD_RUST_OUTPUTS")

SUITES = ("returns", "mask", "optim")


def to_array(entry, dtype):
    data = np.array([float(v) for v in entry["data"]], dtype=np.float64)
    return data.astype(dtype).reshape(entry["shape"])


def load_cases():
    cases = []
    for path in sorted(PARITY_DIR.glob("*.json")):
        case = json.loads(path.read_text())
        if case.get("suite") in SUITES:
            cases.append(case)
    return cases


def dtype_of(case):
    return {"f32": np.float32, "f64": np.float64}[case["dtype"]]
