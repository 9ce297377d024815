"""Functional forms of tensor ops, with ``out=`` where a loop body needs to
write into an existing tensor (for example a while node's flag): ``where``,
``clamp``, ``cat``, ``stack``, and the elementwise functions of the op table
(``_elementwise_functions``, re-exported here).
"""

from __future__ import annotations

from . import _differentiable as AG
from . import _ops
from ._differentiable import tracked as _tracked
from ._elementwise_functions import *  # noqa: F403 (the op table's functions)
from ._elementwise_functions import __all__ as _elementwise_all
from ._tensor import Tensor


def where(condition: Tensor, a=None, b=None):
    """``a`` where ``condition`` (a bool tensor) holds, ``b`` elsewhere, broadcast.

    ``where(condition)`` alone is ``nonzero(condition)``, as in NumPy and
    PyTorch: a tuple of int64 index tensors, one per dimension.

    >>> import tensorplay as tp
    >>> x = tp.tensor([[0.0, 2.0], [3.0, 0.0]])
    >>> tp.where(x > 1, x, -1.0).tolist(), [i.tolist() for i in tp.where(x > 1)]
    ([[-1.0, 2.0], [3.0, -1.0]], [[0, 1], [1, 0]])
    """
    if a is None or b is None:
        if a is None and b is None:
            return condition.nonzero(as_tuple=True)
        raise TypeError(
            "where() takes the condition alone (its nonzero indices) or with both a and b (the values "
            f"where it holds and where not), got {'b' if a is None else 'a'} alone; pass both"
        )
    if _tracked(a) or _tracked(b):
        return AG.where(condition, a, b)
    return _ops.where(condition, a, b)


def clamp(x: Tensor, min=None, max=None) -> Tensor:  # noqa: A002 (PyTorch's names)
    """Limit every element of ``x`` to ``[min, max]`` (either bound may be None)."""
    return x.clamp(min, max)


def cat(tensors, dim: int = 0) -> Tensor:
    """Join tensors along an existing dimension."""
    tensors = list(tensors)
    if any(_tracked(t) for t in tensors):
        return AG.cat(tensors, dim)
    return _ops.cat(tensors, dim)


def stack(tensors, dim: int = 0) -> Tensor:
    """Join tensors of equal shape along a new dimension."""
    tensors = list(tensors)
    if any(_tracked(t) for t in tensors):
        return AG.cat(_ops.stack_views(tensors, dim), dim)
    return _ops.stack(tensors, dim)


__all__ = sorted([*_elementwise_all, "cat", "clamp", "stack", "where"])
