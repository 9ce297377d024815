"""Conditional nodes in a capture: if, if/else, switch and while, as the driver has them.

A ``CUDAGraph`` keeps the nodes being captured as a stack, innermost last. To
open one, a one-thread kernel on the stream below sets the node's handle (from
a flag, an index, or a loop's start), the backend adds the node with its
bodies, and a stream of its own captures into the first body, made current.
``next_body`` moves the capture to the next body (else, the next case);
``close`` ends it and makes the stream below current again.

A while node always has a counter (three int64 from the graph's pool, held by
its ``Loop``; ``reset()`` lets go of them, and refuses while you hold
``loop.iterations``, as for any tensor of the capture): the passes of its last
run, and why it stopped (its cap, or ``CUDAGraph.cancel``). It reads the
graph's cancel request (see ``kernels/conditional.py``). Its start and
end-of-pass kernels keep the counter, so counting, ``max_iters`` and
cancelling add no kernel to a pass of a loop with a flag. A do-while (no flag: the user's kernels call
``set_conditional``) gets one end-of-pass kernel, after the user's, which stops
it at its cap or when cancelled.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import numpy as np

from .. import _dtype as dt
from .._export import hold_for_graph
from .._factories import empty
from .._tensor import Tensor
from ..kernels import conditional as ck
from ..runtime.backend import get as get_backend
from ..runtime.capture import capture_state, flush_fused
from ..runtime.launch import ArrayArg, KernelArray, launch_with, launcher_for, pointer_key, relaunched, resolve
from ..runtime.memory import allocator
from ..runtime.streams import Stream, current_stream, set_stream

__all__ = ["Branch", "Cases", "Loop", "OpenNode", "close", "forget", "next_body", "open_node"]

NO_CAP = 1 << 62  # max_iters=None: a cap no loop reaches
_BODIES = {"if": 1, "while": 1, "if_else": 2}  # a switch has n
_ONE = ((1, 1, 1), (1, 1, 1))  # the launch shape of the setter kernels
_BYTES = {"bool": "uint8"}  # a flag goes as a pointer to its byte: the GPU target cannot load through a bool pointer


class Handle:
    """A conditional node's handle, accepted as a kernel argument wherever one is
    (``tp.cuda.set_conditional(handle, value)`` inside your kernel).

    ``CUDAGraph.conditional_handle()`` makes one before its node, for your
    kernels to set; ``owner`` then says where it may open a node (the graph,
    its capture and the stream of the level it was made at) until one does."""

    __slots__ = ("conditional_handle", "owner")

    def __init__(self, handle: int, owner: tuple | None = None) -> None:
        self.conditional_handle = np.uint64(handle)
        self.owner = owner

    def __int__(self) -> int:
        return int(self.conditional_handle)

    __index__ = __int__

    def __repr__(self) -> str:
        return f"<tensorplay.cuda.{type(self).__name__} handle={int(self):#x}>"


class Loop(Handle):
    """What ``with g.while_(...) as loop`` gives: the node's handle, and after a
    replay (synchronised) ``loop.iterations``, a one-element int64 device tensor
    holding the passes of the loop's last run, ``loop.hit_limit``, True when
    that run stopped at ``max_iters`` with the condition still true (for a
    do-while: when it ran ``max_iters`` passes), and ``loop.cancelled``, True
    when ``CUDAGraph.cancel`` (or Ctrl-C) stopped it. A replay that does not
    reach the loop (an if around it did not run) leaves them as they were."""

    __slots__ = ("cancel", "counter", "max_iters")

    def __init__(self, handle: int, counter: Tensor | None, max_iters: int | None, cancel: int) -> None:
        super().__init__(handle)
        self.counter, self.max_iters = counter, max_iters
        self.cancel = cancel  # the address of its graph's cancel request

    @property
    def iterations(self) -> Tensor | None:
        """The passes of the last replay (None once the graph is reset)."""
        return None if self.counter is None else self.counter[:1]

    @property
    def hit_limit(self) -> bool:
        """True when the last replay stopped this loop at its cap (reads the device: synchronise first)."""
        return self._stopped() == ck.STOPPED_AT_CAP

    @property
    def cancelled(self) -> bool:
        """True when the last replay's loop was stopped by a cancel (reads the device: synchronise first)."""
        return self._stopped() == ck.STOPPED_BY_CANCEL

    def _stopped(self) -> int:
        return 0 if self.counter is None else int(self.counter[1].item())

    def __repr__(self) -> str:
        cap = "" if self.max_iters is None else f", max_iters={self.max_iters}"
        return f"<tensorplay.cuda.Loop handle={int(self):#x}{cap}>"


