"""Where the host time of an eager and a graphed training step goes: the small
model of ``benchmarks.training`` (MLP 512-1024-1024-512, batch 128, SGD) run
under ``cProfile``; prints the functions with the most own time, then the most
cumulative time, per step. Run it on the GPU machine (on the simulator the
simulated kernels dominate)::

    python -m benchmarks.profile_training [--steps 200] [--top 30]
"""

from __future__ import annotations

import argparse
import cProfile
import pstats

import numpy as np

import tensorplay as tp
from benchmarks.training import BATCH, SIZES, _tp_steps, _weights


def profile(step, steps: int, top: int, title: str) -> None:
    for _ in range(5):
        step()
    tp.cuda.synchronize()
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        step()
    tp.cuda.synchronize()
    prof.disable()
    stats = pstats.Stats(prof)
    print(f"== {title}: {stats.total_tt / steps * 1e6:.0f} us per step under the profiler")
    for key in ("tottime", "cumulative"):
        print(f"-- by {key} (times are totals over {steps} steps)")
        stats.sort_stats(key).print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=200, help="profiled steps of each kind")
    parser.add_argument("--top", type=int, default=30, help="functions listed per table")
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    x = tp.tensor(rng.standard_normal((BATCH, SIZES[0]), dtype=np.float32))
    y = tp.tensor(rng.standard_normal((BATCH, SIZES[-1]), dtype=np.float32))
    eager, graphed, _, _ = _tp_steps(SIZES, _weights(SIZES), x, y, "SGD")
    profile(eager, args.steps, args.top, "eager step")
    profile(graphed, args.steps, args.top, "forward and backward graphed (make_graphed_callables)")


if __name__ == "__main__":
    main()
