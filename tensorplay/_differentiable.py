"""The differentiable primitives: each op's forward next to its backward.

Tensor methods come here only when an operand requires grad, so ops on plain
tensors pay one attribute test. Each function runs the op with recording off,
then records a node whose backward gives the gradient of every input that
needs one; composite ops (``nn.functional``) are built from these, so they
carry no gradient code of their own, except the two a training step spends
most nodes on, ``linear`` and ``mse_loss``, which are primitives here.

Complex tensors follow PyTorch's convention (``_tape``): the products' backwards
take the conjugates of the other operands (``g @ b^H`` for ``a @ b``), and a
real input of a complex result gets the real part of its gradient
(``_grad_for``).
"""

from __future__ import annotations

import weakref

from . import _ops as ops
from . import _reduce
from ._grad_mode import is_grad_enabled, no_grad
from ._matmul import linear as _linear
from ._matmul import matmul as _matmul
from ._shape import broadcast_shapes
from ._tape import Meta, needs_grad, record, sum_to
from ._tensor import Tensor
from .kernels import elementwise as ew

__all__ = ["binary", "cat", "clamp", "copy", "linear", "matmul", "mse_loss", "reduce", "tracked", "unary", "where"]


def tracked(x) -> bool:
    """Whether ``x`` is a tensor with autograd state (then its ops come here)."""
    return getattr(x, "_ag", None) is not None


def _grad_for(g, x):
    """``g`` as the gradient of ``x``: summed to its shape, in its dtype (a
    complex ``g`` of a real ``x``: its real part); None for numbers."""
    if not needs_grad(x):
        return None
    g = sum_to(g, x.shape)
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


# -- elementwise: the backwards are the op table's (kernels/elementwise.OPS) ------------------


def binary(op: str, a, b):
    if not is_grad_enabled():  # a backward pass, or no_grad: nothing is recorded
        return ops.binary(op, a, b)
    with no_grad():
        out = ops.binary(op, a, b)
    entry = ew.OPS[op]
    backward = entry.backward
    if backward is None or out.dtype.kind not in "fc":  # comparisons, logic, //, %: no gradient
        return out
    saved = _Saved(out) if entry.uses_result else None

    def grads(gs):
        ga, gb = backward(gs[0], a, b, saved and saved.get())
        return _grad_for(ga, a) if ga is not None else None, _grad_for(gb, b) if gb is not None else None

    record(entry.grad_name or f"{op.capitalize()}Backward", out, (a, b), grads)
    return saved.recorded(out) if saved else out


def unary(op: str, x):
    if not is_grad_enabled():
        return ops.unary(op, x)
    with no_grad():
        out = ops.unary(op, x)
    entry = ew.OPS[op]
    backward = entry.backward
    if backward is None or out.dtype.kind not in "fc":
        return out
    saved = _Saved(out) if entry.uses_result else None

    def grads(gs):
        (g,) = backward(gs[0], x, saved and saved.get())
        return (_grad_for(g, x),)

    record(entry.grad_name or f"{op.capitalize()}Backward", out, (x,), grads)
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
    if out.dtype.kind not in "fc":
        return out
    return record("CloneBackward" if dtype is None else "ToCopyBackward", out, (x,), lambda gs: (_grad_for(gs[0], x),))


# -- reductions and matmul -----------------------------------------------------------------


def reduce(op: str, x, dim, keepdim: bool):
    if not is_grad_enabled():
        return _reduce.reduce(op, x, dim, keepdim)
    with no_grad():
        out = _reduce.reduce(op, x, dim, keepdim)
    dims = _reduce.reduce_dims(x, dim)
    kept = tuple(1 if i in dims else d for i, d in enumerate(x.shape))
    count = max(x.numel(), 1) // max(out.numel(), 1)
    extreme = out.detach() if op in ("max", "min") else None  # values only: no gradient flows through the mask

    def grads(gs):
        g = gs[0].reshape(kept)
        if op == "sum":
            return (g.expand(x.shape),)
        if op == "mean":
            return ((g / count).expand(x.shape),)
        e = extreme.reshape(kept)
        hit = ((x == e) | ((x != x) & (e != e))).to(x.dtype)  # max/min: ties share the gradient (NaN ties NaN)
        return (g * hit / hit.sum(dims, keepdim=True),)

    return record(f"{op.capitalize()}Backward", out, (x,), grads)


def matmul(a, b):
    if not is_grad_enabled():
        return _matmul(a, b)
    with no_grad():
        out = _matmul(a, b)

    def grads(gs):
        a2 = a if a.ndim > 1 else a.unsqueeze(0)
        b2 = b if b.ndim > 1 else b.unsqueeze(-1)
        batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
        g = gs[0].reshape(tuple(batch) + (a2.shape[-2], b2.shape[-1]))
        ga = sum_to(g @ _adjoint(b2), a2.shape).reshape(a.shape) if needs_grad(a) else None
        gb = sum_to(_adjoint(a2) @ g, b2.shape).reshape(b.shape) if needs_grad(b) else None
        return _grad_for(ga, a) if ga is not None else None, _grad_for(gb, b) if gb is not None else None

    return record("MmBackward", out, (a, b), grads)


def linear(x, weight, bias):
    """``x @ weight.t() + bias`` as one node, as ``nn.Linear`` and the backward of
    a training step use it: the weight's gradient is made in the weight's own
    layout (``g.t() @ x``, no transposed copy to accumulate), the bias's as a sum
    over rows, and there is one node where a transpose, a product and an add
    would make three."""
    with no_grad():
        out = _linear(x, weight, bias)

    def grads(gs):
        g = gs[0]
        gx = g @ _conj(weight) if needs_grad(x) else None
        rows = _rows(g) if needs_grad(weight) or needs_grad(bias) else None
        gw = rows.t() @ _conj(_rows(x)) if needs_grad(weight) else None
        gb = sum_to(rows, bias.shape) if needs_grad(bias) else None
        return tuple(None if gr is None else _grad_for(gr, t) for gr, t in ((gx, x), (gw, weight), (gb, bias)))

    return record("AddmmBackward" if bias is not None else "MmBackward", out, (x, weight, bias), grads)


def _rows(t):
    """``t`` as a matrix of its last dimension's rows (itself when 2-D)."""
    return t if len(t.shape) == 2 else t.reshape(-1, t.shape[-1])


def _conj(t):
    """The conjugate of a complex tensor; a real one itself (no copy)."""
    return t.conj() if t.dtype.kind == "c" else t


def _adjoint(t):
    """The conjugate transpose of each matrix of ``t`` (the transpose of a real one)."""
    return _conj(t.transpose(-1, -2))


def mse_loss(input, target, reduction: str):  # noqa: A002 (PyTorch's name)
    """The squared error of ``input`` against ``target`` (same shapes), reduced,
    as one node whose backward is ``2 (input - target) g`` (scaled by the count
    for "mean"): two launches where the ops it is made of would take five."""
    with no_grad():
        diff = ops.binary("sub", input, target)
        squared = ops.binary("mul", diff, diff)
        out = squared if reduction == "none" else _reduce.reduce(reduction, squared, None, False)
    scale = 2.0 / max(diff.numel(), 1) if reduction == "mean" else 2.0

    def grads(gs):
        # with create_graph, the difference again as ops, so that the gradient has one of its own
        d = input - target if is_grad_enabled() else diff
        g = d * (gs[0] * scale)
        return _grad_for(g, input), _grad_for(-g, target) if needs_grad(target) else None

    return record("MseLossBackward", out, (input, target), grads)


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
