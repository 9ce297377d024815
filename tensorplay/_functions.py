"""Functional forms of tensor ops, with ``out=`` where a loop body needs to
write into an existing tensor (for example a while node's flag)."""

from __future__ import annotations

from . import _ops
from ._math import AG, _tracked
from ._tensor import Tensor

__all__ = [
    "add", "cat", "clamp", "div", "eq", "exp", "ge", "gt", "le", "log", "logical_and", "logical_not", "logical_or",
    "lt", "maximum", "minimum", "mul", "ne", "relu", "sigmoid", "sqrt", "stack", "sub", "tanh", "where",
]  # fmt: skip


def _binary(op: str, doc: str):
    def fn(a, b, out: Tensor | None = None) -> Tensor:
        if _tracked(a) or _tracked(b) or _tracked(out):
            if out is not None:
                AG.refuse_in_place(f"{fn.__name__}(..., out=)", out, a, b)
            else:
                return AG.binary(op, a, b)
        return _ops.binary(op, a, b, out)

    fn.__name__ = fn.__qualname__ = {"truediv": "div", "and": "logical_and", "or": "logical_or"}.get(op, op)
    fn.__doc__ = f"{doc}, broadcast; written into ``out`` when given."
    return fn


def _unary(op: str, doc: str):
    def fn(x: Tensor, out: Tensor | None = None) -> Tensor:
        if _tracked(x) or _tracked(out):
            if out is not None:
                AG.refuse_in_place(f"{op}(..., out=)", out, x)
            else:
                return AG.unary(op, x)
        return _ops.unary(op, x, out)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"{doc}; written into ``out`` when given."
    return fn


add, sub, mul, div = (
    _binary(o, f"``a {s} b``") for o, s in [("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/")]
)
eq, ne, lt, le, gt, ge = (
    _binary(o, f"``a {s} b`` as a bool tensor")
    for o, s in [("eq", "=="), ("ne", "!="), ("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">=")]
)
maximum, minimum = _binary("maximum", "The larger of a and b"), _binary("minimum", "The smaller of a and b")
logical_and, logical_or = _binary("and", "``a & b`` on bool tensors"), _binary("or", "``a | b`` on bool tensors")
logical_not = _unary("logical_not", "``~x`` on a bool tensor")
exp, log, sqrt, tanh = (_unary(o, o) for o in ("exp", "log", "sqrt", "tanh"))
sigmoid, relu = _unary("sigmoid", "sigmoid"), _unary("relu", "relu")


def where(condition: Tensor, a, b) -> Tensor:
    """``a`` where ``condition`` (a bool tensor) holds, ``b`` elsewhere, broadcast."""
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
