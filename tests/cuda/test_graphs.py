"""tensorplay.cuda.graphs: capture, replay, pools, misuse, DOT — on both backends."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.cuda import graphs
from tensorplay.runtime.memory import allocator


def _rand(n, seed=0):
    return np.random.default_rng(seed).uniform(0.5, 2.0, n).astype(np.float32)


def _no_capture_left():
    assert not tp.cuda.graphs.is_current_stream_capturing()
    assert not allocator._capture_pools
    assert not tp.cuda.capture_stream().is_capturing()


def test_same_objects_under_tp_cuda():
    assert tp.cuda.CUDAGraph is graphs.CUDAGraph
    assert tp.cuda.graph is graphs.graph
    assert tp.cuda.graph_pool_handle is graphs.graph_pool_handle


def test_capture_then_replay_reads_new_inputs():
    a = _rand(20)
    x = tp.tensor(a)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = (x * 2.0 + 1.0).sqrt()
    assert g._exec is not None  # instantiated at capture_end
    g.instantiate()  # a no-op now
    b = _rand(20, seed=1)
    x.copy_(b)
    g.replay()
    np.testing.assert_allclose(y.numpy(), np.sqrt(b.astype(np.float64) * 2 + 1), rtol=1e-6)


def test_nothing_runs_during_capture_and_replays_accumulate():
    x = tp.zeros(16)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        for _ in range(10):
            x.add_(1.0)
    assert x.numpy().sum() == 0  # captured, not run
    for _ in range(3):
        g.replay()
    np.testing.assert_array_equal(x.numpy(), np.full(16, 30.0))


def test_replay_on_an_explicit_stream():
    x = tp.ones(8)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        x.mul_(2.0)
    s = tp.cuda.Stream()
    s.wait_stream(tp.cuda.current_stream())
    g.replay(s)
    g.replay(stream=s)
    s.synchronize()
    np.testing.assert_array_equal(x.numpy(), np.full(8, 4.0))


def test_graph_context_makes_the_capture_stream_current():
    before = tp.cuda.current_stream()
    g = tp.cuda.CUDAGraph()
    assert not tp.cuda.graphs.is_current_stream_capturing()
    with tp.cuda.graph(g):
        assert tp.cuda.current_stream() == tp.cuda.capture_stream()
        assert tp.cuda.graphs.is_current_stream_capturing()
        tp.ones(4)
    assert tp.cuda.current_stream() is before
    _no_capture_left()


def test_capture_begin_end_on_own_stream():
    s = tp.cuda.Stream()
    x = tp.tensor(_rand(12))
    s.wait_stream(tp.cuda.current_stream())
    g = tp.cuda.CUDAGraph()
    with tp.cuda.stream(s):
        g.capture_begin()
        y = x.exp()
        g.capture_end()
    g.replay(s)
    s.synchronize()
    np.testing.assert_allclose(y.numpy(), np.exp(x.numpy().astype(np.float64)), rtol=1e-6)


def test_custom_kernel_copy_and_memset_nodes():
    @tp.jit
    def scale(a, x, y):
        i = tp.cuda.grid(1)
        if i < x.size:
            y[i] = a * x[i]

    x, y, z = tp.tensor(_rand(10)), tp.empty(10), tp.empty(10)
    w = tp.ones(10)
    scale[1, 16](1.0, x, y)  # compile before capture
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        scale[1, 16](3.0, x, y)
        z.copy_(y)  # a memcpy node
        w.zero_()  # a memset node
    w.fill_(7.0)
    g.replay()
    np.testing.assert_allclose(z.numpy(), 3.0 * x.numpy(), rtol=1e-6)
    np.testing.assert_array_equal(w.numpy(), np.zeros(10))


@pytest.mark.parametrize("mode", ["global", "thread_local", "relaxed"])
def test_capture_error_modes(mode):
    x = tp.ones(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g, capture_error_mode=mode):
        x.add_(1.0)
    g.replay()
    assert x.numpy().tolist() == [2.0] * 4


def test_bad_capture_error_mode():
    g = tp.cuda.CUDAGraph()
    with pytest.raises(ValueError, match="'global', 'thread_local' or 'relaxed'"):
        with tp.cuda.graph(g, capture_error_mode="strict"):
            pass
    _no_capture_left()


def test_legacy_default_stream_cannot_capture():
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CaptureError, match="legacy default stream cannot capture"):
        g.capture_begin(stream=tp.cuda.default_stream())
    _no_capture_left()


def test_state_machine_errors():
    g = tp.cuda.CUDAGraph()
    with pytest.raises(RuntimeError, match="without capture_begin"):
        g.capture_end()
    with pytest.raises(RuntimeError, match="needs a captured graph"):
        g.replay()
    with pytest.raises(RuntimeError, match="needs a captured graph"):
        g.debug_dump("x.dot")
    x = tp.ones(2)
    with tp.cuda.graph(g):
        x.add_(1.0)
    with pytest.raises(RuntimeError, match="call reset"):
        g.capture_begin(stream=tp.cuda.Stream())


def test_body_exception_discards_capture_and_runtime_stays_usable():
    x = tp.ones(4)
    g = tp.cuda.CUDAGraph()
    gc.collect()  # an earlier test's garbage, collected during this one, would move the count
    before = tp.cuda.memory_allocated()
    with pytest.raises(KeyError, match="boom"):
        with tp.cuda.graph(g):
            tmp = x * 3.0
            raise KeyError("boom")
    del tmp
    _no_capture_left()
    assert g.pool_id is None
    assert tp.cuda.memory_allocated() == before
    g2 = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g2):
        y = x + 1.0
    g2.replay()
    assert y.numpy().tolist() == [2.0] * 4


@pytest.mark.parametrize(
    "misuse, what",
    [
        (lambda x: x.numpy(), "reading a tensor back"),
        (lambda x: x.sum().item(), "reading a tensor back"),
        (lambda x: bool(x[0] > 0), "reading a tensor back"),
        (lambda x: tp.tensor([1.0, 2.0]), "copying host data"),
        (lambda x: x.copy_(np.ones(4, np.float32)), "copying host data"),
        (lambda x: tp.cuda.synchronize(), "synchronize"),
        (lambda x: tp.cuda.current_stream().synchronize(), "synchronize"),
    ],
)
def test_capture_misuse_raises_and_next_capture_works(misuse, what):
    x = tp.ones(4)
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CaptureError, match=what):
        with tp.cuda.graph(g):
            x.add_(1.0)
            misuse(x)
    _no_capture_left()
    g2 = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g2):
        x.add_(1.0)
    g2.replay()
    assert x.numpy().tolist() == [2.0] * 4


def test_capture_allocations_come_from_the_private_pool():
    x = tp.ones(64)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x * 2.0
    assert y._storage.block.pool == g.pool_id
    ptr = y.data_ptr()
    del y
    gc.collect()
    # the freed capture block stays in the graph's pool: eager code never gets it
    eager = [tp.empty(64) for _ in range(4)]
    assert ptr not in {t.data_ptr() for t in eager}


def test_graphs_sharing_a_pool_recycle_each_others_space():
    pool = tp.cuda.graph_pool_handle()
    x = tp.ones(4096)
    base = tp.cuda.memory_reserved()
    keep = []
    for i in range(3):
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g, pool=pool):
            t1 = x * 2.0
            t2 = t1 + 1.0
            out = t2.sum()
        del t1, t2
        keep.append((g, out))
        if i == 0:
            one = tp.cuda.memory_reserved() - base
    three = tp.cuda.memory_reserved() - base
    assert three < 2 * one  # about the largest graph's memory, not the sum
    for g, out in keep:
        g.replay()
        assert out.item() == pytest.approx(3.0 * 4096)


@pytest.mark.parametrize("how", ["pool_id", "graph"])
def test_pool_named_by_another_graph(how):
    x = tp.ones(8)
    g1 = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g1):
        y1 = x + 1.0
    g2 = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g2, pool=g1.pool_id if how == "pool_id" else g1):
        y2 = y1 * 3.0
    assert g2.pool_id == g1.pool_id
    g1.replay()
    g2.replay()
    assert y2.numpy().tolist() == [6.0] * 8


def test_bad_pool_argument():
    with pytest.raises(TypeError, match="graph_pool_handle"):
        with tp.cuda.graph(tp.cuda.CUDAGraph(), pool="mine"):
            pass
    _no_capture_left()


def test_reset_refuses_while_capture_tensors_live_then_frees_everything():
    x = tp.ones(1000)
    tp.cuda.synchronize()
    gc.collect()
    baseline = tp.cuda.memory_allocated()
    reserved_before = tp.cuda.memory_reserved()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x * 2.0
        z = y + 1.0
    del y
    with pytest.raises(RuntimeError, match=r"reset\(\) while 1 tensor\(s\) allocated during the capture are alive"):
        g.reset()
    g.replay()  # still usable after the refusal
    assert z.numpy()[0] == 3.0
    del z
    gc.collect()
    g.reset()
    assert tp.cuda.memory_allocated() == baseline
    tp.cuda.empty_cache()
    assert tp.cuda.memory_reserved() <= reserved_before


def test_fork_and_join_inside_a_capture():
    x = tp.tensor(_rand(16))
    side = tp.cuda.Stream()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        main = tp.cuda.current_stream()
        a = x * 2.0
        side.wait_stream(main)
        with tp.cuda.stream(side):
            b = x + 10.0
        main.wait_stream(side)
        c = a + b
    x.copy_(_rand(16, seed=3))
    g.replay()
    ref = _rand(16, seed=3).astype(np.float64)
    np.testing.assert_allclose(c.numpy(), 3 * ref + 10, rtol=1e-6)


def test_unjoined_fork_fails_at_capture_end():
    x = tp.ones(4)
    side = tp.cuda.Stream()
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CudaError, match="UNJOINED"):
        with tp.cuda.graph(g):
            side.wait_stream(tp.cuda.current_stream())
            with tp.cuda.stream(side):
                x.add_(1.0)
    _no_capture_left()


def test_debug_dump_and_export_dot_name_the_kernels(tmp_path):
    @tp.jit
    def heat_step(x, y):
        i = tp.cuda.grid(1)
        if i < x.size:
            y[i] = 0.5 * x[i]

    x, y = tp.ones(8), tp.empty(8)
    heat_step[1, 8](x, y)
    g = tp.cuda.CUDAGraph()
    g.enable_debug_mode()
    with tp.cuda.graph(g):
        heat_step[1, 8](x, y)
        z = y * 2.0
    path = g.debug_dump(str(tmp_path / "g.dot"))
    text = open(path).read()
    assert text.startswith("digraph")
    assert "heat_step" in text
    assert "elementwise.mul_as_flat" in text
    if tp.cuda.backend() == "sim":  # the launch shape, in each backend's words
        assert "heat_step\\n<<<(1, 1, 1), (8, 1, 1)>>>" in text
    else:
        assert "heat_step\\<\\<\\<1,8,0\\>\\>\\>" in text
    assert tp.cuda.graphs.export_dot(str(tmp_path / "last.dot")) == str(tmp_path / "last.dot")
    assert "heat_step" in open(tmp_path / "last.dot").read()
    bundle = g._repr_mimebundle_()
    assert bundle["text/plain"].startswith("digraph")
    del z


@pytest.mark.parametrize("op", [lambda x: x + x, lambda x: x * 2.0, lambda x: 2.0 - x, lambda x: x.exp()])
def test_launch_on_the_legacy_stream_during_a_capture_is_refused(op):
    x = tp.ones(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with tp.cuda.stream(tp.cuda.default_stream()):
            with pytest.raises(tp.cuda.CaptureError, match="on the legacy default stream is not allowed"):
                op(x)
        y = op(x)  # the capture is still valid
    g.replay()
    np.testing.assert_allclose(y.numpy(), op(x).numpy())


def test_a_replay_on_the_legacy_stream_during_a_capture_is_refused():
    x = tp.ones(4)
    g1 = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g1):
        x.add_(1.0)
    g2 = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g2):
        with tp.cuda.stream(tp.cuda.default_stream()):
            for replay in (g1.replay, lambda: g1.replay(tp.cuda.default_stream())):
                with pytest.raises(tp.cuda.CaptureError, match="^replay\\(\\) on the legacy default stream"):
                    replay()
        y = x * 3  # the capture is still valid
    g2.replay()
    assert y.tolist() == [3.0] * 4 and x.tolist() == [1.0] * 4  # g1 never ran


def test_readback_on_another_stream_is_refused_without_spoiling_the_capture():
    x = tp.ones(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        x.add_(1.0)
        with tp.cuda.stream(tp.cuda.default_stream()):
            with pytest.raises(tp.cuda.CaptureError, match="reading a tensor back .* is capturing a graph"):
                x.numpy()
        x.add_(1.0)
    g.replay()
    assert x.numpy().tolist() == [3.0] * 4


def test_readback_on_another_stream_is_allowed_in_relaxed_mode():
    x, y = tp.ones(4), tp.full((4,), 5.0)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g, capture_error_mode="relaxed"):
        x.add_(1.0)
        with tp.cuda.stream(tp.cuda.default_stream()):
            assert y.numpy().tolist() == [5.0] * 4
    g.replay()
    assert x.numpy().tolist() == [2.0] * 4
