"""The spectral benchmark's solver in JAX: the same IF-RK4 step of
``examples/spectral.py`` (four stages, each: the four fields, one batched
``irfft2``, the product, ``rfft2``), ``jnp.fft`` in a ``lax.while_loop`` of
``steps`` passes under ``jit``.

Run as a script in its own process, since XLA reads ``XLA_FLAGS`` once, when
JAX starts (``benchmarks/spectral.py`` runs it with each configuration of
``JAX_CONFIGS``: XLA's defaults, command buffers for WHILE and CONDITIONAL,
and those with ``--xla_gpu_graph_min_graph_size=1``)::

    python benchmarks/spectral_jax.py IN.npz OUT.npz [RUNS]

reads the problem from IN.npz (ω̂ at the start, the modes, the parameters),
writes ω̂ at the end to OUT.npz, and prints one JSON line:
{"us_per_step": ..., "steps": ...}, the median of RUNS solves (5 by default).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

import numpy as np

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402


def solver(a: dict):
    """``solve(w0) -> (steps done, ω̂)`` for the problem in ``a``."""
    if str(a["dtype"]) == "float64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax import lax

    real = jnp.float64 if str(a["dtype"]) == "float64" else jnp.float32
    n, steps = int(a["n"]), int(a["steps"])
    dt, nu, U, V = (float(a[k]) for k in ("dt", "nu", "U", "V"))
    kx, ky, keep = (jnp.asarray(a[k], real) for k in ("kx", "ky", "keep"))
    k2 = kx * kx + ky * ky
    scale = 1.0 / (n * n)  # the inverse transform is unnormalised ("forward"): the fields carry 1/n²
    inv_k2 = jnp.where(k2 > 0, scale / jnp.where(k2 > 0, k2, 1), 0).astype(real)
    half = jnp.exp(-0.5 * nu * k2 * dt).astype(real)
    full = half * half
    ikx, iky = 1j * kx, 1j * ky

    def nonlinear(w):
        """N(ω̂) = -(the transform of (U + u) ∂ω/∂x + (V + v) ∂ω/∂y) on the kept modes."""
        psi, ws = w * inv_k2, w * scale
        fields = jnp.stack([iky * psi, -ikx * psi, ikx * ws, iky * ws])
        phys = jnp.fft.irfft2(fields, s=(n, n), norm="forward")
        prod = (U + phys[0]) * phys[2] + (V + phys[1]) * phys[3]
        return -keep * jnp.fft.rfft2(prod)

    def step(w):
        a_ = nonlinear(w)
        b = nonlinear(half * (w + dt / 2 * a_))
        c = nonlinear(half * w + dt / 2 * b)
        d = nonlinear(full * w + dt * half * c)
        return full * (w + dt / 6 * a_) + dt / 3 * half * (b + c) + dt / 6 * d

    @jax.jit
    def solve(w0):
        return lax.while_loop(lambda s: s[0] < steps, lambda s: (s[0] + 1, step(s[1])), (jnp.int32(0), w0))

    return solve, jnp.asarray(a["w0"]).astype(jnp.complex128 if real is jnp.float64 else jnp.complex64)


def main() -> None:
    source, target = sys.argv[1], sys.argv[2]
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    solve, w0 = solver(dict(np.load(source)))
    k, w = solve(w0)
    w.block_until_ready()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        solve(w0)[1].block_until_ready()
        samples.append(time.perf_counter() - t0)
    np.savez(target, w=np.asarray(w))
    print(json.dumps({"us_per_step": statistics.median(samples) / int(k) * 1e6, "steps": int(k)}))


if __name__ == "__main__":
    main()
