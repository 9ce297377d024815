"""The spectral example (``examples/spectral.py``): 2-D Navier-Stokes, one
IF-RK4 step per pass of a while node (four stages, each: the four fields, one
batched ``irfft2``, the product, ``rfft2``: 20 transforms a step), µs per
step, next to the same solver and step in JAX and in PyTorch, each in its
fastest form found in this run:

- tensorplay: the example's kernel version (``tensorplay``: a kernel per
  stage fusing the update with the next stage's fields) and its tensor-ops
  version (``tensorplay_ops``, ``tp.compile``), the whole run one replay;
- JAX (``benchmarks/spectral_jax.py``, ``jnp.fft`` in ``lax.while_loop`` under
  ``jit``, in subprocesses): with XLA's defaults, with command buffers for
  WHILE and CONDITIONAL, and with those and ``--xla_gpu_graph_min_graph_size=1``;
- PyTorch (``torch.fft``): a CUDA graph of ``CHUNK`` steps replayed until
  the run is done, the steps' ops eager or ``torch.compile``'d.

The flow is the example's double shear layer, the same number of steps on
every side (no energy records: the step alone); each side's final vorticity
is compared with tensorplay's before its time counts. Every figure is the
median of ``RUNS`` solves (``common.wall_us``; ``spectral_jax.py`` samples alike).
Target: <= 0.8x JAX's fastest configuration.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import tensorplay as tp
from benchmarks.common import check, on_gpu, peer, wall_us
from benchmarks.targets import at_most

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
COMMAND_BUFFERS = "--xla_gpu_enable_command_buffer=FUSION,CUBLAS,CUDNN,CUSTOM_CALL,CONDITIONAL,WHILE"
JAX_CONFIGS = {  # row key -> XLA_FLAGS
    "jax_xla_defaults": None,
    "jax_command_buffers": COMMAND_BUFFERS,
    "jax_command_buffers_min_graph_size_1": f"{COMMAND_BUFFERS} --xla_gpu_graph_min_graph_size=1",
}
CHUNK = 50  # steps in one torch CUDA graph
TOL = {"float32": 1e-3, "float64": 1e-9}  # the final ω against tensorplay's (max, relative to its largest)


@functools.cache
def example():
    """``examples/spectral.py`` as a module (its folder and the gallery's hold its helpers)."""
    for folder in (EXAMPLES, EXAMPLES / "gallery"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location("tensorplay_example_spectral", EXAMPLES / "spectral.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


def _flow(n: int, steps: int):
    """The example's double shear layer at its full run's time step, ``steps`` of them."""
    return example().shear_layer(n, 80.0, 0.05, 2 * np.pi * 1e-4, 2 * np.pi / (3 * n), steps)


def _difference(w_hat: np.ndarray, ref: np.ndarray, n: int) -> float:
    """max |ω - ω_ref| / max |ω_ref|, ω from the final ω̂ (unnormalised rfft2)."""
    w = np.fft.irfft2(np.asarray(w_hat, np.complex128), s=(n, n))
    return float(np.abs(w - ref).max() / np.abs(ref).max())


def _tensorplay(version: str, flow, dtype: str) -> tuple[float, np.ndarray]:
    """(µs per step, final ω) of the example's solver: the whole run one replay."""
    solver = example().SOLVERS[version](flow, dtype, every=0)
    solver.capture()
    us = wall_us(solver.solve, tp.cuda.synchronize, per=flow.steps)
    if solver.steps_done() != flow.steps:
        raise AssertionError(f"spectral {version}: the while node ran {solver.steps_done()} steps, "
                             f"expected {flow.steps}")  # fmt: skip
    return us, solver.vorticity()


def _jax_us(flow, dtype: str, xla_flags: str | None, ref: np.ndarray) -> tuple[float | None, str | None]:
    """(µs per step, None) from ``benchmarks/spectral_jax.py`` in a subprocess, its answer
    checked against ``ref``; or (None, why not)."""
    kx, ky, keep = example().modes(flow.n)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if xla_flags:
        env["XLA_FLAGS"] = xla_flags
    try:
        with tempfile.TemporaryDirectory() as folder:
            source, target = os.path.join(folder, "in.npz"), os.path.join(folder, "out.npz")
            np.savez(source, w0=flow.vorticity_hat(), kx=kx, ky=ky, keep=keep, n=flow.n, steps=flow.steps,
                     dt=flow.dt, nu=flow.nu, U=flow.U, V=flow.V, dtype=dtype)  # fmt: skip
            done = subprocess.run([sys.executable, str(HERE / "spectral_jax.py"), source, target],
                                  env=env, capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
            if done.returncode:
                return None, (done.stderr.strip().splitlines() or ["exit status"])[-1][:160]
            result = json.loads(done.stdout.strip().splitlines()[-1])
            w_hat = np.load(target)["w"]
        if result["steps"] != flow.steps:
            return None, f"ran {result['steps']} steps, expected {flow.steps}"
    except Exception as e:  # JAX is a reference: its failure must not cost the section
        return None, f"{type(e).__name__}: {e}"[:160]
    check(f"spectral {flow.n}x{flow.n} {dtype}: jax's ω against tensorplay's", _difference(w_hat, ref, flow.n),
          TOL[dtype])  # fmt: skip
    return result["us_per_step"], None


def _torch_step(torch, flow, dtype: str):
    """IF-RK4's step with ``torch.fft``, functionally: ``step(ω̂) -> ω̂``."""
    real = torch.float64 if dtype == "float64" else torch.float32
    kx, ky, keep = (torch.tensor(a, dtype=real, device="cuda") for a in example().modes(flow.n))
    n, dt, U, V = flow.n, flow.dt, flow.U, flow.V
    k2 = kx * kx + ky * ky
    scale = 1.0 / (n * n)  # the inverse transform is unnormalised ("forward"): the fields carry 1/n²
    inv_k2 = torch.where(k2 > 0, scale / torch.where(k2 > 0, k2, torch.ones_like(k2)), torch.zeros_like(k2))
    half = torch.exp(-0.5 * flow.nu * k2 * dt)
    full = half * half
    ikx, iky = 1j * kx, 1j * ky

    def nonlinear(w):
        psi, ws = w * inv_k2, w * scale
        fields = torch.stack([iky * psi, -ikx * psi, ikx * ws, iky * ws])
        phys = torch.fft.irfft2(fields, s=(n, n), norm="forward")
        prod = (U + phys[0]) * phys[2] + (V + phys[1]) * phys[3]
        return -keep * torch.fft.rfft2(prod)

    def step(w):
        a = nonlinear(w)
        b = nonlinear(half * (w + dt / 2 * a))
        c = nonlinear(half * w + dt / 2 * b)
        d = nonlinear(full * w + dt * half * c)
        return full * (w + dt / 6 * a) + dt / 3 * half * (b + c) + dt / 6 * d

    return step


def _torch_graph(torch, flow, dtype: str, compiled: bool) -> tuple[float, np.ndarray]:
    """A CUDA graph of ``CHUNK`` steps (ops eager or ``torch.compile``'d),
    replayed until the run is done; (µs per step, final ω̂)."""
    if flow.steps % CHUNK:
        raise ValueError(f"expected a number of steps that is a multiple of {CHUNK}, got {flow.steps}")
    step = _torch_step(torch, flow, dtype)
    if compiled:
        torch._dynamo.reset()
        step = torch.compile(step)
    complex_ = torch.complex128 if dtype == "float64" else torch.complex64
    start = torch.tensor(flow.vorticity_hat(), device="cuda").to(complex_)
    w = start.clone()
    side = torch.cuda.Stream()  # warm up on a side stream, as torch's graph capture asks
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step(w)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        x = w
        for _ in range(CHUNK):
            x = step(x)
        w.copy_(x)  # the graph's end is its start: replays go on from there

    def solve():
        for _ in range(flow.steps // CHUNK):
            g.replay()

    us = wall_us(solve, torch.cuda.synchronize, per=flow.steps, before=lambda: w.copy_(start))
    return us, w.cpu().numpy()


def spectral(n: int, dtype: str, steps: int, rows: list, progress) -> None:
    flow = _flow(n, steps)
    label = f"spectral {n}x{n} {dtype}"
    fused, ref = _tensorplay("kernel", flow, dtype)
    row = {
        "name": f"{label}: 2-D Navier-Stokes, IF-RK4 step (20 FFTs), while node, us/step "
        "(jax: its fastest configuration here; torch: its fastest loop here)",
        "unit": "us",
        "lower_is_better": True,
        "steps": steps,
        "tensorplay": fused,
    }
    try:  # the ops version is a second figure: its failure is said in the row, not the section's
        ops, ops_w = _tensorplay("ops", flow, dtype)
        check(f"{label}: the ops version's ω against the kernel version's",
              float(np.abs(ops_w - ref).max() / np.abs(ref).max()), TOL[dtype])  # fmt: skip
        row["tensorplay_ops"] = ops
    except Exception as e:
        row["tensorplay_ops_error"] = f"{type(e).__name__}: {e}"[:200]
    progress.step(f"{label} tensorplay")
    if on_gpu():
        for key, flags in JAX_CONFIGS.items():
            row[key], why = _jax_us(flow, dtype, flags, ref)
            if why:
                row[f"{key}_error"] = why
    jax = {k: row[k] for k in JAX_CONFIGS if row.get(k) is not None}
    row["jax"] = min(jax.values()) if jax else None
    row["jax_config"] = min(jax, key=jax.get) if jax else None
    progress.step(f"{label} jax")
    torch = peer("torch")
    if torch is not None:
        figures, why_not = {}, {}
        for key, compiled in (("torch_graph_eager_ops", False), ("torch_graph_compiled_step", True)):
            try:
                us, w_hat = _torch_graph(torch, flow, dtype, compiled)
            except Exception as e:  # a torch form that fails to build is a reference that did not run
                why_not[key] = f"{type(e).__name__}: {e}"[:200]
                continue
            check(f"{label}: {key}'s ω against tensorplay's", _difference(w_hat, ref, n), TOL[dtype])
            figures[key] = us
        row.update(figures)
        row["torch_not_run"] = why_not
        row["torch"] = min(figures.values()) if figures else None
        row["torch_config"] = min(figures, key=figures.get) if figures else None
    progress.step(f"{label} torch")
    note = f" ({row['jax_config']})" if row["jax_config"] else ""
    if row.get("tensorplay_ops"):
        note += f"; the ops version {row['tensorplay_ops'] / fused:.2f}x the kernel version"
    at_most(row, 0.8, of="jax", label="jax's fastest", note=note)
    rows.append(row)


SIZES = [(512, "float32", 1000), (1024, "float32", 500), (1024, "float64", 500)] if on_gpu() else [(16, "float64", 2)]
SECTIONS = [(functools.partial(spectral, n, dtype, steps), 3) for n, dtype, steps in SIZES]
