"""The README's demo: ``tensorplay.examples.heat``'s Jacobi heat solve, the whole
loop one CUDA graph with a while node, its body fused by ``tp.compile`` (and
unfused, one kernel per op), next to the same loop in JAX and in PyTorch, each
in its fastest form found in this run:

- JAX (``benchmarks/heat_jax.py``, ``lax.while_loop`` under ``jit``, in
  subprocesses): with XLA's defaults, with command buffers for WHILE and
  CONDITIONAL, and with those and ``--xla_gpu_graph_min_graph_size=1``, which
  puts the while body in a command buffer;
- PyTorch: its own ``while_loop`` captured as a CUDA graph while node where the
  installed torch has one (``torch._higher_order_ops.cudagraph_conditional_nodes``
  with ``while_loop_node``; the row says why not otherwise); ``torch.compile``
  of that ``while_loop`` (inductor runs it as a host loop that reads the
  predicate every pass); and a host loop replaying a graph of one sweep (eager
  ops, or ``torch.compile``'d) that reads the residual back every iteration.

``tol = 0`` never converges: every solve runs exactly ``cap`` sweeps, and each
side's iteration count and final field are checked. Every figure is the median
of ``RUNS`` solves (``common.wall_us``; ``heat_jax.py`` samples alike).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

import tensorplay as tp
from benchmarks.common import RUNS, check, on_gpu, peer, wall_us
from benchmarks.targets import judge
from tensorplay.examples.heat import Heat

HERE = Path(__file__).resolve().parent
COMMAND_BUFFERS = "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUDNN,CUSTOM_CALL,CONDITIONAL,WHILE"
JAX_CONFIGS = {  # row key -> XLA_FLAGS
    "jax_xla_defaults": None,
    "jax_command_buffers": COMMAND_BUFFERS,
    "jax_command_buffers_min_graph_size_1": f"{COMMAND_BUFFERS} --xla_gpu_graph_min_graph_size=1",
}
TOL = 0.0


class Unavailable(Exception):
    """A reference loop this run cannot build (the row says why)."""


def _while_node(n: int, block: int, cap: int, fuse: bool) -> tuple[float, np.ndarray]:
    """(µs per iteration, final u) of the demo's graph: ``while (go) { sweep; relax }``."""
    heat = Heat(n, block, fuse=fuse)
    g, _ = heat.while_graph(TOL, cap)
    us = wall_us(g.replay, tp.cuda.synchronize, per=cap, before=heat.reset)
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
            [sys.executable, str(HERE / "heat_jax.py"), str(n), str(iters), str(RUNS)],
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


def _torch_start(torch, n: int):
    """The plate at its start: 1 on the top edge, 0 elsewhere."""
    u = torch.zeros(n, n, device="cuda")
    u[0] = 1.0
    return u


def _torch_sweep(torch, u):
    """One Jacobi sweep of ``u`` (its boundary kept), functionally."""
    v = u.clone()
    v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
    return v


def _torch_solve(torch, cap: int):
    """``solve(u0) -> (u, iterations, change)`` with torch's ``while_loop``."""
    from torch._higher_order_ops.while_loop import while_loop

    def going(u, k, change):
        return (change > TOL) & (k < cap)

    def sweep(u, k, change):
        v = _torch_sweep(torch, u)
        return v, k + 1, (v - u).abs().max()

    def solve(u0):
        k0 = torch.zeros((), dtype=torch.int32, device=u0.device)
        change0 = torch.full((), float("inf"), dtype=torch.float32, device=u0.device)
        return while_loop(going, sweep, (u0, k0, change0))

    return solve


def _torch_while_node(torch, n: int, cap: int) -> tuple[float, np.ndarray, int]:
    """torch's ``while_loop`` captured as a CUDA graph while node; (µs per
    iteration, final u, iterations). Raises ``Unavailable`` where torch has no
    while node for it."""
    try:
        from torch._higher_order_ops import cudagraph_conditional_nodes as nodes
    except ImportError as e:
        raise Unavailable(f"torch {torch.__version__} has no conditional nodes for its control flow ({e})") from e
    if not hasattr(nodes, "while_loop_node"):
        raise Unavailable(
            f"torch {torch.__version__}'s capture makes torch.cond an if node but has no while node for "
            "while_loop (no cudagraph_conditional_nodes.while_loop_node): captured, while_loop would read its "
            "predicate on the host at every pass, which a capture refuses"
        )
    solve = _torch_solve(torch, cap)
    u0 = _torch_start(torch, n)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), nodes.ControlFlowOpWarmupDispatchMode():
        solve(u0)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=side), nodes.CUDAGraphCaptureControlFlowOpDispatchMode():
        u, k, _ = solve(u0)  # the loop clones u0 at every replay: u0 stays the start
    us = wall_us(g.replay, torch.cuda.synchronize, per=cap)
    return us, u.cpu().numpy(), int(k.item())


