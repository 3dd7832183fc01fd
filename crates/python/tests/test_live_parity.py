"""Live parity: ``rlgrad.returns.gae`` against the libraries users replace with it, run
on the same random data in this process, where they are installed (``rlax`` under JAX,
TorchRL's functional GAE); each test is skipped, saying which library is missing,
otherwise. ``cargo xtask pytest``'s venv has neither, so CI skips them; run them in the
peers' venv (``../shared/peers``) with the wheel on ``PYTHONPATH``, as
``cargo xtask compare --only P3`` installs it, one library per process (importing
TorchRL's ``tensordict`` after JAX aborts the interpreter there)::

    PYTHONPATH=target/python/bench-site ~/.cache/rlgrad-peers/venv/bin/python -m pytest \\
        crates/python/tests/test_live_parity.py -k rlax
    PYTHONPATH=target/python/bench-site ~/.cache/rlgrad-peers/venv/bin/python -m pytest \\
        crates/python/tests/test_live_parity.py -k torchrl

The data: ``[T, B]`` rewards and values, ``bootstrap`` ``[B]``, episode ends
(``terminated``) with probability 0.05 and at the last step of some columns, float64 on
both sides, so that only the order of operations separates the results."""

import numpy as np
import pytest

import rlgrad

SHAPES = [(1, 1), (7, 3), (128, 8), (64, 33)]
GAMMA, LAM = 0.99, 0.95


def episodes(shape, seed):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=shape)
    values = rng.normal(size=shape)
    bootstrap = rng.normal(size=shape[1])
    terminated = rng.random(shape) < 0.05
    terminated[-1, ::3] = True
    return rewards, values, bootstrap, terminated


def assert_close(ours, theirs):
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape", SHAPES)
def test_gae_matches_rlax(shape):
    jax = pytest.importorskip("jax", reason="rlax needs jax; not installed")
    rlax = pytest.importorskip("rlax", reason="rlax not installed")
    jax.config.update("jax_enable_x64", True)
    rewards, values, bootstrap, terminated = episodes(shape, seed=sum(shape))
    ours, _ = rlgrad.returns.gae(rewards, values, bootstrap, gamma=GAMMA, lam=LAM, terminated=terminated)

    # rlax's per-column form: discount_t = gamma (1 - terminated_t), values [T + 1].
    gae = jax.vmap(rlax.truncated_generalized_advantage_estimation, in_axes=(1, 1, None, 1), out_axes=1)
    discounts = GAMMA * (1.0 - terminated.astype(np.float64))
    all_values = np.concatenate([values, bootstrap[None, :]])
    theirs = np.asarray(gae(rewards, discounts, LAM, all_values))
    assert theirs.dtype == np.float64
    assert_close(ours, theirs)


@pytest.mark.parametrize("shape", SHAPES)
def test_gae_matches_torchrl(shape):
    torch = pytest.importorskip("torch", reason="TorchRL needs torch; not installed")
    functional = pytest.importorskip("torchrl.objectives.value.functional", reason="torchrl not installed")
    rewards, values, bootstrap, terminated = episodes(shape, seed=7 * sum(shape))
    ours, ours_returns = rlgrad.returns.gae(
        rewards, values, bootstrap, gamma=GAMMA, lam=LAM, terminated=terminated
    )

    # TorchRL's layout: [B, T, 1], time on dim -2; next values shifted by one step.
    def batch_major(x):
        return torch.from_numpy(np.ascontiguousarray(x.T)).unsqueeze(-1)

    next_values = np.concatenate([values[1:], bootstrap[None, :]])
    done = batch_major(terminated)
    # As float64 tensors: TorchRL turns Python floats into float32 tensors.
    advantages, targets = functional.generalized_advantage_estimate(
        torch.tensor(GAMMA, dtype=torch.float64),
        torch.tensor(LAM, dtype=torch.float64),
        batch_major(values),
        batch_major(next_values),
        batch_major(rewards),
        done=done,
        terminated=done,
        time_dim=-2,
    )
    assert_close(ours, advantages.squeeze(-1).numpy().T)
    assert_close(ours_returns, targets.squeeze(-1).numpy().T)
