"""Capture rules, through the backend's capture primitives (below the graphs layer).

Work launched on a capturing stream is recorded, not run; a graph launch runs it.
Host readback and host synchronisation during a capture are errors that say so,
on both backends, and the runtime stays usable after them.
"""

import gc

import numpy as np
import pytest

import tensorplay as tp
from tensorplay.runtime.backend import get as get_backend

N = 12


class Capture:
    """Begin a global capture on a fresh stream made current; always end it."""

    def __init__(self) -> None:
        self.dev = get_backend()
        self.stream = tp.cuda.Stream()
        self.graph = None

    def __enter__(self):
        self._ctx = tp.cuda.stream(self.stream)
        self._ctx.__enter__()
        self.dev.begin_capture(self.stream._h, "global")
        return self

    def end(self):
        """End the capture and return the graph (raises if it was invalidated)."""
        if self.dev.capture_status(self.stream._h) == "none":
            return self.graph
        self.graph = self.dev.end_capture(self.stream._h)
        return self.graph

    def __exit__(self, *exc) -> None:
        try:
            if self.dev.capture_status(self.stream._h) != "none":
                try:
                    self.dev.end_capture(self.stream._h)
                except tp.cuda.CudaError:
                    if exc[0] is None:
                        raise
        finally:
            self._ctx.__exit__(*exc)


def assert_runtime_usable() -> None:
    assert not tp.cuda.current_stream().is_capturing()
    x = tp.tensor([1.0, 2.0, 3.0])
    assert (x * 2).tolist() == [2.0, 4.0, 6.0]
    tp.cuda.synchronize()


@pytest.fixture
def data():
    a = np.arange(N, dtype=np.float32)
    x = tp.tensor(a)
    y = tp.zeros(N)
    # Warm up: the first launch of a kernel compiles and loads it, which a
    # capture must not see.
    y.add_(x)
    y.mul_(2.0)
    _ = x * 3.0 + y
    y.zero_()
    tp.cuda.synchronize()
    return a, x, y


def test_ops_during_capture_are_recorded_not_run(data):
    a, x, y = data
    dev = get_backend()
    with Capture() as cap:
        assert cap.stream.is_capturing()
        assert tp.cuda.current_stream() is cap.stream
        assert dev.capture_status(cap.stream._h) == "active"
        y.add_(x)  # in place
        z = x * 3.0 + y  # allocates its output during the capture
        graph = cap.end()
    assert not cap.stream.is_capturing()
    np.testing.assert_array_equal(y.numpy(), np.zeros(N))  # nothing ran yet
    assert dev.graph_node_count(graph) >= 3
    exe = dev.graph_instantiate(graph)
    s = cap.stream
    dev.graph_launch(exe, s._h)
    s.synchronize()
    np.testing.assert_array_equal(y.numpy(), a)
    np.testing.assert_array_equal(z.numpy(), a * 3 + a)
    dev.graph_launch(exe, s._h)  # replaying applies the in-place add again
    s.synchronize()
    np.testing.assert_array_equal(y.numpy(), 2 * a)
    np.testing.assert_array_equal(z.numpy(), a * 3 + 2 * a)
    dev.graph_exec_destroy(exe)
    dev.graph_destroy(graph)
    assert_runtime_usable()


def test_graph_launch_on_another_stream(data):
    a, x, y = data
    dev = get_backend()
    with Capture() as cap:
        y.add_(x)
        y.mul_(2.0)
        graph = cap.end()
    exe = dev.graph_instantiate(graph)
    other = tp.cuda.Stream()
    other.wait_stream(tp.cuda.default_stream())
    dev.graph_launch(exe, other._h)
    other.synchronize()
    np.testing.assert_array_equal(y.numpy(), a * 2)


READBACKS = {
    "numpy": lambda x: x.numpy(),
    "item": lambda x: x[0].item(),
    "tolist": lambda x: x.tolist(),
    "bool": lambda x: bool(x[0]),
    "float": lambda x: float(x[1]),
    "tensor_host_copy": lambda x: tp.tensor([1.0]),
    "copy_from_numpy": lambda x: x.copy_(np.ones(N, np.float32)),
}


