"""The fused chain of ``benchmarks/fusion.py`` (8 elementwise ops and a sum on
16M float32) with each launch shape of the fused kernel: elements a thread
loads at a time (``kernels/fused.UNROLL``) and blocks of a full reduction
(what ``compiler/fusion._reduction_blocks`` picks), next to a
device-to-device copy, in one run.

    python -m benchmarks.fusion_variants [N]
"""

from __future__ import annotations

import sys

import numpy as np

import tensorplay as tp
from benchmarks.common import device_ms, reps, tp_events
from benchmarks.fusion import _checker, _copy_gbs, chain
from tensorplay.compiler import fusion
from tensorplay.kernels import fused


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 24
    rng = np.random.default_rng(0)
    xv, yv = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    x, y, check_ = tp.tensor(xv), tp.tensor(yv), _checker(xv, yv)
    copy = _copy_gbs(4 * n)
    print(f"copy: {copy:.0f} GB/s; the chain moves {3 * 4 * n / 1e6:.0f} MB")
    print(f"{'unroll':>6} {'blocks':>6} {'GB/s':>7} {'of copy':>8}")
    for unroll in (1, 4, 8):
        for blocks in (264, 528, 1056, 2112):
            fused.UNROLL = unroll
            fusion._reduction_blocks = lambda n, blocks=blocks: min(-(-n // fused.BLOCK), blocks)
            compiled = tp.compile(chain)
            compiled(x, y)
            check_(f"unroll {unroll}, {blocks} blocks", compiled(x, y))
            ms = device_ms(compiled.graph(x, y).replay, *tp_events(), tp.cuda.synchronize, **reps())
            gbs = 3 * 4 * n / (ms * 1e6)
            print(f"{unroll:>6} {blocks:>6} {gbs:>7.0f} {gbs / copy:>8.0%}", flush=True)


if __name__ == "__main__":
    main()
