"""Linear algebra of the main namespace (the standard's ``matmul``,
``matrix_transpose``, ``tensordot``, ``vecdot``; PyTorch's ``outer``, ``trace``,
``diag``, ``diagonal``, ``einsum``, ``bmm``) against NumPy in float64;
gradients against finite differences; capture and replay."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import assert_close
from helpers.gradcheck import check_gradients

import tensorplay as tp

RNG = np.random.default_rng(17)


def r(*shape):
    return RNG.uniform(-2, 2, shape)


def t(a):
    return tp.tensor(np.asarray(a, dtype=np.float64))


def test_matmul_is_differentiable_as_a_function():
    check_gradients(lambda a, b: tp.matmul(a, b), r(2, 3), r(3, 2))


@pytest.mark.parametrize("shape", [(2, 3), (4, 2, 3), (2, 1, 3, 2)], ids=str)
def test_matrix_transpose(shape):
    a = r(*shape)
    assert_close(tp.matrix_transpose(t(a)), np.swapaxes(a, -1, -2))


def test_matrix_transpose_refuses_vectors():
    with pytest.raises(ValueError, match=r"matrix_transpose\(\) expects at least 2 dimensions, got shape \(3,\)"):
        tp.matrix_transpose(t([1.0, 2.0, 3.0]))


@pytest.mark.parametrize(
    "a_shape, b_shape, axes",
    [((3, 4, 5), (4, 5, 2), 2), ((3, 4), (4, 2), 1), ((2, 3), (4,), 0), ((3, 4, 5), (5, 3, 2), ([0, 2], [1, 0])),
     ((2, 3, 4), (4, 3), ((-1, 1), (0, -1))), ((3,), (3,), 1)],
    ids=str,
)  # fmt: skip
def test_tensordot(a_shape, b_shape, axes):
    a, b = r(*a_shape), r(*b_shape)
    want = np.tensordot(a, b, axes)
    assert_close(tp.tensordot(t(a), t(b), axes=axes), want)
    assert_close(tp.tensordot(t(a), t(b), dims=axes), want)  # PyTorch's name


def test_tensordot_refuses_mismatched_axes():
    with pytest.raises(ValueError, match=r"tensordot\(\) contracts axes of sizes \(4,\) and \(3,\), which differ"):
        tp.tensordot(t(r(2, 4)), t(r(3, 2)), axes=1)


@pytest.mark.parametrize(
    "a_shape, b_shape, axis", [((3,), (3,), -1), ((2, 3), (3,), -1), ((4, 1, 3), (2, 3), -1), ((3, 2), (3, 2), -2)]
)
def test_vecdot(a_shape, b_shape, axis):
    a, b = r(*a_shape), r(*b_shape)
    want = np.sum(np.moveaxis(a, axis, -1)[..., :] * np.moveaxis(b, axis, -1), axis=-1)
    assert_close(tp.vecdot(t(a), t(b), axis=axis), want)
    assert_close(tp.vecdot(t(a), t(b), dim=axis), want)  # torch.linalg.vecdot's spelling


def test_vecdot_refuses_different_lengths():
    with pytest.raises(ValueError, match=r"vecdot\(\) needs vectors of one length along axis -1, got 3 and 2"):
        tp.vecdot(t(r(2, 3)), t(r(2, 2)))


def test_outer_trace_and_bmm():
    a, b = r(3), r(4)
    assert_close(tp.outer(t(a), t(b)), np.outer(a, b))
    m = r(3, 4)
    assert_close(tp.trace(t(m)), np.trace(m))
    stack = r(2, 3, 3)
    assert_close(tp.trace(t(stack), offset=1), np.trace(stack, offset=1, axis1=-2, axis2=-1))
    ints = np.arange(9).reshape(3, 3).astype(np.int8)
    out = tp.trace(tp.tensor(ints))
    assert out.dtype is tp.int64 and out.item() == 12
    x, y = r(2, 3, 4), r(2, 4, 5)
    assert_close(tp.bmm(t(x), t(y)), x @ y)


def test_bmm_refuses_other_shapes():
    with pytest.raises(
        ValueError, match=r"bmm\(\) expects two 3-d tensors of one batch size, got \(3, 4\) and \(2, 4, 5\)"
    ):
        tp.bmm(t(r(3, 4)), t(r(2, 4, 5)))


@pytest.mark.parametrize("offset", [0, 1, -1, 3])
@pytest.mark.parametrize("dims", [(0, 1), (1, 0), (-1, 0), (2, 0)], ids=str)
def test_diagonal_is_a_view(offset, dims):
    a = r(3, 4, 2)
    x = t(a)
    out = tp.diagonal(x, offset, *dims)
    assert_close(out, np.diagonal(a, offset, *dims))
    assert out.numel() == 0 or out.data_ptr() >= x.data_ptr()  # a view: no copy
    assert_close(x.diagonal(offset=offset, dim1=dims[0], dim2=dims[1]), np.diagonal(a, offset, *dims))


@pytest.mark.parametrize("k", [0, 1, -2])
def test_diag_both_ways(k):
    v = r(3)
    assert_close(tp.diag(t(v), k), np.diag(v, k))
    m = r(3, 4)
    assert_close(tp.diag(t(m), k), np.diag(m, k))


@pytest.mark.parametrize(
    "equation, shapes",
    [
        ("ij,jk->ik", [(2, 3), (3, 4)]),
        ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
        ("i,i->", [(4,), (4,)]),
        ("ij->ji", [(2, 3)]),
        ("ii->i", [(3, 3)]),
        ("ii", [(3, 3)]),
        ("ij,jk", [(2, 3), (3, 4)]),
        ("ij,ij->ij", [(2, 3), (2, 3)]),
        ("ij->", [(2, 3)]),
        ("i,j->ij", [(2,), (3,)]),
        ("bi,bj->bij", [(2, 3), (2, 4)]),
        ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
        ("ijk,ikl->jl", [(2, 3, 4), (2, 4, 2)]),
        ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]),
        ("b i j , b j -> b i", [(2, 3, 4), (2, 4)]),
        ("iij->ji", [(2, 2, 3)]),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_einsum(equation, shapes):
    arrays = [r(*s) for s in shapes]
    want = np.einsum(equation.replace(" ", ""), *arrays)
    assert_close(tp.einsum(equation, *[t(a) for a in arrays]), want)
    assert_close(tp.einsum(equation, [t(a) for a in arrays]), want)  # PyTorch takes a list too


def test_einsum_refuses_mismatched_sizes_and_bad_equations():
    with pytest.raises(ValueError, match="einsum\\(\\) index 'j' has sizes 3 and 4"):
        tp.einsum("ij,jk->ik", t(r(2, 3)), t(r(4, 2)))
    with pytest.raises(ValueError, match=r"einsum\(\) equation 'ij,jk->ik' names 2 operands, got 1"):
        tp.einsum("ij,jk->ik", t(r(2, 3)))
    with pytest.raises(ValueError, match=r"einsum\(\) output index 'q' appears in no operand"):
        tp.einsum("ij->iq", t(r(2, 3)))


@pytest.mark.parametrize(
    "fn, shapes",
    [
        (lambda a, b: tp.tensordot(a, b, axes=([1, 0], [0, 1])), [(2, 3), (3, 2)]),
        (lambda a, b: tp.vecdot(a, b), [(2, 3), (3,)]),
        (lambda a, b: tp.outer(a, b), [(2,), (3,)]),
        (lambda a: tp.trace(a), [(3, 3)]),
        (lambda a: tp.diagonal(a, 1), [(3, 3)]),
        (lambda a: tp.diag(a, -1), [(3,)]),
        (lambda a: tp.matrix_transpose(a), [(2, 3)]),
        (lambda a, b: tp.einsum("ij,jk->ik", a, b), [(2, 3), (3, 2)]),
        (lambda a, b: tp.einsum("bi,bj->bij", a, b), [(2, 2), (2, 3)]),
        (lambda a: tp.einsum("ii->i", a), [(3, 3)]),
        (lambda a, b: tp.bmm(a, b), [(2, 2, 3), (2, 3, 1)]),
    ],
    ids=["tensordot", "vecdot", "outer", "trace", "diagonal", "diag", "matrix_transpose", "einsum_mm",
         "einsum_outer", "einsum_diag", "bmm"],
)  # fmt: skip
def test_gradients(fn, shapes):
    check_gradients(fn, *[r(*s) for s in shapes])


def test_linear_algebra_is_captured_and_replayed():
    a, b = t(r(2, 3)), t(r(3, 4))
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        product = tp.einsum("ij,jk->ik", a, b)
        contracted = tp.tensordot(a, b, axes=1)
        dots = tp.vecdot(a, a)
        diagonal = tp.diagonal(b @ b.t())
    a2, b2 = r(2, 3), r(3, 4)
    a.copy_(a2)
    b.copy_(b2)
    g.replay()
    assert_close(product, a2 @ b2)
    assert_close(contracted, a2 @ b2)
    assert_close(dots, (a2 * a2).sum(-1))
    assert_close(diagonal, np.diagonal(b2 @ b2.T))
