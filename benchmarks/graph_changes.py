"""Graphs that change (issue 16): an update against reset + capture +
instantiate, one kernel node's new arguments, dropout's fresh numbers at every
replay, and what the stale-output check costs a compiled call.

The 100-node graph is a chain of a user kernel, ``scale_into[grid](b[i+1],
b[i], f)``, over one set of buffers; "pointers changed" is the same chain over
another set. Three ways to get there: capture again with ``update=True``
(``cuGraphExecUpdate``), ``set_args`` on every node, and reset, capture and
instantiate anew.
"""

from __future__ import annotations

import time

import numpy as np

import tensorplay as tp
import tensorplay.nn.functional as F
from benchmarks.common import device_ms, host_us, on_gpu, peer, reps, torch_events, tp_events
from benchmarks.targets import at_most, below, judge

N_NODES = 100


@tp.jit
def scale_into(out, x, factor):
    i = tp.cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * factor


def _chain(g, bufs, update: bool = False, launch=None):
    n = bufs[0].numel()
    grid = (-(-n // 256), 1, 1)
    with tp.cuda.graph(g, update=update):
        for i in range(N_NODES):
            scale_into[grid, 256](bufs[i + 1], bufs[i], 1.0001)


def _median_ms(fn, n: int) -> float:
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return float(np.median(samples))


def update_100_nodes(rows: list, progress) -> None:
    n = 1 << 16 if on_gpu() else 64
    sets = [[tp.ones(n) for _ in range(N_NODES + 1)] for _ in range(2)]
    g = tp.cuda.CUDAGraph()
    _chain(g, sets[0])  # compiles the kernel
    which = [0]

    def fresh():
        which[0] ^= 1
        g.reset()
        _chain(g, sets[which[0]])

    def update():
        which[0] ^= 1
        _chain(g, sets[which[0]], update=True)
        if not g.last_update.updated:
            raise AssertionError(f"the 100-node graph with new pointers was not updated in place: {g.last_update}")

    def set_all():
        which[0] ^= 1
        bufs = sets[which[0]]
        for i, node in enumerate(nodes):
            node.set_args(bufs[i + 1], bufs[i], 1.0001)

    k = 20 if on_gpu() else 2
    t_fresh = _median_ms(fresh, k)
    progress.step("graph update: fresh capture")
    t_update = _median_ms(update, k)
    g.reset()
    _chain(g, sets[0])
    which[0] = 0
    nodes = g.nodes()
    t_set = _median_ms(set_all, k)
    g.replay()  # the chain over the buffers set last, against the host
    got = np.array([b.numpy()[0] for b in sets[which[0]][1:]], dtype=np.float64)
    np.testing.assert_allclose(got, np.cumprod(np.full(N_NODES, 1.0001)), rtol=1e-5)
    progress.step("graph update: update and set_args")
    for label, t in (("capture with update=True (cuGraphExecUpdate)", t_update), ("set_args on every node", t_set)):
        row = {
            "name": f"{N_NODES}-kernel graph, pointers changed: {label}, host ms",
            "unit": "ms",
            "lower_is_better": True,
            "tensorplay": t,
            "reset_capture_instantiate": t_fresh,
        }
        faster = t_fresh / t
        judge(
            row, faster >= 5, f">= 5x faster than reset + capture + instantiate ({t_fresh:.3g} ms): {faster:.1f}x here"
        )
        rows.append(row)


def set_args_one(rows: list, progress) -> None:
    n = 1 << 16 if on_gpu() else 64
    x, y, out = tp.ones(n), tp.zeros(n), tp.empty(n)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        scale_into[(-(-n // 256), 1, 1), 256](out, x, 2.0)
    (node,) = g.nodes()
    flip = [x, y]

    def change():
        flip.reverse()
        node.set_args(out, flip[0], 2.0)

    row = {
        "name": "set_args on one kernel node (3 arguments), host us",
        "unit": "us", "lower_is_better": True,
        "tensorplay": host_us(change, tp.cuda.synchronize, n=2000 if on_gpu() else 20, repeats=5 if on_gpu() else 1),
    }  # fmt: skip
    below(row, 2, "us")
    rows.append(row)
    progress.step("set_args")


def dropout_replay(rows: list, progress) -> None:
    """A layer's forward with dropout, graphed: GPU time per replay with the
    mask drawn in the graph (``F.dropout``: one kernel draws, masks and
    scales), next to the same graph multiplying by a fixed scaled mask instead
    (no generator: one kernel too), and torch's graph with its dropout."""
    b, d, p = (256, 1024, 0.1) if on_gpu() else (4, 8, 0.1)
    tp.manual_seed(0)
    x, w = tp.randn(b, d), tp.randn(d, d) * (1.0 / d**0.5)
    fixed = (tp.rand(b, d) >= p) * (1.0 / (1.0 - p))
    ways = {"rng": lambda h: F.dropout(h, p), "fixed": lambda h: h * fixed}
    graphs = {}
    for name, drop in ways.items():
        drop((x @ w).relu())
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            graphs[name] = (g, drop((x @ w).relu()))
    s = tp.cuda.Stream()
    times = {
        name: device_ms(lambda g=g: g.replay(s), *tp_events(s), s.synchronize, **reps()) * 1e3
        for name, (g, _) in graphs.items()
    }
    g, out = graphs["rng"]
    g.replay()
    first = out.numpy() > 0
    g.replay()
    if np.array_equal(first, out.numpy() > 0):
        raise AssertionError("a replayed dropout drew the same mask twice")
    row = {
        "name": f"graphed layer ({b}x{d} @ {d}x{d}, relu, dropout p={p}), replay GPU us (driver column: fixed mask)",
        "unit": "us", "lower_is_better": True, "tensorplay": times["rng"], "driver": times["fixed"],
    }  # fmt: skip
    progress.step("dropout tensorplay")
    torch = peer("torch")
    if torch is not None:
        xt, wt = torch.from_numpy(x.numpy()).cuda(), torch.from_numpy(w.numpy()).cuda()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.nn.functional.dropout((xt @ wt).relu(), p)
        torch.cuda.current_stream().wait_stream(side)
        tg = torch.cuda.CUDAGraph()
        with torch.cuda.graph(tg):
            torch.nn.functional.dropout((xt @ wt).relu(), p)
        row["torch"] = device_ms(tg.replay, *torch_events(torch), torch.cuda.synchronize, **reps()) * 1e3
    at_most(row, 1.05, of="driver", label="the fixed-mask graph")
    rows.append(row)
    progress.step("dropout torch")


def stale_check_cost(rows: list, progress) -> None:
    n = 1024 if on_gpu() else 16
    f = tp.compile(lambda x: (x + 1, x * 2, x - 3))
    x = tp.ones(n)
    for _ in range(3):
        f(x)
    figures, n_calls = {}, (2000, 5) if on_gpu() else (20, 1)
    for on in (True, False):
        tp.compiler.config.check_stale_outputs = on
        figures[on] = host_us(lambda: f(x), tp.cuda.synchronize, *n_calls)
    tp.compiler.config.check_stale_outputs = True
    row = {
        "name": "compiled call of 3 ops returning 3 tensors, host us, stale-output check on (driver column: off)",
        "unit": "us", "lower_is_better": True, "tensorplay": figures[True], "driver": figures[False],
    }  # fmt: skip
    per_op = (figures[True] - figures[False]) / 3
    judge(row, per_op <= 0.2, f"<= 0.2 us per op of the call ({per_op:+.2f} us here; eager ops pay nothing)")
    rows.append(row)
    progress.step("stale-output check")


SECTIONS = [(update_100_nodes, 2), (set_args_one, 1), (dropout_replay, 2), (stale_check_cost, 1)]
