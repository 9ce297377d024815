"""What the check names: an operation (its kind and name, where it runs, the
line that issued it) and the error it raises."""

from __future__ import annotations

import contextlib
import os
import sys
from dataclasses import dataclass

from ..backend.errors import HazardError
from .access import Access

__all__ = ["HazardError", "Op", "stream_name", "user_line"]


@dataclass(frozen=True, slots=True)
class Op:
    """An operation on the device: ``what`` it is ("kernel elementwise.mul_as_flat",
    "memcpy of 16 bytes"), ``where`` it runs (a stream, a graph's node) and the
    line of user code that issued it (None where none is known)."""

    what: str
    where: str
    line: tuple[str, int] | None

    def describe(self, access: Access) -> str:
        at = f", issued at {self.line[0]}:{self.line[1]}" if self.line is not None else ""
        return f"{self.what} on {self.where}{at}, {access.describe()}"


def stream_name(key: int) -> str:
    return "the legacy default stream" if key == 0 else f"stream {key:#x}"


_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_OURS: set[str] = set()  # the package's files seen in the frames walked
# The standard library's context managers run ours (``with g.while_():``, a compiled function's fused
# kernels written out as its tracing ends): the line to name is the user's ``with`` or call beyond them.
_THROUGH = frozenset({contextlib.__file__})


def user_line(depth: int = 1) -> tuple[str, int] | None:
    """(file, line) of the first caller outside tensorplay (and the standard
    library's ``contextlib``), from ``depth`` frames above the caller of this
    function; None when there is none. A frame of the package's files is known
    by a set lookup once seen."""
    frame, ours = sys._getframe(depth + 1), _OURS
    while frame is not None:
        filename = frame.f_code.co_filename
        if filename not in ours:
            if not filename.startswith(_PACKAGE) and filename not in _THROUGH:
                return filename, frame.f_lineno
            ours.add(filename)
        frame = frame.f_back
    return None