class Branch(Handle):
    """What ``with g.if_else(pred) as branch`` gives: ``branch.else_()`` ends the
    then-body and captures what follows into the else-body."""

    __slots__ = ("_next",)

    def __init__(self, handle: int, next_body) -> None:
        super().__init__(handle)
        self._next = next_body

    def else_(self) -> None:
        self._next()


class Cases(Handle):
    """What ``with g.switch_(index, n) as cases`` gives: the capture starts in
    case 0; ``cases.next()`` moves it to the next case. Every case must be opened."""

    __slots__ = ("_next", "n")

    def __init__(self, handle: int, n: int, next_body) -> None:
        super().__init__(handle)
        self.n, self._next = n, next_body

    def next(self) -> None:
        self._next()


@dataclass(eq=False, slots=True)
class OpenNode:
    """A conditional node being captured."""

    kind: str  # "if", "if_else", "switch" or "while"
    handle: int
    pred: Tensor | Handle | None  # the flag (if, if/else, while), the index (switch), None (a do-while),
    # or a Handle your kernels set (if, if/else, switch)
    bodies: tuple  # the backend's body graphs
    body: Stream  # the stream capturing the current body
    previous: Stream  # the stream current before the node opened
    index: int = 0  # the body being captured
    loop: Loop | None = None
    copies: list = field(default_factory=list)  # an unrolled loop's if nodes' handles, around copies 2 to k
    ended_at: int | None = None  # the body's nodes when a fused kernel ended the pass (``pass_ended``)
    parent: OpenNode | None = None  # the open node whose body holds this one
    # Nodes of the current body (since the pass ended, for a loop whose pass a kernel ended) that
    # tensorplay's own doors captured, and so knows what they touch: ``launched``, and clean nodes.
    known: int = 0
    clean: bool = True  # every node of its bodies so far is known
    flag_touched: bool = False  # a known node after the pass ended may write the loop's flag
    # what the user calls to open the next body, and what closes the node, for the errors' sentences
    words: tuple[str, str] = ("begin_capture_to_next_conditional_body()", "end_capture_to_conditional_node()")

    def pass_end_args(self) -> list:
        """What a kernel that ends this while node's pass (``kernels/conditional.pass_end``)
        takes after its own arguments: the handle, the counter, the cancel request, the cap."""
        return [np.uint64(self.handle), *_loop_args(self.loop), _cap(self.loop)]

    def pass_ended(self) -> None:
        """A kernel just captured into the body ends the pass: unless more work
        follows it there that may write the flag, the pass needs no kernel of
        its own (``_end_pass``)."""
        self.ended_at = get_backend().graph_node_count(self.bodies[0])
        self.known = 0

    def launched(self, pointers) -> None:
        """A kernel was captured into the current body through tensorplay's launch
        doors (``runtime/launch.py``); ``pointers()`` gives the addresses among
        its parameters. Where one points into the flag of a loop around it whose
        pass a kernel ended, that loop must set its handle again at the pass's end."""
        self.known += 1
        node, ptrs = self, None
        while node is not None:
            if node.ended_at is not None and not node.flag_touched:
                ptrs = pointers() if ptrs is None else ptrs
                lo = node.pred._storage.ptr
                node.flag_touched = any(lo <= p < lo + node.pred._storage.nbytes for p in ptrs)
            node = node.parent


def check_flag(pred) -> None:
    if not isinstance(pred, Tensor):
        raise TypeError(f"expected a one-element bool device tensor as predicate, got {type(pred).__name__}")
    if pred.dtype is not dt.bool:
        raise TypeError(f"expected a bool tensor as predicate, got {pred.dtype}; compare first, e.g. x > 0")
    if pred.numel() != 1:
        raise ValueError(f"expected a one-element predicate, got shape {pred.shape}")


