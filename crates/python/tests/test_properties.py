"""Property tests (hypothesis): layouts, thread counts and dtypes never change bits,
episode boundaries cut exactly, garbage in padding never reaches a result, state dicts
resume bit for bit, and random inputs only ever raise ValueError/TypeError."""

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from rlgrad import mask, optim, returns

settings.register_profile("rlgrad", max_examples=60, deadline=None)
settings.load_profile("rlgrad")

DTYPES = st.sampled_from([np.float32, np.float64])


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


@st.composite
def batch(draw):
    dt = draw(DTYPES)
    t, b = draw(st.integers(1, 12)), draw(st.integers(1, 5))
    floats = st.floats(-10, 10, width=32)
    r = draw(hnp.arrays(dt, (t, b), elements=floats))
    v = draw(hnp.arrays(dt, (t, b), elements=floats))
    boot = draw(hnp.arrays(dt, (b,), elements=floats))
    term = draw(hnp.arrays(np.bool_, (t, b)))
    trunc = draw(hnp.arrays(np.bool_, (t, b)))
    return r, v, boot, term, trunc


@given(batch(), st.floats(0, 1), st.floats(0, 1))
def test_gae_same_bits_for_layouts_and_threads(data, gamma, lam):
    r, v, boot, term, trunc = data
    kw = dict(gamma=gamma, lam=lam, terminated=term, truncated=trunc)
    a, g = returns.gae(r, v, boot, **kw)
    # Fortran order is read in place, strided views are copied: the same bits.
    a_f, g_f = returns.gae(np.asfortranarray(r), np.asfortranarray(v), boot, **kw)
    wide = np.zeros((r.shape[0], 2 * r.shape[1]), r.dtype)
    wide[:, ::2] = r
    a_s, _ = returns.gae(wide[:, ::2], v, boot, **kw)
    for threads in (1, 2, 4):
        a_t, g_t = returns.gae(r, v, boot, threads=threads, **kw)
        assert np.array_equal(bits(a_t), bits(a)) and np.array_equal(bits(g_t), bits(g))
    assert np.array_equal(bits(a_f), bits(a)) and np.array_equal(bits(g_f), bits(g))
    assert np.array_equal(bits(a_s), bits(a))
    assert a.dtype == r.dtype and a.flags["C_CONTIGUOUS"]


@given(batch(), st.floats(0, 1), st.floats(0, 1))
def test_batch_major_arrays_are_read_in_place_with_the_same_bits(data, gamma, lam):
    r, v, boot, term, trunc = data
    f = np.asfortranarray
    rhos = np.exp(np.clip(v, -3, 3)).astype(r.dtype)
    flags = dict(terminated=term, truncated=trunc)
    f_flags = dict(terminated=f(term), truncated=f(trunc))
    calls = [
        lambda r, v, rhos, fl: returns.gae(r, v, boot, gamma=gamma, lam=lam, **fl),
        lambda r, v, rhos, fl: returns.vtrace(r, v, boot, rhos, gamma=gamma, lam=lam, **fl),
        lambda r, v, rhos, fl: returns.lambda_returns(r, v, gamma=gamma, lam=lam, **fl),
        lambda r, v, rhos, fl: returns.n_step_returns(r, v, gamma=gamma, n=3, **fl),
        lambda r, v, rhos, fl: returns.discounted_returns(
            r, boot, gamma=gamma, terminated=fl["terminated"]
        ),
    ]
    batch_major = r.shape[1] > 1 and r.shape[0] > 1
    for call in calls:
        want = call(r, v, rhos, flags)
        # All batch-major (x.T of C-ordered [B, T] arrays), and each kind of mixture: the
        # arrays stored unlike `rewards` are copied into its order.
        for args in [
            (f(r), f(v), f(rhos), f_flags),
            (f(r), v, rhos, flags),
            (r, f(v), f(rhos), f_flags),
        ]:
            got = call(*args)
            for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                assert np.array_equal(bits(g), bits(w))
                assert g.shape == w.shape and g.dtype == w.dtype
                if batch_major and args[0].flags["F_CONTIGUOUS"]:
                    assert g.T.flags["C_CONTIGUOUS"], "results come in the order of `rewards`"


