from typing import Any, List, Optional, Sequence, Tuple, TypeVar, Union

import numpy as np
import numpy.typing as npt

F = TypeVar("F", np.float32, np.float64)
Array = npt.NDArray[F]
Lengths = Union[npt.NDArray[np.integer], Sequence[int]]

def sequence_mask(lengths: Lengths, max_len: Optional[int] = ...) -> npt.NDArray[np.bool_]: ...
def pad(
    flat: Array[F], lengths: Lengths, max_len: Optional[int] = ..., *, threads: Optional[int] = ...
) -> Array[F]: ...
def unpad(padded: Array[F], lengths: Lengths, *, threads: Optional[int] = ...) -> Array[F]: ...
def masked_mean(x: Array[F], lengths: Lengths) -> float: ...
def masked_mean_backward(x: Array[F], lengths: Lengths, grad: float = ...) -> Array[F]: ...
def masked_normalize(x: Array[F], lengths: Lengths, *, eps: float = ..., ddof: int = ...) -> Array[F]: ...
def masked_normalize_backward(
    x: Array[F], lengths: Lengths, grad: Array[F], *, eps: float = ..., ddof: int = ...
) -> Array[F]: ...
def chop_into_sequences(
    *,
    feature_columns: Sequence[npt.ArrayLike],
    state_columns: Sequence[npt.ArrayLike],
    max_seq_len: int,
    episode_ids: Optional[npt.ArrayLike] = ...,
    unroll_ids: Optional[npt.ArrayLike] = ...,
    agent_indices: Optional[npt.ArrayLike] = ...,
    dynamic_max: bool = ...,
    shuffle: bool = ...,
    seq_lens: Optional[npt.ArrayLike] = ...,
    states_already_reduced_to_init: bool = ...,
    handle_nested_data: bool = ...,
    _extra_padding: int = ...,
    padding: str = ...,
) -> Tuple[List[npt.NDArray[Any]], List[npt.NDArray[Any]], npt.NDArray[np.integer]]: ...
