"""Stopping a running graph's while loops: ``CUDAGraph.cancel()``, and Ctrl-C
during a host wait, which cancels every captured graph holding loops.

Each such graph has one int64 cancel request outside its pool, which its
loops' start and end-of-pass kernels read (``kernels/conditional.py``);
``cancel()`` sets it with a fill on the cancel stream, a stream of its own
that runs beside the graph, and the next replay clears it on its own stream
first. See docs/internals.md, "Cancelling".
"""

from __future__ import annotations

import weakref

from .. import _dtype as dt
from .._factories import empty
from ..runtime.backend import get as get_backend
from ..runtime.backend.interrupts import on_interrupt
from ..runtime.streams import Stream
from ..runtime.streams import stream as use_stream

__all__ = ["Cancelling", "cancel_stream", "cancellable"]

_WITH_LOOPS: weakref.WeakSet = weakref.WeakSet()  # captured graphs holding while loops: Ctrl-C cancels them
_cancel_streams: list[Stream] = []  # one, made before the first capture: its fills run beside a running graph


def cancel_stream() -> Stream:
    """The stream cancels are written on (made at the first call)."""
    if not _cancel_streams:
        _cancel_streams.append(Stream())
    return _cancel_streams[0]


def cancellable(graph) -> None:
    """Let Ctrl-C during a host wait cancel ``graph`` (a captured graph holding loops)."""
    _WITH_LOOPS.add(graph)


def _cancel_all() -> None:
    """Ctrl-C during a host wait: stop the loops of every graph that may be running."""
    for g in list(_WITH_LOOPS):
        if g._stream is None:
            g.cancel()


on_interrupt(_cancel_all)


class Cancelling:
    """``CUDAGraph``'s cancel methods (mixed in; ``_cancel``, ``_cancel_pending``,
    ``_withdrawn`` and ``_loops`` are the graph's)."""

    def cancel(self) -> None:
        """Stop every while loop of this graph at its next pass.

        For a replay that is running (or queued): a fill on a stream of its own,
        which runs beside the graph, sets each loop's cancel request, which the
        loop reads at the end of every pass. The graph's later nodes still run,
        and the next ``replay()`` runs normally. Ctrl-C during a host wait does
        this for every graph with loops; ``cancelled()`` lists the loops it
        stopped. A graph without while loops has nothing to stop.

        Examples
        --------
        >>> import threading
        >>> import tensorplay as tp
        >>> flag, n = tp.tensor([True]), tp.zeros(1)
        >>> g = tp.cuda.CUDAGraph()
        >>> with tp.cuda.graph(g):
        ...     with g.while_(flag) as loop:
        ...         _ = n.add_(1)  # never clears the flag: runs until cancelled
        >>> threading.Timer(0.2, g.cancel).start()  # from another thread, while it runs
        >>> g.replay(); tp.cuda.synchronize()
        >>> g.cancelled() == [loop], n.item() > 0
        (True, True)
        """
        if self._stream is not None:
            raise RuntimeError("cancel() during a capture; it stops the loops of a replay: call it after capture_end()")
        if self._loops:
            stream = cancel_stream()
            if self._withdrawn is not None:  # after the clear a queued replay makes first, which would undo the fill
                stream.wait_event(self._withdrawn)
            get_backend().memset(self._cancel.data_ptr(), 1, 8, stream._h)
            self._cancel_pending = True

    def _withdraw_cancel(self, s: Stream) -> None:
        """Clear the cancel request on ``s``, after any cancel's fill; a later
        ``cancel()`` fills it only after this clear (the event ``_withdrawn``)."""
        s.wait_stream(cancel_stream())
        get_backend().memset(self._cancel.data_ptr(), 0, 8, s._h)
        self._withdrawn = s.record_event()
        self._cancel_pending = False

    def _cancel_request(self):
        """The cancel request, made at the capture's first while loop: allocated
        on the cancel stream, which no capture routes to a pool (a pool's block
        may hold other tensors of the graph before a loop starts)."""
        if self._cancel is None:
            with use_stream(cancel_stream()):
                self._cancel = empty(1, dtype=dt.int64)
        return self._cancel
