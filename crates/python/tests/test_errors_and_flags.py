"""What a Python user meets at the edges: opt-in finite checks, errors that name the
Python function and argument (never a Rust path), episode flags that are 0 or 1 of any
dtype, and `threads` counts."""

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlgrad import mask, optim, returns

RUST_PATH = re.compile(r"\w::\w")


def rollout(t=4, b=3, dtype=np.float32):
    rng = np.random.default_rng(7)
    r = rng.standard_normal((t, b)).astype(dtype)
    v = rng.standard_normal((t, b)).astype(dtype)
    boot = rng.standard_normal(b).astype(dtype)
    return r, v, boot


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


# require_finite


ESTIMATORS = {
    "gae": lambda r, v, boot, **kw: returns.gae(r, v, boot, gamma=0.9, lam=0.95, **kw),
    "discounted_returns": lambda r, v, boot, **kw: returns.discounted_returns(r, boot, gamma=0.9, **kw),
    "lambda_returns": lambda r, v, boot, **kw: returns.lambda_returns(r, v, gamma=0.9, lam=0.95, **kw),
    "n_step_returns": lambda r, v, boot, **kw: returns.n_step_returns(r, v, gamma=0.9, n=2, **kw),
    "vtrace": lambda r, v, boot, **kw: returns.vtrace(r, v, boot, np.ones_like(r), gamma=0.9, **kw),
}


@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_require_finite_names_the_argument_and_the_first_index(name):
    r, v, boot = rollout()
    r[2, 1] = np.nan
    ESTIMATORS[name](r, v, boot)  # off by default: NaN in, NaN out
    with pytest.raises(ValueError) as raised:
        ESTIMATORS[name](r, v, boot, require_finite=True)
    message = str(raised.value)
    assert message.startswith(f"{name}: argument `rewards`"), message
    assert "index 7" in message, message  # [2, 1] of a C-ordered [4, 3] array


def test_require_finite_keeps_the_bits_of_finite_inputs():
    r, v, boot = rollout()
    a, g = returns.gae(r, v, boot, gamma=0.9, lam=0.95)
    a2, g2 = returns.gae(r, v, boot, gamma=0.9, lam=0.95, require_finite=True)
    assert (bits(a) == bits(a2)).all() and (bits(g) == bits(g2)).all()


def test_require_finite_in_cumsum_and_standardize():
    x = np.array([1.0, np.inf, 2.0], np.float32)
    for call in (
        lambda **kw: returns.discounted_cumsum(x, 0.9, **kw),
        lambda **kw: returns.standardize(x, 1e-8, **kw),
    ):
        call()
        with pytest.raises(ValueError, match=r"argument `x` .*index 1"):
            call(require_finite=True)


def test_optimizer_require_finite_refuses_a_nan_gradient_and_changes_nothing():
    w = np.ones(4, np.float32)
    grad = np.array([0.1, np.nan, 0.2, 0.3], np.float32)
    opt = optim.Adam(1e-3)
    with pytest.raises(ValueError) as raised:
        opt.step({"w": w}, {"w": grad}, require_finite=True)
    message = str(raised.value)
    assert message.startswith("Optimizer.step: argument `params`"), message
    assert "element 1 of the gradient of `w`" in message, message
    assert (w == 1).all() and opt.step_count == 0
    opt.step({"w": w}, {"w": grad})  # off by default, as in PyTorch
    assert np.isnan(w[1])


# Errors name the Python function and argument


def test_pad_and_unpad_name_themselves_not_sequences_new():
    for call, name in (
        (lambda: mask.pad(np.zeros((5, 2), np.float32), [2, 3], max_len=2), "pad"),
        (lambda: mask.unpad(np.zeros((2, 2, 1), np.float32), [1, 3]), "unpad"),
    ):
        with pytest.raises(ValueError) as raised:
            call()
        message = str(raised.value)
        assert message.startswith(f"{name}: argument `lengths`"), message
        assert not RUST_PATH.search(message), message


def test_optimizer_errors_name_python_methods():
    opt = optim.Adam(1e-3)
    with pytest.raises(ValueError) as raised:
        opt.effective_lr()
    assert str(raised.value).startswith("Optimizer.effective_lr:"), raised.value
    with pytest.raises(ValueError) as raised:
        opt.slot("w", "m")
    assert str(raised.value).startswith("Optimizer.slot:"), raised.value
    with pytest.raises(ValueError) as raised:
        optim.Adam(-1.0)
    assert not RUST_PATH.search(str(raised.value)), raised.value


