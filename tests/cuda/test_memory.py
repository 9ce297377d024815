"""The caching allocator: size classes, reuse per stream, record_stream, pools, stats."""

import gc

import pytest
from helpers import spin

import tensorplay as tp
from tensorplay.runtime import memory
from tensorplay.runtime.backend import get as get_backend
from tensorplay.runtime.memory import allocator, round_size

MiB = 1 << 20


def stat(name: str) -> int:
    return tp.cuda.memory_stats()[name]


@pytest.fixture(autouse=True)
def settled():
    """Start each test with no garbage tensors and no cached blocks (a stream
    handle may be recycled, with a free list left by an earlier test)."""
    gc.collect()
    tp.cuda.synchronize()
    tp.cuda.empty_cache()
    yield
    gc.collect()


@pytest.mark.parametrize(
    "nbytes, size",
    [
        (0, 512),
        (1, 512),
        (512, 512),
        (513, 1024),
        (1000, 1024),
        (1025, 2048),
        (4096, 4096),
        (MiB - 1, MiB),
        (MiB, MiB),
        (MiB + 1, 2 * MiB),
        (2 * MiB + 1, 4 * MiB),
        (5 * MiB, 6 * MiB),
    ],
)
def test_round_size_classes(nbytes, size):
    assert round_size(nbytes) == size


def test_memory_allocated_tracks_rounded_blocks():
    base = tp.cuda.memory_allocated()
    x = tp.empty(100)  # 400 bytes -> one 512-byte block
    assert tp.cuda.memory_allocated() == base + 512
    y = tp.empty(300, dtype=tp.float64)  # 2400 bytes -> 4096
    assert tp.cuda.memory_allocated() == base + 512 + 4096
    del x
    assert tp.cuda.memory_allocated() == base + 4096
    del y
    assert tp.cuda.memory_allocated() == base


def test_views_share_the_block():
    base = tp.cuda.memory_allocated()
    x = tp.zeros(8, 8)
    v = x[2:, ::2].t()
    del x
    assert tp.cuda.memory_allocated() == base + 512  # the view keeps the storage
    del v
    assert tp.cuda.memory_allocated() == base


def test_freed_block_is_reused_on_the_same_stream():
    x = tp.empty(200)
    ptr = x.data_ptr()
    del x
    allocs, hits = stat("num_device_allocs"), stat("num_cache_hits")
    y = tp.empty(180)  # another request of the same size class
    assert y.data_ptr() == ptr
    assert stat("num_device_allocs") == allocs
    assert stat("num_cache_hits") == hits + 1


def test_blocks_are_not_reused_across_streams():
    s = tp.cuda.Stream()
    x = tp.empty(1000)
    ptr = x.data_ptr()
    del x  # free on the default stream: cached for it
    with tp.cuda.stream(s):
        y = tp.empty(1000)
    assert y.data_ptr() != ptr
    z = tp.empty(1000)  # back on the default stream: the cached block
    assert z.data_ptr() == ptr


def _used_on_a_second_stream(n: int):
    """(s1, s2, x, y): x allocated on s1, read on s2 into y = x + 1, recorded there."""
    s1, s2 = tp.cuda.Stream(), tp.cuda.Stream()
    with tp.cuda.stream(s1):
        x = tp.ones(n)
    s2.wait_stream(s1)
    with tp.cuda.stream(s2):
        y = x + 1
    x.record_stream(s2)
    return s1, s2, x, y


def test_a_block_used_on_a_stream_waits_for_it_before_reuse(monkeypatch):
    s1, s2, x, y = _used_on_a_second_stream(64)
    ptr = x.data_ptr()
    dev = get_backend()
    # Events recorded on s2 at free time have not completed yet ...
    monkeypatch.setitem(vars(dev), "event_query", lambda event: False)
    del x
    with tp.cuda.stream(s1):
        a = tp.empty(64)
    assert a.data_ptr() != ptr
    # ... and now they have: the block goes back to s1's free list.
    monkeypatch.undo()
    s2.synchronize()
    with tp.cuda.stream(s1):
        b = tp.empty(64)
    assert b.data_ptr() == ptr
    assert y.sum().item() == 128.0
    del a


