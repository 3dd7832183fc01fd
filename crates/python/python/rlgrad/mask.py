"""Padded sequences for recurrent policies, from the Rust crate rlgrad-mask: masks,
pad/unpad, masked reductions with their gradients, and RLlib's ``chop_into_sequences``.
Padded data is batch-major ``[B, T, ...]``."""

import numpy as np

from ._rlgrad import (
    _chop_lengths,
    masked_mean,
    masked_mean_backward,
    masked_normalize,
    masked_normalize_backward,
    pad,
    sequence_mask,
    unpad,
)

__all__ = [
    "chop_into_sequences",
    "masked_mean",
    "masked_mean_backward",
    "masked_normalize",
    "masked_normalize_backward",
    "pad",
    "sequence_mask",
    "unpad",
]

_BITS = {4: np.float32, 8: np.float64}


def _pad_column(column, seq_lens, max_len):
    """``pad`` for a column of any numeric or bool dtype, bit for bit: float32/float64 go
    straight to rlgrad; other 4- and 8-byte dtypes travel as the float of their size
    (pad only copies, so every bit pattern survives); 1- and 2-byte ones (bool, int8/16,
    uint8/16, float16) go through float64, which holds each of their values exactly."""
    column = np.asarray(column)
    if column.ndim == 0:
        raise ValueError("chop_into_sequences: a feature column needs a row axis, got a scalar")
    if column.dtype in (np.float32, np.float64):
        return pad(column, seq_lens, max_len)
    if column.dtype.kind not in "biuf":
        raise TypeError(
            f"chop_into_sequences: feature columns must be numeric or bool, got {column.dtype}"
        )
    if column.dtype.itemsize in _BITS:
        bits = np.ascontiguousarray(column).view(_BITS[column.dtype.itemsize])
        return pad(bits, seq_lens, max_len).view(column.dtype)
    return pad(column.astype(np.float64), seq_lens, max_len).astype(column.dtype)


def chop_into_sequences(
    *,
    feature_columns,
    state_columns,
    max_seq_len,
    episode_ids=None,
    unroll_ids=None,
    agent_indices=None,
    dynamic_max=True,
    shuffle=False,
    seq_lens=None,
    states_already_reduced_to_init=False,
    handle_nested_data=False,
    _extra_padding=0,
    padding="zero",
):
    """RLlib's ``ray.rllib.policy.rnn_sequencing.chop_into_sequences``, same signature and
    results: returns ``(feature_sequences, initial_states, seq_lens)``.

    Walking the rows in order, a new sequence starts where the row's id
    ``episode_ids + agent_indices + (unroll_ids << 32)`` differs from the previous row's,
    or the current sequence already has ``max_seq_len`` rows (an id that comes back later
    starts a new sequence). ``T = max(seq_lens) + _extra_padding`` if ``dynamic_max``,
    else ``max_seq_len``; each feature column ``[N, ...]`` becomes ``[S * T, ...]`` with
    sequence s in rows ``s*T .. s*T + seq_lens[s] - 1`` and zeros after it (rlgrad's pad
    kernel; every numeric or bool dtype, bit for bit). ``initial_states`` holds each state
    column's row at the start of every sequence (or the state columns as given, with
    ``states_already_reduced_to_init``). ``seq_lens`` is int32 when computed here; given
    ``seq_lens`` are used as they are. ``shuffle`` permutes the sequences with
    ``np.random.permutation``, as RLlib does (seed NumPy's global generator to reproduce it).

    Not supported (ValueError): nested (dict/tuple) columns (``handle_nested_data``) and
    ``padding`` other than ``"zero"``. Missing ids count as 0.
    """
    if handle_nested_data:
        raise ValueError(
            "chop_into_sequences: nested columns (handle_nested_data=True) are not supported; "
            "pass one flat array per column"
        )
    if padding != "zero":
        raise ValueError(f"chop_into_sequences: padding must be 'zero', got {padding!r}")
    columns = [np.asarray(c) for c in feature_columns]
    if seq_lens is None or len(seq_lens) == 0:
        if episode_ids is not None:
            rows = len(episode_ids)
        elif columns:
            rows = len(columns[0])
        else:
            rows = 0
        ids = np.zeros(rows, dtype=np.int64)
        if episode_ids is not None:
            ids = ids + np.asarray(episode_ids, dtype=np.int64)
        if agent_indices is not None:
            ids = ids + np.asarray(agent_indices, dtype=np.int64)
        if unroll_ids is not None:
            ids = ids + (np.asarray(unroll_ids, dtype=np.int64) << 32)
        lengths, starts = _chop_lengths(ids, max_seq_len)
        seq_lens = lengths.astype(np.int32)
    else:
        seq_lens = np.asarray(seq_lens)
        starts = np.concatenate(([0], np.cumsum(seq_lens)[:-1])).astype(np.int64)
    if dynamic_max:
        max_len = (int(seq_lens.max()) if len(seq_lens) else 0) + _extra_padding
    else:
        max_len = max_seq_len
    feature_sequences = []
    for column in columns:
        padded = _pad_column(column, seq_lens, max_len)
        feature_sequences.append(padded.reshape((len(seq_lens) * max_len,) + column.shape[1:]))
    if states_already_reduced_to_init:
        initial_states = list(state_columns)
    else:
        initial_states = [np.asarray(s)[starts] for s in state_columns]
    if shuffle:
        permutation = np.random.permutation(len(seq_lens))
        for i, f in enumerate(feature_sequences):
            by_sequence = f.reshape((len(seq_lens), -1) + f.shape[1:])
            feature_sequences[i] = by_sequence[permutation].reshape(f.shape)
        initial_states = [np.asarray(s)[permutation] for s in initial_states]
        seq_lens = seq_lens[permutation]
    return feature_sequences, initial_states, seq_lens
