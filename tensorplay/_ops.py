"""Tensor ops: type promotion and broadcasting, then one kernel launch each.

Nothing here synchronises the host; every kernel goes on the current stream.
"""

from __future__ import annotations

import functools
import math
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import _dtype as dt
from . import _op_types as types
from ._complex import imag_part, real_part
from ._factories import tensor
from ._overlap import may_alias, overlaps, self_overlapping
from ._shape import broadcast_shapes, broadcast_strides, coalesce
from ._tensor import _PACK_FLAT, TENSOR_TYPES, Tensor
from .kernels import elementwise as ew
from .runtime.backend.params import POINTER, scalar_struct
from .runtime.caches import BoundedCache, track_factories
from .runtime.capture import capture_state, current_fuser
from .runtime.launch import (
    ArrayArg,
    grid_1d,
    grid_groups,
    grid_rows,
    grid_tiles,
    launch_packed,
    layout_packer,
    pointer_key,
    resolve,
)

__all__ = ["binary", "elementwise", "unary"]

track_factories(ew)  # tp.cuda.clear_caches() drops the kernels it built too

# The flat kernels take their contiguous arrays as element pointers (8 bytes each, where an array takes 56)
# and the element count: a launch's parameters are what a graph's kernel node copies at each replay, and three
# arrays cost 0.14 us a launch more than addresses on the H200, the output's array alone 0.07 (RESULTS.md).
_PACK_PTR = POINTER.pack
_PACK_2PTR = struct.Struct("<QQ").pack

_SYMBOL = {name: op.symbol for name, op in ew.OPS.items() if op.symbol}


def _nd_arg(t: Tensor, shape, strides) -> ArrayArg:
    isz = t.dtype.itemsize
    return ArrayArg(t._ptr, shape, tuple(s * isz for s in strides), t.dtype.name, isz, False)


def elementwise(op: str, out: Tensor, operands, cast: str = "none") -> Tensor:
    """Launch ``out[...] = op(*operands)``; tensors broadcast to ``out.shape``."""
    n = out.numel()
    if n == 0:
        return out
    if not out._contig and op != "fill" and self_overlapping(out):  # fill writes one value: harmless
        raise RuntimeError(
            f"cannot write into a tensor of shape {out.shape} and strides {out._strides}: more than one of its "
            "elements refers to the same memory location (an expand()ed view); clone() it first and write into "
            "the copy"
        )
    fuser = current_fuser()  # tp.compile's fusion pass, while it traces
    if fuser is not None and fuser.take(op, out, operands, cast):
        return out
    if any(isinstance(o, Tensor) and may_alias(o, out) for o in operands):
        operands = [_unaliased(o, out) if isinstance(o, Tensor) else o for o in operands]
    pattern = "".join(_letter(o) for o in operands)
    shape = out.shape
    if out._contig and all(not isinstance(o, Tensor) or (o.shape == shape and o._contig) for o in operands):
        _flat_launch(op, pattern, cast, out, operands, n)
        return out
    key = (op, pattern, cast, out.dtype, shape, out._strides)
    key += tuple((o.dtype, o.shape, o._strides) if isinstance(o, Tensor) else type(o) for o in operands)
    plan = _ND_PLANS.get(key) or _nd_plan(key, out, operands, n)
    packed = b"".join([pack(o) for pack, o in zip(plan.packers, (out, *operands), strict=True)])
    launch_packed(plan.launcher, plan.grid, plan.block, packed)
    return out


def _letter(o) -> str:
    """An operand's letter in a kernel's pattern: ``a`` an array, ``h`` an array
    of bfloat16 bits (the kernel decodes its loads), ``s`` a scalar."""
    if isinstance(o, Tensor):
        return "h" if o.dtype is dt.bfloat16 else "a"
    return "s"


def _unaliased(x: Tensor, out: Tensor) -> Tensor:
    """``x``, or a copy of it when writing ``out`` would overwrite elements of ``x``
    that other threads still read (``x[:, 1:] += x[:, :-1]``): results as in NumPy."""
    return x.clone() if overlaps(x, out) else x


