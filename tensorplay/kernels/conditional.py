"""The kernels that set a conditional graph node's handle from device memory.

Each is launched with one thread (``kernel[1, 1](...)``). The setter is
``cudaGraphSetConditional`` on the GPU and its Python twin on the simulator,
so each kernel is built once per process for the backend.

A while node's counter is three int64: the passes of its last replay, why
the loop stopped although its condition still held (``STOPPED_AT_CAP`` at
``max_iters``, ``STOPPED_BY_CANCEL`` by ``CUDAGraph.cancel``; 0 when the
condition ended it), and (for an unrolled body) the copy of the body running.
``cancel`` is the graph's cancel request, one int64 outside the graph's pool
(a block of the pool may hold other tensors before the loop starts), which
the host sets non-zero from another stream while the graph runs and clears
before the next replay; no kernel writes it.
``loop_start`` runs before the node, ``loop_pass`` at the end of every pass
(``*_do_while`` for a loop without a flag, ``loop_pass_unrolled`` at the end
of every copy of an unrolled body): counting, the cap and the cancel request
cost no kernel of their own, one load and compare in a kernel that runs anyway.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..runtime.backend import get as get_backend
from ._dependency import GRID_DEPENDENCY, wait_for_prior_grids
from ._target import device_function

__all__ = [
    "MAX_UNROLL", "STOPPED_AT_CAP", "STOPPED_BY_CANCEL", "loop_pass", "loop_pass_do_while", "loop_pass_unrolled",
    "loop_recheck", "loop_start", "loop_start_do_while", "pass_end", "set_from_flag", "set_from_index", "set_node",
]  # fmt: skip


STOPPED_AT_CAP, STOPPED_BY_CANCEL = 1, 2


def _one_thread_kernel(name: str, body):
    body.__qualname__ = f"conditional.{name}"
    kernel = cuda.jit(body)
    # Each begins with wait_for_prior_grids(): the edge into it may then be programmatic
    # (runtime/backend/driver_overlap.py), its launch overlapping the drain of the kernel before.
    kernel.tp_waits_for_prior_grids = GRID_DEPENDENCY
    if "cancel" in body.__code__.co_varnames[: body.__code__.co_argcount]:
        kernel.tp_polled = frozenset({"cancel"})  # read while cancel() may write it, on purpose (the hazard check)
    return kernel


@functools.cache
def set_from_flag():
    """``(handle, flag)``: the node runs (again) iff ``flag[0]``."""
    setter = get_backend().conditional_setter()

    def set_conditional_from_flag(handle, flag):
        wait_for_prior_grids()
        if cuda.grid(1) == 0:
            setter(handle, np.uint32(1 if flag[0] != 0 else 0))

    return _one_thread_kernel("set_from_flag", set_conditional_from_flag)


@functools.cache
def set_from_index():
    """``(handle, index, n)``: a switch runs body ``index[0]``; an index outside
    ``[0, n)`` (negative, or too large for 32 bits) runs none."""
    setter = get_backend().conditional_setter()

    def set_conditional_from_index(handle, index, n):
        wait_for_prior_grids()
        if cuda.grid(1) == 0:
            i = index[0]
            setter(handle, np.uint32(i) if i >= 0 and i < n else np.uint32(n))

    return _one_thread_kernel("set_from_index", set_conditional_from_index)


@functools.cache
def loop_start():
    """``(handle, flag, counter, cancel, max_iters)`` before a while node: zero its
    counter; the first pass runs iff ``flag[0]`` and the cap allows one."""
    setter = get_backend().conditional_setter()

    def start_loop(handle, flag, counter, cancel, max_iters):
        wait_for_prior_grids()
        if cuda.grid(1) == 0:
            go = flag[0] != 0  # both loads before any store: neither waits for the other
            cancelled = cancel[0] != 0
            counter[0] = 0
            counter[1] = 0
            counter[2] = 0
            if go and cancelled:
                go = False
                counter[1] = 2
            elif go and max_iters <= 0:
                go = False
                counter[1] = 1
            setter(handle, np.uint32(1 if go else 0))

    return _one_thread_kernel("loop_start", start_loop)


@functools.cache
def loop_start_do_while():
    """``(handle, counter, cancel, max_iters)`` before a do-while node: zero its counter;
    the first pass runs unless the cap is 0."""
    setter = get_backend().conditional_setter()

    def start_do_while(handle, counter, cancel, max_iters):
        wait_for_prior_grids()
        if cuda.grid(1) == 0:
            counter[0] = 0
            counter[1] = 2 if cancel[0] != 0 else 1 if max_iters <= 0 else 0
            setter(handle, np.uint32(1 if counter[1] == 0 else 0))

    return _one_thread_kernel("loop_start_do_while", start_do_while)


@functools.cache
def pass_end():
    """The device function ``(handle, go, counter, cancel, max_iters, new_pass)``
    that ends a while node's pass on one thread: count it (``new_pass`` 1; 0
    where a kernel before counted it already), and loop again iff ``go`` and
    neither the cap is reached nor a cancel requested (then mark why it
    stopped). ``loop_pass`` calls it, and so does a fused kernel of
    ``tp.compile`` that computes a loop's flag as the last work of its pass."""
    setter = get_backend().conditional_setter()

    def end_pass(handle, go, counter, cancel, max_iters, new_pass):
        cancelled = cancel[0] != 0  # the loads first, together: none waits for another or for a store
        passes = counter[0] + new_pass
        counter[0] = passes
        stopped = 0
        if go and cancelled:
            go, stopped = False, 2
        elif go and passes >= max_iters:
            go, stopped = False, 1
        if stopped != 0 or new_pass == 0:  # a second look undoes what the first marked
            counter[1] = stopped
        setter(handle, np.uint32(1 if go else 0))

    return device_function(end_pass)


