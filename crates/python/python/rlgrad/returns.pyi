from typing import Optional, Tuple, TypeVar, Union

import numpy as np
import numpy.typing as npt

F = TypeVar("F", np.float32, np.float64)
Array = npt.NDArray[F]
# Episode-end flags: each 0 or 1, of a bool, integer or float dtype.
Flags = Union[npt.NDArray[np.bool_], npt.NDArray[np.integer], npt.NDArray[np.floating]]

def discounted_cumsum(
    x: Array[F], gamma: float, *, standardize: bool = ..., require_finite: bool = ...
) -> Array[F]: ...
def standardize(
    x: Array[F], eps: float, ddof: int = ..., *, require_finite: bool = ...
) -> Array[F]: ...
def discounted_returns(
    rewards: Array[F],
    bootstrap: Union[Array[F], float],
    *,
    gamma: Optional[float],
    terminated: Optional[Flags] = ...,
    truncated: Optional[Flags] = ...,
    final_values: Optional[Array[F]] = ...,
    discounts: Optional[Array[F]] = ...,
    threads: Optional[int] = ...,
    require_finite: bool = ...,
) -> Array[F]: ...
def gae(
    rewards: Array[F],
    values: Array[F],
    bootstrap: Union[Array[F], float],
    *,
    gamma: Optional[float],
    lam: float,
    terminated: Optional[Flags] = ...,
    truncated: Optional[Flags] = ...,
    final_values: Optional[Array[F]] = ...,
    discounts: Optional[Array[F]] = ...,
    threads: Optional[int] = ...,
    require_finite: bool = ...,
) -> Tuple[Array[F], Array[F]]: ...
def lambda_returns(
    rewards: Array[F],
    next_values: Array[F],
    *,
    gamma: Optional[float],
    lam: float,
    terminated: Optional[Flags] = ...,
    truncated: Optional[Flags] = ...,
    final_values: Optional[Array[F]] = ...,
    discounts: Optional[Array[F]] = ...,
    threads: Optional[int] = ...,
    require_finite: bool = ...,
) -> Array[F]: ...
def n_step_returns(
    rewards: Array[F],
    next_values: Array[F],
    *,
    gamma: Optional[float],
    n: int,
    terminated: Optional[Flags] = ...,
    truncated: Optional[Flags] = ...,
    final_values: Optional[Array[F]] = ...,
    discounts: Optional[Array[F]] = ...,
    threads: Optional[int] = ...,
    require_finite: bool = ...,
) -> Array[F]: ...
def vtrace(
    rewards: Array[F],
    values: Array[F],
    bootstrap: Union[Array[F], float],
    rhos: Array[F],
    *,
    gamma: Optional[float],
    lam: float = ...,
    clip_rho: float = ...,
    clip_pg_rho: float = ...,
    terminated: Optional[Flags] = ...,
    truncated: Optional[Flags] = ...,
    final_values: Optional[Array[F]] = ...,
    discounts: Optional[Array[F]] = ...,
    threads: Optional[int] = ...,
    require_finite: bool = ...,
) -> Tuple[Array[F], Array[F]]: ...
