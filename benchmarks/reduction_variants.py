"""Time row-sum kernel variants on a real GPU, next to torch.sum.

Stand-alone (numba.cuda directly, no tensorplay import); run where a GPU is
visible::

    python benchmarks/reduction_variants.py

Each variant reduces the rows of a float32 (M, K) array with blocks of
(lanes, rows) threads and warp shuffles, as ``tensorplay/kernels/reduce.py``
does; they differ in the loads in flight per thread (``unroll``), in the
indexing (``2d``: ``x[row, k]``; ``flat``: a contiguous row's 1-D offset;
``pairs``: 8-byte loads of the row seen as float64, split with libdevice) and
in the items per lane that size the block (``per_lane``).
Each is checked against NumPy in float64, then timed with CUDA events (median
of 20 after warm-up) and printed in GB/s beside torch in the same run. A last
row per shape times tensorplay's own ``x.sum(dim=-1)``, one call and ten in a
row, to tell its kernel's speed from what one timed call adds.
"""

import functools
import itertools
import os
import statistics
import sys

import numpy as np

if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") != "0":
    sys.exit("reduction_variants.py times the real GPU: unset NUMBA_ENABLE_CUDASIM")

from numba import cuda, float32  # noqa: E402
from numba.cuda import libdevice  # noqa: E402

SHAPES = [(16384, 4096), (262144, 256), (2048, 32768)]

_TEMPLATE = """
def rows(x, flat, pairs, out):
    lane = cuda.threadIdx.x
    lanes = cuda.blockDim.x
    m_count = x.shape[0]
    k_count = u64({k_source}.shape[1])
    first = cuda.blockIdx.x * cuda.blockDim.y
    while first < m_count:
        row = first + cuda.threadIdx.y
        acc = float32(0)
        if row < m_count:
            step = u64(lanes)
            k = u64(lane)
            {setup}
            {accs} = float32(0)
            while k + step * u64({unroll_m1}) < k_count:
{body}
                k += step * u64({unroll})
            while k < k_count:
                a0 += {load_k}
                k += step
            acc = {total}
        offset = min(lanes, 32) // 2
        while offset > 0:
            acc += cuda.shfl_down_sync(0xFFFFFFFF, acc, offset)
            offset //= 2
        if lanes > 32:
            scratch = cuda.shared.array(8, float32)
            warps = lanes // 32
            base = cuda.threadIdx.y * warps
            if lane % 32 == 0:
                scratch[base + lane // 32] = acc
            cuda.syncthreads()
            if lane < 32:
                acc = scratch[base + lane] if lane < warps else float32(0)
                offset = warps // 2
                while offset > 0:
                    acc += cuda.shfl_down_sync(0xFFFFFFFF, acc, offset)
                    offset //= 2
            cuda.syncthreads()
        if lane == 0 and row < m_count:
            out[row] = acc
        first += cuda.gridDim.x * cuda.blockDim.y
"""


@cuda.jit(device=True, inline=True)
def pair_sum(v):
    """The two float32 held in the bits of float64 ``v``, added."""
    return libdevice.int_as_float(libdevice.double2loint(v)) + libdevice.int_as_float(libdevice.double2hiint(v))


@functools.cache
def make_kernel(unroll: int, indexing: str):
    k_source = "pairs" if indexing == "pairs" else "x"
    if indexing == "2d":
        setup, load = "pass", "x[row, {i}]"
    elif indexing == "flat":  # a contiguous row: one 1-D base, unit stride
        setup, load = "base = u64(row) * k_count", "flat[base + {i}]"
    else:  # 8-byte loads: the row seen as float64, two float32 per load
        setup, load = "pass", "pair_sum(pairs[row, {i}])"
    body = "\n".join(
        f"                a{j} += " + load.format(i=f"k + step * u64({j})" if j else "k") for j in range(unroll)
    )
    accs = " = ".join(f"a{j}" for j in range(unroll))
    src = _TEMPLATE.format(
        k_source=k_source,
        setup=setup,
        accs=accs,
        unroll=unroll,
        unroll_m1=unroll - 1,
        body=body,
        load_k=load.format(i="k"),
        total=" + ".join(f"a{j}" for j in range(unroll)),
    )
    scope = {"cuda": cuda, "float32": float32, "u64": np.uint64, "pair_sum": pair_sum}
    exec(compile(src, f"<rows {unroll} {indexing}>", "exec"), scope)
    return cuda.jit(scope["rows"])


