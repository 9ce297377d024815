"""DLPack capsules round-tripped through NumPy's own DLPack support, on the CPU."""

import ctypes
import gc
import weakref
from types import SimpleNamespace

import numpy as np
import pytest

from tensorplay._dlpack import (
    DLPACK_CPU,
    DLPACK_CUDA,
    DLPackView,
    _DLManagedTensor,
    from_capsule,
    to_capsule,
)

DTYPES = [
    np.float16,
    np.float32,
    np.float64,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
    np.complex64,
    np.complex128,
]


class Owner:
    """Holds the exported array; weakref-able so tests can see when it is freed."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array


class Exporter:
    """The smallest producer: hands out one capsule built by to_capsule."""

    def __init__(self, capsule) -> None:
        self.capsule = capsule

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return self.capsule

    def __dlpack_device__(self):
        return (DLPACK_CPU, 0)


def export(array: np.ndarray, owner: object):
    strides = tuple(s // array.itemsize for s in array.strides)
    return to_capsule(array.ctypes.data, array.shape, strides, array.dtype, DLPACK_CPU, 0, owner)


def as_numpy(view: DLPackView) -> np.ndarray:
    """Read a CPU view's memory as an array (which keeps the view alive)."""

    interface = {
        "data": (view.data_ptr, False),
        "shape": view.shape,
        "strides": tuple(s * view.dtype.itemsize for s in view.strides_elems),
        "typestr": view.dtype.str,
        "version": 3,
    }
    return np.asarray(SimpleNamespace(__array_interface__=interface, view=view))


def sample(dtype, shape=(3, 4)) -> np.ndarray:
    return (np.arange(np.prod(shape)).reshape(shape) % 7).astype(dtype)


@pytest.mark.parametrize(
    "array",
    [sample(np.float32), sample(np.float32)[:, ::2], sample(np.int64).T, np.array(2.5)],
    ids=["contiguous", "strided", "transposed", "scalar"],
)
def test_export_to_numpy_keeps_owner_alive(array):
    owner = Owner(array)
    expected = owner.array.copy()
    owner_ref = weakref.ref(owner)
    result = np.from_dlpack(Exporter(export(owner.array, owner)))
    del owner, array
    gc.collect()
    assert owner_ref() is not None
    np.testing.assert_array_equal(result, expected)
    assert result.strides == owner_ref().array.strides
    del result
    gc.collect()
    assert owner_ref() is None


def test_unconsumed_capsule_releases_owner():
    owner = Owner(sample(np.float32))
    owner_ref = weakref.ref(owner)
    capsule = export(owner.array, owner)
    del owner
    gc.collect()
    assert owner_ref() is not None
    del capsule
    gc.collect()
    assert owner_ref() is None


def test_import_from_numpy():
    base = sample(np.float32)
    array = base[:, ::2]
    array_ref = weakref.ref(array)
    view = from_capsule(array.__dlpack__())
    assert view.data_ptr == array.ctypes.data
    assert view.shape == (3, 2)
    assert view.strides_elems == (4, 2)
    assert view.dtype == np.float32
    assert (view.device_type, view.device_id) == (DLPACK_CPU, 0)
    np.testing.assert_array_equal(as_numpy(view), array)
    del array
    gc.collect()
    assert array_ref() is not None  # NumPy's capsule still holds it
    assert not view.released
    del view
    gc.collect()
    assert array_ref() is None


def test_release_calls_deleter_once():
    owner = Owner(sample(np.int32))
    owner_ref = weakref.ref(owner)
    view = from_capsule(export(owner.array, owner))
    del owner
    gc.collect()
    assert owner_ref() is not None
    view.release()
    gc.collect()
    assert view.released and owner_ref() is None
    view.release()  # a second release is a no-op
    del view
    gc.collect()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_dtypes_round_trip(dtype):
    array = sample(dtype)
    np.testing.assert_array_equal(np.from_dlpack(Exporter(export(array, array))), array)
    view = from_capsule(array.__dlpack__())
    assert view.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(as_numpy(view), array)
    view = from_capsule(export(array, array))
    assert view.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(as_numpy(view), array)


def test_cuda_device_is_described():
    array = sample(np.float32)
    view = from_capsule(to_capsule(1 << 40, (3, 4), (4, 1), array.dtype, DLPACK_CUDA, 3, None))
    assert (view.data_ptr, view.device_type, view.device_id) == (
        1 << 40,
        DLPACK_CUDA,
        3,
    )


def test_consuming_twice_raises():
    capsule = sample(np.float32).__dlpack__()
    view = from_capsule(capsule)
    with pytest.raises(ValueError, match="^DLPack capsule was already consumed"):
        from_capsule(capsule)
    assert not view.released


def test_not_a_capsule_raises():
    with pytest.raises(TypeError, match="^expected a PyCapsule from __dlpack__\\(\\), got ndarray"):
        from_capsule(np.zeros(3))


def _dl_type(capsule):
    """The element type of an unversioned capsule (NumPy's), to rewrite in place."""
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return _DLManagedTensor.from_address(get(capsule, b"dltensor")).dl_tensor.dtype


def test_unsupported_dtype_on_import_leaves_capsule_unconsumed():
    # NumPy exports only types tensorplay takes: one of its capsules, retyped as an opaque handle (kDLOpaqueHandle)
    array = np.zeros(3, dtype=np.float64)
    capsule = array.__dlpack__()
    dl_type = _dl_type(capsule)
    dl_type.code = 3
    message = "^DLPack tensor of type code 3, bits 64, lanes 1 is not supported; supported: "
    with pytest.raises(TypeError, match=message):
        from_capsule(capsule)
    dl_type.code = 2  # kDLFloat again: NumPy takes the capsule, which the failed import left unconsumed
    np.testing.assert_array_equal(np.from_dlpack(Exporter(capsule)), array)


def test_unsupported_dtype_on_export_raises():
    array = np.zeros(3, dtype=np.longdouble)
    with pytest.raises(TypeError, match="^expected one of float16, .* for DLPack export, got float128"):
        export(array, array)


def test_export_argument_errors():
    with pytest.raises(ValueError, match=r"^expected 2 strides for shape \(3, 4\), got strides \(1,\)"):
        to_capsule(0, (3, 4), (1,), np.dtype(np.float32), DLPACK_CPU, 0, None)
    with pytest.raises(ValueError, match="^expected device_type DLPACK_CPU .* got 7"):
        to_capsule(0, (3,), (1,), np.dtype(np.float32), 7, 0, None)
