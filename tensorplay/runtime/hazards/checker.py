"""Hazard checking, on and off, and where it listens.

Off (the default) it costs nothing but one flag test per kernel launch: the
backend is the backend. On (``sanitize()``, or ``TENSORPLAY_SANITIZE=1``) it
stands between the runtime and the backend, as a sanitizer intercepts a
driver's calls: the backend's own methods for copies, fills, readbacks,
events, stream and device waits, captures, conditional nodes and graph
launches are wrapped, on the backend object, by functions that call them and
note what they mean for the order of work (``Timeline``, ``Captures``; those
for executable graphs are in ``replays``, which also orders one graph's
launches, on any streams, as the driver runs them); the launch path tells
it of each kernel (``kernel_launched``), and the simulator of each plain
Numba launch (its ``observer``), and a kernel node's setter
(``kernel_node_setter``'s, what ``set_args`` calls) of the node's new
arguments. Taking the check off unwraps them.

On the simulator, checking also makes independent work interleave: graph
nodes with no path between them run in a random order that respects the
edges, and a kernel's blocks and threads (where they never meet) run in a
shuffled order, both drawn from a seed printed when checking begins
(``TENSORPLAY_SANITIZE_SEED`` replays it), so a race can show as a wrong answer too.
"""

from __future__ import annotations

import inspect
import os
import random
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from ..backend import get as get_backend
from .access import Access, kernel_accesses, unpack
from .captures import Captures, handle_key
from .ops import HazardError, Op, stream_name, user_line
from .replays import WRAPPERS as REPLAY_WRAPPERS
from .timeline import Timeline

__all__ = ["checking", "enable_from_environment", "enabled", "kernel_launched", "sanitize"]


class _Checking:
    """The flag the launch path tests (one attribute read while off)."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = False


checking = _Checking()
_lock = threading.RLock()
_state: _State | None = None


class _State:
    """What checking knows while on (``on``: until it goes off), guarded by ``lock``."""

    lock = _lock

    def __init__(self, device, seed: int) -> None:
        self.device, self.seed, self.depth, self.on = device, seed, 0, True
        self.timeline = Timeline()
        self.captures = Captures(device)
        self.execs: dict[int, list[Access]] = {}  # executable graph -> what a launch of it touches
        self.launching: dict[tuple, threading.Lock] = {}  # launch order (replays.launches_of) -> held while made
        self.wrapped: list[tuple[str, object]] = []  # (name, what the backend object itself held, or _ABSENT)

    def issued(self, handle, what: str, accesses: list[Access], launch: tuple | None = None) -> None:
        """An operation issued on the backend's stream ``handle``: checked against
        the eager order, or noted in the capture the stream takes part in. An
        operation of a launch of an executable graph names its ``launch`` order
        (``replays.launches_of``): it comes after that graph's previous launch,
        on whatever stream, and the next launch comes after it."""
        dev = self.device
        key = dev.handle_int(handle)
        op = Op(what, stream_name(key), user_line(2))
        with _lock:
            if key in self.captures.streams:
                self.captures.note(key, handle, op, accesses)
            elif dev.capture_status(handle) == "none":  # (a capture begun before checking is not followed)
                if launch is not None:
                    self.timeline.wait(key, launch)
                self.timeline.issue(key, op, accesses)
                if launch is not None:
                    self.timeline.record(launch, key)


@contextmanager
def sanitize(seed: int | None = None) -> Iterator[None]:
    """Check for races inside the ``with`` block: two operations touching the
    same memory, one writing, with nothing ordering them, raise
    ``tp.cuda.HazardError`` naming both.

    Kernel launches, copies and fills are checked against the order streams,
    events, ``wait_stream`` and host waits give them as they are issued; a
    captured graph is checked against its edges when its capture ends (its
    conditional bodies too), on the GPU as on the simulator. On the simulator,
    graph nodes that nothing orders, and the blocks and threads of kernels
    whose threads never meet, run in random orders drawn from ``seed``: if
    None, ``TENSORPLAY_SANITIZE_SEED``'s, else a fresh one, printed on stderr
    and put in ``TENSORPLAY_SANITIZE_SEED`` (processes started from this one
    replay the same orders). ``TENSORPLAY_SANITIZE=1`` turns checking on for
    the whole process.

    Examples
    --------
    >>> import tensorplay as tp
    >>> x, side = tp.ones(4), tp.cuda.Stream()
    >>> with tp.cuda.sanitize(seed=0):
    ...     side.wait_stream(tp.cuda.current_stream())
    ...     with tp.cuda.stream(side):
    ...         y = x * 2  # on the side stream
    ...     try:
    ...         z = y + 1  # on the current stream: nothing waits for the side stream
    ...     except tp.cuda.HazardError as e:
    ...         print("the multiply writes y:", "writes out" in e.first, "/ the add reads it:", "reads x0" in e.second)
    ...     tp.cuda.current_stream().wait_stream(side)
    ...     z = y + 1  # now ordered
    the multiply writes y: True / the add reads it: True
    """
    enable(seed)
    try:
        yield
    finally:
        disable()


def enabled() -> bool:
    """Whether hazard checking is on."""
    return checking.on


def enable(seed: int | None = None) -> None:
    """Turn checking on (calls nest: each ``enable`` needs a ``disable``)."""
    global _state
    with _lock:
        if _state is None:
            device = get_backend()
            if seed is None:
                seed = _environment_seed()
            _state = _State(device, seed)
            _install(_state)
            checking.on = True
        _state.depth += 1


def disable() -> None:
    global _state
    with _lock:
        if _state is None:
            return
        _state.depth -= 1
        if _state.depth == 0:
            checking.on = _state.on = False
            _uninstall(_state)
            _state = None


def enable_from_environment() -> None:
    """``TENSORPLAY_SANITIZE=1``: checking on for the life of the process."""
    value = os.environ.get("TENSORPLAY_SANITIZE", "").strip().lower()
    if value in ("", "0", "false", "no", "off"):
        return
    if value not in ("1", "true", "yes", "on"):
        raise ValueError(f"TENSORPLAY_SANITIZE must be 1 or 0, got {value!r}")
    enable()


def _environment_seed() -> int:
    """``TENSORPLAY_SANITIZE_SEED``, or a fresh seed, printed and put there."""
    value = os.environ.get("TENSORPLAY_SANITIZE_SEED", "").strip()
    if value:
        try:
            return int(value)
        except ValueError:
            raise ValueError(f"TENSORPLAY_SANITIZE_SEED must be an integer, got {value!r}") from None
    seed = random.SystemRandom().randrange(1 << 32)
    os.environ["TENSORPLAY_SANITIZE_SEED"] = str(seed)
    if getattr(get_backend(), "interleave", None) is not None:
        print(
            f"tensorplay: hazard checking on; the simulator's orders come from TENSORPLAY_SANITIZE_SEED={seed}",
            file=sys.stderr,
        )
    return seed


_ABSENT = object()  # the backend object held nothing of that name itself: its class's method served


def _install(state: _State) -> None:
    """Wrap each of the backend's calls the checker follows: the class's method,
    or what was set on the backend object itself (a profiler's wrapper, a patch
    a test left behind), which ``_uninstall`` puts back."""
    dev = state.device
    for name, wrap in _WRAPPERS.items():
        if not hasattr(dev, name):
            continue
        own = vars(dev).get(name, _ABSENT)
        setattr(dev, name, wrap(state, _own_method(dev, name) if own is _ABSENT else own))
        state.wrapped.append((name, own))
    interleave = getattr(dev, "interleave", None)
    if interleave is not None:  # the simulator: independent work in a seeded order
        interleave(random.Random(state.seed))
    if hasattr(dev, "observer"):
        dev.observer = _PlainLaunches(state)


def _own_method(dev, name: str):
    """The backend's method ``name`` as its class has it at each call (a test may replace it there)."""
    cls = type(dev)

    def call(*args, **kwargs):
        return inspect.getattr_static(cls, name).__get__(dev, cls)(*args, **kwargs)

    return call


