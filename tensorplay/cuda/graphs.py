"""CUDA graphs: capture work once, replay it with one launch.

``CUDAGraph`` captures every kernel, copy and fill issued on the capture stream
(and on streams forked from it through events) into a graph, instantiates it at
``capture_end()``, and replays it with ``replay()``. Tensors allocated during the
capture come from the graph's private memory pool, so their addresses stay valid
for every replay: write new inputs into them with ``copy_`` and read the outputs
after a replay, or let ``stage_and_launch(static_inputs, inputs)`` copy the
inputs and replay in one launch (``tensorplay.cuda.stage``).

Examples
--------
>>> import tensorplay as tp
>>> x = tp.ones(4)
>>> g = tp.cuda.CUDAGraph()
>>> with tp.cuda.graph(g):
...     y = x * 2 + 1
>>> x.fill_(3.0)
tensor([3., 3., 3., 3.])
>>> g.replay()
>>> y.tolist()
[7.0, 7.0, 7.0, 7.0]
"""

from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from functools import partial

from ..kernels import conditional as conditional_kernels
from ..runtime.backend import CaptureError, CudaError
from ..runtime.backend import get as get_backend
from ..runtime.caches import track_factories
from ..runtime.capture import (
    capture_state,
    graph_inside_capture_error,
    nested_capture_error,
    refuse_legacy_capture,
    refuse_nested_capture,
    refuse_replay_into_capture,
    release_after_captures,
    release_deferred,
    run_capture_preparers,
    wait_for_device_unless_capturing,
)
from ..runtime.memory import allocator
from ..runtime.streams import (
    Stream,
    as_stream,
    capture_stream,
    current_stream,
    default_stream,
    is_current_stream_capturing,
    retire_capture_stream,
    set_stream,
)
from . import conditional
from .cancel import Cancelling, cancel_stream, cancellable
from .capture_thread import ThreadOwned, end_collected_captures, refuse_other_thread
from .conditional import Loop, OpenNode
from .graph_nodes import ConditionalNodes
from .graph_views import GraphViews
from .kernel_nodes import KernelNodes
from .stage import Stager

__all__ = [
    "CUDAGraph",
    "export_dot",
    "graph",
    "graph_pool_handle",
    "is_current_stream_capturing",
]

track_factories(conditional_kernels)  # tp.cuda.clear_caches() drops its kernels too
CAPTURE_MODES = ("global", "thread_local", "relaxed")
_launch_raw = get_backend().graph_launch_raw  # replay's hot path: the driver call itself
_last_capture: list = [None]  # weak reference to the most recently captured graph
_ABANDONED: list[Stream] = []  # streams of captures left unfinished, kept for the life of the process


def graph_pool_handle():
    """A new memory pool id that several graphs can share (pass it as ``pool=``).

    Graphs captured one after another into one pool take about the memory of the
    largest, not the sum; replay them in the order they were captured.

    Examples
    --------
    >>> import tensorplay as tp
    >>> pool = tp.cuda.graph_pool_handle()
    >>> x = tp.ones(8)
    >>> g1, g2 = tp.cuda.CUDAGraph(), tp.cuda.CUDAGraph()
    >>> with tp.cuda.graph(g1, pool=pool):
    ...     y = x * 2
    >>> with tp.cuda.graph(g2, pool=pool):
    ...     z = y + 1
    >>> g1.replay(); g2.replay()
    >>> z.tolist()[:2]
    [3.0, 3.0]
    """
    return allocator.new_pool_id()


def _free_graph(stager: Stager | None, graph_exec, *graphs) -> None:
    """Destroy what a reset or collected CUDAGraph held on the device (through
    ``release_after_captures``: never in the middle of a capture)."""
    if stager is not None:
        stager.release()
    dev = get_backend()
    if graph_exec is not None:
        dev.graph_exec_destroy(graph_exec)
    for i, graph in enumerate(graphs):
        if graph is not None and all(graph is not g for g in graphs[:i]):
            dev.graph_destroy(graph)


