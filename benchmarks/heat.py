"""The README's demo: ``examples/heat.py``'s Jacobi heat solve, the whole loop one
CUDA graph with a while node, its body fused by ``tp.compile`` (and unfused, one
kernel per op), next to JAX's ``lax.while_loop`` (``benchmarks/heat_jax.py``, in
subprocesses: with XLA's defaults and with command buffers for WHILE and
CONDITIONAL) and to PyTorch replaying a one-sweep graph from a host loop that
reads the residual back every iteration. ``tol = 0`` never converges: every
solve runs exactly ``cap`` sweeps.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import tensorplay as tp
from benchmarks.common import check, on_gpu, peer

ROOT = Path(__file__).resolve().parent.parent
COMMAND_BUFFERS = "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUDNN,CUSTOM_CALL,CONDITIONAL,WHILE"
TOL = 0.0


@functools.cache
def _example():
    """``examples/heat.py`` as a module (it is no package; it imports ``plots`` from its own folder)."""
    examples = str(ROOT / "examples")
    if examples not in sys.path:
        sys.path.insert(0, examples)
    spec = importlib.util.spec_from_file_location("tensorplay_example_heat", ROOT / "examples" / "heat.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _best_us(reset, solve, sync, iters: int, repeats: int = 3) -> float:
    """Best of ``repeats`` wall times of ``solve()`` after ``reset()``, in µs per iteration."""
    best = float("inf")
    for _ in range(repeats):
        reset()
        sync()
        t0 = time.perf_counter()
        solve()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best / iters * 1e6


def _while_node(n: int, block: int, cap: int, fuse: bool) -> tuple[float, np.ndarray]:
    """(µs per iteration, final u) of the demo's graph: ``while (go) { sweep; relax }``."""
    heat = _example().Heat(n, block, fuse=fuse)
    g, _ = heat.while_graph(TOL, cap)
    us = _best_us(heat.reset, g.replay, tp.cuda.synchronize, cap)
    if heat.iters.item() != cap:
        raise AssertionError(f"heat {n}x{n}: the while node ran {heat.iters.item()} iterations, expected {cap}")
    return us, heat.u.numpy()


def _jax_us(n: int, iters: int, xla_flags: str | None) -> tuple[float | None, str | None]:
    """(µs per iteration, None) from ``benchmarks/heat_jax.py`` in a subprocess, or (None, why not)."""
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if xla_flags:
        env["XLA_FLAGS"] = xla_flags
    try:
        done = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "heat_jax.py"), str(n), str(iters)],
            env=env, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if done.returncode:
            return None, (done.stderr.strip().splitlines() or ["exit status"])[-1][:120]
        result = json.loads(done.stdout.strip().splitlines()[-1])
        if result["iters"] != iters:
            return None, f"ran {result['iters']} iterations, expected {iters}"
        return result["us_per_iter"], None
    except Exception as e:  # JAX is a reference: its failure must not cost the section
        return None, f"{type(e).__name__}: {e}"[:120]


def _torch_host_loop(torch, n: int, cap: int) -> tuple[float, np.ndarray]:
    """(µs per iteration, final u): a one-sweep torch CUDA graph replayed from the host,
    the residual read back after every replay."""
    u = torch.zeros(n, n, device="cuda")
    v = torch.zeros_like(u)

    def reset():
        for t in (u, v):
            t.zero_()
            t[0] = 1.0

    def sweep():
        v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        residual = (v - u).abs().max()
        u.copy_(v)
        return residual

    side = torch.cuda.Stream()  # warm up on a side stream, as torch's graph capture asks
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            sweep()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        residual = sweep()

    def solve():
        for _ in range(cap):
            g.replay()
            if residual.item() <= TOL:
                break

    return _best_us(reset, solve, torch.cuda.synchronize, cap), u.cpu().numpy()


def heat_demo(rows: list, progress) -> None:
    sizes = ((256, 2000), (1024, 1000)) if on_gpu() else ((8, 20),)
    block = 16 if on_gpu() else 8
    torch = peer("torch")
    for n, cap in sizes:
        fused, u = _while_node(n, block, cap, fuse=True)
        unfused, u_unfused = _while_node(n, block, cap, fuse=False)
        diff = float(np.abs(u - u_unfused).max())
        if not diff <= 1e-6:
            raise AssertionError(f"heat {n}x{n}: fused and unfused loops differ by {diff:.3g} (expected <= 1e-6)")
        progress.step(f"heat {n} tensorplay")
        row = {
            "name": f"heat demo {n}x{n}, while node, tp.compile fused body, us/iter",
            "unit": "us",
            "lower_is_better": True,
            "tensorplay": fused,
            "tensorplay_unfused": unfused,
        }
        if on_gpu():
            for key, flags in (("jax_xla_defaults", None), ("jax_command_buffers", COMMAND_BUFFERS)):
                row[key], why = _jax_us(n, cap, flags)
                if why:
                    row[f"{key}_error"] = why
        jax = [row[k] for k in ("jax_xla_defaults", "jax_command_buffers") if row.get(k) is not None]
        row["jax"] = min(jax) if jax else None
        progress.step(f"heat {n} jax")
        if torch is not None:
            row["torch"], u_torch = _torch_host_loop(torch, n, cap)
            diff = float(np.abs(u_torch - u).max())
            check(f"heat {n}x{n}: torch's u against tensorplay's (max abs diff)", diff, 1e-5)
        progress.step(f"heat {n} torch")
        cb = row.get("jax_command_buffers")
        here = f"{fused / cb:.2f}x here, {fused / row['jax']:.2f}x the faster JAX" if cb else "no JAX run here"
        row["target"] = f"<= 0.8x jax (XLA command buffers) ({here}; unfused {unfused / fused:.2f}x fused)"
        rows.append(row)


SECTIONS = [(heat_demo, 6)]
