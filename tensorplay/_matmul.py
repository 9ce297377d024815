"""Matrix products: 1-D, 2-D and batched (broadcast) operands, as in NumPy."""

from __future__ import annotations

from . import _dtype as dt
from ._shape import broadcast_shapes
from ._tensor import Tensor
from .kernels import matmul as mk
from .kernels.launch import launch

__all__ = ["matmul"]


def _as3d(t: Tensor, batch_shape, dtype: dt.DType) -> Tensor:
    """``t`` broadcast to ``batch_shape + t.shape[-2:]``, contiguous, as (B, R, C)."""
    t = t.to(dtype)
    t = t.expand(tuple(batch_shape) + t.shape[-2:])
    b = 1
    for d in batch_shape:
        b *= d
    return t.contiguous().view(b, t.shape[-2], t.shape[-1])


def matmul(a: Tensor, b: Tensor) -> Tensor:
    """The matrix product ``a @ b``.

    1-D operands are treated as a row (left) or column (right) vector and that
    dimension is dropped from the result; leading dimensions broadcast.

    Examples
    --------
    >>> import tensorplay as tp
    >>> a = tp.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> (a @ tp.tensor([1.0, 1.0])).tolist()
    [3.0, 7.0]
    """
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"matmul expects two tensors, got {type(a).__name__} and {type(b).__name__}")
    if a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul needs operands of at least one dimension; use * for scalars")
    a2 = a.unsqueeze(0) if a.ndim == 1 else a
    b2 = b.unsqueeze(1) if b.ndim == 1 else b
    m, k = a2.shape[-2:]
    k2, n = b2.shape[-2:]
    if k != k2:
        raise ValueError(f"matmul shapes {a.shape} and {b.shape} do not match: {k} != {k2}")
    batch = broadcast_shapes(a2.shape[:-2], b2.shape[:-2])
    dtype = dt.promote(a.dtype, b.dtype)
    if dtype is dt.bool:
        raise TypeError("matmul is not defined for bool tensors")
    a3, b3 = _as3d(a2, batch, dtype), _as3d(b2, batch, dtype)
    out = Tensor._empty((a3.shape[0], m, n), dtype)
    if k == 0:
        out.zero_()
    elif out.numel():
        grid, block = mk.matmul_launch_shape(a3.shape[0], m, n)
        launch(
            mk.matmul_tiled, tuple(grid) + (1,) * (3 - len(grid)), tuple(block) + (1,) * (3 - len(block)), [a3, b3, out]
        )
    shape = tuple(batch) + (m, n)
    if a.ndim == 1:
        shape = shape[:-2] + (n,)
    if b.ndim == 1:
        shape = shape[:-1]
    return out.view(shape)
