"""The indexing kernels (``kernels/indexing.py``), as the simulator launched them
on each kind of dtype and index, also compile for a real GPU (PTX for sm_90,
in a subprocess without the simulator: NVRTC and NVVM, no GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers.gpu_compile import MISSING_LIBRARIES, signatures

import tensorplay as tp

pytestmark = pytest.mark.skipif(tp.cuda.backend() != "sim", reason="on a GPU every test compiles its kernels")

KERNELS = {
    "take", "combine", "claim", "put", "put_add", "take_along", "put_along", "put_along_add", "constants",
    "count_true", "compact", "ranks", "put_ranked",
}  # fmt: skip


def _launch_every_indexing_kernel() -> None:
    for dtype in (tp.float32, tp.float64, tp.int32, tp.int64, tp.uint64, tp.bool, tp.bfloat16, tp.complex64):
        x = tp.zeros((3, 4), dtype=dtype)
        rows, cols = tp.tensor([0, 2]), tp.tensor([1, 3], dtype=tp.int32)
        x[rows]  # take
        x[rows, cols]  # combine, then take
        x[rows] = x[:2]  # claim, put
        x[rows, cols] = x[0, :2]  # combine (writes)
        x.index_put_((rows,), x[:2], accumulate=True)  # put_add (complex: its parts)
        x.gather(1, tp.tensor([[0, 1]] * 3))  # take_along
        x.scatter_(1, tp.tensor([[0, 1]] * 3), x[:, :2])  # put_along
        x.scatter_add_(1, tp.tensor([[0, 1]] * 3), x[:, :2])  # put_along_add
        mask = tp.tensor([True, False, True])
        x[mask]  # count_true, compact
        x[mask] = x[:2]  # ranks, put_ranked
    index = tp.tensor([1, 0], dtype=tp.uint8)
    tp.ones((2, 3))[index]  # an index of another integer type
    x = tp.ones(3)
    with tp.cuda.graph(tp.cuda.CUDAGraph()):
        x[[2, 0]]  # host indices inside a capture: constants


@pytest.mark.gpu_compile
def test_every_indexing_kernel_compiles_for_the_gpu():
    _launch_every_indexing_kernel()
    tp.cuda.synchronize()
    found = [s for s in signatures() if s["recipe"][0] == "indexing"]
    assert {s["recipe"][1] for s in found} == KERNELS
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "TENSORPLAY_BACKEND")}
    env.setdefault("TENSORPLAY_CACHE_DIR", tempfile.mkdtemp(prefix="tensorplay-gpu-compile-"))
    script = Path(__file__).resolve().parents[1] / "helpers" / "gpu_compile.py"
    proc = subprocess.run(
        [sys.executable, str(script)], input=json.dumps(found), capture_output=True, text=True, env=env, timeout=1800
    )
    if proc.returncode == MISSING_LIBRARIES:
        pytest.skip(proc.stdout.strip())
    assert proc.returncode == 0, f"{len(found)} kernels checked:\n{proc.stdout}{proc.stderr[-3000:]}"
