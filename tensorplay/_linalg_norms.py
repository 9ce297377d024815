"""Norms: the standard's ``vector_norm`` and ``matrix_norm`` and PyTorch's
``norm``, composed of tensorplay's elementwise kernels and reductions (and
``svdvals`` for the spectral and nuclear matrix norms). ``vector_norm``
records its own backward, PyTorch's ``norm_backward``: composing it would
give NaN at a zero vector (the derivative of the square root at 0), where the
subgradient 0 is wanted.
"""

from __future__ import annotations

import math

import numpy as np

from . import _dtype as dt
from ._aliases import either
from ._elementwise_functions import isnan, sign, sqrt
from ._functions import where
from ._grad_mode import no_grad
from ._linalg_decompositions import svdvals
from ._linalg_lapack import grad_for, kept
from ._tape import needs_grad, record
from ._tensor import Tensor

__all__ = ["matrix_norm", "norm", "vector_norm"]

_MATRIX_ORDS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def _real_floating(fn: str, x) -> dt.DType:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}() expects a tensor, got {type(x).__name__}")
    if x.dtype.kind not in "fc":
        raise TypeError(
            f"{fn}() expects a floating-point or complex tensor, got {x.dtype}; convert first (x.to(tp.float32))"
        )
    return dt.real_dtype(x.dtype)


def _axes(fn: str, x: Tensor, axis) -> tuple[int, ...]:
    """``axis`` (None: every axis; an int; a sequence) as sorted non-negative axes."""
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    normal = tuple(sorted(x._dim(a) for a in axes))
    if len(set(normal)) != len(normal):
        raise ValueError(f"{fn}() got axis {axis!r}, which repeats an axis")
    return normal


def vector_norm(
    x: Tensor,
    /,
    ord=2,  # noqa: A002 (the standard's name)
    dim=None,
    keepdim: bool = False,
    *,
    axis=None,
    keepdims: bool = False,
    dtype=None,
) -> Tensor:
    """The vector ``ord``-norm of ``x`` over ``axis`` (None: all of ``x`` as one
    vector; an int; a tuple): ``sum(|x|**ord) ** (1 / ord)``, the largest
    (smallest) ``|x|`` for ``ord`` inf (-inf), the count of nonzeros for 0.
    A real tensor, ``x``'s real dtype (PyTorch's ``dtype=`` computes in that
    one); PyTorch's ``dim`` and ``keepdim`` too.

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([[3.0, -4.0], [0.0, 1.0]])
    >>> tp.linalg.vector_norm(x, axis=1).tolist(), tp.linalg.vector_norm(x, ord=float("inf")).item()
    ([5.0, 1.0], 4.0)
    """
    fn = "linalg.vector_norm"
    axis, keep = (
        either(fn, "axis", axis, "dim", dim),
        either(fn, "keepdims", keepdims, "keepdim", keepdim or None, False),
    )
    if dtype is not None:
        x = x.to(dtype)
    real = _real_floating(fn, x)
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise ValueError(f"{fn}() expects a number (or inf, -inf) for ord, got {ord!r}")
    axes = _axes(fn, x, axis)
    with no_grad():
        out = _vector_norm(x, axes, keep, float(ord), real)
    if not needs_grad(x):
        return out
    again = kept(out, lambda: vector_norm(x, ord, axis=axes, keepdims=keep))
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))

    def grads(gs):
        return (grad_for(_vector_norm_backward(gs[0].reshape(shape), x, float(ord), again().reshape(shape), axes), x),)

    return record("LinalgVectorNormBackward", out, (x,), grads)


def _vector_norm(x: Tensor, axes: tuple, keep: bool, p: float, real: dt.DType) -> Tensor:
    if real in (dt.float16, dt.bfloat16) and axes and p not in (math.inf, -math.inf):  # summed in float32
        return _vector_norm(x.to(dt.float32), axes, keep, p, dt.float32).to(real)  # (300² overflows float16)
    magnitude = x.abs()
    if magnitude.dtype is not real:
        magnitude = magnitude.to(real)
    if not axes:  # each element is its own vector
        return (x != 0).to(real) if p == 0 else magnitude
    if p == math.inf:
        return magnitude.amax(axes, keep)
    if p == -math.inf:
        return magnitude.amin(axes, keep)
    if p == 0:
        return (x != 0).to(real).sum(axes, keep)
    if p == 1:
        return magnitude.sum(axes, keep)
    if p == 2:
        return sqrt((magnitude * magnitude).sum(axes, keep))
    return ((magnitude**p).sum(axes, keep)) ** (1.0 / p)