def check_switch(index, n) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n < 1 << 32:
        raise ValueError(f"expected the number of switch cases as an int from 1 to 2**32 - 1, got {n!r}")
    if isinstance(index, Handle):
        return
    if not isinstance(index, Tensor):
        raise TypeError(
            f"expected a one-element int32 or int64 device tensor as switch index, got {type(index).__name__}"
        )
    if index.dtype not in (dt.int32, dt.int64):
        raise TypeError(f"expected an int32 or int64 tensor as switch index, got {index.dtype}; convert with .long()")
    if index.numel() != 1:
        raise ValueError(f"expected a one-element switch index, got shape {index.shape}")


def check_handle(handle: Handle, kind: str, owner: tuple) -> None:
    """A handle from ``conditional_handle()`` may open one if, if/else or switch
    node, at the level of the capture it was made at."""
    if kind == "while":
        raise TypeError(
            "a while node takes a flag, or nothing for a do-while whose kernels set the loop's own handle "
            "(with g.while_() as loop: ... tp.cuda.set_conditional(loop, 1)); not a handle made before it"
        )
    if handle.owner is None:
        raise ValueError(
            f"{handle!r} already belongs to a node; a handle drives one node: make another with g.conditional_handle()"
        )
    if handle.owner[:2] != owner[:2]:
        raise ValueError(f"{handle!r} was made by another graph or an earlier capture; make it in this capture")
    if handle.owner[2] is not owner[2]:
        raise ValueError(
            f"{handle!r} was made at another level of the capture (inside or outside a conditional body) than "
            "this node; make it with g.conditional_handle() in the body where the node opens"
        )


def check_loop(pred, max_iters, unroll) -> None:
    if max_iters is not None and (
        isinstance(max_iters, bool) or not isinstance(max_iters, (int, np.integer)) or not 0 <= max_iters < NO_CAP
    ):
        raise ValueError(f"expected max_iters as None or an int from 0 to 2**62 - 1, got {max_iters!r}")
    if isinstance(unroll, bool) or not isinstance(unroll, (int, np.integer)) or not 1 <= unroll <= ck.MAX_UNROLL:
        raise ValueError(f"expected unroll as an int from 1 to {ck.MAX_UNROLL}, got {unroll!r}")
    if unroll > 1 and pred is None:
        raise ValueError(
            "unroll needs a flag: a do-while's kernels set the loop's own handle, which the later copies "
            "of the body cannot follow; pass the flag (g.while_(flag, unroll=k))"
        )


def new_counter() -> Tensor:
    """Three int64 from the capture's pool, as any tensor made in the capture
    (allocated on the current stream, which the capture routes there)."""
    return empty(3, dtype=dt.int64)


def open_node(
    outer: Stream, kind: str, pred, size: int, mode: str, route, loop: Loop | None, unroll: int = 1
) -> OpenNode:
    """Open a node of ``kind`` after ``outer``'s work and make its first body's
    stream current. ``route(stream)`` sends a body's allocations to the capture's
    pool. A loop with ``unroll`` k gets k - 1 more handles, for the if nodes
    around the copies of its body that ``close`` adds."""
    _flush_fused()  # ops tp.compile holds back come before the node (and may be the kernel that sets it)
    dev = get_backend()
    if isinstance(pred, Handle):  # made before the node, set by the user's kernels
        handle, pred.owner = int(pred), None
    else:
        handle = dev.conditional_handle(outer._h)
        if kind == "while" or not _set_by_last_kernel(handle, pred, size if kind == "switch" else 0, outer):
            _start(kind, handle, pred, size, loop, outer)
    if loop is not None:
        loop.conditional_handle = np.uint64(handle)
    bodies = dev.conditional_add(outer._h, handle, kind, size)
    # An unrolled body is captured into a graph of its own, which close() copies
    # into the while body k times (the driver copies a plain graph, not a body).
    target = bodies[0] if unroll == 1 else dev.graph_create()
    body = Stream._wrap(dev.conditional_body_capture(target, mode))
    route(body)
    copies = [dev.conditional_handle_in(bodies[0]) for _ in range(unroll - 1)]
    parent = capture_state.bodies.get(outer.handle)
    node = OpenNode(kind, handle, pred, bodies, body, current_stream(), loop=loop, copies=copies, parent=parent)
    if kind == "while" and isinstance(pred, Tensor) and not copies:
        capture_state.loops[body.handle] = node
    capture_state.bodies[body.handle] = node
    set_stream(body)
    return node


