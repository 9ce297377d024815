"""Dropout kernel variants beside the fixed-mask multiply, on the GPU: where a
graphed dropout's extra microseconds go.

Each variant is launched 20 times inside one graph, and a replay's GPU time is
divided by 20. The variants change one part of the library's kernel at a time
(the blocks counted on one address after a fence, as before; no generator
state moved at all; the mask stored or not), so the differences place the cost.

    python3 benchmarks/dropout_variants.py        (needs a GPU)
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

import tensorplay as tp  # noqa: E402
from benchmarks.common import device_ms, tp_events  # noqa: E402
from tensorplay._random import generator  # noqa: E402
from tensorplay.kernels import random as rnd  # noqa: E402
from tensorplay.runtime.launch import grid_1d  # noqa: E402

LAUNCHES = 20


@cuda.jit(device=True, inline=True)
def _advance_one_counter(state, base, used):
    """The earlier design: a fence, then every block counting on one address."""
    cuda.syncthreads()
    if cuda.threadIdx.x == 0:
        cuda.threadfence()
        if cuda.atomic.add(state, 2, 1) == cuda.gridDim.x - 1:
            state[1] = base + used
            state[2] = 0


@cuda.jit
def dropout_one_counter(out, keep, x, state, p, scale, store_mask):
    seed, base = np.uint64(state[0]), state[1]
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    n = out.size
    while i < n:
        k = rnd._unit(seed, np.uint64(base + i)) >= p
        if store_mask:
            keep[i] = k
        out[i] = x[i] * scale if k else 0
        i += step
    _advance_one_counter(state, base, n)


@cuda.jit
def dropout_no_state(out, keep, x, state, p, scale, store_mask):
    """No generator state moved: what the hash and the stores cost alone."""
    seed, base = np.uint64(state[0]), state[1]
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    n = out.size
    while i < n:
        k = rnd._unit(seed, np.uint64(base + i)) >= p
        if store_mask:
            keep[i] = k
        out[i] = x[i] * scale if k else 0
        i += step


@cuda.jit
def scale_by(out, x, mask):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    while i < out.size:
        out[i] = x[i] * mask[i]
        i += step


def _per_launch_us(launch_once) -> float:
    launch_once()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        for _ in range(LAUNCHES):
            launch_once()
    s = tp.cuda.Stream()
    return device_ms(lambda: g.replay(s), *tp_events(s), s.synchronize, n=20, warmup=3, batch=5) * 1e3 / LAUNCHES


def _table(n: int) -> dict:
    x = tp.randn(n)
    out, keep, mask = tp.empty(n), tp.empty(n, dtype=tp.bool), (tp.rand(n) >= 0.1) * (1 / 0.9)
    state = generator.state()
    rows = {
        "F.dropout, no gradient (library)": _per_launch_us(lambda: tp.nn.functional.dropout(x, 0.1)),
        "x * fixed mask (library op)": _per_launch_us(lambda: x * mask),
        "scale_by kernel, default grid": _per_launch_us(lambda: tp.cuda.launch(scale_by, *grid_1d(n), out, x, mask)),
    }
    kernels = (("library", rnd.dropout), ("one counter, fenced", dropout_one_counter), ("no state", dropout_no_state))
    for name, kernel in kernels:
        for store in (True, False):
            args = (out, keep, x, state, 0.1, 1 / 0.9, store)
            label = f"{name}, {'mask stored' if store else 'no mask'}"
            rows[label] = _per_launch_us(lambda k=kernel, a=args: tp.cuda.launch(k, *grid_1d(n), *a))
    return rows


def main() -> None:
    if tp.cuda.backend() != "cuda":
        sys.exit("dropout_variants.py times kernels: run it on a GPU (TENSORPLAY_BACKEND=cuda)")
    for n in (256 * 1024, 4 << 20):
        rows = _table(n)
        print(f"-- {n} float32 elements, GPU us per launch (default grid {grid_1d(n)})")
        for name, us in rows.items():
            print(f"{name:40} {us:8.2f}")


if __name__ == "__main__":
    main()