@given(batch(), st.floats(0, 1), st.floats(0, 1))
def test_gae_columns_are_independent(data, gamma, lam):
    r, v, boot, term, _ = data
    a, _ = returns.gae(r, v, boot, gamma=gamma, lam=lam, terminated=term)
    for j in range(r.shape[1]):
        col, _ = returns.gae(r[:, j], v[:, j], boot[j], gamma=gamma, lam=lam, terminated=term[:, j])
        assert np.array_equal(bits(col), bits(a[:, j]))


@given(batch(), st.floats(0, 1), st.floats(0, 1), st.integers(0, 11))
def test_termination_cuts_the_episode(data, gamma, lam, cut):
    """An in-batch termination: the steps up to it equal that episode computed alone, and
    NaN values after it (a reset observation) never reach them."""
    r, v, boot, _, _ = data
    r, v, boot = r[:, 0], v[:, 0], boot[0]
    cut = min(cut, len(r) - 1)
    term = np.zeros(len(r), bool)
    term[cut] = True
    v_nan = v.copy()
    v_nan[cut + 1:] = np.nan
    a, _ = returns.gae(r, v_nan, boot, gamma=gamma, lam=lam, terminated=term)
    alone, _ = returns.gae(r[:cut + 1], v[:cut + 1], np.nan, gamma=gamma, lam=lam, terminated=term[:cut + 1])
    assert np.array_equal(bits(a[:cut + 1]), bits(alone))


@given(batch(), st.floats(0, 1), st.floats(0, 1), st.integers(0, 11))
def test_truncation_bootstraps_on_the_next_value(data, gamma, lam, cut):
    """Next-step autoreset: a truncation at `cut` bootstraps on values[cut + 1], like the
    episode computed alone with that bootstrap."""
    r, v, boot, _, _ = data
    r, v, boot = r[:, 0], v[:, 0], boot[0]
    cut = min(cut, len(r) - 1)
    trunc = np.zeros(len(r), bool)
    trunc[cut] = True
    a, _ = returns.gae(r, v, boot, gamma=gamma, lam=lam, truncated=trunc)
    nxt = v[cut + 1] if cut + 1 < len(r) else boot
    fv = np.zeros(cut + 1, r.dtype)
    fv[cut] = nxt
    alone, _ = returns.gae(
        r[:cut + 1], v[:cut + 1], nxt, gamma=gamma, lam=lam, truncated=trunc[:cut + 1], final_values=fv
    )
    assert np.array_equal(bits(a[:cut + 1]), bits(alone))


@given(batch(), st.floats(0, 1))
def test_gae_lambda_one_is_returns_minus_values(data, gamma):
    r, v, boot, term, _ = data
    a, _ = returns.gae(r, v, boot, gamma=gamma, lam=1.0, terminated=term)
    g = returns.discounted_returns(r, boot, gamma=gamma, terminated=term)
    np.testing.assert_allclose(a, g - v, rtol=1e-4, atol=1e-3)


@st.composite
def padded(draw):
    dt = draw(DTYPES)
    lengths = draw(st.lists(st.integers(0, 6), min_size=1, max_size=5))
    max_len = max(lengths) + draw(st.integers(0, 2))
    f = draw(st.sampled_from([(), (1,), (3,), (2, 2)]))
    flat = draw(hnp.arrays(dt, (sum(lengths),) + f, elements=st.floats(-100, 100, width=32)))
    garbage = draw(st.sampled_from([np.nan, np.inf, -np.inf, 1e30]))
    return flat, lengths, max_len, garbage


def with_garbage(p, lengths, garbage):
    p = p.copy()
    valid = mask.sequence_mask(lengths, p.shape[1])
    p[~valid] = garbage
    return p


@given(padded())
def test_pad_unpad_and_garbage_in_padding(data):
    flat, lengths, max_len, garbage = data
    p = mask.pad(flat, lengths, max_len)
    assert p.shape == (len(lengths), max_len) + flat.shape[1:]
    valid = mask.sequence_mask(lengths, max_len)
    assert np.all(p[~valid] == 0)
    dirty = with_garbage(p, lengths, garbage)
    assert np.array_equal(bits(mask.unpad(dirty, lengths)), bits(flat))
    for threads in (1, 3):
        assert np.array_equal(bits(mask.pad(flat, lengths, max_len, threads=threads)), bits(p))
    if len(flat):
        m = mask.masked_mean(dirty, lengths)
        assert m == mask.masked_mean(p, lengths)
        np.testing.assert_allclose(m, np.mean(flat.astype(np.float64)), rtol=1e-5, atol=1e-3)
        g = mask.masked_mean_backward(dirty, lengths)
        assert np.all(g[~valid] == 0) and np.isfinite(g).all()
    if flat.size > 1:
        y = mask.masked_normalize(dirty, lengths)
        assert np.all(y[~valid] == 0) and np.isfinite(y).all()
        dy = mask.masked_normalize_backward(dirty, lengths, with_garbage(np.ones_like(p), lengths, garbage))
        assert np.all(dy[~valid] == 0)
        if np.ptp(flat) > 0:  # the std's gradient at std = 0 is NaN, padding or not
            assert np.isfinite(dy).all()


