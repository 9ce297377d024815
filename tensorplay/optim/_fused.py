"""One launch per parameter group: the optimizers' fused (``foreach``) steps.

An optimizer step written with tensor ops launches a few kernels per parameter
(SGD two, Adam about fourteen). Where a group allows it, the optimizers launch
instead one ``kernels.multi_tensor`` kernel over all its parameters (a chunk of
them per launch, so that the kernel's arguments stay small) doing the same
float operations in the same order, each rounded to the parameters' dtype as
the tensor ops round it. On a GPU the compiler may contract a multiply and an
add into one fused multiply-add, so results can differ from the tensor ops'
in the last bit.

A group is fused when ``foreach`` is not False and every parameter that has a
gradient is C-contiguous float32 or float64 of one dtype, its gradient of the
same dtype and shape, C-contiguous too.
"""

from __future__ import annotations

import numpy as np

from .. import _dtype as dt
from .._tensor import Tensor
from ..kernels.multi_tensor import multi_tensor
from ..runtime.backend import get as get_backend
from ..runtime.launch import launch

__all__ = ["fusable", "launch_fused", "lr_prologue"]

MAX_ARRAYS = 60  # per launch: a 1-D array argument takes 56 bytes of the 4 KiB of kernel parameters
ELEMENTS_PER_THREAD = 4


def fusable(group: dict) -> list[Tensor] | None:
    """The group's parameters with gradients, when one fused launch can update them; else None."""
    if group.get("foreach") is False:
        return None
    params = [p for p in group["params"] if p.grad is not None]
    if not params:
        return None
    dtype = params[0].dtype
    if dtype not in (dt.float32, dt.float64):
        return None
    for p in params:
        g = p.grad
        if p.dtype is not dtype or not p._contig or g.dtype is not dtype or not g._contig or g.shape != p.shape:
            return None
    return params


def lr_prologue(lr, dtype: dt.DType) -> tuple[str, object]:
    """(the prologue line reading the learning rate as ``lr_v``, the ``lr``
    argument). A tensor lr keeps its dtype, which the tensor ops promote to; a
    number is taken in the parameters' dtype, as they take it."""
    if isinstance(lr, Tensor):
        return "lr_v = lr[0]", lr.reshape(-1)
    return "lr_v = lr", np.dtype(dtype.name).type(lr)


def launch_fused(name: str, rows: list[tuple[Tensor, ...]], roles: tuple, scalars: dict, prologue: str, head, loop):
    """Launch ``multi_tensor(name, ...)`` over ``rows`` (one tuple of tensors per
    parameter, in ``roles`` order), with ``scalars`` (name -> value) shared.
    Python numbers are passed in the parameters' dtype."""
    dtype = rows[0][0].dtype
    cast = np.dtype(dtype.name).type
    names = tuple(scalars)
    values = [v if isinstance(v, (Tensor, np.generic)) else cast(v) for v in scalars.values()]
    per_launch = max(1, MAX_ARRAYS // len(roles))
    dev = get_backend()
    block = min(256, dev.max_block)
    for first in range(0, len(rows), per_launch):
        chunk = rows[first : first + per_launch]
        kernel = multi_tensor(name, len(chunk), roles, names, prologue, head, loop)
        longest = max(row[0].numel() for row in chunk)
        blocks = -(-longest // (block * ELEMENTS_PER_THREAD))
        blocks = max(1, min(blocks, dev.max_threads_per_launch // block // len(chunk)))
        arrays = [t.reshape(-1) for row in chunk for t in row]
        launch(kernel, (blocks, len(chunk), 1), (block, 1, 1), arrays + values)
