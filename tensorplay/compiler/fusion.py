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
- a head: one-element ops before the first full-size op, which every thread
  runs first and whose results the first thread stores (a step size from a
  time and its bound), where they update nothing in place and the full-size
  ops neither write what they read or store nor read their results through
  another view;
- ops over fewer elements whose results broadcast to the group's shape
  (``-2.0 * beta``, a value a lattice), before the group's ops or among them:
  each thread computes the values its elements read, and the first element
  along the broadcast dimensions stores them, where they update nothing the
  group or the op reads;
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

A group whose kernel has a last block (full reductions, or a few long rows
that blocks share) does not launch at once when the next op ends it: the small
groups written out right after it (``fused.EPILOGUE_MAX`` elements at most,
without reductions or draws) run in its last block once the reductions are
done, in order, as kernels after it would (``_groups.follows``; an Ising
sweep's moments and histogram after the magnetisations).

Results that nothing can read any more (their memory freed before the group
is written out) are not stored. A store into a whole tensor that the group
reads at other elements (an Ising sweep's flips into the spins it read
rolled) goes to a buffer of the fuser's own, read in the tensor's place
until a store into the tensor ends the renaming or the buffer is copied
back (``_renaming.py``).

This module feeds groups and writes them out; what a group holds and the
rules above live in ``_groups.py``, the arithmetic of views (iteration
spaces, strides, which views share elements) in ``_views.py``.
"""

from __future__ import annotations

import math
import threading
from contextlib import contextmanager
from functools import partial

import numpy as np

from .. import _dtype as dt
from .._factories import zeros
from .._reduce import _reduce_types, reduce_dims
from .._shape import contiguous_strides
from .._tensor import Tensor
from ..kernels import fused
from ..kernels import reduce as rk
from ..runtime.backend import get as get_backend
from ..runtime.capture import BranchKernel, capture_state
from ..runtime.launch import grid_1d, launch
from ..runtime.streams import current_stream, stream
from ._groups import (
    CONFLICT,
    EAGER,
    Draw,
    Group,
    Reducing,
    Rolled,
    after_tail,
    apply_step,
    ends_in_rows,
    epilogue_of,
    follows,
    headed,
    narrowed,
    plan,
    read_args,
    take_tail,
    widened,
)
from ._renaming import Renamed, read_through
from ._sinking import sink
from ._views import (
    array_arg,
    space_of,
)

__all__ = ["Fuser", "fusing", "tickets"]

FUSABLE = frozenset(("bool", "int32", "int64", "float32", "float64"))
REDUCTIONS = frozenset(("sum", "mean", "max", "min"))
_FLOATS = ("float32", "float64")  # what a fused mean takes
_ORDERED = ("int32", "int64", *_FLOATS)  # max and min
_SUMMED = ("bool", *_ORDERED)  # sum: bools and integers in int64, as eagerly (a count of True)
MAX_BLOCKS = 1024  # blocks of a fused reduction at most (its last block combines this many partials)
MAX_REDUCTIONS = 4  # full reductions of one kernel (a shared array of a block's size each)
# A reduction over leading or middle dimensions has a block's threads read elements this many apart at most
# (an N-body step's xyz: 3); wider, its loads would not coalesce, and the eager kernel's columns do.
MAX_TRAIL = 8


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


class Fuser:
    """Defers the elementwise ops of one thread (the one that made it, which
    alone finds it: ``runtime.capture.current_fuser``) into fused kernels (see the
    module); with ``fuse=False`` it launches each op as eagerly. Either way it
    notes the data pointers of what the ops and kernels issued may write
    (``written``), so that ``tp.compile`` knows which arguments a function
    changes in place."""

    def __init__(self, fuse: bool = True) -> None:
        self.fuse = fuse
        self.group: Group | None = None
        self.kernels: list[tuple[str, str]] = []  # (name, source) of every fused kernel launched
        self.written: list[int] = []  # data pointers of every op's output and every kernel's arrays
        self.renamed: list[Renamed] = []  # tensors whose latest value is in a buffer (``_renaming.py``)
        self.before: Group | None = None  # written out, waiting for epilogues (``_write_out``)
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
        ending = []  # renamed tensors that a store into the whole of them ends
        if self.renamed:
            operands, ending = self._through_renamed(out, operands)
        if not self._join(op, out, operands, cast):
            self.flush()
            return False
        if ending:
            self.renamed = [r for r in self.renamed if r not in ending]
        return True

    def _join(self, op: str, out: Tensor, operands, cast: str) -> bool:
        """Join the op to the open group, or to a new one after writing the open
        one out (True); False where it must run eagerly."""
        s, space = current_stream(), space_of(out)
        g = self.group
        if g is not None and not ends_in_rows(g) and g.stream == s and space == () != g.shape:
            if take_tail(g, op, out, operands, cast):
                return True
        if g is not None and g.shape != space:  # one-element ops as a head, or fewer elements as first steps
            opened = headed(g, space, out.numel(), s) if g.shape == () else widened(g, out, space, out.numel(), s)
            if self._join_opened(opened, op, out, operands, cast):
                return True
            if g.stream == s and not g.full() and self._join_narrowed(g, op, out, operands, cast):
                return True
        ends_at_tail = g is not None and g.tail and not after_tail(g, out, operands)
        if ends_at_tail and g.ticket and g.shape == space and g.stream == s:
            h = sink(g, op, out, operands, cast)  # g without the steps that moved into h, with the op
            if h is not None:
                self._write_out(more=True)
                self.group = h
                return True
        if g is not None and (g.shape != space or g.stream != s or g.full() or ends_at_tail):
            self._write_out(more=True)
            g = None
        fresh = g is None
        if fresh:
            g = Group(space, out.numel(), s)
        args = plan(g, out, operands)
        if args is CONFLICT and not fresh:
            if self._rename(g, op, out, operands, cast):
                return True
            self._write_out(more=True)
            g = Group(space, out.numel(), s)
            args = plan(g, out, operands)
        if args in (CONFLICT, EAGER):
            return False
        apply_step(g, op, out, cast, args)
        self.group = g
        return True

    def _through_renamed(self, out: Tensor, operands) -> tuple[list, list[Renamed]]:
        """(the operands as the op reads them while tensors are renamed, the
        renamed tensors that ``out`` is the whole of). An op that touches part of
        a renamed tensor, or touches one on another stream, has every buffer
        copied back first."""
        self.renamed = [r for r in self.renamed if r.alive()]
        s = current_stream()
        touched = [o.x if isinstance(o, Rolled) else o for o in (*operands, out) if isinstance(o, (Tensor, Rolled))]
        if any(r.overlaps(t) and (r.stream != s or not r.whole(t)) for r in self.renamed for t in touched):
            self.flush()
            return list(operands), []
        return [read_through(self.renamed, o) for o in operands], [r for r in self.renamed if r.whole(out)]

    def _rename(self, g: Group, op: str, out: Tensor, operands, cast: str) -> bool:
        """Store the op's result into a buffer of the fuser's own where storing
        it into ``out`` conflicts with the open group (which reads ``out`` at other
        elements) and ``out`` is the whole of its memory (not a slice, which other
        views would soon touch), over the group's shape: later ops read the buffer
        for ``out`` (``_renaming.py``). True where it did."""
        storage = out._storage
        whole = out._contig and out._ptr == storage.ptr and out.numel() * out.dtype.itemsize == storage.nbytes
        if g.n < 2 or not whole or space_of(out) != g.shape:
            return False
        buffer = Tensor._empty(out.shape, out.dtype)
        args = plan(g, buffer, operands)
        if args in (CONFLICT, EAGER):
            return False
        apply_step(g, op, buffer, cast, args)
        self.group = g
        self.renamed = [r for r in self.renamed if not r.whole(out)] + [Renamed(out, buffer, g.stream)]
        return True

    def _join_opened(self, h: Group | None, op: str, out: Tensor, operands, cast: str) -> bool:
        """Make ``h``, a group that the open one became (its head, or its first
        steps: ``headed``, ``widened``; None where it cannot), the open group
        with the op joined (True), where the op may follow it; else False, the
        open group left as it was."""
        args = CONFLICT if h is None else plan(h, out, operands)
        if args in (CONFLICT, EAGER):
            return False
        apply_step(h, op, out, cast, args)
        self.group = h
        return True

    def _join_narrowed(self, g: Group, op: str, out: Tensor, operands, cast: str) -> bool:
        """Join an op over fewer elements than the open group's to it, as a step
        that each thread computes for its elements (``narrowed``): True, or False
        where it may not."""
        wide = narrowed(g, out, operands)
        args = CONFLICT if wide is None else plan(g, wide, operands)
        if args in (CONFLICT, EAGER):
            return False
        apply_step(g, op, wide, cast, args)
        return True

    def reduce(self, op: str, x: Tensor, dim, keepdim: bool) -> Tensor | None:
        """A reduction of a result of the open group, over all its dimensions
        (beside the group's other full reductions) or a block of them (the
        last ones, or middle ones such as an N-body step's sum over partners:
        beside the group's other reductions along the same rows only, after a
        tail only where that tail came without a reduction, so that it
        touches nothing the other threads do), as the kernel's epilogue: the
        reduction's output (None: not taken, the eager reduction runs)."""
        if self.renamed:  # read through a buffer, or copied back first
            (x,), _ = self._through_renamed(x, [x])
        g = self.group
        if g is None or len(g.reductions) >= MAX_REDUCTIONS or op not in REDUCTIONS:
            return None
        if g.shape == ():  # one element: nothing to reduce in blocks
            return None
        w = g.writes.get((x._ptr, None))
        if (
            w is None or not w.read_by(x, x._contig and space_of(x) == g.shape, None) or w.strides is not None
            or g.stream != current_stream()
            or x.dtype.name not in (_SUMMED if op == "sum" else _ORDERED if op in ("max", "min") else _FLOATS)
        ):  # fmt: skip
            return None
        dims = sorted(reduce_dims(x, dim))
        kept = x.ndim - len(dims)
        block = bool(dims) and dims == list(range(dims[0], dims[-1] + 1))
        trail = math.prod(x.shape[dims[-1] + 1 :]) if block else 0
        if not block or trail > MAX_TRAIL or 0 in x.shape:
            return None  # not a block of dimensions (or nothing to reduce): the eager kernel's layouts
        k = 0 if kept == 0 else g.n // math.prod(x.shape[d] for d in range(x.ndim) if d not in dims)
        if g.reductions and (g.reductions[0].k, g.reductions[0].trail) != (k, trail):
            return None  # full reductions beside full ones only, rows beside the same rows only
        if (kept == 0 or _few_long_rows(k, g.n // k)) and not g.ticket:  # its blocks count themselves done
            g.ticket = tickets.take() or 0
            if not g.ticket:
                return None
        out_dtype, acc = _reduce_types(op, x.dtype)
        kept_shape = tuple(size for d, size in enumerate(x.shape) if d not in dims)
        out = Tensor._empty(kept_shape or (1,), out_dtype)
        g.reductions.append(Reducing(op, w.step, acc, out, k, trail))
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
        return self.take("copy", out, [Draw(state, wide=out.dtype.name == "float64")], "none")

    # -- writing a group out -----------------------------------------------------------------
    def flush(self, last: bool = False) -> None:
        """Launch the open group as one fused kernel (on the stream its ops were
        issued on), then copy renamed tensors' buffers back into them, so that
        their memory holds what the ops stored. ``last``: the traced function's
        last kernel, which ends the pass of the while node whose body it is
        captured into where its tail computes the node's flag (``_loop_ended_by``)."""
        if self._launching:  # its own kernel's launch, which flushes what is held back
            return
        renamed, self.renamed = self.renamed, []
        self._write_out(last)
        copied = [r for r in renamed if r.alive()]
        for r in copied:
            with stream(r.stream):
                r.tensor().copy_(r.buffer)  # joins a group of copies (or runs eagerly)
        if copied:
            self._write_out()

    def _write_out(self, last: bool = False, more: bool = False) -> None:
        """Launch the open group as one fused kernel (see ``flush``). ``more``:
        the next op is coming, and ends the group only because it does not join
        it. A group whose kernel has a last block (its reductions' ticket) then
        waits (``before``), and small groups written out right after it run in
        that block (``follows``: epilogues), until one cannot."""
        g, self.group = self.group, None
        if g is not None and not g.steps:
            g = None
        b = self.before
        if b is not None and g is not None and follows(b, g):
            b.after.append(g)
            if more:
                return
            g = None
        if b is not None:
            self.before = None
            self._launch(b, last and g is None)
        if g is None:
            return
        if more and g.ticket:
            self.before = g
            return
        self._launch(g, last)

    def _launch(self, g: Group, last: bool) -> None:
        """Launch group ``g`` as one fused kernel, its epilogues (``g.after``) in its last block."""
        live = [w for w in g.writes.values() if w.alive()]
        stored = [w for w in g.tail_writes.values() if w.alive()]
        head_stored = [w for w in g.head_writes.values() if w.alive()]
        loop, go = _loop_ended_by(g) if last else (None, None)
        tail = fused.Tail(tuple(g.tail), tuple(w.step for w in stored), None if g.after else go)
        epilogues = [epilogue_of(e, go if e is g.after[-1] else None) for e in g.after]
        head = fused.Head(tuple(g.head), tuple(w.step for w in head_stored))
        reductions = tuple(
            fused.Reduction(r.op, r.step, r.acc.name, r.out.dtype.name, r.k, r.trail) for r in g.reductions
        )
        after = [s for e in g.after for s in (*e.steps, *e.tail)]
        name = _kernel_name((*g.head, *g.steps), reductions, (*g.tail, *after))
        counts = (len(g.inputs), len(g.ones), len(g.scalars))
        strided, shifts = tuple(strides for _, strides, _ in g.strided), tuple(sh for _, _, sh in g.strided)
        out_strides = tuple(w.strides for w in live)
        rows = g.reductions[0].out.numel() if ends_in_rows(g) else 0
        pieces = max(1, _reduction_blocks(g.n) // rows) if rows and g.ticket else 0  # a few long rows
        flat = None if g.reductions else grid_1d(g.n)  # the grid of a kernel without reductions
        one_each = flat is not None and flat[0][0] * flat[1][0] >= g.n  # a thread for every element
        source = partial(fused.source, name, counts, tuple(g.steps), tuple(w.step for w in live), reductions, g.shape,
                         strided, out_strides, shifts=shifts, draws=g.draws, head=head, pieces=pieces,
                         epilogues=tuple(e for e, _ in epilogues), one_each=one_each)  # fmt: skip
        text = source(tail=tail)
        kernel = fused.kernel(name, text)
        args = [np.int64(g.n), *read_args(g), *[w.array() for w in (*live, *head_stored)]]
        if g.draws:
            args.append(array_arg(g.state._ptr, g.state.numel(), g.state.dtype))
        tail_outputs = [w.array() for w in stored] + [a for _, args in epilogues for a in args]
        tail_outputs += loop.pass_end_args() if loop is not None else []
        with stream(g.stream), self._launching_own():
            if flat is not None:
                grid, block = flat
            elif rows and not pieces:  # a thread a short row, else a block a row
                for r in g.reductions:
                    args += [array_arg(r.out._ptr, r.out.numel(), r.out.dtype), rk.identity_value(r.op, r.acc)]
                k = g.reductions[0].k
                args.append(np.float64(1.0 / k))
                if k <= fused.THREAD_ROWS:
                    grid, block = grid_1d(rows)
                else:
                    grid, block = (min(rows, 65535), 1, 1), (min(fused.BLOCK, max(32, 1 << (k - 1).bit_length())), 1, 1)
            else:  # full reductions, or a few long rows that blocks share: the last block combines the partials
                blocks = rows * pieces or _reduction_blocks(g.n)
                args += [array_arg(g.ticket, 1, dt.int32), np.float64(1.0 / (g.reductions[0].k or g.n))]
                partials = [Tensor._empty((blocks,), dt.from_numpy_dtype(r.acc)) for r in g.reductions]  # its alone
                for r, p in zip(g.reductions, partials, strict=True):
                    args += [array_arg(p._ptr, blocks, p.dtype), array_arg(r.out._ptr, r.out.numel(), r.out.dtype)]
                    args.append(rk.identity_value(r.op, r.acc))
                grid, block = (blocks, 1, 1), (fused.BLOCK, 1, 1)
            args += tail_outputs
            launch(kernel, grid, block, args, g.stream)
        if loop is not None:
            loop.pass_ended()
        noted = capture_state.active and not g.after  # (a kernel with epilogues is not swapped)
        conditions = [w for w in stored if w.dtype in _CONDITIONS and w.step != go] if noted else []
        flags = {w.ptr: (w.step, w.dtype) for w in conditions}
        if flags:

            def setting(step: int, cases: int):
                return fused.kernel(name, source(tail=tail.setting(step, cases)))

            _note_flags(g.stream, grid, block, args, flags, setting)
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


def _loop_ended_by(g: Group) -> tuple:
    """(the open while node, the tail step that computes its flag) where the
    group's kernel may end the node's pass (``conditional.pass_end``): the
    group is captured into the body of a while node with a flag, whose pass no
    kernel ended yet, and its tail writes the flag; else (None, None). Work
    captured into the body after the kernel makes the node end its pass with a
    kernel again (``tensorplay/cuda/conditional.py``)."""
    node = capture_state.loops.get(g.stream.handle) if capture_state.loops else None
    if node is None or node.ended_at is not None:
        return None, None
    w = (g.after[-1] if g.after else g).tail_writes.get(node.pred._ptr)  # the last stage's tail
    if w is None or w.dtype is not dt.bool or not w.alive():
        return None, None
    return node, w.step


_CONDITIONS = (dt.bool, dt.int32, dt.int64)  # what an if node's flag or a switch's index may be


def _note_flags(s, grid, block, args: list, flags: dict, setting) -> None:
    """Note a kernel just captured on ``s`` whose tail computes ``flags``, one-element
    results that could be an if node's flag or a switch's index ((tail step, dtype)
    by data pointer): such a node opened on one right after it swaps the kernel for
    ``setting(step, cases)``, which also sets the node's handle, its last argument
    (``cuda/conditional.py``)."""
    node = get_backend().captured_node(s._h)
    if node is not None:
        capture_state.branch_kernels[s.handle] = BranchKernel(node, grid, block, args, flags, setting)


def _few_long_rows(k: int, rows: int) -> bool:
    """True when ``rows`` rows of ``k`` elements, a block a row, would leave the
    device idle: rows of more than 16 blocks' worth of elements, too few for an
    eighth of a wave of threads (four rows of 65 536 spins: the whole chain on
    four blocks). Blocks then share each row, as many as a full reduction of
    the chain's elements would take, and the last one to finish combines each
    row's partials (``fused._pieced_rows``)."""
    return k > 16 * fused.BLOCK and rows * fused.BLOCK * 8 < get_backend().max_threads_per_launch


def _reduction_blocks(n: int) -> int:
    """Blocks of a full reduction over ``n`` elements: a thread per element up
    to half a wave of the device's threads (on the H200 half a wave beat a
    whole one and a quarter, at 4 and at 8 elements a thread at a time:
    ``benchmarks/fusion_variants.py``; four blocks at least, which the
    simulator's small waves would not give), and no more than ``MAX_BLOCKS``."""
    half_wave = max(4, get_backend().max_threads_per_launch // (2 * fused.BLOCK))
    return max(1, min(-(-n // fused.BLOCK), half_wave, MAX_BLOCKS))


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
        fuser.flush(last=previous is None)
    except BaseException:
        try:
            fuser.flush()  # what ran before the error is issued, as eagerly
        except Exception:
            fuser.group, fuser.before, fuser.renamed = (
                None,
                None,
                [],
            )  # the capture is broken anyway: its error is the one to see
        raise
    finally:
        if previous is None:
            del capture_state.fusers[me]
        else:
            capture_state.fusers[me] = previous
            previous.written.extend(fuser.written)
