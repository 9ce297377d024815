"""The fusion pass of ``tp.compile``: chains of elementwise ops become one kernel.

While a compiled function is captured (or called inside a capture), a
``Fuser`` stands between the ops and the device: the tensor layer hands it
every elementwise launch (``_ops.elementwise``, after PyTorch's promotion and
broadcasting rules have made the output and picked the cast) and every
reduction (``_reduce.reduce``). Launches over one iteration space join the open
*group* instead of launching; the group is written out as one fused kernel
(``kernels/fused.py``) when something else needs the device: another kernel
(matmul, a user's ``@tp.jit`` kernel, an op the fuser does not take), an op over
another shape, an event, or the end of the function. A full reduction of a
value of the group becomes the kernel's epilogue, and later elementwise ops of
the same shape still join it (``residual = (v - u).abs().max(); u.copy_(v)`` is
one kernel plus the reduction's finishing pass).

What joins a group, so that each element's value is the eager one:

- outputs contiguous, of the group's shape, of dtype bool, int32, int64,
  float32 or float64 (float16 math and casts stay eager);
- operands that are numbers, contiguous tensors of the group's shape, or
  one-element tensors; a broadcast or strided operand ends the group and the
  op runs eagerly;
- memory: a tensor the group wrote is read from the register that holds it;
  a read or write of memory the group wrote or read through another view (a
  shifted slice, a one-element view of a full-size result) ends the group
  first, so the fused kernel never reads what another thread writes.

Results that nothing can read any more (their memory freed before the group
is written out) are not stored.
"""

from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager

import numpy as np

from .. import _dtype as dt
from .._overlap import byte_span
from .._reduce import _reduce_types, reduce_dims
from .._tensor import Tensor
from ..kernels import fused
from ..kernels import reduce as rk
from ..runtime.capture import capture_state
from ..runtime.launch import ArrayArg, grid_1d, launch
from ..runtime.streams import current_stream, stream

__all__ = ["Fuser", "fusing"]

FUSABLE = frozenset(("bool", "int32", "int64", "float32", "float64"))
REDUCTIONS = frozenset(("sum", "mean", "max", "min"))
MAX_STEPS = 64  # ops per fused kernel: a longer chain is split
MAX_BLOCKS = 1024  # blocks of a fused reduction (its finishing pass reduces this many partials)
_CONFLICT, _EAGER = "conflict", "eager"


class _Write:
    """A result of the group: which step made it, where it would be stored, and
    whether its memory is still alive (a weak reference to the storage)."""

    __slots__ = ("step", "ptr", "dtype", "lo", "hi", "storage")

    def __init__(self, step: int, out: Tensor, n: int) -> None:
        self.step, self.ptr, self.dtype = step, out._ptr, out.dtype
        self.lo, self.hi = out._ptr, out._ptr + n * out.dtype.itemsize
        self.storage = weakref.ref(out._storage)

    def alive(self) -> bool:
        return self.storage() is not None


class _Group:
    """The ops over one iteration space waiting to be written out as one kernel."""

    def __init__(self, shape: tuple, n: int, s) -> None:
        self.shape, self.n, self.stream = shape, n, s
        self.inputs: list[Tensor] = []  # full-size, read at [i]
        self.ones: list[Tensor] = []  # one element, read at [0]
        self.scalars: list = []
        self.steps: list[fused.Step] = []
        self.writes: dict[int, _Write] = {}  # data pointer -> its latest write
        self.reduction: tuple | None = None  # (fused.Reduction, its output tensor)

    def touches_written(self, lo: int, hi: int) -> bool:
        """True when bytes [lo, hi) overlap a live result of the group or its reduction's."""
        if any(w.lo < hi and lo < w.hi and w.alive() for w in self.writes.values()):
            return True
        if self.reduction is not None:
            out = self.reduction[1]
            return out._ptr < hi and lo < out._ptr + out.dtype.itemsize
        return False


