"""While nodes: cost per iteration next to the same body unrolled as straight-line
graph nodes, and next to the loop driven from the host with a convergence check
(a flag read back) every iteration. Every figure is the median of ``RUNS``
wall-clock runs of the whole loop (``common.wall_us``), on every side."""

from __future__ import annotations

import numpy as np

import tensorplay as tp
from benchmarks.common import RUNS, optional, wall_us
from benchmarks.targets import at_most, judge, measurement


def _body(x, n, flag):
    x.add_(1.0)  # the user's work
    n.sub_(1)
    tp.gt(n, 0, out=flag)  # the convergence test


def _per_iteration_us(graph, n, count: int, runs: int = RUNS) -> float:
    """µs per pass of ``graph`` whose loop runs ``count`` times from ``n = count``
    (the median of ``runs`` replays after one warm-up)."""
    n.fill_(count)
    graph.replay()
    return wall_us(graph.replay, tp.cuda.synchronize, per=count, runs=runs, before=lambda: n.fill_(count))


@tp.jit
def count_down(n, flag):
    """The whole loop body in one kernel: n -= 1; flag = n > 0."""
    if tp.cuda.grid(1) == 0:
        n[0] -= 1
        flag[0] = n[0] > 0


@tp.jit
def count_down_and_set(n, handle):
    """The same, setting the while node's condition itself (no flag, no setter kernel)."""
    if tp.cuda.grid(1) == 0:
        n[0] -= 1
        tp.cuda.set_conditional(handle, np.uint32(1 if n[0] > 0 else 0))


def _raw_while(x, n):
    """The fused loop below (``x.add_(1.0)``, then ``count_down_and_set``) built by
    raw ``cuda.bindings`` calls, tensorplay only issuing the two kernels: a capture,
    a while node added with ``cuGraphAddNode``, its body captured with
    ``cuStreamBeginCaptureToGraph``. Returns a function that replays it."""
    from cuda.bindings import driver as drv

    from benchmarks.graph_ops import _ok

    mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
    s, body_stream = tp.cuda.Stream(), tp.cuda.Stream()
    ctx = _ok(drv.cuCtxGetCurrent())
    _ok(drv.cuStreamBeginCapture(s._h, mode))
    _, _, graph, deps, edges, ndeps = _ok(drv.cuStreamGetCaptureInfo(s._h))
    handle = _ok(drv.cuGraphConditionalHandleCreate(graph, ctx, 1, drv.CU_GRAPH_COND_ASSIGN_DEFAULT))
    p = drv.CUgraphNodeParams()
    p.type = drv.CUgraphNodeType.CU_GRAPH_NODE_TYPE_CONDITIONAL
    p.conditional.handle = handle
    p.conditional.type = drv.CUgraphConditionalNodeType.CU_GRAPH_COND_TYPE_WHILE
    p.conditional.size = 1
    p.conditional.ctx = ctx
    node = _ok(drv.cuGraphAddNode(graph, deps, edges, ndeps, p))
    flags = drv.CUstreamUpdateCaptureDependencies_flags.CU_STREAM_SET_CAPTURE_DEPENDENCIES
    _ok(drv.cuStreamUpdateCaptureDependencies(s._h, [node], None, 1, flags))
    _ok(drv.cuStreamBeginCaptureToGraph(body_stream._h, p.conditional.phGraph_out[0], None, None, 0, mode))
    with tp.cuda.stream(body_stream):
        x.add_(1.0)
        count_down_and_set[1, 32](n, np.uint64(int(handle)))
    _ok(drv.cuStreamEndCapture(body_stream._h))
    exec_ = _ok(drv.cuGraphInstantiate(_ok(drv.cuStreamEndCapture(s._h)), 0))
    return lambda: _ok(drv.cuGraphLaunch(exec_, s._h))