def body_count(kind: str, n: int | None = None) -> int:
    return n if kind == "switch" else _BODIES[kind]


def next_body(node: OpenNode, mode: str, route) -> None:
    """End the capture of the node's current body and begin the next one's."""
    _flush_fused()  # the ops tp.compile holds back belong to this body
    capture_state.bodies.pop(node.body.handle, None)
    _check_known(node)
    _end_body(node)
    node.index += 1
    node.body = Stream._wrap(get_backend().conditional_body_capture(node.bodies[node.index], mode))
    route(node.body)
    capture_state.bodies[node.body.handle] = node
    set_stream(node.body)


def close(node: OpenNode) -> None:
    """End the node's last body (a loop's end-of-pass kernel first; for an
    unrolled loop, then its copies) and make the stream below current."""
    _flush_fused()  # the ops tp.compile holds back belong to the last body (and may end a loop's pass)
    forget(node)
    try:
        if node.kind == "while":
            _end_pass(node)
    finally:
        set_stream(node.previous)
        if node.copies:
            allocator.route_to_pool(node.body, None)
            get_backend().conditional_repeat(node.body._h, node.bodies[0], node.copies)
        else:
            _check_known(node)
            _end_body(node)
    if node.parent is not None and node.clean and node.kind != "while":
        node.parent.known += 1  # the node itself: what its bodies touch is known


def forget(node: OpenNode) -> None:
    """The node's body takes no more work: no kernel may end its pass from now on."""
    capture_state.loops.pop(node.body.handle, None)
    capture_state.bodies.pop(node.body.handle, None)


def _check_known(node: OpenNode) -> None:
    """At the end of a body: it is clean if tensorplay captured every node in it."""
    if node.ended_at is None and get_backend().graph_node_count(node.bodies[node.index]) != node.known:
        node.clean = False
    node.known = 0


def unshared_counter_blocks(loops) -> set[int]:
    """The ids of the allocator blocks of ``loops``' counters that nothing but
    the loops holds (no ``loop.iterations`` view of yours): ``reset()`` may let
    go of those. A counter's storage is referenced by its tensor, and by any
    view of it."""
    own = set()
    for loop in loops:
        if loop.counter is not None and sys.getrefcount(loop.counter._storage) <= 2:  # its tensor, and the call
            own.add(id(loop.counter._storage.block))
    return own


def _launch(kernel, args: list, stream: Stream) -> None:
    """Launch a one-thread kernel with its arrays as element pointers: 8 bytes of
    parameters where an array takes 56, which a loop's kernels, launched at
    every pass, would pay at every pass (0.07 us an array on the H200)."""
    keys = [pointer_key(_BYTES.get(a._kkey[0], a._kkey[0])) if isinstance(a, KernelArray) else type(a) for a in args]
    launch_with(resolve(kernel, keys), *_ONE, args, stream)


def _int64s(address: int, n: int) -> ArrayArg:
    """``n`` int64 as a kernel argument by address only: a recorded graph must
    not keep a loop's counter alive past ``reset()``, which lets go of it."""
    return ArrayArg(address, (n,), (8,), "int64", 8, True)


def _loop_args(loop: Loop) -> list:
    """A loop kernel's counter and cancel-request arguments."""
    return [_int64s(loop.counter.data_ptr(), 3), _int64s(loop.cancel, 1)]


def set_from_flag(handle: int, pred: Tensor, stream: Stream) -> None:
    _launch(ck.set_from_flag(), [np.uint64(handle), pred.reshape(1)._flat()], stream)