class Fuser:
    """Defers the elementwise ops of one thread into fused kernels (see the module)."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.group: _Group | None = None
        self.kernels: list[tuple[str, str]] = []  # (name, source) of every fused kernel launched

    # -- what the tensor layer hands over ----------------------------------------------------
    def take(self, op: str, out: Tensor, operands, cast: str) -> bool:
        """Join ``out[...] = op(*operands)`` to the open group (True), or write the
        group out and leave the op to run eagerly (False)."""
        if threading.get_ident() != self.thread:
            return False
        if not self._fusable(out, operands, cast):
            self.flush()
            return False
        s, space = current_stream(), _space(out)
        g = self.group
        if g is not None and (g.shape != space or g.stream != s or len(g.steps) >= MAX_STEPS):
            self.flush()
            g = None
        fresh = g is None
        if fresh:
            g = _Group(space, out.numel(), s)
        plan = _plan(g, out, operands)
        if plan is _CONFLICT and not fresh:
            self.flush()
            g = _Group(space, out.numel(), s)
            plan = _plan(g, out, operands)
        if plan in (_CONFLICT, _EAGER):
            self.flush()
            return False
        _apply(g, op, out, cast, plan)
        self.group = g
        return True

    def reduce(self, op: str, x: Tensor, dim, keepdim: bool) -> Tensor | None:
        """A full reduction of a result of the open group, as its epilogue: the
        reduction's output (None: not taken, the eager reduction runs)."""
        g = self.group
        if threading.get_ident() != self.thread or g is None or g.reduction is not None or op not in REDUCTIONS:
            return None
        w = g.writes.get(x._ptr)
        if (
            w is None or w.dtype is not x.dtype or not x._contig or _space(x) != g.shape or g.stream != current_stream()
            or len(reduce_dims(x, dim)) != x.ndim or x.dtype.name not in ("float32", "float64", "int32", "int64")
            or (op in ("sum", "mean") and x.dtype.kind != "f")
        ):  # fmt: skip
            return None
        out_dtype, acc = _reduce_types(op, x.dtype)
        out = Tensor._empty((1,), out_dtype)
        g.reduction = (fused.Reduction(op, w.step, acc.name), out)
        shape = (1,) * x.ndim if keepdim else ()
        return out._view(shape, (1,) * len(shape))

    # -- writing a group out -----------------------------------------------------------------
    def flush(self) -> None:
        """Launch the open group as one fused kernel (on the stream its ops were issued on)."""
        g = self.group
        if g is None or threading.get_ident() != self.thread:
            return
        self.group = None
        if not g.steps:
            return
        live = [w for w in g.writes.values() if w.alive()]
        reduction = g.reduction[0] if g.reduction is not None else None
        name = _kernel_name(g.steps, reduction)
        counts = (len(g.inputs), len(g.ones), len(g.scalars))
        text = fused.source(name, counts, tuple(g.steps), tuple(w.step for w in live), reduction)
        kernel = fused.kernel(name, text)
        args = [np.int64(g.n), *[_flat(t) for t in g.inputs], *[_one(t) for t in g.ones], *g.scalars]
        args += [ArrayArg(w.ptr, (g.n,), (w.dtype.itemsize,), w.dtype.name, w.dtype.itemsize, True) for w in live]
        with stream(g.stream):
            if reduction is None:
                launch(kernel, *grid_1d(g.n), args, g.stream)
            else:
                _launch_reduction(kernel, args, g.n, reduction, g.reduction[1], g.stream)
        self.kernels.append((name, text))

    def _fusable(self, out: Tensor, operands, cast: str) -> bool:
        if cast not in ("none", "int64") or out.dtype.name not in FUSABLE or not out._contig:
            return False
        return all(not isinstance(o, Tensor) or o.dtype.name in FUSABLE for o in operands)


def _plan(g: _Group, out: Tensor, operands):
    """The step's arguments, ``_CONFLICT`` when the op touches the group's memory
    through another view, or ``_EAGER`` when an operand cannot be read per element."""
    args = []
    for o in operands:
        if not isinstance(o, Tensor):
            args.append(("s", o))
            continue
        full = (o._contig and _space(o) == g.shape) or (g.n == 1 and o.numel() == 1)
        w = g.writes.get(o._ptr)
        if full and w is not None and w.dtype is o.dtype and w.alive():
            args.append(("v", w.step))
            continue
        lo, hi = byte_span(o)
        if g.touches_written(lo, hi):
            return _CONFLICT
        if full:
            args.append(("a", o))
        elif o.numel() == 1:
            args.append(("b", o))
        else:
            return _EAGER
    lo, hi = out._ptr, out._ptr + g.n * out.dtype.itemsize
    for t in [*g.inputs, *[v for kind, v in args if kind == "a"]]:  # read at [i]: a write there comes after
        t_lo, t_hi = byte_span(t)
        if t_lo < hi and lo < t_hi and (t._ptr != out._ptr or t.dtype is not out.dtype):
            return _CONFLICT
    if any(_spans_overlap(byte_span(t), (lo, hi)) for t in [*g.ones, *[v for kind, v in args if kind == "b"]]):
        return _CONFLICT  # read by every thread at [0]
    for ptr, w in list(g.writes.items()):
        if w.lo < hi and lo < w.hi:
            if not w.alive():
                del g.writes[ptr]  # freed memory, now out's
            elif ptr != out._ptr or w.dtype is not out.dtype:
                return _CONFLICT
    if g.reduction is not None and _spans_overlap(byte_span(g.reduction[1]), (lo, hi)):
        return _CONFLICT
    return args