def test_record_stream_then_free_is_reused_once_the_event_completed():
    s1, s2, x, y = _used_on_a_second_stream(32)
    x.record_stream(s1)  # its own stream: nothing to wait for
    ptr = x.data_ptr()
    del x
    s2.synchronize()  # the event recorded at free time has completed
    with tp.cuda.stream(s1):
        z = tp.empty(32)
    assert z.data_ptr() == ptr
    assert y.tolist() == [2.0] * 32


@pytest.mark.gpu
def test_record_stream_waits_for_real_work():
    s1, s2 = tp.cuda.Stream(), tp.cuda.Stream()
    with tp.cuda.stream(s1):
        x = tp.ones(64)
    s2.wait_stream(s1)
    out = tp.zeros(1)
    with tp.cuda.stream(s2):
        spin[1, 1](out, 20_000_000)  # keeps s2 busy for milliseconds
    x.record_stream(s2)
    ptr = x.data_ptr()
    del x
    with tp.cuda.stream(s1):
        a = tp.empty(64)
    assert a.data_ptr() != ptr  # s2 may still use it
    s2.synchronize()
    with tp.cuda.stream(s1):
        b = tp.empty(64)
    assert b.data_ptr() == ptr


def test_peak_memory_and_reset():
    tp.cuda.reset_peak_memory_stats()
    base = tp.cuda.memory_allocated()
    assert tp.cuda.max_memory_allocated() == base
    x = tp.empty(1024)  # 4096 bytes
    y = tp.empty(2048)  # 8192 bytes
    assert tp.cuda.max_memory_allocated() == base + 4096 + 8192
    del x, y
    assert tp.cuda.memory_allocated() == base
    assert tp.cuda.max_memory_allocated() == base + 4096 + 8192
    tp.cuda.reset_peak_memory_stats()
    assert tp.cuda.max_memory_allocated() == base
    assert stat("reserved_bytes.peak") == tp.cuda.memory_reserved()


def test_reserved_memory_and_empty_cache():
    assert tp.cuda.memory_reserved() == tp.cuda.memory_allocated()
    base = tp.cuda.memory_reserved()
    x = tp.empty(3000)  # 12000 bytes -> 16384
    keep = tp.empty(10)
    assert tp.cuda.memory_reserved() == base + 16384 + 512
    del x
    assert tp.cuda.memory_reserved() == base + 16384 + 512  # cached, not returned
    frees = stat("num_device_frees")
    tp.cuda.empty_cache()
    assert tp.cuda.memory_reserved() == tp.cuda.memory_allocated() == base + 512
    assert stat("num_device_frees") > frees
    del keep
    tp.cuda.empty_cache()
    assert tp.cuda.memory_reserved() == base


def test_memory_stats_keys():
    st = tp.cuda.memory_stats()
    expected = {
        "allocated_bytes.current",
        "allocated_bytes.peak",
        "reserved_bytes.current",
        "reserved_bytes.peak",
        "requested_bytes.current",
        "active_blocks.current",
        "num_allocs",
        "num_frees",
        "num_device_allocs",
        "num_device_frees",
        "num_alloc_retries",
        "num_cache_hits",
    }
    assert expected <= set(st)
    assert all(isinstance(v, int) for v in st.values())
    assert st["allocated_bytes.current"] == tp.cuda.memory_allocated()
    assert st["reserved_bytes.current"] == tp.cuda.memory_reserved()
    st["num_allocs"] = -1  # a copy: the allocator's counters are untouched
    assert stat("num_allocs") >= 0


def test_requested_bytes_and_active_blocks():
    requested, active = stat("requested_bytes.current"), stat("active_blocks.current")
    allocs, frees = stat("num_allocs"), stat("num_frees")
    x = tp.empty(25)  # 100 bytes requested
    assert stat("requested_bytes.current") == requested + 100
    assert stat("active_blocks.current") == active + 1
    del x
    assert stat("requested_bytes.current") == requested
    assert stat("active_blocks.current") == active
    assert (stat("num_allocs"), stat("num_frees")) == (allocs + 1, frees + 1)


