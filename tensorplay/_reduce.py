"""Reductions: ``sum``, ``mean``, ``max`` and ``min`` over any dimensions.

The reduced dimensions are moved last and seen as (m, k) rows (a view when the
layout allows, else a copy), then reduced by ``kernels/reduce``'s rows kernel,
after a chunked first pass when a few long rows would leave the device idle.
A plan per (op, dtype, layout, dim, keepdim) keeps the launchers, launch
shapes and packers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _dtype as dt
from ._complex import from_parts, imag_part, real_part
from ._ops import fill
from ._shape import contiguous_strides, is_contiguous, view_strides
from ._tensor import Tensor
from .kernels import reduce as rk
from .runtime.backend import get as get_backend
from .runtime.backend.params import scalar_struct
from .runtime.caches import BoundedCache, track_factories
from .runtime.capture import current_fuser
from .runtime.launch import ArrayArg, launch_packed, layout_packer, resolve

__all__ = ["reduce", "reduce_dims"]

track_factories(rk)  # tp.cuda.clear_caches() drops the kernels it built too


def reduce_dims(x: Tensor, dim) -> tuple[int, ...]:
    if dim is None:
        return tuple(range(x.ndim))
    dim = _as_dim(dim)
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    dims = tuple(x._dim(d) for d in dims)
    if x.ndim == 0:  # dim 0 or -1 of a 0-d tensor names the tensor itself
        return ()
    if len(set(dims)) != len(dims):
        raise ValueError(f"dimension repeated in {dim}")
    return dims


def _as_dim(dim):
    """``dim`` as the reductions take it: None, an int (a NumPy one too) or a sequence of them."""
    if isinstance(dim, np.integer) and not isinstance(dim, np.bool_):
        return int(dim)
    if isinstance(dim, (bool, np.bool_)) or not (dim is None or isinstance(dim, int) or hasattr(dim, "__iter__")):
        raise TypeError(f"expected a dimension as an int or a tuple of ints, got {dim!r}")
    return dim


def _reduce_types(op: str, d: dt.DType) -> tuple[dt.DType, np.dtype]:
    """(output dtype, accumulator dtype)."""
    if op == "mean":
        if d.kind != "f":
            raise TypeError(f"mean() needs a floating point tensor, got {d}; convert with .float() first")
        return d, np.dtype(np.float64 if d is dt.float64 else np.float32)
    if op in ("sum", "prod"):
        if d.kind != "f":  # bools and every integer type sum (and multiply) in int64, as in PyTorch
            return dt.int64, np.dtype(np.int64)
        return d, np.dtype(np.float64 if d is dt.float64 else np.float32)
    if d.kind != "f" and d.itemsize < 4:
        return d, np.dtype(np.int32)  # warp shuffles take 32 and 64 bits only (and no bools)
    return d, np.dtype(np.float32) if d.itemsize == 2 else d.np  # float16 and bfloat16 in float32


@dataclass(frozen=True, slots=True)
class ChunkStep:
    """Few long rows: each row's chunks reduced in parallel into (m, chunks) partials."""

    launcher: Any
    grid: tuple
    block: tuple
    packers: tuple  # (rows, partials)
    shape: tuple  # the partials'
    dtype: dt.DType  # the partials'
    init: bytes  # the packed identity


@dataclass(frozen=True, slots=True)
class RowsStep:
    """The rows kernel: one result per row of its source (the rows, or the partials)."""

    launcher: Any
    grid: tuple
    block: tuple
    packers: tuple  # (source, output)
    tail: bytes  # the packed identity and the mean's scale


@dataclass(frozen=True, slots=True)
class ReducePlan:
    """What ``reduce`` needs for one (op, dtype, layout, dim, keepdim): x seen as
    (m, k) rows (a view, or a copy of x permuted by ``order``), the steps that
    reduce them (None when there is nothing to reduce), the result's view."""

    out_dtype: dt.DType
    m: int
    k: int
    order: list
    rows_strides: tuple | None  # None: the rows are a copy
    chunk_step: ChunkStep | None
    rows_step: RowsStep | None
    final_shape: tuple
    final_strides: tuple


