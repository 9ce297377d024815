"""A graph of 100 tensorplay ops: GPU time per replay, next to the same kernels
captured through raw driver calls and to PyTorch's ``CUDAGraph`` of the same ops.

The raw reference uses tensorplay only to issue the kernels: the op sequence runs
on a stream made current with ``tp.cuda.stream(s)`` while ``cuStreamBeginCapture``
/ ``cuStreamEndCapture`` / ``cuGraphInstantiate`` / ``cuGraphLaunch`` come straight
from ``cuda.bindings``. Before it is instantiated, the raw graph gets the edges
tensorplay gives its own graphs (``overlap_kernels``: an edge into a kernel that
waits for the ones before it becomes programmatic), so that both graphs hold
the same nodes and edges, and any gap between the two is tensorplay's graph
code (extra nodes, pool handling), not its kernels or its edges. The raw graph
with the capture's plain edges is timed too (``driver_plain_edges``).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import tensorplay as tp
from benchmarks.common import device_ms, on_gpu, peer, reps, torch_events, tp_events
from benchmarks.targets import judge

N_OPS = 100
# Mixed elementwise ops that keep values in a small range, written so that they
# run unchanged on tensorplay and torch tensors.
OPS = [
    lambda y, x: y * 2,
    lambda y, x: y + 1,
    lambda y, x: y.relu(),
    lambda y, x: y - 0.5,
    lambda y, x: y.tanh(),
    lambda y, x: y * x,
    lambda y, x: y.sigmoid(),
    lambda y, x: -y,
    lambda y, x: y.abs(),
    lambda y, x: y + x,
]


def run_ops(x):
    """``N_OPS`` out-of-place ops on ``x``: y = x * 2; y = y + 1; y = y.relu(); ..."""
    y = x
    for i in range(N_OPS):
        y = OPS[i % len(OPS)](y, x)
    return y


def _ok(result):
    err, *vals = result
    if err:
        raise RuntimeError(f"driver call failed with {err!r}")
    return vals[0] if len(vals) == 1 else vals


def same_edges_as_tensorplay(graph) -> int:
    """Give a graph captured by raw driver calls the edges tensorplay's
    instantiate gives its own (``driver_overlap.overlap_kernels``); how many
    edges became programmatic (none on the simulator, which has no edge types)."""
    if not on_gpu():
        return 0
    from tensorplay.runtime.backend.driver_overlap import overlap_kernels

    return overlap_kernels(graph)


def programmatic_edges(graph) -> int:
    """How many of ``graph``'s edges are programmatic (0 on the simulator)."""
    if not on_gpu():
        return 0
    from cuda.bindings import driver as drv

    from tensorplay.runtime.backend.driver_calls import get_edges

    count = _ok(get_edges(graph, 0))[-1]  # (from, to, edge data, count)
    if not count:
        return 0
    data = _ok(get_edges(graph, count))[2]
    kind = drv.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC
    return sum(1 for d in data if d.type == kind)


def raw_driver() -> SimpleNamespace:
    """Capture, instantiate, launch, count and destroy through ``cuda.bindings``.
    The simulator has no driver: there its backend's calls of the same names stand in."""
    from tensorplay.runtime.backend import get

    dev = get()
    if dev.name != "cuda":
        return SimpleNamespace(
            begin=lambda h: dev.begin_capture(h, "global"),
            end=dev.end_capture,
            instantiate=dev.graph_instantiate,
            launch=dev.graph_launch,
            nodes=dev.graph_node_count,
            destroy_exec=dev.graph_exec_destroy,
            destroy=dev.graph_destroy,
        )
    from cuda.bindings import driver as drv

    mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
    return SimpleNamespace(
        begin=lambda h: _ok(drv.cuStreamBeginCapture(h, mode)),
        end=lambda h: _ok(drv.cuStreamEndCapture(h)),
        instantiate=lambda graph: _ok(drv.cuGraphInstantiate(graph, 0)),
        launch=drv.cuGraphLaunch,
        nodes=lambda graph: _ok(drv.cuGraphGetNodes(graph, 0))[1],
        destroy_exec=lambda exec_: _ok(drv.cuGraphExecDestroy(exec_)),
        destroy=lambda graph: _ok(drv.cuGraphDestroy(graph)),
    )


