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
