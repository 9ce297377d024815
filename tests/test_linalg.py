"""tp.linalg against numpy.linalg in float64: every function on small
matrices, batched and broadcast, real and complex; decompositions by what
defines them (reconstruction, orthonormal factors, triangles), not by signs
or phases that LAPACK may choose differently; errors as sentences; each
factorisation captured in a graph and replayed after its input changed, and
run inside a while body; the NaN a failed factorisation leaves inside a
capture; explain(). On a GPU the same tests run through cuSOLVER, and the
``gpu`` tests check that it is cuSOLVER that serves.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import tensorplay as tp
from tensorplay._linalg_choice import LINALG
from tensorplay.runtime.libraries import cusolver

ON_SIM = tp.cuda.backend() == "sim"
DTYPES = (tp.float64, tp.complex128, tp.float32, tp.complex64)
TOL = {"float64": 1e-10, "complex128": 1e-10, "float32": 2e-4, "complex64": 2e-4}


def _random(shape, dtype, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = rng.uniform(-1, 1, shape)
    if dtype.kind == "c":
        out = out + 1j * rng.uniform(-1, 1, shape)
    return out.astype(dtype.np)


def _well_conditioned(shape, dtype, seed: int = 0) -> np.ndarray:
    return (_random(shape, dtype, seed) + shape[-1] * np.eye(shape[-1])).astype(dtype.np)


def _hermitian(shape, dtype, seed: int = 0, definite: bool = True) -> np.ndarray:
    x = _random(shape, dtype, seed)
    h = x @ np.conj(np.swapaxes(x, -1, -2))
    return (h + shape[-1] * np.eye(shape[-1]) if definite else h - np.eye(shape[-1])).astype(dtype.np)


def _close(t, want, dtype=None, tol=None) -> None:
    assert isinstance(t, tp.Tensor)
    got = t.numpy()
    want = np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
    tol = tol or TOL[(dtype or t.dtype).name]
    np.testing.assert_allclose(got.astype(np.complex128), want.astype(np.complex128), rtol=tol, atol=tol)


def _adjoint(x: np.ndarray) -> np.ndarray:
    return np.conj(np.swapaxes(x, -1, -2))


# -- solve, inv, det, slogdet ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_solve_matrix_vector_batched_and_broadcast_right_hand_sides(dtype):
    a = _well_conditioned((2, 3, 3), dtype, 1)
    for b in (_random((2, 3, 2), dtype, 2), _random((3, 4), dtype, 3), _random((3,), dtype, 4)):
        x = tp.linalg.solve(tp.tensor(a), tp.tensor(b))
        want = np.linalg.solve(a, b[..., None])[..., 0] if b.ndim == 1 else np.linalg.solve(a, b)
        assert x.dtype is dtype
        _close(x, want)
    one = _well_conditioned((3, 3), dtype, 5)  # one matrix, a stack of right-hand sides
    b = _random((2, 2, 3, 1), dtype, 6)
    _close(tp.linalg.solve(tp.tensor(one), tp.tensor(b)), np.linalg.solve(one, b))


def test_solve_promotes_its_operands_and_solves_from_the_right():
    a = _well_conditioned((3, 3), tp.float32, 1)
    b = _random((2, 3), tp.float64, 2)
    x = tp.linalg.solve(tp.tensor(a), tp.tensor(b.T))
    assert x.dtype is tp.float64
    _close(x, np.linalg.solve(a.astype(np.float64), b.T), tol=1e-6)
    _close(tp.linalg.solve(tp.tensor(a), tp.tensor(b), left=False), b @ np.linalg.inv(a.astype(np.float64)), tol=1e-6)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_inv_det_slogdet(dtype):
    a = _well_conditioned((2, 4, 4), dtype, 7)
    a[1] = a[1][[1, 0, 3, 2]]  # an even number of swaps
    a[0] = a[0][[1, 0, 2, 3]]  # and an odd one: the determinant's sign
    x = tp.tensor(a)
    _close(tp.linalg.inv(x), np.linalg.inv(a))
    _close(tp.linalg.det(x), np.linalg.det(a))
    sign, logabsdet = tp.linalg.slogdet(x)
    want_sign, want_log = np.linalg.slogdet(a)
    assert logabsdet.dtype.kind == "f" and sign.dtype is dtype
    _close(sign, want_sign)
    _close(logabsdet, want_log, dtype)


def test_a_singular_matrix_has_determinant_zero_and_no_error():
    a = np.array([[1.0, 0.0, 3.0], [2.0, 0.0, 6.0], [1.0, 0.0, 1.0]])  # a zero column: a pivot exactly 0
    assert tp.linalg.det(tp.tensor(a)).item() == 0.0
    sign, logabsdet = tp.linalg.slogdet(tp.tensor(a))
    assert sign.item() == 0.0 and logabsdet.item() == -math.inf


def test_empty_matrices_and_batches():
    assert tp.linalg.det(tp.zeros((2, 0, 0), dtype=tp.float64)).tolist() == [1.0, 1.0]
    assert tp.linalg.inv(tp.zeros((0, 3, 3))).shape == (0, 3, 3)
    assert tp.linalg.solve(tp.zeros((2, 0, 0)), tp.zeros((2, 0, 3))).shape == (2, 0, 3)
    assert tp.linalg.cholesky(tp.zeros((0, 0))).shape == (0, 0)
    u, s, vh = tp.linalg.svd(tp.zeros((3, 0)))
    assert (u.shape, s.shape, vh.shape) == ((3, 3), (0,), (0, 0))
    _close(u, np.eye(3), tp.float64)
    q, r = tp.linalg.qr(tp.zeros((2, 0)), mode="complete")
    assert (q.shape, r.shape) == ((2, 2), (2, 0))
    assert tp.linalg.eigvalsh(tp.zeros((4, 0, 0))).shape == (4, 0)


# -- cholesky, eigh ------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cholesky_lower_and_upper(dtype):
    h = _hermitian((2, 3, 3), dtype, 8)
    lower = tp.linalg.cholesky(tp.tensor(h))
    _close(lower, np.linalg.cholesky(h))
    upper = tp.linalg.cholesky(tp.tensor(h), upper=True)
    _close(upper, _adjoint(np.linalg.cholesky(h)))


def test_cholesky_reads_one_triangle_only():
    h = _hermitian((3, 3), tp.float64, 9)
    lower_only, upper_only = np.tril(h) + np.triu(np.full((3, 3), 7.0), 1), np.triu(h) - np.tril(np.ones((3, 3)), -1)
    _close(tp.linalg.cholesky(tp.tensor(lower_only)), np.linalg.cholesky(h))
    _close(tp.linalg.cholesky(tp.tensor(upper_only), upper=True), np.linalg.cholesky(h).T)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_eigh_values_and_orthonormal_vectors(dtype):
    h = _hermitian((2, 4, 4), dtype, 10, definite=False)
    w, v = tp.linalg.eigh(tp.tensor(h))
    assert w.dtype.kind == "f" and v.dtype is dtype
    _close(w, np.linalg.eigvalsh(h), dtype)
    vn = v.numpy()
    tol = TOL[dtype.name] * 10
    np.testing.assert_allclose(h @ vn, vn * w.numpy()[..., None, :], atol=tol)  # A V = V diag(w)
    np.testing.assert_allclose(_adjoint(vn) @ vn, np.broadcast_to(np.eye(4), (2, 4, 4)), atol=tol)
    _close(tp.linalg.eigvalsh(tp.tensor(h)), np.linalg.eigvalsh(h), dtype)


def test_eigh_reads_the_triangle_uplo_names():
    h = _hermitian((3, 3), tp.float64, 11, definite=False)
    lower_only, upper_only = np.tril(h) + np.triu(np.ones((3, 3)), 1), np.triu(h) + np.tril(np.ones((3, 3)), -1)
    _close(tp.linalg.eigvalsh(tp.tensor(lower_only)), np.linalg.eigvalsh(h))
    _close(tp.linalg.eigh(tp.tensor(upper_only), UPLO="U").eigenvalues, np.linalg.eigvalsh(h))


# -- svd, qr -------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 5, 3), (4, 4)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_svd_full_and_reduced(shape, dtype):
    a = _random(shape, dtype, 12)
    m, n = shape[-2:]
    k = min(m, n)
    want = np.linalg.svd(a, compute_uv=False)
    tol = TOL[dtype.name] * 10
    for full in (True, False):
        u, s, vh = tp.linalg.svd(tp.tensor(a), full_matrices=full)
        assert u.shape == shape[:-2] + ((m, m) if full else (m, k)) and vh.shape == shape[:-2] + (
            (n, n) if full else (k, n)
        )
        assert s.dtype.kind == "f" and u.dtype is dtype and vh.dtype is dtype
        _close(s, want, dtype)
        un, sn, vhn = u.numpy(), s.numpy(), vh.numpy()
        np.testing.assert_allclose((un[..., :k] * sn[..., None, :]) @ vhn[..., :k, :], a, atol=tol)
        np.testing.assert_allclose(
            _adjoint(un) @ un, np.broadcast_to(np.eye(un.shape[-1]), un.shape[:-2] + (un.shape[-1],) * 2), atol=tol
        )
        np.testing.assert_allclose(
            vhn @ _adjoint(vhn), np.broadcast_to(np.eye(vhn.shape[-2]), vhn.shape[:-2] + (vhn.shape[-2],) * 2), atol=tol
        )
    _close(tp.linalg.svdvals(tp.tensor(a)), want, dtype)


@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 5, 3), (4, 4)], ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_qr_reduced_and_complete(shape, dtype):
    a = _random(shape, dtype, 13)
    m, n = shape[-2:]
    tol = TOL[dtype.name] * 10
    for mode in ("reduced", "complete"):
        q, r = tp.linalg.qr(tp.tensor(a), mode=mode)
        cols = m if mode == "complete" else min(m, n)
        assert q.shape == shape[:-2] + (m, cols) and r.shape == shape[:-2] + (cols, n)
        qn, rn = q.numpy(), r.numpy()
        np.testing.assert_allclose(qn @ rn, a, atol=tol)
        np.testing.assert_allclose(
            _adjoint(qn) @ qn, np.broadcast_to(np.eye(cols), shape[:-2] + (cols, cols)), atol=tol
        )
        assert (rn == np.triu(rn)).all()
        if ON_SIM and dtype in (tp.float64, tp.complex128):  # NumPy's reflectors (LAPACK's, as the simulator's)
            wq, wr = np.linalg.qr(a, mode=mode)
            _close(q, wq, tol=1e-8)
            _close(r, wr, tol=1e-8)
    assert tp.linalg.qr(tp.tensor(a), mode="r").R.shape == shape[:-2] + (min(m, n), n)


# -- composed functions --------------------------------------------------------------------------


def test_the_main_namespaces_functions_are_reexported():
    for name in ("matmul", "matrix_transpose", "outer", "tensordot", "trace", "vecdot"):
        assert getattr(tp.linalg, name) is getattr(tp, name), name
    x = np.arange(24.0).reshape(2, 3, 4)
    _close(tp.linalg.diagonal(tp.tensor(x), offset=1), np.diagonal(x, 1, -2, -1))
    assert tp.linalg.diagonal(tp.tensor(x), offset=9).shape == (2, 0)


def test_cross_of_integers_and_floats_along_an_axis():
    a = np.arange(12).reshape(3, 4) - 5
    b = np.arange(12).reshape(3, 4)[::-1] + 2
    got = tp.linalg.cross(tp.tensor(a), tp.tensor(b), axis=0)
    assert got.dtype is tp.int64 and (got.numpy() == np.cross(a, b, axis=0)).all()
    x, y = _random((2, 3), tp.float64, 1), _random((3,), tp.float64, 2)
    _close(tp.linalg.cross(tp.tensor(x), tp.tensor(y)), np.cross(x, y))


@pytest.mark.parametrize("n", [0, 1, 2, 5, -1, -3])
def test_matrix_power(n):
    a = _well_conditioned((2, 3, 3), tp.float64, 14) / 3
    _close(tp.linalg.matrix_power(tp.tensor(a), n), np.linalg.matrix_power(a, n))


def test_matrix_power_of_complex_matrices():
    a = _random((3, 3), tp.complex128, 15)
    _close(tp.linalg.matrix_power(tp.tensor(a), 3), np.linalg.matrix_power(a, 3))


def test_matrix_rank_pinv_lstsq():
    a = _random((2, 5, 3), tp.float64, 16)
    a[1, :, 2] = a[1, :, 0] + a[1, :, 1]  # rank 2
    x = tp.tensor(a)
    assert tp.linalg.matrix_rank(x).tolist() == [3, 2]
    assert tp.linalg.matrix_rank(x, rtol=tp.tensor([0.0, 0.99])).tolist() == [3, 1]
    _close(tp.linalg.pinv(x), np.linalg.pinv(a), tol=1e-8)
    b = _random((2, 5, 2), tp.float64, 17)
    solution, residuals, rank, values = tp.linalg.lstsq(x[:1], tp.tensor(b[:1]))
    want, want_residuals, want_rank, want_values = np.linalg.lstsq(a[0], b[0], rcond=None)
    _close(solution[0], want)
    _close(residuals[0], want_residuals)
    assert rank.tolist() == [want_rank]
    _close(values[0], want_values)
    c = _random((3, 2), tp.complex128, 18)
    _close(tp.linalg.pinv(tp.tensor(c)), np.linalg.pinv(c), tol=1e-8)


@pytest.mark.parametrize("order", [2, 1, 0, -1, 3.5, 0.5, math.inf, -math.inf])
def test_vector_norm(order):
    x = _random((2, 3, 4), tp.float64, 19)
    x[0, 0, 0] = 0.0
    for axis, keep in ((None, False), (1, True), ((0, 2), False), (-1, False)):
        with np.errstate(divide="ignore"):
            want = np.linalg.vector_norm(x, ord=order, axis=axis, keepdims=keep)
        _close(tp.linalg.vector_norm(tp.tensor(x), axis=axis, keepdims=keep, ord=order), want)
    c = _random((5,), tp.complex64, 20)
    got = tp.linalg.vector_norm(tp.tensor(c), ord=order)
    assert got.dtype is tp.float32
    _close(got, np.linalg.vector_norm(c.astype(np.complex128), ord=order))


@pytest.mark.parametrize("order", ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf])
@pytest.mark.parametrize("dtype", [tp.float64, tp.complex128], ids=str)
def test_matrix_norm_and_norm(order, dtype):
    x = _random((2, 3, 4), dtype, 21)
    want = np.linalg.matrix_norm(x, ord=order)
    _close(tp.linalg.matrix_norm(tp.tensor(x), ord=order), want, tp.float64)
    _close(tp.linalg.matrix_norm(tp.tensor(x), ord=order, keepdims=True), want[:, None, None], tp.float64)
    _close(tp.linalg.norm(tp.tensor(x[0]), order), np.linalg.norm(x[0], order), tp.float64)
    _close(tp.linalg.norm(tp.tensor(x), order, dim=(0, 2)), np.linalg.norm(x, order, axis=(0, 2)), tp.float64)


def test_norm_without_ord_is_the_vector_two_norm_of_everything():
    x = _random((2, 3, 4), tp.float64, 22)
    _close(tp.linalg.norm(tp.tensor(x)), np.linalg.norm(x.ravel()))
    _close(tp.linalg.norm(tp.tensor(x), dim=1), np.linalg.norm(x, axis=1))


def test_solve_triangular():
    a = _well_conditioned((2, 3, 3), tp.float64, 23)
    b = _random((2, 3, 2), tp.float64, 24)
    for upper in (True, False):
        t = np.triu(a) if upper else np.tril(a)
        _close(tp.linalg.solve_triangular(tp.tensor(a), tp.tensor(b), upper=upper), np.linalg.solve(t, b))
        unit = t - np.eye(3) * np.diagonal(t, 0, -2, -1)[..., None, :] + np.eye(3)
        got = tp.linalg.solve_triangular(tp.tensor(a), tp.tensor(b), upper=upper, unitriangular=True)
        _close(got, np.linalg.solve(unit, b))
        right = tp.linalg.solve_triangular(tp.tensor(a), tp.tensor(np.swapaxes(b, -1, -2)), upper=upper, left=False)
        _close(right, np.swapaxes(b, -1, -2) @ np.linalg.inv(t))


# -- failures and errors ---------------------------------------------------------------------------


def test_a_singular_matrix_raises_a_sentence_naming_it():
    a = np.stack([np.eye(3), np.array([[1.0, 0.0, 3.0], [2.0, 0.0, 6.0], [0.0, 0.0, 1.0]])])  # exactly singular
    message = (  # the step depends on the pivots chosen: cuSOLVER's (on A^T, column-major) and NumPy's differ
        r"^linalg\.solve: the input matrix \(matrix \(1,\) of the batch\) is singular: "
        r"its LU factorisation met a zero pivot at step [23]$"
    )
    with pytest.raises(tp.linalg.LinAlgError, match=message):
        tp.linalg.solve(tp.tensor(a), tp.ones((2, 3, 1), dtype=tp.float64))
    with pytest.raises(
        tp.linalg.LinAlgError, match=r"^linalg\.inv: the input matrix \(matrix \(1,\) of the batch\) is singular"
    ):
        tp.linalg.inv(tp.tensor(a))
    with pytest.raises(RuntimeError, match="is singular"):  # as PyTorch's LinAlgError, a RuntimeError
        tp.linalg.inv(tp.zeros((2, 2)))


def test_a_matrix_that_is_not_positive_definite_raises_a_sentence():
    h = np.array([[4.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    message = "linalg.cholesky: the input matrix is not positive-definite: its leading minor of order 2 is not"
    with pytest.raises(tp.linalg.LinAlgError, match=re.escape(message)):
        tp.linalg.cholesky(tp.tensor(h))


def test_the_ex_forms_return_info_and_never_raise():
    a = np.stack([np.eye(2), np.zeros((2, 2))])
    x, info = tp.linalg.solve_ex(tp.tensor(a), tp.ones((2, 2, 1), dtype=tp.float64))
    assert info.dtype is tp.int32 and info.tolist() == [0, 1] and x[0].tolist() == [[1.0], [1.0]]
    y, info = tp.linalg.inv_ex(tp.tensor(a))
    assert info.tolist() == [0, 1]
    factor, info = tp.linalg.cholesky_ex(tp.tensor(np.stack([np.eye(2), -np.eye(2)])))
    assert info.tolist() == [0, 1] and factor[0].tolist() == [[1.0, 0.0], [0.0, 1.0]]
    with pytest.raises(tp.linalg.LinAlgError, match="singular"):
        tp.linalg.inv_ex(tp.tensor(a), check_errors=True)


def test_bad_arguments_are_sentences():
    with pytest.raises(
        TypeError,
        match=re.escape("linalg.inv() expects float32, float64, complex64 or complex128 tensors, got tensorplay.int64"),
    ):
        tp.linalg.inv(tp.tensor([[1, 2], [3, 4]]))
    with pytest.raises(ValueError, match=re.escape("linalg.det() expects square matrices, got shape (2, 3)")):
        tp.linalg.det(tp.ones((2, 3)))
    with pytest.raises(
        ValueError,
        match=re.escape("linalg.svd() expects a matrix or a stack of matrices (at least 2 dimensions), got shape (3,)"),
    ):
        tp.linalg.svd(tp.ones(3))
    with pytest.raises(
        ValueError,
        match=re.escape(
            "linalg.solve() expects right-hand sides of shape (3,) or (..., 3, K) for A of shape (3, 3), got (2,)"
        ),
    ):
        tp.linalg.solve(tp.eye(3), tp.ones(2))
    with pytest.raises(
        ValueError, match=re.escape("linalg.qr() expects mode='reduced', 'complete' or 'r', got 'full'")
    ):
        tp.linalg.qr(tp.eye(2), mode="full")
    with pytest.raises(
        ValueError, match=re.escape("linalg.matrix_norm() expects ord 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got 3")
    ):
        tp.linalg.matrix_norm(tp.eye(2), ord=3)
    with pytest.raises(
        TypeError,
        match=re.escape("linalg.vector_norm() expects a floating-point or complex tensor, got tensorplay.int64"),
    ):
        tp.linalg.vector_norm(tp.tensor([1, 2]))
    with pytest.raises(
        ValueError,
        match=re.escape("linalg.cross() expects vectors of 3 components along axis -1, got shapes (2, 4) and (4,)"),
    ):
        tp.linalg.cross(tp.ones((2, 4)), tp.ones(4))
    with pytest.raises(TypeError, match=re.escape("linalg.matrix_power() expects an integer power, got float")):
        tp.linalg.matrix_power(tp.eye(2), 2.0)


# -- graphs ----------------------------------------------------------------------------------------


def test_factorisations_are_captured_and_replay_on_new_inputs():
    a_np, b_np = _well_conditioned((2, 3, 3), tp.float64, 30), _random((2, 3, 2), tp.float64, 31)
    h_np = _hermitian((2, 3, 3), tp.float64, 32)
    a, b, h = tp.tensor(a_np), tp.tensor(b_np), tp.tensor(h_np)
    outs = (
        tp.linalg.solve(a, b),
        tp.linalg.inv(a),
        tp.linalg.det(a),
        tp.linalg.cholesky(h),
        tp.linalg.qr(a),
    )  # fmt: skip  (eager first: warm-up)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        outs = (tp.linalg.solve(a, b), tp.linalg.inv(a), tp.linalg.det(a), tp.linalg.cholesky(h),
                tp.linalg.qr(a).R)  # fmt: skip
    for seed in (40, 41):
        a_np, b_np = _well_conditioned((2, 3, 3), tp.float64, seed), _random((2, 3, 2), tp.float64, seed + 10)
        h_np = _hermitian((2, 3, 3), tp.float64, seed + 20)
        a.copy_(tp.tensor(a_np))
        b.copy_(tp.tensor(b_np))
        h.copy_(tp.tensor(h_np))
        g.replay()
        solve, inverse, det, chol, r = outs
        _close(solve, np.linalg.solve(a_np, b_np))
        _close(inverse, np.linalg.inv(a_np))
        _close(det, np.linalg.det(a_np))
        _close(chol, np.linalg.cholesky(h_np))
        _close(r, np.linalg.qr(a_np)[1])


@pytest.mark.parametrize(
    ("call", "routine"),
    [
        (lambda a, h: tp.linalg.eigh(h), "syevd"),
        (lambda a, h: tp.linalg.eigvalsh(h), "syevd"),
        (lambda a, h: tp.linalg.svd(a), "gesvd"),
        (lambda a, h: tp.linalg.svdvals(a), "gesvd"),
        (lambda a, h: tp.linalg.matrix_norm(a, ord=2), "gesvd"),
    ],
)
def test_eigen_and_singular_values_are_refused_inside_a_capture_with_what_to_do(call, routine):
    # cuSOLVER's syevd and gesvd wait for the host inside: on the H200 they fail in a graph and crash in a
    # while body. Refused on both backends, and the runtime stays usable.
    a, h = tp.tensor(_well_conditioned((3, 3), tp.float64, 33)), tp.tensor(_hermitian((3, 3), tp.float64, 34))
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CaptureError, match=rf"cannot be captured in a graph: cuSOLVER's {routine}.*before"):
        with tp.cuda.graph(g):
            call(a, h)
    call(a, h)  # eagerly, as before
    with tp.cuda.graph(g):
        x = tp.linalg.solve(a, h)
    g.replay()
    _close(x, np.linalg.solve(a.numpy(), h.numpy()))


def test_a_failed_factorisation_inside_a_capture_gives_nan_not_an_error():
    a = tp.tensor(np.stack([np.eye(2) * 2.0, np.eye(2)]))
    h = tp.tensor(np.stack([np.eye(2), np.eye(2)]))
    tp.linalg.inv(a), tp.linalg.cholesky(h)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        inverse, factor = tp.linalg.inv(a), tp.linalg.cholesky(h)
        _, info = tp.linalg.inv_ex(a)
    a.copy_(tp.tensor(np.stack([np.eye(2) * 2.0, np.zeros((2, 2))])))
    h.copy_(tp.tensor(np.stack([-np.eye(2), np.eye(2)])))
    g.replay()  # no error: nothing waits inside a graph
    assert inverse[0].tolist() == [[0.5, 0.0], [0.0, 0.5]] and np.isnan(inverse[1].numpy()).all()
    assert np.isnan(factor[0].numpy()).all() and factor[1].tolist() == [[1.0, 0.0], [0.0, 1.0]]
    assert info.tolist() == [0, 1]


def test_solves_inside_a_while_body():
    # x <- A^-1 x until a counter reaches 4: x = A^-4 x0, with A's LU made each pass
    a_np, x_np = _well_conditioned((3, 3), tp.float64, 50), _random((3,), tp.float64, 51)
    a, x = tp.tensor(a_np), tp.tensor(x_np)
    count, go = tp.zeros(1, dtype=tp.int32), tp.ones(1, dtype=tp.bool)
    tp.linalg.solve(a, x)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(go):
            x.copy_(tp.linalg.solve(a, x))
            scale = tp.linalg.vector_norm(x)  # a composed function in the body too
            count.add_(1)
            tp.lt(count, 4, out=go)
    g.replay()
    want = np.linalg.solve(np.linalg.matrix_power(a_np, 4), x_np)
    assert count.item() == 4
    _close(x, want)
    _close(scale, np.linalg.norm(want))


# -- which path -------------------------------------------------------------------------------


@pytest.mark.skipif(not ON_SIM, reason="the simulator's path")
def test_explain_on_the_simulator():
    text = LINALG.explain("solve", (2, 8, 8), "float64")
    assert text.startswith("linalg.solve (2, 8, 8) float64: NumPy on the simulator"), text
    assert "as cuSOLVER's Xgetrf + tensorplay's row interchanges + cublas<t>trsm twice" in text, text
    assert "(2 matrices)" in text, text
    assert cusolver.unavailable() == "cuSOLVER runs on a GPU only, and this is the CPU simulator"


def test_explain_composed_functions_and_refusals():
    assert LINALG.explain("matrix_norm", (3, 3), ord="fro").endswith(
        "tensorplay ops: elementwise kernels and reductions"
    )
    assert "Xgesvd (no vectors)" in LINALG.explain("matrix_norm", (3, 3), ord=2)
    assert LINALG.explain("eigh", (3, 3), "float64").endswith(
        "refused inside a capture (syevd and gesvd wait for the host)"
    )
    assert LINALG.explain("qr", (3, 3), "float64").endswith("captured in graphs and while bodies")
    assert LINALG.explain("eigh", (3, 3), "int32").endswith(
        "refused: the factorisations take float32, float64, complex64 and complex128, not int32"
    )
    with pytest.raises(ValueError, match=r"^explain\(\) expects a tp.linalg function, got 'eig'"):
        LINALG.explain("eig")


@pytest.mark.gpu
@pytest.mark.parametrize("function", ["solve", "inv", "det", "cholesky", "eigh", "svd", "qr"])
def test_on_the_gpu_cusolver_serves(function):
    reason = cusolver.unavailable()
    assert reason is None, f"cuSOLVER is not usable here: {reason}"
    text = LINALG.explain(function, (4, 4), "float64")
    assert ": cuSOLVER (nvmath-python " in text and "cusolverDnX" in text, text


@pytest.mark.gpu
def test_on_the_gpu_large_factorisations_match_numpy_in_a_graph_and_a_while_body():
    n = 256
    a_np, b_np = _well_conditioned((n, n), tp.float64, 60), _random((n, 3), tp.float64, 61)
    h_np = _hermitian((n, n), tp.float64, 62, definite=False)
    a, b, h = tp.tensor(a_np), tp.tensor(b_np), tp.tensor(h_np)
    count, go = tp.zeros(1, dtype=tp.int32), tp.ones(1, dtype=tp.bool)
    tp.linalg.solve(a, b), tp.linalg.cholesky(h @ h.transpose(-1, -2)), tp.linalg.qr(a)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        x, c, r = tp.linalg.solve(a, b), tp.linalg.cholesky(h @ h.transpose(-1, -2)), tp.linalg.qr(a).R
        with g.while_(go):
            b.copy_(tp.linalg.solve(a, b))
            count.add_(1)
            tp.lt(count, 2, out=go)
    g.replay()
    _close(x, np.linalg.solve(a_np, b_np), tol=1e-9)
    _close(c, np.linalg.cholesky(h_np @ h_np.T), tol=1e-9)
    _close(abs(r), abs(np.linalg.qr(a_np)[1]), tol=1e-9)
    _close(b, np.linalg.solve(a_np @ a_np, b_np), tol=1e-9)


def test_a_tolerance_tensor_a_matrix_applies_to_that_matrix_as_atol_and_rtol():
    a = np.stack([np.diag([1.0, 0.1, 0.01])] * 3)
    for name in ("atol", "rtol"):
        tol = tp.tensor([0.05, 0.5, 0.005], dtype=tp.float64)
        ranks = tp.linalg.matrix_rank(tp.tensor(a), **{name: tol})
        assert ranks.tolist() == [2, 1, 3], name
    pinv = tp.linalg.pinv(tp.tensor(a), atol=tp.tensor([0.05, 0.5, 0.005], dtype=tp.float64)).numpy()
    np.testing.assert_allclose(np.diagonal(pinv, 0, 1, 2), [[1, 10, 0], [1, 0, 0], [1, 10, 100]], rtol=1e-12)


def test_einsum_sums_dimensions_of_an_ellipsis_that_broadcast():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((1, 3)), rng.standard_normal((5, 3))
    got = tp.einsum("...i,...i->i", tp.tensor(a), tp.tensor(b)).numpy()
    np.testing.assert_allclose(got, (a * b).sum(0), rtol=1e-12)
    got = tp.einsum("...ij,...jk->ik", tp.tensor(rng.standard_normal((4, 1, 2, 3))), tp.tensor(np.ones((2, 3, 2))))
    assert got.shape == (2, 2)


def test_solve_from_the_right_names_the_shapes_it_needs():
    a, b = tp.eye(2, dtype=tp.float64), tp.tensor([1.0, 2.0], dtype=tp.float64)
    for fn in (tp.linalg.solve, tp.linalg.solve_ex):
        with pytest.raises(ValueError, match=r"left=False\) solves X @ A = B for matrices B .* pass B\[None, :\]"):
            fn(a, b, left=False)
    assert tp.linalg.solve(a, b[None, :], left=False).tolist() == [[1.0, 2.0]]
