"""The sorting, scan and search kernels (``kernels/sort``, ``kernels/scan``,
``kernels/search``) compile for a real GPU with the argument types the
simulator launched them with: every real dtype, strided and contiguous rows.

As ``test_gpu_compile.py`` does for the other kernel modules: the launches are
recorded on the simulator (without running their threads), then compiled to
PTX (sm_90) in a process without the simulator. It needs NVIDIA's NVRTC and
NVVM libraries but no GPU.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import gpu_compile
from helpers.gpu_compile import MISSING_LIBRARIES, signatures

import tensorplay as tp

pytestmark = pytest.mark.skipif(tp.cuda.backend() != "sim", reason="on a GPU every test compiles its kernels")

STEMS = ("sort", "radix", "scan", "search")
REAL = [tp.float32, tp.float64, tp.float16, tp.bfloat16, tp.bool, tp.int8, tp.int16, tp.int32, tp.int64, tp.uint8]
REAL += [tp.uint16, tp.uint32, tp.uint64]


def _launch_every_kind() -> None:
    for dtype in REAL:
        x = tp.ones((3, 40), dtype=dtype)
        for rows in (x, x.t()):  # contiguous rows, and rows read across a transpose
            tp.sort(rows, descending=True)
            tp.sort(rows)
            tp.topk(rows, 2)
            tp.cumulative_sum(rows, axis=1)
            tp.cumulative_prod(rows, axis=1)
        long = tp.ones((2, 1100), dtype=dtype)  # longer than a tile: the radix sort
        tp.sort(long, descending=True)
        tp.sort(long)
        tp.searchsorted(x[0], x)
        tp.nonzero(x, size=4)
        tp.unique_all(x, size=4)
    for dtype in (tp.float32, tp.int64, tp.complex128):  # rows of several scan tiles: chained by look-back
        tp.cumulative_sum(tp.ones((2, 3000), dtype=dtype), axis=1)
    for dtype in (tp.complex64, tp.complex128):
        z = tp.ones((3, 40), dtype=dtype)
        tp.cumulative_sum(z, axis=1)
        tp.cumulative_prod(z, axis=1)
        tp.nonzero(z, size=4)
        tp.unique_all(z, size=4)
    for dtype in (tp.float32, tp.float64):  # the gradients: reversed scans, scatters
        w = tp.ones((2, 3), dtype=dtype).requires_grad_()
        (tp.cumsum(w, 1).sum() + tp.sort(w).sum() + tp.topk(w, 2, 0).values.sum()).backward()


@pytest.mark.gpu_compile
def test_sorting_scan_and_search_kernels_compile_for_the_gpu(monkeypatch):
    simlaunch = importlib.import_module("tensorplay.runtime.backend.simlaunch")
    monkeypatch.setattr(simlaunch, "run_kernel", lambda *args: None)
    monkeypatch.setattr(gpu_compile, "MODULES", gpu_compile.MODULES + STEMS)  # module-level kernels too
    _launch_every_kind()
    monkeypatch.setattr(importlib.import_module("tensorplay._sorting_functions"), "NARROW_POSITIONS", 0)
    tp.sort(tp.ones((2, 1100)))  # the radix sort's int64 positions
    tp.cuda.synchronize()
    found = [s for s in signatures() if s["recipe"][0] in STEMS]
    monkeypatch.undo()
    families = {tuple(s["recipe"][:2]) for s in found}
    assert {
        ("sort", "tiles_kernel"),
        ("radix", "histogram_kernel"),
        ("radix", "scatter_kernel"),
        ("sort", "taken_rows"),
        ("sort", "placed_rows"),
    } <= families
    assert ("scan", "tiles_kernel") in families
    assert {("search", "search_kernel"), ("search", "coordinates"), ("search", "groups")} <= families
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "TENSORPLAY_BACKEND")}
    env.setdefault("TENSORPLAY_CACHE_DIR", tempfile.mkdtemp(prefix="tensorplay-gpu-compile-"))
    helpers = Path(__file__).resolve().parents[1] / "helpers"
    script = (
        f"import sys; sys.path.insert(0, {str(helpers)!r}); import gpu_compile; "
        f"gpu_compile.MODULES += {STEMS!r}; sys.exit(gpu_compile.main())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], input=json.dumps(found), capture_output=True, text=True, env=env, timeout=1800
    )
    if proc.returncode == MISSING_LIBRARIES:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, f"{len(found)} kernels checked:\n{proc.stdout}{proc.stderr[-3000:]}"
