"""The differentiable primitives: each op's forward next to its backward.

Tensor methods come here only when an operand requires grad, so ops on plain
tensors pay one attribute test. Each function runs the op with recording off,
then records a node whose backward gives the gradient of every input that
needs one; composite ops (``nn.functional``) are built from these, so they
carry no gradient code of their own.
"""

from __future__ import annotations

import math
import weakref

from .. import _ops as ops
from .._matmul import matmul as _matmul
from .._shape import broadcast_shapes
from .._tensor import Tensor
from ._graph import Meta, needs_grad, record
from ._mode import is_grad_enabled, no_grad

__all__ = ["binary", "cat", "clamp", "copy", "matmul", "reduce", "refuse_in_place", "unary", "view", "where"]


def _sum_to(g, shape):
    """``g`` summed down to ``shape``: the gradient of broadcasting to ``g.shape``."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1)
    return (g.sum(dims, keepdim=True) if dims else g).reshape(shape)


def _grad_for(g, x):
    """``g`` as the gradient of ``x``: summed to its shape, in its dtype; None for numbers."""
    if not needs_grad(x):
        return None
    g = _sum_to(g, x.shape)
    return g if g.dtype is x.dtype else g.to(x.dtype)


class _Saved:
    """An op's result as its own backward keeps it. Holding the tensor would make
    a cycle (result -> node -> backward -> result) whose memory only Python's
    cyclic collector frees; this holds its memory, and for gradients of
    gradients a weak reference to the tensor, or else its node, to rebuild it."""

    __slots__ = ("data", "tensor", "node")

    def __init__(self, out) -> None:
        self.data, self.tensor, self.node = out.detach(), weakref.ref(out), None

    def recorded(self, out):
        """Called with the recorded result: remember its node (weakly)."""
        if out.grad_fn is not None:
            self.node = weakref.ref(out.grad_fn)
        return out

    def get(self):
        if not is_grad_enabled():  # a plain backward needs the values only
            return self.data
        out = self.tensor()
        if out is not None:
            return out
        node = self.node() if self.node is not None else None
        if node is None:
            return self.data
        rebuilt = self.data.detach()
        rebuilt._ag = Meta(True, node, 0)
        return rebuilt


# -- elementwise ------------------------------------------------------------------------

_BINARY = {
    "add": lambda g, a, b, out: (g, g),
    "sub": lambda g, a, b, out: (g, -g),
    "mul": lambda g, a, b, out: (g * b, g * a),
    "truediv": lambda g, a, b, out: (g / b, -g * out / b),
    "pow": lambda g, a, b, out: (_pow_base(g, a, b) if needs_grad(a) else None, _pow_exponent(g, a, b, out)),
    "maximum": lambda g, a, b, out: _pick(g, a, b, "gt"),
    "minimum": lambda g, a, b, out: _pick(g, a, b, "lt"),
}
_USES_RESULT = {"truediv", "pow", "exp", "sqrt", "tanh", "sigmoid"}  # backwards that read the op's result
_NAMES = {"truediv": "DivBackward", "maximum": "MaximumBackward", "minimum": "MinimumBackward"}


def _pow_base(g, a, b):
    """d(a ** b)/da = b a ** (b - 1), and 0 where b == 0 (not 0 * inf at a == 0)."""
    ga = g * b * a ** (b - 1)
    if isinstance(b, Tensor):
        return where(b == 0, 0.0, ga)
    return g * 0.0 if b == 0 else ga


def _pow_exponent(g, a, b, out):
    """d(a ** b)/db = a ** b log(a) for a > 0; 0 where a == 0 and b >= 0; NaN below."""
    if not needs_grad(b):
        return None
    if not isinstance(a, Tensor):
        if a > 0:
            return g * out * math.log(a)
        return where(b >= 0, g * 0.0, math.nan) if a == 0 else g * math.nan
    positive = a > 0
    grad = g * out * where(positive, a, 1.0).log()  # no log of 0 or of a negative base
    at_zero = (a == 0) & (b >= 0) if isinstance(b, Tensor) else (a == 0) if b >= 0 else None
    rest = math.nan if at_zero is None else where(at_zero, 0.0, math.nan)
    return where(positive, grad, rest)


def _pick(g, a, b, wins: str):
    """maximum/minimum: the gradient goes to the operand chosen, split evenly on ties."""
    tie = (a == b) * 0.5
    share = ops.binary(wins, a, b) + tie
    return g * share, g * (1 - share)


def binary(op: str, a, b):
    with no_grad():
        out = ops.binary(op, a, b)
    backward = _BINARY.get(op)
    if backward is None or out.dtype.kind != "f":  # comparisons, logic, //, %: no gradient
        return out
    saved = _Saved(out) if op in _USES_RESULT else None

    def grads(gs):
        ga, gb = backward(gs[0], a, b, saved and saved.get())
        return _grad_for(ga, a) if ga is not None else None, _grad_for(gb, b) if gb is not None else None

    record(_NAMES.get(op, f"{op.capitalize()}Backward"), out, (a, b), grads)
    return saved.recorded(out) if saved else out


def _sign(x):
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


_UNARY = {
    "neg": lambda g, x, out: -g,
    "abs": lambda g, x, out: g * _sign(x),
    "exp": lambda g, x, out: g * out,
    "log": lambda g, x, out: g / x,
    "sqrt": lambda g, x, out: g * 0.5 / out,
    "tanh": lambda g, x, out: g * (1 - out * out),
    "sigmoid": lambda g, x, out: g * out * (1 - out),
    "relu": lambda g, x, out: g * (x > 0),
    "sin": lambda g, x, out: g * x.cos(),
    "cos": lambda g, x, out: -g * x.sin(),
}


def unary(op: str, x):
    with no_grad():
        out = ops.unary(op, x)
    backward = _UNARY.get(op)
    if backward is None or out.dtype.kind != "f":
        return out
    saved = _Saved(out) if op in _USES_RESULT else None
    record(
        f"{op.capitalize()}Backward", out, (x,), lambda gs: (_grad_for(backward(gs[0], x, saved and saved.get()), x),)
    )
    return saved.recorded(out) if saved else out


def clamp(x, lo, hi):
    with no_grad():
        out = ops.clamp(x, lo, hi)

    def grads(gs):  # out = min(max(x, lo), hi): the gradient goes to whichever of x, lo, hi it is
        g, raised = gs[0], x if lo is None else ops.binary("maximum", x, lo)
        above = (raised > hi) if hi is not None else None
        g_raised = g if above is None else g * ~above
        below = (x < lo) if lo is not None else None
        return (
            _grad_for(g_raised if below is None else g_raised * ~below, x),
            None if below is None else _grad_for(g_raised * below, lo),
            None if above is None else _grad_for(g * above, hi),
        )

    return record("ClampBackward", out, (x, lo, hi), grads)


def where(cond, a, b):
    with no_grad():
        out = ops.where(cond, a, b)
    return record(
        "WhereBackward",
        out,
        (a, b),
        lambda gs: (_grad_for(where(cond, gs[0], 0.0), a), _grad_for(where(cond, 0.0, gs[0]), b)),
    )


def copy(x, dtype=None):
    """``x.clone()`` (or ``x.to(dtype)``): the gradient passes back unchanged."""
    with no_grad():
        out = ops.copy(Tensor._empty(x.shape, x.dtype if dtype is None else dtype), x)
    if out.dtype.kind != "f":
        return out
    return record("CloneBackward" if dtype is None else "ToCopyBackward", out, (x,), lambda gs: (_grad_for(gs[0], x),))


# -- reductions and matmul -----------------------------------------------------------------


def reduce(op: str, x, dim, keepdim: bool):
    with no_grad():
        out = ops.reduce(op, x, dim, keepdim)
    dims = ops._reduce_dims(x, dim)
    kept = tuple(1 if i in dims else d for i, d in enumerate(x.shape))
    count = max(x.numel(), 1) // max(out.numel(), 1)
    extreme = out.detach() if op in ("max", "min") else None  # values only: no gradient flows through the mask

    def grads(gs):
        g = gs[0].reshape(kept)
        if op == "sum":
            return (g.expand(x.shape),)
        if op == "mean":
            return ((g / count).expand(x.shape),)
        hit = (x == extreme.reshape(kept)).to(x.dtype)  # max/min: ties share the gradient
        return (g * hit / hit.sum(dims, keepdim=True),)

    return record(f"{op.capitalize()}Backward", out, (x,), grads)


def matmul(a, b):
    with no_grad():
        out = _matmul(a, b)

    def grads(gs):
        a2 = a if a.ndim > 1 else a.unsqueeze(0)
        b2 = b if b.ndim > 1 else b.unsqueeze(-1)
        batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        g = gs[0].reshape(tuple(batch) + (a2.shape[-2], b2.shape[-1]))
        ga = _sum_to(g @ b2.transpose(-1, -2), a2.shape).reshape(a.shape) if needs_grad(a) else None
        gb = _sum_to(a2.transpose(-1, -2) @ g, b2.shape).reshape(b.shape) if needs_grad(b) else None
        return _grad_for(ga, a) if ga is not None else None, _grad_for(gb, b) if gb is not None else None

    return record("MmBackward", out, (a, b), grads)


# -- joining ----------------------------------------------------------------------------------


def cat(tensors, dim: int):
    with no_grad():
        out = ops.cat(tensors, dim)
    dim = tensors[0]._dim(dim)

    def grads(gs):
        starts = [0]
        for t in tensors:
            starts.append(starts[-1] + t.shape[dim])
        return tuple(_grad_for(gs[0].narrow(dim, s, t.shape[dim]), t) for s, t in zip(starts, tensors, strict=False))

    return record("CatBackward", out, tuple(tensors), grads)


# -- views ----------------------------------------------------------------------------------------


def _index_of_narrow(x, dim, start, length):
    dim = x._dim(dim)
    start = start + x.shape[dim] if start < 0 else start
    return (slice(None),) * dim + (slice(start, start + length),)


def _scatter(g, shape, dtype, index):
    """A zero tensor of ``shape`` with ``g`` written at ``index``: the gradient of
    ``x[index]`` (itself differentiable, for gradients of gradients)."""
    from .._factories import zeros

    with no_grad():
        out = zeros(shape, dtype=dtype)
        out[index] = g
    return record("IndexBackwardBackward", out, (g,), lambda gs: (gs[0][index],))


def view(kind: str, method, x, args, kwargs):
    """Run the view ``method`` and record how its gradient goes back to ``x``."""
    with no_grad():
        out = method(x, *args, **kwargs)
    if kind == "reshape":
        back = lambda g: g.reshape(x.shape)  # noqa: E731
    elif kind == "permute":
        dims = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        order = [x._dim(d) for d in dims]
        inverse = [order.index(i) for i in range(len(order))]
        back = lambda g: g.permute(inverse)  # noqa: E731
    elif kind == "expand":
        back = lambda g: _sum_to(g, x.shape)  # noqa: E731
    else:  # "index" or "narrow": the gradient lands in a zero tensor of x's shape
        index = args[0] if kind == "index" else _index_of_narrow(x, *args, **kwargs)
        back = lambda g: _scatter(g, x.shape, x.dtype, index)  # noqa: E731
    name = {"reshape": "ViewBackward", "permute": "PermuteBackward", "expand": "ExpandBackward"}
    return record(name.get(kind, "IndexBackward"), out, (x,), lambda gs: (back(gs[0]),))


# -- in-place ops ------------------------------------------------------------------------------------


def refuse_in_place(what: str, target, *sources) -> None:
    """In-place ops are not recorded: refuse them where a gradient would be lost."""
    if not is_grad_enabled():
        return
    if needs_grad(target):
        leaf = target._ag.node is None
        raise RuntimeError(
            f"{what} on a tensor that requires grad is not recorded by autograd"
            + ("; update a leaf inside `with tp.no_grad():`" if leaf else "; write it out of place (y = y + x)")
        )
    if any(needs_grad(s) for s in sources):
        raise RuntimeError(
            f"{what} would write a tensor that requires grad into one that does not; "
            "autograd does not record in-place ops: write it out of place (y = x * 1 ...) or detach() the source"
        )
