"""``CUDAGraph``'s conditional-node methods: if, if/else, switch and while, low
level (``begin_capture_to_*_node``) and as context managers (``g.if_``,
``g.if_else``, ``g.switch_``, ``g.while_``). The node machinery they drive is
``cuda/conditional.py``; this class holds what the graph's capture state
(stream, pool, mode, open nodes, loops) adds to it, and is ``CUDAGraph``'s base.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import numpy as np

from ..runtime.backend import get as get_backend
from ..runtime.memory import allocator
from ..runtime.streams import Stream, current_stream
from . import conditional
from .capture_thread import refuse_other_thread
from .conditional import Branch, Cases, Handle, Loop

__all__ = ["ConditionalNodes"]


class ConditionalNodes:
    """The conditional nodes of a capture (mixed into ``CUDAGraph``, whose
    ``capture_begin`` sets the state read here and whose ``_abort_capture``
    discards it)."""

    def conditional_handle(self, default: int = 0) -> Handle:
        """A handle for an if, if/else or switch node opened later at this point
        of the capture (``begin_capture_to_switch_node(handle, n)``,
        ``g.switch_(handle, n)``, ``g.if_(handle)``...), set by your own kernels
        launched before it: ``tp.cuda.set_conditional(handle, value)``. Each
        replay starts it at ``default`` (an if runs iff it is not 0; a switch
        runs case ``value``, none when it is ``n`` or more). No kernel of
        tensorplay's sets it, so the node costs no setter kernel.

        Examples
        --------
        >>> import numpy as np
        >>> import tensorplay as tp
        >>> @tp.jit
        ... def choose(handle, x):
        ...     if tp.cuda.grid(1) == 0:
        ...         tp.cuda.set_conditional(handle, np.uint32(1 if x[0] > 0 else 0))
        >>> x = tp.tensor([5.0])
        >>> g = tp.cuda.CUDAGraph()
        >>> with tp.cuda.graph(g):
        ...     case = g.conditional_handle()
        ...     choose[1, 1](case, x)
        ...     with g.switch_(case, 2) as cases:
        ...         _ = x.mul_(-1.0)  # case 0: x <= 0
        ...         cases.next()
        ...         _ = x.sub_(1.0)  # case 1: x > 0
        >>> g.replay()
        >>> x.item()
        4.0
        """
        if self._stream is None:
            raise RuntimeError("conditional_handle() needs a capture in progress")
        self._on_own_thread("conditional_handle()")
        if isinstance(default, bool) or not isinstance(default, (int, np.integer)) or not 0 <= default < 1 << 32:
            self._refuse(ValueError, f"expected the default as an int from 0 to 2**32 - 1, got {default!r}")
        outer = self._level()
        handle = Handle(get_backend().conditional_handle(outer._h, int(default)), self._owner())
        self._handles.append(handle)
        return handle

    def begin_capture_to_if_node(self, pred) -> None:
        """Capture what follows into the body of an if node, run at replay iff
        ``pred`` (a one-element bool device tensor, or a handle from
        ``conditional_handle()`` that your kernel set) is true at that point."""
        self._open_node("if", pred)

    def begin_capture_to_if_else_node(self, pred) -> None:
        """Capture what follows into the then-body of an if/else node (one driver
        node, CUDA 12.8 or newer); ``begin_capture_to_next_conditional_body()``
        moves the capture to the else-body, run at replay iff ``pred`` is false."""
        self._open_node("if_else", pred)

    def begin_capture_to_switch_node(self, index, n: int) -> None:
        """Capture what follows into case 0 of a switch node of ``n`` cases (CUDA
        12.8 or newer): at replay it runs case ``index[0]`` (``index``: a
        one-element int32 or int64 device tensor), or none when it is outside
        ``[0, n)``; ``index`` may instead be a handle from ``conditional_handle()``
        that your kernel set. Open the next case with ``begin_capture_to_next_conditional_body()``."""
        self._open_node("switch", index, n)

    def begin_capture_to_while_node(self, pred, max_iters: int | None = None, unroll: int = 1) -> Loop:
        """Capture what follows into the body of a while node: at replay the body
        runs while ``pred`` is true, sampled before the node and after every pass,
        and at most ``max_iters`` times. With ``unroll`` k (at most 8), each driver
        pass runs k copies of the body, each later one skipped on the device once
        the condition fails: the same results, less of the driver's per-pass cost.
        Returns the ``Loop`` (its counter)."""
        return self._open_node("while", pred, max_iters=max_iters, unroll=unroll)

    def begin_capture_to_next_conditional_body(self) -> None:
        """End the innermost node's current body and capture into its next one
        (an if/else's else-body, a switch's next case)."""
        node = self._innermost("begin_capture_to_next_conditional_body()")
        if node.index + 1 >= len(node.bodies):
            what = "its else-body" if node.kind == "if_else" else f"the last of its {len(node.bodies)} cases"
            opens, closes = node.words
            self._refuse(
                RuntimeError,
                f"{opens} on a{'n' if node.kind[0] == 'i' else ''} {node.kind.replace('_', '/')} node already "
                f"capturing {what if node.index else 'its only body'}; close it with {closes}",
            )
        conditional.next_body(node, self._mode, self._route)

    def end_capture_to_conditional_node(self) -> None:
        """Close the innermost open conditional node (every body of it opened)."""
        node = self._innermost("end_capture_to_conditional_node()")
        if node.index + 1 < len(node.bodies):
            left = len(node.bodies) - node.index - 1
            opens, closes = node.words
            self._refuse(
                RuntimeError,
                f"{closes} with {left} of the {node.kind.replace('_', '/')} node's {len(node.bodies)} bodies "
                f"never opened; open each with {opens}"
                + (" (use an if node, g.if_(flag), for an if without else)" if node.kind == "if_else" else ""),
            )
        self._open.pop()
        conditional.close(node)

    def set_conditional_handle_for_current_node(self, pred) -> None:
        """Set the innermost open node's condition from ``pred`` at this point of
        its body (a while node loops again iff it is true at the end of a pass)."""
        self._on_own_thread("set_conditional_handle_for_current_node()")
        if not self._open:
            raise RuntimeError("set_conditional_handle_for_current_node() needs an open conditional node")
        self._checked(conditional.check_flag, pred)
        node = self._open[-1]
        conditional.set_condition(node, pred)

    @contextmanager
    def if_(self, pred):
        """``with g.if_(flag) as handle:`` captures the body of an if node."""
        self._need_capture("g.if_()")
        self.begin_capture_to_if_node(pred)
        with self._block("g.if_()") as node:
            yield np.uint64(node.handle)

    @contextmanager
    def if_else(self, pred):
        """``with g.if_else(flag) as branch:`` captures the then-body of an if/else
        node; after ``branch.else_()``, the else-body.

        Examples
        --------
        >>> import tensorplay as tp
        >>> flag, x = tp.tensor([False]), tp.zeros(1)
        >>> g = tp.cuda.CUDAGraph()
        >>> with tp.cuda.graph(g):
        ...     with g.if_else(flag) as branch:
        ...         _ = x.add_(1.0)
        ...         branch.else_()
        ...         _ = x.sub_(1.0)
        >>> g.replay()
        >>> x.item()
        -1.0
        """
        self._need_capture("g.if_else()")
        self.begin_capture_to_if_else_node(pred)
        with self._block("g.if_else()") as node:
            node.words = ("branch.else_()", "the end of the `with g.if_else(...)` block")
            yield Branch(node.handle, lambda: self._next_body_of(node, "branch.else_()"))

    @contextmanager
    def switch_(self, index, n: int):
        """``with g.switch_(index, n) as cases:`` captures case 0 of a switch node;
        ``cases.next()`` moves to the next case. At replay case ``index[0]`` runs
        (none when it is outside ``[0, n)``); a kernel may set the value itself with
        ``tp.cuda.set_conditional(cases, value)``.

        Examples
        --------
        >>> import tensorplay as tp
        >>> index, x = tp.tensor([2]), tp.zeros(1)
        >>> g = tp.cuda.CUDAGraph()
        >>> with tp.cuda.graph(g):
        ...     with g.switch_(index, 3) as cases:
        ...         _ = x.add_(1.0)
        ...         cases.next()
        ...         _ = x.add_(10.0)
        ...         cases.next()
        ...         _ = x.add_(100.0)
        >>> g.replay()
        >>> x.item()
        100.0
        """
        self._need_capture("g.switch_()")
        self.begin_capture_to_switch_node(index, n)
        with self._block("g.switch_()") as node:
            node.words = ("cases.next()", f"the end of the `with g.switch_(index, {n})` block")
            yield Cases(node.handle, n, lambda: self._next_body_of(node, "cases.next()"))

    @contextmanager
    def while_(self, pred=None, max_iters: int | None = None, unroll: int = 1):
        """``with g.while_(flag) as loop:`` captures a loop body run while ``flag``
        holds; update ``flag`` inside the body (``tp.gt(residual, tol, out=flag)``).

        ``max_iters`` caps the passes of a replay: the loop stops after that
        many even if ``flag`` still holds. ``unroll=k`` (up to 8; needs a flag,
        and a body without conditional nodes) runs k copies of the body per
        driver pass, copies 2 to k each in an if node that the device switches
        off once ``flag`` fails. Measure before you use it: on an H200 (driver
        580) an if node costs more than the while node's re-launch it saves,
        so unroll=1 was the fastest (``benchmarks/conditional_kinds.py``). After a replay (synchronised),
        ``loop.iterations`` holds its passes and ``loop.hit_limit`` says whether
        it stopped at the cap; ``g.hit_limits()`` lists the loops that did.

        With no ``flag`` the loop is a do-while driven by your own kernels: the
        body runs once, then again while a kernel of the last pass called
        ``tp.cuda.set_conditional(loop, 1)``; one kernel of tensorplay's ends
        each pass (it stops the loop at its cap, or when cancelled).
        ``g.cancel()``, or Ctrl-C during a wait, stops every loop of the graph
        at its next pass; ``g.cancelled()`` lists the loops it stopped.

        Examples
        --------
        >>> import tensorplay as tp
        >>> n, flag, total = tp.tensor([4]), tp.tensor([True]), tp.zeros(1)
        >>> g = tp.cuda.CUDAGraph()
        >>> with tp.cuda.graph(g):
        ...     with g.while_(flag, max_iters=100) as loop:
        ...         _ = total.add_(n)
        ...         _ = n.sub_(1)
        ...         _ = tp.gt(n, 0, out=flag)
        >>> g.replay()
        >>> total.item(), loop.iterations.item(), loop.hit_limit
        (10.0, 4, False)
        """
        self._need_capture("g.while_()")
        loop = self.begin_capture_to_while_node(pred, max_iters, unroll)
        with self._block("g.while_()"):
            yield loop

    def hit_limits(self) -> list[Loop]:
        """The while loops whose last replay stopped at their ``max_iters`` (reads
        the device: synchronise the replay's stream first)."""
        if self._stream is not None:
            raise RuntimeError("hit_limits() during a capture; call it after a replay")
        return [loop for loop in self._loops if loop.hit_limit]

    def cancelled(self) -> list[Loop]:
        """The while loops whose last replay was stopped by ``cancel()`` or
        Ctrl-C (reads the device: synchronise the replay's stream first)."""
        if self._stream is not None:
            raise RuntimeError("cancelled() during a capture; call it after a replay")
        return [loop for loop in self._loops if loop.cancelled]

    @contextmanager
    def _block(self, call: str):
        """The ``with`` block of the node just opened (given to it): at its end the
        node closes. A block that raises discards the capture, as the node can no
        longer close as written (a later ``capture_end()`` says so); one that
        leaves a node it opened inside still open is refused."""
        node = self._open[-1]
        try:
            yield node
        except GeneratorExit:
            raise
        except BaseException as e:
            if self._stream is not None and self._thread is threading.current_thread():  # not another's capture
                self._abort_capture()
                self._discarded = f"the body of {call} raised {type(e).__name__}"  # for capture_end()
            raise
        self._on_own_thread("end_capture_to_conditional_node()")  # what the block's end calls, refused elsewhere
        if not self._open or self._open[-1] is not node:
            inner = self._open[-1].kind.replace("_", "/") if self._open else "none"
            self._refuse(
                RuntimeError,
                f"the `with {call}` block ends while a node opened inside it is still open (innermost: {inner}); "
                "close it with end_capture_to_conditional_node() first",
            )
        self.end_capture_to_conditional_node()

    def _next_body_of(self, node, call: str) -> None:
        """``branch.else_()`` or ``cases.next()``: only for their own node, open and innermost."""
        self._on_own_thread(call)
        if not self._open or self._open[-1] is not node:
            where = "is closed" if node not in self._open else "is not the innermost open node"
            message = f"{call} of a node that {where}: call it inside that node's `with` block, at its own level"
            if self._stream is None:
                raise RuntimeError(message)
            self._refuse(RuntimeError, message)
        self.begin_capture_to_next_conditional_body()

    def _need_capture(self, call: str) -> None:
        if self._stream is None:
            if current_stream().is_capturing():
                raise RuntimeError(
                    f"{call} on a graph that is not capturing, while another graph is: open conditional nodes on "
                    "the graph of the `with tp.cuda.graph(...)` block in progress"
                )
            raise RuntimeError(f"{call} needs a capture in progress: use it inside `with tp.cuda.graph(g):`")
        self._on_own_thread(call)

    def _on_own_thread(self, call: str) -> None:
        """Refuse ``call`` on a thread other than the capture's, before it changes
        anything: it would set this thread's current stream, not the capture's
        thread's, and capture on streams that thread is using (capture_thread.py)."""
        if self._stream is not None:
            refuse_other_thread(call, self._thread, self._stream)

    def _open_node(self, kind: str, pred, n: int | None = None, max_iters: int | None = None, unroll: int = 1):
        self._need_capture(f"begin_capture_to_{kind}_node()")
        if self._open and self._open[-1].copies:
            self._refuse(
                RuntimeError,
                f"{'an' if kind[0] == 'i' else 'a'} {kind.replace('_', '/')} node inside a while loop with "
                "unroll > 1: the driver does not copy conditional nodes, so an unrolled body holds none; "
                "use unroll=1 for this loop",
            )
        outer = self._level()
        if isinstance(pred, Handle):
            self._checked(conditional.check_handle, pred, kind, self._owner())
        if kind == "switch":
            self._checked(conditional.check_switch, pred, n)
        elif (pred is not None or kind != "while") and not isinstance(pred, Handle):
            self._checked(conditional.check_flag, pred)
        loop = None
        if kind == "while":
            self._checked(conditional.check_loop, pred, max_iters, unroll)
            loop = Loop(0, conditional.new_counter(), max_iters, self._cancel_request().data_ptr())
        missing = get_backend().conditional_support(kind)
        if missing:
            self._refuse(RuntimeError, missing)
        size = conditional.body_count(kind, n)
        self._open.append(conditional.open_node(outer, kind, pred, size, self._mode, self._route, loop, unroll))
        if loop is not None:
            self._loops.append(loop)
        return loop

    def _level(self) -> Stream:
        """The stream to capture a node on at this point: the innermost open
        body's, or the capture's; or the current stream where it takes part in
        that same capture (a stream forked from it), so that the node follows
        the work queued on it, the flag's kernel too."""
        level = self._open[-1].body if self._open else self._stream
        s = current_stream()
        if s.handle != level.handle and s.handle:
            dev = get_backend()
            if dev.capture_id(s._h) == dev.capture_id(level._h) != 0:
                return s
        return level

    def _owner(self) -> tuple:
        """Who may use a ``conditional_handle()``: this capture, at this level of its nodes."""
        return (id(self), self._capture_id, self._open[-1].body if self._open else self._stream)

    def _route(self, body: Stream) -> None:
        """Send the allocations of a conditional body's stream to this capture's pool."""
        allocator.route_to_pool(body, self._pool, self._token)

    def _innermost(self, call: str):
        self._on_own_thread(call)
        if not self._open:
            raise RuntimeError(f"{call} without an open conditional node")
        return self._open[-1]

    def _checked(self, check, *args) -> None:
        """Run ``check``; what it refuses ends the capture (no capture is left open)."""
        try:
            check(*args)
        except (TypeError, ValueError) as e:
            self._refuse(type(e), str(e))

    def _refuse(self, kind: type, message: str):
        """Discard the capture and raise ``kind(message)`` (the runtime stays usable)."""
        self._abort_capture()
        raise kind(f"{message} (the capture was discarded)")
