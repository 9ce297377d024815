"""The kernels that set a conditional graph node's handle from device memory.

Each is launched with one thread (``kernel[1, 1](...)``). The setter is
``cudaGraphSetConditional`` on the GPU and its Python twin on the simulator,
so each kernel is built once per process for the backend.

A while node's counter is two int64: the passes of its last replay, and 1
when the loop stopped at its cap (``max_iters``) although its condition still
held. ``loop_start`` runs before the node, ``loop_pass`` at the end of every pass
(``*_do_while`` for a loop without a flag):
counting costs no kernel of its own.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..runtime.backend import get as get_backend

__all__ = [
    "loop_pass", "loop_pass_do_while", "loop_start", "loop_start_do_while", "set_from_flag", "set_from_index", "set_to",
]  # fmt: skip


def _one_thread_kernel(name: str, body):
    body.__qualname__ = f"conditional.{name}"
    return cuda.jit(body)


@functools.cache
def set_from_flag():
    """``(handle, flag)``: the node runs (again) iff ``flag[0]``."""
    setter = get_backend().conditional_setter()

    def set_conditional_from_flag(handle, flag):
        if cuda.grid(1) == 0:
            setter(handle, np.uint32(1 if flag[0] else 0))

    return _one_thread_kernel("set_from_flag", set_conditional_from_flag)


@functools.cache
def set_to():
    """``(handle, value)``: set the handle to a constant (a do-while's first pass)."""
    setter = get_backend().conditional_setter()

    def set_conditional_to(handle, value):
        if cuda.grid(1) == 0:
            setter(handle, value)

    return _one_thread_kernel("set_to", set_conditional_to)


@functools.cache
def set_from_index():
    """``(handle, index, n)``: a switch runs body ``index[0]``; an index outside
    ``[0, n)`` (negative, or too large for 32 bits) runs none."""
    setter = get_backend().conditional_setter()

    def set_conditional_from_index(handle, index, n):
        if cuda.grid(1) == 0:
            i = index[0]
            setter(handle, np.uint32(i) if i >= 0 and i < n else np.uint32(n))

    return _one_thread_kernel("set_from_index", set_conditional_from_index)


@functools.cache
def loop_start():
    """``(handle, flag, counter, max_iters)`` before a while node: zero its
    counter; the first pass runs iff ``flag[0]`` and the cap allows one."""
    setter = get_backend().conditional_setter()

    def start_loop(handle, flag, counter, max_iters):
        if cuda.grid(1) == 0:
            go = flag[0] != 0
            counter[0] = 0
            counter[1] = 1 if go and max_iters <= 0 else 0
            setter(handle, np.uint32(1 if go and max_iters > 0 else 0))

    return _one_thread_kernel("loop_start", start_loop)


@functools.cache
def loop_start_do_while():
    """``(handle, counter, max_iters)`` before a do-while node: zero its counter;
    the first pass runs unless the cap is 0."""
    setter = get_backend().conditional_setter()

    def start_do_while(handle, counter, max_iters):
        if cuda.grid(1) == 0:
            counter[0] = 0
            counter[1] = 1 if max_iters <= 0 else 0
            setter(handle, np.uint32(1 if max_iters > 0 else 0))

    return _one_thread_kernel("loop_start_do_while", start_do_while)


@functools.cache
def loop_pass():
    """``(handle, flag, counter, max_iters)`` at the end of a pass: count it;
    loop again iff ``flag[0]`` and the cap is not reached (then mark the cap hit)."""
    setter = get_backend().conditional_setter()

    def end_pass(handle, flag, counter, max_iters):
        if cuda.grid(1) == 0:
            passes = counter[0] + 1
            counter[0] = passes
            go = flag[0] != 0
            if go and passes >= max_iters:
                go = False
                counter[1] = 1
            setter(handle, np.uint32(1 if go else 0))

    return _one_thread_kernel("loop_pass", end_pass)


@functools.cache
def loop_pass_do_while():
    """``(handle, counter, max_iters)`` at the end of a do-while's pass, after
    the user's kernels: count it; at the cap, stop the loop whatever they set."""
    setter = get_backend().conditional_setter()

    def end_do_while_pass(handle, counter, max_iters):
        if cuda.grid(1) == 0:
            passes = counter[0] + 1
            counter[0] = passes
            if passes >= max_iters:
                counter[1] = 1
                setter(handle, np.uint32(0))

    return _one_thread_kernel("loop_pass_do_while", end_do_while_pass)
