"""``Linear``: an affine map ``x @ W.T + b`` with PyTorch's default initialisation."""

from __future__ import annotations

import math

from .._dtype import as_dtype
from .._random import rand
from .._tensor import Tensor
from ..autograd import no_grad
from . import functional as F
from .module import Module
from .parameter import Parameter

__all__ = ["Linear"]


def _check_size(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Linear expects {name} to be a non-negative int, got {value!r}")
    return value


class Linear(Module):
    """``y = x @ weight.T + bias`` on the last dimension of ``x``.

    ``weight`` (``out_features x in_features``) and ``bias`` start uniform in
    ``[-1/sqrt(in_features), 1/sqrt(in_features))``, as in PyTorch, drawn with
    ``tp.rand``: ``tp.manual_seed`` makes them reproducible.

    Parameters
    ----------
    in_features, out_features : int
        Sizes of the last dimension of the input and of the output.
    bias : bool, default True
        Whether to add a learned bias.
    dtype : tensorplay dtype, optional
        Of the parameters (float32 by default).

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> tp.manual_seed(0)
    >>> fc = nn.Linear(3, 2)
    >>> fc
    Linear(in_features=3, out_features=2, bias=True)
    >>> fc(tp.ones(5, 3)).shape
    (5, 2)
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, dtype=None) -> None:
        super().__init__()
        self.in_features = _check_size("in_features", in_features)
        self.out_features = _check_size("out_features", out_features)
        dtype = as_dtype(dtype or "float32")
        if not dtype.is_floating_point:
            raise TypeError(f"Linear expects a floating point dtype, got {dtype.name}")
        bound = 1.0 / math.sqrt(in_features) if in_features else 0.0
        self.weight = Parameter(self._uniform((out_features, in_features), bound, dtype))
        if bias:
            self.bias = Parameter(self._uniform((out_features,), bound, dtype))
        else:
            self.register_parameter("bias", None)

    @staticmethod
    def _uniform(shape: tuple[int, ...], bound: float, dtype) -> Tensor:
        with no_grad():
            return rand(*shape, dtype=dtype) * (2.0 * bound) - bound

    def reset_parameters(self) -> None:
        """Draw new initial values in place (the parameter objects stay)."""
        bound = 1.0 / math.sqrt(self.in_features) if self.in_features else 0.0
        with no_grad():
            for p in self.parameters():
                p.detach().copy_(self._uniform(p.shape, bound, p.dtype))

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