def launch_shape(m: int, k: int, per_lane: int, sm_threads: int):
    lanes = min(256, max(1, 1 << max(0, (-(-k // per_lane) - 1).bit_length())))
    per_block = 256 // lanes
    blocks = max(1, min(-(-m // per_block), sm_threads // 256))
    return (blocks, 1, 1), (lanes, per_block, 1)


def time_ms(fn, *args, repeat: int = 20, batch: int = 1) -> float:
    """Median ms per call, from events (on the legacy stream) around ``batch`` calls."""
    fn(*args)
    cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = cuda.event(), cuda.event()
        start.record()
        for _ in range(batch):
            fn(*args)
        end.record()
        end.synchronize()
        times.append(cuda.event_elapsed_time(start, end) / batch)
    return statistics.median(times)


def product_rows(host: np.ndarray, gbytes: float, torch) -> None:
    """tensorplay's own ``x.sum(dim=-1)`` (on the legacy stream, as the events
    are), one call and ten in a row, next to torch's ten in a row: tells the
    kernel's speed from what a single timed call adds."""
    os.environ.setdefault("TENSORPLAY_BACKEND", "cuda")
    import tensorplay as tp

    x = tp.from_numpy(host)
    single = gbytes / (time_ms(x.sum, -1) / 1e3)
    batched = gbytes / (time_ms(x.sum, -1, batch=10) / 1e3)
    cells = f"one call {single:.0f}, ten in a row {batched:.0f}"
    if torch is not None:
        tx = torch.as_tensor(host, device="cuda")
        cells += f"; torch ten in a row {gbytes / (time_ms(tx.sum, -1, batch=10) / 1e3):.0f}"
    print(f"| {host.shape[0]}x{host.shape[1]} | tensorplay x.sum(-1) | {cells} | | | |")


def main() -> None:
    dev = cuda.get_current_device()
    sm_threads = dev.MULTIPROCESSOR_COUNT * 2048
    try:
        import torch
    except ImportError:
        torch = None
    print(f"{dev.name.decode() if isinstance(dev.name, bytes) else dev.name}; GB/s of a row sum, float32")
    print("| shape | unroll | indexing | per lane | GB/s | torch GB/s | rel. error |")
    print("|---|---|---|---|---|---|---|")
    for m, k in SHAPES:
        host = np.random.default_rng(0).random((m, k), dtype=np.float32)
        ref = host.astype(np.float64).sum(axis=1)
        x = cuda.to_device(host)
        flat = x.reshape(m * k)
        pairs = x.view(np.float64)  # (m, k / 2): k is even in SHAPES
        out = cuda.device_array(m, np.float32)
        gbytes = m * k * 4 / 1e9
        torch_gbs = None
        if torch is not None:
            tx = torch.as_tensor(host, device="cuda")
            torch_gbs = gbytes / (time_ms(tx.sum, -1) / 1e3)
        for unroll, indexing, per_lane in itertools.product((4, 8), ("2d", "flat", "pairs"), (4, 8, 16)):
            kernel = make_kernel(unroll, indexing)
            grid, block = launch_shape(m, k, per_lane, sm_threads)
            ms = time_ms(kernel[grid, block], x, flat, pairs, out)
            err = float(np.max(np.abs(out.copy_to_host() - ref) / np.maximum(np.abs(ref), 1)))
            torch_cell = f"{torch_gbs:.0f}" if torch_gbs else "-"
            gbs = gbytes / (ms / 1e3)
            print(f"| {m}x{k} | {unroll} | {indexing} | {per_lane} | {gbs:.0f} | {torch_cell} | {err:.1e} |")
            sys.stdout.flush()
        product_rows(host, gbytes, torch)


if __name__ == "__main__":
    main()