def _pool_of(pool):
    if pool is None:
        return allocator.new_pool_id()
    if isinstance(pool, CUDAGraph):
        if pool._pool is None:
            raise ValueError("pool= names a CUDAGraph that has not been captured; capture it first")
        return pool._pool
    if isinstance(pool, tuple) and len(pool) == 2:
        return pool
    raise TypeError(f"expected pool=None, a graph_pool_handle(), a pool_id or a CUDAGraph, got {pool!r}")


class CUDAGraph(ConditionalNodes, KernelNodes, Cancelling, GraphViews, ThreadOwned):
    """A captured CUDA graph and the memory pool its tensors live in.

    Capture with ``with tp.cuda.graph(g): ...`` (or ``capture_begin`` /
    ``capture_end``), then ``replay()`` as often as needed.
    """

    def __init__(self) -> None:
        self._graph = None
        self._exec = None
        self._pool = None
        self._stream: Stream | None = None  # while capturing
        self._thread: threading.Thread | None = None  # the thread that began the capture: only it ends it
        self._restore: Stream | None = None  # the current stream before capture_begin() made the side stream current
        self._token = None  # identifies blocks allocated during this capture
        self._debug = False
        self._mode = "global"
        self._open: list[OpenNode] = []  # conditional nodes being captured, innermost last
        self._loops: list[Loop] = []  # the while loops of the capture, for hit_limits()
        self._stager: Stager | None = None  # stage_and_launch's plans, made on its first call
        self._launches: list = []  # the kernel launches the capture's stream recorded (nodes())
        self._recording: list = []  # the same, for the capture in progress
        self._setters: dict = {}  # node index -> what set_args changed it with
        self._held: dict = {}  # node index -> the arguments set_args gave it, kept alive
        self._captures = 0  # captures so far: nodes() of an earlier one are void
        self._handles, self._capture_id = [], None  # the capture's conditional_handle()s and its identity
        self._updating: list | None = None  # during a capture with update=True: the loops of the graph held
        self._held_before: dict = {}  # and what the graph held for its kernels before it (allocator.hold)
        # The graph the executable was instantiated from and its launches: the
        # driver edits an executable's nodes through that graph's node handles.
        self._origin = None
        self._origin_launches: list = []
        self.last_update = None  # GraphUpdate: what the last capture with update=True did
        self._cancel = None  # the cancel request its while loops read: one int64, outside its pool
        self._cancel_pending = False  # the next replay withdraws the cancel request first
        self._withdrawn = None  # the event after the last withdrawal, which a cancel's fill waits for
        self._discarded: str | None = None  # why the last capture was discarded, for capture_end()'s sentence
        self._on_replay: list = []  # called with the stream after each launch (capture_state.on_replay)

    # -- capture ---------------------------------------------------------------
    def capture_begin(
        self, pool=None, capture_error_mode: str = "global", stream: Stream | None = None, update: bool = False
    ) -> None:
        """Begin capturing the work issued on ``stream``.

        With ``stream=None`` the capture is on the current stream, or, when that
        is the legacy default stream (which cannot capture), on this thread's
        side capture stream, made current until ``capture_end()``. With
        ``update=True`` a graph already captured is captured again, into its
        pool, and ``capture_end()`` updates its executable (see
        ``tensorplay.cuda.kernel_nodes``).
        """
        if capture_error_mode not in CAPTURE_MODES:
            raise ValueError(
                f"capture_error_mode must be 'global', 'thread_local' or 'relaxed', got {capture_error_mode!r}"
            )
        if self._stream is not None:
            raise RuntimeError("this CUDAGraph is already capturing; call capture_end() first")
        updating = update and self._exec is not None
        if self._exec is not None and not updating:
            raise RuntimeError(
                "this CUDAGraph already holds a capture; call reset() before capturing again, "
                "or capture with update=True to update it in place"
            )
        if updating and pool is not None and _pool_of(pool) != self._pool:
            raise ValueError("a capture with update=True uses the graph's own pool; leave pool= out")
        end_collected_captures()  # this thread's current stream may be a collected graph's capture's
        s, restore = as_stream(stream), None
        if stream is not None:
            refuse_legacy_capture(s)
        elif s == default_stream():
            s, restore = capture_stream(), s
        pool = self._pool if updating else _pool_of(pool)
        dev = get_backend()
        run_capture_preparers()
        cancel_stream()  # made before any capture: a while loop allocates its graph's cancel request there
        with capture_state.lock:  # not inside another thread's device-wide wait
            refuse_nested_capture(s)
            if restore is not None:
                s.wait_stream(restore)
            try:
                dev.begin_capture(s._h, capture_error_mode)
            except CudaError as e:
                if e.code == "CUDA_ERROR_ILLEGAL_STATE":  # begun outside tensorplay since the check
                    raise nested_capture_error(s) from None
                raise
            # Routing starts only once the capture is ours: a failed begin leaves
            # every other capture's routing as it was.
            if updating:  # into the pool and under the token the graph holds: its use of them covers this
                allocator.route_to_pool(s, pool, self._token)
                token = self._token
            else:
                token = object()
                allocator.begin_capture(s, pool, token)
            capture_state.begin(s, capture_error_mode)
            self._recording = capture_state.recorders[s.handle] = []
        if updating:  # what the new capture's kernels use is held afresh: the rest goes once it has replaced them
            self._updating, self._loops = self._loops, []
            self._held_before = allocator.take_held(token)
        self._stream, self._pool, self._token, self._mode = s, pool, token, capture_error_mode
        self._thread = threading.current_thread()
        self._handles = []
        self._capture_id = object()  # handles of an earlier capture, even one discarded, are refused
        self._discarded = None
        if restore is not None:
            self._restore = restore
            set_stream(s)

    def _end_side_stream(self) -> None:
        """Make current again the stream capture_begin() replaced by the side stream."""
        if self._restore is not None:
            set_stream(self._restore)
            self._restore = None

    def capture_end(self) -> None:
        """End the capture and instantiate the graph (its compile cost is paid here).

        Call it on the thread that called ``capture_begin()``; on another thread
        it raises ``CaptureError`` and the capture goes on.
        """
        s = self._stream
        if s is None:
            if self._discarded:
                raise RuntimeError(f"capture_end(): the capture was discarded, as {self._discarded}; begin a new one")
            raise RuntimeError("capture_end() called without capture_begin()")
        refuse_other_thread("capture_end()", self._thread, s)  # its stream, and the driver's end, are that thread's
        if self._open:
            n = len(self._open)
            self._abort_capture()
            raise RuntimeError(
                f"capture_end() with {n} conditional node(s) still open; call "
                "end_capture_to_conditional_node() for each begin_capture_to_*_node() (the capture was discarded)"
            )
        unused = [h for h in self._handles if h.owner is not None]
        if unused:
            self._abort_capture()
            raise ValueError(
                f"capture_end() with {len(unused)} handle(s) from conditional_handle() that no node took "
                f"({', '.join(map(repr, unused))}); the driver cannot instantiate a graph holding an unused "
                "handle: give each to an if, if/else or switch node, or do not make it (the capture was discarded)"
            )
        self._stream = None
        capture_state.recorders.pop(s.handle, None)
        hooks = capture_state.replay_hooks.pop(s.handle, [])
        self._end_side_stream()
        try:
            try:
                graph = get_backend().end_capture(s._h)
            finally:  # ended only now: until the driver's end, another thread's "no capture
                capture_state.end(s)  # in progress, so wait for the whole device" would break it (seen on the H200)
        except BaseException:
            self._discard_pool(s)
            raise
        finally:
            release_deferred()  # graphs freed during the capture
        allocator.end_capture(s, self._pool, keep=True)
        if self._updating is not None:
            self._end_update(graph)
        else:
            self._graph = graph
            try:
                self._exec = get_backend().graph_instantiate(graph, self._recording)
            except BaseException:  # the driver's error, the graph empty again (reset would refuse: the
                self._destroy()  # capture's tensors are alive, and its pool goes once they are gone)
                raise
            self._origin, self._origin_launches = graph, self._recording
        self._forget_nodes()
        self._launches = self._recording
        self._on_replay = hooks  # an update's capture holds the whole graph again
        _last_capture[0] = weakref.ref(self)
        if self._loops:  # their counters' cancel requests start cleared, at the first replay
            self._cancel_pending = True
            cancellable(self)

    def _end_update(self, graph) -> None:
        """A capture with update=True ended: the executable takes ``graph``."""
        old_loops, self._updating = self._updating, None
        held_before, self._held_before = self._held_before, {}
        try:
            self.last_update, old_exec, old_graphs = self._take_update(graph)
        except BaseException:
            get_backend().graph_destroy(graph)
            _release_counters(self._loops)  # of the new capture, which made no graph
            self._loops = old_loops
            allocator.restore_held(self._token, held_before)
            raise
        release_after_captures(partial(_free_graph, self._stager, old_exec, *old_graphs))
        self._stager = None
        _release_counters(old_loops)

    def _abort_capture(self) -> None:
        """End a capture whose body failed: discard the graph, keep the runtime usable."""
        s = self._stream
        if s is None:
            return
        if self._open and get_backend().capture_status(s._h) == "invalidated":
            self._abandon_capture(s)
        while self._open:
            try:
                conditional.close(self._open.pop())
            except Exception:
                pass  # the capture is being discarded anyway
        self._stream = None
        capture_state.recorders.pop(s.handle, None)
        capture_state.replay_hooks.pop(s.handle, None)
        self._end_side_stream()
        try:
            graph = get_backend().end_capture(s._h)
            get_backend().graph_destroy(graph)
        except Exception:
            pass  # an invalidated capture still ends; its partial graph is gone
        finally:
            capture_state.end(s)  # after the driver's end, as in capture_end
        release_deferred()
        self._discard_pool(s)

    def _abandon_capture(self, s: Stream) -> None:
        """Leave unfinished a capture invalidated inside a conditional body: on the
        H200 (driver 580) ending either it or its body's capture crashes the process."""
        set_stream(self._open[0].previous)
        for node in self._open:
            conditional.forget(node)
            allocator.route_to_pool(node.body, None)
        self._open.clear()
        self._stream = None
        capture_state.end(s)
        capture_state.recorders.pop(s.handle, None)
        capture_state.replay_hooks.pop(s.handle, None)
        self._end_side_stream()
        retire_capture_stream(s)
        _ABANDONED.append(s)  # destroying a stream the driver still captures on can crash it later
        self._discard_pool(s)
        raise CaptureError(
            f"the capture on stream {s.handle:#x} was invalidated inside the body of a conditional node, "
            "and the CUDA driver crashes when such a capture is ended, so it was left unfinished. "
            "A 'global' mode capture left open blocks synchronisation and allocation in this process: "
            "save what you need and restart Python (the kernel, in Jupyter). Inside conditional bodies, "
            "avoid host waits and other libraries' allocations, which invalidate a capture"
        )

    def _discard_pool(self, s: Stream) -> None:
        """The capture on ``s`` made no graph: its pool goes back unless shared
        (or, for an update, stays the graph's). Its loops let go of their counters."""
        _release_counters(self._loops)
        self._loops = []
        if self._updating is not None:  # the graph held goes on as it was
            allocator.end_capture(s, self._pool, keep=True)
            self._loops, self._updating = self._updating, None
            allocator.restore_held(self._token, self._held_before)
            self._held_before = {}
            return
        allocator.end_capture(s, self._pool, keep=False)
        self._pool = None

    def instantiate(self) -> None:
        """Instantiate the captured graph (``capture_end`` already did; then a no-op)."""
        if self._graph is None:
            raise RuntimeError("nothing to instantiate: capture a graph first")
        if self._exec is None:
            self._exec = get_backend().graph_instantiate(self._graph, self._launches)
            self._origin, self._origin_launches = self._graph, self._launches

    # -- replay ------------------------------------------------------------------
    def replay(self, stream: Stream | None = None) -> None:
        """Launch the graph on ``stream`` (the current stream if None)."""
        s = self._launch(stream)
        for hook in self._on_replay:
            hook(s)

    def _launch(self, stream: Stream | None):
        """``replay`` but for the hooks; the stream launched on."""
        if self._exec is None:
            raise RuntimeError("replay() needs a captured graph; capture one first")
        s = current_stream() if stream is None else stream
        if capture_state.active:
            refuse_replay_into_capture(as_stream(s))
        if self._cancel_pending:
            self._withdraw_cancel(as_stream(s))
        try:
            h = s._h
        except AttributeError:
            h = as_stream(s)._h  # not a Stream: a TypeError that names it
        err = _launch_raw(self._exec, h)[0]
        if err:
            raise get_backend().error("cuGraphLaunch", err)
        return s

    def stage_and_launch(self, static_inputs, inputs, stream: Stream | None = None) -> None:
        """Copy each of ``inputs`` into its static input and replay, as one launch.

        The effect is ``static.copy_(x)`` for each pair, then ``replay(stream)``.
        Contiguous inputs of the static input's dtype and shape are copied by a
        gather kernel that is the first node of the launched graph, so the
        copies and the replay cost one ``cuGraphLaunch`` (a graph with if/while
        nodes, which the driver does not clone, gets the kernel launched just
        before it); others are copied with ``copy_`` (casting, broadcasting) on
        ``stream`` first. An input that is its static input is not copied.
        Everything is checked before anything is copied. The first call for a
        tuple of static inputs builds the staged graph (and compiles the gather
        kernel); see ``tensorplay.cuda.stage``.

        Parameters
        ----------
        static_inputs : list or tuple of Tensor
            The tensors the captured graph reads.
        inputs : list or tuple
            One fresh value per static input: a Tensor, or host data.
        stream : Stream, optional
            Where to copy and replay (the current stream if None).

        Examples
        --------
        >>> import tensorplay as tp
        >>> x = tp.zeros(4)
        >>> g = tp.cuda.CUDAGraph()
        >>> with tp.cuda.graph(g):
        ...     y = x * 2 + 1
        >>> g.stage_and_launch([x], [tp.tensor([1.0, 2.0, 3.0, 4.0])])
        >>> y.tolist()
        [3.0, 5.0, 7.0, 9.0]
        """
        if self._stream is not None:
            raise RuntimeError("stage_and_launch() called while this CUDAGraph is capturing; call capture_end() first")
        if self._cancel_pending:
            self._withdraw_cancel(current_stream() if stream is None else as_stream(stream, "stream"))
        if self._stager is None:
            self._sync_template()  # the arguments set_args gave its nodes
            self._stager = Stager()
        self._stager.launch(static_inputs, inputs, stream, self._graph, self._exec, self._launch)
        if self._on_replay:
            s = current_stream() if stream is None else stream
            for hook in self._on_replay:
                hook(s)

    # -- lifetime ----------------------------------------------------------------
    def reset(self) -> None:
        """Free the graph; its pool memory is released once no tensor from the
        capture is alive (reset refuses while one is)."""
        if self._stream is not None:
            raise RuntimeError("reset() during a capture; call capture_end() first")
        if self._token is not None:
            own = conditional.unshared_counter_blocks(self._loops)  # held by the graph's loops alone
            alive = [b for b in allocator.live_blocks(self._token) if id(b) not in own]
            if alive:
                raise RuntimeError(
                    f"reset() while {len(alive)} tensor(s) allocated during the capture are alive "
                    f"({sum(b.size for b in alive)} bytes); delete them (del t) before reset(), "
                    "since the graph's memory pool goes back to the allocator"
                )
        self._destroy()

    def _destroy(self) -> None:
        release_after_captures(partial(_free_graph, self._stager, self._exec, self._graph, self._origin))
        self._stager = None
        if self._pool is not None and self._token is not None:
            allocator.release_pool(self._pool)
            allocator.forget_capture(self._token)
        self._exec = self._graph = self._pool = self._token = self._origin = None
        self._origin_launches = []
        self._forget_nodes()
        _release_counters(self._loops)
        self._loops = []
        self._cancel, self._cancel_pending = None, False  # a new capture's loops get a request of their own
        self._withdrawn = None
        self._on_replay = []

    def __del__(self) -> None:
        try:
            if self._stream is not None:  # discarded on the capture's own thread (capture_thread.py)
                self._collected_mid_capture()
            else:
                self._destroy()
        except Exception:
            pass

    def __copy__(self):
        raise TypeError(
            "a CUDAGraph cannot be copied: its executable graph and memory pool belong to it alone; "
            "capture the work again into a new CUDAGraph (pass pool=g.pool_id to share its memory)"
        )

    def __deepcopy__(self, memo):
        return self.__copy__()

    def __reduce_ex__(self, protocol):
        raise TypeError(
            "a CUDAGraph cannot be pickled: it holds device handles and device memory of this process; "
            "pickle the tensors you need (moved to the host with .numpy()) and capture again"
        )

    @property
    def pool_id(self):
        """The id of this graph's memory pool (pass it as ``pool=`` to share it)."""
        return self._pool

    def __repr__(self) -> str:
        state = "capturing" if self._stream is not None else "captured" if self._exec is not None else "empty"
        nodes = f", {get_backend().graph_node_count(self._graph)} nodes" if self._graph is not None else ""
        return f"<tensorplay.cuda.CUDAGraph {state}{nodes}, pool={self._pool}>"


