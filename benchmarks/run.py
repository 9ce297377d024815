"""Run the benchmarks and print one table: tensorplay next to PyTorch, CuPy and
the raw driver, all measured in this process. Writes JSON beside the table.

    python -m benchmarks.run [--json PATH] [--only SECTION ...]
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform

import tensorplay as tp
from benchmarks import (
    conditional,
    conditional_kinds,
    eager,
    fusion,
    graph_changes,
    graph_ops,
    graphs,
    heat,
    matmul,
    reductions,
    temporaries,
    training,
)
from benchmarks.common import Progress

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
}


def _fmt(v) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def table(rows: list) -> str:
    cols = ["name", "tensorplay", "torch", "cupy", "jax", "driver", "ratio", "target"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        ref = r.get("torch")
        if ref and r.get("tensorplay"):
            ratio = r["tensorplay"] / ref
            r["ratio"] = f"{ratio:.2f}x torch"
        lines.append("| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", default="benchmarks.json")
    parser.add_argument("--only", nargs="*", default=list(MODULES))
    args = parser.parse_args()
    sections = [(fn, steps) for name in args.only for fn, steps in MODULES[name].SECTIONS]
    progress = Progress(sum(steps for _, steps in sections))
    rows: list = []
    for fn, _ in sections:
        try:
            fn(rows, progress)
        except Exception as e:  # one broken section must not hide the others' figures
            name = getattr(fn, "__name__", None) or getattr(fn, "func", fn).__name__  # a partial names its function
            rows.append({"name": f"{fn.__module__}.{name} FAILED", "target": f"{type(e).__name__}: {e}"[:200]})
    meta = {
        "date": datetime.date.today().isoformat(),
        "device": tp.cuda.get_device_name(),
        "backend": tp.cuda.backend(),
        "python": platform.python_version(),
    }
    text = table(rows)
    print(f"\n{meta['date']} on {meta['device']} ({meta['backend']})\n\n{text}")
    with open(args.json, "w") as f:
        json.dump({"meta": meta, "rows": rows}, f, indent=1, default=str)


if __name__ == "__main__":
    main()