_REDUCE_PLANS = BoundedCache("reduce.plans", 4096)  # (op, dtype, shape, strides, dim, keepdim) -> ReducePlan


def reduce(op: str, x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    """``sum``, ``prod``, ``mean``, ``max`` or ``min`` over ``dim`` (all dimensions if None)."""
    dim = _as_dim(dim)
    if x.dtype.kind == "c":
        return _complex_reduce(op, x, dim, keepdim)
    fuser = current_fuser()  # tp.compile's fusion pass, while it traces
    if fuser is not None:
        fused = fuser.reduce(op, x, dim, keepdim)
        if fused is not None:
            return fused
    key = (op, x.dtype, x.shape, x._strides, dim if dim is None or isinstance(dim, int) else tuple(dim), keepdim)
    plan = _REDUCE_PLANS.get(key) or _reduce_plan(key, x)
    m = plan.m
    out = Tensor._empty((m,), plan.out_dtype)
    if plan.rows_step is None:  # nothing to reduce: empty rows or no rows
        if m:
            fill(out, {"mean": np.nan, "prod": 1}.get(op, 0))
    else:
        if plan.rows_strides is not None:  # the rows are a view of x
            rows = x._view((m, plan.k), plan.rows_strides)
        else:
            rows = x.permute(plan.order).reshape(m, plan.k)
        _run_reduction(plan.chunk_step, plan.rows_step, rows, out)
    return out._view(plan.final_shape, plan.final_strides)


def _complex_reduce(op: str, x: Tensor, dim, keepdim: bool) -> Tensor:
    """The sum or mean of a complex tensor: those of its real and imaginary parts,
    put together (the kernels reduce real values); max and min are refused."""
    if op not in ("sum", "mean"):
        raise TypeError(f"{op}() is not defined for complex tensors (they have no order), got {x.dtype}")
    return from_parts(reduce(op, real_part(x), dim, keepdim), reduce(op, imag_part(x), dim, keepdim), x.dtype)


def _reduce_plan(key: tuple, x: Tensor) -> ReducePlan:
    """What ``reduce`` needs for one (op, dtype, layout, dim, keepdim): checked once,
    then kept (for layouts seen up to 4096 times over)."""
    op, _, _, _, dim, keepdim = key
    dims = reduce_dims(x, dim)
    keep = [d for d in range(x.ndim) if d not in dims]
    out_shape = tuple(x.shape[d] for d in keep)
    m = int(np.prod(out_shape, dtype=np.int64))
    k = int(np.prod([x.shape[d] for d in dims], dtype=np.int64))
    out_dtype, acc = _reduce_types(op, x.dtype)
    if k == 0 and op in ("max", "min") and m:
        raise ValueError(f"{op}() of an empty dimension has no identity; shape {x.shape}, dim {dim}")
    order = keep + list(dims)
    rows_strides = view_strides(tuple(x.shape[d] for d in order), tuple(x._strides[d] for d in order), (m, k))
    steps = (None, None)
    if m and k:
        isz = x.dtype.itemsize
        strides = (k, 1) if rows_strides is None else tuple(rows_strides)  # the copy, or a view of x
        contig = is_contiguous((m, k), strides)
        rows = ArrayArg(0, (m, k), [s * isz for s in strides], x.dtype.name, isz, contig)
        steps = _reduction_steps(op, acc, out_dtype, rows)
    final_shape = tuple(1 if d in dims else x.shape[d] for d in range(x.ndim)) if keepdim else out_shape
    plan = ReducePlan(out_dtype, m, k, order, rows_strides, *steps, final_shape, contiguous_strides(final_shape))
    return _REDUCE_PLANS.put(key, plan)


def _contiguous_arg(shape: tuple, dtype: dt.DType) -> ArrayArg:
    """The layout of a new contiguous tensor (no data: for launch keys and packers)."""
    return ArrayArg.contiguous(shape, dtype.name, dtype.itemsize)


def _reduction_steps(op: str, acc: np.dtype, out_dtype: dt.DType, rows: ArrayArg) -> tuple[ChunkStep | None, RowsStep]:
    """The steps that reduce (m, k) rows laid out as ``rows`` into an (m,) output."""
    m, k = rows._karray[5:7]
    init = rk.identity_value(op, acc)
    init_bytes = scalar_struct(type(init)).pack(init)
    chunks, block, rows_grid, rows_block = _rows_launch_shape(m, k)
    chunk_step, source = None, rows
    if chunks > 1:  # few long rows: reduce chunks in parallel first
        partial_dtype = dt.from_numpy_dtype(acc)
        partial = _contiguous_arg((m, chunks), partial_dtype)
        launcher = resolve(rk.chunks_kernel(op, acc.name, *_bits(rows)), [rows._kkey, partial._kkey, type(init)])
        packers = (layout_packer(rows), layout_packer(partial))
        chunk_step = ChunkStep(launcher, (chunks, m, 1), (block, 1, 1), packers, (m, chunks), partial_dtype, init_bytes)
        source = partial
    out = _contiguous_arg((m,), out_dtype)
    kernel = rk.rows_kernel(op, acc.name, *_bits(source, out))
    launcher = resolve(kernel, [source._kkey, out._kkey, type(init), np.float64])
    tail = init_bytes + scalar_struct(np.float64).pack(1.0 / k)  # the mean's scale
    packers = (layout_packer(source), layout_packer(out))
    return chunk_step, RowsStep(launcher, rows_grid, rows_block, packers, tail)


def _bits(*arrays: ArrayArg) -> tuple[str, ...]:
    """How a reduction kernel reads or writes each of ``arrays``: ``"bfloat16"``
    (as bits) or ``""`` (as they are); none of them when no array is bfloat16,
    so that the kernel factories' caches see the calls they always saw."""
    formats = tuple("bfloat16" if a._kkey[0] == "bfloat16" else "" for a in arrays)
    return formats if any(formats) else ()


def _run_reduction(chunk: ChunkStep | None, step: RowsStep, rows: Tensor, out: Tensor) -> None:
    source = rows
    if chunk is not None:  # the partials first
        pack_rows, pack_partial = chunk.packers
        source = Tensor._empty(chunk.shape, chunk.dtype)
        launch_packed(chunk.launcher, chunk.grid, chunk.block, pack_rows(rows) + pack_partial(source) + chunk.init)
    pack_source, pack_out = step.packers
    launch_packed(step.launcher, step.grid, step.block, pack_source(source) + pack_out(out) + step.tail)


_ROWS_LAUNCH_SHAPES = BoundedCache("reduce.launch_shapes", 4096)  # (m, k) -> _rows_launch_shape's


def _rows_launch_shape(m: int, k: int) -> tuple:
    """(chunks, chunk block, rows grid, rows block) for reducing m rows of k items."""
    shape = _ROWS_LAUNCH_SHAPES.get((m, k))
    if shape is not None:
        return shape
    key, dev = (m, k), get_backend()
    threads = 1 << (min(rk.BLOCK, dev.max_block).bit_length() - 1)  # a power of two
    # About 16 items per lane: the fastest of 4, 8 and 16 on the H200
    # (benchmarks/reduction_variants.py).
    block = min(threads, max(32, _pow2_at_least(-(-k // 16))))
    chunks = min(-(-k // (block * 16)), max(1, dev.max_threads_per_launch // block // m))
    if chunks > 1:
        k = chunks
    lanes = min(threads, _pow2_at_least(-(-k // 16)))  # short rows: several per block
    per_block = threads // lanes
    blocks = max(1, min(-(-m // per_block), dev.max_threads_per_launch // threads))
    return _ROWS_LAUNCH_SHAPES.put(key, (chunks, block, (blocks, 1, 1), (lanes, per_block, 1)))


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())
