"""The functions beyond the array API standard that NumPy and PyTorch users
reach for first (products, shape helpers, NaN-aware and counting statistics,
elementwise compositions), each against NumPy in float64 or its own dtype,
with their gradients against finite differences where they have one."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp

RNG = np.random.default_rng(25)


def _t(a, dtype=None):
    return tp.tensor(np.asarray(a), dtype=dtype)


def _close(got, want, **kw):
    np.testing.assert_allclose(got.numpy() if isinstance(got, tp.Tensor) else got, want, **kw)


# -- products -------------------------------------------------------------------------------------


def test_products_match_numpy():
    a, b = RNG.standard_normal(5), RNG.standard_normal(5)
    m, n, v = RNG.standard_normal((3, 4)), RNG.standard_normal((4, 2)), RNG.standard_normal(4)
    _close(tp.dot(_t(a), _t(b)), np.dot(a, b), rtol=1e-12)
    z = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)
    w = RNG.standard_normal(3) + 1j * RNG.standard_normal(3)
    _close(tp.vdot(_t(z), _t(w)), np.vdot(z, w), rtol=1e-12)
    _close(tp.inner(_t(m), _t(v)), np.inner(m, v), rtol=1e-12)
    _close(tp.inner(_t(m), _t(m)), np.inner(m, m), rtol=1e-12)
    _close(tp.mm(_t(m), _t(n)), m @ n, rtol=1e-12)
    _close(_t(m).mv(_t(v)), m @ v, rtol=1e-12)
    c = RNG.standard_normal(2)
    _close(tp.addmm(_t(c), _t(m), _t(n), beta=0.5, alpha=2.0), 0.5 * c + 2.0 * (m @ n), rtol=1e-12)
    nan_input = _t(np.full((3, 2), np.nan))
    _close(tp.addmm(nan_input, _t(m), _t(n), beta=0), m @ n, rtol=1e-12)  # beta 0 ignores NaN, as PyTorch's
    k1, k2 = RNG.integers(-3, 4, (2, 3)), RNG.integers(-3, 4, (3, 2))
    assert tp.kron(_t(k1), _t(k2)).tolist() == np.kron(k1, k2).tolist()
    assert tp.kron(_t(k1[0]), _t(k2)).tolist() == np.kron(k1[0], k2).tolist()
    p, q = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))
    _close(tp.cross(_t(p), _t(q)), np.cross(p, q), rtol=1e-12)
    _close(tp.cross(_t(p.T), _t(q.T), dim=0), np.cross(p.T, q.T, axis=0), rtol=1e-12)


def test_norm_is_pytorchs():
    x = RNG.standard_normal((3, 4))
    _close(tp.norm(_t(x)), np.linalg.norm(x), rtol=1e-12)
    _close(_t(x).norm(p=1, dim=1), np.abs(x).sum(1), rtol=1e-12)
    _close(tp.norm(_t(x), p=float("inf"), dim=0, keepdim=True), np.abs(x).max(0, keepdims=True), rtol=1e-12)
    _close(tp.norm(_t(x), p="nuc"), np.linalg.norm(x, "nuc"), rtol=1e-10)
    with pytest.raises(ValueError, match="p as a number, 'fro' or 'nuc'"):
        tp.norm(_t(x), p="max")


def test_products_refuse_other_shapes_with_a_sentence():
    with pytest.raises(ValueError, match="two 1-d tensors"):
        tp.dot(tp.ones(2, 2), tp.ones(2))
    with pytest.raises(ValueError, match="one length"):
        tp.dot(tp.ones(2), tp.ones(3))
    with pytest.raises(ValueError, match="two 2-d tensors"):
        tp.mm(tp.ones(2, 2, 2), tp.ones(2, 2))
    with pytest.raises(ValueError, match="last axes"):
        tp.inner(tp.ones(2, 3), tp.ones(2))
    with pytest.raises(ValueError, match="must broadcast to"):
        tp.addmm(tp.ones(3, 2, 2), tp.ones(2, 2), tp.ones(2, 2))


def test_products_gradients_match_finite_differences():
    m = _t(RNG.standard_normal((3, 4)))
    n = _t(RNG.standard_normal((4, 2)))
    a, b = (t.clone().requires_grad_() for t in (m, n))
    tp.addmm(tp.ones(3, 2, dtype=tp.float64), a, b, alpha=2.0).sum().backward()
    _close(a.grad, 2.0 * np.ones((3, 2)) @ n.numpy().T, rtol=1e-12)
    _close(b.grad, 2.0 * m.numpy().T @ np.ones((3, 2)), rtol=1e-12)
    k = tp.tensor([1.0, 2.0], dtype=tp.float64).requires_grad_()
    tp.kron(k, tp.tensor([3.0, 5.0], dtype=tp.float64)).sum().backward()
    assert k.grad.tolist() == [8.0, 8.0]
    assert _t(np.eye(2) * 2.0).inverse().tolist() == [[0.5, 0.0], [0.0, 0.5]]
    assert _t(np.eye(3) * 2.0).det().item() == pytest.approx(8.0)


# -- shape helpers ---------------------------------------------------------------------------------


def test_shape_helpers_match_numpy():
    x = RNG.integers(0, 9, (2, 3, 4))
    assert tp.transpose(_t(x), 0, 2).tolist() == np.swapaxes(x, 0, 2).tolist()
    assert tp.swapaxes(_t(x), 1, -1).tolist() == np.swapaxes(x, 1, -1).tolist()
    assert _t(x).swapdims(0, 1).tolist() == np.swapaxes(x, 0, 1).tolist()
    assert tp.narrow(_t(x), 2, 1, 2).tolist() == x[:, :, 1:3].tolist()
    assert tp.ravel(_t(x).mT).tolist() == np.ravel(np.swapaxes(x, -1, -2)).tolist()
    v, w, s = np.arange(3), np.arange(3, 6), np.array(7)
    assert tp.vstack([_t(v), _t(w)]).tolist() == np.vstack([v, w]).tolist()
    assert tp.row_stack([_t(x[0, :, :3]), _t(v)]).tolist() == np.vstack([x[0, :, :3], v]).tolist()
    assert tp.hstack([_t(v), _t(w)]).tolist() == np.hstack([v, w]).tolist()
    assert tp.hstack([_t(x[0]), _t(x[1])]).tolist() == np.hstack([x[0], x[1]]).tolist()
    assert tp.dstack([_t(v), _t(w)]).tolist() == np.dstack([v, w]).tolist()
    assert tp.column_stack([_t(v), _t(x[0, :, :2])]).tolist() == np.column_stack([v, x[0, :, :2]]).tolist()
    for fn, want in ((tp.atleast_1d, np.atleast_1d), (tp.atleast_2d, np.atleast_2d), (tp.atleast_3d, np.atleast_3d)):
        for a in (s, v, x[0], x):
            assert fn(_t(a)).shape == want(a).shape
        assert [t.shape for t in fn(_t(s), _t(v))] == [a.shape for a in want(s, v)]
    for sections in (3, [1, 3], [-2], [0, 9]):
        got = tp.tensor_split(_t(x), sections, dim=2)
        want = np.array_split(x, sections, axis=2)
        assert [g.tolist() for g in got] == [w.tolist() for w in want]
    seven = np.arange(7)
    assert [p.tolist() for p in _t(seven).tensor_split(3)] == [a.tolist() for a in np.array_split(seven, 3)]
    assert [p.tolist() for p in tp.hsplit(_t(x), 3)] == [a.tolist() for a in np.hsplit(x, 3)]
    assert [p.tolist() for p in tp.vsplit(_t(x), [1])] == [a.tolist() for a in np.vsplit(x, [1])]
    assert [p.tolist() for p in tp.dsplit(_t(x), 2)] == [a.tolist() for a in np.dsplit(x, 2)]
    assert [p.tolist() for p in tp.hsplit(_t(np.arange(6)), 3)] == [a.tolist() for a in np.hsplit(np.arange(6), 3)]
    assert tp.fliplr(_t(x)).tolist() == np.fliplr(x).tolist()
    assert tp.flipud(_t(x)).tolist() == np.flipud(x).tolist()
    for k in range(-5, 6):
        assert tp.rot90(_t(x), k).tolist() == np.rot90(x, k).tolist()
        assert _t(x).rot90(k, (2, 0)).tolist() == np.rot90(x, k, (2, 0)).tolist()


def test_shape_helpers_refuse_with_a_sentence():
    with pytest.raises(ValueError, match="equal parts"):
        tp.hsplit(tp.ones(2, 3), 2)
    with pytest.raises(ValueError, match="at least 2 dimension"):
        tp.vsplit(tp.ones(4), 2)
    with pytest.raises(ValueError, match="two different dimensions"):
        tp.rot90(tp.ones(2, 2), 1, (1, 1))
    with pytest.raises(TypeError, match="list or tuple of tensors"):
        tp.vstack(tp.ones(2))
    with pytest.raises(ValueError, match="at least 1 section"):
        tp.tensor_split(tp.ones(3), 0)


def test_stacks_and_flips_carry_gradients():
    a = tp.tensor([1.0, 2.0], dtype=tp.float64).requires_grad_()
    (tp.vstack([a, a * 2]) * tp.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=tp.float64)).sum().backward()
    assert a.grad.tolist() == [7.0, 10.0]
    b = tp.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=tp.float64).requires_grad_()
    (tp.rot90(b) * tp.tensor([[1.0, 0.0], [0.0, 0.0]], dtype=tp.float64)).sum().backward()
    assert b.grad.tolist() == [[0.0, 1.0], [0.0, 0.0]]  # rot90's corner (0, 0) is b[0, 1]


# -- statistics -------------------------------------------------------------------------------------


def test_nan_statistics_match_numpy():
    x = RNG.standard_normal((3, 5))
    x[0, 1] = x[2, 4] = np.nan
    x[1] = np.nan
    _close(tp.nansum(_t(x)), np.nansum(x), rtol=1e-12)
    _close(_t(x).nansum(1, keepdim=True), np.nansum(x, 1, keepdims=True), rtol=1e-12)
    _close(tp.nanmean(_t(x), axis=1), np.array([np.nanmean(x[0]), np.nan, np.nanmean(x[2])]), rtol=1e-12)
    _close(tp.nanmean(_t(x), 0), np.nanmean(x, 0), rtol=1e-12)
    assert tp.nansum(_t(np.arange(4))).item() == 6
    with pytest.raises(TypeError, match="floating point"):
        tp.nanmean(_t(np.arange(4)))


def test_cov_corrcoef_trapezoid_match_numpy():
    x = RNG.standard_normal((3, 7))
    _close(tp.cov(_t(x)), np.cov(x), rtol=1e-12)
    _close(tp.cov(_t(x), correction=0), np.cov(x, ddof=0), rtol=1e-12)
    _close(tp.cov(_t(x[0])), np.cov(x[0]), rtol=1e-12)
    assert tp.cov(_t(RNG.integers(0, 9, (2, 5)))).dtype == tp.float64
    z = x[:2] + 1j * x[1:]
    _close(tp.cov(_t(z)), np.cov(z), rtol=1e-12)
    _close(tp.corrcoef(_t(x)), np.corrcoef(x), rtol=1e-12)
    y, s = RNG.standard_normal((2, 6)), np.sort(RNG.random(6))
    _close(tp.trapezoid(_t(y)), np.trapezoid(y), rtol=1e-12)
    _close(tp.trapezoid(_t(y), dx=0.25), np.trapezoid(y, dx=0.25), rtol=1e-12)
    _close(tp.trapezoid(_t(y), _t(s)), np.trapezoid(y, s), rtol=1e-12)
    _close(tp.trapezoid(_t(y.T), _t(s), dim=0), np.trapezoid(y.T, s, axis=0), rtol=1e-12)


# -- counting ------------------------------------------------------------------------------------------


def test_bincount_histc_histogram_isin_match_numpy():
    v = RNG.integers(0, 6, 40)
    w = RNG.random(40)
    assert tp.bincount(_t(v)).tolist() == np.bincount(v).tolist()
    assert _t(v).bincount(minlength=9).tolist() == np.bincount(v, minlength=9).tolist()
    _close(tp.bincount(_t(v), _t(w)), np.bincount(v, w), rtol=1e-12)
    assert tp.bincount(_t(np.zeros(0, np.int64)), minlength=3).tolist() == [0, 0, 0]
    x = RNG.standard_normal(200)
    x[:3] = [np.nan, 3.0, -3.0]
    _close(tp.histc(_t(x), bins=7, min=-2, max=2), np.histogram(x[~np.isnan(x)], 7, (-2, 2))[0], rtol=0)
    finite = x[3:]
    _close(tp.histc(_t(finite), bins=5), np.histogram(finite, 5)[0], rtol=0)
    hist, edges = tp.histogram(_t(finite), 6)
    want_hist, want_edges = np.histogram(finite, 6)
    _close(hist, want_hist, rtol=0)
    _close(edges, want_edges, rtol=1e-12)
    given = np.array([-1.0, -0.2, 0.0, 0.5, 2.0])
    weights = RNG.random(finite.size)
    _close(tp.histogram(_t(finite), _t(given), weight=_t(weights))[0], np.histogram(finite, given, weights=weights)[0])
    _close(
        tp.histogram(_t(finite), _t(given), density=True)[0], np.histogram(finite, given, density=True)[0], rtol=1e-12
    )
    e, t = RNG.integers(0, 10, (3, 4)), RNG.integers(0, 10, 5)
    assert tp.isin(_t(e), _t(t)).tolist() == np.isin(e, t).tolist()
    assert tp.isin(_t(e), _t(t), invert=True).tolist() == np.isin(e, t, invert=True).tolist()
    assert tp.isin(_t(e), 3).tolist() == np.isin(e, 3).tolist()
    assert tp.isin(_t(np.array([1.0, np.nan])), _t(np.array([np.nan, 1.0]))).tolist() == [True, False]
    assert tp.isin(_t(e), _t(np.zeros(0, np.int64))).tolist() == np.isin(e, []).tolist()
    assert tp.isin(_t(np.array([1.5, 2.0])), _t(np.array([2, 3]))).tolist() == [False, True]


def test_counting_refuses_with_a_sentence():
    with pytest.raises(ValueError, match="non-negative"):
        tp.bincount(tp.tensor([1, -1]))
    with pytest.raises(ValueError, match="1-d tensor of integers"):
        tp.bincount(tp.ones(3))
    with pytest.raises(TypeError, match="floating point"):
        tp.histc(tp.tensor([1, 2]))
    g = tp.cuda.CUDAGraph()
    x = tp.tensor([0, 1, 1])
    with pytest.raises(RuntimeError, match="reads the largest value .* index_add_ ones"):
        with tp.cuda.graph(g):
            tp.bincount(x)
    with pytest.raises(RuntimeError, match="pass min and max"):
        with tp.cuda.graph(tp.cuda.CUDAGraph()):
            tp.histc(x.double())
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):  # with its range given, histc reads nothing: captured
        counts = tp.histc(x.double(), bins=2, min=0, max=1)
    g.replay()
    assert counts.tolist() == [1.0, 2.0] and tp.bincount(x).tolist() == [1, 2]  # the runtime stays usable


# -- elementwise -------------------------------------------------------------------------------------


def test_elementwise_extras_match_numpy():
    a, b, w = RNG.standard_normal(6) * 3, RNG.standard_normal(6), RNG.random(6)
    _close(tp.frac(_t(a)), a - np.trunc(a), rtol=1e-15)
    _close(tp.lerp(_t(a), _t(b), 0.3), a + 0.3 * (b - a), rtol=1e-12)
    _close(tp.lerp(_t(a), _t(b), _t(w)), a + w * (b - a), rtol=1e-12)
    assert tp.lerp(_t(a), _t(b), 1.0).tolist() == b.tolist()  # weight 1 is end exactly
    _close(tp.addcmul(_t(a), _t(b), _t(w), value=0.5), a + 0.5 * b * w, rtol=1e-12)
    _close(_t(a).addcdiv(_t(b), _t(w), value=-2), a - 2 * b / w, rtol=1e-12)
    x = np.array([np.nan, np.inf, -np.inf, 1.5])
    for kw in ({}, {"nan": 1.0, "posinf": 2.0, "neginf": -2.0}):
        _close(tp.nan_to_num(_t(x), **kw), np.nan_to_num(x, **kw), rtol=0)
    x32 = x.astype(np.float32)
    _close(tp.nan_to_num(_t(x32)), np.nan_to_num(x32), rtol=0)
    assert tp.nan_to_num(_t(np.arange(3))).tolist() == [0, 1, 2]
    y = _t(a.copy())
    y.lerp_(_t(b), 0.5)
    _close(y, a + 0.5 * (b - a), rtol=1e-12)
    with pytest.raises(RuntimeError, match="does not fit"):
        _t(a.astype(np.float32)).addcmul_(_t(b), _t(w))  # float64 result
    with pytest.raises(TypeError, match="pass floats"):
        tp.addcdiv(_t(a), _t(np.arange(6)), _t(np.arange(1, 7)))


@pytest.mark.parametrize("dtype", [tp.int8, tp.int32, tp.int64, tp.uint8, tp.float32, tp.float64], ids=str)
def test_fmod_has_the_dividends_sign_as_numpys(dtype):
    if dtype.kind == "u":
        a, b = RNG.integers(0, 200, 30), RNG.integers(0, 9, 30)
    elif dtype.kind == "i":
        a, b = RNG.integers(-100, 100, 30), RNG.integers(-9, 9, 30)
    else:
        a, b = RNG.standard_normal(30) * 10, RNG.standard_normal(30)
        b[:2] = [0.0, np.inf]
    a, b = a.astype(dtype.np), b.astype(dtype.np)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = np.fmod(a, b)
    np.testing.assert_array_equal(tp.fmod(_t(a), _t(b)).numpy(), want)
    np.testing.assert_array_equal(_t(a).fmod(3).numpy(), np.fmod(a, np.array(3, dtype.np)))


def test_fmod_gradient_matches_finite_differences():
    a = tp.tensor([5.5, -5.5, 1.25], dtype=tp.float64).requires_grad_()
    b = tp.tensor([2.0, 2.0, -0.5], dtype=tp.float64).requires_grad_()
    tp.fmod(a, b).sum().backward()
    eps = 1e-6
    an, bn = a.detach().numpy(), b.detach().numpy()
    db = (np.fmod(an, bn + eps) - np.fmod(an, bn - eps)) / (2 * eps)
    assert a.grad.tolist() == [1.0, 1.0, 1.0]
    np.testing.assert_allclose(b.grad.numpy(), db, rtol=1e-6)


# -- edges a review found ------------------------------------------------------------------------------


def test_histograms_refuse_ranges_that_are_not_finite_or_reversed():
    for data in ([1.0, float("nan")], [1.0, float("inf")]):
        with pytest.raises(ValueError, match="is not finite"):
            tp.histc(_t(np.array(data)), bins=4)
        with pytest.raises(ValueError, match="is not finite"):
            tp.histogram(_t(np.array(data)), 4)
    with pytest.raises(ValueError, match="low end 2.0 is above its high end 1.0"):
        tp.histogram(_t(np.array([1.5])), 4, range=(2, 1))
    with pytest.raises(ValueError, match="is not finite"):
        tp.histc(_t(np.array([1.5])), 4, min=0, max=float("inf"))


@pytest.mark.parametrize("dtype", [tp.float16, tp.bfloat16], ids=str)
def test_histc_bins_half_precision_data_in_float32(dtype):
    values = RNG.random(2000).astype(np.float32)
    x = tp.tensor(values).to(dtype)
    exact = x.float().numpy().astype(np.float64)  # the values the tensor holds
    want = np.minimum(np.floor(exact * 1000), 999)
    got = tp.histc(x, bins=1000, min=0, max=1).float().numpy()
    np.testing.assert_array_equal(got, np.bincount(want.astype(np.int64), minlength=1000))


def test_complex_and_empty_and_broadcast_statistics():
    z = np.array([1 + 2j, np.nan + 0j, 3 + 0j])
    _close(tp.nanmean(_t(z)), np.nanmean(z), rtol=1e-12)
    zz = RNG.standard_normal((2, 5)) + 1j * RNG.standard_normal((2, 5))
    _close(tp.corrcoef(_t(zz)), np.corrcoef(zz), rtol=1e-12)
    assert tp.trapezoid(tp.zeros(0, dtype=tp.float64)).item() == 0.0
    assert tp.trapezoid(tp.zeros(2, 0)).tolist() == [0.0, 0.0]
    y, x = RNG.standard_normal((2, 3, 4)), np.cumsum(RNG.random((3, 4)), axis=-1)
    _close(tp.trapezoid(_t(y), _t(x)), np.trapezoid(y, x), rtol=1e-12)


def test_argument_forms_numpy_and_pytorch_users_pass():
    e = np.array([1, 2, 3])
    assert tp.isin(_t(e), [2, 3]).tolist() == [False, True, True]
    assert tp.isin([1, 2, 3], _t(np.array([2]))).tolist() == [False, True, False]
    assert tp.bincount(tp.tensor([True, False, True])).tolist() == [1, 2]
    seven = tp.arange(7)
    for sections in (tp.tensor([2, 4]), np.array([2, 4]), [2, 4]):
        assert [p.tolist() for p in tp.tensor_split(seven, sections)] == [[0, 1], [2, 3], [4, 5, 6]]
    for sections in (tp.tensor(3), np.int64(3), 3):
        assert [p.numel() for p in tp.tensor_split(seven, sections)] == [3, 2, 2]
    x = _t(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert x.sum(axis=0).tolist() == [4.0, 6.0] and x.mean(axis=1, keepdims=True).tolist() == [[1.5], [3.5]]
    k = tp.kron(tp.tensor([True, False]), tp.tensor([True, True]))
    assert k.dtype is tp.bool and k.tolist() == [True, True, False, False]