@functools.cache
def set_node():
    """The device function ``(handle, value, cases)`` by which a fused kernel of
    ``tp.compile`` whose tail computes a conditional node's flag or index sets
    the handle of that node, captured right after it (``cuda/conditional.py``,
    ``_set_by_last_kernel``): an if node's (``cases`` 0) from ``value``'s truth,
    a switch's of ``cases`` bodies as ``set_from_index`` would."""
    setter = get_backend().conditional_setter()

    def set_node_handle(handle, value, cases):
        if cases == 0:
            setter(handle, np.uint32(1 if value != 0 else 0))
        else:
            setter(handle, np.uint32(value) if value >= 0 and value < cases else np.uint32(cases))

    return device_function(set_node_handle)


def _flag_pass_kernel(name: str, new_pass: int):
    finish = pass_end()

    def end_flag_pass(handle, flag, counter, cancel, max_iters):
        wait_for_prior_grids()
        if cuda.grid(1) == 0:
            finish(handle, flag[0] != 0, counter, cancel, max_iters, new_pass)

    return _one_thread_kernel(name, end_flag_pass)


@functools.cache
def loop_pass():
    """``(handle, flag, counter, cancel, max_iters)`` at the end of a pass: count it;
    loop again iff ``flag[0]`` and the cap is not reached (then mark the cap hit)."""
    return _flag_pass_kernel("loop_pass", 1)


@functools.cache
def loop_recheck():
    """``loop_pass`` for a pass that a fused kernel counted and ended already
    (``pass_end``) when more work followed it in the body: set the handle again
    from the flag as it is now, without counting the pass twice."""
    return _flag_pass_kernel("loop_recheck", 0)


MAX_UNROLL = 8  # copies of a while body per driver pass


@functools.cache
def loop_pass_unrolled():
    """``(flag, counter, cancel, cap, k, h0, h1, ..., h7)`` at the end of each of the k
    copies of an unrolled while body: ``h0`` is the while node's handle, ``h1``
    to ``h(k-1)`` the if nodes' around copies 2 to k. Counts the pass as
    ``loop_pass`` does; ``counter[2]`` is the copy running. While the loop goes
    on, the next copy's if node runs; once it stops (or after the last copy),
    the later copies' if nodes are switched off and the while handle says
    whether another driver pass runs."""
    setter = get_backend().conditional_setter()

    @device_function
    def set_copy(m, value, h1, h2, h3, h4, h5, h6, h7):
        if m == 1:
            setter(h1, value)
        elif m == 2:
            setter(h2, value)
        elif m == 3:
            setter(h3, value)
        elif m == 4:
            setter(h4, value)
        elif m == 5:
            setter(h5, value)
        elif m == 6:
            setter(h6, value)
        elif m == 7:
            setter(h7, value)

    def end_copy(flag, counter, cancel, cap, k, h0, h1, h2, h3, h4, h5, h6, h7):
        wait_for_prior_grids()
        if cuda.grid(1) == 0:
            go = flag[0] != 0  # the loads first, together
            cancelled = cancel[0] != 0
            passes = counter[0] + 1
            counter[0] = passes
            if go and cancelled:
                go = False
                counter[1] = 2
            elif go and passes >= cap:
                go = False
                counter[1] = 1
            j = counter[2] + 1  # the next copy
            if go and j < k:
                set_copy(j, np.uint32(1), h1, h2, h3, h4, h5, h6, h7)
                counter[2] = j
            else:
                for m in range(j, k):
                    set_copy(m, np.uint32(0), h1, h2, h3, h4, h5, h6, h7)
                setter(h0, np.uint32(1 if go else 0))
                counter[2] = 0

    return _one_thread_kernel("loop_pass_unrolled", end_copy)


@functools.cache
def loop_pass_do_while():
    """``(handle, counter, cancel, max_iters)`` at the end of a do-while's pass, after
    the user's kernels: count it; at the cap or on a cancel request, stop the
    loop whatever they set."""
    setter = get_backend().conditional_setter()

    def end_do_while_pass(handle, counter, cancel, max_iters):
        wait_for_prior_grids()
        if cuda.grid(1) == 0:
            cancelled = cancel[0] != 0  # loaded with the counter, before the store
            passes = counter[0] + 1
            counter[0] = passes
            if cancelled:
                counter[1] = 2
                setter(handle, np.uint32(0))
            elif passes >= max_iters:
                counter[1] = 1
                setter(handle, np.uint32(0))

    return _one_thread_kernel("loop_pass_do_while", end_do_while_pass)
