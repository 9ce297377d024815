"""What a capture costs the host: capture and instantiate of N op pairs
(``y = y * a + b`` on 1M floats, two kernels each), tensorplay beside torch in
the same process, sampled alike (the median of five captures each side, each
graph freed before the next), for N = 100, 1000 and 5000. Each row says what
instantiation took of it and the microseconds per kernel.

Run as a module to see where the time goes per kernel::

    python -m benchmarks.capture_cost [--pairs 1000] [--profile] [--top 30]

prints, for one size, the phases of a capture (the ops recorded, the edge
rewrite, cuGraphInstantiate), the same ops run eagerly, and the driver's own
share: the same kernels launched into a capture with their parameters packed
beforehand (no op layer, no recording) and that graph's instantiation,
``captured_node`` (the per-kernel read of the node the launch added), the
launches eagerly, and both through the context's ``CUfunction`` rather than
the ``CUkernel`` numba-cuda loads (whether the handle costs the driver time),
beside torch's capture and instantiation. ``--profile`` adds a cProfile of one
capture (which inflates Python-level calls: the bindings' enum constructors
count as calls there, and cost ~0.25 us each without it).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import struct
import time

import tensorplay as tp
from benchmarks.common import peer
from benchmarks.targets import at_most

SIZES = (100, 1000, 5000)
ELEMENTS = 1 << 20 if tp.cuda.backend() == "cuda" else 64  # the simulator runs each kernel in Python
REPEATS = 5
_FLOATS = "1M floats" if ELEMENTS == 1 << 20 else f"{ELEMENTS} floats"


class _Timed:
    """Wraps a function, adding the seconds each call took to ``spent``."""

    def __init__(self, fn) -> None:
        self.fn, self.spent = fn, 0.0

    def __call__(self, *args, **kwargs):
        t0 = time.perf_counter()
        try:
            return self.fn(*args, **kwargs)
        finally:
            self.spent += time.perf_counter() - t0


def _tp_capture(pairs: int, y, a, b, phases: dict | None = None) -> tuple[float, float]:
    """Milliseconds to capture ``pairs`` op pairs and instantiate the graph
    (``capture_end`` instantiates), and the instantiation's share of it (the
    edge rewrite included). With ``phases``, also the ops' share and the edge
    rewrite's (``capture_end`` is timed from the inside)."""
    from tensorplay.runtime.backend import get as get_backend

    dev = get_backend()
    driver = None
    if tp.cuda.backend() == "cuda":
        from tensorplay.runtime.backend import driver
    g = tp.cuda.CUDAGraph()
    tp.cuda.synchronize()
    instantiate = dev.graph_instantiate = _Timed(dev.graph_instantiate)  # an instance attribute over the method
    rewrite = _Timed(driver.overlap_kernels if driver is not None else None)
    if driver is not None:
        driver.overlap_kernels = rewrite
    try:
        t0 = time.perf_counter()
        with tp.cuda.graph(g):
            for _ in range(pairs):
                y = y * a + b
            t1 = time.perf_counter()
        t2 = time.perf_counter()
    finally:
        del dev.graph_instantiate
        if driver is not None:
            driver.overlap_kernels = rewrite.fn
    if phases is not None:
        phases["capture: the ops, recorded"] = (t1 - t0) * 1e3
        phases["capture_end"] = (t2 - t1) * 1e3
        phases["  edge rewrite (programmatic edges)"] = rewrite.spent * 1e3
        phases["  cuGraphInstantiate"] = (instantiate.spent - rewrite.spent) * 1e3
    del g, y
    gc.collect()
    return (t2 - t0) * 1e3, instantiate.spent * 1e3


def _torch_capture(torch, pairs: int, y, a, b, phases: dict | None = None) -> tuple[float, float]:
    g = torch.cuda.CUDAGraph()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    with torch.cuda.graph(g):
        for _ in range(pairs):
            y = y * a + b
        t1 = time.perf_counter()
    t2 = time.perf_counter()
    if phases is not None:
        phases["torch: capture, the ops"] = (t1 - t0) * 1e3
        phases["torch: capture_end (instantiates)"] = (t2 - t1) * 1e3
    del g, y
    gc.collect()
    return (t2 - t0) * 1e3, 0.0


