"""What every gallery entry shares: its command line, its checks against a
reference nobody here wrote, and the table they print.

An entry records each check with ``Validation.at_most`` (a figure and its
limit) and ends with ``sys.exit(validation.report())``: the table, then a last
line, ``all N checks passed`` or ``FAILED: k of N checks``, and the exit status
(non-zero when one failed), which the tests read.

>>> v = Validation("demo")
>>> v.at_most("largest error", 1e-9, 1e-6)
True
>>> v.report(out=lambda line: None)
0
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import tensorplay as tp

DOCS = Path(__file__).resolve().parent.parent.parent / "docs" / "gallery"  # where the pictures go by default
QUICK = "quick-pictures"  # where quick runs draw them with --plot (in the current folder)


@dataclass(frozen=True, slots=True)
class Check:
    """One figure against its limit: ``value <= limit`` passes."""

    what: str
    value: float
    limit: float

    @property
    def ok(self) -> bool:
        return bool(self.value <= self.limit)  # NaN fails


class Validation:
    """The checks of one run, printed as a table by ``report``."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.checks: list[Check] = []

    def at_most(self, what: str, value: float, limit: float) -> bool:
        """Record that ``value`` should be at most ``limit``; returns whether it is."""
        check = Check(what, float(value), float(limit))
        self.checks.append(check)
        return check.ok

    def equal(self, what: str, value: float, expected: float) -> bool:
        """Record that ``value`` should equal ``expected`` (their difference at most 0)."""
        return self.at_most(f"{what} (got {value:g}, expected {expected:g}): difference", abs(value - expected), 0)

    @property
    def passed(self) -> bool:
        return all(c.ok for c in self.checks)

    def report(self, out: Callable[[str], None] = print) -> int:
        """Print the table and the verdict; returns the exit status (0 when every check passed)."""
        if not self.checks:
            raise ValueError(f"{self.title}: expected at least one check before report(), got none")
        width = max(len(c.what) for c in self.checks)
        out(f"validation: {self.title}")
        for c in self.checks:
            out(f"  {c.what:<{width}}  {c.value:10.3g}  <= {c.limit:<8.3g}  {'ok' if c.ok else 'FAILED'}")
        failed = sum(not c.ok for c in self.checks)
        out(f"FAILED: {failed} of {len(self.checks)} checks" if failed else f"all {len(self.checks)} checks passed")
        return 1 if failed else 0


def parser(doc: str) -> argparse.ArgumentParser:
    """The options every entry takes: ``--quick`` (sizes the simulator runs in
    seconds), ``--plot`` (draw the pictures in quick mode too) and ``--pictures``
    (their folder; an entry with another default folder sets ``docs``)."""
    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(docs=str(DOCS))
    p.add_argument("--quick", action="store_true", help="small sizes that run on the simulator in seconds")
    p.add_argument("--plot", action="store_true", help="draw the pictures in quick mode too")
    p.add_argument(
        "--pictures",
        default=None,
        help=f"the folder the pictures go to (default: the page's folder under docs/; with --quick, {QUICK})",
    )
    return p


def pictures_folder(args: argparse.Namespace) -> Path | None:
    """Where to draw the pictures, or None: full runs draw them (into ``docs``, or ``--pictures``),
    quick runs only with ``--plot`` (into ``QUICK``, not over the full runs' pictures, or ``--pictures``)."""
    if args.quick and not args.plot:
        return None
    folder = Path(args.pictures or (QUICK if args.quick else args.docs))
    os.makedirs(folder, exist_ok=True)
    return folder


def timed(fn: Callable[[], object]) -> float:
    """Seconds that ``fn()`` and the device work it queues take."""
    tp.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    tp.cuda.synchronize()
    return time.perf_counter() - t0


def backend_line(what: str) -> str:
    """The first line an entry prints: what it solves, and where."""
    where = tp.cuda.get_device_name() if tp.cuda.backend() == "cuda" else "the CPU simulator"
    return f"{what} (backend {tp.cuda.backend()}: {where})"


def timing_note() -> str | None:
    """What the simulator's times mean (nothing on a GPU)."""
    if tp.cuda.backend() == "sim":
        return "(on the simulator these times measure Python, not a GPU; the answers are what is checked)"
    return None
