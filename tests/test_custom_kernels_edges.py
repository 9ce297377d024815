"""Edges of the custom-kernel and interop path: read-only foreign memory,
DLPack's stream argument, and events given the wrong objects."""

import numpy as np
import pytest

import tensorplay as tp


class CAIHolder:
    """A foreign object exposing nothing but a CUDA Array Interface dict."""

    def __init__(self, cai: dict) -> None:
        self.__cuda_array_interface__ = cai


@tp.jit
def _add_one(x):
    i = tp.cuda.grid(1)
    if i < x.size:
        x[i] += 1


def _read_only_view(x):
    """A CUDA Array Interface over ``x``'s memory whose producer marks it read-only."""
    cai = dict(x.__cuda_array_interface__)
    cai["data"] = (x.data_ptr(), True)
    return CAIHolder(cai)


# -- read-only memory through the CUDA Array Interface ---------------------------------


def test_as_tensor_refuses_read_only_cuda_array_interface():
    x = tp.tensor(np.arange(3, dtype=np.float32))
    with pytest.raises(ValueError, match="^as_tensor\\(\\) got memory its producer marked read-only"):
        tp.as_tensor(_read_only_view(x))


def test_a_kernel_does_not_write_read_only_cuda_array_interface_memory():
    expect = np.arange(3, dtype=np.float32)
    x = tp.tensor(expect)
    with pytest.raises(ValueError, match="marked read-only"):
        _add_one[1, 3](_read_only_view(x))
    np.testing.assert_array_equal(x.numpy(), expect)


def test_as_tensor_of_writable_cuda_array_interface_still_shares_memory():
    x = tp.tensor(np.arange(3, dtype=np.float32))
    _add_one[1, 3](CAIHolder(dict(x.__cuda_array_interface__)))
    np.testing.assert_array_equal(x.numpy(), np.arange(3, dtype=np.float32) + 1)


# -- __dlpack__(stream=...) -------------------------------------------------------------


@pytest.mark.parametrize("stream", ["0", 1.0, True])
def test_dlpack_refuses_a_stream_that_is_not_an_int(stream):
    x = tp.ones(3)
    with pytest.raises(TypeError, match="^__dlpack__\\(\\) expected stream as an int"):
        x.__dlpack__(stream=stream)


def test_dlpack_refuses_a_tensorplay_stream_object_and_names_its_handle():
    x = tp.ones(3)
    with pytest.raises(TypeError, match="pass its .handle"):
        x.__dlpack__(stream=tp.cuda.Stream())


def test_dlpack_takes_a_stream_handle_and_numpy_reads_the_values():
    s = tp.cuda.Stream()
    x = tp.tensor(np.arange(4.0))
    x.__dlpack__(stream=s.handle)  # ordered after x's producer; not consumed
    np.testing.assert_array_equal(np.from_dlpack(x), np.arange(4.0))


# -- events given something else -------------------------------------------------------


def test_elapsed_time_refuses_an_end_that_is_not_an_event():
    start = tp.cuda.Event(enable_timing=True)
    start.record()
    with pytest.raises(TypeError, match="^expected a tensorplay.cuda.Event as the end of elapsed_time"):
        start.elapsed_time(3)


def test_record_event_refuses_an_object_that_is_not_an_event():
    with pytest.raises(TypeError, match="^expected a tensorplay.cuda.Event or None, got int"):
        tp.cuda.Stream().record_event(3)


# -- Numba's signature form of the decorator --------------------------------------------


@pytest.mark.parametrize("signature", ["void(float32[:])", ["void(float32[:])"]])
def test_jit_takes_a_numba_signature_first(signature):
    @tp.jit(signature)
    def add_one(x):
        i = tp.cuda.grid(1)
        if i < x.size:
            x[i] += 1

    x = tp.tensor(np.arange(4, dtype=np.float32))
    add_one[1, 4](x)
    np.testing.assert_array_equal(x.numpy(), np.arange(4, dtype=np.float32) + 1)
    assert add_one.__name__ == "add_one"


def test_jit_device_function_is_callable_from_a_kernel():
    @tp.jit(device=True)
    def twice(v):
        return 2 * v

    @tp.jit
    def twice_plus_one(x):
        i = tp.cuda.grid(1)
        if i < x.size:
            x[i] = twice(x[i]) + 1

    a = np.arange(4, dtype=np.float32)
    x = tp.tensor(a)
    twice_plus_one[1, 4](x)
    np.testing.assert_array_equal(x.numpy(), 2 * a + 1)


def test_from_dlpack_copies_read_only_host_memory_when_asked_to_on_either_backend():
    values = np.arange(4.0)
    values.flags.writeable = False
    copied = tp.from_dlpack(values, copy=True)
    copied.add_(1.0)
    assert copied.tolist() == [1.0, 2.0, 3.0, 4.0] and values.tolist() == [0.0, 1.0, 2.0, 3.0]
