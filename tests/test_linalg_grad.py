"""Gradients of tp.linalg against central finite differences of numpy.linalg
in float64 (an independent reference): a random weighting of each output,
differentiated by tp.autograd.grad and by differences of NumPy's result.
Decompositions are checked through losses their sign and phase choices do
not change (squares of the vectors' entries), and symmetric inputs through
a parameter P with A = P + P^T, as the functions read one triangle only.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensorplay as tp


def _data(shape, seed: int, shift: float = 0.0) -> np.ndarray:
    out = np.random.default_rng(seed).uniform(-1, 1, shape)
    return out + shift * np.eye(shape[-1]) if shift else out


def _check(tp_fn, np_fn, *arrays, eps: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-7) -> None:
    """d sum(w * out) / d input by autograd against central differences of ``np_fn``."""
    inputs = [tp.tensor(a).requires_grad_() for a in arrays]
    out = tp_fn(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    rng = np.random.default_rng(3)
    weights = [rng.uniform(0.5, 1.5, o.shape) for o in outs]
    loss = sum((o * tp.tensor(w)).sum() for o, w in zip(outs, weights, strict=True))
    analytic = tp.autograd.grad(loss, inputs, allow_unused=True)

    def objective(values) -> float:
        got = np_fn(*values)
        got = got if isinstance(got, tuple) else (got,)
        return float(sum((np.asarray(g) * w).sum() for g, w in zip(got, weights, strict=True)))

    for i, a in enumerate(arrays):
        numeric = np.zeros_like(a)
        for j in np.ndindex(a.shape):
            up, down = [v.copy() for v in arrays], [v.copy() for v in arrays]
            up[i][j] += eps
            down[i][j] -= eps
            numeric[j] = (objective(up) - objective(down)) / (2 * eps)
        got = np.zeros_like(a) if analytic[i] is None else analytic[i].numpy()
        np.testing.assert_allclose(got, numeric, rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")


def _sym(p):
    return p + (p.transpose(-1, -2) if isinstance(p, tp.Tensor) else np.swapaxes(p, -1, -2))


# -- solve, inv, det, slogdet, cholesky --------------------------------------------------------------


def test_solve_matrix_broadcast_and_vector():
    a, b = _data((2, 3, 3), 1, shift=3.0), _data((3, 2), 2)
    _check(tp.linalg.solve, np.linalg.solve, a, b)
    v = _data((3,), 3)
    _check(tp.linalg.solve, lambda a, v: np.linalg.solve(a, v[:, None])[..., 0], a, v)


def test_inv_det_slogdet():
    a = _data((2, 3, 3), 4, shift=2.0)
    _check(tp.linalg.inv, np.linalg.inv, a)
    _check(tp.linalg.det, np.linalg.det, a)
    _check(lambda x: tp.linalg.slogdet(x).logabsdet, lambda x: np.linalg.slogdet(x)[1], a)
    _check(lambda x: tp.linalg.slogdet(x)[1] * tp.linalg.slogdet(x)[0], lambda x: np.prod(np.linalg.slogdet(x), 0), a)


def test_det_has_its_gradient_at_singular_matrices_too():
    # the cofactor matrix: nonzero at rank n - 1 (where A^-T does not exist), zero at rank n - 2
    batch = np.array([
        [[2.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 4.0]],
        [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [0.0, 1.0, 1.0]],
        [[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [3.0, 6.0, 9.0]],
    ])  # fmt: skip
    _check(tp.linalg.det, np.linalg.det, batch)


def _conjugate_cofactors(a: np.ndarray) -> np.ndarray:
    n = a.shape[-1]
    out = np.empty_like(a)
    for i, j in np.ndindex(n, n):
        minor = np.delete(np.delete(a, i, -2), j, -1)
        out[..., i, j] = (-1) ** (i + j) * np.linalg.det(minor)
    return out.conj()


@pytest.mark.parametrize("dtype", ["float64", "complex128"])
def test_the_cofactors_of_dets_backward_are_the_minors(dtype):
    from tensorplay._linalg_solve import _conjugate_cofactors as cofactors

    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 4, 4)) + (1j * rng.standard_normal((2, 4, 4)) if dtype == "complex128" else 0)
    a[1, 3] = 2 * a[1, 0] - a[1, 1]  # singular: rank 3
    np.testing.assert_allclose(cofactors(tp.tensor(a)).numpy(), _conjugate_cofactors(a), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(upper):
    p = _data((2, 3, 3), 5, shift=2.0)

    def reference(p):
        factor = np.linalg.cholesky(_sym(p))
        return np.swapaxes(factor, -1, -2) if upper else factor

    _check(lambda p: tp.linalg.cholesky(_sym(p), upper=upper), reference, p)


def test_solve_triangular():
    a, b = _data((3, 3), 6, shift=2.0), _data((3, 2), 7)
    _check(lambda a, b: tp.linalg.solve_triangular(a, b, upper=True), lambda a, b: np.linalg.solve(np.triu(a), b), a, b)


# -- decompositions --------------------------------------------------------------------------------


def test_eigh_values_and_vectors():
    p = _data((2, 3, 3), 8)

    def loss(p):
        w, v = tp.linalg.eigh(_sym(p))
        return w, v * v  # squares: the same for either sign of a vector

    def reference(p):
        w, v = np.linalg.eigh(_sym(p))
        return w, v * v

    _check(loss, reference, p)
    _check(lambda p: tp.linalg.eigvalsh(_sym(p)), lambda p: np.linalg.eigvalsh(_sym(p)), p)


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)], ids=str)
def test_svd_and_svdvals(shape):
    a = _data(shape, 9)

    def loss(a):
        u, s, vh = tp.linalg.svd(a, full_matrices=False)
        return u * u, s, vh * vh

    def reference(a):
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return u * u, s, vh * vh

    _check(loss, reference, a, rtol=1e-4, atol=1e-6)
    _check(tp.linalg.svdvals, lambda a: np.linalg.svd(a, compute_uv=False), a)


def test_svd_with_full_matrices_differentiates_the_first_columns():
    a = _data((4, 2), 17)

    def loss(a):
        u, s, vh = tp.linalg.svd(a)
        return u[:, :2] * u[:, :2], s

    def reference(a):
        u, s, vh = np.linalg.svd(a)
        return u[:, :2] * u[:, :2], s

    _check(loss, reference, a, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 4)], ids=str)
def test_qr(shape):
    a = _data(shape, 10)

    def squares(q, r):  # the same for either sign of a column of Q and its row of R
        return q * q, r * r

    _check(lambda a: squares(*tp.linalg.qr(a)), lambda a: squares(*np.linalg.qr(a)), a)
    _check(lambda a: tp.linalg.qr(a).R.abs(), lambda a: np.abs(np.linalg.qr(a)[1]), a)


def test_qr_complete_with_more_rows_than_columns_says_it_has_no_gradient():
    x = tp.tensor(_data((3, 2), 11)).requires_grad_()
    q, r = tp.linalg.qr(x, mode="complete")
    with pytest.raises(
        RuntimeError, match=r"^linalg\.qr is not differentiable with mode='r', nor with mode='complete'"
    ):
        (q.sum() + r.sum()).backward()


# -- norms and composed functions -----------------------------------------------------------------


@pytest.mark.parametrize("order", [2, 1, 3.0, 0.5, math.inf, -math.inf])
def test_vector_norm(order):
    x = _data((2, 4), 12)
    _check(
        lambda x: tp.linalg.vector_norm(x, ord=order, axis=-1),
        lambda x: np.linalg.vector_norm(x, ord=order, axis=-1),
        x,
    )


def test_vector_norm_of_a_zero_vector_has_gradient_zero():
    x = tp.zeros(3, dtype=tp.float64).requires_grad_()
    tp.linalg.vector_norm(x).backward()
    assert x.grad.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("order", ["fro", "nuc", 2, -2, 1, math.inf])
def test_matrix_norm(order):
    x = _data((2, 3, 3), 13)
    _check(lambda x: tp.linalg.matrix_norm(x, ord=order), lambda x: np.linalg.matrix_norm(x, ord=order), x)


def test_pinv_and_matrix_power():
    a = _data((3, 2), 14)
    _check(tp.linalg.pinv, np.linalg.pinv, a)
    b = _data((3, 3), 15, shift=2.0)
    _check(lambda b: tp.linalg.matrix_power(b, 3), lambda b: np.linalg.matrix_power(b, 3), b)
    _check(lambda b: tp.linalg.matrix_power(b, -2), lambda b: np.linalg.matrix_power(b, -2), b)


def test_gradients_of_gradients():
    # d/dA of sum(grad of det) = d/dA sum(det(A) A^-T): the backward's own graph, against differences of it
    a = _data((3, 3), 16, shift=2.0)

    def first(x):
        (g,) = tp.autograd.grad(tp.linalg.det(x), [x], create_graph=True)
        return g

    _check(first, lambda x: np.linalg.det(x) * np.linalg.inv(x).T, a)