def _uninstall(state: _State) -> None:
    dev = state.device
    for name, own in reversed(state.wrapped):
        if own is _ABSENT:
            del vars(dev)[name]
        else:
            vars(dev)[name] = own
    if getattr(dev, "interleave", None) is not None:
        dev.interleave(None)
    if hasattr(dev, "observer"):
        dev.observer = None


# -- what operations are issued --------------------------------------------------------
def kernel_launched(launcher, handle, args: list | None, packed: bytes | None = None) -> None:
    """A kernel launched through ``runtime.launch`` on the backend's stream
    ``handle`` with ``args`` (kernel arrays and scalars), or with its parameters
    ``packed``; called while checking is on."""
    state = _state
    if state is None:
        return
    argtypes = getattr(launcher, "argtypes", None)
    if args is None:
        args = unpack(argtypes, packed)
    accesses = kernel_accesses(getattr(launcher, "kernel", None), argtypes, list(args))
    state.issued(handle, f"kernel {launcher.name}", accesses)


class _PlainLaunches:
    """The simulator's observer of plain Numba launches (``kernel[grid, block, stream](...)``)."""

    def __init__(self, state: _State) -> None:
        self.state = state

    def launched(self, kernel, name: str, handle, args) -> None:
        self.state.issued(handle, f"kernel {name}", kernel_accesses(kernel, None, list(args)))


# -- the backend's calls, wrapped --------------------------------------------------------
def _copy_dtod(state, call):
    def copy_dtod(dst: int, src: int, nbytes: int, stream) -> None:
        call(dst, src, nbytes, stream)
        accesses = [Access(src, src + nbytes, False, "its source"), Access(dst, dst + nbytes, True, "its destination")]
        state.issued(stream, f"memcpy of {nbytes} bytes", accesses if nbytes else [])

    return copy_dtod


def _memset(state, call):
    def memset(ptr: int, byte: int, nbytes: int, stream) -> None:
        call(ptr, byte, nbytes, stream)
        state.issued(
            stream,
            f"memset of {nbytes} bytes",
            [Access(ptr, ptr + nbytes, True, "its memory")] if nbytes else [],
        )

    return memset


