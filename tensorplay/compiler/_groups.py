"""A group of the fusion pass: the ops over one iteration space waiting to be
written out as one kernel, what they read and write, and the rules that say
whether one more op may join (``plan``, ``take_tail``) so that every element's
value is the eager one. ``compiler/fusion.py`` feeds groups and writes them out."""

from __future__ import annotations

import copy
import weakref

from .._overlap import byte_span
from .._shape import contiguous_strides
from .._tensor import Tensor
from ..kernels import fused
from ..runtime.launch import ArrayArg
from ._views import (
    array_arg,
    broadcast_layout,
    broadcast_strides,
    read_strides,
    sharing,
    space_of,
    spanned,
    spans_overlap,
    squeezed,
    view_at,
)

__all__ = [
    "CONFLICT",
    "EAGER",
    "PARAM_BYTES",
    "MAX_STEPS",
    "Draw",
    "Group",
    "Reducing",
    "Rolled",
    "Write",
    "after_tail",
    "apply_step",
    "follows",
    "ends_in_rows",
    "epilogue_of",
    "headed",
    "narrowed",
    "plan",
    "read_args",
    "reduction_of",
    "take_tail",
    "widened",
]

# A fused kernel's limits; a longer chain is split (docs/internals.md): its ops, and its parameters, which
# must fit the driver's 4 KiB, counted with the next op's and room for a while loop's pass-end parameters.
MAX_STEPS = 256  # ops
PARAM_BYTES = 4096  # the driver's limit on a kernel's parameters
_ARRAY_BYTES = 56  # a one-dimensional array parameter: Numba's meminfo, parent, size, itemsize, data, shape, stride
_PASS_END_BYTES = 4 * _ARRAY_BYTES  # kernels/conditional.pass_end's handle, counter, cancel request and cap
CONFLICT, EAGER = "conflict", "eager"


