"""Graph replay: host time per replay() and GPU time per replay of 1/10/100 kernels,
and host time per staged replay (``stage_and_launch``) with 1 and 8 inputs.

References in the same process: a raw ``cuGraphLaunch`` from Python, PyTorch's
``CUDAGraph.replay()``, CuPy's ``Graph.launch``, and for GPU time the same
compiled kernels captured into a graph through raw driver calls, given the
same edges as tensorplay's graph (``overlap_kernels`` makes programmatic the
edges into kernels that wait for the ones before them, as tensorplay's
instantiate does; the figure with the capture's plain edges is kept beside it
as ``driver_plain_edges``); for staged replays, ``copy_`` of each input then
``replay()``, and PyTorch's ``static.copy_(x)`` for each input then
``g.replay()``.
"""

from __future__ import annotations

import numpy as np

import tensorplay as tp
from benchmarks.common import check, device_ms, host_us, on_gpu, optional, peer
from benchmarks.common import reps as common_reps
from benchmarks.graph_ops import programmatic_edges, same_edges_as_tensorplay
from benchmarks.targets import judge, measurement


def _tp_graph(n_kernels: int, x):
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        for _ in range(n_kernels):
            x.add_(1.0)
    return g


def _torch_graph(torch, n: int, n_kernels: int):
    """The same in-place adds captured by PyTorch (warmed up on a side stream, as it asks)."""
    y = torch.zeros(n, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        y.add_(1)
    torch.cuda.current_stream().wait_stream(side)
    tg = torch.cuda.CUDAGraph()
    with torch.cuda.graph(tg):
        for _ in range(n_kernels):
            y.add_(1)
    tg.keep_alive = y
    return tg


def _raw_graph(n_kernels: int, x):
    """The same add kernel captured with raw driver calls (no tensorplay graph
    code): (graph, executable with the capture's plain edges, executable with
    tensorplay's edges, stream)."""
    from cuda.bindings import driver as drv

    from tensorplay.kernels import elementwise as ew
    from tensorplay.runtime.launch import _launchers, grid_groups

    x.add_(1.0)
    key = next(k for k in _launchers if k[0] is ew.kernel("add", "as", "flat_exact", "none"))
    launcher = _launchers[key]
    err, stream = drv.cuStreamCreate(1)
    drv.cuStreamBeginCapture(stream, drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_GLOBAL)
    grid, block = grid_groups(x.numel())
    flat = x._flat()
    one = x.dtype.np.type(1.0)
    for _ in range(n_kernels):
        launcher(grid, block, stream, [flat, np.uint64(x.numel()), flat, one])
    err, graph = drv.cuStreamEndCapture(stream)
    err, plain_exec = drv.cuGraphInstantiate(graph, 0)
    same_edges_as_tensorplay(graph)
    err, graph_exec = drv.cuGraphInstantiate(graph, 0)
    return graph, plain_exec, graph_exec, stream


def replay_host(rows: list, progress) -> None:
    x = tp.zeros(1024)
    g = _tp_graph(1, x)
    s = tp.cuda.Stream()
    n = 20000
    row = {"name": "replay(stream), 1-kernel graph, host us", "unit": "us", "lower_is_better": True}
    row["tensorplay"] = host_us(lambda: g.replay(s), s.synchronize, n=n)
    progress.step("replay tensorplay")
    if on_gpu():  # the simulator has no driver to call
        from cuda.bindings import driver as drv

        exec_, hs = g._exec, s._h
        row["driver"] = host_us(lambda: drv.cuGraphLaunch(exec_, hs), s.synchronize, n=n)
    progress.step("replay raw driver")
    torch = optional("torch")
    if torch is not None and torch.cuda.is_available():
        tg = _torch_graph(torch, 1024, 1)
        row["torch"] = host_us(tg.replay, torch.cuda.synchronize, n=n)
    progress.step("replay torch")
    cp = optional("cupy")
    if cp is not None:
        z = cp.zeros(1024, dtype=cp.float32)
        cs = cp.cuda.Stream(non_blocking=True)
        with cs:
            z += 1
            cs.begin_capture()
            z += 1
            cg = cs.end_capture()
        row["cupy"] = host_us(lambda: cg.launch(cs), cs.synchronize, n=n)
    progress.step("replay cupy")
    to_driver, torch_us = row["tensorplay"] / row["driver"] if row.get("driver") else None, row.get("torch")
    text = f"<= 1.1x driver ({to_driver:.2f}x here) and <= torch" if to_driver else "<= 1.1x driver and <= torch"
    if torch_us and to_driver:
        judge(
            row,
            to_driver <= 1.1 and row["tensorplay"] <= torch_us,
            f"{text} ({row['tensorplay'] / torch_us:.2f}x here)",
        )
    else:
        judge(row, None, f"{text} (no torch figure in this run)")
    rows.append(row)


def replay_device(rows: list, progress) -> None:
    for n_kernels in (1, 10, 100):
        rows.append(_replay_device_row(n_kernels))
        progress.step(f"replay GPU {n_kernels}")


def _replay_device_row(n_kernels: int) -> dict:
    reps = 200 if on_gpu() else 1  # replays per sample (the simulator runs each kernel in Python)
    x = tp.zeros(1 << 12)
    g = _tp_graph(n_kernels, x)
    s = tp.cuda.Stream()
    start, end = tp.cuda.Event(enable_timing=True), tp.cuda.Event(enable_timing=True)

    def timed(fn) -> float:
        return device_ms(
            fn, lambda: start.record(s), lambda: end.record(s), lambda: start.elapsed_time(end), s.synchronize,
            **common_reps(),
        )  # fmt: skip

    def run_tp():
        for _ in range(reps):
            g.replay(s)

    row = {"unit": "us", "lower_is_better": True, "tensorplay": timed(run_tp) / reps * 1e3}
    what = f"replay GPU us, {n_kernels}-kernel graph of x.add_(1.0) on {x.numel()} float32"
    if on_gpu():  # the same kernels captured by raw driver calls (the simulator has no driver)
        from cuda.bindings import driver as drv

        graph, plain_exec, raw_exec, raw_stream = _raw_graph(n_kernels, x)

        def run_raw(exec_=raw_exec):
            for _ in range(reps):
                drv.cuGraphLaunch(exec_, s._h)

        row["driver"] = timed(run_raw) / reps * 1e3
        row["driver_plain_edges"] = timed(lambda: run_raw(plain_exec)) / reps * 1e3
        nodes = (_node_count(g._graph), _node_count(graph))
        edges = (programmatic_edges(g._graph), programmatic_edges(graph))
        for exec_ in (raw_exec, plain_exec):
            drv.cuGraphExecDestroy(exec_)
        drv.cuGraphDestroy(graph)
        drv.cuStreamDestroy(raw_stream)
        row["name"] = (
            f"{what} (driver column: the same kernels by raw driver calls, the same edges; nodes tp/raw: "
            f"{nodes[0]}/{nodes[1]}, programmatic edges tp/raw: {edges[0]}/{edges[1]})"
        )
        ratio = row["tensorplay"] / row["driver"]
        judge(row, ratio <= 1.05 and nodes[0] == nodes[1], f"<= 1.05x driver, no extra nodes ({ratio:.2f}x here)")
    else:
        row["name"] = f"{what} (driver column: the same kernels by raw driver calls, the same edges)"
        judge(row, None, "<= 1.05x driver, no extra nodes (GPU only: the simulator has no driver)")
    torch = optional("torch")
    if torch is not None and torch.cuda.is_available():
        tg = _torch_graph(torch, 1 << 12, n_kernels)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

        def run_torch():
            for _ in range(reps):
                tg.replay()

        ms = device_ms(run_torch, e0.record, e1.record, lambda: e0.elapsed_time(e1), torch.cuda.synchronize)
        row["torch"] = ms / reps * 1e3
    return row


def _node_count(graph) -> int:
    from tensorplay.runtime.backend import get

    return get().graph_node_count(graph)


def stage_host(rows: list, progress) -> None:
    """Host us per ``stage_and_launch`` (the copies and the replay in one launch)
    with 1 and 8 inputs of 1024 floats, next to ``copy_`` of each input then
    ``replay()``, and next to torch doing ``static.copy_(x); g.replay()``."""
    for k in (1, 8):
        rows.extend(_stage_rows(k, progress))


def _stage_rows(k: int, progress, n: int = 1024, calls: int = 5000) -> list:
    statics, xs = [tp.zeros(n) for _ in range(k)], [tp.rand(n) for _ in range(k)]
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = statics[0] * 2.0
        for s in statics[1:]:
            out = out + s
    g.stage_and_launch(statics, xs)  # builds the staged graph; checked before it is timed
    want = 2.0 * xs[0].numpy().astype(np.float64) + sum(x.numpy().astype(np.float64) for x in xs[1:])
    err = float(np.abs(out.numpy() - want).max() / np.abs(want).max())
    check(f"stage_and_launch with {k} inputs", err, 1e-5)
    staged = host_us(lambda: g.stage_and_launch(statics, xs), tp.cuda.synchronize, n=calls)
    progress.step(f"stage_and_launch {k}")

    def copy_then_replay():
        for s, x in zip(statics, xs, strict=True):
            s.copy_(x)
        g.replay()

    copied = host_us(copy_then_replay, tp.cuda.synchronize, n=calls)
    progress.step(f"copy_ + replay {k}")
    torch_us = _torch_copy_replay_us(k, n, calls)
    progress.step(f"torch copy_ + replay {k}")
    name = f"{k} input(s) of {n} floats, host us"
    staged_row = {
        "name": f"stage_and_launch, {name} (torch: static.copy_(x) each + replay())",
        "unit": "us",
        "lower_is_better": True,
        "tensorplay": staged,
        "torch": torch_us,
        "copy_replay": copied,
    }
    text = f"< copy_ each + replay() ({staged:.3g} vs {copied:.3g} here) and <= torch"
    if torch_us:
        judge(staged_row, staged < copied and staged <= torch_us, f"{text} ({staged / torch_us:.2f}x here)")
    else:
        judge(staged_row, None, f"{text} (no torch figure in this run)")
    copied_row = {
        "name": f"copy_ each + replay(), {name} (torch: static.copy_(x) each + replay())",
        "unit": "us",
        "lower_is_better": True,
        "tensorplay": copied,
        "torch": torch_us,
    }
    measurement(copied_row, "the reference for stage_and_launch")
    return [staged_row, copied_row]


def _torch_copy_replay_us(k: int, n: int, calls: int) -> float | None:
    """PyTorch's host us per ``static.copy_(x)`` for each input then ``g.replay()``."""
    torch = peer("torch")
    if torch is None:
        return None
    statics = [torch.zeros(n, device="cuda") for _ in range(k)]
    xs = [torch.rand(n, device="cuda") for _ in range(k)]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream, as PyTorch asks
        _ = statics[0] * 2 + sum(statics[1:])
    torch.cuda.current_stream().wait_stream(side)
    tg = torch.cuda.CUDAGraph()
    with torch.cuda.graph(tg):
        out = statics[0] * 2
        for s in statics[1:]:
            out = out + s
    tg.keep_alive = out

    def copy_then_replay():
        for s, x in zip(statics, xs, strict=True):
            s.copy_(x)
        tg.replay()

    return host_us(copy_then_replay, torch.cuda.synchronize, n=calls)


SECTIONS = [(replay_host, 4), (replay_device, 3), (stage_host, 6)]
