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
gradient is C-contiguous float32 or float64 of one dtype (or bfloat16, for an
optimizer that rounds each of its steps as the tensor ops do: SGD with a
number as its learning rate), its gradient of the same dtype and shape,
C-contiguous too, and its learning rate is a number or a tensor of another
dtype than bfloat16 (a bfloat16 array reaches a kernel as its raw bits, which
the kernel would read as an integer; the tensor ops decode it). A bfloat16
step computes in float32 (its numbers in float32), rounding to bfloat16 where
a tensor op would (``r(...)`` in its text) and as it stores.
"""

from __future__ import annotations

import itertools

import numpy as np

from .. import _dtype as dt
from .._tensor import Tensor
from ..kernels.multi_tensor import blocks_for, multi_tensor
from ..runtime.backend import get as get_backend
from ..runtime.backend.params import scalar_struct
from ..runtime.caches import BoundedCache
from ..runtime.capture import capture_state
from ..runtime.launch import ArrayArg, launch, launch_packed, layout_packer, resolve

__all__ = ["fusable", "launch_fused", "lr_prologue"]

WAVES = 4  # the most threads a launch takes, in waves of the GPU's (docs/internals.md has the figures)
MAX_ARRAYS = 60  # per launch: a 1-D array takes 56 bytes of the 4 KiB of kernel parameters (a tensor's end block 8)


def fusable(group: dict, bfloat16: bool = False) -> list[Tensor] | None:
    """The group's parameters with gradients, when one fused launch can update
    them (``bfloat16``: bfloat16 ones too); else None."""
    if group.get("foreach") is False or _bfloat16_tensor(group.get("lr")):
        return None
    params = [p for p in group["params"] if p.grad is not None]
    if not params:
        return None
    dtype = params[0].dtype
    if dtype not in (dt.float32, dt.float64) and not (bfloat16 and dtype is dt.bfloat16):
        return None
    for p in params:
        g = p.grad
        if p.dtype is not dtype or not p._contig or g.dtype is not dtype or not g._contig or g.shape != p.shape:
            return None
    return params


def _bfloat16_tensor(value) -> bool:
    """Whether ``value`` is a bfloat16 tensor: a kernel would read its raw
    bits as an integer (only the parameters' arrays are decoded), so such a
    learning rate takes the tensor ops' path."""
    return isinstance(value, Tensor) and value.dtype is dt.bfloat16


def lr_prologue(lr, dtype: dt.DType) -> tuple[str, object]:
    """(the prologue line reading the learning rate as ``lr_v``, the ``lr``
    argument). A tensor lr keeps its dtype, which the tensor ops promote to; a
    number is taken in the parameters' dtype, as they take it (float32 for
    bfloat16 parameters, whose ops compute in float32)."""
    if isinstance(lr, Tensor):
        return "lr_v = lr[0]", lr.reshape(-1)
    return "lr_v = lr", _number_type(dtype)(lr)


def _number_type(dtype: dt.DType):
    """The type a step's numbers take: the parameters' (float32 for bfloat16 ones)."""
    return np.float32 if dtype is dt.bfloat16 else np.dtype(dtype.name).type


def launch_fused(name: str, rows: list[tuple[Tensor, ...]], roles: tuple, scalars: dict, prologue: str, head, loop):
    """Launch ``multi_tensor(name, ...)`` over ``rows`` (one tuple of tensors per
    parameter, in ``roles`` order), with ``scalars`` (name -> value) shared.
    Python numbers are passed in the parameters' dtype. A plan per layout of
    the rows keeps the kernels, launch shapes and packers, so that a step only
    packs addresses and numbers (an optimizer's step is host-bound)."""
    dtype = rows[0][0].dtype
    cast = _number_type(dtype)
    storage = "bfloat16" if dtype is dt.bfloat16 else ""
    values = [v if isinstance(v, (Tensor, np.generic)) else cast(v) for v in scalars.values()]
    tensors = [t for row in rows for t in row]
    # a plan packs addresses as of C-contiguous tensors, and tp.compile notes what launches write
    if capture_state.fusers or not all(t._contig for t in tensors):
        _launch_unplanned(name, rows, roles, tuple(scalars), values, prologue, head, loop, storage)
        return
    key = (name, roles, tuple(scalars), prologue, head, loop, dtype, tuple(t.numel() for t in tensors))
    key += tuple((v._kkey, v.numel()) if isinstance(v, Tensor) else type(v) for v in values)
    plan = _PLANS.get(key) or _PLANS.put(
        key, _plan(name, rows, roles, tuple(scalars), values, prologue, head, loop, storage)
    )
    value_packers, launches = plan
    packed_values = b"".join(pack(v) for pack, v in zip(value_packers, values, strict=True))
    for launcher, grid, block, first, packers, packed_ends in launches:
        parts = [pack(t) for pack, t in zip(packers, tensors[first : first + len(packers)], strict=True)]
        launch_packed(launcher, grid, block, b"".join(parts) + packed_values + packed_ends)


_PLANS = BoundedCache("optim.fused_launches", 512)  # launch_fused's arguments' layout -> its launches


def _chunks(rows: list, roles: tuple, storage: str = ""):
    """The rows of each launch, a chunk at a time, the launch shape and the
    block numbers where each tensor's blocks end (the last one's: the grid's)."""
    per_launch = max(1, MAX_ARRAYS // len(roles))
    dev = get_backend()
    block = min(256, dev.max_block)
    for first in range(0, len(rows), per_launch):
        chunk = rows[first : first + per_launch]
        # blocks in proportion to each tensor's size, each tensor at most its share of WAVES waves (then the
        # threads loop): the fastest of benchmarks/sgd_variants.py's shapes (docs/internals.md has the figures)
        limit = min(dev.max_grid_threads, WAVES * dev.max_threads_per_launch) // block
        counts = blocks_for([row[0].numel() for row in chunk], block, storage, limit)
        ends = list(itertools.accumulate(counts))
        yield first, chunk, (ends[-1], 1, 1), (block, 1, 1), [np.int64(e) for e in ends[:-1]]


def _launch_unplanned(name, rows, roles, names, values, prologue, head, loop, storage) -> None:
    for _, chunk, grid, block, ends in _chunks(rows, roles, storage):
        kernel = multi_tensor(name, len(chunk), roles, names, prologue, head, loop, storage)
        arrays = [t.reshape(-1) for row in chunk for t in row]
        launch(kernel, grid, block, arrays + values + ends)


def _plan(name, rows, roles, names, values, prologue, head, loop, storage) -> tuple[list, list]:
    """(the values' packers, and per launch: (launcher, grid, block, its first
    tensor's place among the rows' tensors, the packers of its tensors, its
    block numbers packed))."""
    flat = lambda t: ArrayArg.contiguous((t.numel(),), t.dtype.name, t.dtype.itemsize)  # noqa: E731
    value_args = [flat(v) if isinstance(v, Tensor) else type(v) for v in values]
    value_packers = [layout_packer(a) if isinstance(a, ArrayArg) else scalar_struct(a).pack for a in value_args]
    value_keys = [a._kkey if isinstance(a, ArrayArg) else a for a in value_args]
    launches = []
    for first, chunk, grid, block, ends in _chunks(rows, roles, storage):
        kernel = multi_tensor(name, len(chunk), roles, names, prologue, head, loop, storage)
        arrays = [flat(t) for row in chunk for t in row]
        launcher = resolve(kernel, [a._kkey for a in arrays] + value_keys + [np.int64] * len(ends))
        packed_ends = b"".join(scalar_struct(np.int64).pack(e) for e in ends)
        launches.append((launcher, grid, block, first * len(roles), [layout_packer(a) for a in arrays], packed_ends))
    return value_packers, launches
