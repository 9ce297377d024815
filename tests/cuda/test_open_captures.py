"""The checks tests/conftest.py runs after each test (tests/helpers/open_captures.py)."""

from __future__ import annotations

import threading

import pytest
from helpers.open_captures import device_broken, end_open_captures

import tensorplay as tp
from tensorplay.runtime.backend import CudaError
from tensorplay.runtime.backend import get as get_backend


def test_a_global_capture_left_open_by_an_exited_thread_is_ended_and_named():
    x = tp.ones(3)
    x * 2.0  # loaded before the capture
    graphs: list = []

    def capture() -> None:
        g = tp.cuda.CUDAGraph()
        g.capture_begin(capture_error_mode="global")
        _ = x * 2.0
        graphs.append(g)  # and the thread ends, its capture open

    worker = threading.Thread(target=capture, name="leaver")
    worker.start()
    worker.join(10)
    with pytest.raises(tp.cuda.CaptureError):  # what every later test of the process met
        x.tolist()
    found = end_open_captures()
    assert len(found) == 1 and "thread 'leaver', exited" in found[0], found
    assert x.tolist() == [1.0] * 3  # host reads work again
    assert end_open_captures() == []


def test_a_capture_begun_on_the_backend_is_ended_and_named():
    dev, s = get_backend(), tp.cuda.Stream()
    dev.begin_capture(s._h, "relaxed")
    found = end_open_captures()
    assert len(found) == 1 and f"stream {s.handle:#x} begun on the backend" in found[0]
    assert dev.capture_status(s._h) == "none"


def test_a_device_that_answers_a_sticky_error_is_called_broken(monkeypatch):
    dev = get_backend()
    assert device_broken() is None

    def query(stream):
        raise CudaError.from_result("cuStreamQuery", "CUDA_ERROR_ILLEGAL_ADDRESS")

    monkeypatch.setitem(vars(dev), "name", "cuda")
    monkeypatch.setitem(vars(dev), "stream_query", query)
    assert device_broken().startswith("cuStreamQuery failed: CUDA_ERROR_ILLEGAL_ADDRESS")