def while_loop(rows: list, progress) -> None:
    big = tp.cuda.backend() == "cuda"
    iters, unroll = (2000, 100) if big else (20, 5)
    x, n, flag = tp.zeros(1 << 12 if big else 16), tp.zeros(1, dtype=tp.int32), tp.empty(1, dtype=tp.bool)
    _body(x, n, flag)  # compile outside capture
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        tp.gt(n, 0, out=flag)
        with g.while_(flag):
            _body(x, n, flag)
    flat = tp.cuda.CUDAGraph()
    with tp.cuda.graph(flat):
        for _ in range(unroll):
            _body(x, n, flag)
    sync = tp.cuda.synchronize
    per_while = _per_iteration_us(g, n, iters)
    progress.step("while node")
    per_flat = _per_iteration_us(flat, n, unroll)
    progress.step("unrolled")

    def host_loop():
        while True:
            _body(x, n, flag)
            if not flag.item():
                break

    n.fill_(iters)
    host_loop()  # warm-up, as the graphs had
    per_host = wall_us(host_loop, sync, per=iters, before=lambda: n.fill_(iters))
    progress.step("host loop")

    # the same loop with the test fused into one kernel that sets the condition
    fused = tp.cuda.CUDAGraph()
    with tp.cuda.graph(fused):
        with fused.while_() as handle:
            x.add_(1.0)
            count_down_and_set[1, 32](n, handle)

    flat_fused = tp.cuda.CUDAGraph()  # the same two kernels, unrolled (writing a flag instead)
    with tp.cuda.graph(flat_fused):
        for _ in range(unroll):
            x.add_(1.0)
            count_down[1, 32](n, flag)

    per_fused = _per_iteration_us(fused, n, iters)
    per_flat_fused = _per_iteration_us(flat_fused, n, unroll)
    row = {
        "name": "while node, 2-kernel body whose kernel sets the condition, us/iter "
        "(driver column: the same two kernels unrolled in a graph)",
        "unit": "us",
        "lower_is_better": True,
        "tensorplay": per_fused,
        "driver": per_flat_fused,
    }
    at_most(row, 1.1, of="driver", label="unrolled")
    rows.append(row)
    if big:  # the same while node built by raw driver calls: the driver's own cost per pass
        replay_raw = _raw_while(x, n)
        per_raw = wall_us(replay_raw, sync, per=iters, before=lambda: n.fill_(iters))
        row = {
            "name": "while node, 2-kernel body whose kernel sets the condition, us/iter (driver column: the same "
            "two kernels in a while node built by raw driver calls, without the end-of-pass kernel tensorplay "
            "adds to count passes and read the cancel request)",
            "unit": "us",
            "lower_is_better": True,
            "tensorplay": per_fused,
            "driver": per_raw,
        }
        at_most(row, 1.05, of="driver", label="the raw node",
                note=f"; the raw node is {per_raw / per_flat_fused:.2f}x the unrolled kernels")  # fmt: skip
        rows.append(row)
    row = {
        "name": "while node, flag loop, us per iteration (driver column: the same body unrolled in a graph)",
        "unit": "us",
        "lower_is_better": True,
        "tensorplay": per_while,
        "driver": per_flat,
    }
    at_most(row, 1.1, of="driver", label="unrolled")
    rows.append(row)
    host = {
        "name": "host loop + flag readback, us per iteration (tensorplay eager / torch eager)",
        "unit": "us",
        "lower_is_better": True,
        "tensorplay": per_host,
    }
    judge(host, per_host / per_while >= 10, f">= 10x the while node's time ({per_host / per_while:.1f}x here)")
    torch = optional("torch")
    if torch is not None and torch.cuda.is_available():
        tx, tn = torch.zeros(x.numel(), device="cuda"), torch.zeros(1, dtype=torch.int32, device="cuda")

        def torch_loop():
            while True:
                tx.add_(1.0)
                tn.sub_(1)
                if not bool(tn > 0):
                    break

        tn.fill_(iters)
        torch_loop()  # warm-up
        host["torch"] = wall_us(torch_loop, torch.cuda.synchronize, per=iters, before=lambda: tn.fill_(iters))
    rows.append(host)
    progress.step("torch host loop")


def while_overhead(rows: list, progress) -> None:
    """A one-kernel body: what a pass of a while node costs beyond its body, with
    the condition copied from a flag and with the kernel setting it."""
    iters = 2000 if tp.cuda.backend() == "cuda" else 20
    n, flag = tp.zeros(1, dtype=tp.int32), tp.empty(1, dtype=tp.bool)
    count_down[1, 32](n, flag)  # compile outside capture
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        tp.gt(n, 0, out=flag)
        with g.while_(flag):
            count_down[1, 32](n, flag)
    fused = tp.cuda.CUDAGraph()
    with tp.cuda.graph(fused):
        with fused.while_() as handle:
            count_down_and_set[1, 32](n, handle)
    flat = tp.cuda.CUDAGraph()
    with tp.cuda.graph(flat):
        for _ in range(100):
            count_down[1, 32](n, flag)

    unrolled = _per_iteration_us(flat, n, 100)
    for name, graph in [("flag + setter kernel", g), ("kernel sets the condition", fused)]:
        row = {
            "name": f"while node, 1-kernel body, {name}, us per pass (driver column: the kernel unrolled in a graph)",
            "unit": "us",
            "lower_is_better": True,
            "tensorplay": _per_iteration_us(graph, n, iters),
            "driver": unrolled,
        }
        measurement(row, f"a while node's cost per pass beyond its body: {row['tensorplay'] - unrolled:+.2f} us")
        rows.append(row)
    progress.step("while overhead")


def while_body_sizes(rows: list, progress) -> None:
    """The while node's ratio to the unrolled body as the body grows: two
    elementwise kernels over n floats plus the kernel that counts down and sets
    the condition, against the same three kernels unrolled."""
    sizes, iters, unroll = ((1 << 20, 1 << 22, 1 << 24), 200, 20) if tp.cuda.backend() == "cuda" else ((16,), 4, 2)
    n = tp.zeros(1, dtype=tp.int32)
    flag = tp.empty(1, dtype=tp.bool)
    for size in sizes:
        x = tp.zeros(size)
        x.mul_(0.5).add_(0.5)
        count_down[1, 32](n, flag)  # compile outside capture
        loop = tp.cuda.CUDAGraph()
        with tp.cuda.graph(loop):
            with loop.while_() as handle:
                x.mul_(0.5).add_(0.5)
                count_down_and_set[1, 32](n, handle)
        flat = tp.cuda.CUDAGraph()
        with tp.cuda.graph(flat):
            for _ in range(unroll):
                x.mul_(0.5).add_(0.5)
                count_down[1, 32](n, flag)

        looped, unrolled = _per_iteration_us(loop, n, iters), _per_iteration_us(flat, n, unroll)
        row = {
            "name": f"while node, body of 2 elementwise kernels on {size} float32 + a counter, us/iter "
            "(driver column: the same kernels unrolled in a graph)",
            "unit": "us",
            "lower_is_better": True,
            "tensorplay": looped,
            "driver": unrolled,
        }
        at_most(row, 1.1, of="driver", label="unrolled")
        rows.append(row)
        del x, loop, flat
        progress.step(f"while body {size}")


SECTIONS = [(while_loop, 4), (while_overhead, 1), (while_body_sizes, 3)]
