"""Temporaries: how many allocations each op makes, and how high it takes the
allocator's peak, measured with ``memory_stats()`` next to PyTorch's.

For each op: allocations = the growth of ``num_allocs`` (torch:
``allocation.all.allocated``); peak / output = the rise of ``allocated_bytes``'
peak over the bytes the op's outputs still hold afterwards, both in the
allocator's block sizes. An op that allocates only its output scores 1 and 1.0.
Runs on the simulator too (allocation counts do not depend on the device).
"""

from __future__ import annotations

import tensorplay as tp
from benchmarks.common import on_gpu, peer
from benchmarks.targets import judge

# (expression, fn(lib, x, y, w, c)) with lib tensorplay or torch
OPS = [
    ("x + y", lambda m, x, y, w, c: x + y),
    ("x * 2", lambda m, x, y, w, c: x * 2),
    ("x.sum()", lambda m, x, y, w, c: x.sum()),
    ("x.sum(-1)", lambda m, x, y, w, c: x.sum(-1)),
    ("x.mean(0)", lambda m, x, y, w, c: x.mean(0)),
    ("x @ w", lambda m, x, y, w, c: x @ w),
    ("where(c, x, y)", lambda m, x, y, w, c: m.where(c, x, y)),
    ("x.clamp(0, 1)", lambda m, x, y, w, c: x.clamp(0, 1)),
    ("cat([x, y])", lambda m, x, y, w, c: m.cat([x, y])),
    ("x.t().contiguous()", lambda m, x, y, w, c: x.t().contiguous()),
    ("x.exp()", lambda m, x, y, w, c: x.exp()),
]


def measure(op, sync, stats, reset_peak, keys) -> tuple[int, float | None]:
    """(allocations, peak / output bytes) of one call of ``op`` after a warm-up call.

    ``keys``: the stats names of (allocation count, current bytes, peak bytes)."""
    count, current, peak = keys
    op()  # compiles kernels and fills the allocator's cache; its output is freed here
    sync()
    before = stats()
    reset_peak()
    out = op()  # held until the stats are read: its bytes are the output's
    sync()
    after = stats()
    del out
    held = after[current] - before[current]
    return after[count] - before[count], (after[peak] - before[current]) / held if held else None


def temporaries(rows: list, progress) -> None:
    r, k, n = (4096, 4096, 1024) if on_gpu() else (8, 32, 8)
    x, y, w = tp.rand(r, k), tp.rand(r, k), tp.rand(k, n)
    c = x > 0.5
    args = (tp, x, y, w, c)
    tp_keys = ("num_allocs", "allocated_bytes.current", "allocated_bytes.peak")
    torch = peer("torch")
    if torch is not None:
        t_args = (torch, *(torch.from_numpy(v.numpy()).cuda() for v in (x, y, w, c)))
        t_keys = ("allocation.all.allocated", "allocated_bytes.all.current", "allocated_bytes.all.peak")
    for expr, fn in OPS:
        allocs, ratio = measure(
            lambda fn=fn: fn(*args), tp.cuda.synchronize, tp.cuda.memory_stats, tp.cuda.reset_peak_memory_stats, tp_keys
        )
        row = {"unit": "allocs", "lower_is_better": True, "tensorplay": allocs, "peak_ratio": {"tensorplay": ratio}}
        ratios = f"tp {_fmt(ratio)}"
        if torch is not None:
            t_allocs, t_ratio = measure(
                lambda fn=fn: fn(*t_args),
                torch.cuda.synchronize,
                torch.cuda.memory_stats,
                torch.cuda.reset_peak_memory_stats,
                t_keys,
            )
            row["torch"], row["peak_ratio"]["torch"] = t_allocs, t_ratio
            ratios += f", torch {_fmt(t_ratio)}"
        row["name"] = f"allocs: {expr} {(r, k)} (peak bytes / output bytes: {ratios})"
        judge(row, allocs == 1 and ratio is not None and ratio <= 1.0,
              f"1 alloc, peak / output 1.0 ({allocs} and {_fmt(ratio)} here)")  # fmt: skip
        rows.append(row)
        progress.step(f"temporaries {expr}")


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.2f}"


SECTIONS = [(temporaries, len(OPS))]
