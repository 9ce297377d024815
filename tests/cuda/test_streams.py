"""Streams, the current stream of each thread, and events."""

import threading

import numpy as np
import pytest
from helpers import spin

import tensorplay as tp


def test_stream_handle_and_cuda_stream_protocol():
    s = tp.cuda.Stream()
    assert isinstance(s.handle, int)
    assert s.handle != 0
    assert s.__cuda_stream__() == (0, s.handle)
    assert f"{s.handle:#x}" in repr(s)


def test_default_stream_is_the_legacy_stream():
    d = tp.cuda.default_stream()
    assert d.handle == 0
    assert d.__cuda_stream__() == (0, 0)
    assert tp.cuda.default_stream() is d
    assert tp.cuda.current_stream() == d


def test_streams_compare_by_handle():
    s1, s2 = tp.cuda.Stream(), tp.cuda.Stream()
    assert s1 == s1 and s1 != s2
    assert hash(s1) == hash(s1.handle)
    assert len({s1, s2, s1}) == 2
    assert s1 != s1.handle  # a Stream never equals a bare int
    assert tp.cuda.default_stream() == tp.cuda.default_stream()


def test_stream_context_makes_current_and_restores():
    s = tp.cuda.Stream()
    before = tp.cuda.current_stream()
    with tp.cuda.stream(s) as entered:
        assert entered is s
        assert tp.cuda.current_stream() is s
    assert tp.cuda.current_stream() is before


def test_stream_contexts_nest():
    s1, s2 = tp.cuda.Stream(), tp.cuda.Stream()
    with tp.cuda.stream(s1):
        with tp.cuda.stream(s2):
            assert tp.cuda.current_stream() is s2
        assert tp.cuda.current_stream() is s1
    assert tp.cuda.current_stream() == tp.cuda.default_stream()


def test_stream_context_restores_on_exception():
    s = tp.cuda.Stream()
    before = tp.cuda.current_stream()
    with pytest.raises(KeyError):
        with tp.cuda.stream(s):
            raise KeyError("boom")
    assert tp.cuda.current_stream() is before


def test_stream_none_changes_nothing():
    before = tp.cuda.current_stream()
    with tp.cuda.stream(None) as entered:
        assert entered is None
        assert tp.cuda.current_stream() is before


def test_set_stream_rejects_non_streams():
    with pytest.raises(TypeError, match="^expected a tensorplay.cuda.Stream, got int"):
        tp.cuda.set_stream(0)


def test_current_stream_is_per_thread():
    s = tp.cuda.Stream()
    seen = {}

    def other():
        seen["stream"] = tp.cuda.current_stream()

    with tp.cuda.stream(s):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert tp.cuda.current_stream() is s
    assert seen["stream"] == tp.cuda.default_stream()


def test_ops_under_a_stream_context_run_on_it():
    s = tp.cuda.Stream()
    a = np.arange(12, dtype=np.float32)
    x = tp.tensor(a)
    tp.cuda.current_stream().synchronize()
    with tp.cuda.stream(s):
        s.wait_stream(tp.cuda.default_stream())
        y = (x * 2 + 1).exp().sum()
        z = x.clone()
        z.add_(1.0)
    s.synchronize()
    np.testing.assert_allclose(y.item(), np.exp(a.astype(np.float64) * 2 + 1).sum(), rtol=1e-5)
    np.testing.assert_array_equal(z.numpy(), a + 1)
    assert s.query() is True


def test_wait_stream_orders_a_consumer_after_a_producer():
    s1, s2 = tp.cuda.Stream(), tp.cuda.Stream()
    with tp.cuda.stream(s1):
        x = tp.arange(16, dtype=tp.float32)
        x.mul_(3.0)
    with tp.cuda.stream(s2):
        s2.wait_stream(s1)
        y = x + 1
    x.record_stream(s2)
    s2.synchronize()
    np.testing.assert_array_equal(y.numpy(), np.arange(16) * 3.0 + 1)


