"""complex64 and complex128: the dtypes, making complex tensors, reading them
back, copies and fills between complex and real tensors, DLPack; against
NumPy's complex arrays. (Complex arithmetic is the op table's:
``tests/kernels``.)"""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp

COMPLEX = [tp.complex64, tp.complex128]
A = np.array([[1 + 2j, -0.5j, 3.25], [0, -1 - 1j, 2e10 + 1e-3j]])


@pytest.mark.parametrize(
    "dtype, np_dtype, component",
    [(tp.complex64, np.complex64, tp.float32), (tp.complex128, np.complex128, tp.float64)],
    ids=str,
)
def test_the_complex_dtypes(dtype, np_dtype, component):
    assert dtype.is_complex and not dtype.is_floating_point
    assert dtype.itemsize == np.dtype(np_dtype).itemsize and dtype.np == np.dtype(np_dtype)
    assert repr(dtype) == f"tensorplay.{dtype.name}" and tp.finfo(dtype).dtype is component
    assert not any(d.is_complex for d in (tp.float32, tp.int64, tp.bool, tp.bfloat16))
    assert tp.dtype is tp.DType and isinstance(dtype, tp.dtype)


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
def test_filled_complex_tensors(dtype):
    np.testing.assert_array_equal(tp.zeros((2, 3), dtype=dtype).numpy(), np.zeros((2, 3), dtype.np))
    np.testing.assert_array_equal(tp.ones(4, dtype=dtype).numpy(), np.ones(4, dtype.np))
    np.testing.assert_array_equal(tp.full((2, 2), 1.5 - 2j, dtype=dtype).numpy(), np.full((2, 2), 1.5 - 2j, dtype.np))
    np.testing.assert_array_equal(tp.full(3, 7, dtype=dtype).numpy(), np.full(3, 7, dtype.np))
    assert tp.empty((2, 1), dtype=dtype).dtype is dtype
    x = tp.zeros((2, 3), dtype=dtype)
    np.testing.assert_array_equal(tp.ones_like(x).numpy(), np.ones((2, 3), dtype.np))
    np.testing.assert_array_equal(tp.full_like(x, 2j).numpy(), np.full((2, 3), 2j, dtype.np))


def test_complex_data_gives_complex64_by_default():
    assert tp.full(2, 1j).dtype is tp.complex64
    assert tp.tensor([1, 2j]).dtype is tp.complex64 and tp.asarray(3 + 0j).dtype is tp.complex64
    assert tp.asarray([[1, 2.5], [1j, True]]).dtype is tp.complex64
    x = tp.tensor(A)
    assert x.dtype is tp.complex128
    np.testing.assert_array_equal(x.numpy(), A)
    y = tp.tensor(A, dtype=tp.complex64)
    np.testing.assert_array_equal(y.numpy(), A.astype(np.complex64))
    np.testing.assert_array_equal(tp.tensor([1.5, -2], dtype=tp.complex128).numpy(), np.array([1.5, -2], complex))


def test_readback():
    x = tp.tensor(A)
    assert x.tolist() == A.tolist()
    assert x[0, 0].item() == 1 + 2j and type(x[0, 0].item()) is complex
    assert complex(x[1, 1]) == -1 - 1j
    assert x[:, 1].tolist() == A[:, 1].tolist()  # a strided view
    assert "dtype=tensorplay.complex128" in repr(x)


@pytest.mark.parametrize("dst_dtype", [tp.complex64, tp.complex128, tp.float64, tp.float32, tp.int32, tp.bool])
def test_copy_between_complex_and_other_types(dst_dtype):
    src = tp.tensor(A)
    dst = tp.zeros((3, 2), dtype=dst_dtype)
    if dst_dtype.is_complex:
        dst.copy_(src.T)  # strided, and cast between the two precisions
        np.testing.assert_array_equal(dst.numpy(), A.T.astype(dst_dtype.np))
    real = tp.tensor([[1.5, -2], [0, 4], [5, 6]])
    out = tp.zeros((3, 2), dtype=tp.complex128)
    out.copy_(real)  # a real source: imaginary parts 0
    np.testing.assert_array_equal(out.numpy(), real.numpy().astype(np.complex128))
    out.copy_(tp.tensor([1, 2j]))  # broadcast
    np.testing.assert_array_equal(out.numpy(), np.broadcast_to(np.array([1, 2j]), (3, 2)))


def test_copy_of_complex_into_a_real_tensor_keeps_the_real_part_as_pytorch():
    dst = tp.zeros((2, 3), dtype=tp.float64)
    dst.copy_(tp.tensor(A))
    np.testing.assert_array_equal(dst.numpy(), A.real)
    flags = tp.zeros((2, 3), dtype=tp.bool)
    flags.copy_(tp.tensor(A))
    np.testing.assert_array_equal(flags.numpy(), A != 0)


def test_fill_and_setitem():
    x = tp.zeros((2, 3), dtype=tp.complex64)
    x[0] = 1 - 1j
    x[1, 2] = 5
    x[:, 0] = np.array([2j, 3j])
    want = np.zeros((2, 3), np.complex64)
    want[0], want[1, 2], want[:, 0] = 1 - 1j, 5, [2j, 3j]
    np.testing.assert_array_equal(x.numpy(), want)
    x.fill_(0.5j)
    np.testing.assert_array_equal(x.numpy(), np.full((2, 3), 0.5j, np.complex64))


def test_a_complex_value_into_a_real_tensor_is_refused():
    with pytest.raises(TypeError, match=r"^cannot fill a tensor of float32 with the complex value 1j; .*complex64"):
        tp.zeros(2).fill_(1j)
    with pytest.raises(TypeError, match=r"^cannot fill a tensor of int64 with the complex value"):
        tp.full(2, 1j, dtype=tp.int64)


@pytest.mark.parametrize("dtype", COMPLEX, ids=str)
def test_dlpack_round_trip(dtype):
    x = tp.tensor(A, dtype=dtype)
    if tp.cuda.backend() == "sim":  # simulated device memory is host memory: NumPy takes it
        np.testing.assert_array_equal(np.from_dlpack(x), A.astype(dtype.np))
    y = tp.from_dlpack(x)
    assert y.dtype is dtype and y.data_ptr() == x.data_ptr()
    np.testing.assert_array_equal(y.numpy(), A.astype(dtype.np))


@pytest.mark.skipif(tp.cuda.backend() != "sim", reason="imports host memory: the simulator's")
def test_from_dlpack_of_a_numpy_complex_array():
    host = A.astype(np.complex64)
    x = tp.from_dlpack(host)
    assert x.dtype is tp.complex64
    np.testing.assert_array_equal(x.numpy(), host)


def test_complex_creation_is_captured_and_replayed():
    v = tp.tensor([1.0, 2.0])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        ones = tp.ones(3, dtype=tp.complex64)
        filled = tp.full(2, 2 - 1j, dtype=tp.complex128)
        mixed = tp.zeros(2, dtype=tp.complex64)
        mixed.copy_(v)
    ones.zero_()
    v.copy_(tp.tensor([-3.0, 4.5]))
    g.replay()
    np.testing.assert_array_equal(ones.numpy(), np.ones(3, np.complex64))
    np.testing.assert_array_equal(filled.numpy(), np.full(2, 2 - 1j))
    np.testing.assert_array_equal(mixed.numpy(), np.array([-3.0, 4.5], np.complex64))