def test_private_pool_blocks_are_not_handed_to_the_default_pool():
    s = tp.cuda.Stream()
    pool = allocator.new_pool_id()
    allocator.route_to_pool(s, pool)
    try:
        with tp.cuda.stream(s):
            x = tp.empty(64)
        ptr = x.data_ptr()
        assert allocator.pool_reserved(pool) == 512
        del x
        with tp.cuda.stream(s):
            allocator.route_to_pool(s, None)
            y = tp.empty(64)  # default pool, same stream and size
            allocator.route_to_pool(s, pool)
        z = tp.empty(64)  # default pool, default stream
        assert ptr not in (y.data_ptr(), z.data_ptr())
        with tp.cuda.stream(s):
            w = tp.empty(64)  # the pool recycles its own block
        assert w.data_ptr() == ptr
        del w
    finally:
        allocator.route_to_pool(s, None)
    assert memory.allocator.pool_reserved(pool) == 512
    tp.cuda.empty_cache()
    assert allocator.pool_reserved(pool) == 0
    assert tp.cuda.memory_reserved() == tp.cuda.memory_allocated()


def test_a_capture_hands_a_block_freed_on_a_forked_stream_to_no_other_stream_until_it_ends():
    # the work of two streams forked from a capture is unordered until they join: a temporary
    # of the side stream's handed to the capture stream's next op would be written by both at once
    import random

    from tensorplay.runtime.backend import simgraph

    x, side = tp.ones(256), tp.cuda.Stream()
    g, pool = tp.cuda.CUDAGraph(), tp.cuda.graph_pool_handle()
    with tp.cuda.graph(g, pool=pool):
        main = tp.cuda.current_stream()
        side.wait_stream(main)
        with tp.cuda.stream(side):
            t = x * 2
            freed = t.data_ptr()
            a = t + 1
            del t  # back to the pool, on the side stream: not yet joined
        b = x * 3  # the capture's stream: not t's block
        main.wait_stream(side)
    assert b.data_ptr() != freed
    for seed in range(8 if tp.cuda.backend() == "sim" else 1):  # the orders a GPU may run unordered nodes in
        if tp.cuda.backend() == "sim":
            simgraph.interleave(random.Random(seed))
        try:
            g.replay()
        finally:
            if tp.cuda.backend() == "sim":
                simgraph.interleave(None)
        assert (a.tolist(), b.tolist()) == ([3.0] * 256, [3.0] * 256)
    h = tp.cuda.CUDAGraph()  # a later capture sharing the pool: the side stream takes its block again
    with tp.cuda.graph(h, pool=pool):
        side.wait_stream(tp.cuda.current_stream())
        with tp.cuda.stream(side):
            c = x * 4
        tp.cuda.current_stream().wait_stream(side)
    assert c.data_ptr() == freed
    h.replay()
    assert c.tolist() == [4.0] * 256
    ptrs = {a.data_ptr(), b.data_ptr(), c.data_ptr()}
    del a, b, c  # freed outside a capture: the pool's blocks serve any stream
    k = tp.cuda.CUDAGraph()
    with tp.cuda.graph(k, pool=pool):
        d = x * 5
    assert d.data_ptr() in ptrs


def test_mem_get_info_reports_free_within_total():
    free, total = tp.cuda.mem_get_info()
    assert 0 < free <= total


def test_frees_waiting_on_events_do_not_break_a_later_capture():
    # A free waiting on another stream's event must not be queried inside a
    # global-mode capture: cuEventQuery would invalidate it.
    _, _, x, y = _used_on_a_second_stream(48)
    del x  # pending on an event
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        z = y * 3  # a new block in the graph's pool
    g.replay()
    assert z.tolist() == [6.0] * 48


def test_a_free_during_a_capture_records_its_events_after_the_capture():
    s1, s2, x, y = _used_on_a_second_stream(40)
    ptr = x.data_ptr()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        x.record_stream(tp.cuda.current_stream())  # used on the capturing stream too
        del x  # an event recorded now would be a node of the graph, not a time to wait for
        z = y * 2
    s2.synchronize()
    with tp.cuda.stream(s1):
        w = tp.empty(40)
    assert w.data_ptr() == ptr  # back in s1's free list once s2's work is done
    g.replay()
    assert z.tolist() == [4.0] * 40


SIM_ONLY = pytest.mark.skipif(tp.cuda.backend() != "sim", reason="sets the size of the simulated device")
OOM = r"^out of memory: could not allocate 4194304 bytes \(\d+ allocated, \d+ reserved by tensorplay\); free tensors"


@pytest.fixture
def device_of(monkeypatch):
    """``device_of(extra)``: make the simulated device hold what is in use now
    and ``extra`` bytes more (less, for a negative ``extra``)."""

    def shrink(extra: int) -> int:
        free, total = tp.cuda.mem_get_info()
        monkeypatch.setattr(get_backend(), "memory", total - free + extra)
        return total - free + extra

    return shrink


