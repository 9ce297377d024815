"""Streams and events, and the current stream of each thread."""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .backend import get as _device
from .capture import (
    capture_state,
    flush_fused,
    refuse_captured_event,
    refuse_device_wide_wait,
    refuse_host_wait,
    release_after_captures,
)

__all__ = [
    "Event",
    "Stream",
    "as_stream",
    "capture_stream",
    "current_stream",
    "default_stream",
    "is_current_stream_capturing",
    "set_stream",
    "stream",
    "synchronize",
]

_tls = threading.local()


def as_stream(s, what: str = "stream") -> Stream:
    """``s`` if it is a Stream, the current stream if None; else a TypeError."""
    if s is None:
        return current_stream()
    if not isinstance(s, Stream):
        raise TypeError(f"expected {what}= to be a tensorplay.cuda.Stream or None, got {type(s).__name__}")
    return s


_singletons: dict[str, Stream] = {}


def _release(destroyer, handle, *, _sys=sys) -> None:
    """Destroy a collected handle once no capture is in progress. At the
    interpreter's exit (module globals already cleared) nothing is done: the
    process's end destroys the context and every handle in it."""
    if _sys.is_finalizing():
        return
    release_after_captures(functools.partial(_destroy, destroyer(_device()), handle))


class Stream(*_device().stream_bases()):
    """A non-blocking CUDA stream (on the simulator, an ordered queue).

    A Stream is also a stream for plain Numba kernels: ``kernel[grid, block,
    stream](...)`` launches a ``numba.cuda.jit`` kernel on it, and on a
    capturing stream (``tp.cuda.current_stream()`` inside ``tp.cuda.graph(g)``
    or a conditional body) the launch is captured. On the GPU it is one of
    Numba's streams over the same CUstream; the simulator's launches take it too.

    Examples
    --------
    >>> import tensorplay as tp
    >>> s = tp.cuda.Stream()
    >>> with tp.cuda.stream(s):
    ...     y = tp.ones(4) * 2
    >>> s.synchronize()
    >>> y.tolist()
    [2.0, 2.0, 2.0, 2.0]

    A plain Numba kernel, launched on the current stream, eagerly and in a graph:

    >>> from numba import cuda
    >>> @cuda.jit
    ... def add_one(x):
    ...     i = cuda.grid(1)
    ...     if i < x.size:
    ...         x[i] += 1
    >>> x = tp.zeros(4)
    >>> add_one[1, 4, tp.cuda.current_stream()](x)
    >>> g = tp.cuda.CUDAGraph()
    >>> with tp.cuda.graph(g):
    ...     add_one[1, 4, tp.cuda.current_stream()](x)
    >>> g.replay(); g.replay()
    >>> x.tolist()
    [3.0, 3.0, 3.0, 3.0]
    """

    # The backend's bases are ordinary classes: they give Stream its __weakref__
    # (and a __dict__, which Numba's stream class has).
    __slots__ = ("_h", "_key", "_owned")

    def __init__(self) -> None:
        dev = _device()
        dev.ensure_thread()
        self._h = dev.stream_create()
        self._key = dev.handle_int(self._h)
        self._owned = True

    @classmethod
    def _wrap(cls, handle) -> Stream:
        s = object.__new__(cls)
        s._h, s._key, s._owned = handle, _device().handle_int(handle), False
        return s

    @property
    def handle(self) -> int:
        """The ``CUstream`` as an integer (0 for the legacy default stream)."""
        return self._key

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self._key)

    def synchronize(self) -> None:
        """Wait on the host until all work queued on this stream has finished."""
        refuse_host_wait("stream.synchronize()", self)
        _device().stream_synchronize(self._h)

    def query(self) -> bool:
        """True when all work queued on this stream has finished."""
        refuse_host_wait("stream.query()", self)
        return _device().stream_query(self._h)

    def wait_event(self, event: Event) -> None:
        """Make future work on this stream wait for ``event`` (no host sync)."""
        if not isinstance(event, Event):
            raise TypeError(f"expected a tensorplay.cuda.Event, got {type(event).__name__}")
        if capture_state.active:
            flush_fused()
        _device().stream_wait_event(self._h, event._h)

    def wait_stream(self, other: Stream) -> None:
        """Make future work on this stream wait for the work queued on ``other``."""
        if not isinstance(other, Stream):
            raise TypeError(f"expected a tensorplay.cuda.Stream to wait for, got {type(other).__name__}")
        if other is not self:
            self.wait_event(other.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one if None) on this stream and return it."""
        if event is not None and not isinstance(event, Event):
            raise TypeError(f"expected a tensorplay.cuda.Event or None, got {type(event).__name__}")
        event = Event() if event is None else event
        event.record(self)
        return event

    def is_capturing(self) -> bool:
        """True while this stream takes part in a graph capture."""
        return _device().capture_status(self._h) != "none"

    def __eq__(self, other) -> bool:
        return isinstance(other, Stream) and other._key == self._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __repr__(self) -> str:
        return f"<tensorplay.cuda.Stream handle={self._key:#x}>"

    def __del__(self, _release=_release) -> None:  # bound here: at exit the module's globals are cleared
        if getattr(self, "_owned", False):
            key = self._key
            _release(lambda dev: _retiring(dev.stream_destroy, key), self._h)


class Event:
    """A CUDA event: a marker in a stream that others can wait on or time.

    Examples
    --------
    >>> import tensorplay as tp
    >>> start, end = tp.cuda.Event(enable_timing=True), tp.cuda.Event(enable_timing=True)
    >>> start.record(); x = tp.ones(8) + 1; end.record(); end.synchronize()
    >>> start.elapsed_time(end) >= 0
    True
    """

    __slots__ = ("_h", "enable_timing", "_captured", "_recorded", "__weakref__")

    def __init__(self, enable_timing: bool = False) -> None:
        dev = _device()
        dev.ensure_thread()
        self.enable_timing = bool(enable_timing)
        self._h = dev.event_create(self.enable_timing)
        self._captured = False  # last recorded inside a capture: a point in a graph
        self._recorded = False  # recorded at all

    def record(self, stream: Stream | None = None) -> None:
        """Record the event on ``stream`` (the current stream if None)."""
        s = as_stream(stream)
        self._captured = bool(capture_state.active) and s.is_capturing()
        self._recorded = True
        if capture_state.active:
            flush_fused()
        _device().event_record(self._h, s._h)

    def wait(self, stream: Stream | None = None) -> None:
        """Make ``stream`` (the current stream if None) wait for this event."""
        as_stream(stream).wait_event(self)

    def synchronize(self) -> None:
        """Wait on the host until the event has completed."""
        refuse_captured_event("event.synchronize()", self._captured)
        refuse_host_wait("event.synchronize()")
        _device().event_synchronize(self._h)

    def query(self) -> bool:
        """True when the work before the event has completed."""
        refuse_captured_event("event.query()", self._captured)
        refuse_host_wait("event.query()")
        return _device().event_query(self._h)

    def elapsed_time(self, end: Event) -> float:
        """Milliseconds between this event and ``end`` (both recorded, both timing)."""
        if not isinstance(end, Event):
            raise TypeError(f"expected a tensorplay.cuda.Event as the end of elapsed_time(), got {type(end).__name__}")
        if not (self.enable_timing and end.enable_timing):
            raise ValueError("elapsed_time needs both events created with enable_timing=True")
        for which, event in (("this", self), ("the end", end)):
            if not event._recorded:
                raise ValueError(f"elapsed_time: {which} event was never recorded; record it on a stream first")
            refuse_captured_event("elapsed_time()", event._captured)
        return _device().event_elapsed_ms(self._h, end._h)

    def __repr__(self) -> str:
        return f"<tensorplay.cuda.Event timing={self.enable_timing}>"

    def __del__(self, _release=_release) -> None:
        if hasattr(self, "_h"):
            _release(lambda dev: dev.event_destroy, self._h)


retirement_hooks: list = []  # called with a collected stream's key before its handle goes (the allocator's)


def _retiring(destroy, key: int):
    """``destroy`` of a collected stream, after the hooks let go of what they keep for it."""

    def retire(handle) -> None:
        for hook in retirement_hooks:
            hook(key)
        destroy(handle)

    return retire


def _destroy(destroy, handle) -> None:
    """Destroy a collected stream's or event's handle. Python collects them at
    any moment, another thread's capture in progress too, which such a call
    would break: ``release_after_captures`` keeps it back until none is."""
    try:
        destroy(handle)
    except Exception:  # a handle the driver no longer knows (at exit): nothing to free
        pass


def default_stream() -> Stream:
    """The legacy default stream (handle 0)."""
    s = _singletons.get("default")
    if s is None:
        s = _singletons["default"] = Stream._wrap(_device().legacy_stream)
    return s


def capture_stream() -> Stream:
    """The side stream reserved for graph captures on this device, one per host
    thread (so that threads can capture at once)."""
    s = getattr(_tls, "capture", None)
    if s is None:
        s = _tls.capture = Stream()
    return s


def retire_capture_stream(s: Stream) -> None:
    """Stop using ``s`` as this thread's side capture stream (a capture left unfinished on it)."""
    if getattr(_tls, "capture", None) is s:
        del _tls.capture


def current_stream() -> Stream:
    """The stream that ops issued on this thread are launched on."""
    try:
        return _tls.stream
    except AttributeError:
        _device().ensure_thread()
        _tls.stream = default_stream()
        return _tls.stream


def set_stream(s: Stream) -> None:
    """Make ``s`` the current stream of this thread."""
    if not isinstance(s, Stream):
        raise TypeError(f"expected a tensorplay.cuda.Stream, got {type(s).__name__}")
    current_stream()
    _tls.stream = s


@contextmanager
def stream(s: Stream | None) -> Iterator[Stream | None]:
    """Make ``s`` the current stream inside the ``with`` block (None: no change)."""
    if s is None:
        yield None
        return
    prev = current_stream()
    set_stream(s)
    try:
        yield s
    finally:
        _tls.stream = prev


def synchronize() -> None:
    """Wait on the host until all work on the device has finished (Ctrl-C
    interrupts the wait)."""
    with capture_state.lock:  # no capture begins during the wait
        refuse_device_wide_wait("tp.cuda.synchronize()")
        _device().synchronize()


def is_current_stream_capturing() -> bool:
    """True while the current stream captures a graph (never creates a context)."""
    if not capture_state.active:
        return False
    return current_stream().is_capturing()