def _median(samples: list) -> tuple[float, float]:
    """The median total (capture_end included) and the median instantiation."""
    return statistics.median(s[0] for s in samples), statistics.median(s[1] for s in samples)


def _operands(torch):
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
    return (y, a, b), (ty, ta, tb)


def capture_instantiate(rows: list, progress) -> None:
    """One row per N: capture + instantiate in ms, tensorplay beside torch."""
    torch = peer("torch")
    sizes = SIZES if tp.cuda.backend() == "cuda" else (10,)
    (y, a, b), (ty, ta, tb) = _operands(torch)
    for pairs in sizes:
        ours, theirs = [], []
        for _ in range(REPEATS):
            ours.append(_tp_capture(pairs, y, a, b))
            if torch is not None:
                theirs.append(_torch_capture(torch, pairs, ty, ta, tb))
        total, inst = _median(ours)
        row = {
            "name": f"capture+instantiate of {pairs} op pairs (y = y * a + b, {_FLOATS}), host ms "
            f"(instantiate {inst:.3g} ms of it; {total * 1e3 / (2 * pairs):.3g} us a kernel)",
            "unit": "ms",
            "lower_is_better": True,
            "tensorplay": total,
            "torch": _median(theirs)[0] if theirs else None,
        }
        at_most(row, 1.0)  # issue 39
        rows.append(row)
    progress.step("capture cost")


SECTIONS = [(capture_instantiate, 1)]


# -- where the time goes ------------------------------------------------------------


def _eager_ms(pairs: int, y, a, b) -> float:
    """The same ops run eagerly: host ms to issue them (the device's work not waited for)."""
    tp.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(pairs):
        y = y * a + b
    t1 = time.perf_counter()
    tp.cuda.synchronize()
    return (t1 - t0) * 1e3


def _raw_launches(n: int) -> list:
    """The two kernels of ``y = y * a + b`` over ``n`` floats with their
    parameters packed, as the ops launch them: (launcher, grid, block,
    parameters) each, ping-ponging between two buffers (kept alive last)."""
    from tensorplay import _ops
    from tensorplay.runtime.launch import grid_groups

    y, a, b, other = tp.ones(n), tp.full((n,), 0.5), tp.full((n,), 0.25), tp.empty(n)
    _ = y * a + b  # the plans of these operands made
    grid, block = grid_groups(n)
    pack = struct.Struct("<QQQQ").pack  # output address, element count, two operand addresses
    launches: list = []
    for op, src, operand, dst in (("mul", y, a, other), ("add", other, b, y)):
        plan = _ops._FAST_PLANS[(op, "aa", y.dtype, y.dtype)]
        launcher = plan.kernels._exact or plan.kernels._general
        launches.append((launcher, grid, block, pack(dst._ptr, n, src._ptr, operand._ptr)))
    launches.append((y, a, b, other))
    return launches


def _by_function(launcher):
    """A launch of ``launcher``'s kernel through the context's ``CUfunction``
    of it (``cuKernelGetFunction``) where tensorplay passes the ``CUkernel``
    numba-cuda loaded: whether the handle changes the driver's time per launch
    (None on the simulator)."""
    if tp.cuda.backend() != "cuda":
        return None
    from cuda.bindings import driver as drv

    err, function = drv.cuKernelGetFunction(drv.CUkernel(int(launcher._func)))
    assert not err, err
    data, _, table = launcher._buffers()

    def launch(grid, block, stream, params: bytes) -> None:
        data[: len(params)] = params
        (err,) = drv.cuLaunchKernel(function, *grid, *block, 0, stream, table, 0)
        assert not err, err

    return launch


