"""What a test may leave behind that breaks the tests after it in its process
(``tests/conftest.py`` checks after every test, and after a failed one whether
the device is still usable: ``device_broken``).

A capture left in progress is the worst of it: a 'global' one forbids host
waits and allocations in every thread of the process, so every later test of
that process fails (on a GPU the suite once showed a hundred failures in
stretches, with nothing to tell which test began them). ``end_open_captures``
finds such captures, ends them so the next tests run as usual, and says which
they were, for the test that left them to fail by name.
"""

from __future__ import annotations

import gc

from tensorplay.runtime.backend import get as get_backend
from tensorplay.runtime.capture import capture_state


def end_open_captures() -> list[str]:
    """End every capture still in progress: a ``CUDAGraph``'s (found only while
    the capture bookkeeping counts one: the search walks every object) and any
    active one begun on the backend's streams directly (not one left
    invalidated on purpose, whose end can crash the driver); each is described
    in the list."""
    from tensorplay.cuda.graphs import CUDAGraph

    found = []
    if capture_state.active:
        for g in [o for o in gc.get_objects() if isinstance(o, CUDAGraph) and o._stream is not None]:
            thread = g._thread
            state = "running" if thread.is_alive() else "exited"
            found.append(f"a CUDAGraph's capture on stream {g._stream.handle:#x} (thread {thread.name!r}, {state})")
            try:
                g._end_collected()  # on its thread or not, keeping this thread's current stream
            except Exception as e:
                found.append(f"whose end raised {type(e).__name__}: {e}")
    dev = get_backend()
    for handle, stream in list(dev._streams.items()):  # not the invalidated: see CUDAGraph._abandon_capture
        if dev.capture_status(stream) == "active":
            found.append(f"a capture on stream {handle:#x} begun on the backend")
            try:
                dev.graph_destroy(dev.end_capture(stream))
            except Exception:
                pass  # ended all the same (an invalidated capture, or another thread's)
    for handle in list(capture_state.modes):  # bookkeeping of captures no graph holds any more
        found.append(f"the bookkeeping of a capture on stream {handle:#x}")
        capture_state.modes.pop(handle, None)
    capture_state.active = len(capture_state.modes)
    return found


def device_broken() -> str | None:
    """On a GPU, why the device no longer takes work (a sticky error, such as a
    kernel's illegal address, which every later call of the process returns),
    or None; None on the simulator and while a capture is in progress."""
    from tensorplay.runtime.backend import CudaError

    dev = get_backend()
    if dev.name != "cuda" or capture_state.active:
        return None
    try:
        dev.stream_query(dev.legacy_stream)  # without waiting: a loop left running must not hang the worker
    except CudaError as e:
        return str(e).splitlines()[0]
    return None
