"""The CUDA driver calls before a failed test, for failures the GPU shows at random.

With ``TENSORPLAY_DRIVER_TRACE=DIR`` set on the real backend, ``tests/conftest.py``
installs this before tensorplay is imported: every function of
``cuda.bindings.driver`` is wrapped, so the calls of tensorplay and of Numba
(which looks each function up there on first use) are both recorded, with the
calling thread and the result. When a test fails, the last calls go to
``DIR/<worker>.txt``; a call that failed is written with the Python stack that
made it, so a call that broke a capture elsewhere (a free or an unload from a
collected object, a copy on the legacy stream) shows where it came from.
"""

from __future__ import annotations

import collections
import os
import threading
import time
import traceback

KEPT = 600  # calls before a failure, all threads together

_calls: collections.deque = collections.deque(maxlen=KEPT)


def install() -> None:
    from cuda.bindings import driver as drv

    handles = tuple(getattr(drv, n) for n in ("CUstream", "CUgraph", "CUgraphExec", "CUdeviceptr", "CUmodule"))
    for name in [n for n in dir(drv) if n.startswith("cu") and callable(getattr(drv, n))]:
        setattr(drv, name, _traced(name, getattr(drv, name), handles))


def _traced(name: str, fn, handles):
    def call(*args):
        out = fn(*args)
        err = int(out[0]) if isinstance(out, tuple) and out else 0
        first = args[0] if args else None
        handle = int(first) if isinstance(first, handles) else (first if isinstance(first, int) else None)
        stack = "".join(traceback.format_stack(limit=14)[:-1]) if err else None
        _calls.append((time.perf_counter(), threading.current_thread().name, name, handle, err, stack))
        return out

    call.__name__ = call.__qualname__ = name
    return call


def dump(nodeid: str, directory: str) -> None:
    """Append the calls kept so far, and the failed test's name, to this worker's file."""
    os.makedirs(directory, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    calls = list(_calls)
    t0 = calls[0][0] if calls else 0.0
    with open(os.path.join(directory, f"{worker}.txt"), "a") as f:
        f.write(f"==== {nodeid}: the last {len(calls)} driver calls\n")
        for t, thread, name, handle, err, stack in calls:
            shown = "" if handle is None else handle
            f.write(f"{(t - t0) * 1e3:10.3f} ms  {thread:<24} {name}({shown}) -> {err}\n")
            if stack:
                f.write(stack)
    _calls.clear()
