"""Matrix products: 1-D, 2-D and batched (broadcast) operands, as in NumPy.

**By cuBLAS** (float16, bfloat16, float32, float64, complex64, complex128 on a GPU: see
``_matmul_choice``): each operand is passed as it lies wherever cuBLAS can
read it, rows or columns at a pitch (a slice, a ``.t()``), a batch at one
stride, 0 for an operand broadcast over the batch (a batch of rows times one
matrix is one product of all the rows); anything else is copied dense first.
A ``LibraryPlan`` per layout of operands keeps the call's arguments.

**By the Numba kernels** (everything else; complex as four real products): an
operand reaches the kernel as it is stored where it can: C-contiguous, or
the transpose of a C-contiguous array (a ``.t()`` or ``.transpose(-1, -2)``,
as ``linear`` and the backward of a product make), which a kernel variant reads
directly; anything else is copied dense first. A product whose tiles fill the
matrices, on 16-byte aligned operands, gets the kernel's exact variant (vector
loads, no bounds checks); the check of alignment is made at each launch, since
a plan serves any operands of its layouts. The kernel's tile shape and how
many runs K is cut in come from ``_matmul_choice`` (``tp.backends.matmul``).
Each layout of operands gets a plan, so a repeated product only packs pointers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

from . import _dtype as dt
from ._complex import from_parts, imag_part, real_part
from ._matmul_choice import MATMUL, MatmulChoice, Problem
from ._shape import broadcast_shapes, broadcast_strides, contiguous_strides
from ._tensor import TENSOR_TYPES, Tensor
from .kernels import matmul as mk
from .runtime.backend.params import scalar_struct
from .runtime.caches import BoundedCache, track_factories
from .runtime.launch import ArrayArg, launch_packed, layout_packer, resolve
from .runtime.libraries import cublas, cublaslt

__all__ = ["matmul"]

track_factories(mk)  # tp.cuda.clear_caches() drops the kernels it built too

_PACK_K_SPLIT = scalar_struct(int).pack


@dataclass(frozen=True, slots=True)
class MatmulPlan:
    """The product of operands of one layout each: what the kernel is given and
    how it is launched. ``a_from`` / ``b_from`` say how an operand is passed:
    "view" (its own storage, C-contiguous), "transposed" (its own storage, read
    by a transposing kernel), "dense" (``.contiguous()`` first)."""

    launcher: Any  # the exact variant where the tiles fill the matrices (for 16-byte aligned operands)
    unaligned: tuple | None  # then (the general kernel, its argument keys), compiled when first needed
    grid: tuple
    block: tuple
    tail: bytes  # the packed k_split
    packers: tuple  # (a, b, the kernel's output), each seen in 3-D
    shape3: tuple  # the output's, (batch, m, n)
    partial_shape: tuple | None  # (batch * runs, m, n) where K is split, else None
    partial_dtype: dt.DType
    sum_launcher: Any
    sum_grid: tuple
    sum_block: tuple
    sum_packers: tuple  # (partial, output)
    final_shape: tuple
    final_strides: tuple
    a_from: str
    b_from: str
    generation: int  # tp.backends.matmul's when made: a newer one makes the plan stale

    def run(self, a: Tensor, b: Tensor) -> Tensor:
        """``a @ b`` for operands laid out as the plan's."""
        a3 = a.contiguous() if self.a_from == "dense" else a
        b3 = b.contiguous() if self.b_from == "dense" else b
        out = Tensor._empty(self.shape3, a.dtype)
        self.launch(a3, b3, out)
        return out._view(self.final_shape, self.final_strides)

    def launch(self, a3, b3, out: Tensor) -> None:
        """The kernels, on operands whose data pointers are the plan's layouts'."""
        pack_a, pack_b, pack_c = self.packers
        launcher = self.launcher
        if self.unaligned is not None and (a3._ptr | b3._ptr) & 15:
            launcher = resolve(*self.unaligned)
        if self.partial_shape is None:
            launch_packed(launcher, self.grid, self.block, pack_a(a3) + pack_b(b3) + pack_c(out) + self.tail)
            return
        partial = Tensor._empty(self.partial_shape, self.partial_dtype)
        launch_packed(launcher, self.grid, self.block, pack_a(a3) + pack_b(b3) + pack_c(partial) + self.tail)
        pack_partial, pack_out = self.sum_packers
        launch_packed(self.sum_launcher, self.sum_grid, self.sum_block, pack_partial(partial) + pack_out(out))