def _space(t: Tensor) -> tuple:
    """The iteration space of a group ``t`` can join: its shape, or ``()`` for
    any one-element tensor (every one reads and writes element 0)."""
    return t.shape if t.numel() != 1 else ()


def _spans_overlap(a: tuple, b: tuple) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _apply(g: _Group, op: str, out: Tensor, cast: str, args: list) -> None:
    """Add the step (and its new inputs) to the group; ``out`` becomes a result."""
    refs = []
    for kind, value in args:
        if kind == "a":
            refs.append(("a", _index(g.inputs, value)))
        elif kind == "b":
            refs.append(("b", _index(g.ones, value)))
        elif kind == "s":
            g.scalars.append(value)
            refs.append(("s", len(g.scalars) - 1))
        else:
            refs.append(("v", value))
    g.steps.append(fused.Step(op, tuple(refs), cast, out.dtype.name))
    g.writes[out._ptr] = _Write(len(g.steps) - 1, out, g.n)


def _index(tensors: list[Tensor], t: Tensor) -> int:
    """Where ``t`` (or a tensor over the same memory with its dtype) is in ``tensors``, adding it."""
    for k, other in enumerate(tensors):
        if other._ptr == t._ptr and other.dtype is t.dtype:
            return k
    tensors.append(t)  # held: its memory is not reused before the kernel reads it
    return len(tensors) - 1


def _flat(t: Tensor) -> ArrayArg:
    n, isz = t.numel(), t.dtype.itemsize
    return ArrayArg(t._ptr, (n,), (isz,), t.dtype.name, isz, True)


def _one(t: Tensor) -> ArrayArg:
    isz = t.dtype.itemsize
    return ArrayArg(t._ptr, (1,), (isz,), t.dtype.name, isz, True)


def _kernel_name(steps, reduction) -> str:
    """``fused_`` and the ops in order, each once (``fused_sub_abs_max``)."""
    ops = list(dict.fromkeys(s.op for s in steps if s.op != "copy"))
    if reduction is not None:
        ops.append(reduction.op)
    name = "fused_" + "_".join(ops or ["copy"])
    return name if len(name) <= 60 else f"{name[:52]}_{len(ops)}ops"


def _launch_reduction(kernel, args: list, n: int, reduction: fused.Reduction, out: Tensor, s) -> None:
    """The fused kernel writes a partial per block; the reduction's row kernel
    combines them into ``out`` (and scales a mean)."""
    acc = np.dtype(reduction.acc)
    blocks = max(1, min(MAX_BLOCKS, -(-n // fused.BLOCK)))
    partials = Tensor._empty((1, blocks), dt.from_numpy_dtype(acc))
    init = rk.identity_value(reduction.op, acc)
    isz = acc.itemsize
    rows = ArrayArg(partials._ptr, (1, blocks), (blocks * isz, isz), acc.name, isz, True)
    launch(kernel, (blocks, 1, 1), (fused.BLOCK, 1, 1), [*args, _flat(partials), init], s)
    lanes = min(rk.BLOCK, max(32, 1 << (blocks - 1).bit_length()))
    launch(
        rk.rows_kernel(reduction.op, acc.name),
        (1, 1, 1),
        (lanes, 1, 1),
        [rows, _one(out), init, np.float64(1.0 / n)],
        s,
    )


@contextmanager
def fusing():
    """Fuse the elementwise ops this thread issues inside the block (the ones
    issued before it by an enclosing fuser are launched first). Yields the
    ``Fuser``, whose ``kernels`` lists what it generated."""
    previous = capture_state.fuser
    if previous is not None:
        previous.flush()
    fuser = capture_state.fuser = Fuser()
    try:
        yield fuser
        fuser.flush()
    except BaseException:
        try:
            fuser.flush()  # what ran before the error is issued, as eagerly
        except Exception:
            fuser.group = None  # the capture is broken anyway: its error is the one to see
        raise
    finally:
        capture_state.fuser = previous
