"""What a capture costs the host: capture and instantiate of N op pairs
(``y = y * a + b`` on 1M floats, two kernels each), tensorplay beside torch in
the same process, sampled alike (the median of five captures each side, each
graph freed before the next), for N = 100, 1000 and 5000. Capture and
instantiate are also reported apart.

Run as a module to see where the time goes (cProfile of one capture)::

    python -m benchmarks.capture_cost [--pairs 1000] [--top 30]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import time

import tensorplay as tp
from benchmarks.common import peer

SIZES = (100, 1000, 5000)
ELEMENTS = 1 << 20
REPEATS = 5


def _tp_capture(pairs: int, y, a, b) -> tuple[float, float]:
    """Milliseconds to capture ``pairs`` op pairs and instantiate the graph
    (``capture_end`` instantiates), and the instantiation's share of it."""
    g = tp.cuda.CUDAGraph()
    tp.cuda.synchronize()
    t0 = time.perf_counter()
    with tp.cuda.graph(g):
        for _ in range(pairs):
            y = y * a + b
    t1 = time.perf_counter()
    inst = _instantiate_ms(g)
    del g, y
    gc.collect()
    return (t1 - t0) * 1e3, inst


def _instantiate_ms(g) -> float:
    """The time to instantiate ``g``'s graph once more (what capture_end paid for it)."""
    from tensorplay.runtime.backend import get as get_backend

    dev = get_backend()
    t0 = time.perf_counter()
    exec_ = dev.graph_instantiate(g._graph)
    t1 = time.perf_counter()
    dev.graph_exec_destroy(exec_)
    return (t1 - t0) * 1e3


def _torch_capture(torch, pairs: int, y, a, b) -> tuple[float, float]:
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.cuda.graph(g):
        for _ in range(pairs):
            y = y * a + b
    t1 = time.perf_counter()
    del g, y
    gc.collect()
    return (t1 - t0) * 1e3, 0.0


def _median(samples: list) -> tuple[float, float]:
    """The median total (capture_end included) and the median instantiation."""
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def capture_instantiate(rows: list, progress) -> None:
    """One row per N: capture + instantiate in ms, tensorplay beside torch."""
    torch = peer("torch")
    sizes = SIZES if tp.cuda.backend() == "cuda" else (10,)
    y, a, b = tp.ones(ELEMENTS), tp.full((ELEMENTS,), 0.5), tp.full((ELEMENTS,), 0.25)
    ty = ta = tb = None
    if torch is not None:
        ty = torch.ones(ELEMENTS, device="cuda")
        ta, tb = torch.full_like(ty, 0.5), torch.full_like(ty, 0.25)
        s = torch.cuda.Stream()  # torch asks for a warm-up on a side stream
        with torch.cuda.stream(s):
            _ = ty * ta + tb
        torch.cuda.current_stream().wait_stream(s)
    _ = y * a + b  # warm: kernels compiled, plans made
    for pairs in sizes:
        ours, theirs = [], []
        for _ in range(REPEATS):
            ours.append(_tp_capture(pairs, y, a, b))
            if torch is not None:
                theirs.append(_torch_capture(torch, pairs, ty, ta, tb))
        total, inst = _median(ours)
        ref = _median(theirs)[0] if theirs else None
        rows.append(
            {
                "name": f"capture+instantiate of {pairs} op pairs (y = y * a + b, 1M floats), host ms "
                f"(instantiate {inst:.3g} ms of it)",
                "unit": "ms",
                "lower_is_better": True,
                "tensorplay": total,
                "torch": ref,
                "target": "<= 1.0x torch" + (f" ({total / ref:.2f}x here)" if ref else ""),
            }
        )
    progress.step("capture cost")


SECTIONS = [(capture_instantiate, 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    y, a, b = tp.ones(ELEMENTS), tp.full((ELEMENTS,), 0.5), tp.full((ELEMENTS,), 0.25)
    _ = y * a + b
    _tp_capture(args.pairs, y, a, b)  # warm
    for _ in range(3):
        total, inst = _tp_capture(args.pairs, y, a, b)
        print(
            f"{args.pairs} pairs: {total:.2f} ms ({inst:.2f} ms instantiating), {total * 1e3 / (2 * args.pairs):.2f} us/kernel"
        )
    prof = cProfile.Profile()
    prof.enable()
    _tp_capture(args.pairs, y, a, b)
    prof.disable()
    stats = pstats.Stats(prof)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
