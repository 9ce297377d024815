"""Streams and events, and the current stream of each thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .backend import CaptureError
from .backend import get as _device

__all__ = [
    "Event",
    "capture_state",
    "Stream",
    "capture_stream",
    "current_stream",
    "default_stream",
    "set_stream",
    "stream",
    "synchronize",
]

_tls = threading.local()


class _CaptureState:
    """The captures in progress in this process, for checks made before a call
    reaches the device (so both backends give the same sentence).

    The rules are the driver's, as measured on the H200 (driver 580): a
    ``global`` capture forbids host waits and allocations in every thread, a
    ``thread_local`` one in its own thread, a ``relaxed`` one nowhere; a
    context-wide synchronise breaks a capture of any mode, from any thread.
    """

    def __init__(self) -> None:
        self.active = 0
        self.modes: dict[int, tuple[str, int]] = {}  # stream key -> (capture mode, thread)

    def begin(self, s: Stream, mode: str) -> None:
        self.modes[s._key] = (mode, threading.get_ident())
        self.active = len(self.modes)

    def end(self, s: Stream) -> None:
        self.modes.pop(s._key, None)
        self.active = len(self.modes)

    def prohibiting(self) -> tuple[int, str, int] | None:
        """(stream key, mode, thread) of a capture that forbids host waits on
        this thread, or None."""
        if not self.active:
            return None
        me = threading.get_ident()
        for key, (mode, thread) in list(self.modes.items()):
            if mode == "global" or (mode == "thread_local" and thread == me):
                return key, mode, thread
        return None

    def owned_strict(self) -> int | None:
        """The stream key of a non-relaxed capture this thread has open, or None:
        work this thread puts on the legacy default stream would not be in it."""
        me = threading.get_ident()
        for key, (mode, thread) in list(self.modes.items()):
            if thread == me and mode != "relaxed":
                return key
        return None

    def refuse(self, what: str, s: Stream | None = None) -> None:
        """CaptureError if ``what`` (a host wait) would break a capture in progress."""
        if not self.active:
            return
        if s is not None and s._key in self.modes:
            raise CaptureError(
                f"{what} waits on the host, which is not allowed while stream {s._key:#x} is capturing "
                "a graph; wait before capture_begin() or after capture_end()"
            )
        found = self.prohibiting()
        if found is not None:
            raise CaptureError(_capture_advice(what, *found))

    def refuse_context_wide(self, what: str) -> None:
        """CaptureError while any capture is in progress: a device-wide wait
        breaks captures of every mode, in every thread."""
        if not self.active:
            return
        key, (mode, thread) = next(iter(list(self.modes.items())))
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


def _capture_advice(what: str, key: int, mode: str, thread: int) -> str:
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


def as_stream(s, what: str = "stream") -> Stream:
    """``s`` if it is a Stream, the current stream if None; else a TypeError."""
    if s is None:
        return current_stream()
    if not isinstance(s, Stream):
        raise TypeError(f"expected {what}= to be a tensorplay.cuda.Stream or None, got {type(s).__name__}")
    return s


capture_state = _CaptureState()
_singletons: dict[str, Stream] = {}


class Stream:
    """A non-blocking CUDA stream (on the simulator, an ordered queue).

    Examples
    --------
    >>> import tensorplay as tp
    >>> s = tp.cuda.Stream()
    >>> with tp.cuda.stream(s):
    ...     y = tp.ones(4) * 2
    >>> s.synchronize()
    >>> y.tolist()
    [2.0, 2.0, 2.0, 2.0]
    """

    __slots__ = ("_h", "_key", "_owned", "__weakref__")

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
        capture_state.refuse("stream.synchronize()", self)
        _device().stream_synchronize(self._h)

    def query(self) -> bool:
        """True when all work queued on this stream has finished."""
        capture_state.refuse("stream.query()", self)
        return _device().stream_query(self._h)

    def wait_event(self, event: Event) -> None:
        """Make future work on this stream wait for ``event`` (no host sync)."""
        if not isinstance(event, Event):
            raise TypeError(f"expected a tensorplay.cuda.Event, got {type(event).__name__}")
        _device().stream_wait_event(self._h, event._h)

    def wait_stream(self, other: Stream) -> None:
        """Make future work on this stream wait for the work queued on ``other``."""
        if not isinstance(other, Stream):
            raise TypeError(f"expected a tensorplay.cuda.Stream to wait for, got {type(other).__name__}")
        if other is not self:
            self.wait_event(other.record_event())

    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new one if None) on this stream and return it."""
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

    def __del__(self) -> None:
        if getattr(self, "_owned", False):
            try:
                _device().stream_destroy(self._h)
            except Exception:
                pass


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

    __slots__ = ("_h", "enable_timing", "_captured", "__weakref__")

    def __init__(self, enable_timing: bool = False) -> None:
        dev = _device()
        dev.ensure_thread()
        self.enable_timing = bool(enable_timing)
        self._h = dev.event_create(self.enable_timing)
        self._captured = False  # last recorded inside a capture: a point in a graph

    def record(self, stream: Stream | None = None) -> None:
        """Record the event on ``stream`` (the current stream if None)."""
        s = as_stream(stream)
        self._captured = bool(capture_state.active) and s.is_capturing()
        _device().event_record(self._h, s._h)

    def wait(self, stream: Stream | None = None) -> None:
        """Make ``stream`` (the current stream if None) wait for this event."""
        as_stream(stream).wait_event(self)

    def synchronize(self) -> None:
        """Wait on the host until the event has completed."""
        self._refuse_if_captured("event.synchronize()")
        capture_state.refuse("event.synchronize()")
        _device().event_synchronize(self._h)

    def query(self) -> bool:
        """True when the work before the event has completed."""
        self._refuse_if_captured("event.query()")
        capture_state.refuse("event.query()")
        return _device().event_query(self._h)

    def _refuse_if_captured(self, what: str) -> None:
        if self._captured:
            raise CaptureError(
                f"{what} on an event recorded during a graph capture: such an event marks a point in the "
                "graph, not in a stream, so only stream.wait_event() inside that capture can use it; "
                "record an event after replay() to wait for or query a replay"
            )

    def elapsed_time(self, end: Event) -> float:
        """Milliseconds between this event and ``end`` (both recorded, both timing)."""
        if not (self.enable_timing and end.enable_timing):
            raise ValueError("elapsed_time needs both events created with enable_timing=True")
        return _device().event_elapsed_ms(self._h, end._h)

    def __repr__(self) -> str:
        return f"<tensorplay.cuda.Event timing={self.enable_timing}>"

    def __del__(self) -> None:
        try:
            _device().event_destroy(self._h)
        except Exception:
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
    capture_state.refuse_context_wide("tp.cuda.synchronize()")
    _device().synchronize()


def refuse_during_capture(what: str, s: Stream | None = None) -> None:
    """Raise ``CaptureError`` if ``s`` (the current stream if None) is capturing,
    or if another stream's capture forbids host waits (global and thread-local modes)."""
    s = s or current_stream()
    if _device().capture_status(s._h) != "none":
        raise CaptureError(
            f"{what} is not allowed while stream {s.handle:#x} is capturing a graph; "
            "do it before capture_begin() or after capture_end()"
        )
    capture_state.refuse(what)
