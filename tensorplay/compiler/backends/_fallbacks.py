"""Why a compiled function runs a signature eagerly, said once.

Each reason is a ``Warner.once`` call with a sentence that says what the
function did, where (the user's source line, for a host read), and what to
do to replay a graph. Warnings point at the user's call of the compiled
function: the first frame outside tensorplay.
"""

from __future__ import annotations

import os
import sys
import traceback
import warnings

from ._trees import differences

__all__ = ["Warner", "user_line"]

_PACKAGE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # .../tensorplay


def _ours(filename: str) -> bool:
    return os.path.abspath(filename).startswith(_PACKAGE + os.sep)


def _stacklevel() -> int:
    """The ``stacklevel`` of the first caller outside tensorplay, seen from ``Warner.once``."""
    frame, level = sys._getframe(2), 2
    while frame is not None and _ours(frame.f_code.co_filename):
        frame, level = frame.f_back, level + 1
    return level


def user_line(error: BaseException) -> str:
    """``file:line (source)`` of the innermost frame outside tensorplay in
    ``error``'s traceback: the user's line that did what was refused."""
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not _ours(f.filename)]
    if not frames:
        return "a line of tensorplay"
    f = frames[-1]
    return f"{f.filename}:{f.lineno} ({f.line})" if f.line else f"{f.filename}:{f.lineno}"


class Warner:
    """The eager fallbacks of one compiled function (``name``), each warned once."""

    __slots__ = ("name", "given")

    def __init__(self, name: str) -> None:
        self.name = name
        self.given: set[str] = set()

    def once(self, reason: str, message: str) -> None:
        if reason not in self.given:
            self.given.add(reason)
            warnings.warn(message, UserWarning, stacklevel=_stacklevel())

    def reset(self) -> None:
        self.given.clear()

    # -- the reasons -------------------------------------------------------------------
    def limit(self, cap: int, keys: list) -> None:
        """``cap`` signatures seen (``keys``, the new one last): new ones run eagerly."""
        found = differences(keys)
        if found:
            parts = [f"{what} ({', '.join(shown[:4])}{', ...' if len(shown) > 4 else ''})" for what, shown, _ in found]
            differ = f", which differ in {'; '.join(parts[:3])}"
            advice = "; ".join(dict.fromkeys(advice for _, _, advice in found[:3]))
        else:
            differ, advice = "", "keep the arguments' shapes, dtypes and values fixed"
        self.once(
            "limit",
            f"compiled {self.name} has seen {cap} argument signatures{differ}; each has its own graph and memory, "
            f"so new ones now run eagerly. To replay graphs, {advice}; or call reset() to start again",
        )

    def unstaged(self) -> None:
        self.once(
            "unstaged",
            f"compiled {self.name} got tensor arguments of different dtypes over the same memory, which its graph "
            "cannot stage as they share it; calls with such arguments run eagerly (pass tensors that do not "
            "share memory, or views of one dtype, to replay a graph)",
        )

    def changing_state(self) -> None:
        self.once(
            "changing_state",
            f"compiled {self.name} reads tensors or numbers besides its arguments (globals, its closure, a "
            "module's attributes) that keep changing between calls, and each new state is warmed up and captured "
            "anew; pass what changes as an argument (a tensor, updated in place) to replay one graph",
        )

    def shares_state(self) -> None:
        self.once(
            "shares_state",
            f"compiled {self.name} got a tensor argument over the memory of a tensor it reads besides its "
            "arguments (one it closes over, a global it names, a module's parameter or attribute): its graph "
            "stages arguments into copies, so the two would no longer be one memory; such calls run eagerly. "
            "To replay a graph, pass a tensor of its own (.clone())",
        )

    def uncapturable(self, error: BaseException) -> None:
        """``fn`` did what a capture refuses (``error``, a CaptureError)."""
        text = str(error)
        if text.startswith("reading a tensor back"):
            did = "reads a tensor's value on the host (.item(), .tolist(), .numpy() or bool())"
            fix = "compute with tensor ops instead (tp.where for a branch), or read the value outside the function"
        else:
            did = f"does what a graph capture refuses ({text.split(';')[0]})"
            fix = "move that out of the function"
        self.once(
            "uncapturable",
            f"compiled {self.name} {did} at {user_line(error)}, which a CUDA graph cannot capture (a replay would "
            f"not run that line again); calls with these arguments run eagerly from now on. To replay a graph, {fix}",
        )

    def opaque(self, path: str, kind: str) -> None:
        self.once(
            "opaque",
            f"compiled {self.name} returns a {kind}, which its graph cannot hand out afresh at each call (found "
            f"at {path}); calls with these arguments run eagerly. To replay a graph, return tensors in tuples, "
            "lists, dicts or namedtuples",
        )

    def unmappable(self, index: int) -> None:
        self.once(
            "unmappable",
            f"compiled {self.name} returns a view of argument {index} that its graph cannot give back as a view "
            "of the caller's tensor (whose elements have gaps between them); calls with these arguments run "
            "eagerly. To replay a graph, pass a contiguous tensor, or return a new tensor (.clone())",
        )

    def aliased_with_grad(self, index: int) -> None:
        self.once(
            "aliased_with_grad",
            f"compiled {self.name} returns argument {index} or a view of it while autograd records the call, "
            "which its graphed backward cannot give back as eagerly; calls with these arguments run eagerly. "
            "To replay a graph, return a new tensor (.clone())",
        )
