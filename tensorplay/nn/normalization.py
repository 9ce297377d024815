"""``LayerNorm`` and ``Embedding``: layers with weights of their own, over
``nn.functional``'s ``layer_norm`` and ``embedding``."""

from __future__ import annotations

from .._dtype import as_dtype
from .._factories import ones, zeros
from .._random import randn
from .._tensor import Tensor
from . import functional as F
from .linear import _check_size
from .module import Module
from .parameter import Parameter

__all__ = ["Embedding", "LayerNorm"]


class LayerNorm(Module):
    """Normalise over the last dimensions (``normalized_shape``), then scale by
    ``weight`` (ones) and shift by ``bias`` (zeros) when
    ``elementwise_affine``, as PyTorch.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> [round(v, 4) for v in nn.LayerNorm(3)(tp.tensor([[1.0, 2.0, 3.0]])).tolist()[0]]
    [-1.2247, 0.0, 1.2247]
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, dtype=None) -> None:
        super().__init__()
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape = tuple(_check_size("normalized_shape", d) for d in shape)
        self.eps = eps
        dtype = as_dtype(dtype) if dtype is not None else None
        if elementwise_affine:
            self.weight = Parameter(ones(self.normalized_shape, dtype=dtype))
            self.bias = Parameter(zeros(self.normalized_shape, dtype=dtype))
        else:
            self.weight = self.bias = None

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class Embedding(Module):
    """A table of ``num_embeddings`` vectors of ``embedding_dim``, drawn from the
    standard normal as PyTorch does; called with integer indices, the rows they name.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> table = nn.Embedding(10, 3)
    >>> table(tp.tensor([[1, 2], [3, 4]])).shape
    (2, 2, 3)
    """

    def __init__(self, num_embeddings: int, embedding_dim: int, dtype=None) -> None:
        super().__init__()
        self.num_embeddings = _check_size("num_embeddings", num_embeddings)
        self.embedding_dim = _check_size("embedding_dim", embedding_dim)
        self.weight = Parameter(randn(self.num_embeddings, self.embedding_dim, dtype=dtype))

    def forward(self, indices: Tensor) -> Tensor:
        return F.embedding(indices, self.weight)
