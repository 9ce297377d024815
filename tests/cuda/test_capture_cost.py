"""What a capture costs the host per kernel: backend calls counted (robust on
any machine), capture time against the kernels captured (linear, with a
generous factor), and the driver's fast reads of what a capture made
(``runtime/backend/driver_calls.py``) against their contract."""

from __future__ import annotations

import collections
import ctypes
import gc
import time

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.runtime.backend import get as get_backend
from tensorplay.runtime.backend.protocol import Backend
from tensorplay.runtime.hazards import checker

ON_GPU = tp.cuda.backend() == "cuda"
# hazard checking (TENSORPLAY_SANITIZE=1) records every access: counts and times are then its own
unchecked = pytest.mark.skipif(checker.enabled(), reason="hazard checking adds its own calls and time")
N = 1 << 16 if ON_GPU else 16  # elements: the launch shapes do not matter here, the count of kernels does


def _operands():
    y, a, b = tp.ones(N), tp.full((N,), 0.5), tp.full((N,), 0.25)
    _ = y * a + b  # kernels compiled, plans made
    return y, a, b


def _capture(pairs: int, y, a, b) -> tp.cuda.CUDAGraph:
    """A graph of ``pairs`` op pairs ``y = y * a + b`` (two kernels each)."""
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        for _ in range(pairs):
            y = y * a + b
    return g


def _count_backend_calls(monkeypatch) -> tuple[collections.Counter, list]:
    """Count the calls of the backend's contract (``protocol.Backend``), and
    keep the launches each ``graph_instantiate`` was given."""
    dev, counts, given = get_backend(), collections.Counter(), []
    names = [n for n in dir(Backend) if not n.startswith("_") and callable(getattr(Backend, n, None))]

    def counted(name, fn):
        def call(*args, **kwargs):
            counts[name] += 1
            if name == "graph_instantiate":
                given.append(list(args[1]) if len(args) > 1 else [])
            return fn(*args, **kwargs)

        return call

    for name in names:
        monkeypatch.setitem(vars(dev), name, counted(name, getattr(dev, name)))  # undone by deleting it
    return counts, given


@unchecked
def test_a_captured_kernel_costs_one_backend_call_besides_its_launch(monkeypatch):
    """Each kernel captured asks the backend once (``captured_node``: the node
    for g.nodes() and the edge rewrite); everything else a capture asks is
    paid once per capture, whatever its size. The recording goes to
    ``graph_instantiate``, so that the driver is not asked about those nodes
    again (``driver_overlap.py``)."""
    y, a, b = _operands()
    _capture(2, y, a, b)  # the pool's blocks made once
    counts, given = _count_backend_calls(monkeypatch)
    per_size = {}
    for pairs in (5, 20):
        counts.clear()
        given.clear()
        g = _capture(pairs, y, a, b)
        per_size[pairs] = dict(counts)
        assert [len(launches) for launches in given] == [2 * pairs]
        assert len(g.nodes()) == 2 * pairs
        del g
    small, large = per_size[5], per_size[20]
    grown = {name: large.get(name, 0) - small.get(name, 0) for name in set(small) | set(large)}
    assert {name: n for name, n in grown.items() if n} == {"captured_node": 2 * (20 - 5)}


@unchecked
def test_capture_time_grows_linearly_with_the_kernels_captured():
    """Capture and instantiation of 4n op pairs take about four times those of
    n (not a timing target: a check that no step grows faster than the graph;
    the best of three runs each in CPU time, which other processes leave
    alone, and a generous factor)."""
    y, a, b = _operands()
    _capture(2, y, a, b)

    def best(pairs: int) -> float:
        times = []
        for _ in range(3):
            t0 = time.process_time()
            g = _capture(pairs, y, a, b)
            times.append(time.process_time() - t0)
            del g
        return min(times)

    gc.collect()
    gc.disable()  # a full collection of a large test process would be timed with whichever capture it fell in
    try:
        small, large = best(25), best(100)
    finally:
        gc.enable()
    assert large < 2.5 * 4 * small, f"25 op pairs: {small * 1e3:.2f} ms, 100: {large * 1e3:.2f} ms"


