"""Fused optimizers from the Rust crate rlgrad-optim, updating NumPy parameter arrays in
place, in PyTorch's and Keras' conventions (``flavor``). Each class documents its update;
``t`` counts steps from 1, ``g`` is the gradient, ``p`` the parameter.

    opt = rlgrad.optim.Adam(3e-4)
    opt.step({"w": w, "b": b}, {"w": grad_w, "b": grad_b})   # w, b updated in place
    opt.effective_lr()          # alpha_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)
    opt.slot("w", "m")          # a copy of the first moment of w
    np.savez("opt.npz", **opt.state_dict())
"""

from ._rlgrad import Optimizer

__all__ = ["Adagrad", "Adam", "AdamW", "Momentum", "Optimizer", "Rmsprop", "Sgd"]


def _new(cls, rule, arguments):
    """The optimizer of ``rule`` from the arguments of a class's ``__new__`` (its
    ``locals()``), so that each keyword is written once, in the signature; the tests hold
    the signatures to rlgrad-optim's tables of hyper-parameters."""
    keywords = {name: value for name, value in arguments.items() if name not in ("cls", "lr")}
    return Optimizer.__new__(cls, rule, arguments["lr"], **keywords)


class Sgd(Optimizer):
    """Plain SGD, ``torch.optim.SGD`` without momentum: ``g += weight_decay * p`` (L2),
    ``p -= lr * g``. No slots."""

    def __new__(cls, lr, *, weight_decay=0.0, threads=None):
        return _new(cls, "sgd", locals())


class Momentum(Optimizer):
    """SGD with momentum; ``flavor`` picks the formula and the slot.

    - ``"torch"`` (``torch.optim.SGD(momentum=...)``), slot ``momentum_buffer``:
      ``g += weight_decay * p``; ``buf = g`` at t = 1, else
      ``buf = momentum * buf + (1 - dampening) * g``; ``d = g + momentum * buf`` if
      nesterov else ``buf``; ``p -= lr * d``.
    - ``"keras"`` (``keras.optimizers.SGD``), slot ``velocity`` (includes ``-lr``):
      ``p -= lr * weight_decay * p``; ``velocity = momentum * velocity - lr * g``;
      ``p += momentum * velocity - lr * g`` if nesterov else ``p += velocity``.
    - ``"core"`` (TF's Core-APIs guide), slot ``change``:
      ``change = lr * g + momentum * change``; ``p -= change``.

    Defaults: momentum 0.9, no dampening, no Nesterov, no weight decay.
    """

    def __new__(
        cls,
        lr,
        *,
        flavor="torch",
        momentum=0.9,
        dampening=0.0,
        nesterov=False,
        weight_decay=0.0,
        threads=None,
    ):
        return _new(cls, "momentum", locals())


class Adam(Optimizer):
    """Adam; slots ``m``, ``v`` (and ``v_max`` with amsgrad).

    ``m = beta1 * m + (1 - beta1) * g``; ``v = beta2 * v + (1 - beta2) * g^2``;
    with amsgrad ``v_max = max(v_max, v)`` replaces ``v`` below.

    - ``"torch"`` (``torch.optim.Adam``; ``weight_decay`` is L2, ``g += wd * p``):
      ``p -= (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)``
      (eps added to the square root of the bias-corrected v; default eps 1e-8).
    - ``"keras"`` (``keras.optimizers.Adam``; decoupled ``p -= lr * wd * p``):
      ``p -= alpha_t * m / (sqrt(v) + eps)`` (eps added to the raw sqrt(v); default 1e-7).

    ``effective_lr()`` is ``alpha_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t)``.
    Defaults: betas 0.9 / 0.999, no weight decay, no amsgrad.
    """

    def __new__(
        cls,
        lr,
        *,
        flavor="torch",
        beta1=0.9,
        beta2=0.999,
        eps=None,
        weight_decay=0.0,
        amsgrad=False,
        threads=None,
    ):
        return _new(cls, "adam", locals())


class AdamW(Optimizer):
    """AdamW, ``torch.optim.AdamW``: ``p *= 1 - lr * weight_decay``, then Adam's torch
    update. Defaults: betas 0.9 / 0.999, eps 1e-8, weight decay 0.01 (PyTorch's)."""

    def __new__(
        cls,
        lr,
        *,
        beta1=0.9,
        beta2=0.999,
        eps=1e-8,
        weight_decay=0.01,
        amsgrad=False,
        threads=None,
    ):
        return _new(cls, "adamw", locals())


class Rmsprop(Optimizer):
    """RMSprop; slots ``square_avg``, ``grad_avg`` (centered), ``momentum_buffer``
    (momentum > 0).

    ``square_avg = alpha * square_avg + (1 - alpha) * g^2``; centered:
    ``grad_avg = alpha * grad_avg + (1 - alpha) * g``.

    - ``"torch"``: ``avg = sqrt(square_avg - grad_avg^2) + eps`` (eps outside);
      momentum: ``buf = momentum * buf + g / avg``, ``p -= lr * buf``; else
      ``p -= lr * g / avg``. Defaults alpha 0.99, eps 1e-8.
    - ``"keras"`` (``alpha`` is keras' ``rho``): ``inc = lr * g / sqrt(square_avg -
      grad_avg^2 + eps)`` (eps inside); momentum: ``buf = momentum * buf + inc``,
      ``p -= buf``; else ``p -= inc``. Defaults alpha 0.9, eps 1e-7.
    """

    def __new__(
        cls,
        lr,
        *,
        flavor="torch",
        alpha=None,
        eps=None,
        momentum=0.0,
        centered=False,
        weight_decay=0.0,
        threads=None,
    ):
        return _new(cls, "rmsprop", locals())


class Adagrad(Optimizer):
    """Adagrad; slot ``sum`` (starts at ``initial_accumulator_value``).

    - ``"torch"``: ``clr = lr / (1 + (t - 1) * lr_decay)``; ``sum += g^2``;
      ``p -= clr * g / (sqrt(sum) + eps)``. Defaults eps 1e-10, initial value 0.
    - ``"keras"``: ``sum += g^2``; ``p -= lr * g / sqrt(sum + eps)``. Defaults eps 1e-7,
      initial value 0.1, no lr_decay.
    """

    def __new__(
        cls,
        lr,
        *,
        flavor="torch",
        lr_decay=None,
        eps=None,
        initial_accumulator_value=None,
        weight_decay=0.0,
        threads=None,
    ):
        return _new(cls, "adagrad", locals())
