"""Tensor creation and protocol edges: DLPack capsules a consumer
refuses, integer ``arange`` with float or negative steps, ``tensor()`` of lists
of tensors and NumPy values, ``in``, ``format`` and ``dtype.is_signed``."""

import gc
import weakref

import ml_dtypes
import numpy as np
import pytest

import tensorplay as tp
from tensorplay import _dlpack


class _Exporter:
    """A bfloat16 host array behind ``__dlpack__``, which NumPy cannot import."""

    def __init__(self) -> None:
        self.array = np.ones(2, dtype=ml_dtypes.bfloat16)

    def __dlpack__(self, **kwargs):
        a = self.array
        return _dlpack.to_capsule(a.ctypes.data, a.shape, (1,), a.dtype, _dlpack.DLPACK_CPU, 0, a)

    def __dlpack_device__(self):
        return (_dlpack.DLPACK_CPU, 0)


def test_refused_capsule_raises_the_consumers_error_and_frees_its_owner():
    exporter = _Exporter()
    owner = weakref.ref(exporter.array)
    live = len(_dlpack._LIVE)
    with pytest.raises(RuntimeError, match="Unsupported dtype"):  # not SystemError
        np.from_dlpack(exporter)
    del exporter
    gc.collect()
    assert len(_dlpack._LIVE) == live
    assert owner() is None


def test_refused_tensor_export_raises_the_consumers_error():
    # NumPy refuses bfloat16 on the simulator (host memory), and any tensor of a GPU (device memory)
    live = len(_dlpack._LIVE)
    with pytest.raises(RuntimeError, match="Unsupported (dtype|device) in DLTensor"):
        np.from_dlpack(tp.ones(2, dtype=tp.bfloat16))
    gc.collect()
    assert len(_dlpack._LIVE) == live  # the refused capsule gave its tensor back


@pytest.mark.parametrize(
    "args",
    [(0, 5, 1.5), (0, 3, 0.5), (0.5, 5, 1.5), (-0.5, 3, 1.5), (-2.5, 3, 0.7), (5, 0, -1.5), (0, 5, 2**40)],
)
def test_integer_arange_of_float_arguments_matches_numpy(args):
    assert tp.arange(*args, dtype=tp.int64).tolist() == np.arange(*args, dtype=np.int64).tolist()


@pytest.mark.parametrize("args", [(5, 0, -1), (255, 0, -100), (5, 0, -1.5), (0, 300, 200), (-0.5, 3, 1)])
def test_unsigned_arange_with_negative_or_wrapping_steps_matches_numpy(args):
    assert tp.arange(*args, dtype=tp.uint8).tolist() == np.arange(*args, dtype=np.uint8).tolist()


@pytest.mark.parametrize("args", [(300, 0, -1), (0, -5, -1), (0.0, -5, -1.0)])
def test_arange_refuses_first_values_outside_the_dtype_as_numpy(args):
    with pytest.raises(OverflowError):
        np.arange(*args, dtype=np.uint8)
    with pytest.raises(OverflowError, match="does not fit uint8"):
        tp.arange(*args, dtype=tp.uint8)


def test_tensor_of_a_list_of_tensors_keeps_their_dtype():
    a = tp.tensor(0.1, dtype=tp.float64)
    t = tp.tensor([a, a])
    assert t.dtype is tp.float64 and t.tolist() == [0.1, 0.1]
    i = tp.tensor(1, dtype=tp.int32)
    assert tp.tensor([i, i]).dtype is tp.int32
    assert tp.tensor([np.array(0.1), np.array(0.2)]).tolist() == [0.1, 0.2]


@pytest.mark.parametrize(
    "data, expected",
    [  # torch.tensor's rule: every element's dtype, Python floats as float32, ints as int64
        ([np.float32(1.5), 0.1], tp.float32),
        ([0.1, np.float32(1.5)], tp.float32),
        ([np.float64(1.5), 0.1], tp.float64),
        ([0.1, np.float64(1.5)], tp.float64),
        ([np.int32(1), 2], tp.int64),
        ([np.int8(1), np.uint8(2)], tp.int16),
        ([np.int32(1), 2.5], tp.float32),
        ([[1, 2], [np.float16(3), 4]], tp.float16),
    ],
)
def test_tensor_of_mixed_list_infers_from_every_element(data, expected):
    assert tp.tensor(data).dtype is expected


def test_tensor_of_bfloat16_tensors_and_scalars():
    b = tp.tensor(1.5, dtype=tp.bfloat16)
    for data, kwargs in [([b, b], {}), ([b, b], {"dtype": tp.bfloat16}), ([ml_dtypes.bfloat16(1.5)] * 2, {})]:
        t = tp.tensor(data, **kwargs)
        assert t.dtype is tp.bfloat16 and t.tolist() == [1.5, 1.5]


def test_contains_as_pytorch():
    x = tp.arange(6).reshape(3, 2)
    assert 3 in x and 5.0 in x and np.int64(0) in x and tp.tensor([4, 5]) in x
    assert 7 not in x
    with pytest.raises(TypeError, match="^expected a number or a tensor to look for"):
        "a" in x  # noqa: B015


def test_format_of_a_0d_tensor_is_its_values():
    assert f"{tp.tensor(1 / 3):.3f}" == f"{np.array(1 / 3):.3f}" == "0.333"
    assert f"{tp.tensor(7):>3}" == "  7"
    x = tp.tensor([1, 2])
    assert f"{x}" == str(x)
    with pytest.raises(TypeError, match="^cannot format a tensor of shape"):
        f"{x:.2f}"  # noqa: B018


def test_floating_dtypes_are_signed():
    assert tp.bfloat16.is_signed and tp.float16.is_signed and tp.complex64.is_signed
    assert not tp.uint8.is_signed and not tp.bool.is_signed


def test_comparing_with_a_string_is_python_s_as_in_pytorch():
    x = tp.ones(2)
    assert (x == "a") is False and (x != "a") is True
    assert x not in ["auto", None]


def test_to_refuses_a_dtype_given_twice():
    x = tp.ones(2)
    with pytest.raises(TypeError, match="to\\(\\) got a dtype twice"):
        x.to(tp.float64, dtype=tp.float32)
    assert x.to("cuda", dtype=tp.float64).dtype is tp.float64  # a device and a dtype: fine


def test_to_refuses_two_positional_dtypes():
    with pytest.raises(TypeError, match="to\\(\\) got a dtype twice"):
        tp.ones(2).to(tp.float32, tp.float64)
