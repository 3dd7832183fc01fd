from typing import Dict, List, Mapping, Optional

import numpy as np
import numpy.typing as npt

Arrays = Mapping[str, npt.NDArray[np.floating]]

class Optimizer:
    def __new__(
        cls,
        rule: str,
        lr: float,
        *,
        flavor: str = ...,
        threads: Optional[int] = ...,
        momentum: Optional[float] = ...,
        dampening: Optional[float] = ...,
        nesterov: Optional[bool] = ...,
        beta1: Optional[float] = ...,
        beta2: Optional[float] = ...,
        eps: Optional[float] = ...,
        weight_decay: Optional[float] = ...,
        amsgrad: Optional[bool] = ...,
        alpha: Optional[float] = ...,
        centered: Optional[bool] = ...,
        lr_decay: Optional[float] = ...,
        initial_accumulator_value: Optional[float] = ...,
    ) -> "Optimizer": ...
    def step(self, params: Arrays, grads: Arrays, *, require_finite: bool = ...) -> None: ...
    def set_lr(self, lr: float, group: int = ...) -> None: ...
    def effective_lr(self, group: int = ...) -> float: ...
    def effective_lr_of(self, name: str) -> float: ...
    def last_lr(self, group: int = ...) -> Optional[float]: ...
    @property
    def step_count(self) -> int: ...
    @property
    def slot_names(self) -> List[str]: ...
    @property
    def dtype(self) -> Optional[str]: ...
    def slot(self, name: str, slot: str) -> npt.NDArray[np.floating]: ...
    def state_dict(self) -> Dict[str, npt.NDArray[np.generic]]: ...
    def load_state_dict(self, state: Mapping[str, npt.ArrayLike]) -> None: ...

class Sgd(Optimizer):
    def __new__(cls, lr: float, *, weight_decay: float = ..., threads: Optional[int] = ...) -> "Sgd": ...

class Momentum(Optimizer):
    def __new__(
        cls, lr: float, *, flavor: str = ..., momentum: float = ..., dampening: float = ...,
        nesterov: bool = ..., weight_decay: float = ..., threads: Optional[int] = ...,
    ) -> "Momentum": ...

class Adam(Optimizer):
    def __new__(
        cls, lr: float, *, flavor: str = ..., beta1: float = ..., beta2: float = ...,
        eps: Optional[float] = ..., weight_decay: float = ..., amsgrad: bool = ...,
        threads: Optional[int] = ...,
    ) -> "Adam": ...

class AdamW(Optimizer):
    def __new__(
        cls, lr: float, *, beta1: float = ..., beta2: float = ..., eps: float = ...,
        weight_decay: float = ..., amsgrad: bool = ..., threads: Optional[int] = ...,
    ) -> "AdamW": ...

class Rmsprop(Optimizer):
    def __new__(
        cls, lr: float, *, flavor: str = ..., alpha: Optional[float] = ..., eps: Optional[float] = ...,
        momentum: float = ..., centered: bool = ..., weight_decay: float = ..., threads: Optional[int] = ...,
    ) -> "Rmsprop": ...

class Adagrad(Optimizer):
    def __new__(
        cls, lr: float, *, flavor: str = ..., lr_decay: Optional[float] = ..., eps: Optional[float] = ...,
        initial_accumulator_value: Optional[float] = ..., weight_decay: float = ...,
        threads: Optional[int] = ...,
    ) -> "Adagrad": ...
