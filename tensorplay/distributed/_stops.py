"""How a rank tells the launcher (``run.py``) that it began to stop, and why.

When a rank fails, its peers fail too, for hearing of it (``DistributedError``),
and may end before it does (its traceback, its exit from the group). The
launcher names the rank that failed of itself: each rank it starts notes in
the file ``TENSORPLAY_STOP_FILE`` names, once, when it began to stop and
whether for the group's failure.

This module imports nothing of tensorplay.
"""

from __future__ import annotations

import os
import time

__all__ = ["STOP_FILE", "note_stopping", "stopped"]

STOP_FILE = "TENSORPLAY_STOP_FILE"


def note_stopping(heard: bool = False) -> None:
    """Note that this rank began to stop, once: for an uncaught exception
    (``heard`` when that is the group's failure), or at its exit in a group."""
    path = os.environ.get(STOP_FILE, "")
    if not path or os.path.exists(path):
        return
    try:
        with open(path + ".part", "w") as f:
            f.write(f"{time.time()!r} {int(heard)}")
        os.replace(path + ".part", path)  # whole or absent to the launcher's read
    except OSError:
        pass


def stopped(path: str) -> tuple[float, bool] | None:
    """(when, whether for the group's failure) a rank noted in ``path``, or None."""
    try:
        with open(path) as f:
            when, heard = f.read().split()
        return float(when), heard == "1"
    except (OSError, ValueError):
        return None