@dataclass(frozen=True, slots=True)
class LibraryPlan:
    """The product of operands of one layout each by cuBLAS. ``a_from`` /
    ``b_from`` say how an operand is passed: "view" (its own storage, as it
    lies) or "dense" (``.contiguous()`` first)."""

    gemm: cublas.Gemm
    shape3: tuple  # the output's, (batch, m, n)
    final_shape: tuple
    final_strides: tuple
    a_from: str
    b_from: str
    generation: int

    def run(self, a: Tensor, b: Tensor) -> Tensor:
        """``a @ b`` for operands laid out as the plan's."""
        a3 = a.contiguous() if self.a_from == "dense" else a
        b3 = b.contiguous() if self.b_from == "dense" else b
        out = Tensor._empty(self.shape3, a.dtype)
        self.gemm(a3._ptr, b3._ptr, out._ptr)
        return out._view(self.final_shape, self.final_strides)


_PLANS = BoundedCache("matmul.plans", 4096)  # the operands' layouts -> MatmulPlan or LibraryPlan


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
    >>> (a @ a.t()).tolist()  # the transpose is read where it lies
    [[5.0, 11.0], [11.0, 25.0]]
    """
    if type(a) in TENSOR_TYPES and type(b) in TENSOR_TYPES:
        plan = _PLANS.get((a.dtype, a.shape, a._strides, b.dtype, b.shape, b._strides))
        if plan is not None and plan.generation == MATMUL.generation:
            return plan.run(a, b)
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
    if MATMUL.library_refusal(Problem(_count(batch), m, n, k, dtype.name)) is None:
        out = _library_matmul(a, b, a2, b2, batch, dtype)
        if out is not None:
            return out
    if dtype is dt.bfloat16:  # the kernels read plain values: products and sums in float32, rounded once
        return matmul(a.to(dt.float32), b.to(dt.float32)).to(dt.bfloat16)
    if dtype.kind == "c":
        return _complex_matmul(a.to(dtype), b.to(dtype), dtype)
    (a3, trans_a, a_from), (b3, trans_b, b_from) = _operand(a2, a, batch, dtype), _operand(b2, b, batch, dtype)
    out = Tensor._empty((a3.shape[0], m, n), dtype)
    shape = tuple(batch) + (m, n)
    if a.ndim == 1:
        shape = shape[:-2] + (n,)
    if b.ndim == 1:
        shape = shape[:-1]
    if k == 0:
        out.zero_()
        return out.view(shape)
    if not out.numel():
        return out.view(shape)
    problem = Problem(a3.shape[0], m, n, k, dtype.name, trans_a, trans_b)
    choice, final = MATMUL.choose(problem, lambda c: partial(_plan(problem, c, a3, b3, out, shape).launch, a3, b3, out))
    plan = _plan(problem, choice, a3, b3, out, shape, a_from, b_from)
    plan.launch(a3, b3, out)
    if final and a_from and b_from:
        _PLANS.put((a.dtype, a.shape, a._strides, b.dtype, b.shape, b._strides), plan)
    return out.view(shape)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``x @ weight.t() + bias`` (``nn.Linear``'s map; not recorded for autograd).
    On the GPU, with ``x``, ``weight`` and ``bias`` C-contiguous float16,
    bfloat16 or float32 of one dtype, one cuBLASLt call adds the bias in the
    product's epilogue (``runtime/libraries/cublaslt``); otherwise a product
    and an add."""
    gemm = _bias_gemm(x, weight, bias)
    if gemm is not None:
        out = Tensor._empty(x.shape[:-1] + (weight.shape[0],), x.dtype)
        gemm(x._ptr, weight._ptr, bias._ptr, out._ptr)
        return out
    out = matmul(x, weight.t())
    return out if bias is None else out + bias


def _bias_gemm(x: Tensor, weight: Tensor, bias: Tensor | None):
    """cuBLASLt's product with a bias for these operands, or None where it does not serve."""
    if bias is None or x.ndim == 0 or not (x.dtype is weight.dtype is bias.dtype):
        return None
    if x.dtype.name not in cublaslt.DTYPES or not (x._contig and weight._contig and bias._contig):
        return None
    k, n = x.shape[-1], weight.shape[0]
    m = x.numel() // k if k else 0
    if not (m and n and k) or MATMUL.library_refusal(Problem(1, m, n, k, x.dtype.name)) is not None:
        return None
    return cublaslt.plan(x.dtype.name, m, n, k, MATMUL.allow_tf32)


