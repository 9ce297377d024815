"""Renamed stores of the fusion pass.

A fused kernel cannot store a tensor whose memory its threads read at other
elements: the Ising sweep reads the spins rolled (each site's neighbours),
then stores the flipped spins into them. Rather than end the group there and
copy the result in with a kernel of its own, the fuser stores it into a
buffer of its own (``Fuser._rename``), and later ops that read the tensor
read the buffer (``read_through``), as a copy of the tensor that the group
may still read around. The renaming ends with a store into the whole tensor
that conflicts with nothing (the next colour's flips, which read the buffer
rolled), or the fuser copies the buffer back before anything else may touch
the tensor's memory (``Fuser.flush``: a kernel not its own, an event, the
function's end), and before an op that touches part of it.
"""

from __future__ import annotations

import weakref

from .._overlap import byte_span
from .._tensor import Tensor
from ._groups import Rolled
from ._views import spans_overlap

__all__ = ["Renamed", "read_through"]


class Renamed:
    """A contiguous tensor whose latest value is ``buffer``'s, not its memory's,
    on the stream ``stream``. It holds the tensor's memory weakly: a tensor
    freed while renamed is not copied back (its memory may be another's)."""

    __slots__ = ("ptr", "shape", "strides", "dtype", "storage", "span", "buffer", "stream")

    def __init__(self, t: Tensor, buffer: Tensor, stream) -> None:
        self.ptr, self.shape, self.strides, self.dtype = t._ptr, t.shape, t._strides, t.dtype
        self.storage, self.span = weakref.ref(t._storage), byte_span(t)
        self.buffer, self.stream = buffer, stream

    def alive(self) -> bool:
        return self.storage() is not None

    def whole(self, t: Tensor) -> bool:
        """True when ``t`` is the whole tensor (any contiguous shape of it, its dtype)."""
        return t._ptr == self.ptr and t._contig and t.dtype is self.dtype and byte_span(t) == self.span

    def overlaps(self, t: Tensor) -> bool:
        return spans_overlap(byte_span(t), self.span)

    def tensor(self) -> Tensor:
        """The tensor, to copy the buffer back into (only while ``alive``)."""
        return Tensor._make(self.storage(), self.ptr, self.shape, self.strides, self.dtype)


def read_through(renamed: list[Renamed], o):
    """The operand ``o`` as an op reads it while ``renamed`` are: the buffer, in
    the operand's shape, where it is a whole renamed tensor (or reads one
    rolled); else ``o`` itself."""
    t = o.x if isinstance(o, Rolled) else o
    if not isinstance(t, Tensor):
        return o
    for r in renamed:
        if r.whole(t):
            buffer = r.buffer._view(t.shape, t._strides)
            return Rolled(buffer, o.shifts) if isinstance(o, Rolled) else buffer
    return o
