"""``tensorplay.cuda.streams``, the contract's name for the runtime's streams
and events (``tensorplay.runtime.streams``), re-exported."""

from __future__ import annotations

from ..runtime.streams import (
    Event,
    Stream,
    capture_stream,
    current_stream,
    default_stream,
    set_stream,
    stream,
    synchronize,
)

__all__ = [
    "Event", "Stream", "capture_stream", "current_stream", "default_stream", "set_stream", "stream", "synchronize",
]  # fmt: skip
