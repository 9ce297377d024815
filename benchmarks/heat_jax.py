"""The heat benchmark's loop in JAX: ``lax.while_loop`` under ``jit``, float32.

Run as a script in its own process, since XLA reads ``XLA_FLAGS`` once, when
JAX starts (``benchmarks/heat.py`` runs it with each configuration of
``JAX_CONFIGS``: XLA's defaults, command buffers for WHILE and CONDITIONAL,
and those with ``--xla_gpu_graph_min_graph_size=1``)::

    python benchmarks/heat_jax.py N ITERS [RUNS]

prints one JSON line: {"us_per_iter": ..., "iters": ...}, the median of RUNS
solves (5 by default), as tensorplay's and torch's figures are sampled.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402


def main() -> None:
    n, iters = int(sys.argv[1]), int(sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    tol = jnp.float32(0.0)  # never converges: every solve runs exactly ITERS sweeps, as tensorplay's rows

    def sweep(state):
        u, k, _ = state
        v = u.at[1:-1, 1:-1].set(0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:]))
        return v, k + 1, jnp.max(jnp.abs(v - u))

    def going(state):
        _, k, change = state
        return (change > tol) & (k < iters)

    @jax.jit
    def solve(u):
        return lax.while_loop(going, sweep, (u, jnp.int32(0), jnp.float32(jnp.inf)))

    u0 = jnp.zeros((n, n), jnp.float32).at[0].set(1.0)
    u, k, _ = solve(u0)
    u.block_until_ready()
    samples = []
    for _ in range(runs):
        t0 = time.perf_counter()
        solve(u0)[0].block_until_ready()
        samples.append(time.perf_counter() - t0)
    print(json.dumps({"us_per_iter": statistics.median(samples) / int(k) * 1e6, "iters": int(k)}))


if __name__ == "__main__":
    main()