@pytest.mark.parametrize("readback", list(READBACKS))
def test_host_readback_during_capture_is_a_capture_error(data, readback):
    a, x, y = data
    dev = get_backend()
    with Capture() as cap:
        y.add_(x)
        with pytest.raises(tp.cuda.CaptureError, match="is capturing") as info:
            READBACKS[readback](x)
        assert isinstance(info.value, tp.cuda.CudaError)
        assert f"{cap.stream.handle:#x}" in str(info.value)
        graph = cap.end()  # the capture was not spoiled by the refused call
    exe = dev.graph_instantiate(graph)
    dev.graph_launch(exe, cap.stream._h)
    cap.stream.synchronize()
    np.testing.assert_array_equal(y.numpy(), a)
    assert_runtime_usable()


def test_stream_synchronize_during_capture_is_a_capture_error(data):
    a, x, y = data
    with Capture() as cap:
        y.add_(x)
        with pytest.raises(tp.cuda.CaptureError, match="capturing") as info:
            cap.stream.synchronize()
        assert info.value.function == "cuStreamSynchronize"
        assert info.value.code == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
        # The synchronisation invalidated the capture: ending it says so.
        with pytest.raises(tp.cuda.CaptureError, match="invalidated") as ended:
            cap.end()
        assert ended.value.code == "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"
    assert_runtime_usable()
    np.testing.assert_array_equal(y.numpy(), np.zeros(N))  # the captured add never ran


def test_an_event_recorded_into_an_invalidated_capture_is_refused(data):
    # as the driver's cuEventRecord (measured on an H100, driver 580): the capture says it was invalidated
    a, x, y = data
    with Capture() as cap:
        y.add_(x)
        with pytest.raises(tp.cuda.CaptureError, match="capturing"):
            cap.stream.synchronize()
        with pytest.raises(tp.cuda.CaptureError, match="invalidated") as recorded:
            tp.cuda.Event().record(cap.stream)
        assert recorded.value.function == "cuEventRecord"
        assert recorded.value.code == "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"
        with pytest.raises(tp.cuda.CaptureError, match="invalidated"):
            cap.end()
    assert_runtime_usable()


def test_device_synchronize_during_capture_is_a_capture_error(data):
    a, x, y = data
    with Capture() as cap:
        y.add_(x)
        with pytest.raises(tp.cuda.CaptureError, match="capturing"):
            tp.cuda.synchronize()
        with pytest.raises(tp.cuda.CaptureError, match="invalidated"):
            cap.end()
    assert_runtime_usable()


def test_readback_from_another_stream_during_a_global_capture_is_refused(data):
    a, x, y = data
    with Capture() as cap:
        y.add_(x)
        with tp.cuda.stream(tp.cuda.default_stream()):
            with pytest.raises(tp.cuda.CaptureError, match="capturing"):
                x.numpy()
        with pytest.raises(tp.cuda.CaptureError, match="invalidated"):
            cap.end()
    assert_runtime_usable()


def test_capture_on_the_legacy_default_stream_fails():
    dev = get_backend()
    legacy = tp.cuda.default_stream()
    with pytest.raises(tp.cuda.CudaError, match="^cuStreamBeginCapture failed") as info:
        dev.begin_capture(legacy._h, "global")
    assert info.value.code == "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"
    assert not legacy.is_capturing()
    assert_runtime_usable()


def test_capture_twice_on_one_stream_fails(data):
    dev = get_backend()
    with Capture() as cap:
        with pytest.raises(tp.cuda.CudaError, match="^cuStreamBeginCapture failed"):
            dev.begin_capture(cap.stream._h, "global")
        assert cap.stream.is_capturing()
    assert_runtime_usable()


def test_end_capture_on_a_stream_that_is_not_capturing_fails():
    dev = get_backend()
    s = tp.cuda.Stream()
    with pytest.raises(tp.cuda.CudaError, match="^cuStreamEndCapture failed") as info:
        dev.end_capture(s._h)
    assert "CAPTURE" in info.value.code or info.value.code == "CUDA_ERROR_ILLEGAL_STATE"


def test_repr_during_capture_does_not_read_back(data):
    a, x, y = data
    with Capture() as cap:
        text = repr(x)
        cap.end()
    assert "capturing" in text


@pytest.mark.gpu
def test_numba_frees_what_python_collected_only_after_the_capture():
    # Numba frees its collected device arrays ten at a time, from whichever
    # thread collects the tenth: a cuMemFree during a capture would invalidate it.
    from numba import cuda

    x = tp.ones(8)
    y = x + 1  # warm up
    arrays = [cuda.device_array(16) for _ in range(30)]
    cuda.synchronize()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x + 1
        arrays.clear()
        gc.collect()
        z = y * 2
    g.replay()
    assert z.tolist() == [4.0] * 8