def test_nodes_name_the_users_with_and_call_where_a_context_manager_launched():
    # the while node's first kernel is launched as its ``with`` opens, a compiled
    # function's fused kernel as its tracing ends: both inside contextlib's frames
    x, flag = tp.zeros(8), tp.ones(1, dtype=tp.bool)
    step = tp.compile(lambda x, flag: tp.lt(x.add_(1.0).sum(), 3.0, out=flag))
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag):  # the loop
            step(x, flag)  # the body
    here = {line: n for n, line in enumerate(open(__file__).read().splitlines(), 1)}
    wheres = [node.where for node in g.nodes()]
    assert wheres and all(w.startswith(__file__) for w in wheres), wheres
    lines = {int(w.rsplit(":", 1)[1]) for w in wheres}
    assert lines <= {n for line, n in here.items() if line.endswith(("# the loop", "# the body"))}


def test_nodes_name_the_line_that_launched_each_kernel():
    y, a, b = _operands()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = y * a  # first
        y = y + b  # second
    lines = [int(node.where.rsplit(":", 1)[1]) for node in g.nodes()]
    assert lines[1] == lines[0] + 1
    assert all(node.where.startswith(__file__) for node in g.nodes())
    g.replay()
    np.testing.assert_allclose(y.numpy(), np.full(N, 0.75))


# -- the driver's fast reads, against stand-ins with the driver's contract ---------------------


def _fake_capture_info(status: int, nodes: list[int], err: int = 0):
    """A stand-in for the driver's cuStreamGetCaptureInfo (CUDA 12.3's form:
    stream, status, id, graph, dependencies, edge data, count) writing through
    the addresses it is given, as the driver does."""
    deps = (ctypes.c_uint64 * max(len(nodes), 1))(*nodes)
    calls = []

    def call(stream, status_out, id_out, graph_out, deps_out, edges_out, count_out):
        calls.append(stream)
        ctypes.c_int.from_address(status_out).value = status
        if status == 1:  # active: the rest is written
            ctypes.c_uint64.from_address(deps_out).value = ctypes.addressof(deps)
            ctypes.c_size_t.from_address(count_out).value = len(nodes)
        return err

    call.deps, call.calls = deps, calls
    return call


def test_the_driver_reads_a_captured_node_through_its_entry_point(monkeypatch):
    pytest.importorskip("cuda.bindings")
    from cuda.bindings import driver as drv

    from tensorplay.runtime.backend import driver_calls
    from tensorplay.runtime.backend.errors import CudaError

    asked = []
    answers = {
        "active": _fake_capture_info(1, [0x7F00AB]),
        "none yet": _fake_capture_info(1, []),
        "invalidated": _fake_capture_info(2, [0x7F00AB]),
        "failed": _fake_capture_info(1, [1], err=int(drv.CUresult.CUDA_ERROR_INVALID_HANDLE)),
    }
    for case, fake in answers.items():
        monkeypatch.setattr(driver_calls, "entry_point", lambda *a, fake=fake: asked.append(a) or fake)
        last_node = driver_calls.last_node_reader()
        if case == "failed":
            with pytest.raises(CudaError, match="^cuStreamGetCaptureInfo failed: CUDA_ERROR_INVALID_HANDLE"):
                last_node(drv.CUstream(0x55))
        else:
            assert last_node(drv.CUstream(0x55)) == (0x7F00AB if case == "active" else None), case
            assert last_node(0x55) == (0x7F00AB if case == "active" else None), case  # an int handle too
        assert fake.calls[0] == 0x55
    assert set(asked) == {("cuStreamGetCaptureInfo", 12030, 7)}
    monkeypatch.setattr(driver_calls, "entry_point", lambda *a: None)
    assert driver_calls.last_node_reader() is None  # a driver before CUDA 12.3: the bindings' call serves


@pytest.mark.gpu
def test_the_fast_captured_node_is_the_node_the_bindings_report():
    """On the GPU: the entry point is found, and after each launch it reads the
    node that the bindings' cuStreamGetCaptureInfo reports."""
    from tensorplay.runtime.backend.driver import DriverBackend

    dev = get_backend()
    assert dev.captured_node is not DriverBackend.captured_node  # the driver's entry point serves
    y, a, b = _operands()
    g, pairs = tp.cuda.CUDAGraph(), []
    with tp.cuda.graph(g):
        s = tp.cuda.current_stream()
        for _ in range(3):
            y = y * a + b
            pairs.append((dev.captured_node(s._h), DriverBackend.captured_node(s._h)))
    assert all(fast == slow and fast for fast, slow in pairs), pairs
    assert [n._node for n in g.nodes()[1::2]] == [fast for fast, _ in pairs]
    g.replay()
    want = np.ones(N)
    for _ in range(3):
        want = want * 0.5 + 0.25
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6)
