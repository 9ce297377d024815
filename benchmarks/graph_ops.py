"""A graph of 100 tensorplay ops: GPU time per replay, next to the same kernels
captured through raw driver calls and to PyTorch's ``CUDAGraph`` of the same ops.

The raw reference uses tensorplay only to issue the kernels: the op sequence runs
on a stream made current with ``tp.cuda.stream(s)`` while ``cuStreamBeginCapture``
/ ``cuStreamEndCapture`` / ``cuGraphInstantiate`` / ``cuGraphLaunch`` come straight
from ``cuda.bindings``. So any gap between the two is tensorplay's graph code
(extra nodes, pool handling), not its kernels.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import tensorplay as tp
from benchmarks.common import device_ms, on_gpu, peer, reps, torch_events, tp_events

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
            destroy=lambda graph, exec_: (dev.graph_exec_destroy(exec_), dev.graph_destroy(graph)),
        )
    from cuda.bindings import driver as drv

    mode = drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL
    return SimpleNamespace(
        begin=lambda h: _ok(drv.cuStreamBeginCapture(h, mode)),
        end=lambda h: _ok(drv.cuStreamEndCapture(h)),
        instantiate=lambda graph: _ok(drv.cuGraphInstantiate(graph, 0)),
        launch=drv.cuGraphLaunch,
        nodes=lambda graph: _ok(drv.cuGraphGetNodes(graph, 0))[1],
        destroy=lambda graph, exec_: (_ok(drv.cuGraphExecDestroy(exec_)), _ok(drv.cuGraphDestroy(graph))),
    )


def _raw_capture(raw, x):
    """The op sequence captured on a tensorplay stream by raw driver calls."""
    s = tp.cuda.Stream()
    with tp.cuda.stream(s):
        run_ops(x)  # warm-up: the allocator now caches this stream's blocks, so the
    s.synchronize()  # captured ops reuse them and allocate nothing from the device
    raw.begin(s._h)
    with tp.cuda.stream(s):
        y = run_ops(x)
    graph = raw.end(s._h)
    return graph, raw.instantiate(graph), y


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
    graph, exec_, y_raw = _raw_capture(raw, x)
    nodes_tp, nodes_raw = raw.nodes(g._graph), raw.nodes(graph)
    progress.step("graph_ops capture")

    r = tp.cuda.Stream()

    def replay_tp():
        for _ in range(k):
            g.replay(r)

    def replay_raw():
        for _ in range(k):
            raw.launch(exec_, r._h)

    row = {
        "name": f"graph of {N_OPS} ops on {n} float32, replay GPU us (nodes tp/raw: {nodes_tp}/{nodes_raw})",
        "unit": "us",
        "lower_is_better": True,
        "tensorplay": device_ms(replay_tp, *tp_events(r), r.synchronize, **reps()) / k * 1e3,
        "nodes": {"tensorplay": nodes_tp, "driver": nodes_raw},
    }
    progress.step("graph_ops tensorplay")
    row["driver"] = device_ms(replay_raw, *tp_events(r), r.synchronize, **reps()) / k * 1e3
    row["ratio_to_driver"] = row["tensorplay"] / row["driver"]
    for who, y in (("tensorplay", y_tp), ("raw driver", y_raw)):
        if not np.allclose(y.numpy(), expected, rtol=1e-5, atol=1e-6):
            raise AssertionError(f"the {who} graph of {N_OPS} ops replayed to a different result than eager")
    del y_raw
    raw.destroy(graph, exec_)
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
    row["target"] = "<= 1.05x driver"
    rows.append(row)


SECTIONS = [(replay_100_ops, 4)]
