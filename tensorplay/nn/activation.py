"""Activation modules: thin wrappers around ``tensorplay.nn.functional``."""

from __future__ import annotations

from .._tensor import Tensor
from . import functional as F
from .module import Module

__all__ = ["GELU", "Dropout", "LogSoftmax", "ReLU", "SiLU", "Sigmoid", "Softmax", "Softplus", "Tanh"]


class ReLU(Module):
    """``max(x, 0)`` elementwise.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> nn.ReLU()(tp.tensor([-1.0, 1.0])).tolist()
    [0.0, 1.0]
    """

    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)


class Tanh(Module):
    """The hyperbolic tangent elementwise.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> nn.Tanh()(tp.zeros(2)).tolist()
    [0.0, 0.0]
    """

    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))`` elementwise.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> nn.Sigmoid()(tp.zeros(2)).tolist()
    [0.5, 0.5]
    """

    def forward(self, x: Tensor) -> Tensor:
        return F.sigmoid(x)


class Softmax(Module):
    """``softmax`` over dimension ``dim``.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> nn.Softmax(dim=-1)(tp.zeros(1, 4)).tolist()
    [[0.25, 0.25, 0.25, 0.25]]
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class LogSoftmax(Module):
    """``log_softmax`` over dimension ``dim``.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> nn.LogSoftmax(dim=0)(tp.zeros(2)).exp().tolist()
    [0.5, 0.5]
    """

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.log_softmax(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Dropout(Module):
    """``nn.functional.dropout`` in training mode; the identity after ``eval()``.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> drop = nn.Dropout(0.5)
    >>> kept = float((drop(tp.ones(1000)).numpy() > 0).mean())
    >>> 0.4 < kept < 0.6
    True
    >>> drop.eval()(tp.ones(2)).tolist()
    [1.0, 1.0]
    """

    def __init__(self, p: float = 0.5) -> None:
        super().__init__()
        self.p = F._dropout_probability(p)

    def forward(self, x: Tensor) -> Tensor:
        return F.dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"


class GELU(Module):
    """``F.gelu`` (``approximate="none"`` or ``"tanh"``).

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> nn.GELU()(tp.zeros(2)).tolist()
    [0.0, 0.0]
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        if approximate not in ("none", "tanh"):
            raise ValueError(f"GELU expects approximate 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate)


class SiLU(Module):
    """``x * sigmoid(x)`` elementwise.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> nn.SiLU()(tp.zeros(2)).tolist()
    [0.0, 0.0]
    """

    def forward(self, x: Tensor) -> Tensor:
        return F.silu(x)


class Softplus(Module):
    """``F.softplus`` with ``beta`` and ``threshold``.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> nn.Softplus()(tp.tensor([30.0])).tolist()
    [30.0]
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, x: Tensor) -> Tensor:
        return F.softplus(x, self.beta, self.threshold)
