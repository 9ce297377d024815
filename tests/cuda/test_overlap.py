"""Kernels that launch while the kernel before them drains (programmatic edges,
``runtime/backend/driver_overlap.py``): each still sees all that kernel wrote,
and writes nothing it still reads, at every replay."""

from __future__ import annotations

import numpy as np

import tensorplay as tp

ON_GPU = tp.cuda.backend() == "cuda"
N = 1 << 16 if ON_GPU else 64  # the simulator runs a Python thread per CUDA thread


def _chain(y, steps: int):
    """``steps`` ops, each reading the one before's output: the pool gives a
    later op the buffer an earlier one read, so an op may write what the op
    before it reads."""
    for k in range(steps):
        y = (y * 1.5 - 0.25).tanh() if k % 2 else (y + 0.5).abs() * 0.75
    return y


def _chain_host(x: np.ndarray, steps: int) -> np.ndarray:
    y = x.astype(np.float64)
    for k in range(steps):
        y = np.tanh(y * 1.5 - 0.25) if k % 2 else np.abs(y + 0.5) * 0.75
    return y


def _edge_kinds(graph) -> list[str]:
    """The type of every edge of the captured ``graph`` (the driver's names)."""
    from cuda.bindings import driver as drv

    count = drv.cuGraphGetEdges(graph, 0)[-1]
    _, _, _, data, _ = drv.cuGraphGetEdges(graph, count)
    return [drv.CUgraphDependencyType(d.type).name for d in data]


def test_a_chain_of_ops_in_a_graph_gives_the_host_loop_at_every_replay():
    x = tp.from_numpy(np.random.default_rng(1).standard_normal(N).astype(np.float32))
    _chain(x, 2)  # compiles the kernels
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = _chain(x, 40)
    for seed in (2, 3, 4):
        host = np.random.default_rng(seed).standard_normal(N).astype(np.float32)
        x.copy_(tp.from_numpy(host))
        g.replay()
        np.testing.assert_allclose(y.numpy(), _chain_host(host, 40), rtol=1e-5, atol=1e-6)
    if ON_GPU:  # every kernel -> kernel edge into an elementwise kernel
        kinds = _edge_kinds(g._graph)
        assert kinds.count("CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC") == len(kinds) == 40 * 3 - 1


def test_an_update_of_a_graph_with_overlapping_kernels_keeps_its_results():
    x = tp.rand(N)
    _chain(x, 2)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = _chain(x, 6)
    other = tp.rand(N)
    with tp.cuda.graph(g, update=True):
        y = _chain(other, 6)
    g.replay()
    np.testing.assert_allclose(y.numpy(), _chain_host(other.numpy(), 6), rtol=1e-5, atol=1e-6)


def test_edges_from_and_into_other_kernels_stay_plain_and_results_hold():
    """A product then an elementwise op (programmatic on the GPU: the second waits),
    then a reduction (plain: it does not)."""
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((32, 64)).astype(np.float32)
    ta, tb = tp.from_numpy(a), tp.from_numpy(b)
    ((ta @ tb) * 2).sum()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        s = ((ta @ tb) * 2).sum()
    g.replay()
    expected = (a.astype(np.float64) @ b.astype(np.float64) * 2).sum()
    np.testing.assert_allclose(s.item(), expected, rtol=1e-4)
    if ON_GPU:
        kinds = _edge_kinds(g._graph)
        assert "CU_GRAPH_DEPENDENCY_TYPE_DEFAULT" in kinds  # the reduction's


def test_the_rewrite_makes_programmatic_only_kernel_edges_into_kernels_that_wait(monkeypatch):
    """``overlap_kernels`` against a driver stand-in with the bindings' result
    shapes: which edges it changes, and how it asks for it."""
    from types import SimpleNamespace

    from cuda.bindings import driver as drv

    from tensorplay.runtime.backend import driver_overlap as overlap

    kinds = drv.CUgraphNodeType
    plain = SimpleNamespace(type=drv.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_DEFAULT)
    programmatic = SimpleNamespace(type=drv.CUgraphDependencyType.CU_GRAPH_DEPENDENCY_TYPE_PROGRAMMATIC)
    # node -> (type, func, kern): 1 a kernel that does not wait, 2 and 4 kernels
    # that wait (4 known by its CUkernel), 3 a copy
    nodes = {
        1: (kinds.CU_GRAPH_NODE_TYPE_KERNEL, 10, None),
        2: (kinds.CU_GRAPH_NODE_TYPE_KERNEL, 20, None),
        3: (kinds.CU_GRAPH_NODE_TYPE_MEMCPY, None, None),
        4: (kinds.CU_GRAPH_NODE_TYPE_KERNEL, 99, 40),
    }
    edges = [(1, 2, plain), (2, 3, plain), (3, 4, plain), (2, 4, plain), (1, 4, programmatic)]
    calls = []

    def get_edges(graph, n):
        if not n:
            return (0, [], [], [], len(edges))
        return (0, *[[e[k] for e in edges] for k in range(3)], len(edges))

    fake = SimpleNamespace(
        cuGraphNodeGetType=lambda node: (0, nodes[node][0]),
        cuGraphKernelNodeGetParams=lambda node: (0, SimpleNamespace(func=nodes[node][1], kern=nodes[node][2])),
        CUgraphEdgeData=drv.CUgraphEdgeData,
        CUgraphDependencyType=drv.CUgraphDependencyType,
        CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC=drv.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC,
    )
    monkeypatch.setattr(overlap, "drv", fake)
    monkeypatch.setattr(overlap, "_WAITING", {20, 40})
    monkeypatch.setattr(overlap, "get_edges", get_edges)
    monkeypatch.setattr(overlap, "remove_dependencies", lambda *a: calls.append(("remove", *a[1:])) or (0,))
    monkeypatch.setattr(overlap, "add_dependencies", lambda *a: calls.append(("add", *a[1:])) or (0,))

    assert overlap.overlap_kernels("graph") == 2
    (remove, a, b, data, n), (add, a2, b2, data2, n2) = calls
    assert (remove, a, b, data, n) == ("remove", [1, 2], [2, 4], None, 2)
    assert (add, a2, b2, n2) == ("add", [1, 2], [2, 4], 2)
    assert [d.type for d in data2] == [programmatic.type] * 2
    assert [d.from_port for d in data2] == [drv.CU_GRAPH_KERNEL_NODE_PORT_PROGRAMMATIC] * 2