def _raw_capture(raw, x):
    """The op sequence captured on a tensorplay stream by raw driver calls:
    (graph, executable with the capture's plain edges, executable with
    tensorplay's edges, output, the stream captured on). The graph's temporaries are that
    stream's cached blocks: keep the stream alive while the graph is, as a collected
    stream's cached blocks go back to the device."""
    s = tp.cuda.Stream()
    with tp.cuda.stream(s):
        run_ops(x)  # warm-up: the allocator now caches this stream's blocks, so the
    s.synchronize()  # captured ops reuse them and allocate nothing from the device
    raw.begin(s._h)
    with tp.cuda.stream(s):
        y = run_ops(x)
    graph = raw.end(s._h)
    plain = raw.instantiate(graph)
    same_edges_as_tensorplay(graph)
    return graph, plain, raw.instantiate(graph), y, s


def replay_100_ops(rows: list, progress) -> None:
    n = 1 << 20 if on_gpu() else 256
    k = 20 if on_gpu() else 1  # replays per timed sample
    x = tp.rand(n)
    expected = run_ops(x).numpy()  # also compiles every kernel
    tp.cuda.synchronize()

    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y_tp = run_ops(x)
    raw = raw_driver()
    graph, plain_exec, exec_, y_raw, raw_stream = _raw_capture(raw, x)
    nodes_tp, nodes_raw = raw.nodes(g._graph), raw.nodes(graph)
    edges_tp, edges_raw = programmatic_edges(g._graph), programmatic_edges(graph)
    progress.step("graph_ops capture")

    r = tp.cuda.Stream()

    def replay_tp():
        for _ in range(k):
            g.replay(r)

    def replay_raw(exec_=exec_):
        for _ in range(k):
            raw.launch(exec_, r._h)

    row = {
        "name": f"graph of {N_OPS} ops on {n} float32, replay GPU us (driver column: the same ops captured by raw "
        f"driver calls, the same edges; nodes tp/raw: {nodes_tp}/{nodes_raw}, programmatic edges tp/raw: "
        f"{edges_tp}/{edges_raw})",
        "unit": "us",
        "lower_is_better": True,
        "tensorplay": device_ms(replay_tp, *tp_events(r), r.synchronize, **reps()) / k * 1e3,
        "nodes": {"tensorplay": nodes_tp, "driver": nodes_raw},
        "programmatic_edges": {"tensorplay": edges_tp, "driver": edges_raw},
    }
    progress.step("graph_ops tensorplay")
    row["driver"] = device_ms(replay_raw, *tp_events(r), r.synchronize, **reps()) / k * 1e3
    row["driver_plain_edges"] = device_ms(lambda: replay_raw(plain_exec), *tp_events(r), r.synchronize, **reps())
    row["driver_plain_edges"] *= 1e3 / k
    row["ratio_to_driver"] = row["tensorplay"] / row["driver"]
    for who, y in (("tensorplay", y_tp), ("raw driver", y_raw)):
        if not np.allclose(y.numpy(), expected, rtol=1e-5, atol=1e-6):
            raise AssertionError(f"the {who} graph of {N_OPS} ops replayed to a different result than eager")
    del y_raw
    raw.destroy_exec(exec_)
    raw.destroy_exec(plain_exec)
    raw.destroy(graph)
    del raw_stream  # its cached blocks were the graph's temporaries
    progress.step("graph_ops raw driver")

    torch = peer("torch")
    if torch is not None:
        xt = torch.from_numpy(x.numpy()).cuda()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            run_ops(xt)
        torch.cuda.current_stream().wait_stream(side)
        tg = torch.cuda.CUDAGraph()
        with torch.cuda.graph(tg):
            yt = run_ops(xt)

        def replay_torch():
            for _ in range(k):
                tg.replay()

        row["torch"] = device_ms(replay_torch, *torch_events(torch), torch.cuda.synchronize, **reps()) / k * 1e3
        if not np.allclose(yt.cpu().numpy(), expected, rtol=1e-5, atol=1e-6):
            raise AssertionError(f"the torch graph of {N_OPS} ops replayed to a different result than eager")
    progress.step("graph_ops torch")
    text = f"<= 1.05x driver ({row['ratio_to_driver']:.2f}x here) and <= 1x torch"
    if row.get("torch"):
        to_torch = row["tensorplay"] / row["torch"]
        judge(row, row["ratio_to_driver"] <= 1.05 and to_torch <= 1.0, f"{text} ({to_torch:.2f}x here)")
    else:
        judge(row, None, f"{text} (no torch figure in this run)")
    rows.append(row)


SECTIONS = [(replay_100_ops, 4)]
