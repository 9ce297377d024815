"""Run the benchmarks and print one table: tensorplay next to PyTorch, CuPy, JAX
and the raw driver, all measured in this run. Writes JSON beside the table.

    python -m benchmarks.run [--json PATH] [--only SECTION ...]

Each row carries its target and whether this run met it (``benchmarks/targets.py``);
the run ends with the misses, named. A section that raises, a failed correctness
check included, leaves a FAILED row and makes the run exit with status 1, after
the other sections have run. On the simulator the sections run with small sizes,
as a check of the code, and no target is judged.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import traceback

import tensorplay as tp
from benchmarks import (
    array_ops,
    capture_cost,
    conditional,
    conditional_kinds,
    distributed,
    eager,
    fft,
    fusion,
    gallery,
    graph_changes,
    graph_ops,
    graphs,
    heat,
    linalg,
    matmul,
    reductions,
    spectral,
    temporaries,
    training,
)
from benchmarks.common import Progress
from benchmarks.targets import unjudged

MODULES = {
    "eager": eager,
    "graphs": graphs,
    "conditional": conditional,
    "conditional_kinds": conditional_kinds,
    "reductions": reductions,
    "matmul": matmul,
    "graph_ops": graph_ops,
    "graph_changes": graph_changes,
    "temporaries": temporaries,
    "training": training,
    "heat": heat,
    "fusion": fusion,
    "fft": fft,
    "linalg": linalg,
    "capture_cost": capture_cost,
    "array_ops": array_ops,
    "spectral": spectral,
    "gallery": gallery,
    "distributed": distributed,
}
LONG = ("gallery",)  # every entry at full size beside JAX (three configurations, each its own process) and CuPy
COLUMNS = ["name", "tensorplay", "torch", "cupy", "jax", "driver", "ratio", "target", "met"]


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def table(rows: list) -> str:
    """A Markdown table of ``rows``; ``ratio`` is tensorplay's figure over torch's, in the row's unit."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        ref = r.get("torch")
        if ref and r.get("tensorplay") is not None and "ratio" not in r:
            r["ratio"] = f"{r['tensorplay'] / ref:.2f}x torch"
        lines.append("| " + " | ".join(_fmt(r.get(c)) for c in COLUMNS) + " |")
    return "\n".join(lines)


def summary(rows: list) -> dict:
    """The run's verdicts: targets met, missed (by name), not judged, and the sections that failed."""
    failed = [r["name"] for r in rows if r.get("failed")]
    missed = [r["name"] for r in rows if r.get("met") is False and not r.get("failed")]
    return {
        "met": sum(r.get("met") is True for r in rows),
        "missed": missed,
        "not_judged": sum(r.get("met") is None and not r.get("failed") for r in rows),
        "failed": failed,
    }


def _section_name(fn) -> str:
    name = getattr(fn, "__name__", None) or getattr(fn, "func", fn).__name__  # a partial names its function
    module = getattr(fn, "__module__", None) or getattr(fn, "func", fn).__module__
    return f"{module}.{name}"


def run_sections(sections: list, progress) -> list:
    """Run each ``(fn, steps)``; one that raises leaves a FAILED row and the rest still run."""
    rows: list = []
    for fn, _ in sections:
        try:
            fn(rows, progress)
        except Exception as e:
            traceback.print_exc(file=sys.stderr)
            error = f"{type(e).__name__}: {e}"[:300]
            rows.append({"name": f"{_section_name(fn)} FAILED", "failed": True, "met": False, "target": error})
    return rows


def commit() -> str:
    """The code's commit: ``$GIT_COMMIT`` where set (a copied tree), else git's short hash
    (``+changes`` when the working tree differs from it), else ``unknown``."""
    if os.environ.get("GIT_COMMIT"):
        return os.environ["GIT_COMMIT"]
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], capture_output=True).returncode
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+changes" if dirty else "")


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", default="benchmarks.json", help="where the rows and verdicts go")
    parser.add_argument("--only", nargs="*", default=[m for m in MODULES if m not in LONG], choices=list(MODULES),
                        metavar="SECTION", help=f"sections to run (default: all but {', '.join(LONG)}): "
                        f"{', '.join(MODULES)}")  # fmt: skip
    args = parser.parse_args(argv)
    sections = [(fn, steps) for name in args.only for fn, steps in MODULES[name].SECTIONS]
    progress = Progress(sum(steps for _, steps in sections))
    rows = run_sections(sections, progress)
    backend = tp.cuda.backend()
    if backend != "cuda":
        unjudged(rows, "the simulator's times say nothing of a GPU's")
    meta = {
        "date": datetime.date.today().isoformat(),
        "device": tp.cuda.get_device_name(),
        "backend": backend,
        "python": platform.python_version(),
        "commit": commit(),
        "sections": args.only,
    }
    verdict = summary(rows)
    print(f"\n{meta['date']} on {meta['device']} ({backend})\n\n{table(rows)}\n")
    print(f"targets: {verdict['met']} met, {len(verdict['missed'])} missed, {verdict['not_judged']} not judged")
    for name in verdict["missed"]:
        print(f"  missed: {name}")
    for name in verdict["failed"]:
        print(f"  FAILED: {name}")
    with open(args.json, "w") as f:
        json.dump({"meta": meta, "summary": verdict, "rows": rows}, f, indent=1, default=str)
    if verdict["failed"]:
        print(f"{len(verdict['failed'])} section(s) failed: the run exits with status 1", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