@SIM_ONLY
def test_live_allocations_are_bounded_by_the_simulated_device(device_of):
    size = device_of(9 * MiB)
    a, b = tp.empty(MiB), tp.empty(MiB)  # 4 MiB each: 8 of the 9 MiB free
    free, total = tp.cuda.mem_get_info()
    assert (free, total) == (size - (total - free), size) and 0 <= free < 4 * MiB
    with pytest.raises(tp.cuda.CudaError, match=OOM) as e:
        tp.empty(MiB)
    assert e.value.code == "CUDA_ERROR_OUT_OF_MEMORY" and e.value.function == "cuMemAlloc(4194304)"
    # the backend's own error is the driver's sentence
    with pytest.raises(tp.cuda.CudaError, match=r"^cuMemAlloc\(4194304\) failed: CUDA_ERROR_OUT_OF_MEMORY: the device"):
        get_backend().mem_alloc(4 * MiB)
    del a
    c = tp.empty(MiB)  # a's block again
    c.fill_(2.0)
    assert c.tolist()[:2] == [2.0, 2.0] and b.numel() == MiB


@SIM_ONLY
def test_an_allocation_past_the_simulated_device_frees_the_cache_and_tries_again(device_of):
    device_of(9 * MiB)
    a, b = tp.empty(MiB), tp.empty(MiB)
    del b  # cached: 8 MiB held, 1 MiB free
    retries, reserved = stat("num_alloc_retries"), tp.cuda.memory_reserved()
    c = tp.empty(MiB // 2)  # 2 MiB: another size class, which fits once the cached block is given back
    assert stat("num_alloc_retries") == retries + 1
    assert tp.cuda.memory_reserved() == reserved - 4 * MiB + 2 * MiB and a.numel() + c.numel() == 3 * MiB // 2


@SIM_ONLY
def test_a_capture_out_of_memory_with_eager_memory_cached_says_to_empty_the_cache(device_of):
    device_of(9 * MiB)
    x, cached = tp.ones(MiB), tp.ones(MiB)
    del cached  # 4 MiB cached for eager use, 1 MiB free
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CudaError, match=r"4194304 bytes of it are cached .* tp\.cuda\.empty_cache\(\) before"):
        with tp.cuda.graph(g):
            _ = x + 1  # 4 MiB from the graph's pool
    tp.cuda.empty_cache()
    with tp.cuda.graph(g):
        y = x + 1
    g.replay()
    assert y[:2].tolist() == [2.0, 2.0]


@SIM_ONLY
def test_mem_get_info_never_reports_negative_free_memory(device_of):
    a = tp.empty(MiB)
    size = device_of(-2 * MiB)  # a device smaller than what is in use
    assert tp.cuda.mem_get_info() == (0, size)
    with pytest.raises(tp.cuda.CudaError, match=r"^out of memory: could not allocate 512 bytes"):
        tp.empty(1)
    del a


@pytest.mark.parametrize("where", ["stream", "thread"])
def test_a_shared_pool_captured_on_new_streams_keeps_no_block_for_each_stream(where):
    # a block freed during a capture serves only its stream until the pool's captures end,
    # then any stream: else each capture on a new stream (or a new thread's side stream)
    # leaves one behind for a stream that never captures again
    import threading

    x, pool = tp.ones(256), tp.cuda.graph_pool_handle()
    keep = tp.cuda.CUDAGraph()  # holds the pool between the cycles
    with tp.cuda.graph(keep, pool=pool):
        k = x + 1
    results = []

    def cycle(stream):
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g, pool=pool, stream=stream):
            t = x * 2
            y = t + 1
            del t  # freed inside the capture
        g.replay()
        results.append(y.tolist() == [3.0] * 256)
        del y
        g.reset()

    reserved = []
    for _ in range(8):
        if where == "stream":
            cycle(tp.cuda.Stream())
        else:  # capture_begin's side stream, one per thread
            th = threading.Thread(target=cycle, args=(None,))
            th.start()
            th.join()
        gc.collect()
        reserved.append((tp.cuda.memory_reserved(), allocator.pool_reserved(pool)))
    assert results == [True] * 8
    assert reserved[1:] == reserved[1:2] * 7
    keep.replay()
    assert k.tolist() == [2.0] * 256
