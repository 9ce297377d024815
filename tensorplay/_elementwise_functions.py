"""The array API standard's elementwise functions (2024.12), with PyTorch's
names for them: one ``tp.`` function per op table entry
(``kernels/op_table.py``), bound to each of the entry's names (``tp.subtract``
is ``tp.sub``), plus ``clip``.

A function goes to ``_ops`` for plain tensors and to ``_differentiable`` when
an operand requires grad; ``out=`` writes into an existing tensor (a loop
body's flag, for example).

Examples
--------
>>> import tensorplay as tp
>>> x = tp.tensor([-1.5, 0.5, 2.5])
>>> tp.round(x).tolist(), tp.atan2(x, 1.0).dtype, tp.subtract is tp.sub
([-2.0, 0.0, 2.0], tensorplay.float32, True)
"""

from __future__ import annotations

from . import _differentiable as AG
from . import _ops
from ._differentiable import tracked as _tracked
from ._tape import refuse_in_place
from ._tensor import Tensor
from .kernels.op_table import OPS as OP_TABLE


def _binary(op: str, name: str, symbol: str):
    gradless = OP_TABLE[op].result == "bool"  # a comparison's result carries no gradient to lose

    def fn(a, b, out: Tensor | None = None) -> Tensor:
        if _tracked(a) or _tracked(b) or _tracked(out):
            if out is not None:
                refuse_in_place(f"{name}(..., out=)", out, *(() if gradless else (a, b)))
            else:
                return AG.binary(op, a, b)
        return _ops.binary(op, a, b, out)

    what = f"``a {symbol} b``" if symbol else f"``{name}(a, b)``"
    fn.__doc__ = f"{what}, elementwise and broadcast (either may be a number); written into ``out`` when given."
    return fn


def _unary(op: str, name: str):
    gradless = OP_TABLE[op].result == "bool"  # a test's result carries no gradient to lose

    def fn(x: Tensor, out: Tensor | None = None) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}() expects a tensor, got {type(x).__name__}")
        if _tracked(x) or _tracked(out):
            if out is not None:
                refuse_in_place(f"{name}(..., out=)", out, *(() if gradless else (x,)))
            else:
                return AG.unary(op, x)
        return _ops.unary(op, x, out)

    fn.__doc__ = f"``{name}(x)``, elementwise; written into ``out`` when given."
    return fn


def _from_table() -> dict:
    """The ``tp.`` function each op table entry declares, under each of its names."""
    functions = {}
    for op in OP_TABLE.values():
        if op.function:
            symbol = op.symbol if op.symbol and not op.symbol.isalpha() else ""
            fn = _unary(op.name, op.function) if op.arity == 1 else _binary(op.name, op.function, symbol)
            fn.__name__ = fn.__qualname__ = op.function
            functions.update(dict.fromkeys(op.functions, fn))  # aliases: the same function
    return functions


FUNCTIONS = _from_table()
globals().update(FUNCTIONS)


def clip(x: Tensor, /, min=None, max=None) -> Tensor:  # noqa: A002 (the standard's names)
    """The array API's ``clip``: ``clamp``, except that with neither bound it
    returns a copy of ``x`` (where PyTorch's ``clamp`` and ``clip`` raise).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.clip(tp.tensor([-2.0, 0.5, 3.0]), -1.0, 1.0).tolist()
    [-1.0, 0.5, 1.0]
    """
    if min is None and max is None:
        return x.clone()
    return x.clamp(min, max)


__all__ = sorted([*FUNCTIONS, "clip"])
