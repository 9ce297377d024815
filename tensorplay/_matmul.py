"""Matrix products: 1-D, 2-D and batched (broadcast) operands, as in NumPy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import _dtype as dt
from ._shape import broadcast_shapes, contiguous_strides
from ._tensor import TENSOR_TYPES, Tensor
from .kernels import matmul as mk
from .runtime.caches import BoundedCache, track_factories
from .runtime.launch import launch_packed, launch_with, layout_packer, resolve

__all__ = ["matmul"]

track_factories(mk)  # tp.cuda.clear_caches() drops the kernels it built too


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
    if type(a) in TENSOR_TYPES and type(b) in TENSOR_TYPES:
        plan = _PLANS.get((a.dtype, a.shape, a._strides, b.dtype, b.shape, b._strides))
        if plan is not None:
            out = Tensor._empty(plan.shape3, a.dtype)
            a3 = a.contiguous() if plan.dense_a else a  # a transposed operand (a backward's) is copied dense
            b3 = b.contiguous() if plan.dense_b else b
            pack_a, pack_b, pack_out = plan.packers
            launch_packed(plan.launcher, plan.grid, plan.block, pack_a(a3) + pack_b(b3) + pack_out(out))
            return out._view(plan.final_shape, plan.final_strides)
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
    shape = tuple(batch) + (m, n)
    if a.ndim == 1:
        shape = shape[:-2] + (n,)
    if b.ndim == 1:
        shape = shape[:-1]
    if k == 0:
        out.zero_()
    elif out.numel():
        grid, block = mk.matmul_launch_shape(a3.shape[0], m, n)
        grid, block = tuple(grid) + (1,) * (3 - len(grid)), tuple(block) + (1,) * (3 - len(block))
        launcher = resolve(mk.matmul_tiled, [a3._kkey, b3._kkey, out._kkey])
        launch_with(launcher, grid, block, [a3, b3, out])
        dense = (_copied_dense(a3, a, batch), _copied_dense(b3, b, batch))
        if None not in dense:
            packers = tuple(layout_packer(t) for t in (a3, b3, out))
            key = (a.dtype, a.shape, a._strides, b.dtype, b.shape, b._strides)
            plan = MatmulPlan(launcher, grid, block, packers, out.shape, shape, contiguous_strides(shape), *dense)
            _PLANS.put(key, plan)
    return out.view(shape)


@dataclass(frozen=True, slots=True)
class MatmulPlan:
    """The product of operands of one layout each, without ``_as3d``."""

    launcher: Any
    grid: tuple
    block: tuple
    packers: tuple  # (a, b, output), each seen in 3-D
    shape3: tuple  # the output's, (batch, m, n)
    final_shape: tuple
    final_strides: tuple
    dense_a: bool  # True: a is copied dense (a.contiguous()), False: a is used as it is
    dense_b: bool


_PLANS = BoundedCache("matmul.plans", 4096)  # the operands' layouts -> MatmulPlan


def _copied_dense(t3: Tensor, t: Tensor, batch) -> bool | None:
    """How a plan gets the 3-D operand ``t3`` from ``t`` without ``_as3d``: False
    when ``t3`` is a view of ``t`` at its own pointer, True when it is
    ``t.contiguous()`` seen in 3-D (``t`` strided, of the result's dtype, with no
    batch dimension to broadcast), None when neither (no plan)."""
    if t3._storage is t._storage and t3._ptr == t._ptr:
        return False
    if t.ndim >= 2 and not t._contig and t.dtype is t3.dtype and tuple(t.shape[:-2]) == tuple(batch):
        return True
    return None
