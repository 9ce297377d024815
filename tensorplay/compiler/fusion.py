"""The fusion pass of ``tp.compile``: chains of elementwise ops become one kernel.

While a compiled function is captured (or called inside a capture), a
``Fuser`` stands between the ops and the device: the tensor layer hands it
every elementwise launch (``_ops.elementwise``, after PyTorch's promotion and
broadcasting rules have made the output and picked the cast) and every
reduction (``_reduce.reduce``). Launches over one iteration space join the open
*group* instead of launching; the group is written out as one fused kernel
(``kernels/fused.py``) when something else needs the device: another kernel
(matmul, a user's ``@tp.jit`` kernel, an op the fuser does not take), an op over
another shape, an event, or the end of the function. A group's shape is its
outputs' without their dimensions of one element (a column ``(n, 1)`` and a
vector ``(n,)`` are one iteration space). A full reduction of a value of the
group becomes the kernel's epilogue, and later elementwise ops of the same
shape still join it, and so do more full reductions (up to
``MAX_REDUCTIONS``, each with an accumulator of its own); ops on one-element
tensors after them join as the kernel's *tail*, which the last block runs
once the reductions are done. So the heat demo's ``residual = (v -
u).abs().max(); u.copy_(v); iters.add_(1); go = (residual > tol) & (iters <
cap)`` is one kernel.

What joins a group, so that each element's value is the eager one:

- outputs of the group's shape, of dtype bool, int32, int64, float32 or
  float64 (float16 math and casts stay eager), contiguous or a view with
  strides that do not step backwards (an in-place update of a slice, stored
  at the offset each element's index gives);
- operands that are numbers, contiguous tensors of the group's shape,
  one-element tensors, or tensors that broadcast to the group's shape or view
  it with other strides (read at an offset computed from the element's index,
  with the group's shape and the operand's strides written into the kernel),
  and ``tp.roll``'s input, read rolled (each coordinate plus a shift, modulo
  its dimension's size): a periodic grid's neighbours; ``tp.rand``'s uniform
  draws of float32 or float64, the numbers it would draw (one generator's
  state a kernel);
- a tail op: one-element operands and output, none of them memory that the
  group's full-size ops write. After a full reduction the tail runs once
  every block is done; in a group without one, one thread runs it while the
  others may still work, so its output must not be memory the group reads
  either (the heat demo's counter, or a solver's ``rr.copy_(rr_new)`` and
  convergence test after its last full-size update);
- memory: a tensor the group wrote is read from the register that holds it
  when it is read through the view it was written through; a read or write
  of memory the group wrote or read through another view (a shifted slice, a
  one-element view of a full-size result) ends the group first, so the fused
  kernel never reads what another thread writes; views that step by the same
  strides from starts that no multiple of the smallest stride separates (the
  columns of a ``stack``) share no element, and do not.

Results that nothing can read any more (their memory freed before the group
is written out) are not stored.
"""

from __future__ import annotations

import math
import threading
import weakref
from contextlib import contextmanager

import numpy as np

from .. import _dtype as dt
from .._factories import zeros
from .._overlap import byte_span
from .._reduce import _reduce_types, reduce_dims
from .._shape import contiguous_strides
from .._tensor import Tensor
from ..kernels import fused
from ..kernels import reduce as rk
from ..runtime.backend import get as get_backend
from ..runtime.capture import capture_state
from ..runtime.launch import ArrayArg, grid_1d, launch
from ..runtime.streams import current_stream, stream

__all__ = ["Draw", "Fuser", "Rolled", "fusing", "tickets"]