def _torch_compiled_while_loop(torch, n: int, cap: int) -> tuple[float, np.ndarray, int]:
    """``torch.compile`` of the same ``while_loop`` (inductor runs it as a host
    loop of its generated kernels, reading the predicate at every pass)."""
    torch._dynamo.reset()
    solve = torch.compile(_torch_solve(torch, cap), fullgraph=True)
    u0 = _torch_start(torch, n)
    out = [solve(u0)]  # compiles

    def call():
        out[0] = solve(u0)

    us = wall_us(call, torch.cuda.synchronize, per=cap)
    u, k, _ = out[0]
    return us, u.cpu().numpy(), int(k.item())


def _torch_host_loop(torch, n: int, cap: int, compiled: bool) -> tuple[float, np.ndarray, int]:
    """A one-sweep torch CUDA graph replayed from the host, the residual read
    back after every replay; the sweep's ops eager or ``torch.compile``'d."""
    u = _torch_start(torch, n)

    def sweep():
        v = _torch_sweep(torch, u)
        residual = (v - u).abs().max()
        u.copy_(v)
        return residual

    if compiled:
        torch._dynamo.reset()
        sweep = torch.compile(sweep)
    side = torch.cuda.Stream()  # warm up on a side stream, as torch's graph capture asks
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            sweep()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        residual = sweep()
    count = [0]

    def solve():
        done = 0
        while done < cap:
            g.replay()
            done += 1
            if residual.item() <= TOL:
                break
        count[0] = done

    def reset():
        u.copy_(_torch_start(torch, n))

    us = wall_us(solve, torch.cuda.synchronize, per=cap, before=reset)
    return us, u.cpu().numpy(), count[0]


def _torch_loops(torch, n: int, cap: int):
    """(config -> µs per iteration, config -> why it did not run, config -> final u)."""
    loops = {
        "torch_while_node": lambda: _torch_while_node(torch, n, cap),
        "torch_compiled_while_loop": lambda: _torch_compiled_while_loop(torch, n, cap),
        "torch_host_loop": lambda: _torch_host_loop(torch, n, cap, compiled=False),
        "torch_host_loop_compiled_sweep": lambda: _torch_host_loop(torch, n, cap, compiled=True),
    }
    figures, why_not, fields = {}, {}, {}
    for key, run in loops.items():
        try:
            us, u, iters = run()
        except Unavailable as e:
            why_not[key] = str(e)
            continue
        except Exception as e:  # a torch form that fails to build is a reference that did not run
            why_not[key] = f"{type(e).__name__}: {e}"[:200]
            continue
        if iters != cap:
            raise AssertionError(f"heat {n}x{n}: {key} ran {iters} iterations, expected {cap}")
        figures[key], fields[key] = us, u
    return figures, why_not, fields


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
            "name": f"heat demo {n}x{n}, while node, tp.compile fused body, us/iter "
            "(jax: its fastest configuration here; torch: its fastest loop here)",
            "unit": "us",
            "lower_is_better": True,
            "tensorplay": fused,
            "tensorplay_unfused": unfused,
        }
        if on_gpu():
            for key, flags in JAX_CONFIGS.items():
                row[key], why = _jax_us(n, cap, flags)
                if why:
                    row[f"{key}_error"] = why
        jax = {k: row[k] for k in JAX_CONFIGS if row.get(k) is not None}
        row["jax"] = min(jax.values()) if jax else None
        row["jax_config"] = min(jax, key=jax.get) if jax else None
        progress.step(f"heat {n} jax")
        if torch is not None:
            figures, why_not, fields = _torch_loops(torch, n, cap)
            for key, field in fields.items():
                check(f"heat {n}x{n}: {key}'s u against tensorplay's (max abs diff)", float(np.abs(field - u).max()),
                      1e-5)  # fmt: skip
            row.update(figures)
            row["torch_not_run"] = why_not
            row["torch"] = min(figures.values()) if figures else None
            row["torch_config"] = min(figures, key=figures.get) if figures else None
        progress.step(f"heat {n} torch")
        _judge_heat(row, fused, unfused)
        rows.append(row)


def _judge_heat(row: dict, fused: float, unfused: float) -> None:
    """Target: <= 0.8x JAX's fastest configuration in this run, and <= torch's fastest loop."""
    jax, torch = row.get("jax"), row.get("torch")
    parts = [f"<= 0.8x jax's fastest ({row['jax_config']}: {fused / jax:.2f}x here)" if jax else
             "<= 0.8x jax's fastest (no JAX figure in this run)",
             f"<= 1x torch's fastest ({row['torch_config']}: {fused / torch:.2f}x here)" if torch else
             "<= 1x torch's fastest (no torch figure in this run)"]  # fmt: skip
    met = None if jax is None or torch is None else fused <= 0.8 * jax and fused <= torch
    judge(row, met, f"{' and '.join(parts)}; unfused {unfused / fused:.2f}x fused")


SECTIONS = [(heat_demo, 6)]
