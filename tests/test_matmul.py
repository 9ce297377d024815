"""matmul against NumPy in float64: 1-D, 2-D, batched and broadcast operands."""

import re

import numpy as np
import pytest
from helpers import FLOAT_DTYPES, INT_DTYPES, assert_close, random_tensor, reference

import tensorplay as tp

NUM_DTYPES = FLOAT_DTYPES + INT_DTYPES


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((4,), (4,)),
        ((3,), (3, 5)),
        ((4, 3), (3,)),
        ((5, 7), (7, 3)),
        ((17, 2), (2, 3)),
        ((2, 3, 4), (2, 4, 5)),
        ((1, 2, 3), (2, 3, 4)),
        ((3, 4), (2, 4, 5)),
        ((2, 1, 2, 3), (1, 3, 2)),
        ((2, 3, 4), (4,)),
        ((4,), (2, 4, 3)),
    ],
    ids=str,
)
def test_matmul_shapes(shape_a, shape_b):
    x, a = random_tensor(shape_a, tp.float32, seed=36)
    y, b = random_tensor(shape_b, tp.float32, seed=37)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert_close(x @ y, want, atol=1e-5, dtype=tp.float32)


@pytest.mark.parametrize("dtype", NUM_DTYPES, ids=str)
def test_matmul_dtypes(dtype):
    x, a = random_tensor((5, 7), dtype, seed=38)
    y, b = random_tensor((7, 3), dtype, seed=39)
    assert_close(x.matmul(y), reference(np.matmul, a, b), atol=1e-5 if dtype is tp.float32 else None, dtype=dtype)


def test_matmul_mixed_dtypes_and_layouts():
    x, a = random_tensor((4, 3), tp.int32, seed=40)
    y, b = random_tensor((4, 5), tp.float32, seed=41)
    want = a.T.astype(np.float64) @ b
    assert_close(tp.matmul(x.t(), y), want, atol=1e-5, dtype=tp.float32)  # transposed int32 @ float32
    assert_close(y.t() @ x.float(), b.T.astype(np.float64) @ a, atol=1e-5)
    assert_close(x[::2, 1:] @ y[1::2, ::2], a[::2, 1:].astype(np.float64) @ b[1::2, ::2], atol=1e-5)
    assert_close(x.t() @ x, a.T.astype(np.int64) @ a, dtype=tp.int32)
    z, c = random_tensor((3, 4), tp.float64, seed=42)
    assert_close(x.t().long() @ z.t()[:, :2], a.T @ c.T[:, :2], dtype=tp.float64)


def test_matmul_of_empty_operands():
    assert_close(tp.ones(0, 3) @ tp.ones(3, 2), np.zeros((0, 2)))
    assert_close(tp.ones(2, 0) @ tp.ones(0, 3), np.zeros((2, 3)))
    assert_close(tp.ones(0) @ tp.ones(0), 0.0)


def test_matmul_errors():
    with pytest.raises(ValueError, match=re.escape("matmul shapes (2, 3) and (4, 2) do not match: 3 != 4")):
        tp.ones(2, 3) @ tp.ones(4, 2)
    with pytest.raises(ValueError, match=re.escape("matmul shapes (3,) and (2,) do not match: 3 != 2")):
        tp.ones(3) @ tp.ones(2)
    with pytest.raises(ValueError, match=re.escape("shapes (2,), (3,) cannot be broadcast together")):
        tp.ones(2, 2, 3) @ tp.ones(3, 3, 1)
    with pytest.raises(ValueError, match="matmul needs operands of at least one dimension"):
        tp.tensor(2.0) @ tp.ones(2)
    with pytest.raises(TypeError, match="matmul is not defined for bool tensors"):
        tp.ones(2, 2, dtype=tp.bool) @ tp.ones(2, 2, dtype=tp.bool)
    with pytest.raises(TypeError, match="matmul expects two tensors, got Tensor and list"):
        tp.matmul(tp.ones(2), [1.0, 2.0])


def test_repeated_products_of_one_layout_use_each_calls_data():
    # A plan is kept per operand layout when the operands are used in place;
    # each call still reads its own operands and writes a new output.
    for seed in (70, 71):
        a, a_np = random_tensor((3, 5), tp.float32, seed=seed)
        b, b_np = random_tensor((5, 4), tp.float32, seed=seed + 10)
        v, v_np = random_tensor((5,), tp.float32, seed=seed + 20)
        a64, b64, v64 = (t.astype(np.float64) for t in (a_np, b_np, v_np))
        for _ in range(2):
            assert_close(a @ b, a64 @ b64, atol=1e-5)
            assert_close(a @ v, a64 @ v64, atol=1e-5)
            assert_close(v @ b, v64 @ b64, atol=1e-5)
            assert_close(b.t() @ a.t(), (a64 @ b64).T, atol=1e-5)  # copies: no plan
            assert_close(a[1:] @ b, a64[1:] @ b64, atol=1e-5)  # a view at an offset