@dataclass(frozen=True, slots=True)
class NdPlan:
    """A broadcast or strided elementwise launch, for one layout of its operands."""

    launcher: Any
    grid: tuple
    block: tuple
    packers: tuple  # per parameter, the output's first: packs a tensor of its layout (or a scalar)


_ND_PLANS = BoundedCache("ops.nd_plans", 4096)  # (op, pattern, cast, layouts...) -> NdPlan


def _nd_plan(key: tuple, out: Tensor, operands, n: int) -> NdPlan:
    """The launch of a broadcast or strided elementwise op, for one layout of its
    operands: the kernel for its coalesced dimensions, its launch shape, and per
    parameter a packer that only has to add the data pointer (kept for up to
    4096 layouts). Rows of 32 or more items go to the rows kernel, which does
    no division per element."""
    op, pattern, cast, shape = key[0], key[1], key[2], out.shape
    tensors = [out] + [o for o in operands if isinstance(o, Tensor)]
    strides = [out._strides] + [broadcast_strides(t.shape, t._strides, shape) for t in tensors[1:]]
    cshape, cstrides = coalesce(shape, strides)
    if len(cshape) > ew.MAXDIM:
        raise ValueError(
            f"elementwise ops support up to {ew.MAXDIM} non-mergeable dimensions, got shape {shape}; "
            "make the operands contiguous first"
        )
    nd = iter(_nd_arg(t, cshape, s) for t, s in zip(tensors, cstrides, strict=False))
    args = [next(nd)] + [next(nd) if isinstance(o, Tensor) else o for o in operands]
    keys = [a._kkey if isinstance(a, ArrayArg) else type(a) for a in args]
    ndim, inner = len(cshape), cshape[-1]
    if ndim == 1:
        layout, launch_shape = "flat", grid_1d(n)
    elif _is_transpose(pattern, cshape, cstrides):
        layout, launch_shape = f"transpose_{tensors[1].dtype.name}", grid_tiles(*cshape)
    elif inner >= 32:
        layout, launch_shape = f"rows{ndim}", grid_rows(n // inner, inner)
    else:
        layout, launch_shape = f"nd{ndim}", grid_1d(n)
    packers = [layout_packer(a) if isinstance(a, ArrayArg) else scalar_struct(type(a)).pack for a in args]
    if layout == "flat":  # the element count after the output: packed with it, the plan is of one shape
        keys.insert(1, np.uint64)
        packers[0] = functools.partial(_then, packers[0], _PACK_PTR(n))
    launcher = resolve(ew.kernel(op, pattern, layout, cast), keys)
    packers = tuple(packers)
    return _ND_PLANS.put(key, NdPlan(launcher, *launch_shape, packers))


def _then(pack, suffix: bytes, x) -> bytes:
    return pack(x) + suffix


def _is_transpose(pattern: str, shape, strides) -> bool:
    """One operand, 2-D, stored column-major, written row-major: both at least a tile wide."""
    return (
        pattern == "a" and len(shape) == 2 and min(shape) >= 32
        and strides[0] == (shape[1], 1) and strides[1][0] == 1 and strides[1][1] > 1
    )  # fmt: skip


def _flat_output_keys(dtype: dt.DType) -> tuple:
    """The launch keys of a flat kernel's first two parameters: the contiguous
    output's element pointer and the element count (``Tensor._kflat`` packs both)."""
    return pointer_key(dtype.name), np.uint64


class FlatKernels:
    """A flat kernel's two launchers, each resolved at its first use: ``flat``, and
    ``flat_exact`` for 16-byte aligned arrays whose count is a multiple of four
    (the common case: the allocator's blocks are aligned), which does not loop."""

    __slots__ = ("_kernels", "_keys", "_general", "_exact")

    def __init__(self, op: str, pattern: str, cast: str, keys) -> None:
        self._kernels = (op, pattern, cast)
        self._keys = keys
        self._general = self._exact = None

    def launch(self, n: int, addresses: int, params: bytes) -> None:
        """Launch over ``n`` elements; ``addresses``: every array's address or-ed."""
        if n & 3 or addresses & 15:
            if self._general is None:
                self._general = self._resolve("flat")
            launch_packed(self._general, *grid_1d(n), params)
        else:
            if self._exact is None:
                self._exact = self._resolve("flat_exact")
            launch_packed(self._exact, *grid_groups(n), params)

    def _resolve(self, layout: str):
        op, pattern, cast = self._kernels
        return resolve(ew.kernel(op, pattern, layout, cast), self._keys)


@dataclass(frozen=True, slots=True)
class FlatPlan:
    """Contiguous operands of the output's shape: the flat kernel's launcher and,
    per operand, None for a tensor or the packer of a scalar."""

    kernels: FlatKernels
    packers: tuple


_FLAT_PLANS = BoundedCache("ops.flat_plans", 4096)  # (op, pattern, cast, dtypes and scalar types) -> FlatPlan


def _flat_launch(op: str, pattern: str, cast: str, out: Tensor, operands, n: int) -> None:
    """Contiguous operands of the output's shape: one cached launcher and scalar
    packers per (op, types), parameters packed straight into the launch."""
    key = (op, pattern, cast, out.dtype, *[o.dtype if isinstance(o, Tensor) else type(o) for o in operands])
    plan = _FLAT_PLANS.get(key)
    if plan is None:
        operand_keys = [pointer_key(o.dtype.name) if isinstance(o, Tensor) else type(o) for o in operands]
        keys = [*_flat_output_keys(out.dtype), *operand_keys]
        packers = tuple(None if isinstance(o, Tensor) else scalar_struct(type(o)).pack for o in operands)
        plan = _FLAT_PLANS.put(key, FlatPlan(FlatKernels(op, pattern, cast, keys), packers))
    addresses = out._ptr
    for o in operands:
        if isinstance(o, Tensor):
            addresses |= o._ptr
    packed = out._kflat + b"".join(
        [_PACK_PTR(o._ptr) if pack is None else pack(o) for pack, o in zip(plan.packers, operands, strict=True)]
    )
    plan.kernels.launch(n, addresses, packed)


def binary(op: str, a, b, out: Tensor | None = None) -> Tensor:
    """``a <op> b`` with broadcasting and promotion; ``a`` or ``b`` may be a number."""
    if not capture_state.fusers:  # the fast paths (while tp.compile fuses, every op goes through elementwise())
        if out is None:
            if type(a) in TENSOR_TYPES and a._contig:
                if type(b) in TENSOR_TYPES:
                    if b._contig and a.shape == b.shape:
                        return _fast_binary(op, a, b, "aa")
                elif type(b) in _PYTHON_NUMBERS:
                    return _fast_binary(op, a, b, "as")
            elif type(a) in _PYTHON_NUMBERS and type(b) in TENSOR_TYPES and b._contig:
                return _fast_binary(op, a, b, "sa")
        elif out is a and type(a) in TENSOR_TYPES and a._contig:  # in place: x.add_(y), x.mul_(2.0)
            if type(b) in TENSOR_TYPES:
                if b._contig and a.shape == b.shape and _fast_in_place(op, a, b, "aa"):
                    return a
            elif type(b) in _PYTHON_NUMBERS and _fast_in_place(op, a, b, "as"):
                return a
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    if ta and tb:
        compute_in = dt.promote(a.dtype, b.dtype)
        shape = a.shape if a.shape == b.shape else broadcast_shapes(a.shape, b.shape)
    elif ta or tb:
        t, s = (a, b) if ta else (b, a)
        if isinstance(s, np.ndarray) and s.ndim:  # an array keeps its dtype, as NumPy's and PyTorch's do
            s = tensor(s)
            return binary(op, t if ta else s, s if ta else t, out)
        if isinstance(s, np.ndarray):  # 0-d: a number
            s = s.item()
            a, b = (t, s) if ta else (s, t)
        if isinstance(s, (list, tuple)):
            # Python data promotes like a Python number of its kind: int tensor + [0.5] is float32
            probe = {"b": False, "i": 0, "u": 0, "f": 0.0, "c": 0j}.get(np.asarray(s).dtype.kind)
            s = tensor(s, dtype=None if probe is None else dt.promote_scalar(t.dtype, probe))
            return binary(op, t if ta else s, s if ta else t, out)
        compute_in = dt.promote_scalar(t.dtype, s)
        shape = t.shape
    else:
        raise TypeError(f"expected a tensor operand, got {type(a).__name__} and {type(b).__name__}")
    computed_by, out_dtype, cast, scalar_type = types.binary_types(op, compute_in)
    if out is None:
        out = Tensor._empty(shape, out_dtype)
    elif _checked_out(_SYMBOL.get(op, op), shape, out_dtype, out):
        return copy(out, binary(op, a, b))
    operands = [_operand(x, scalar_type, compute_in) for x in (a, b)]
    return elementwise(computed_by, out, operands, cast)


def _checked_out(op: str, shape: tuple, dtype: dt.DType, out: Tensor) -> bool:
    """Refuse an ``out=`` (or in-place target) that results of ``shape`` and ``dtype``
    cannot be written into; True where they go through a copy (to or from bfloat16)."""
    if out.shape != shape and not _writes_into(shape, out.shape):
        raise ValueError(
            f"in-place '{op}' cannot write shape {shape} into shape {out.shape} "
            "(the shape of its out= or in-place target)"
        )
    if not dt.can_store(dtype, out.dtype):
        raise TypeError(f"in-place '{op}' would store {dtype} results in a {out.dtype} tensor")
    return _converts_bfloat16(dtype, out.dtype)


def _writes_into(shape: tuple, target: tuple) -> bool:
    """Whether a result of ``shape`` broadcasts to ``target``, the shape of the tensor it is written into."""
    try:
        return broadcast_shapes(target, shape) == target
    except ValueError:
        return False


def _operand(x, scalar_type: type, compute: dt.DType):
    """A binary op's operand as its kernel takes it: a tensor, a number of
    ``scalar_type``, or for a complex number a one-element tensor of
    ``compute`` (kernels take no complex scalar parameters), filled by a kernel
    (which a capture takes, where an upload is refused)."""
    if isinstance(x, Tensor):
        return x
    if dt.scalar_kind(x) == "c" or compute.kind == "c":
        return fill(Tensor._empty((), compute), x)
    return scalar_type(x)


_PYTHON_NUMBERS = (float, int)  # bool is its own type and takes the general path


@dataclass(frozen=True, slots=True)
class FastPlan:
    """A binary op on contiguous operands of one shape (or a tensor and a Python number)."""

    out_dtype: dt.DType
    kernels: FlatKernels
    pack: Any  # packs the Python number operand


_FAST_PLANS = BoundedCache("ops.fast_plans", 4096)  # (op, pattern, dtype or type, dtype or type) -> FastPlan


def _fast_binary(op: str, a, b, pattern: str) -> Tensor:
    """Contiguous tensors of one shape, or a contiguous tensor and a Python number
    (``pattern`` "aa", "as" or "sa"): one cached plan (output dtype, launcher,
    number packer) per op and operand types; a call allocates, packs, launches."""
    key = (op, pattern, a.dtype if pattern[0] == "a" else type(a), b.dtype if pattern[1] == "a" else type(b))
    plan = _FAST_PLANS.get(key) or _fast_plan(key, a, b)
    out = Tensor._empty((a if pattern[0] == "a" else b).shape, plan.out_dtype)
    if pattern == "aa":
        return _launch_into_new(plan.kernels, out, _PACK_2PTR(a._ptr, b._ptr), a._ptr | b._ptr)
    pack = plan.pack  # a local: calling plan.pack() directly is a slower lookup
    if pattern == "as":
        return _launch_into_new(plan.kernels, out, _PACK_PTR(a._ptr) + pack(b), a._ptr)
    return _launch_into_new(plan.kernels, out, pack(a) + _PACK_PTR(b._ptr), b._ptr)


def _fast_in_place(op: str, a, b, pattern: str) -> bool:
    """``a <op>= b`` through the plan of ``a <op> b`` when its result has ``a``'s
    dtype (True when launched; otherwise the general path says what is wrong)."""
    if pattern == "aa":
        sa, sb = a._storage, b._storage  # may_alias(), inlined: the common case costs no call
        if (sa is sb or sa.block is None or sb.block is None) and overlaps(b, a):
            return False  # the general path copies b first
    key = (op, pattern, a.dtype, b.dtype if pattern == "aa" else type(b))
    plan = _FAST_PLANS.get(key) or _fast_plan(key, a, b)
    if plan.out_dtype is not a.dtype:
        return False
    n = a.numel()
    if n:
        if pattern == "aa":
            plan.kernels.launch(n, a._ptr | b._ptr, a._kflat + _PACK_2PTR(a._ptr, b._ptr))
        else:
            plan.kernels.launch(n, a._ptr, a._kflat + _PACK_PTR(a._ptr) + plan.pack(b))
    return True


def _launch_into_new(kernels: FlatKernels, out: Tensor, operand_params: bytes, addresses: int) -> Tensor:
    """Launch a flat kernel writing the freshly allocated ``out``, its parameters
    packed once here, the operands' already packed (``addresses``: theirs or-ed)."""
    n = out._storage.nbytes // out.dtype.itemsize
    if n:
        out._kf = _PACK_FLAT(out._ptr, n)
        kernels.launch(n, addresses | out._ptr, out._kf + operand_params)
    return out


def _fast_plan(key: tuple, a, b) -> FastPlan:
    op, pattern = key[0], key[1]
    if pattern == "aa":
        compute_in = dt.promote(a.dtype, b.dtype)
    else:
        compute_in = dt.promote_scalar(*((a.dtype, b) if pattern == "as" else (b.dtype, a)))
    computed_by, out_dtype, cast, scalar_type = types.binary_types(op, compute_in)
    keys = [pointer_key(x.dtype.name) if pattern[i] == "a" else scalar_type for i, x in enumerate((a, b))]
    kernel_pattern = "".join(_letter(x) if p == "a" else "s" for x, p in zip((a, b), pattern, strict=True))
    kernels = FlatKernels(computed_by, kernel_pattern, cast, [*_flat_output_keys(out_dtype), *keys])
    return _FAST_PLANS.put(key, FastPlan(out_dtype, kernels, _number_packer(scalar_type)))


def _number_packer(scalar_type: type):
    """Packs a Python number as ``scalar_type``; one out of its range is converted
    as NumPy converts it on the general path (inf for floats, OverflowError for ints)."""
    pack = scalar_struct(scalar_type).pack

    def pack_number(x) -> bytes:
        try:
            return pack(x)
        except (OverflowError, struct.error):
            return pack(scalar_type(x))

    return pack_number


@dataclass(frozen=True, slots=True)
class UnaryPlan:
    """A unary op on a contiguous tensor into a new one."""

    out_dtype: dt.DType
    kernels: FlatKernels


_UNARY_PLANS = BoundedCache("ops.unary_plans", 4096)  # (op, dtype) -> UnaryPlan


def unary(op: str, x: Tensor, out: Tensor | None = None) -> Tensor:
    fast = out is None and x._contig and not capture_state.fusers
    if fast:
        plan = _UNARY_PLANS.get((op, x.dtype))
        if plan is not None:
            return _launch_into_new(plan.kernels, Tensor._empty(x.shape, plan.out_dtype), _PACK_PTR(x._ptr), x._ptr)
    key = (op, x.dtype)
    op, out_dtype, cast = types.unary_types(op, x.dtype)
    if fast:  # checked once: this and later calls launch from the plan
        keys = [*_flat_output_keys(out_dtype), pointer_key(x.dtype.name)]
        plan = _UNARY_PLANS.put(key, UnaryPlan(out_dtype, FlatKernels(op, _letter(x), cast, keys)))
        return _launch_into_new(plan.kernels, Tensor._empty(x.shape, out_dtype), _PACK_PTR(x._ptr), x._ptr)
    if out is None:
        out = Tensor._empty(x.shape, out_dtype)
    elif _checked_out(key[0], x.shape, out_dtype, out):
        return copy(out, unary(key[0], x))
    return elementwise(op, out, [x], cast)


def _converts_bfloat16(result: dt.DType, stored: dt.DType) -> bool:
    """Whether results of dtype ``result`` written into a ``stored`` tensor go to or from bfloat16:
    a kernel encodes bfloat16 stores only of bfloat16 results, so such a write is computed, then copied."""
    return result is not stored and dt.bfloat16 in (result, stored)


def copy(dst: Tensor, src: Tensor) -> Tensor:
    """``dst[...] = src`` with broadcasting and a cast to ``dst.dtype``."""
    if dst.dtype.kind == "c" or src.dtype.kind == "c":
        return _copy_complex(dst, src)
    if dst.dtype is dt.bool and src.dtype is not dt.bool:
        if src.dtype is dt.bfloat16:
            return elementwise("ne", dst, [src, np.float32(0)], "bfloat16_in")
        return elementwise("ne", dst, [src, src.dtype.np.type(0)])
    if dst.dtype is dt.bfloat16:
        cast = "bfloat16"  # (from bfloat16 too: decoded and encoded again, which gives the same bits)
    else:
        cast = "float32" if dt.float16 in (dst.dtype, src.dtype) and dst.dtype is not src.dtype else "none"
    return elementwise("copy", dst, [src], cast)


def fill(dst: Tensor, value) -> Tensor:
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise ValueError(f"fill_ expects a number or a one-element tensor, got shape {value.shape}")
        return copy(dst, value.reshape(()))
    if dst.dtype.kind == "c" or dt.scalar_kind(value) == "c":
        return _fill_complex(dst, value)
    if dst.dtype.kind == "i" and dt.scalar_kind(value) in "if":
        info, number = np.iinfo(dst.dtype.np), value
        if dt.scalar_kind(value) == "f":  # towards zero, as a cast; PyTorch refuses what does not fit
            value = int(value) if math.isfinite(value) else value
        if isinstance(value, float) or not info.min <= value <= info.max:
            raise OverflowError(f"fill value {number} is out of range for {dst.dtype} ({info.min} to {info.max})")
    if dst.dtype is dt.bool:
        value = bool(value)
    elif dst.dtype is dt.bfloat16:
        with np.errstate(over="ignore"):  # beyond float32's range: inf, as on the GPU
            return elementwise("fill", dst, [np.float32(value)], "bfloat16")
    return elementwise("fill", dst, [dst.dtype.np.type(value)])


def _copy_complex(dst: Tensor, src: Tensor) -> Tensor:
    """``copy`` where either side is complex, part by part through real views
    (``_complex``): a real source gives imaginary parts 0; a complex source
    gives a real tensor its real parts (as PyTorch's ``copy_``), a bool tensor
    whether it is nonzero. The real parts go first: ``x.copy_(imag_part(x))``."""
    if dst.dtype.kind != "c":
        if dst.dtype is dt.bool:
            return binary("or", binary("ne", real_part(src), 0), binary("ne", imag_part(src), 0), out=dst)
        return copy(dst, real_part(src))
    copy(real_part(dst), real_part(src) if src.dtype.kind == "c" else src)
    if src.dtype.kind == "c":
        copy(imag_part(dst), imag_part(src))
    else:
        fill(imag_part(dst), 0)
    return dst


def _fill_complex(dst: Tensor, value) -> Tensor:
    if dst.dtype.kind != "c":
        raise TypeError(
            f"cannot fill a tensor of {dst.dtype.name} with the complex value {value!r}; "
            f"make it complex first (.to(tp.complex64)) or fill it with value.real"
        )
    value = complex(value)
    fill(real_part(dst), value.real)
    fill(imag_part(dst), value.imag)
    return dst


def where(cond: Tensor, a, b) -> Tensor:
    if not isinstance(cond, Tensor) or cond.dtype is not dt.bool:
        got = cond.dtype if isinstance(cond, Tensor) else type(cond).__name__
        raise TypeError(f"where() expects a bool tensor as its condition, got {got}")
    tensors = [t for t in (a, b) if isinstance(t, Tensor)]
    common = None
    for t in tensors:
        common = t.dtype if common is None else dt.promote(common, t.dtype)
    for s in (a, b):
        if not isinstance(s, Tensor):
            common = dt.promote_scalar(common, s) if common else dt.scalar_dtype(s)
    shape = broadcast_shapes(cond.shape, *[t.shape for t in tensors])
    cast, scalar_type = types.cast_for(common)
    out = Tensor._empty(shape, common)
    operands = [cond] + [_operand(x, scalar_type, common) for x in (a, b)]
    return elementwise("where", out, operands, cast)


def where_into(out: Tensor, cond: Tensor, a: Tensor) -> Tensor:
    """``out = where(cond, a, out)`` in place (each element read and written by
    one thread): a masked fill, one pass over ``out``."""
    cast, _ = types.cast_for(out.dtype)
    return elementwise("where", out, [cond, a, out], cast)


def clamp(x: Tensor, lo=None, hi=None) -> Tensor:
    if lo is None and hi is None:
        raise ValueError("clamp() needs min, max or both")
    if any(
        getattr(v, "dtype", None) is not None and v.dtype.kind == "c" or isinstance(v, complex) for v in (x, lo, hi)
    ):
        raise TypeError("clamp() and clip() are not defined for complex numbers (they have no order)")
    if hi is None:
        return binary("maximum", x, lo)
    if lo is None:
        return binary("minimum", x, hi)
    # promote and broadcast as the one-bound forms (maximum/minimum) do
    common, shapes = x.dtype, [x.shape]
    for v in (lo, hi):
        if isinstance(v, Tensor):
            common = dt.promote(common, v.dtype)
            shapes.append(v.shape)
        else:
            common = dt.promote_scalar(common, v)
    cast, scalar_type = types.cast_for(common)
    out = Tensor._empty(broadcast_shapes(*shapes), common)
    operands = [x] + [v if isinstance(v, Tensor) else scalar_type(v) for v in (lo, hi)]
    return elementwise("clamp", out, operands, cast)


# -- joining ----------------------------------------------------------------------------


def cat(tensors, dim: int = 0) -> Tensor:
    """Join tensors along an existing dimension (one copy kernel per input)."""
    tensors = list(tensors)
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError("cat() expects a non-empty sequence of tensors")
    first = tensors[0]
    if any(t.ndim == 0 for t in tensors):
        raise ValueError("cat() cannot join zero-dimensional tensors: stack() them, or reshape each to (1,)")
    dim = first._dim(dim)
    common = first.dtype
    for t in tensors[1:]:
        if t.ndim != first.ndim or any(t.shape[i] != first.shape[i] for i in range(t.ndim) if i != dim):
            raise ValueError(f"cat() needs equal shapes except in dimension {dim}, got {first.shape} and {t.shape}")
        common = dt.promote(common, t.dtype)
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in tensors)
    out = Tensor._empty(tuple(shape), common)
    offset = 0
    for t in tensors:
        copy(out.narrow(dim, offset, t.shape[dim]), t)
        offset += t.shape[dim]
    return out


def stack(tensors, dim: int = 0) -> Tensor:
    """Join tensors of equal shape along a new dimension."""
    return cat(stack_views(tensors, dim), dim)


def stack_views(tensors, dim: int) -> list:
    """The tensors of a ``stack``, checked, each with the new dimension added."""
    tensors = list(tensors)
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise TypeError("stack() expects a non-empty sequence of tensors")
    if any(t.shape != tensors[0].shape for t in tensors):
        raise ValueError(f"stack() needs tensors of equal shape, got {[t.shape for t in tensors]}")
    return [t.unsqueeze(dim) for t in tensors]
