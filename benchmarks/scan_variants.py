"""Time variants of the chained scan (``tensorplay/kernels/scan.py``) on a
real GPU, beside torch.cumsum and tensorplay's own cumsum in the same run::

    python -m benchmarks.scan_variants [--log2n 26] [--items 16 24 32] [--resident 2 3 4] [--reps 20]

A variant is the chained kernel built with other knobs: the items each lane
scans (the tile is 256 lanes of them), the blocks it asks the compiler to
leave room for on a multiprocessor (registers to 65536 / (blocks * 256) a
thread), and where a block asks for its next tile's ticket: as it begins the
tile, or early, once this tile's prefix is known (the atomic's round trip
then overlaps the stores). Each runs as many blocks as fit at once
(multiprocessors x resident), the ticket and flags reset before each call as
``tp.cumsum`` does. Each is checked against NumPy's float64 running sum, then
timed with CUDA events (median of ``--reps`` samples of 10 calls in a row)
and printed in G elements/s. On the simulator the sizes are tiny and the
figures say only that every variant computes the right sum.
"""

from __future__ import annotations

import argparse
import itertools

import numpy as np

import tensorplay as tp
from benchmarks.common import device_ms, on_gpu, peer, torch_events, tp_events
from tensorplay._scans import _launch_shape
from tensorplay.kernels import lookback
from tensorplay.kernels import scan as sk
from tensorplay.runtime.backend import get as get_backend
from tensorplay.runtime.launch import launch


def variant_call(x, out, items: int, resident: int, claim_early: bool):
    """A call of one variant on the (1, n) float32 rows ``x`` into ``out`` (which it returns)."""
    n = x.shape[1]
    lanes, _, _ = _launch_shape(1, n, items)  # as tp.cumsum: 256 on a GPU
    tiles = -(-n // (lanes * items))
    status = tp.zeros(1 + tiles, dtype=tp.uint64)
    values = tp.empty(max(1, lookback.values_size("float32", tiles)), dtype=tp.float32)
    kernel = sk.chained_kernel("sum", "float32", "", False, items, resident, claim_early)
    blocks = max(1, min(tiles, get_backend().sm_count * resident)) if on_gpu() else 2

    def call():
        status.zero_()
        launch(kernel, (blocks, 1, 1), (lanes, 1, 1), [x, out, status, values])
        return out

    return call


def _rate(n: int, ms: float) -> float:
    return n / (ms * 1e-3) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log2n", type=int, default=26 if on_gpu() else 13)
    parser.add_argument("--items", type=int, nargs="+", default=[16, 24, 32] if on_gpu() else [2, 4])
    parser.add_argument("--resident", type=int, nargs="+", default=[2, 3, 4] if on_gpu() else [1])
    parser.add_argument("--reps", type=int, default=20 if on_gpu() else 1)
    args = parser.parse_args()
    n = 1 << args.log2n
    host = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    ref = np.cumsum(host.astype(np.float64))
    scale = max(1.0, float(np.max(np.abs(ref))))
    x = tp.asarray(host).reshape(1, n)
    out = tp.empty((1, n), dtype=tp.float32)
    timing = {"n": args.reps, "warmup": 3, "batch": 10 if on_gpu() else 1}
    print(f"cumsum of 2^{args.log2n} float32, G elements/s (device time, median of {args.reps} samples)")

    def report(label: str, call) -> None:
        err = float(np.max(np.abs(call().numpy().astype(np.float64).ravel() - ref)) / scale)
        if not err < 1e-3:
            raise AssertionError(f"{label}: relative error {err:.3g} against NumPy's float64 running sum")
        ms = device_ms(call, *tp_events(), tp.cuda.synchronize, **timing)
        print(f"  {label:<44} {_rate(n, ms):8.1f}")

    report("tp.cumsum", lambda: tp.cumsum(x, dim=1))
    for items, resident, early in itertools.product(args.items, args.resident, (False, True)):
        label = f"items {items:>2}, {resident} resident, ticket {'early' if early else 'at start'}"
        report(label, variant_call(x, out, items, resident, early))
    torch = peer("torch")
    if torch is not None and on_gpu():
        tx = torch.from_numpy(host).cuda()
        ms = device_ms(lambda: torch.cumsum(tx, 0), *torch_events(torch), torch.cuda.synchronize, **timing)
        print(f"  {'torch.cumsum':<44} {_rate(n, ms):8.1f}")


if __name__ == "__main__":
    main()
