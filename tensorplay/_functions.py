"""Functional forms of tensor ops, with ``out=`` where a loop body needs to
write into an existing tensor (for example a while node's flag)."""

from __future__ import annotations

from . import _differentiable as AG
from . import _ops
from ._differentiable import tracked as _tracked
from ._tape import refuse_in_place
from ._tensor import Tensor
from .kernels.elementwise import OPS as OP_TABLE


def _binary(op: str, name: str, symbol: str):
    def fn(a, b, out: Tensor | None = None) -> Tensor:
        if _tracked(a) or _tracked(b) or _tracked(out):
            if out is not None:
                refuse_in_place(f"{name}(..., out=)", out, a, b)
            else:
                return AG.binary(op, a, b)
        return _ops.binary(op, a, b, out)

    fn.__doc__ = f"``a {symbol} b``, broadcast; written into ``out`` when given."
    return fn


def _unary(op: str, name: str, symbol: str):
    def fn(x: Tensor, out: Tensor | None = None) -> Tensor:
        if _tracked(x) or _tracked(out):
            if out is not None:
                refuse_in_place(f"{name}(..., out=)", out, x)
            else:
                return AG.unary(op, x)
        return _ops.unary(op, x, out)

    fn.__doc__ = f"``{name}(x)``, elementwise; written into ``out`` when given."
    return fn


def _from_table() -> dict:
    """The ``tp.`` function each op table entry declares."""
    functions = {}
    for op in OP_TABLE.values():
        if op.function:
            fn = (_unary if op.arity == 1 else _binary)(op.name, op.function, op.symbol or op.name)
            fn.__name__ = fn.__qualname__ = op.function
            functions[op.function] = fn
    return functions


FUNCTIONS = _from_table()
globals().update(FUNCTIONS)


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


__all__ = sorted([*FUNCTIONS, "cat", "clamp", "stack", "where"])