@given(st.lists(st.integers(0, 4), max_size=30), st.integers(1, 5), st.booleans())
def test_chop_into_sequences_like_rllib(ids, max_seq_len, dynamic_max):
    """RLlib's loop, written out, against rlgrad's chop (ids that come back start anew)."""
    ids = np.array(ids, dtype=np.int64)
    feats = np.arange(len(ids), dtype=np.int64) * 3 - 7
    (got,), (init,), seq_lens = mask.chop_into_sequences(
        feature_columns=[feats], state_columns=[feats * 2], max_seq_len=max_seq_len,
        episode_ids=ids, dynamic_max=dynamic_max,
    )
    want_lens, n, prev = [], 0, None
    for uid in ids:
        if (prev is not None and uid != prev) or n >= max_seq_len:
            want_lens.append(n)
            n = 0
        n += 1
        prev = uid
    if n:
        want_lens.append(n)
    assert seq_lens.tolist() == want_lens and seq_lens.dtype == np.int32
    t = (max(want_lens) if want_lens else 0) if dynamic_max else max_seq_len
    want = np.zeros(len(want_lens) * t, np.int64)
    i = 0
    for s, length in enumerate(want_lens):
        want[s * t:s * t + length] = feats[i:i + length]
        i += length
    assert got.dtype == np.int64 and np.array_equal(got, want)
    starts = np.concatenate(([0], np.cumsum(want_lens)[:-1])).astype(int) if want_lens else []
    assert np.array_equal(init, (feats * 2)[starts])


RULES = st.sampled_from([
    ("sgd", {}), ("momentum", {"flavor": "torch", "nesterov": True}), ("momentum", {"flavor": "keras"}),
    ("adam", {"flavor": "torch", "amsgrad": True}), ("adam", {"flavor": "keras"}), ("adamw", {}),
    ("rmsprop", {"flavor": "torch", "centered": True, "momentum": 0.5}), ("rmsprop", {"flavor": "keras"}),
    ("adagrad", {"flavor": "torch", "lr_decay": 0.1}), ("adagrad", {"flavor": "keras"}),
])


@given(RULES, DTYPES, st.integers(1, 4), st.integers(0, 3), st.data())
def test_optimizer_state_dict_resumes_bit_for_bit(rule, dt, steps, threads, data):
    name, hyper = rule
    shape = data.draw(st.sampled_from([(3,), (2, 3), (1,)]))
    grads = [data.draw(hnp.arrays(dt, shape, elements=st.floats(-5, 5, width=32))) for _ in range(2 * steps)]
    w0 = data.draw(hnp.arrays(dt, shape, elements=st.floats(-5, 5, width=32)))
    straight = optim.Optimizer(name, 0.01, threads=threads or None, **hyper)
    w = w0.copy()
    for g in grads:
        straight.step({"w": w}, {"w": g})
    first = optim.Optimizer(name, 0.01, **hyper)
    w2 = w0.copy()
    for g in grads[:steps]:
        first.step({"w": w2}, {"w": g})
    buf = io.BytesIO()
    np.savez(buf, **first.state_dict())
    buf.seek(0)
    resumed = optim.Optimizer(name, 0.01, **hyper)
    resumed.load_state_dict(dict(np.load(buf)))
    assert resumed.dtype == (None if not resumed.slot_names else np.dtype(dt).name)
    for g in grads[steps:]:
        resumed.step({"w": w2}, {"w": g})
    assert np.array_equal(bits(w2), bits(w))
    for slot in straight.slot_names:
        assert np.array_equal(bits(resumed.slot("w", slot)), bits(straight.slot("w", slot)))
    assert resumed.effective_lr() == straight.effective_lr()


