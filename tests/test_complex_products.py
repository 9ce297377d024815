"""Complex tensors in products and reductions: matmul (cuBLAS on a GPU, four
real products otherwise), vecdot's conjugate, prod, var and std, against NumPy
in complex128."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp


def _complex(rng, shape, dtype=np.complex128):
    return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize(("sa", "sb"), [((3, 4), (4, 2)), ((2, 3, 4), (4, 5)), ((4,), (4, 3)), ((2, 1, 3), (3,))])
def test_matmul_of_complex_tensors_matches_numpy(dtype, sa, sb):
    rng = np.random.default_rng(1)
    a, b = _complex(rng, sa, dtype), _complex(rng, sb, dtype)
    got = tp.matmul(tp.asarray(a), tp.asarray(b))
    assert got.dtype == tp.asarray(a).dtype
    np.testing.assert_allclose(np.asarray(got.tolist()), a.astype(np.complex128) @ b, rtol=1e-5, atol=1e-5)


def test_matmul_of_a_complex_and_a_real_tensor_promotes_and_transposes_stay_plain():
    rng = np.random.default_rng(2)
    a, b = _complex(rng, (3, 4), np.complex64), rng.standard_normal((3, 2)).astype(np.float32)
    got = tp.asarray(a).t() @ tp.asarray(b)  # a transpose, never a conjugate transpose
    assert got.dtype == tp.complex64
    np.testing.assert_allclose(np.asarray(got.tolist()), a.T @ b, rtol=1e-5, atol=1e-5)


def test_a_complex_product_is_captured_and_replays_on_new_values():
    rng = np.random.default_rng(3)
    a, b = tp.asarray(_complex(rng, (2, 3))), tp.asarray(_complex(rng, (3, 2)))
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = a @ b
    a2, b2 = _complex(rng, (2, 3)), _complex(rng, (3, 2))
    a.copy_(tp.asarray(a2))
    b.copy_(tp.asarray(b2))
    g.replay()
    np.testing.assert_allclose(np.asarray(out.tolist()), a2 @ b2, rtol=1e-12)


def test_vecdot_conjugates_its_first_argument():
    rng = np.random.default_rng(4)
    x, y = _complex(rng, (3, 4)), _complex(rng, (4,))
    got = tp.vecdot(tp.asarray(x), tp.asarray(y))
    np.testing.assert_allclose(np.asarray(got.tolist()), np.sum(x.conj() * y, axis=-1), rtol=1e-12)
    np.testing.assert_allclose(tp.vecdot(tp.asarray(y), tp.asarray(y)).item(), np.vdot(y, y), rtol=1e-12)


@pytest.mark.parametrize("axis", [None, 1, (0, 2), -1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_complex_prod_var_and_std_match_numpy(axis, keepdims):
    rng = np.random.default_rng(5)
    a = _complex(rng, (2, 5, 3))
    x = tp.asarray(a)
    got = tp.prod(x, axis=axis, keepdims=keepdims)
    ref = np.prod(a, axis=axis, keepdims=keepdims)
    assert got.shape == ref.shape and got.dtype == tp.complex128
    np.testing.assert_allclose(np.asarray(got.tolist()), ref, rtol=1e-12)
    for name in ("var", "std"):
        got = getattr(tp, name)(x, axis=axis, keepdims=keepdims, correction=1)
        ref = getattr(np, name)(a, axis=axis, keepdims=keepdims, ddof=1)
        assert got.shape == ref.shape and got.dtype == tp.float64  # real, as NumPy and PyTorch give it
        np.testing.assert_allclose(np.asarray(got.tolist()), ref, rtol=1e-12)


def test_complex_prod_of_an_empty_axis_is_one():
    got = tp.prod(tp.zeros((2, 0), dtype=tp.complex64), axis=1)
    assert got.tolist() == [1 + 0j, 1 + 0j]


def test_argmax_of_a_complex_tensor_is_refused_with_a_sentence():
    with pytest.raises(TypeError, match="complex"):
        tp.argmax(tp.asarray(np.array([1 + 1j, 2])))


def test_the_sum_and_mean_methods_of_a_complex_tensor_keep_both_parts():
    a = np.array([[1 + 1j, 2], [3, 4 + 2j]], np.complex64)
    x = tp.asarray(a)
    assert x.sum().dtype == tp.complex64 and complex(x.sum()) == a.sum()
    np.testing.assert_allclose(np.asarray(x.mean(0).tolist()), a.mean(0))
    np.testing.assert_allclose(np.asarray(x.sum(1, keepdim=True).tolist()), a.sum(1, keepdims=True))
    with pytest.raises(TypeError, match="not defined for complex tensors"):
        x.amax()


def test_a_complex_sum_that_requires_grad_records_its_gradient():
    y = tp.asarray(np.array([1 + 1j, 2 - 1j])).requires_grad_()
    tp.real(tp.sum(y * y)).backward()  # L = Re(sum(y^2)): grad = dL/dRe + i dL/dIm = 2 conj(y)
    np.testing.assert_allclose(np.asarray(y.grad.tolist()), [2 - 2j, 4 + 2j])
