"""The math libraries on the simulator: a library call computed by NumPy on the
simulated device memory, in stream order and under the capture rules.

On the GPU a library call (a cuFFT transform, a cuSOLVER factorisation) queues
kernels on the current stream. Here the same call is one host function over
NumPy views of the operands' memory, handed to the simulator as one kernel:
eagerly it runs at once (the simulator's streams are synchronous); on a
capturing stream it becomes one node of the graph, run again at each replay
and inside conditional bodies, as the library's kernels would be. The refusals
are a launch's: the legacy default stream while this thread captures strictly,
and the fused ops ``tp.compile`` holds back are launched first.

Operands are ``Operand`` records (pointer, shape, strides in elements, NumPy
dtype); the function receives their views in the same order and writes its
results into the views of the outputs (``out[...] = ...``), never rebinding
them. It must not read anything else that changes between replays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ..backend import get as get_backend
from ..capture import capture_state, flush_fused, refuse_legacy_launch
from ..streams import current_stream

__all__ = ["Operand", "call"]


class Operand(NamedTuple):
    """Device memory a simulated call reads or writes: its NumPy view is
    ``shape`` with ``strides`` (in elements) from ``ptr``."""

    ptr: int
    shape: tuple
    strides: tuple
    dtype: np.dtype

    @classmethod
    def dense(cls, ptr: int, shape: tuple, dtype) -> Operand:
        """A C-contiguous operand."""
        strides, step = [], 1
        for d in reversed(shape):
            strides.append(step)
            step *= max(d, 1)
        return cls(ptr, tuple(shape), tuple(reversed(strides)), np.dtype(dtype))


def call(name: str, compute: Callable[..., None], operands: Sequence[Operand]) -> None:
    """Run ``compute(*views)`` on the current stream as the library call ``name``
    (a node named so when the stream captures)."""
    s = current_stream()
    if capture_state.active:
        refuse_legacy_launch(name, s)
        flush_fused()
    dev = get_backend()
    views = [dev.view(o.ptr, o.shape, tuple(st * o.dtype.itemsize for st in o.strides), o.dtype) for o in operands]
    dev.enqueue(s._h, "kernel", lambda: compute(*views), f"{name}\\n(NumPy, as the simulator's library)")
