"""Edges of the products, tp.linalg and tp.fft: the namespace's functions for
the linear algebra methods, NumPy integers as FFT lengths and axes, and bad
shapes of arguments refused with a sentence rather than a raw traceback.
References are NumPy's, in float64."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp


def _matrices(seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (2, 3, 3)) + 3 * np.eye(3)


def test_det_and_inverse_are_namespace_functions_as_their_methods():
    a = _matrices()
    np.testing.assert_allclose(tp.det(tp.tensor(a)).numpy(), np.linalg.det(a), rtol=1e-12)
    np.testing.assert_allclose(tp.inverse(tp.tensor(a)).numpy(), np.linalg.inv(a), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tp.tensor(a).det().numpy(), np.linalg.det(a), rtol=1e-12)


@pytest.mark.parametrize("name", ["fft", "ifft", "rfft", "irfft", "hfft", "ihfft"])
def test_numpy_integers_serve_as_lengths_and_axes(name):
    x = np.random.default_rng(1).uniform(-1, 1, (3, 4))
    if name in ("ifft", "irfft", "hfft"):
        x = x + 1j * np.random.default_rng(2).uniform(-1, 1, (3, 4))
    want = getattr(np.fft, name)(x, n=6, axis=0)
    got = getattr(tp.fft, name)(tp.tensor(x), n=np.int64(6), axis=np.int64(0))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)


def test_numpy_integers_serve_as_the_sizes_of_frequencies():
    np.testing.assert_allclose(tp.fft.fftfreq(np.int64(5), dtype=tp.float64).numpy(), np.fft.fftfreq(5))
    np.testing.assert_allclose(tp.fft.rfftfreq(np.int32(6), dtype=tp.float64).numpy(), np.fft.rfftfreq(6))


def test_lstsq_refuses_right_hand_sides_of_too_few_dimensions_with_a_sentence():
    a = tp.ones(4, 5, 3, dtype=tp.float64)
    with pytest.raises(ValueError, match=r"^linalg.lstsq\(\) expects B of shape \(\.\.\., 5, K\) or \(\.\.\., 5\)"):
        tp.linalg.lstsq(a, tp.ones(5, dtype=tp.float64))
    with pytest.raises(ValueError, match=r"^linalg.lstsq\(\) expects B of shape .* got shape \(\)"):
        tp.linalg.lstsq(a[0], tp.tensor(1.0, dtype=tp.float64))


@pytest.mark.parametrize("dim", [(0,), (0, 1, 2), 0])
def test_matrix_norms_refuse_a_dim_that_is_not_two_axes_with_a_sentence(dim):
    x = tp.ones(2, 3, 4)
    with pytest.raises(ValueError, match=r"^linalg.matrix_norm\(\) expects dim to be two dimensions"):
        tp.linalg.matrix_norm(x, dim=dim)
    if not isinstance(dim, int) and len(dim) > 2:
        with pytest.raises(ValueError, match=r"^linalg.matrix_norm\(\) expects dim to be two dimensions"):
            tp.linalg.norm(x, dim=dim)


def test_t_is_a_namespace_function_as_its_method():
    m = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(tp.t(tp.tensor(m)).numpy(), m.T)
    assert tp.t(tp.arange(3)).tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match=r"^t\(\) expects a tensor of at most 2 dimensions, got 3$"):
        tp.t(tp.zeros(1, 2, 3))
