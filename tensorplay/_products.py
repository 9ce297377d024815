"""The products NumPy and PyTorch users reach for beyond the standard's
``matmul``, ``tensordot`` and ``vecdot``: ``dot``, ``vdot``, ``inner``,
``mm``, ``mv``, ``addmm``, ``kron``, ``cross`` and PyTorch's ``norm``,
``inverse`` and ``det`` (methods too).

Each is made of the namespace's differentiable ops (``matmul`` and its
kernels, ``linalg``'s norms and cross product), so each has a gradient and
runs in a capture as they do; none reads device data on the host. Shapes are
checked first, with a sentence naming what each function takes.
"""

from __future__ import annotations

from . import linalg
from ._linear_algebra_functions import matmul, tensordot
from ._shape import broadcast_shapes
from ._tensor import Tensor, add_methods

__all__ = ["addmm", "cross", "det", "dot", "inner", "inverse", "kron", "mm", "mv", "norm", "vdot"]


def _dims(fn: str, what: str, *pairs) -> None:
    """Refuse operands whose dimension counts are not those ``fn`` takes."""
    for t, want in pairs:
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}() takes tensors, got {type(t).__name__}")
        if t.ndim != want:
            raise ValueError(f"{fn}() takes {what}, got shapes {tuple(p[0].shape for p in pairs)}")


def dot(a: Tensor, b: Tensor) -> Tensor:
    """The inner product of two vectors of one length (PyTorch's ``dot``; for
    matrices use ``matmul``), a 0-d tensor.

    >>> import tensorplay as tp
    >>> tp.dot(tp.tensor([1.0, 2.0, 3.0]), tp.tensor([4.0, 5.0, 6.0])).item()
    32.0
    """
    _dims("dot", "two 1-d tensors (matmul multiplies matrices)", (a, 1), (b, 1))
    if a.shape != b.shape:
        raise ValueError(f"dot() takes two vectors of one length, got {a.shape[0]} and {b.shape[0]}")
    return matmul(a, b)


def vdot(a: Tensor, b: Tensor) -> Tensor:
    """``dot`` with the first vector conjugated (the same as ``dot`` for real ones)."""
    _dims("vdot", "two 1-d tensors", (a, 1), (b, 1))
    if a.shape != b.shape:
        raise ValueError(f"vdot() takes two vectors of one length, got {a.shape[0]} and {b.shape[0]}")
    return matmul(a.conj() if a.dtype.kind == "c" else a, b)


def inner(a: Tensor, b: Tensor) -> Tensor:
    """The sum of products over the last axes of ``a`` and ``b`` (NumPy's and
    PyTorch's ``inner``): shape ``a.shape[:-1] + b.shape[:-1]``; a number
    times a tensor where either is 0-d.

    >>> import tensorplay as tp
    >>> tp.inner(tp.tensor([[1.0, 2.0], [3.0, 4.0]]), tp.tensor([1.0, 1.0])).tolist()
    [3.0, 7.0]
    """
    if a.ndim == 0 or b.ndim == 0:
        return a * b
    if a.shape[-1] != b.shape[-1]:
        raise ValueError(f"inner() sums over the last axes, which differ: shapes {a.shape} and {b.shape}")
    return tensordot(a, b, axes=([a.ndim - 1], [b.ndim - 1]))


def mm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """The product of two matrices (PyTorch's ``mm``: 2-d only, no broadcasting)."""
    _dims("mm", "two 2-d tensors (matmul broadcasts stacks; mv multiplies a vector)", (input, 2), (mat2, 2))
    return matmul(input, mat2)


def mv(input: Tensor, vec: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """A matrix times a vector (PyTorch's ``mv``)."""
    _dims("mv", "a 2-d tensor and a 1-d one", (input, 2), (vec, 1))
    return matmul(input, vec)


def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:  # noqa: A002
    """``beta * input + alpha * (mat1 @ mat2)``, ``input`` broadcast to the
    product's shape (PyTorch's ``addmm``; ``beta=0`` ignores ``input``, NaN too).

    >>> import tensorplay as tp
    >>> tp.addmm(tp.ones(2, 2), tp.eye(2), tp.full((2, 2), 3.0), alpha=2).tolist()
    [[7.0, 7.0], [7.0, 7.0]]
    """
    product = mm(mat1, mat2)
    if not isinstance(input, Tensor) or broadcast_shapes(input.shape, product.shape) != product.shape:
        shape = getattr(input, "shape", type(input).__name__)
        raise ValueError(f"addmm() adds input to the product, so it must broadcast to {product.shape}, got {shape}")
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product
    return product + (input if beta == 1 else input * beta)


def kron(a: Tensor, b: Tensor) -> Tensor:
    """The Kronecker product: block ``(i, j, ...)`` is ``a[i, j, ...] * b``, the
    operands first brought to one number of dimensions by leading ones.

    >>> import tensorplay as tp
    >>> tp.kron(tp.tensor([1, 2]), tp.tensor([1, 10])).tolist()
    [1, 10, 2, 20]
    """
    n = max(a.ndim, b.ndim)
    a = a.reshape((1,) * (n - a.ndim) + a.shape)
    b = b.reshape((1,) * (n - b.ndim) + b.shape)
    spread_a = a.reshape(tuple(s for d in a.shape for s in (d, 1)))  # (a0, 1, a1, 1, ...)
    spread_b = b.reshape(tuple(s for d in b.shape for s in (1, d)))  # (1, b0, 1, b1, ...)
    product = spread_a & spread_b if a.dtype.kind == b.dtype.kind == "b" else spread_a * spread_b  # bools stay bools
    return product.reshape(tuple(x * y for x, y in zip(a.shape, b.shape, strict=True)))


def cross(input: Tensor, other: Tensor, dim: int = -1) -> Tensor:  # noqa: A002 (PyTorch's name)
    """The cross product of 3-vectors along ``dim`` (the last by default, as
    ``torch.linalg.cross`` and NumPy), operands broadcast."""
    return linalg.cross(input, other, dim=dim)


def norm(input: Tensor, p="fro", dim=None, keepdim: bool = False, dtype=None) -> Tensor:  # noqa: A002
    """PyTorch's ``norm``: with ``p`` a number, the vector norm over ``dim``
    (every element if None); ``"fro"`` the Frobenius norm (over ``dim``, or every
    element), ``"nuc"`` the nuclear norm of the matrices of two ``dim``.

    >>> import tensorplay as tp
    >>> tp.norm(tp.tensor([[3.0, 4.0]])).item(), tp.norm(tp.tensor([3.0, -4.0]), p=1).item()
    (5.0, 7.0)
    """
    if p == "nuc":
        dims = (-2, -1) if dim is None else dim
        return linalg.matrix_norm(input, "nuc", dim=dims, keepdim=keepdim, dtype=dtype)
    if p == "fro" or p is None:
        p = 2
    if isinstance(p, str):
        raise ValueError(f"norm() takes p as a number, 'fro' or 'nuc', got {p!r}")
    return linalg.vector_norm(input, p, dim=dim, keepdim=keepdim, dtype=dtype)


def inverse(input: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """The inverse of each matrix of a stack (PyTorch's ``inverse``: ``tp.linalg.inv``)."""
    return linalg.inv(input)


def det(input: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """The determinant of each matrix of a stack (PyTorch's ``det``: ``tp.linalg.det``)."""
    return linalg.det(input)


add_methods(
    {
        "addmm": addmm, "cross": cross, "det": det, "dot": dot, "inner": inner, "inverse": inverse, "kron": kron,
        "mm": mm, "mv": mv, "norm": norm, "vdot": vdot,
    }
)  # fmt: skip