def test_wait_event_orders_a_consumer_after_a_producer():
    s1, s2 = tp.cuda.Stream(), tp.cuda.Stream()
    with tp.cuda.stream(s1):
        x = tp.full((4, 4), 2.0)
        x.add_(x)
        done = s1.record_event()
    assert isinstance(done, tp.cuda.Event)
    with tp.cuda.stream(s2):
        s2.wait_event(done)
        y = x @ x
    s2.synchronize()
    np.testing.assert_array_equal(y.numpy(), np.full((4, 4), 64.0))


def test_event_record_query_synchronize():
    s = tp.cuda.Stream()
    e = tp.cuda.Event()
    assert e.enable_timing is False
    with tp.cuda.stream(s):
        x = tp.ones(8) + 1
        e.record()  # on the current stream
    e.synchronize()
    assert e.query() is True
    assert x.tolist() == [2.0] * 8
    e.record(s)
    e.wait(tp.cuda.default_stream())
    s.synchronize()
    assert e.query() is True


def test_elapsed_time_between_timing_events():
    start, end = tp.cuda.Event(enable_timing=True), tp.cuda.Event(enable_timing=True)
    start.record()
    x = tp.ones(16) * 2
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end)
    assert isinstance(ms, float) and ms >= 0
    assert x.sum().item() == 32.0


def test_elapsed_time_needs_timing_events():
    start, end = tp.cuda.Event(), tp.cuda.Event(enable_timing=True)
    start.record()
    end.record()
    end.synchronize()
    with pytest.raises(ValueError, match="enable_timing=True"):
        start.elapsed_time(end)
    with pytest.raises(ValueError, match="enable_timing=True"):
        end.elapsed_time(start)


def test_synchronize_all_streams():
    s = tp.cuda.Stream()
    with tp.cuda.stream(s):
        x = tp.arange(10, dtype=tp.float32) * 2
    tp.cuda.synchronize()
    np.testing.assert_array_equal(x.numpy(), np.arange(10) * 2.0)


@pytest.mark.gpu
def test_work_on_a_stream_is_asynchronous():
    """A long kernel on one stream: the host gets control back before it ends."""
    s = tp.cuda.Stream()
    out = tp.zeros(1)
    s.wait_stream(tp.cuda.current_stream())
    start, end = tp.cuda.Event(enable_timing=True), tp.cuda.Event(enable_timing=True)
    start.record(s)
    spin[1, 1, s](out, 20_000_000)
    end.record(s)
    assert s.query() is False
    assert end.query() is False
    s.synchronize()
    assert s.query() is True and end.query() is True
    assert start.elapsed_time(end) > 0.1
    assert out.item() > 0


def test_elapsed_time_of_an_event_never_recorded_or_recorded_in_a_capture_is_a_sentence():
    start, end = tp.cuda.Event(enable_timing=True), tp.cuda.Event(enable_timing=True)
    with pytest.raises(ValueError, match="this event was never recorded"):
        start.elapsed_time(end)
    start.record()
    with pytest.raises(ValueError, match="the end event was never recorded"):
        start.elapsed_time(end)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        end.record()
    g.replay()
    with pytest.raises(tp.cuda.CaptureError, match=r"elapsed_time\(\) on an event recorded during a graph capture"):
        start.elapsed_time(end)
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) >= 0.0


def test_a_collected_streams_cached_blocks_go_back_to_the_device():
    import gc

    gc.collect()
    tp.cuda.synchronize()
    tp.cuda.empty_cache()
    start = tp.cuda.memory_reserved()
    for _ in range(5):  # short-lived streams, each leaving a 1 MiB block in its cache
        s = tp.cuda.Stream()
        with tp.cuda.stream(s):
            x = tp.empty(1 << 18)
            x.fill_(1.0)
        s.synchronize()
        del x, s
        gc.collect()
    assert tp.cuda.memory_reserved() - start <= 1 << 20  # at most one stream's block, not five
    with pytest.raises(TypeError, match="record_stream\\(\\) takes a tensorplay.cuda.Stream, got NoneType"):
        tp.ones(2).record_stream(None)