def _copy_htod(state, call):
    def copy_htod(dst: int, host, stream) -> None:
        call(dst, host, stream)
        n = host.nbytes
        state.issued(
            stream,
            f"copy of {n} bytes from the host",
            [Access(dst, dst + n, True, "its destination")] if n else [],
        )

    return copy_htod


def _read(state, call):
    def read(src: int, nbytes: int, stream):
        out = call(src, nbytes, stream)
        state.issued(stream, f"copy of {nbytes} bytes to the host", [Access(src, src + nbytes, False, "its source")])
        with _lock:
            state.timeline.host_waits(state.device.handle_int(stream))
        return out

    return read


def _host_waits_all(state, call):
    def wait_all(*args):
        out = call(*args)
        with _lock:
            state.timeline.host_waits_all()
        return out

    return wait_all


def _stream_synchronize(state, call):
    def stream_synchronize(stream) -> None:
        call(stream)
        with _lock:
            state.timeline.host_waits(state.device.handle_int(stream))

    return stream_synchronize


def _stream_query(state, call):
    def stream_query(stream) -> bool:
        done = call(stream)
        if done:
            with _lock:
                state.timeline.host_waits(state.device.handle_int(stream))
        return done

    return stream_query


def _event_record(state, call):
    def event_record(event, stream) -> None:
        call(event, stream)
        key, ekey = state.device.handle_int(stream), handle_key(event)
        with _lock:
            if state.captures.record(ekey, key):
                state.timeline.forget_event(ekey)
            elif state.device.capture_status(stream) == "none":
                state.timeline.record(ekey, key)

    return event_record


def _stream_wait_event(state, call):
    def stream_wait_event(stream, event) -> None:
        call(stream, event)
        key, ekey = state.device.handle_int(stream), handle_key(event)
        with _lock:
            if not state.captures.wait(key, ekey) and key not in state.captures.streams:
                state.timeline.wait(key, ekey)

    return stream_wait_event


def _event_waited(state, call):
    def event_wait(event):
        out = call(event)
        if out is None or out is True:  # synchronised, or a query that found it done
            with _lock:
                state.timeline.host_waits_event(handle_key(event))
        return out

    return event_wait


def _event_destroy(state, call):
    def event_destroy(event) -> None:
        call(event)
        with _lock:
            state.timeline.forget_event(handle_key(event))

    return event_destroy


def _begin_capture(state, call):
    def begin_capture(stream, mode: str) -> None:
        call(stream, mode)
        with _lock:
            state.captures.begin(state.device.handle_int(stream))

    return begin_capture


def _end_capture(state, call):
    def end_capture(stream):
        key = state.device.handle_int(stream)
        try:
            graph = call(stream)
        except BaseException:
            with _lock:
                state.captures.abandon(key)
            raise
        with _lock:
            if key in state.captures.roots:
                try:
                    state.captures.ended(key, graph)
                except HazardError:
                    state.device.graph_destroy(graph)  # as the driver does with a capture that fails to end
                    raise
        return graph

    return end_capture


def _conditional_add(state, call):
    def conditional_add(stream, handle: int, kind: str, size: int) -> tuple:
        bodies = call(stream, handle, kind, size)
        with _lock:
            state.captures.conditional_added(state.device.handle_int(stream), stream, bodies, kind)
        return bodies

    return conditional_add


def _conditional_body_capture(state, call):
    def conditional_body_capture(body, mode: str):
        stream = call(body, mode)
        with _lock:
            state.captures.body_begun(body, state.device.handle_int(stream))
        return stream

    return conditional_body_capture


def _conditional_end(state, call):
    def conditional_end(body_stream, **options) -> None:  # the driver's ``overlap=``, passed on
        key = state.device.handle_int(body_stream)
        try:
            call(body_stream, **options)
        finally:
            with _lock:
                state.captures.body_ended(key)

    return conditional_end


def _conditional_repeat(state, call):
    def conditional_repeat(body_stream, target, handles: list) -> None:
        with _lock:
            state.captures.repeated(state.device.handle_int(body_stream), target)
        call(body_stream, target, handles)

    return conditional_repeat


# The backend's methods wrapped while checking is on (their protocol names: protocol.py).
_WRAPPERS = {
    "copy_dtod": _copy_dtod,
    "memset": _memset,
    "copy_htod": _copy_htod,
    "read": _read,
    "mem_free": _host_waits_all,  # cuMemFree waits for the device first
    "synchronize": _host_waits_all,
    "stream_synchronize": _stream_synchronize,
    "stream_query": _stream_query,
    "event_record": _event_record,
    "stream_wait_event": _stream_wait_event,
    "event_synchronize": _event_waited,
    "event_query": _event_waited,
    "event_destroy": _event_destroy,
    "begin_capture": _begin_capture,
    "end_capture": _end_capture,
    "conditional_add": _conditional_add,
    "conditional_body_capture": _conditional_body_capture,
    "conditional_end": _conditional_end,
    "conditional_repeat": _conditional_repeat,
    **REPLAY_WRAPPERS,  # executable graphs: instantiate, update, set_args, launch, stage, destroy
}
