"""The kernel that sets a conditional graph node's handle from a device flag."""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..runtime.backend import get as get_backend

__all__ = ["set_from_flag", "set_to"]


@functools.cache
def set_from_flag():
    """``set_from_flag[1, 1](handle, flag)``: the node runs (again) iff ``flag[0]``.

    The setter is ``cudaGraphSetConditional`` on the GPU and its Python twin on
    the simulator, so the kernel is built once per process for the backend.
    """
    setter = get_backend().conditional_setter()

    def set_conditional_from_flag(handle, flag):
        if cuda.grid(1) == 0:
            setter(handle, np.uint32(1 if flag[0] else 0))

    set_conditional_from_flag.__qualname__ = "conditional.set_from_flag"
    return cuda.jit(set_conditional_from_flag)


@functools.cache
def set_to():
    """``set_to[1, 1](handle, value)``: set the handle to a constant (a do-while's first pass)."""
    setter = get_backend().conditional_setter()

    def set_conditional_to(handle, value):
        if cuda.grid(1) == 0:
            setter(handle, value)

    set_conditional_to.__qualname__ = "conditional.set_to"
    return cuda.jit(set_conditional_to)