def _raw_capture(pairs: int, launches: list, read_nodes: bool = False, by_function: bool = False):
    """Host ms to capture ``2 * pairs`` pre-packed launches on a stream (reading
    the node each added when ``read_nodes``; through the context's function
    when ``by_function``), and to instantiate that graph with the driver's
    call alone; None where there is no context function (the simulator)."""
    from tensorplay.runtime.backend import get as get_backend

    dev, s = get_backend(), tp.cuda.Stream()
    kernels = [(_by_function(k[0]) if by_function else k[0].launch_packed, *k[1:]) for k in launches[:2]]
    if kernels[0][0] is None:
        return None
    tp.cuda.synchronize()
    t0 = time.perf_counter()
    dev.begin_capture(s._h, "global")
    for _ in range(pairs):
        for launch, grid, block, params in kernels:
            launch(grid, block, s._h, params)
            if read_nodes:
                dev.captured_node(s._h)
    graph = dev.end_capture(s._h)
    t1 = time.perf_counter()
    if dev.name == "cuda":
        from cuda.bindings import driver as drv

        err, graph_exec = drv.cuGraphInstantiate(graph, 0)
        assert not err, err
    else:
        graph_exec = dev.graph_instantiate(graph)
    t2 = time.perf_counter()
    dev.graph_exec_destroy(graph_exec)
    dev.graph_destroy(graph)
    return (t1 - t0) * 1e3, (t2 - t1) * 1e3


def _raw_eager(pairs: int, launches: list, by_function: bool = False):
    """Host ms to issue the same pre-packed launches eagerly, over 1024 floats
    (the device keeps up), through the ``CUkernel`` or the context's function."""
    s = tp.cuda.current_stream()
    kernels = [(_by_function(k[0]) if by_function else k[0].launch_packed, *k[1:]) for k in launches[:2]]
    if kernels[0][0] is None:
        return None
    tp.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(pairs):
        for launch, grid, block, params in kernels:
            launch(grid, block, s._h, params)
    t1 = time.perf_counter()
    tp.cuda.synchronize()
    return (t1 - t0) * 1e3


def breakdown(pairs: int) -> None:
    """Print where the host time of a capture of ``pairs`` op pairs goes (medians of five)."""
    torch = peer("torch")
    (y, a, b), (ty, ta, tb) = _operands(torch)
    launches, small = _raw_launches(ELEMENTS), _raw_launches(min(1024, ELEMENTS))
    _tp_capture(pairs, y, a, b)
    samples: dict[str, list] = {}

    def add(name: str, ms: float | None) -> None:
        if ms is not None:
            samples.setdefault(name, []).append(ms)

    for _ in range(REPEATS):
        phases: dict = {}
        add("tensorplay: capture + instantiate", _tp_capture(pairs, y, a, b, phases)[0])
        for name, ms in phases.items():
            add(name, ms)
        add("the same ops, eagerly (host)", _eager_ms(pairs, y, a, b))
        plain, inst = _raw_capture(pairs, launches)
        add("driver: pre-packed launches captured", plain)
        add("driver: their cuGraphInstantiate", inst)
        add("  + captured_node after each launch", _raw_capture(pairs, launches, read_nodes=True)[0] - plain)
        by_function = _raw_capture(pairs, launches, by_function=True)
        add("  captured through the context's CUfunction", by_function and by_function[0])
        add("driver: pre-packed launches, eagerly (1K floats)", _raw_eager(pairs, small))
        add("  eagerly through the context's CUfunction", _raw_eager(pairs, small, by_function=True))
        if torch is not None:
            phases = {}
            add("torch: capture + instantiate", _torch_capture(torch, pairs, ty, ta, tb, phases)[0])
            for name, ms in phases.items():
                add(name, ms)
    kernels = 2 * pairs
    print(f"{pairs} op pairs ({kernels} kernels), host time, medians of {REPEATS}:")
    for name, values in samples.items():
        ms = statistics.median(values)
        print(f"  {name:<44} {ms:9.2f} ms  {ms * 1e3 / kernels:7.2f} us a kernel")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pairs", type=int, default=1000 if tp.cuda.backend() == "cuda" else 20)
    parser.add_argument("--profile", action="store_true", help="add a cProfile of one capture")
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    breakdown(args.pairs)
    if args.profile:
        (y, a, b), _ = _operands(None)
        prof = cProfile.Profile()
        prof.enable()
        _tp_capture(args.pairs, y, a, b)
        prof.disable()
        stats = pstats.Stats(prof)
        stats.sort_stats("tottime").print_stats(args.top)
        stats.sort_stats("cumulative").print_stats(args.top)


if __name__ == "__main__":
    main()