def test_optimizer_refuses_what_it_cannot_update_in_place():
    opt = optim.Adam(1e-3)
    w = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        opt.step({"w": w.T}, {"w": np.ones((2, 3), np.float32)})
    ro = np.ones(3, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError):
        opt.step({"w": ro}, {"w": ro})
    with pytest.raises(ValueError):  # the gradient is the parameter itself
        opt.step({"w": w}, {"w": w})
    with pytest.raises(TypeError):
        opt.step({"w": np.ones(3, np.int32)}, {"w": np.ones(3, np.int32)})
    assert opt.step_count == 0 and opt.dtype is None
    with pytest.raises(ValueError, match="keras"):
        optim.Adam(1e-3).load_state_dict(_stepped(optim.Adam(1e-3, flavor="keras")).state_dict())


def _stepped(opt):
    opt.step({"w": np.ones(2)}, {"w": np.ones(2)})
    return opt


def test_mixed_dtypes_are_type_errors():
    r32, v64 = np.ones((3, 2), np.float32), np.ones((3, 2))
    with pytest.raises(TypeError, match="float32"):
        returns.gae(r32, v64, np.zeros(2, np.float32), gamma=0.9, lam=0.9)
    with pytest.raises(TypeError):
        returns.gae(r32.astype(np.int64), v64, np.zeros(2), gamma=0.9, lam=0.9)
    with pytest.raises(TypeError, match="terminated"):
        returns.gae(r32, r32, np.zeros(2, np.float32), gamma=0.9, lam=0.9, terminated=np.ones((3, 2), np.complex64))
    with pytest.raises(ValueError, match="shape"):
        returns.gae(r32, r32.T.copy(), np.zeros(2, np.float32), gamma=0.9, lam=0.9)


ANY = st.one_of(
    st.none(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=3),
    st.lists(st.integers(-2, 5), max_size=4),
    hnp.arrays(
        st.sampled_from([np.float32, np.float64, np.int64, np.bool_, np.uint8, np.int32]),
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
    ),
)

CALLS = [
    lambda a: returns.discounted_cumsum(a[0], a[1]),
    lambda a: returns.standardize(a[0], a[1]),
    lambda a: returns.gae(a[0], a[1], a[2], gamma=a[3], lam=a[4], terminated=a[5]),
    lambda a: returns.discounted_returns(a[0], a[1], gamma=a[3], truncated=a[5], final_values=a[2]),
    lambda a: returns.lambda_returns(a[0], a[1], gamma=a[3], lam=a[4], discounts=a[2]),
    lambda a: returns.n_step_returns(a[0], a[1], gamma=a[3], n=a[4], terminated=a[2]),
    lambda a: returns.vtrace(a[0], a[1], a[2], a[3], gamma=a[4], lam=a[5]),
    lambda a: mask.sequence_mask(a[0], a[1]),
    lambda a: mask.pad(a[0], a[1], a[2], threads=a[3]),
    lambda a: mask.unpad(a[0], a[1]),
    lambda a: mask.masked_mean(a[0], a[1]),
    lambda a: mask.masked_mean_backward(a[0], a[1], a[2]),
    lambda a: mask.masked_normalize(a[0], a[1], eps=a[2], ddof=a[3]),
    lambda a: mask.masked_normalize_backward(a[0], a[1], a[2]),
    lambda a: mask.chop_into_sequences(feature_columns=[a[0]], state_columns=[], max_seq_len=a[1], episode_ids=a[2]),
    lambda a: optim.Optimizer(a[0], a[1]),
    lambda a: optim.Adam(1e-3).step({"w": a[0]}, {"w": a[1]}),
    lambda a: optim.Adam(1e-3).load_state_dict({"step": a[0], "groups/0/rule": a[1], "groups/0/last_lr": a[2]}),
]


@settings(max_examples=300)
@given(st.sampled_from(range(len(CALLS))), st.lists(ANY, min_size=6, max_size=6))
def test_fuzz_only_value_and_type_errors(which, args):
    """Random types, dtypes and shapes into every binding: a result or a ValueError /
    TypeError (OverflowError, a ValueError's cousin, for negative counts), never a crash or
    another exception."""
    try:
        CALLS[which](args)
    except (ValueError, TypeError, OverflowError):
        pass


def test_wheel_ships_type_stubs():
    from importlib import resources

    files = {f.name for f in resources.files("rlgrad").iterdir()}
    assert {"py.typed", "__init__.pyi", "returns.pyi", "mask.pyi", "optim.pyi"} <= files