FUSABLE = frozenset(("bool", "int32", "int64", "float32", "float64"))
REDUCTIONS = frozenset(("sum", "mean", "max", "min"))
_FLOATS = ("float32", "float64")  # what a fused mean takes
_ORDERED = ("int32", "int64", *_FLOATS)  # max and min
_SUMMED = ("bool", *_ORDERED)  # sum: bools and integers in int64, as eagerly (a count of True)
MAX_STEPS = 64  # ops per fused kernel: a longer chain is split
MAX_ARRAYS = 40  # array parameters of a fused kernel (56+ bytes each; the driver takes 4 KiB): more split the chain
MAX_BLOCKS = 1024  # blocks of a fused reduction at most (its last block combines this many partials)
MAX_REDUCTIONS = 4  # full reductions of one kernel (a shared array of a block's size each)
# A reduction over leading or middle dimensions has a block's threads read elements this many apart at most
# (an N-body step's xyz: 3); wider, its loads would not coalesce, and the eager kernel's columns do.
MAX_TRAIL = 8
_CONFLICT, _EAGER = "conflict", "eager"


class _Write:
    """A result of the group: which step made it, where it would be stored (its
    element strides over the group's shape, None when contiguous), and whether
    its memory is still alive (a weak reference to the storage)."""

    __slots__ = ("step", "ptr", "dtype", "strides", "lo", "hi", "storage")

    def __init__(self, step: int, out: Tensor) -> None:
        self.step, self.ptr, self.dtype = step, out._ptr, out.dtype
        self.strides = None if out._contig else _squeezed(out._strides, out.shape)
        self.lo, self.hi = byte_span(out)
        self.storage = weakref.ref(out._storage)

    def alive(self) -> bool:
        return self.storage() is not None

    def overlaps(self, lo: int, hi: int) -> bool:
        """True when it is alive and bytes [lo, hi) overlap where it would be stored."""
        return self.lo < hi and lo < self.hi and self.alive()

    def read_by(self, o: Tensor, full: bool, strides: tuple | None) -> bool:
        """True when ``o`` (of its dtype) reads at each element of the group the
        value this result stores there: read at ``[i]`` (``full``) or with
        ``strides`` over the group's shape."""
        if o.dtype is not self.dtype or not self.alive():
            return False
        return full if self.strides is None else strides == self.strides

    def at(self) -> tuple:
        """Where it is stored, as ``_interleaved`` takes a view."""
        return self.ptr, self.strides, self.dtype.itemsize

    def array(self) -> ArrayArg:
        """The kernel argument its value is stored through (every element it spans)."""
        return _array(self.ptr, (self.hi - self.lo) // self.dtype.itemsize, self.dtype)


class Rolled:
    """An operand read rolled, as ``tp.roll`` reads it: element ``c`` of the
    group's shape reads ``x`` at ``(c + shifts) % shape``, dimension by dimension."""

    __slots__ = ("x", "shifts")

    def __init__(self, x: Tensor, shifts: tuple) -> None:
        self.x, self.shifts = x, shifts


class Draw:
    """An operand of uniform random numbers from the generator whose device
    state is ``state``, one per element, as ``tp.rand`` draws them."""

    __slots__ = ("state",)

    def __init__(self, state: Tensor) -> None:
        self.state = state


class Tickets:
    """The int32 tickets on which fused reductions' blocks count themselves done
    (``kernels/fused.py``): one per kernel with reductions captured, from an array zeroed
    outside any capture (``prepare``, when ``tp.compile`` makes a function). A
    kernel leaves its ticket at zero, so the array is never written otherwise.
    With none left, or no array, reductions are not fused."""

    SLOTS = 1 << 16

    def __init__(self) -> None:
        self.array: Tensor | None = None
        self.used = 0
        self.lock = threading.Lock()

    def prepare(self) -> None:
        """Make the array, unless it exists or a capture is in progress (which
        an eager fill would join or break)."""
        with self.lock:
            if self.array is None and not capture_state.active:
                array = zeros(self.SLOTS, dtype=dt.int32)
                current_stream().synchronize()  # zero before any graph that counts on it replays
                self.array = array

    def take(self) -> int | None:
        """The address of an unused ticket, or None."""
        with self.lock:
            if self.array is None or self.used == self.SLOTS:
                return None
            self.used += 1
            return self.array.data_ptr() + 4 * (self.used - 1)


tickets = Tickets()


class _Reducing:
    """A group's reduction: ``op`` of step ``step``'s value into ``out``; over
    every element (``k`` 0), or along a block of dimensions, ``k`` elements
    into each of ``out``'s, ``trail`` the elements of the dimensions after it."""

    __slots__ = ("op", "step", "acc", "out", "k", "trail")

    def __init__(self, op: str, step: int, acc, out: Tensor, k: int, trail: int) -> None:
        self.op, self.step, self.acc, self.out, self.k, self.trail = op, step, acc, out, k, trail


class _Group:
    """The ops over one iteration space waiting to be written out as one kernel."""

    def __init__(self, shape: tuple, n: int, s) -> None:
        self.shape, self.n, self.stream = shape, n, s
        self.inputs: list[Tensor] = []  # full-size, read at [i]
        self.ones: list[Tensor] = []  # one element, read at [0]
        self.strided: list[tuple[Tensor, tuple, tuple]] = []  # (tensor, its strides over the shape, its shifts)
        self.scalars: list = []
        self.steps: list[fused.Step] = []
        self.writes: dict[int, _Write] = {}  # data pointer -> its latest write
        self.reductions: list[_Reducing] = []
        self.ticket = 0  # the address of the full reductions' ticket
        self.tail: list[fused.Step] = []  # one-element ops after the full-size ones
        self.tail_writes: dict[int, _Write] = {}  # the tail's: data pointer -> its latest write
        self.state: Tensor | None = None  # the generator's, where the group draws
        self.draws = 0

    def arrays(self) -> int:
        """Array parameters its kernel would have after one more op (which adds at most four)."""
        extra = len(self.tail_writes) + 2 * len(self.reductions) + 2
        return len(self.inputs) + len(self.ones) + len(self.strided) + len(self.writes) + extra + 4

    def reads(self, lo: int, hi: int) -> bool:
        """True when bytes [lo, hi) overlap what the group's full-size ops read."""
        ones = {arg[1] for s in self.steps for arg in s.args if arg[0] == "b"}
        read = [*self.inputs, *[self.ones[k] for k in ones], *[t for t, _, _ in self.strided]]
        return any(_spans_overlap(byte_span(t), (lo, hi)) for t in read)

    def touches_written(self, lo: int, hi: int, view: tuple | None = None) -> bool:
        """True when bytes [lo, hi) overlap a live result of the group or its
        reduction's (a result interleaved with ``view``, an ``_at`` of what is
        read there, does not count: they share no element)."""
        if any(w.overlaps(lo, hi) and not (view and _interleaved(w.at(), view)) for w in self.writes.values()):
            return True
        return any(_spans_overlap(byte_span(r.out), (lo, hi)) for r in self.reductions)


class Fuser:
    """Defers the elementwise ops of one thread (the one that made it, which
    alone finds it: ``runtime.capture.current_fuser``) into fused kernels (see the
    module); with ``fuse=False`` it launches each op as eagerly. Either way it
    notes the data pointers of what the ops and kernels issued may write
    (``written``), so that ``tp.compile`` knows which arguments a function
    changes in place."""

    def __init__(self, fuse: bool = True) -> None:
        self.fuse = fuse
        self.group: _Group | None = None
        self.kernels: list[tuple[str, str]] = []  # (name, source) of every fused kernel launched
        self.written: list[int] = []  # data pointers of every op's output and every kernel's arrays
        self._launching = False  # its own kernel: what it writes was noted as its ops joined

    def note_written(self, ptrs) -> None:
        """Kernels' array arguments: any of them may be written (a fused kernel's
        inputs are only read: its outputs were noted op by op)."""
        if not self._launching:
            self.written.extend(ptrs)

    def wrote(self, lo: int, hi: int) -> bool:
        """True when an op or kernel issued so far may have written bytes [lo, hi)."""
        return any(lo <= p < hi for p in self.written)

    # -- what the tensor layer hands over ----------------------------------------------------
    def take(self, op: str, out: Tensor, operands, cast: str) -> bool:
        """Join ``out[...] = op(*operands)`` to the open group (True), or write the
        group out and leave the op to run eagerly (False)."""
        self.written.append(out._ptr)
        if not self.fuse or not self._fusable(out, operands, cast):
            self.flush()
            return False
        s, space = current_stream(), _space(out)
        g = self.group
        if g is not None and not _rows(g) and g.stream == s and space == () != g.shape:
            if _take_tail(g, op, out, operands, cast):
                return True
        if g is not None and (
            g.shape != space or g.stream != s or len(g.steps) >= MAX_STEPS or g.arrays() >= MAX_ARRAYS or g.tail
        ):
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
        """A reduction of a result of the open group, over all its dimensions
        (beside the group's other full reductions) or a block of them (the
        last ones, or middle ones such as an N-body step's sum over partners:
        the group's only one, after a tail only where that tail came without
        a reduction, so that it touches nothing the other threads do), as the
        kernel's epilogue: the reduction's output (None: not taken, the eager
        reduction runs)."""
        g = self.group
        if g is None or _rows(g) or len(g.reductions) >= MAX_REDUCTIONS or op not in REDUCTIONS:
            return None
        if g.shape == ():  # one element: nothing to reduce in blocks
            return None
        w = g.writes.get(x._ptr)
        if (
            w is None or not w.read_by(x, x._contig and _space(x) == g.shape, None) or w.strides is not None
            or g.stream != current_stream()
            or x.dtype.name not in (_SUMMED if op == "sum" else _ORDERED if op in ("max", "min") else _FLOATS)
        ):  # fmt: skip
            return None
        dims = sorted(reduce_dims(x, dim))
        kept = x.ndim - len(dims)
        block = bool(dims) and dims == list(range(dims[0], dims[-1] + 1))
        trail = math.prod(x.shape[dims[-1] + 1 :]) if block else 0
        if not block or trail > MAX_TRAIL or 0 in x.shape or (kept and g.reductions):
            return None  # not a block of dimensions (or nothing to reduce): the eager kernel's layouts
        if kept == 0 and not g.ticket:
            g.ticket = tickets.take() or 0
            if not g.ticket:
                return None
        out_dtype, acc = _reduce_types(op, x.dtype)
        kept_shape = tuple(size for d, size in enumerate(x.shape) if d not in dims)
        out = Tensor._empty(kept_shape or (1,), out_dtype)
        k = 0 if kept == 0 else g.n // out.numel()
        g.reductions.append(_Reducing(op, w.step, acc, out, k, trail))
        shape = tuple(1 if d in dims else size for d, size in enumerate(x.shape)) if keepdim else kept_shape
        return out._view(shape, contiguous_strides(shape))

    def roll(self, x: Tensor, by_axis: dict[int, int]) -> Tensor | None:
        """``tp.roll(x)`` (shifted by ``by_axis[d]`` along each dimension ``d``)
        as a copy that reads ``x`` rolled, joined to the open group: a stencil's
        neighbours on a periodic grid. The copy's output (None: not taken)."""
        if not self.fuse or x.dtype.name not in FUSABLE or x.numel() <= 1:
            return None
        shifts = tuple(-by_axis.get(d, 0) % size for d, size in enumerate(x.shape))
        out = Tensor._empty(x.shape, x.dtype)
        return out if self.take("copy", out, [Rolled(x, shifts)], "none") else None

    def uniform(self, out: Tensor, state: Tensor) -> bool:
        """``tp.rand`` into ``out`` (new, contiguous; float32 or float64) from the
        generator whose device state is ``state``, joined to the open group:
        True, or False where not taken (the eager kernel draws)."""
        if not self.fuse or out.dtype.name not in _FLOATS or out.numel() <= 1:
            return False
        return self.take("copy", out, [Draw(state)], "none")

    # -- writing a group out -----------------------------------------------------------------
    def flush(self) -> None:
        """Launch the open group as one fused kernel (on the stream its ops were issued on)."""
        g = self.group
        if g is None:
            return
        self.group = None
        if not g.steps:
            return
        live = [w for w in g.writes.values() if w.alive()]
        stored = [w for w in g.tail_writes.values() if w.alive()]
        tail = fused.Tail(tuple(g.tail), tuple(w.step for w in stored))
        reductions = tuple(
            fused.Reduction(r.op, r.step, r.acc.name, r.out.dtype.name, r.k, r.trail) for r in g.reductions
        )
        name = _kernel_name(g.steps, reductions, g.tail)
        counts = (len(g.inputs), len(g.ones), len(g.scalars))
        strided, shifts = tuple(strides for _, strides, _ in g.strided), tuple(sh for _, _, sh in g.strided)
        out_strides = tuple(w.strides for w in live)
        text = fused.source(name, counts, tuple(g.steps), tuple(w.step for w in live), reductions, g.shape, strided,
                            out_strides, tail, shifts, g.draws)  # fmt: skip
        kernel = fused.kernel(name, text)
        args = [np.int64(g.n), *[_array(t._ptr, t.numel(), t.dtype) for t in (*g.inputs, *g.ones)]]
        args += [*[_spanned(t, g.shape, strides) for t, strides, _ in g.strided], *g.scalars]
        args += [w.array() for w in live]
        if g.draws:
            args.append(_array(g.state._ptr, g.state.numel(), g.state.dtype))
        tail_outputs = [w.array() for w in stored]
        with stream(g.stream), self._launching_own():
            if not g.reductions:
                launch(kernel, *grid_1d(g.n), args + tail_outputs, g.stream)
            elif _rows(g):  # a block a row
                r = g.reductions[0]
                lanes = min(fused.BLOCK, max(32, 1 << (r.k - 1).bit_length()))
                args += [_array(r.out._ptr, r.out.numel(), r.out.dtype), rk.identity_value(r.op, r.acc)]
                args.append(np.float64(1.0 / r.k))
                launch(kernel, (min(r.out.numel(), 65535), 1, 1), (lanes, 1, 1), args + tail_outputs, g.stream)
            else:
                blocks = _reduction_blocks(g.n)
                args += [_array(g.ticket, 1, dt.int32), np.float64(1.0 / g.n)]
                partials = [Tensor._empty((blocks,), dt.from_numpy_dtype(r.acc)) for r in g.reductions]  # its alone
                for r, p in zip(g.reductions, partials, strict=True):
                    args += [_array(p._ptr, blocks, p.dtype), _array(r.out._ptr, r.out.numel(), r.out.dtype)]
                    args.append(rk.identity_value(r.op, r.acc))
                launch(kernel, (blocks, 1, 1), (fused.BLOCK, 1, 1), args + tail_outputs, g.stream)
        self.kernels.append((name, text))

    @contextmanager
    def _launching_own(self):
        self._launching = True
        try:
            yield
        finally:
            self._launching = False

    def _fusable(self, out: Tensor, operands, cast: str) -> bool:
        if cast not in ("none", "int64") or out.dtype.name not in FUSABLE:
            return False
        if not out._contig and any(st < 0 for st in out._strides):  # stored at offsets >= 0
            return False
        return all(not isinstance(o, Tensor) or o.dtype.name in FUSABLE for o in operands)


def _plan(g: _Group, out: Tensor, operands):
    """The step's arguments, ``_CONFLICT`` when the op touches the group's memory
    through another view, or ``_EAGER`` when an operand cannot be read per element."""
    args = []
    for o in operands:
        if isinstance(o, Draw):
            if g.state is not None and g.state._ptr != o.state._ptr:
                return _CONFLICT  # one generator's state a kernel
            args.append(("u", o.state))
            continue
        if isinstance(o, Rolled):
            strides = _read_strides(o.x, out)
            if g.touches_written(*byte_span(o.x)):
                return _CONFLICT
            if strides is None:
                return _EAGER
            args.append(("c", (o.x, strides, _squeezed(o.shifts, out.shape))))
            continue
        if not isinstance(o, Tensor):
            args.append(("s", o))
            continue
        full = (o._contig and _space(o) == g.shape) or (g.n == 1 and o.numel() == 1)
        w = g.writes.get(o._ptr)
        if w is not None and w.read_by(o, full, None if full else _read_strides(o, out)):
            args.append(("v", w.step))
            continue
        strides = None if full or o.numel() == 1 else _read_strides(o, out)
        if g.touches_written(*byte_span(o), _at(o, strides)):
            return _CONFLICT
        if full:
            args.append(("a", o))
        elif o.numel() == 1:
            args.append(("b", o))
        elif strides is None:
            return _EAGER
        else:
            args.append(("c", (o, strides, ())))
    lo, hi = byte_span(out)
    layout = None if out._contig else _squeezed(out._strides, out.shape)
    for t in [*g.inputs, *[v for kind, v in args if kind == "a"]]:  # read at [i]: a write there comes after
        t_lo, t_hi = byte_span(t)
        if t_lo < hi and lo < t_hi and (layout is not None or t._ptr != out._ptr or t.dtype is not out.dtype):
            return _CONFLICT
    strided = [*g.strided, *[v for kind, v in args if kind == "c"]]
    for t, strides, shifts in strided:  # read at offsets of their own: the same element is read, then written
        same = layout is not None and t._ptr == out._ptr and t.dtype is out.dtype and not any(shifts)
        if same and strides == layout or not any(shifts) and _interleaved(_at(t, strides), _at(out, layout)):
            continue
        if _spans_overlap(byte_span(t), (lo, hi)):
            return _CONFLICT
    if any(_spans_overlap(byte_span(t), (lo, hi)) for t in [*g.ones, *[v for kind, v in args if kind == "b"]]):
        return _CONFLICT  # read at [0] by every thread
    for ptr, w in list(g.writes.items()):
        if w.lo < hi and lo < w.hi:
            if not w.alive():
                del g.writes[ptr]  # freed memory, now out's
            elif (ptr != out._ptr or w.dtype is not out.dtype or w.strides != layout) and not _interleaved(
                w.at(), _at(out, layout)
            ):
                return _CONFLICT  # another view of it: another thread's elements
    if any(_spans_overlap(byte_span(r.out), (lo, hi)) for r in g.reductions):
        return _CONFLICT
    return args


def _take_tail(g: _Group, op: str, out: Tensor, operands, cast: str) -> bool:
    """Join ``out[0] = op(*operands)``, over one-element tensors after the
    group's full-size ops, to its tail (True); False leaves it (the group is
    written out)."""
    if len(g.steps) + len(g.tail) >= MAX_STEPS or g.arrays() >= MAX_ARRAYS or not _tail_writable(g, out):
        return False
    args = []
    for o in operands:
        if not isinstance(o, Tensor):
            args.append(("s", o))
            continue
        if o.numel() != 1:
            return False
        w = g.tail_writes.get(o._ptr)
        m = _reduction_of(g, o)
        if w is not None and w.dtype is o.dtype and w.alive():
            args.append(("w", w.step))
        elif m is not None:
            args.append(("r", m))
        elif _tail_touches(g, *byte_span(o)):
            return False  # memory the group's threads write
        else:
            args.append(("b", o))
    g.tail.append(fused.Step(op, _refs(g, args), cast, out.dtype.name))
    g.tail_writes[out._ptr] = _Write(len(g.tail) - 1, out)
    return True


def _tail_touches(g: _Group, lo: int, hi: int) -> bool:
    """True when bytes [lo, hi) overlap what the group or its tail writes."""
    return g.touches_written(lo, hi) or any(w.overlaps(lo, hi) for w in g.tail_writes.values())


def _tail_writable(g: _Group, out: Tensor) -> bool:
    """True when a tail step may write ``out``: memory the group's full-size ops
    do not write (nor read, without a reduction: the tail's thread runs while
    other threads may still read), and the tail's or a reduction's only as
    the same element."""
    lo, hi = byte_span(out)
    if any(w.overlaps(lo, hi) for w in g.writes.values()):
        return False
    if not g.reductions and g.reads(lo, hi):
        return False
    same = _reduction_of(g, out) is not None or (
        out._ptr in g.tail_writes and g.tail_writes[out._ptr].dtype is out.dtype
    )
    return same or not _tail_touches(g, lo, hi)


def _reduction_of(g: _Group, t: Tensor) -> int | None:
    """The index of the group's reduction whose output ``t`` is (its element, its dtype), or None."""
    for m, r in enumerate(g.reductions):
        if r.out._ptr == t._ptr and r.out.dtype is t.dtype:
            return m
    return None


def _rows(g: _Group) -> bool:
    """True when the group ends in a reduction along its last dimensions (its only one)."""
    return bool(g.reductions) and g.reductions[0].k > 0


def _broadcast_strides(t: Tensor, shape: tuple) -> tuple | None:
    """``t``'s element strides as it is read over ``shape`` (0 along the
    dimensions it is broadcast in), or None when it does not broadcast to it or
    steps backwards (a negative stride: the op runs eagerly)."""
    if t.ndim > len(shape):
        return None
    pad = len(shape) - t.ndim
    strides = [0] * pad
    for size, want, stride in zip(t.shape, shape[pad:], t.stride(), strict=True):
        if (size != want and size != 1) or (stride < 0 and size > 1):  # the kernel reads at offsets >= 0
            return None
        strides.append(stride if size == want else 0)
    return tuple(strides)


def _reduction_blocks(n: int) -> int:
    """Blocks of a full reduction over ``n`` elements: a thread per element up
    to half a wave of the device's threads (on the H200 half a wave beat a
    whole one and a quarter, at 4 and at 8 elements a thread at a time:
    ``benchmarks/fusion_variants.py``; four blocks at least, which the
    simulator's small waves would not give), and no more than ``MAX_BLOCKS``."""
    half_wave = max(4, get_backend().max_threads_per_launch // (2 * fused.BLOCK))
    return max(1, min(-(-n // fused.BLOCK), half_wave, MAX_BLOCKS))


def _interleaved(a: tuple, b: tuple) -> bool:
    """True when views ``a`` and ``b``, each ``(address, element strides over
    the group's shape, itemsize)``, never share an element: the same strides,
    every one a multiple of the smallest, and starts that do not differ by a
    multiple of it (the columns of a ``stack``, an interleaved layout's channels)."""
    (a_ptr, strides, size), (b_ptr, b_strides, b_size) = a, b
    if not strides or strides != b_strides or size != b_size:
        return False
    delta, part = divmod(b_ptr - a_ptr, size)
    smallest = min(strides)
    return not part and smallest > 1 and all(st % smallest == 0 for st in strides) and delta % smallest != 0


def _at(t: Tensor, strides: tuple | None) -> tuple:
    """``t`` as ``_interleaved`` takes a view: its address, ``strides``, its itemsize."""
    return t._ptr, strides, t.dtype.itemsize


def _read_strides(o: Tensor, out: Tensor) -> tuple | None:
    """``o``'s element strides as an op writing ``out`` reads it, over the
    group's shape (``out``'s without its dimensions of one element), or None
    (see ``_broadcast_strides``)."""
    strides = _broadcast_strides(o, out.shape)
    return None if strides is None else _squeezed(strides, out.shape)


def _squeezed(values: tuple, shape: tuple) -> tuple:
    """Per-dimension ``values`` (strides, shifts) without the dimensions of one
    element, which place nothing: equal strides, equal elements."""
    return tuple(v for v, size in zip(values, shape, strict=True) if size != 1)


def _space(t: Tensor) -> tuple:
    """The iteration space of a group ``t`` can join: its shape without its
    dimensions of one element (a column ``(n, 1)`` and a vector ``(n,)`` are
    one space, element by element), so ``()`` for any one-element tensor
    (every one reads and writes element 0)."""
    return tuple(size for size in t.shape if size != 1)


def _spans_overlap(a: tuple, b: tuple) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _apply(g: _Group, op: str, out: Tensor, cast: str, args: list) -> None:
    """Add the step (and its new inputs) to the group; ``out`` becomes a result."""
    g.steps.append(fused.Step(op, _refs(g, args), cast, out.dtype.name))
    g.writes[out._ptr] = _Write(len(g.steps) - 1, out)


def _refs(g: _Group, args: list) -> tuple:
    """A step's arguments as ``fused.Step`` refers to them: inputs and scalars
    by their index among the group's (added where new), values as they are."""
    refs = []
    for kind, value in args:
        if kind == "a":
            value = _index(g.inputs, value)
        elif kind == "b":
            value = _index(g.ones, value)
        elif kind == "c":
            value = _strided_index(g.strided, *value)
        elif kind == "u":  # a new draw, numbered in the order drawn
            g.state, g.draws, value = value, g.draws + 1, g.draws
        elif kind == "s":
            g.scalars.append(value)
            value = len(g.scalars) - 1
        refs.append((kind, value))
    return tuple(refs)


def _index(tensors: list[Tensor], t: Tensor) -> int:
    """Where ``t`` (or a tensor over the same memory with its dtype) is in ``tensors``, adding it."""
    for k, other in enumerate(tensors):
        if other._ptr == t._ptr and other.dtype is t.dtype:
            return k
    tensors.append(t)  # held: its memory is not reused before the kernel reads it
    return len(tensors) - 1


def _strided_index(entries: list, t: Tensor, strides: tuple, shifts: tuple) -> int:
    """Where ``(t, strides, shifts)`` (or the same memory read the same way) is in ``entries``, adding it."""
    for k, (other, other_strides, other_shifts) in enumerate(entries):
        if other._ptr == t._ptr and other.dtype is t.dtype and (other_strides, other_shifts) == (strides, shifts):
            return k
    entries.append((t, strides, shifts))  # held: its memory is not reused before the kernel reads it
    return len(entries) - 1


def _spanned(t: Tensor, shape: tuple, strides: tuple) -> ArrayArg:
    """``t`` as a flat array over the elements it is read at (its offsets are from its data pointer)."""
    return _array(t._ptr, 1 + sum((size - 1) * stride for size, stride in zip(shape, strides, strict=True)), t.dtype)


def _array(ptr: int, n: int, dtype: dt.DType) -> ArrayArg:
    """``n`` elements of ``dtype`` at ``ptr``, as a kernel argument (which keeps no tensor alive)."""
    isz = dtype.itemsize
    return ArrayArg(ptr, (n,), (isz,), dtype.name, isz, True)


def _kernel_name(steps, reductions, tail) -> str:
    """``fused_`` and the ops in order, each once (``fused_sub_abs_max``)."""
    ops = list(dict.fromkeys(s.op for s in steps if s.op != "copy"))
    ops += list(dict.fromkeys(r.op for r in reductions))
    ops += [op for op in dict.fromkeys(s.op for s in tail) if op not in ops]
    name = "fused_" + "_".join(ops or ["copy"])
    return name if len(name) <= 60 else f"{name[:52]}_{len(ops)}ops"


@contextmanager
def fusing(fuse: bool = True):
    """Fuse the elementwise ops this thread issues inside the block (the ones
    issued before it by an enclosing fuser are launched first; ``fuse=False``:
    launch each op, only noting what it writes). Yields the ``Fuser``, whose
    ``kernels`` lists what it generated and ``written`` what may be written."""
    me = threading.get_ident()
    previous = capture_state.fusers.get(me)
    if previous is not None:
        previous.flush()
    fuser = capture_state.fusers[me] = Fuser(fuse)
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
        if previous is None:
            del capture_state.fusers[me]
        else:
            capture_state.fusers[me] = previous
            previous.written.extend(fuser.written)
