"""Kernels that launch while the kernel before them drains (programmatic edges,
``runtime/backend/driver_overlap.py``): each still sees all that kernel wrote,
and writes nothing it still reads, at every replay."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

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


def test_the_rewrite_makes_programmatic_only_plain_kernel_edges_into_kernels_that_wait():
    """``programmatic_pairs``: which edges change, and which nodes it asks the
    driver about (only those the capture did not record, once each)."""
    from tensorplay.runtime.backend.driver_overlap import _PLAIN, _PROGRAMMATIC, programmatic_pairs

    # recorded: 1 a kernel that does not wait, 2 one that waits; not recorded:
    # 3 a copy, 4 a kernel that waits, 5 a kernel that does not
    known = {1: False, 2: True}
    edges = [(1, 2, _PLAIN), (2, 3, _PLAIN), (3, 4, _PLAIN), (2, 4, _PLAIN), (1, 4, _PROGRAMMATIC), (5, 2, _PLAIN)]
    froms, tos, kinds = (
        np.array([e[k] for e in edges], dtype) for k, dtype in enumerate((np.uint64,) * 2 + (np.uint8,))
    )
    asked = []

    def waits(node):
        asked.append(("waits", node))
        return node == 4

    def is_kernel(node):
        asked.append(("kernel", node))
        return node in (4, 5)

    chosen = programmatic_pairs(froms, tos, kinds, known, waits, is_kernel)
    assert [e[:2] for e, c in zip(edges, chosen, strict=True) if c] == [(1, 2), (2, 4), (5, 2)]
    assert sorted(asked) == [("kernel", 3), ("kernel", 5), ("waits", 3), ("waits", 4)]


class _FakeEdgeCalls:
    """The driver's edge entry points (CUDA 12.3's forms) over a list of edges:
    they read and write the caller's arrays at the addresses given, as the
    driver does."""

    def __init__(self, edges):
        self.edges, self.calls = list(edges), []

    def entry_point(self, name, version, nargs):
        assert (version, nargs) == (12030, 5)
        return getattr(self, name)

    def cuGraphGetEdges(self, graph, froms, tos, data, count):
        self.calls.append("cuGraphGetEdges")
        n = ctypes.c_size_t.from_address(count)
        if froms is not None:
            for k, (a, b, kind) in enumerate(self.edges[: n.value]):
                ctypes.c_uint64.from_address(froms + 8 * k).value = a
                ctypes.c_uint64.from_address(tos + 8 * k).value = b
                ctypes.c_uint8.from_address(data + 8 * k + 2).value = kind
        n.value = len(self.edges)
        return 0

    def _pairs(self, froms, tos, n):
        return list(
            zip((ctypes.c_uint64 * n).from_address(froms), (ctypes.c_uint64 * n).from_address(tos), strict=True)
        )

    def cuGraphRemoveDependencies(self, graph, froms, tos, data, n):
        self.calls.append("cuGraphRemoveDependencies")
        assert data is None
        gone = self._pairs(froms, tos, n)
        self.edges = [e for e in self.edges if e[:2] not in gone]
        return 0

    def cuGraphAddDependencies(self, graph, froms, tos, data, n):
        self.calls.append("cuGraphAddDependencies")
        raw = bytes((ctypes.c_uint8 * (8 * n)).from_address(data))
        assert raw == bytes([1, 0, 1, 0, 0, 0, 0, 0]) * n  # from the programmatic port, of the programmatic type
        self.edges += [(a, b, 1) for a, b in self._pairs(froms, tos, n)]
        return 0


def test_a_capture_of_recorded_kernels_costs_the_rewrite_four_driver_calls_at_any_size(monkeypatch):
    """The kernels the capture recorded are not asked about: the rewrite of a
    chain of n kernels that wait is two calls for the edges and one each to
    remove and add them, for 10 kernels as for 40 (a regression test of the
    capture's cost per kernel at instantiation)."""
    from types import SimpleNamespace

    from tensorplay.runtime.backend import driver_overlap as overlap

    queries = []
    fake = SimpleNamespace(
        cuGraphNodeGetType=lambda node: queries.append(node) or (0, overlap._KERNEL),
        cuGraphKernelNodeGetParams=lambda node: queries.append(node) or (0, SimpleNamespace(func=20, kern=None)),
    )
    monkeypatch.setattr(overlap, "drv", fake)
    monkeypatch.setattr(overlap, "_WAITING", {20})
    for n in (10, 40):
        driver = _FakeEdgeCalls((k, k + 1, overlap._PLAIN) for k in range(1, n))
        monkeypatch.setattr(overlap, "entry_point", driver.entry_point)
        assert overlap.overlap_kernels(99, {k: k > 1 for k in range(1, n + 1)}) == n - 1
        assert driver.calls == ["cuGraphGetEdges"] * 2 + ["cuGraphRemoveDependencies", "cuGraphAddDependencies"]
        assert sorted(driver.edges) == [(k, k + 1, overlap._PROGRAMMATIC) for k in range(1, n)]
        assert queries == []
    driver = _FakeEdgeCalls([(1, 2, overlap._PLAIN), (2, 3, overlap._PLAIN)])  # nothing recorded: asked, once a node
    monkeypatch.setattr(overlap, "entry_point", driver.entry_point)
    assert overlap.overlap_kernels(99, None) == 2
    assert sorted(queries) == [1, 2, 2, 3, 3]  # the type of 2 and 3, then their functions; the type of 1


def test_a_while_body_of_ops_overlaps_its_kernels_and_gives_the_host_loop(monkeypatch):
    """A while body's chain of ops and the loop's end-of-pass kernel wait for the
    kernels before them: on the GPU, with ``OVERLAP_BODIES``, every edge of the
    body into them becomes programmatic; each replay runs the host loop's
    passes and values."""
    changed = []
    bodies = False
    if ON_GPU:
        from tensorplay.runtime.backend import driver

        bodies = driver.OVERLAP_BODIES

        rewrite = driver.overlap_kernels
        monkeypatch.setattr(driver, "overlap_kernels", lambda graph, *known: changed.append(rewrite(graph, *known)))
    x, n, flag = tp.from_numpy(np.zeros(N, np.float32)), tp.zeros(1, dtype=tp.int32), tp.ones(1, dtype=tp.bool)
    _chain(x, 2)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(flag, max_iters=100):
            x.copy_(_chain(x, 4))
            n.add_(1)
            tp.lt(n, 5, out=flag)
    for seed in (6, 7):
        host = np.random.default_rng(seed).standard_normal(N).astype(np.float32)
        x.copy_(tp.from_numpy(host))
        n.zero_()
        flag.fill_(True)
        g.replay()
        expected = host
        for _ in range(5):
            expected = _chain_host(expected, 4).astype(np.float32)
        np.testing.assert_allclose(x.numpy(), expected, rtol=1e-4, atol=1e-5)
        assert n.item() == 5
    if bodies:  # the body's edges (rewritten first) into the chain's 11 later kernels, the copy, the end of the pass
        assert changed[0] >= 13


class _RefusingEdgeCalls(_FakeEdgeCalls):
    """A driver that takes no programmatic edge (as one might in a conditional body)."""

    def cuGraphAddDependencies(self, graph, froms, tos, data, n):
        if data is not None:
            self.calls.append("refused")
            return 1  # CUDA_ERROR_INVALID_VALUE
        self.calls.append("cuGraphAddDependencies")
        self.edges += [(a, b, 0) for a, b in self._pairs(froms, tos, n)]
        return 0


def test_a_refused_rewrite_leaves_the_graph_its_plain_edges(monkeypatch):
    from tensorplay.runtime.backend import driver_overlap as overlap
    from tensorplay.runtime.backend.errors import CudaError

    monkeypatch.setattr(overlap, "_WAITING", {20})
    chain = [(k, k + 1, overlap._PLAIN) for k in range(1, 6)]
    driver = _RefusingEdgeCalls(chain)
    monkeypatch.setattr(overlap, "entry_point", driver.entry_point)
    with pytest.raises(CudaError):
        overlap.overlap_kernels(99, dict.fromkeys(range(1, 7), True))
    assert sorted(driver.edges) == chain
    assert driver.calls[-2:] == ["refused", "cuGraphAddDependencies"]
