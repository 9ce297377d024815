"""The capture rules: what is refused while a CUDA graph is being captured.

Host waits, readbacks, host-to-device copies and launches a capture would miss
are refused here, before they reach the device, with a sentence that says what
to do instead: the driver never sees them, so the capture stays valid, and both
backends give the same error. (The simulator enforces the driver's rules
underneath as well, for calls that get past these checks.)

``capture_state`` knows the captures in progress. Each rule is one function
named for what it refuses; it raises ``CaptureError`` (or returns). Hot paths
test ``capture_state.active``, a plain int that is 0 when no capture is in
progress, before calling a rule, so that eager work pays no call.

This module sits below ``streams``: it takes streams by their public face
(``handle``, ``is_capturing()``) and never asks which stream is current.

Examples
--------
>>> import tensorplay as tp
>>> x, g = tp.ones(2), tp.cuda.CUDAGraph()
>>> with tp.cuda.graph(g):
...     try:
...         x.tolist()
...     except tp.cuda.CaptureError as e:
...         refused = str(e)
>>> refused.startswith("reading a tensor back to the host (numpy/item/tolist/bool) is not allowed while stream")
True
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from .backend import CaptureError

__all__ = [
    "BranchKernel", "capture_state", "nested_capture_error", "refuse_captured_event", "refuse_device_wide_wait",
    "refuse_empty_cache", "refuse_host_transfer", "refuse_host_wait", "refuse_legacy_capture", "refuse_legacy_launch",
    "refuse_nested_capture", "refuse_replay_into_capture", "refuse_staged_launch", "release_after_captures",
    "current_fuser", "flush_fused", "note_body_launch", "prepare_before_captures", "release_deferred",
    "run_capture_preparers", "wait_for_device_unless_capturing",
]  # fmt: skip


class StreamLike(Protocol):
    """What the rules read of a stream (``tensorplay.cuda.Stream`` has it)."""

    @property
    def handle(self) -> int: ...  # 0 for the legacy default stream

    def is_capturing(self) -> bool: ...


class _CaptureState:
    """The captures in progress in this process, by stream handle.

    The rules are the driver's, as measured on the H200 (driver 580): a
    ``global`` capture forbids host waits and allocations in every thread, a
    ``thread_local`` one in its own thread, a ``relaxed`` one nowhere; a
    context-wide synchronise breaks a capture of any mode, from any thread.
    """

    def __init__(self) -> None:
        self.active = 0  # len(modes), read first on hot paths
        self.modes: dict[int, tuple[str, int]] = {}  # stream handle -> (capture mode, thread)
        # Held while a capture begins and across "no capture in progress, so wait
        # for the whole device": otherwise another thread could begin a capture
        # between the test and the wait, which would break it.
        self.lock = threading.RLock()
        # releases waiting for the captures to end: a deque, which threads append to without the lock
        self.deferred: collections.deque[Callable[[], None]] = collections.deque()
        # tp.compile's fusion passes while they trace (tensorplay/compiler/fusion.py),
        # by thread: the tensor layer hands a thread's elementwise ops to its own, and
        # every other launch of that thread writes out what it holds first (see
        # flush_fused). Empty almost always, so hot paths test it and go on.
        self.fusers: dict[int, object] = {}
        # The while nodes with a flag (not unrolled) whose body a stream captures, by
        # stream handle: a fused kernel of tp.compile that computes the flag last may
        # end the pass itself (tensorplay/cuda/conditional.py, OpenNode.pass_end_args).
        self.loops: dict[int, object] = {}
        # The fused kernel of tp.compile captured last on a stream whose tail computes
        # one-element flags or indices, by stream handle: an if or switch node opened
        # on one right after it has a variant of the kernel set its handle (BranchKernel).
        self.branch_kernels: dict[int, BranchKernel] = {}
        # The open conditional nodes, by the handle of the stream capturing their
        # current body: they count the kernels launched there (note_body_launch).
        self.bodies: dict[int, object] = {}
        # What a capture's kernels may read that must be made eagerly first (the
        # random generator's state): run by capture_begin, before the capture.
        self.preparers: list[Callable[[], None]] = []
        # The kernel launches of each capture, by capture stream handle (its own
        # stream only, not its forks or conditional bodies): CUDAGraph.nodes().
        self.recorders: dict[int, list] = {}
        # What must hear of every launch of the graph a capture makes, by capture
        # stream handle (on_replay): the CUDAGraph takes them at capture_end.
        self.replay_hooks: dict[int, list[Callable]] = {}

    def begin(self, s: StreamLike, mode: str) -> None:
        self.modes[s.handle] = (mode, threading.get_ident())
        self.active = len(self.modes)

    def end(self, s: StreamLike) -> None:
        self.modes.pop(s.handle, None)
        self.active = len(self.modes)

    def prohibiting(self) -> tuple[int, str, int] | None:
        """(stream handle, mode, thread) of a capture that forbids host waits on
        this thread, or None."""
        if not self.active:
            return None
        me = threading.get_ident()
        for key, (mode, thread) in list(self.modes.items()):
            if mode == "global" or (mode == "thread_local" and thread == me):
                return key, mode, thread
        return None

    def on_replay(self, hook: Callable) -> None:
        """Have ``hook(stream)`` called after every launch of the graphs this
        thread is capturing (their conditional bodies' work included), on the
        stream it was launched on: a library whose captured work the host must
        watch (NCCL's, in ``tensorplay.distributed``)."""
        me = threading.get_ident()
        for key, (_, thread) in list(self.modes.items()):
            if thread == me:
                self.replay_hooks.setdefault(key, []).append(hook)

    def owned_strict(self) -> int | None:
        """The stream handle of a non-relaxed capture this thread has open, or None:
        work this thread puts on the legacy default stream would not be in it."""
        me = threading.get_ident()
        for key, (mode, thread) in list(self.modes.items()):
            if thread == me and mode != "relaxed":
                return key
        return None


@dataclass(slots=True)
class BranchKernel:
    """A captured kernel node whose tail computes one-element results that could
    be a conditional node's flag or index (``flags``: the tail step and dtype of
    each, by data pointer) and how it was launched; ``setting(step, cases)`` is
    the same kernel setting the handle of an if node (``cases`` 0) or a switch of
    ``cases`` bodies, taken as one more argument, from that step's value
    (``kernels/fused.py``, ``Tail.node``)."""

    node: object  # as the backend's captured_node gives it
    grid: tuple
    block: tuple
    args: list
    flags: dict[int, int]
    setting: Callable


capture_state = _CaptureState()


def note_body_launch(handle: int, pointers: Callable[[], list]) -> None:
    """A kernel went onto the stream ``handle`` through tensorplay's launch doors;
    ``pointers()`` lists the addresses among its parameters. The conditional
    node whose body that stream captures, if any, counts it
    (``cuda/conditional.py``, ``OpenNode.launched``)."""
    node = capture_state.bodies.get(handle)
    if node is not None:
        node.launched(pointers)


def prepare_before_captures(fn: Callable[[], None]) -> Callable[[], None]:
    """Have ``fn`` run before every capture begins (outside it), to make device
    state the captured kernels will use; a decorator. ``fn`` is cheap once done."""
    capture_state.preparers.append(fn)
    return fn


def run_capture_preparers() -> None:
    """What ``prepare_before_captures`` registered (``CUDAGraph.capture_begin``)."""
    if not capture_state.active:  # another capture in progress made them already
        for fn in capture_state.preparers:
            fn()


# -- host waits ----------------------------------------------------------------------
def refuse_host_wait(what: str, s: StreamLike | None = None) -> None:
    """A host wait (``what``) on ``s``, or one that a capture in progress forbids
    on this thread (``global`` mode anywhere, ``thread_local`` in its thread)."""
    if not capture_state.active:
        return
    if s is not None and s.handle in capture_state.modes:
        raise CaptureError(
            f"{what} waits on the host, which is not allowed while stream {s.handle:#x} is capturing "
            "a graph; wait before capture_begin() or after capture_end()"
        )
    found = capture_state.prohibiting()
    if found is not None:
        raise CaptureError(_host_wait_advice(what, *found))


def _host_wait_advice(what: str, key: int, mode: str, thread: int) -> str:
    if thread == threading.get_ident():
        return (
            f"{what} waits on the host, which is not allowed while stream {key:#x} is capturing "
            "a graph; wait before capture_begin() or after capture_end()"
        )
    return (
        f"{what} waits on the host, which is not allowed while another thread captures a graph on stream "
        f"{key:#x} in 'global' mode; do it once that capture has ended, or have that thread capture with "
        "capture_error_mode='thread_local' (which leaves other threads free)"
    )


def refuse_device_wide_wait(what: str) -> None:
    """A wait for the whole device (``what``) while any capture is in progress:
    it breaks captures of every mode, in every thread."""
    if not capture_state.active:
        return
    key, (mode, thread) = next(iter(list(capture_state.modes.items())))
    if thread == threading.get_ident():
        advice = "wait before capture_begin() or after capture_end()"
    else:
        advice = (
            "another thread began that capture: wait for the streams you used (stream.synchronize()) "
            "instead, or synchronise once that capture has ended"
        )
    raise CaptureError(
        f"{what} waits for the whole device, which breaks a graph capture in any mode, and stream "
        f"{key:#x} is capturing one; {advice}"
    )


def refuse_captured_event(what: str, captured: bool) -> None:
    """A host wait or query (``what``) on an event last recorded inside a capture
    (``captured``): it marks a point in the graph, not in a stream."""
    if captured:
        raise CaptureError(
            f"{what} on an event recorded during a graph capture: such an event marks a point in the "
            "graph, not in a stream, so only stream.wait_event() inside that capture can use it; "
            "record an event after replay() to wait for or query a replay"
        )


# -- copies between host and device --------------------------------------------------
def refuse_host_transfer(what: str, s: StreamLike) -> None:
    """A readback or host-to-device copy (``what``) on ``s`` while ``s`` captures
    (even a capture begun outside tensorplay), or while a capture forbids host
    waits on this thread."""
    if s.is_capturing():
        raise CaptureError(
            f"{what} is not allowed while stream {s.handle:#x} is capturing a graph; "
            "do it before capture_begin() or after capture_end()"
        )
    refuse_host_wait(what)


# -- launches ------------------------------------------------------------------------
def refuse_legacy_launch(kernel_name: str, s: StreamLike) -> None:
    """A kernel launch on the legacy default stream while this thread captures
    in a non-relaxed mode: the capture would silently miss it."""
    if not s.handle and capture_state.owned_strict() is not None:
        raise CaptureError(
            f"launching {kernel_name} on the legacy default stream is not allowed while this thread captures "
            "a graph (it would not be captured); issue it on the capturing stream (the current stream inside "
            "`with tp.cuda.graph(g):`), or capture with capture_error_mode='relaxed'"
        )


def refuse_replay_into_capture(s: StreamLike) -> None:
    """``replay()`` on the legacy default stream while this thread captures (the
    rule of every launch: the driver would invalidate the capture), or on a
    capturing stream: a graph is not launched into another capture."""
    if not s.handle and capture_state.owned_strict() is not None:
        raise CaptureError(
            "replay() on the legacy default stream is not allowed while this thread captures a graph (it would "
            "not be captured); replay on a tp.cuda.Stream() or after capture_end()"
        )
    if s.is_capturing():
        raise CaptureError(
            f"replay() on stream {s.handle:#x}, which is capturing a graph: a graph cannot be launched into "
            "another capture; issue its work directly inside the capture, or replay after capture_end()"
        )


def refuse_staged_launch(s: StreamLike) -> None:
    """``stage_and_launch()`` on the legacy default stream while this thread
    captures (the rule of every launch), or on a capturing stream."""
    if not s.handle and capture_state.owned_strict() is not None:
        raise CaptureError(
            "stage_and_launch() on the legacy default stream is not allowed while this thread captures a graph "
            "(it would not be captured); launch it on a tp.cuda.Stream() or after capture_end()"
        )
    if s.is_capturing():
        raise CaptureError(
            f"stage_and_launch() is not allowed on stream {s.handle:#x} while it is capturing a graph; "
            "call it after capture_end(), or copy the inputs with copy_() inside the capture"
        )


# -- memory --------------------------------------------------------------------------
def refuse_empty_cache() -> None:
    """``empty_cache()`` while a capture is in progress: its pool's blocks are
    routed to the capture, and ``cuMemFree`` would break it."""
    if capture_state.active:
        raise CaptureError(
            "empty_cache() is not allowed while a stream is capturing a graph; call it after capture_end()"
        )


# -- beginning a capture -------------------------------------------------------------
def refuse_legacy_capture(s: StreamLike) -> None:
    """A capture asked for on the legacy default stream, which cannot capture."""
    if not s.handle:
        raise CaptureError(
            "the legacy default stream cannot capture a graph; capture on a tp.cuda.Stream() "
            "or use `with tp.cuda.graph(g):`, which captures on a side stream"
        )


def refuse_nested_capture(s: StreamLike) -> None:
    """A capture begun on a stream that already captures: captures do not nest."""
    if s.is_capturing():
        raise nested_capture_error(s)


def nested_capture_error(s: StreamLike) -> CaptureError:
    """The error of ``refuse_nested_capture``, for a capture that another thread
    began on ``s`` between that check and the driver's call."""
    owner = capture_state.modes.get(s.handle)
    if owner is None:
        who = "outside tensorplay"
    else:
        who = "by this thread" if owner[1] == threading.get_ident() else "by another thread"
    return CaptureError(
        f"stream {s.handle:#x} is already capturing a graph (begun {who}), and captures do not nest "
        "on one stream; end that capture first, or capture on another tp.cuda.Stream() (each thread "
        "has its own side stream for `with tp.cuda.graph(g):`). To branch inside a graph, use g.if_() or g.while_()"
    )


def graph_inside_capture_error(s: StreamLike) -> CaptureError:
    """The error of ``tp.cuda.graph()`` entered while the current stream ``s`` captures."""
    return CaptureError(
        f"tp.cuda.graph() inside a capture: this thread's current stream ({s.handle:#x}) is already capturing "
        "a graph, and captures do not nest; end that capture first, or branch inside it with g.if_() or g.while_()"
    )


def wait_for_device_unless_capturing(synchronize) -> bool:
    """Call ``synchronize`` (a device-wide wait) unless a capture is in
    progress, as one step that no capture begin can cut in two; True if it ran."""
    with capture_state.lock:
        if capture_state.active:
            return False
        synchronize()
        return True


# -- releasing graphs --------------------------------------------------------------
def release_after_captures(release: Callable[[], None]) -> None:
    """Call ``release`` (which destroys executable graphs) now, or, while any
    capture is in progress, once the last one has ended: ``cuGraphExecDestroy``
    inside a capture invalidates it (measured on the H200, driver 580), and a
    graph collected by Python may be freed in the middle of another's capture.

    The release runs under the capture lock, which a capture's begin holds: a
    destroy checked outside it could run just after another thread began a
    global capture, and the driver then breaks that capture (seen on the
    H200). Where another thread holds the lock (perhaps to begin a capture),
    the release waits with the others rather than for the lock: a collected
    graph may be released from inside any call, one holding another lock too."""
    if not capture_state.lock.acquire(blocking=False):
        capture_state.deferred.append(release)  # a deque's append is safe without the lock
        return
    try:
        if capture_state.active:
            capture_state.deferred.append(release)
            return
        _release_waiting()
        release()
    finally:
        capture_state.lock.release()


def release_deferred() -> None:
    """Run the releases ``release_after_captures`` kept back, once no capture is
    in progress (the graph layer calls this after the driver ends a capture)."""
    with capture_state.lock:
        if not capture_state.active:
            _release_waiting()


def _release_waiting() -> None:
    """The releases kept back, run now (the capture lock held, no capture in progress)."""
    waiting = capture_state.deferred
    while waiting:
        try:
            waiting.popleft()()
        except Exception:
            pass  # as in __del__: nothing to tell the caller, whose graph this was not


# -- fused ops -------------------------------------------------------------------------
def current_fuser():
    """This thread's fusion pass (tp.compile's, while it traces), or None."""
    fusers = capture_state.fusers
    return fusers.get(threading.get_ident()) if fusers else None


def flush_fused() -> None:
    """Launch the ops this thread's fusion pass holds back, before other work is
    ordered on the device (a launch, an event): called only while a capture is
    in progress, as the fuser works only then."""
    fuser = current_fuser()
    if fuser is not None:
        fuser.flush()