class Write:
    """A result of the group: which step made it, where it would be stored (its
    element strides over the group's shape, None when contiguous), whether its
    memory is still alive (a weak reference to the storage), and whether a
    later write through another view stored over some of its elements
    (``shadowed``: its value is then not what memory holds there)."""

    __slots__ = ("step", "ptr", "dtype", "strides", "lo", "hi", "storage", "shadowed")

    def __init__(self, step: int, out: Tensor) -> None:
        self.step, self.ptr, self.dtype, self.shadowed = step, out._ptr, out.dtype, False
        self.strides = None if out._contig else squeezed(out._strides, out.shape)
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
        if o.dtype is not self.dtype or self.shadowed or not self.alive():
            return False
        return full if self.strides is None else strides == self.strides

    def at(self) -> tuple:
        """Where it is stored, as ``sharing`` takes a view."""
        return self.ptr, self.strides, self.dtype.itemsize

    @property
    def key(self) -> tuple:
        """(data pointer, strides): one view, as ``Group.writes`` knows it."""
        return self.ptr, self.strides

    def array(self) -> ArrayArg:
        """The kernel argument its value is stored through (every element it spans)."""
        return array_arg(self.ptr, (self.hi - self.lo) // self.dtype.itemsize, self.dtype)


class Rolled:
    """An operand read rolled, as ``tp.roll`` reads it: element ``c`` of the
    group's shape reads ``x`` at ``(c + shifts) % shape``, dimension by dimension."""

    __slots__ = ("x", "shifts")

    def __init__(self, x: Tensor, shifts: tuple) -> None:
        self.x, self.shifts = x, shifts


class Draw:
    """An operand of uniform random numbers from the generator whose device
    state is ``state``, one per element, as ``tp.rand`` draws them: 53 random
    bits where ``wide`` (float64), else 24."""

    __slots__ = ("state", "wide")

    def __init__(self, state: Tensor, wide: bool) -> None:
        self.state, self.wide = state, wide


class Reducing:
    """A group's reduction: ``op`` of step ``step``'s value into ``out``; over
    every element (``k`` 0), or along a block of dimensions, ``k`` elements
    into each of ``out``'s, ``trail`` the elements of the dimensions after it."""

    __slots__ = ("op", "step", "acc", "out", "k", "trail")

    def __init__(self, op: str, step: int, acc, out: Tensor, k: int, trail: int) -> None:
        self.op, self.step, self.acc, self.out, self.k, self.trail = op, step, acc, out, k, trail


class Group:
    """The ops over one iteration space waiting to be written out as one kernel."""

    def __init__(self, shape: tuple, n: int, s) -> None:
        self.shape, self.n, self.stream = shape, n, s
        self.inputs: list[Tensor] = []  # full-size, read at [i]
        self.ones: list[Tensor] = []  # one element, read at [0]
        self.strided: list[tuple[Tensor, tuple, tuple]] = []  # (tensor, its strides over the shape, its shifts)
        self.scalars: list = []
        self.steps: list[fused.Step] = []
        # (data pointer, strides) -> the latest write of that view, in the order they are stored
        self.writes: dict[tuple, Write] = {}
        self.reductions: list[Reducing] = []
        self.ticket = 0  # the address of the full reductions' ticket
        self.tail: list[fused.Step] = []  # one-element ops after the full-size ones
        self.tail_writes: dict[int, Write] = {}  # the tail's: data pointer -> its latest write
        self.head: list[fused.Step] = []  # one-element ops before the full-size ones, run by every thread
        self.head_writes: dict[int, Write] = {}  # the head's: data pointer -> its latest write
        self.state: Tensor | None = None  # the generator's, where the group draws
        self.draws: tuple = ()  # whether each draw is wide (float64)
        self.dims: tuple | None = None  # the shape of every step's result, while they share one
        self.after: list[Group] = []  # small groups its last block runs after its reductions (``follows``)

    def full(self) -> bool:
        """True when one more op could take the kernel past a limit."""
        return len(self.steps) + len(self.tail) + len(self.head) >= MAX_STEPS or self.param_bytes() > PARAM_BYTES

    def param_bytes(self) -> int:
        """Bytes of parameters its kernel would have after one more op (four
        arrays and three scalars at most), its reductions' own and a while
        loop's pass-end ones included. The kernel takes every array flat (56
        bytes); the arrays read through strides and the next op's are counted
        as arrays of the group's dimensions, a margin. Results already dead
        count for nothing: they are not stored."""
        stored = sum(w.alive() for w in self.writes.values()) + len(self.tail_writes) + len(self.head_writes)
        flat = len(self.inputs) + len(self.ones) + stored + 2 * len(self.reductions) + 1 + bool(self.draws)
        strided = 8 * (5 + 2 * max(1, len(self.shape))) * (len(self.strided) + 4)  # a shape and strides each
        scalars = 8 * (len(self.scalars) + len(self.reductions) + 2 + 3)  # the count, the mean's scale, initial values
        return _ARRAY_BYTES * flat + strided + scalars + _PASS_END_BYTES

    def reads(self, lo: int, hi: int) -> bool:
        """True when bytes [lo, hi) overlap what the group's full-size ops read."""
        ones = {arg[1] for s in (*self.head, *self.steps) for arg in s.args if arg[0] == "b"}
        read = [*self.inputs, *[self.ones[k] for k in ones], *[t for t, _, _ in self.strided]]
        return any(spans_overlap(byte_span(t), (lo, hi)) for t in read)

    def touches_written(self, lo: int, hi: int, view: tuple | None = None) -> bool:
        """True when bytes [lo, hi) overlap a live result of the group or its
        reduction's (a result that shares no element with ``view``, a
        ``view_at`` of what is read there, does not count: every load of an
        element comes before the stores)."""
        if any(w.overlaps(lo, hi) and not (view and sharing(w.at(), view, self.shape) == "none")
               for w in self.writes.values()):  # fmt: skip
            return True
        if any(w.overlaps(lo, hi) for w in self.head_writes.values()):  # stored by the first thread
            return True
        return any(spans_overlap(byte_span(r.out), (lo, hi)) for r in self.reductions)


def follows(b: Group, g: Group) -> bool:
    """True when ``g``, a group written out right after ``b``, may run in the
    last block of ``b``'s kernel once its reductions are done (an epilogue,
    ``fused.Epilogue``: an Ising sweep's moments and histogram after the
    magnetisations), as a kernel after it would: ``b`` counts its blocks
    done on a ticket (full reductions, or rows shared by blocks), ``g`` is on
    its stream, small (``fused.EPILOGUE_MAX`` elements at most), with neither
    reductions, draws nor a head, and the parameters of both fit the driver's."""
    if not b.ticket or g.stream != b.stream or g.n > fused.EPILOGUE_MAX or g.reductions or g.draws or g.head:
        return False
    return b.param_bytes() + sum(e.param_bytes() - _PASS_END_BYTES for e in (*b.after, g)) <= PARAM_BYTES


def plan(g: Group, out: Tensor, operands):
    """The step's arguments, ``CONFLICT`` when the op touches the group's memory
    through another view, or ``EAGER`` when an operand cannot be read per element."""
    args = []
    for o in operands:
        if isinstance(o, Draw):
            if g.state is not None and g.state._ptr != o.state._ptr:
                return CONFLICT  # one generator's state a kernel
            args.append(("u", o))
            continue
        if isinstance(o, Rolled):
            strides = read_strides(o.x, out)
            if g.touches_written(*byte_span(o.x)):
                return CONFLICT
            if strides is None:
                return EAGER
            args.append(("c", (o.x, strides, squeezed(o.shifts, out.shape))))
            continue
        if not isinstance(o, Tensor):
            args.append(("s", o))
            continue
        j = _head_value(g, o)
        if j is not None:
            args.append(("h", j))  # the head's value, which every thread holds
            continue
        full = (o._contig and space_of(o) == g.shape) or (g.n == 1 and o.numel() == 1)
        strides = None if full or o.numel() == 1 else read_strides(o, out)
        w = g.writes.get((o._ptr, strides))
        if w is not None and w.read_by(o, full, strides):
            args.append(("v", w.step))
            continue
        if g.touches_written(*byte_span(o), view_at(o, strides)):
            return CONFLICT
        if full:
            args.append(("a", o))
        elif o.numel() == 1:
            args.append(("b", o))
        elif strides is None:
            return EAGER
        else:
            args.append(("c", (o, strides, ())))
    lo, hi = byte_span(out)
    layout = None if out._contig else squeezed(out._strides, out.shape)
    for t in [*g.inputs, *[v for kind, v in args if kind == "a"]]:  # read at [i]: a write there comes after
        t_lo, t_hi = byte_span(t)
        if t_lo < hi and lo < t_hi and (layout is not None or t._ptr != out._ptr or t.dtype is not out.dtype):
            return CONFLICT
    strided = [*g.strided, *[v for kind, v in args if kind == "c"]]
    for t, strides, shifts in strided:  # read at offsets of their own: an element read, then written by its thread
        if not any(shifts) and sharing(view_at(t, strides), view_at(out, layout), g.shape) != "other":
            continue
        if spans_overlap(byte_span(t), (lo, hi)):
            return CONFLICT
    if any(spans_overlap(byte_span(t), (lo, hi)) for t in [*g.ones, *[v for kind, v in args if kind == "b"]]):
        return CONFLICT  # read at [0] by every thread
    if any(w.overlaps(lo, hi) for w in g.head_writes.values()):
        return CONFLICT  # stored by the first thread as the kernel starts
    shadowed = []
    for key, w in list(g.writes.items()):
        if w.lo < hi and lo < w.hi:
            if not w.alive():
                del g.writes[key]  # freed memory, now out's
            elif key == (out._ptr, layout):
                if w.dtype is not out.dtype:
                    return CONFLICT  # the same bytes as another type
            else:
                shared = sharing(w.at(), view_at(out, layout), g.shape)
                if shared == "other":
                    return CONFLICT  # another view of it: another thread's elements
                if shared == "same":  # one thread's, stored in the order written: w's value is no longer read
                    shadowed.append(w)
    if any(spans_overlap(byte_span(r.out), (lo, hi)) for r in g.reductions):
        return CONFLICT
    for w in shadowed:
        w.shadowed = True
    return args


def take_tail(g: Group, op: str, out: Tensor, operands, cast: str) -> bool:
    """Join ``out[0] = op(*operands)``, over one-element tensors after the
    group's full-size ops, to its tail (True); False leaves it (the group is
    written out)."""
    if g.full() or not _tail_writable(g, out):
        return False
    args = []
    for o in operands:
        if not isinstance(o, Tensor):
            args.append(("s", o))
            continue
        if o.numel() != 1:
            return False
        w = g.tail_writes.get(o._ptr)
        m = reduction_of(g, o)
        j = _head_value(g, o)
        if w is not None and w.dtype is o.dtype and w.alive():
            args.append(("w", w.step))
        elif m is not None:
            args.append(("r", m))
        elif j is not None:
            args.append(("h", j))
        elif _tail_touches(g, *byte_span(o)):
            return False  # memory the group's threads write
        else:
            args.append(("b", o))
    g.tail.append(fused.Step(op, _refs(g, args), cast, out.dtype.name))
    g.tail_writes[out._ptr] = Write(len(g.tail) - 1, out)
    return True


def headed(g: Group, space: tuple, n: int, s) -> Group | None:
    """A group over ``space`` (``n`` elements) whose *head* is the one-element
    group ``g``'s ops: every thread runs them before its elements, and the
    first thread stores their results (the scalar algebra that full-size ops
    then read, such as a step size from a time and its bound). None where
    ``g`` is not such a group (it has reductions, a tail or draws, or writes
    memory it reads: every thread reads the head's inputs)."""
    if g.shape != () or g.reductions or g.tail or g.draws or g.head or g.stream != s:
        return None
    h = Group(space, n, s)
    as_head = {"a": lambda k: ("b", g.inputs[k]), "s": lambda k: ("s", g.scalars[k]), "v": lambda k: ("h", k)}
    for step in g.steps:
        if any(kind not in as_head for kind, _ in step.args):
            return None
        args = [as_head[kind](k) for kind, k in step.args]  # its one-element inputs every thread's to read
        h.head.append(fused.Step(step.op, _refs(h, args), step.cast, step.dtype))
    h.head_writes = {w.ptr: w for w in g.writes.values() if w.alive()}
    if any(w.overlaps(*byte_span(t)) for w in h.head_writes.values() for t in h.ones):
        return None  # an update in place: the first thread's store would race the others' reads
    return h


def _head_value(g: Group, o: Tensor) -> int | None:
    """The head step whose value ``o`` (one element, of its dtype) holds, or None."""
    w = g.head_writes.get(o._ptr)
    return w.step if w is not None and o.numel() == 1 and w.dtype is o.dtype and w.alive() else None


def widened(g: Group, out: Tensor, space: tuple, n: int, s) -> Group | None:
    """A group over ``space`` (``n`` elements, ``out``'s), into which the
    smaller group ``g``'s results broadcast, whose first steps are ``g``'s,
    each element computing the values of the element of ``g``'s it reads (a
    ``-2.0 * beta`` over a few temperatures before the lattices' chain that
    reads it): one kernel where there were two. Its results are stored by
    the threads of the first element along the dimensions they are broadcast
    in (most die before the kernel is written out, and are not stored). None
    where ``g`` is not such a group: reductions, a tail, a head or draws;
    results of more than one shape; an operand read rolled; or a result over
    memory it reads (a thread would store it while others read)."""
    if g.dims is None or g.reductions or g.tail or g.head or g.draws or g.stream != s or g.n >= n:
        return None
    if _broadcast_strides_of(g.dims, out.shape) is None:
        return None
    w = Group(space, n, s)
    for step in g.steps:
        args = []
        for kind, k in step.args:
            if kind in ("a", "c"):
                t, shifts = (g.inputs[k], ()) if kind == "a" else (g.strided[k][0], g.strided[k][2])
                strides = read_strides(t, out)
                if any(shifts) or broadcast_strides(t, g.dims) is None or strides is None:
                    return None
                args.append(("c", (t, strides, ())))
            elif kind == "b":
                args.append(("b", g.ones[k]))
            elif kind == "s":
                args.append(("s", g.scalars[k]))
            elif kind == "v":
                args.append(("v", k))
            else:
                return None
        w.steps.append(fused.Step(step.op, _refs(w, args), step.cast, step.dtype))
    read = [*w.ones, *[t for t, _, _ in w.strided]]
    for write in g.writes.values():
        if any(write.overlaps(*byte_span(t)) for t in read):
            return None  # an update in place
        moved = copy.copy(write)
        moved.strides = squeezed(_broadcast_strides_of(g.dims, out.shape, write.strides), out.shape)
        w.writes[moved.key] = moved
    w.dims = out.shape
    return w


def narrowed(g: Group, out: Tensor, operands) -> Tensor | None:
    """``out``, the result of an op over fewer elements than the open group
    ``g``, viewed over the group's dimensions (strides 0 along those it is
    broadcast in), so that the op joins the group as one of its steps: each
    thread computes the value its elements read (``-2.0 * beta`` over a few
    temperatures after the lattices' neighbour sums), and the first element
    along the broadcast dimensions stores it. ``widened`` is the other order.
    None where it may not join: the group has reductions or a tail, or
    results of more than one shape; the op is over one element (a tail's or
    a head's), draws or reads rolled; or its result is over memory the op or
    the group reads (the first threads would store it while others read)."""
    if g.dims is None or g.reductions or g.tail or not 1 < out.numel() < g.n:
        return None
    layout = broadcast_strides(out, g.dims)
    if layout is None or any(isinstance(o, (Draw, Rolled)) for o in operands):
        return None
    span = byte_span(out)
    if g.reads(*span) or any(isinstance(o, Tensor) and spans_overlap(byte_span(o), span) for o in operands):
        return None
    return out._view(g.dims, layout)


def _broadcast_strides_of(dims: tuple, shape: tuple, strides: tuple | None = None) -> tuple | None:
    """``broadcast_layout`` of a result of shape ``dims`` stored with ``strides``
    over its dimensions of more than one element (None: contiguous)."""
    if strides is None:
        return broadcast_layout(dims, contiguous_strides(dims), shape)
    placed = iter(strides)
    return broadcast_layout(dims, tuple(next(placed) if size != 1 else 0 for size in dims), shape)


def after_tail(g: Group, out: Tensor, operands) -> bool:
    """True when a full-size op may join the group after its tail: it neither
    reads nor writes what the tail writes, so the tail (on the first thread,
    after the elements) and the op run in either order with the eager result
    (the time of a Runge-Kutta stage, then the stage's state). What the tail
    reads, one-element inputs and reductions, ``plan`` keeps the op from
    writing, as for any op of the group."""
    if ends_in_rows(g):
        return False
    touched = [o.x if isinstance(o, Rolled) else o for o in (*operands, out) if isinstance(o, (Tensor, Rolled))]
    return not any(w.overlaps(*byte_span(t)) for w in g.tail_writes.values() for t in touched)


def _tail_touches(g: Group, lo: int, hi: int) -> bool:
    """True when bytes [lo, hi) overlap what the group or its tail writes."""
    return g.touches_written(lo, hi) or any(w.overlaps(lo, hi) for w in g.tail_writes.values())


def _tail_writable(g: Group, out: Tensor) -> bool:
    """True when a tail step may write ``out``: memory the group's full-size ops
    do not write (nor read, without a reduction: the tail's thread runs while
    other threads may still read), and the tail's or a reduction's only as
    the same element."""
    lo, hi = byte_span(out)
    if any(w.overlaps(lo, hi) for w in (*g.writes.values(), *g.head_writes.values())):
        return False
    if not g.reductions and g.reads(lo, hi):
        return False
    same = reduction_of(g, out) is not None or (
        out._ptr in g.tail_writes and g.tail_writes[out._ptr].dtype is out.dtype
    )
    return same or not _tail_touches(g, lo, hi)


def reduction_of(g: Group, t: Tensor) -> int | None:
    """The index of the group's reduction whose output ``t`` is (its element, its dtype), or None."""
    for m, r in enumerate(g.reductions):
        if r.out._ptr == t._ptr and r.out.dtype is t.dtype:
            return m
    return None


def ends_in_rows(g: Group) -> bool:
    """True when the group ends in reductions along rows (a block of its dimensions), not full ones."""
    return bool(g.reductions) and g.reductions[0].k > 0


def apply_step(g: Group, op: str, out: Tensor, cast: str, args: list) -> None:
    """Add the step (and its new inputs) to the group; ``out`` becomes a result."""
    g.dims = out.shape if not g.steps or g.dims == out.shape else None
    g.steps.append(fused.Step(op, _refs(g, args), cast, out.dtype.name))
    w = Write(len(g.steps) - 1, out)
    g.writes.pop(w.key, None)  # last in the stores' order: a view sharing elements with another stores after it
    g.writes[w.key] = w


def _refs(g: Group, args: list) -> tuple:
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
        elif kind == "u":  # a new draw (a Draw), numbered in the order drawn
            g.state, g.draws, value = value.state, (*g.draws, value.wide), len(g.draws)
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


def epilogue_of(e: Group, go: int | None) -> tuple:
    """(``fused.Epilogue`` of the small group ``e``, its kernel arguments): ``go``
    the step of its tail that ends the while node's pass, or None."""
    live = [w for w in e.writes.values() if w.alive()]
    stored = [w for w in e.tail_writes.values() if w.alive()]
    epilogue = fused.Epilogue(
        e.n, (len(e.inputs), len(e.ones), len(e.scalars)), tuple(e.steps), tuple(w.step for w in live), e.shape,
        tuple(strides for _, strides, _ in e.strided), tuple(w.strides for w in live),
        tuple(sh for _, _, sh in e.strided), fused.Tail(tuple(e.tail), tuple(w.step for w in stored), go),
    )  # fmt: skip
    return epilogue, [*read_args(e), *[w.array() for w in (*live, *stored)]]


def read_args(g: Group) -> list:
    """The kernel arguments of what group ``g`` reads: its full-size and
    one-element inputs, its strided ones (flat over what they span), its scalars."""
    args = [array_arg(t._ptr, t.numel(), t.dtype) for t in (*g.inputs, *g.ones)]
    return args + [*[spanned(t, g.shape, strides) for t, strides, _ in g.strided], *g.scalars]