def export_dot(file_path: str) -> str:
    """Write the most recently completed capture as DOT to ``file_path``."""
    g = _last_capture[0]() if _last_capture[0] is not None else None
    if g is None or g._graph is None:
        raise RuntimeError("export_dot() needs a completed capture whose CUDAGraph is still alive")
    return g.debug_dump(file_path)


def _release_counters(loops) -> None:
    """The pass counters of ``loops`` go back to their pool (``loop.iterations`` is then unavailable)."""
    for loop in loops:
        loop.counter = None


@contextmanager
def graph(
    cuda_graph: CUDAGraph,
    pool=None,
    stream: Stream | None = None,
    capture_error_mode: str = "global",
    update: bool = False,
):
    """Capture the body into ``cuda_graph`` on ``stream`` (the side capture stream
    if None), made current for the body. Work queued before is waited for first.

    With ``update=True``, a graph that holds a capture is captured again and its
    executable updated in place where the driver can (``cuGraphExecUpdate``;
    ``cuda_graph.last_update`` says whether it did): cheaper than ``reset()``
    and a new capture, whose instantiation is the expensive part of big graphs.

    If the body raises, the capture is ended and discarded, the exception
    propagates, and the runtime stays usable (an update's graph as it was).

    Examples
    --------
    >>> import tensorplay as tp
    >>> x, g = tp.ones(4), tp.cuda.CUDAGraph()
    >>> with tp.cuda.graph(g):
    ...     y = x * 2
    >>> z = tp.full((4,), 5.0)
    >>> with tp.cuda.graph(g, update=True):  # the same kernels on other tensors
    ...     y = z * 2
    >>> g.replay(); print(g.last_update, y.tolist())
    updated in place [10.0, 10.0, 10.0, 10.0]
    """
    if not isinstance(cuda_graph, CUDAGraph):
        raise TypeError(f"expected a CUDAGraph, got {type(cuda_graph).__name__}")
    end_collected_captures()  # before the current stream is read
    s = as_stream(stream, "stream") if stream is not None else capture_stream()
    prev = current_stream()
    if prev.is_capturing():  # before the wait below, which would fork s into that capture
        raise graph_inside_capture_error(prev)
    wait_for_device_unless_capturing(get_backend().synchronize)  # another capture would break
    s.wait_stream(prev)
    set_stream(s)
    try:
        cuda_graph.capture_begin(pool=pool, capture_error_mode=capture_error_mode, stream=s, update=update)
        try:
            yield cuda_graph
        except BaseException:
            cuda_graph._abort_capture()
            raise
        cuda_graph.capture_end()
    finally:
        set_stream(prev)