def _vector_norm_backward(g: Tensor, x: Tensor, p: float, norm: Tensor, axes: tuple) -> Tensor:
    """PyTorch's norm_backward (real): ``g`` and ``norm`` kept with the reduced axes as 1."""
    if p == 0:
        return x * 0.0
    if p == 1:
        return sign(x) * g
    if p == 2:
        return g * where(norm == 0, 0.0, x / where(norm == 0, 1.0, norm))
    magnitude = x.abs()
    if math.isinf(p):  # the gradient goes to the extremes, shared by ties (and NaNs)
        hit = ((magnitude == norm) | isnan(magnitude)).to(x.dtype)
        return sign(x) * (g / hit.sum(axes, True)) * hit
    if p < 1:
        scaled = sign(x) * where(x == 0, 0.0, where(x == 0, 1.0, magnitude) ** (p - 1))
        return scaled * g * norm ** (1 - p)
    scaled = sign(x) * magnitude ** (p - 1) if p < 2 else x * magnitude ** (p - 2)
    return scaled * where(norm == 0, 0.0, g / where(norm == 0, 1.0, norm ** (p - 1)))


def matrix_norm(
    x: Tensor,
    /,
    ord="fro",  # noqa: A002
    dim=(-2, -1),
    keepdim: bool = False,
    *,
    keepdims: bool = False,
    dtype=None,
) -> Tensor:
    """The matrix ``ord``-norm of each matrix of ``x`` (its last two axes;
    PyTorch's ``dim`` picks two others): "fro" (Frobenius), "nuc" (the sum of
    the singular values), 2 / -2 (the largest / smallest singular value), 1 / -1
    (the largest / smallest column sum of ``|x|``), inf / -inf (row sums).

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([[1.0, -2.0], [3.0, 4.0]])
    >>> tp.linalg.matrix_norm(x, ord=1).item(), tp.linalg.matrix_norm(x, ord=float("inf")).item()
    (6.0, 7.0)
    """
    fn = "linalg.matrix_norm"
    keep = either(fn, "keepdims", keepdims, "keepdim", keepdim or None, False)
    if dtype is not None:
        x = x.to(dtype)
    _real_floating(fn, x)
    if x.ndim < 2:
        raise ValueError(f"{fn}() expects a matrix or a stack of matrices (at least 2 dimensions), got shape {x.shape}")
    if isinstance(ord, bool) or ord not in _MATRIX_ORDS:
        raise ValueError(f"{fn}() expects ord 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}")
    if isinstance(dim, (int, np.integer)) or len(dim) != 2:
        raise ValueError(f"{fn}() expects dim to be two dimensions (the matrices' rows and columns), got dim={dim!r}")
    d1, d2 = (x._dim(d) for d in dim)
    if d1 == d2:
        raise ValueError(f"{fn}() expects two different dimensions, got dim={tuple(dim)}")
    rest = [d for d in range(x.ndim) if d not in (d1, d2)]
    m = x.permute(rest + [d1, d2]) if (d1, d2) != (x.ndim - 2, x.ndim - 1) else x
    if ord == "fro":
        out = vector_norm(m, axis=(-2, -1))
    elif ord == "nuc":
        out = svdvals(m).sum(-1)
    elif ord in (2, -2):
        values = svdvals(m)
        out = values.amax(-1) if ord == 2 else values.amin(-1)
    else:
        sums = vector_norm(m, 1, axis=-2 if abs(ord) == 1 else -1)
        out = sums.amax(-1) if ord > 0 else sums.amin(-1)
    if not keep:
        return out
    shape = list(x.shape)
    shape[d1] = shape[d2] = 1
    return out.reshape(tuple(shape))


def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:  # noqa: N803, A002 (PyTorch's names)
    """PyTorch's ``linalg.norm``: a vector norm over one ``dim`` (an int), a
    matrix norm over two; with no ``dim``, the 2-norm of all of ``A`` as one
    vector when ``ord`` is None, else the ``ord``-norm of ``A`` as a vector
    (1-D) or a matrix (2-D).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.linalg.norm(tp.tensor([[3.0, 0.0], [0.0, 4.0]])).item()
    5.0
    """
    fn = "linalg.norm"
    if isinstance(dim, (int, np.integer)) or (dim is not None and len(dim) == 1):
        return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)
    if dim is not None:
        return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim, dtype=dtype)
    if ord is None:
        return vector_norm(A, 2, None, keepdim, dtype=dtype)
    if A.ndim == 1:
        return vector_norm(A, ord, None, keepdim, dtype=dtype)
    if A.ndim == 2:
        return matrix_norm(A, ord, (-2, -1), keepdim, dtype=dtype)
    raise ValueError(f"{fn}() with ord={ord!r} and no dim expects a 1-d or 2-d tensor, got shape {A.shape}")
