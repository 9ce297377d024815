"""``tp.compile``'s fusion: a chain of 8 elementwise ops and a sum as one generated
kernel, in GB/s next to a device-to-device copy measured in the same run and to
``torch.compile``; and what compiling costs, in a fresh process with a cold and
with a warm disk cache of generated kernels.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

import tensorplay as tp
from benchmarks.common import check, device_ms, on_gpu, peer, reps, torch_events, tp_events


def chain(x, y):
    """sub, abs, mul, add, tanh, mul, sub, clamp: 8 elementwise ops, then a sum."""
    z = ((x - y).abs() * 0.5 + x).tanh() * y - 1.0
    z = z.clamp(-0.75, 0.75)
    return z, z.sum()


def _checker(xv: np.ndarray, yv: np.ndarray):
    """``check_(who, (z, total))`` against NumPy float64."""
    x, y = xv.astype(np.float64), yv.astype(np.float64)
    ref = np.clip(np.tanh(np.abs(x - y) * 0.5 + x) * y - 1.0, -0.75, 0.75)
    ref_sum = ref.sum()

    def check_(who: str, out) -> None:
        z, total = out
        z = z.numpy() if isinstance(z, tp.Tensor) else z.cpu().numpy()
        check(f"{who}: chain z", float(np.abs(z - ref).max() / np.abs(ref).max()), 1e-5)
        check(f"{who}: chain sum", abs(total.item() - ref_sum) / abs(ref_sum), 1e-3)

    return check_


def _copy_gbs(numel: int) -> float:
    """GB/s of ``dst.copy_(src)`` on ``numel`` float32, counting the bytes read and written."""
    src = tp.rand(numel)  # (not zeros: they can time faster than real data)
    dst = tp.empty_like(src)
    ms = device_ms(lambda: dst.copy_(src), *tp_events(), tp.cuda.synchronize, **reps())
    return 2 * 4 * numel / (ms * 1e6)


def fused_chain(rows: list, progress) -> None:
    n = 1 << 24 if on_gpu() else 4096
    gbs = lambda ms: 3 * 4 * n / (ms * 1e6)  # one read of x and y, one write of z
    rng = np.random.default_rng(0)
    xv, yv = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    check_ = _checker(xv, yv)
    x, y = tp.tensor(xv), tp.tensor(yv)
    events, sync = tp_events(), tp.cuda.synchronize
    row = {"name": f"tp.compile, 8 elementwise ops + sum on {n} float32 fused, GB/s (graph replay)",
           "unit": "GB/s", "lower_is_better": False}  # fmt: skip
    for key, fuse in (("tensorplay", True), ("tensorplay_unfused", False)):
        compiled = tp.compile(chain, fuse=fuse)
        compiled(x, y)  # warm-up (eager)
        check_(key, compiled(x, y))  # captured, then replayed
        row[key] = gbs(device_ms(compiled.graph(x, y).replay, *events, sync, **reps()))  # inputs already staged
        if fuse:
            row["tensorplay_call"] = gbs(device_ms(lambda c=compiled: c(x, y), *events, sync, **reps()))
    progress.step("fusion tensorplay")

    row["copy"] = _copy_gbs(1 << 26 if on_gpu() else n)  # 256 MiB of float32 on a GPU
    row["fraction_of_copy"] = row["tensorplay"] / row["copy"]
    progress.step("fusion copy bandwidth")

    torch = peer("torch")
    note = ""
    if torch is not None:
        try:
            tx, ty = torch.from_numpy(xv).cuda(), torch.from_numpy(yv).cuda()
            compiled_torch = torch.compile(chain)
            for _ in range(3):
                out = compiled_torch(tx, ty)
            check_("torch.compile", out)
            ms = device_ms(lambda: compiled_torch(tx, ty), *torch_events(torch), torch.cuda.synchronize, **reps())
            row["torch"] = gbs(ms)
        except Exception as e:  # torch.compile is a reference: its failure must not cost the row
            note = f"; torch.compile failed: {type(e).__name__}: {e}"[:160]
    progress.step("fusion torch.compile")
    row["target"] = f">= 90% of copy bandwidth ({row['fraction_of_copy']:.0%} here); faster than torch.compile" + note
    rows.append(row)


# A fresh process: 10 elementwise ops fused into one kernel, compiled at its first call.
_FIRST_CALL = """
import json, time
import tensorplay as tp

def f(x):  # mul, add, sin, sub, abs, sqrt, mul, sub, exp, add
    return ((((x * 1.5 + 0.5).sin() - x).abs().sqrt() * 2.0 - 1.0).exp() + x)

x = tp.ones(1 << 20)
tp.cuda.synchronize()
f = tp.compile(f, warmup=0)
t0 = time.perf_counter()
f(x)
tp.cuda.synchronize()
print(json.dumps({"seconds": time.perf_counter() - t0}))
"""


def _first_call_s(cache_dir: str) -> float:
    env = {**os.environ, "TENSORPLAY_CACHE_DIR": cache_dir}
    done = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True, text=True, timeout=300)
    if done.returncode:
        raise RuntimeError(f"compile-cost subprocess failed: {done.stderr.strip()[-300:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def compile_cost(rows: list, progress) -> None:
    row = {"name": "tp.compile cost: first call of 10 fused elementwise ops on 1M float32 (warmup=0), "
           "s (second_process: kernels from the disk cache)", "unit": "s", "lower_is_better": True,
           "target": "first <= 2 s, second process <= 0.3 s"}  # fmt: skip
    if on_gpu():  # GPU compile time: on the simulator there is nothing to compile
        cache_dir = tempfile.mkdtemp(prefix="tensorplay-bench-cache-")
        try:
            row["tensorplay"] = _first_call_s(cache_dir)  # cold: an empty cache
            row["second_process"] = _first_call_s(cache_dir)
        finally:
            shutil.rmtree(cache_dir, ignore_errors=True)
    else:
        row["tensorplay"] = None
        row["target"] += " (GPU only: not run on the simulator)"
    rows.append(row)
    progress.step("compile cost")


SECTIONS = [(fused_chain, 3), (compile_cost, 1)]