def test_a_refused_state_advises_set_lr_which_exists():
    w = np.ones(3)
    saved = optim.Adam(1e-3)
    saved.step({"w": w}, {"w": np.ones(3)})
    state = saved.state_dict()
    other = optim.Adam(1e-3, beta1=0.8)
    with pytest.raises(ValueError) as raised:
        other.load_state_dict(state)
    message = str(raised.value)
    assert message.startswith("Optimizer.load_state_dict:"), message
    assert "set_lr" in message and not RUST_PATH.search(message), message

    # The advice works: load with the saved rate, then change it.
    resumed = optim.Adam(1e-3)
    resumed.load_state_dict(state)
    resumed.set_lr(5e-4)
    w2 = w.copy()
    resumed.step({"w": w2}, {"w": np.ones(3)})
    assert resumed.last_lr() == 5e-4
    with pytest.raises(ValueError, match=r"^Optimizer.set_lr: argument"):
        resumed.set_lr(float("nan"))


@pytest.mark.parametrize(
    "call",
    [
        lambda threads: returns.gae(*rollout(), gamma=0.9, lam=0.9, threads=threads),
        lambda threads: mask.pad(np.zeros((3, 1), np.float32), [1, 2], threads=threads),
        lambda threads: mask.unpad(np.zeros((2, 2, 1), np.float32), [1, 2], threads=threads),
        lambda threads: optim.Adam(1e-3, threads=threads),
    ],
)
def test_negative_threads_is_a_value_error_naming_threads(call):
    with pytest.raises(ValueError, match=r"argument `threads` must be None or 0"):
        call(-1)
    call(0)  # every thread of rlgrad's pool
    call(None)


# Flags are 0 or 1, of any dtype


FLAG_DTYPES = [np.bool_, np.uint8, np.int8, np.int32, np.int64, np.uint16, np.float32, np.float64]


@given(
    st.sampled_from([np.float32, np.float64]),
    st.sampled_from(FLAG_DTYPES),
    hnp.arrays(np.bool_, (6, 3)),
    hnp.arrays(np.bool_, (6, 3)),
    st.booleans(),
)
def test_flags_of_every_dtype_give_the_bits_of_bools(dt, flag_dtype, term, trunc, batch_major):
    r, v, boot = rollout(6, 3, dt)
    if batch_major:
        r, v, term, trunc = (np.asfortranarray(a) for a in (r, v, term, trunc))
    want = returns.gae(r, v, boot, gamma=0.9, lam=0.95, terminated=term, truncated=trunc)
    got = returns.gae(
        r, v, boot, gamma=0.9, lam=0.95,
        terminated=term.astype(flag_dtype), truncated=trunc.astype(flag_dtype),
    )
    for a, b in zip(want, got):
        assert (bits(a) == bits(b)).all()


@pytest.mark.parametrize(
    "flag_dtype, bad",
    [(np.float32, 0.5), (np.float64, -1.0), (np.float32, np.nan), (np.uint8, 2), (np.int64, 7), (np.float64, 0.5)],
)
@pytest.mark.parametrize("batch_major", [False, True])
def test_flags_other_than_0_or_1_name_the_argument_step_and_column(flag_dtype, bad, batch_major):
    r, v, boot = rollout(4, 3, np.float32)
    flags = np.zeros((4, 3), flag_dtype)
    flags[2, 1] = bad
    flags[3, 2] = bad
    if batch_major:
        r, v, flags = (np.asfortranarray(a) for a in (r, v, flags))
    with pytest.raises(ValueError) as raised:
        returns.gae(r, v, boot, gamma=0.9, lam=0.95, truncated=flags)
    message = str(raised.value)
    assert message.startswith("gae: argument `truncated` is invalid"), message
    assert "at step 2 of column 1" in message, message


def test_flags_of_a_non_numeric_dtype_are_type_errors():
    r, v, boot = rollout()
    with pytest.raises(TypeError, match="terminated"):
        returns.gae(r, v, boot, gamma=0.9, lam=0.9, terminated=np.full((4, 3), "x"))
