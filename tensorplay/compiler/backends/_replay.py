"""One signature of a compiled function: its warm-up count, and each
thread's capture of it (``Replay``): what a call stages, replays and gives back.

Each thread that calls a signature captures a graph of its own on its first
call after the warm-ups (the warm-ups are counted over every thread: they
compile the kernels), and replays only that graph: calls from several
threads never share static inputs or outputs, so each gets its own result,
and an output goes stale only at the next call from the thread that got it.
A thread's graphs are freed with the thread. Replays a thread issues on
different streams are ordered one after another.

An output that is an argument, a view of one, or a tensor that the graph
does not own (one ``fn`` closes over) is given back as that tensor, as
eagerly: ``Returned`` says which.
"""

from __future__ import annotations

import threading

from ..._overlap import byte_span, self_overlapping
from ..._stale import Handout, config
from ..._tensor import Tensor
from ...autograd import no_grad
from ...runtime.streams import current_stream
from ._trees import unflatten

__all__ = ["UNMAPPABLE", "Entry", "Replay", "Returned", "dense_like", "returned_as"]


def dense_like(t: Tensor) -> Tensor:
    """A new tensor of ``t``'s shape and dtype, with its strides too where they
    cover exactly its elements (contiguous, or permuted as ``.t()`` makes);
    contiguous otherwise. Not initialised."""
    n = t.numel()
    if t._contig or n == 0 or self_overlapping(t):
        return Tensor._empty(t.shape, t.dtype)
    isz = t.dtype.itemsize
    lo, hi = byte_span(t)
    if hi - lo != n * isz:  # gaps between its elements
        return Tensor._empty(t.shape, t.dtype)
    return Tensor._empty((n,), t.dtype)._view(t.shape, t.stride(), (t._ptr - lo) // isz)


class Returned:
    """An output given back as a tensor that is not the graph's: argument
    ``arg`` itself (``view`` None) or ``view`` = (shape, strides, element
    offset) of it, or ``tensor`` itself (memory the graph does not own)."""

    __slots__ = ("arg", "view", "tensor")

    def __init__(self, arg: int | None = None, view: tuple | None = None, tensor: Tensor | None = None) -> None:
        self.arg, self.view, self.tensor = arg, view, tensor

    def give(self, tensors) -> Tensor:
        if self.tensor is not None:
            return self.tensor
        if self.view is None:
            return tensors[self.arg]
        return tensors[self.arg]._view(*self.view)


UNMAPPABLE = object()  # an output over an argument's memory that no view of the caller's tensor is


def returned_as(out: Tensor, arg_statics, tensors, pool) -> Returned | None | tuple:
    """How the capture's output ``out`` is given back at each call: None (the
    graph's memory: handed out), a ``Returned``, or ``(UNMAPPABLE, index)``
    when it lies over the static copy of argument ``index`` (captured from
    ``tensors``, in ``arg_statics``) in a way no view of that argument shows."""
    for i, s in enumerate(arg_statics):
        if out is s:
            return Returned(arg=i)
    storage = out._storage
    owners = [i for i, s in enumerate(arg_statics) if s._storage is storage]
    if not owners:
        block = storage.block
        return None if block is not None and block.pool == pool else Returned(tensor=out)
    lo, hi = byte_span(out)
    isz = out.dtype.itemsize
    for i in owners:
        s, t = arg_statics[i], tensors[i]
        s_lo, s_hi = byte_span(s)
        if (
            s.dtype is out.dtype and _same_layout(s, t) and s_lo <= lo and hi <= s_hi
            and (out._ptr - s._ptr) % isz == 0
        ):  # fmt: skip
            return Returned(arg=i, view=(out.shape, out.stride(), (out._ptr - s._ptr) // isz))
    return (UNMAPPABLE, owners[0])


def _same_layout(a: Tensor, b: Tensor) -> bool:
    """True when ``a`` and ``b`` (of one shape) place their elements alike (a
    size-1 dimension's stride moves nothing)."""
    return all(x == y for size, x, y in zip(a.shape, a.stride(), b.stride(), strict=True) if size > 1)


class Entry:
    """One signature: its warm-up calls so far (every thread's), whether it
    runs eagerly, and each thread's ``Replay`` (``mine.replay``, freed with
    the thread)."""

    __slots__ = ("calls", "eager", "records_grad", "mine")

    def __init__(self) -> None:
        self.calls = 0
        self.eager = False  # it cannot be captured, staged or graphed: never captured
        self.records_grad = False  # a warm-up's outputs required grad: capture the backward too
        self.mine = threading.local()  # .replay: this thread's capture


class Replay:
    """One thread's capture of one signature: what a call stages, replays and gives back."""

    __slots__ = (
        "graph", "statics", "sources", "written", "out_spec", "out_leaves", "returns", "handout", "captured",
        "parameters", "backward", "stream",
    )  # fmt: skip

    def __init__(self, name: str) -> None:
        self.graph = None
        self.statics: list[Tensor] = []  # what stage_and_launch copies into
        self.sources: tuple | None = None  # with shared memory: what it copies from (see _aliased_statics)
        self.written: tuple = ()  # indices of the statics the function writes: copied back after a replay
        self.out_spec = None
        self.out_leaves: list[Tensor] = []  # the outputs in the graph's memory
        self.returns: tuple | None = None  # per output: None (in out_leaves) or a Returned; None: all are
        self.handout = Handout(f"compiled {name}")  # each call's outputs, stale at the next call
        self.captured = None  # with a graphed backward: the Captured that replays both graphs
        self.parameters: tuple = ()  # what it takes after the arguments (a module's parameters)
        self.backward = None
        self.stream = None  # where the last replay was issued: the next one, on another stream, waits for it

    def launch(self, tensors):
        """Stage this call's ``tensors``, replay, and return the outputs."""
        s = current_stream()
        if self.stream is not s:
            if self.stream is not None:
                s.wait_stream(self.stream)  # the last replay may still read the static inputs
            self.stream = s
        if self.captured is not None:  # recorded by autograd as one node, which replays the backward
            outs = self.captured.apply(*tensors, *self.parameters)
            if self.written:
                self._copy_back(tensors)
            return unflatten(self.out_spec, outs)
        staged = tensors
        if self.sources is not None:
            staged = [
                tensors[src] if type(src) is int else tensors[src[0]]._view((src[2],), (1,), src[1])
                for src in self.sources
            ]
        self.graph.stage_and_launch(self.statics, staged)
        if self.written:
            self._copy_back(staged)
        if config.check_stale_outputs:
            outs = self.handout.give(self.out_leaves)
        else:
            self.handout.expire()
            outs = self.out_leaves
        if self.returns is not None:
            it = iter(outs)
            outs = [next(it) if r is None else r.give(tensors) for r in self.returns]
        return unflatten(self.out_spec, outs)

    def _copy_back(self, tensors: list) -> None:
        """In-place changes reach the caller's tensors (not recorded by autograd, as eagerly),
        but for an output of an earlier call passed back in: its memory is the graph's, which
        this call's outputs now hold (it is stale from this call on), so the copy would
        overwrite them."""
        outputs = {id(t._storage) for t in self.out_leaves}
        with no_grad():
            for k in self.written:
                if id(tensors[k]._storage) not in outputs:
                    tensors[k].copy_(self.statics[k])
