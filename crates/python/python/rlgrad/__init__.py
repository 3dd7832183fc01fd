"""rlgrad: deterministic numerics for reinforcement learning on NumPy arrays.

- ``rlgrad.returns``: discounted returns, GAE, TD(lambda), n-step, V-trace over
  ``[T]`` / ``[T, B]`` arrays (time-major, or batch-major ``x.T`` read in place), exact at
  episode boundaries.
- ``rlgrad.mask``: sequence masks, pad/unpad, masked mean/normalize (+ backward),
  RLlib's ``chop_into_sequences``.
- ``rlgrad.optim``: fused SGD/momentum/Adam/AdamW/RMSprop/Adagrad in PyTorch and Keras
  flavors, updating NumPy parameters in place.

Every function takes float32 or float64 arrays, releases the GIL while it computes,
and gives the same bits at every thread count (the Rust crates' determinism contract).
"""

from . import mask, optim, returns

__all__ = ["mask", "optim", "returns"]
