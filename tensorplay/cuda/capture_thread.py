"""A capture belongs to the thread that began it.

The current stream is thread-local: ``capture_begin()`` on the legacy default
stream makes the side capture stream the current stream of the thread that
calls it until ``capture_end()``, and opening a conditional node makes its
body's stream current, until the node closes. Only that thread can set its
stream back, and the driver ends a 'global' or 'thread_local' capture only on
that thread (``CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD`` elsewhere). So:

- the calls that end a capture or move it between streams refuse another
  thread before anything changes (``refuse_other_thread``): ``capture_end()``
  and the conditional-node calls;
- a ``CUDAGraph`` collected in the middle of its capture (its last reference
  dropped, or Python's cyclic collector run, on some thread) discards the
  capture on the capture's own thread, as ``__del__`` always did there; on
  another thread it touches nothing of that thread's and waits for its own,
  which discards the capture when it next begins one (``capture_begin()``,
  ``tp.cuda.graph()``: ``end_collected_captures``). Once that thread has
  exited, the collecting thread ends the capture itself and keeps its own
  current stream: the driver ends a 'relaxed' capture on any thread, and a
  'global' or 'thread_local' one too, refusing the call
  (``CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD``) but ending it, as measured on
  an H100 with driver 580 (``ThreadOwned``).

Examples
--------
>>> import threading
>>> import tensorplay as tp
>>> g = tp.cuda.CUDAGraph()
>>> g.capture_begin()
>>> refused = []
>>> def end_elsewhere():
...     try:
...         g.capture_end()
...     except tp.cuda.CaptureError as e:
...         refused.append(str(e))
>>> t = threading.Thread(target=end_elsewhere, name="other"); t.start(); t.join()
>>> refused[0].startswith("capture_end() on thread 'other', but thread ")
True
>>> g.capture_end()  # on its own thread
"""

from __future__ import annotations

import collections
import threading

from ..runtime.backend import CaptureError
from ..runtime.streams import Stream, current_stream, set_stream

__all__ = ["ThreadOwned", "end_collected_captures", "refuse_other_thread"]

# (thread, graph): graphs collected mid-capture on a thread other than the capture's,
# kept for that thread. A deque, which __del__ (run wherever the collector runs,
# perhaps inside a call that holds a lock) appends to without a lock of its own.
_collected: collections.deque = collections.deque()


def refuse_other_thread(call: str, owner: threading.Thread, s: Stream) -> None:
    """Raise ``CaptureError`` if this thread is not ``owner``, which began the
    capture on ``s``: ``call`` would end it or move it between streams."""
    me = threading.current_thread()
    if owner is not me:
        raise CaptureError(
            f"{call} on thread {me.name!r}, but thread {owner.name!r} began the capture on stream {s.handle:#x}, "
            "and a capture belongs to the thread that began it (its current stream is the capture's until the "
            f"end); call {call} on that thread (this capture is still open)"
        )


def end_collected_captures() -> None:
    """End and discard the captures of graphs collected on other threads that
    this thread began, or whose thread has exited (``capture_begin()`` and
    ``tp.cuda.graph()`` call this first: this thread's current stream may
    still be such a capture's)."""
    if not _collected:
        return
    me, mine = threading.current_thread(), []
    for _ in range(len(_collected)):
        try:
            item = _collected.popleft()
        except IndexError:  # another thread took the rest
            break
        if item[0] is me or not item[0].is_alive():
            mine.append(item[1])
        else:
            _collected.append(item)
    for graph in mine:
        try:
            graph._end_collected()
        except Exception:
            pass  # as in __del__: nothing to tell the caller, whose graph this was not


class ThreadOwned:
    """What ``CUDAGraph.__del__`` does with a capture still in progress (mixed
    into ``CUDAGraph``, whose ``capture_begin`` sets ``_thread`` and whose
    ``_abort_capture`` and ``_destroy`` it calls)."""

    def _collected_mid_capture(self) -> None:
        """Discard the capture and free the graph, on the capture's own thread;
        on another, leave both to that thread (the graph lives on in
        ``_collected`` until then) or, once it has exited, do it here."""
        if self._thread is threading.current_thread() or not self._thread.is_alive():
            self._end_collected()
        else:
            _collected.append((self._thread, self))

    def _end_collected(self) -> None:
        """What ``_collected_mid_capture`` decided, on the capture's thread or once that has exited."""
        if self._thread is threading.current_thread():
            self._abort_capture()
            self._destroy()
            return
        here = current_stream()  # which _abort_capture sets back as the capture's thread's
        try:
            self._abort_capture()  # the driver's refusal of another thread's end is set aside: it ended
            self._destroy()
        finally:
            set_stream(here)