def set_condition(node: OpenNode, pred: Tensor) -> None:
    """``set_conditional_handle_for_current_node(pred)``: the graph keeps ``pred``
    alive. An if or switch node's handle is set from it now; a while node's
    end-of-pass kernel reads it instead, which also caps the loop and stops it
    when cancelled (a kernel here would leave a pass ended by a fused kernel
    without them)."""
    hold_for_graph(node.body, [pred])
    if node.kind == "while":
        node.pred, node.flag_touched = pred, True
    else:
        set_from_flag(node.handle, pred, node.body)


def _flush_fused() -> None:
    if capture_state.fusers:
        flush_fused()


def _end_body(node: OpenNode) -> None:
    allocator.route_to_pool(node.body, None)
    get_backend().conditional_end(node.body._h)


def _cap(loop: Loop) -> np.int64:
    return np.int64(NO_CAP if loop.max_iters is None else loop.max_iters)


def _start(kind: str, handle: int, pred, size: int, loop: Loop | None, stream: Stream) -> None:
    """The kernel before the node: it sets the handle (and zeroes a loop's counter).
    The graph keeps the flag or index alive: its kernels read it at every replay."""
    h = np.uint64(handle)
    if isinstance(pred, Tensor):
        hold_for_graph(stream, [pred])
    if kind == "switch":
        _launch(ck.set_from_index(), [h, pred.reshape(1)._flat(), np.int64(size)], stream)
    elif kind != "while":
        set_from_flag(handle, pred, stream)
    else:
        cap = _cap(loop)
        if pred is None:
            _launch(ck.loop_start_do_while(), [h, *_loop_args(loop), cap], stream)
        else:
            _launch(ck.loop_start(), [h, pred.reshape(1)._flat(), *_loop_args(loop), cap], stream)


def _set_by_last_kernel(handle: int, pred: Tensor, cases: int, stream: Stream) -> bool:
    """True when the work captured last on ``stream`` is a fused kernel of
    ``tp.compile`` that computes the flag or index ``pred`` in its tail
    (``capture_state.branch_kernels``): its node then becomes the same kernel
    setting the handle too (of an if node where ``cases`` is 0, else of a switch
    of ``cases`` bodies), and the node needs no kernel of its own before it."""
    last = capture_state.branch_kernels.pop(stream.handle, None)
    step, dtype = last.flags.get(pred._ptr, (None, None)) if last is not None else (None, None)
    dev = get_backend()
    if dtype is not pred.dtype or dev.sole_captured_node(stream._h) != last.node:
        return False
    args = [*last.args, np.uint64(handle)]
    launcher = launcher_for(last.setting(step, cases), args)
    dev.set_captured_kernel(last.node, launcher, last.grid, last.block, args)
    relaunched(stream, last.node, launcher)
    hold_for_graph(stream, [pred])
    return True


def _end_pass(node: OpenNode) -> None:
    """The kernel at the end of a while node's pass: count it, cap it, set whether
    another runs. None where a fused kernel did that as the body's last work; where
    work followed it, one that sets the handle again from the flag as it is now."""
    after = None if node.ended_at is None else get_backend().graph_node_count(node.bodies[0]) - node.ended_at
    if after is not None and after == node.known and not node.flag_touched:
        return  # nothing after the kernel that ended the pass may have written the flag
    loop = node.loop
    h, cap = np.uint64(node.handle), _cap(loop)
    if node.copies:
        handles = [np.uint64(c) for c in node.copies] + [np.uint64(0)] * (ck.MAX_UNROLL - 1 - len(node.copies))
        k = np.int64(len(node.copies) + 1)
        flag = node.pred.reshape(1)._flat()
        _launch(ck.loop_pass_unrolled(), [flag, *_loop_args(loop), cap, k, h, *handles], node.body)
    elif node.pred is None:
        _launch(ck.loop_pass_do_while(), [h, *_loop_args(loop), cap], node.body)
    else:
        kernel = ck.loop_pass() if node.ended_at is None else ck.loop_recheck()
        _launch(kernel, [h, node.pred.reshape(1)._flat(), *_loop_args(loop), cap], node.body)
