"""tp.cuda.clear_caches() and the bounded caches of plans and launchers (runtime/caches.py)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close, random_tensor, reference

import tensorplay as tp
from tensorplay import _matmul, _ops, _reduce
from tensorplay.compiler import compile as tp_compile
from tensorplay.runtime import caches, launch, memory
from tensorplay.runtime.caches import BoundedCache


def _every_kind_of_op():
    """Results (and their NumPy references) of ops that go through every plan cache."""
    (x, a), (y, b) = random_tensor((4, 40), tp.float32, seed=1), random_tensor((4, 40), tp.float32, seed=2)
    (c, cn), (w, wn) = random_tensor((4, 1), tp.float32, seed=3), random_tensor((40, 3), tp.float32, seed=4)
    z = x.clone()
    z.add_(y)  # in place, through the fast plan
    return [
        (x + y, a + b),  # fast plan, two tensors
        (x * 2.0, a * 2.0),  # fast plan, a number
        (z, a + b),
        (x.exp(), np.exp(a)),  # unary plan
        (x * c, a * cn),  # broadcast: nd plan
        (tp.where(x > 0, x, 0.5), np.where(a > 0, a, 0.5)),  # flat plan (three operands)
        (x.sum(dim=1), a.sum(axis=1, dtype=np.float64)),  # reduce plan
        (x.t().contiguous().mean(), a.mean(dtype=np.float64)),
        (x @ w, reference(np.matmul, a, wn)),  # matmul plan
    ]


def _check(results) -> None:
    for actual, expected in results:
        assert_close(actual, expected, dtype=tp.float32)


def test_clear_caches_empties_every_cache_and_ops_compute_the_same_after():
    _check(_every_kind_of_op())
    caches_used = [
        _ops._FAST_PLANS, _ops._UNARY_PLANS, _ops._ND_PLANS, _ops._FLAT_PLANS, _reduce._REDUCE_PLANS,
        _reduce._ROWS_LAUNCH_SHAPES, _matmul._PLANS, launch._launchers, launch._grids, memory._SIZES,
    ]  # fmt: skip
    assert all(len(c) > 0 for c in caches_used), [c for c in caches_used if not c]
    assert all(c in caches.registered() for c in caches_used)
    assert _ops.ew.kernel.cache_info().currsize > 0

    tp.cuda.clear_caches()
    assert [c for c in caches.registered() if len(c)] == []
    assert _ops.ew.kernel.cache_info().currsize == 0 and _reduce.rk.rows_kernel.cache_info().currsize == 0
    _check(_every_kind_of_op())  # plans, launchers and kernels built again
    assert len(_ops._FAST_PLANS) > 0 and len(launch._launchers) > 0


def test_compiled_functions_forget_their_graphs_and_capture_again():
    f = tp_compile(lambda t: t * 3.0 + 1.0, warmup=1)
    x = tp.ones(4)
    for _ in range(2):
        assert f(x).tolist() == [4.0] * 4
    assert f.graph(x) is not None
    tp.cuda.clear_caches()
    assert f.graph(x) is None  # as after f.reset(): warm up, then capture again
    for _ in range(2):
        assert f(x * 2.0).tolist() == [7.0] * 4
    assert f.graph(x) is not None


def test_graphs_captured_before_replay_after():
    x = tp.ones(8)
    y = x * 2.0  # warm up outside the capture
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x * 2.0 + 1.0
    tp.cuda.clear_caches()
    x.fill_(2.0)
    g.replay()
    assert y.tolist() == [5.0] * 8
    static = tp.zeros(8)
    g2 = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g2):
        out = static * 3.0
    g2.stage_and_launch([static], [tp.ones(8)])  # builds a staged graph from fresh launchers
    tp.cuda.clear_caches()
    g2.stage_and_launch([static], [tp.full((8,), 2.0)])
    assert out.tolist() == [6.0] * 8


def test_a_cache_stops_growing_at_its_cap():
    cache = BoundedCache("test.squares", cap=3)
    assert [cache.put(n, n * n) for n in range(5)] == [0, 1, 4, 9, 16]  # values come back, kept or not
    assert dict(cache) == {0: 0, 1: 1, 2: 4}  # full at three: the first entries stay
    assert cache in caches.registered() and "test.squares: 3 of 3 entries" in repr(cache)
    tp.cuda.clear_caches()
    assert len(cache) == 0


def test_a_full_plan_cache_keeps_no_new_plans_and_ops_still_compute(monkeypatch):
    monkeypatch.setattr(_ops._ND_PLANS, "cap", 2)
    _ops._ND_PLANS.clear()
    x, a = random_tensor((3, 4, 5), tp.float32, seed=5)
    columns = [random_tensor(shape, tp.float32, seed=6) for shape in [(3, 1, 1), (1, 4, 1), (1, 1, 5), (3, 4, 1)]]
    for _ in range(2):
        for c, cn in columns:
            assert_close(x * c, a * cn, dtype=tp.float32)
    assert len(_ops._ND_PLANS) == 2


def test_a_cache_cap_must_be_a_positive_count():
    with pytest.raises(ValueError, match=r"^expected a cache size cap of 1 or more entries, got 0$"):
        BoundedCache("test.empty", cap=0)
