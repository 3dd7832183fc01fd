"""The shared parity vectors of returns, mask and optim through the Python API: within each
case's tolerance of the reference library, and bit for bit equal to the Rust crates'
results on the same inputs (``cargo xtask pytest`` writes those with the same parity
runner that ``cargo xtask parity`` uses)."""

import json
from pathlib import Path

import numpy as np
import pytest

import rlgrad
from conftest import RUST_OUTPUTS, dtype_of, load_cases, to_array

CASES = load_cases()


def run_case(case):
    """The case's ops through rlgrad's Python API: outputs by name."""
    dt = dtype_of(case)
    cfg = case["config"]
    x = {name: to_array(entry, dt) for name, entry in case["inputs"].items()}
    ints = {
        name: np.array(entry["data"], dtype=np.int64)
        for name, entry in case["inputs"].items()
        if name in ("lengths", "episode_ids")
    }
    op = case["op"]
    R, M = rlgrad.returns, rlgrad.mask
    if op == "discounted_cumsum":
        g = R.discounted_cumsum(x["rewards"], cfg["gamma"])
        if cfg["standardize"]:
            if dt(cfg["std_eps"]) == dt(np.finfo(np.float32).eps):
                g = R.discounted_cumsum(x["rewards"], cfg["gamma"], standardize=True)
            else:
                g = R.standardize(g, cfg["std_eps"], 0)
        return {"returns": g}
    if op == "discounted_returns":
        return {"returns": R.discounted_returns(x["rewards"], x["bootstrap"], gamma=None, discounts=x["discounts"])}
    if op == "gae":
        adv, ret = R.gae(x["rewards"], x["values"], x["bootstrap"], gamma=None, lam=cfg["lambda"], discounts=x["discounts"])
        return {"advantages": adv, "returns": ret}
    if op == "lambda_returns":
        return {"returns": R.lambda_returns(x["rewards"], x["next_values"], gamma=None, lam=cfg["lambda"], discounts=x["discounts"])}
    if op == "n_step_returns":
        return {"returns": R.n_step_returns(x["rewards"], x["next_values"], gamma=None, n=int(cfg["n"]), discounts=x["discounts"])}
    if op == "vtrace":
        vs, pg = R.vtrace(
            x["rewards"], x["values"], x["next_values"][-1], x["rhos"], gamma=None,
            lam=cfg["lambda"], clip_rho=cfg["clip_rho"], clip_pg_rho=cfg["clip_pg_rho"], discounts=x["discounts"],
        )
        return {"vs": vs, "pg_advantages": pg}
    if op == "sequence_mask":
        return {"mask": M.sequence_mask(ints["lengths"], cfg.get("max_len"))}
    if op == "pad":
        return {"padded": M.pad(x["flat"], ints["lengths"], cfg.get("max_len"))}
    if op == "unpad":
        return {"flat": M.unpad(x["padded"], ints["lengths"])}
    if op == "masked_mean":
        return {
            "mean": np.float64(M.masked_mean(x["x"], ints["lengths"])),
            "grad_x": M.masked_mean_backward(x["x"], ints["lengths"]),
        }
    if op == "chop_into_sequences":
        (padded,), _, seq_lens = M.chop_into_sequences(
            feature_columns=[x["features"]], state_columns=[], max_seq_len=int(cfg["max_seq_len"]),
            episode_ids=ints["episode_ids"], dynamic_max=bool(cfg["dynamic_max"]),
        )
        return {"seq_lens": seq_lens, "padded": padded}
    return optim_trajectory(case, x, dt)


HYPER = ("momentum", "dampening", "nesterov", "beta1", "beta2", "eps", "weight_decay",
         "amsgrad", "alpha", "centered", "lr_decay", "initial_accumulator_value")


def optim_trajectory(case, x, dt):
    cfg = case["config"]
    hyper = {k: (bool(v) if k in ("nesterov", "amsgrad", "centered") else v) for k, v in cfg.items() if k in HYPER}
    opt = rlgrad.optim.Optimizer(case["op"], cfg["lr"], flavor=cfg.get("flavor", "torch"), **hyper)
    param = x["param"].copy()
    params, lrs = [], []
    for grad in x["grads"]:
        opt.step({"param": param}, {"param": np.ascontiguousarray(grad)})
        params.append(param.copy())
        lrs.append(dt(opt.effective_lr()))
    out = {"params": np.stack(params), "effective_lr": np.array(lrs, dtype=dt)}
    for slot in opt.slot_names:
        out[slot] = opt.slot("param", slot)
    return out


def close(got, want, tol):
    got, want = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    finite = np.isfinite(want)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(got[~finite & ~np.isnan(want)], want[~finite & ~np.isnan(want)])
    err = np.abs(got[finite] - want[finite])
    bound = tol["max_abs"] + tol["max_rel"] * np.abs(want[finite])
    assert np.all(err <= bound), f"worst {np.max(err - bound)} beyond tolerance"


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_reference_within_tolerance(case):
    got = run_case(case)
    for name, entry in case["expected"].items():
        assert name in got, f"no output `{name}`"
        close(got[name], to_array(entry, np.float64), case["tolerance"])


@pytest.mark.skipif(RUST_OUTPUTS is None, reason="RLGRAD_RUST_OUTPUTS not set (cargo xtask pytest sets it)")
@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_bits_equal_rust(case):
    rust = json.loads((Path(RUST_OUTPUTS) / f"{case['case']}.json").read_text())
    got = run_case(case)
    dt = dtype_of(case)
    assert set(rust) <= set(got), (sorted(rust), sorted(got))
    for name, entry in rust.items():
        # Outputs that are floats of the case dtype compare as their bits; counts, masks
        # and the f64 mean compare exactly as f64.
        value = np.asarray(got[name])
        kind = dt if value.dtype == dt else np.float64
        want = to_array(entry, kind)
        value = value.astype(kind)
        assert value.shape == want.shape, name
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(value), nan), name
        uint = np.uint32 if kind == np.float32 else np.uint64
        assert np.array_equal(value[~nan].view(uint), want[~nan].view(uint)), f"`{name}` differs in its bits"