def _complex_matmul(a: Tensor, b: Tensor, dtype: dt.DType) -> Tensor:
    """A complex product by the real kernels, where cuBLAS does not serve:
    ``(ar + i ai)(br + i bi) = (ar br - ai bi) + i (ar bi + ai br)``, four real products."""
    ar, ai, br, bi = real_part(a), imag_part(a), real_part(b), imag_part(b)
    return from_parts(matmul(ar, br) - matmul(ai, bi), matmul(ar, bi) + matmul(ai, br), dtype)


def _count(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def _final_shape(a: Tensor, b: Tensor, batch, m: int, n: int) -> tuple:
    shape = tuple(batch) + (m, n)
    if a.ndim == 1:
        shape = shape[:-2] + (n,)
    if b.ndim == 1:
        shape = shape[:-1]
    return shape


def _library_matmul(a: Tensor, b: Tensor, a2: Tensor, b2: Tensor, batch, dtype: dt.DType) -> Tensor | None:
    """``a @ b`` by cuBLAS (``a2``, ``b2``: the operands seen with two or more
    dimensions), or None where cuBLAS's int arguments cannot hold it."""
    m, k = a2.shape[-2:]
    n = b2.shape[-1]
    entries, shape = _count(batch), _final_shape(a, b, batch, m, n)
    if k == 0 or not entries * m * n:
        out = Tensor._empty((entries, m, n), dtype)
        return (out.zero_() if k == 0 else out).view(shape)
    (x, trans_a, lda, stride_a, a_from), (y, trans_b, ldb, stride_b, b_from) = (
        _library_operand(t2, t, batch, dtype) for t2, t in ((a2, a), (b2, b))
    )
    count, rows = entries, m
    if entries > 1 and stride_b == 0 and not trans_a and stride_a == m * lda:
        count, rows = 1, entries * m  # one matrix times a batch of rows: one product of all the rows
    if max(count, rows, lda, ldb) > cublas.MAX_DIM:
        return None
    gemm = cublas.Gemm(dtype.name, count, rows, n, k, trans_a, lda, stride_a, trans_b, ldb, stride_b, MATMUL.allow_tf32)
    out = Tensor._empty((entries, m, n), dtype)
    gemm(x._ptr, y._ptr, out._ptr)
    if a_from and b_from:
        plan = LibraryPlan(gemm, out.shape, shape, contiguous_strides(shape), a_from, b_from, MATMUL.generation)
        _PLANS.put((a.dtype, a.shape, a._strides, b.dtype, b.shape, b._strides), plan)
    return out.view(shape)


def _library_operand(t2: Tensor, t: Tensor, batch, dtype: dt.DType) -> tuple:
    """``t2`` (``t`` seen with two or more dimensions) as cuBLAS takes it:
    (tensor holding it, stored transposed?, leading dimension, batch stride,
    how a plan gets it from ``t``: "view", "dense", or None when only this path
    can: a cast or a broadcast made dense)."""
    rows, cols = t2.shape[-2:]
    how: str | None = "view"
    if t2.dtype is not dtype:
        t2, how = t2.to(dtype), None
    target = tuple(batch) + (rows, cols)
    strides = broadcast_strides(t2.shape, t2._strides, target)
    stride, layout = _batch_stride(batch, strides[:-2]), _matrix_layout(rows, cols, *strides[-2:])
    if stride is None or layout is None:  # cuBLAS cannot read it where it lies
        broadcast = tuple(t2.shape[:-2]) != tuple(batch)
        t2 = t2.expand(target).contiguous() if broadcast else t2.contiguous()
        how = "dense" if how and not broadcast else None
        stride, layout = rows * cols, (False, max(cols, 1))
    return t2, layout[0], layout[1], stride if _count(batch) > 1 else 0, how


def _batch_stride(batch, strides) -> int | None:
    """The one stride s that puts entry e of the flattened ``batch`` at e * s
    (0 for an operand broadcast over it), or None where there is none."""
    dims = [(d, s) for d, s in zip(batch, strides, strict=True) if d != 1]
    for (_, outer), (d, inner) in zip(dims, dims[1:], strict=False):
        if outer != inner * d:
            return None
    stride = dims[-1][1] if dims else 0
    return stride if stride >= 0 else None


def _matrix_layout(rows: int, cols: int, row_stride: int, col_stride: int) -> tuple[bool, int] | None:
    """How cuBLAS reads a (rows, cols) matrix of these strides: (stored
    transposed?, leading dimension), or None where it cannot (copy it first)."""
    if col_stride == 1 or cols == 1:  # rows at a pitch
        ld = row_stride if rows > 1 else max(cols, 1)
        if ld >= max(cols, 1):
            return False, ld
    if row_stride == 1 or rows == 1:  # columns at a pitch: the transpose of a row-major matrix
        ld = col_stride if cols > 1 else max(rows, 1)
        if ld >= max(rows, 1):
            return True, ld
    return None


def _operand(t2: Tensor, t: Tensor, batch, dtype: dt.DType) -> tuple[Tensor, bool, str | None]:
    """``t2`` (``t`` seen with two or more dimensions) as the kernel takes it:
    (3-D tensor, read transposed?, how a plan gets it from ``t``: "view",
    "transposed", "dense", or None when only this path can: a cast or a broadcast)."""
    rows, cols = t2.shape[-2:]
    entries = 1
    for d in batch:
        entries *= d
    if t.dtype is not dtype or tuple(t2.shape[:-2]) != tuple(batch):
        t3 = t2.to(dtype).expand(tuple(batch) + (rows, cols)).contiguous()
        return t3.view(entries, rows, cols), False, None
    if t2._contig:
        return t2.view(entries, rows, cols), False, "view"
    flipped = t2.transpose(-1, -2)
    if flipped._contig:
        return flipped.view(entries, cols, rows), True, "transposed"
    return t2.contiguous().view(entries, rows, cols), False, "dense"


def _plan(
    p: Problem, choice: MatmulChoice, a3: Tensor, b3: Tensor, out: Tensor, shape: tuple, a_from="", b_from=""
) -> MatmulPlan:
    """The plan of ``p`` with ``choice``, for operands laid out as ``a3``, ``b3``."""
    k_split, runs = mk.split_k(p.k, choice.splits, choice.tiles), p.runs(choice.tiles, choice.splits)
    grid, block = mk.matmul_launch_shape(p.batch, p.m, p.n, choice.tiles, runs)
    t = choice.tiles
    fits = p.fills(t)
    kernel = mk.matmul_tiled_variant(t, p.trans_a, p.trans_b, exact=fits)
    partial_shape, partial_dtype = None, out.dtype
    sum_launcher = sum_grid = sum_block = None
    sum_packers: tuple = ()
    target: Tensor | ArrayArg = out
    if runs > 1:
        partial_shape = (p.batch * runs, p.m, p.n)
        partial_dtype = dt.float32 if out.dtype is dt.float16 else out.dtype  # partial sums keep their bits
        target = ArrayArg.contiguous(partial_shape, partial_dtype.name, partial_dtype.itemsize)
        sum_launcher = resolve(mk.matmul_sum_splits, [target._kkey, out._kkey])
        sum_grid, sum_block = mk.matmul_sum_launch_shape(p.batch, p.m * p.n)
        sum_packers = (layout_packer(target), layout_packer(out))
    keys = [a3._kkey, b3._kkey, target._kkey, int]
    return MatmulPlan(
        launcher=resolve(kernel, keys),
        unaligned=(mk.matmul_tiled_variant(t, p.trans_a, p.trans_b), keys) if fits else None,
        grid=tuple(grid),
        block=tuple(block) + (1,),
        tail=_PACK_K_SPLIT(k_split),
        packers=(layout_packer(a3), layout_packer(b3), layout_packer(target)),
        shape3=out.shape,
        partial_shape=partial_shape,
        partial_dtype=partial_dtype,
        sum_launcher=sum_launcher,
        sum_grid=sum_grid,
        sum_block=sum_block,
        sum_packers=sum_packers,
        final_shape=shape,
        final_strides=contiguous_strides(shape),
        a_from=a_from,
        b_from=b_from,
        generation=MATMUL.generation,
    )
