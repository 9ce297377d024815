"""Functional forms of tensor ops, with ``out=`` where a loop body needs to
write into an existing tensor (for example a while node's flag)."""

from __future__ import annotations

from ._ops import binary, unary
from ._tensor import Tensor

__all__ = [
    "add", "div", "eq", "exp", "ge", "gt", "le", "log", "logical_and", "logical_not", "logical_or",
    "lt", "maximum", "minimum", "mul", "ne", "relu", "sigmoid", "sqrt", "sub", "tanh",
]  # fmt: skip


def _binary(op: str, doc: str):
    def fn(a, b, out: Tensor | None = None) -> Tensor:
        return binary(op, a, b, out)

    fn.__name__ = fn.__qualname__ = {"truediv": "div", "and": "logical_and", "or": "logical_or"}.get(op, op)
    fn.__doc__ = f"{doc}, broadcast; written into ``out`` when given."
    return fn


def _unary(op: str, doc: str):
    def fn(x: Tensor, out: Tensor | None = None) -> Tensor:
        return unary(op, x, out)

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
