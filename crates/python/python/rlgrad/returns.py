"""Return and advantage estimators over ``[T]`` / ``[T, B]`` arrays (axis 0 is time;
C-ordered time-major or Fortran-ordered batch-major arrays are read in place), from the Rust
crate rlgrad-returns. See each function's docstring for its formula."""

from ._rlgrad import (
    discounted_cumsum,
    discounted_returns,
    gae,
    lambda_returns,
    n_step_returns,
    standardize,
    vtrace,
)

__all__ = [
    "discounted_cumsum",
    "discounted_returns",
    "gae",
    "lambda_returns",
    "n_step_returns",
    "standardize",
    "vtrace",
]
