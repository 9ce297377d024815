"""Elementwise kernels: one generated kernel per (op, operand pattern, layout).

An op is a Numba device function ``f``; a pattern says which operands are
arrays (``a``) and which are scalars (``s``). The layouts:

- ``flat``: every array is 1-D with the output's size (C-contiguous, or strided:
  Numba compiles the same loop for either), a grid-stride loop over elements;
  ``kernel(out, size, *operands)``: contiguous arrays, the output's too, come
  as element pointers (``CPointer``: 8 bytes of parameters where an array
  takes 56), and ``size``, the element count, bounds the loop;
- ``flat_exact``: the same parameters, every array C-contiguous and 16-byte
  aligned and the count a multiple of four (the host checks): one group of
  four a thread, no loop;
- ``rowsK``: K-D strided arrays (K >= 2 coalesced dimensions; broadcast
  dimensions have stride 0), walked as rows of the last dimension: a block row
  of threads takes a row, finds its outer indices once, then strides along it
  with no division per element;
- ``ndK``: the same arrays, an index decomposed per element: for last dimensions
  too short to fill a warp;
- ``transpose_<dtype>``: a unary op on one 2-D operand stored column-major into a
  row-major output, through shared-memory tiles.

The kernels are built once per key by ``kernel(op, pattern, layout, cast)``;
the ops are the op table's (``kernels/op_table.py``, re-exported here as ``OPS``).
"""

from __future__ import annotations

import functools
import linecache

import numpy as np
from numba import cuda

from . import bfloat16 as bf16
from ._dependency import GRID_DEPENDENCY, wait_for_prior_grids
from ._target import device_function
from ._vector import load4, store, store4, vector_base
from .op_table import FILL, OPS, TERNARY, Op, identity

__all__ = ["MAXDIM", "OPS", "Op", "kernel"]

MAXDIM = 6  # coalesced dimensions of a strided or broadcast operand


@device_function
def to_float32(x):
    return np.float32(x)


@device_function
def to_int64(x):
    return np.int64(x)


# The conversion of each array operand's loads ("a" operands; "h" operands, bfloat16
# bits, are decoded to float32 instead). "bfloat16": bfloat16 math, run in float32
# on operands rounded to bfloat16 first (PyTorch's), its result stored as bits;
# "bfloat16_in": the same math, its result stored as it is (comparisons).
CASTS = {
    "none": identity, "float32": to_float32, "int64": to_int64,
    "bfloat16": bf16.round_float32, "bfloat16_in": bf16.round_float32,
}  # fmt: skip


# Four elements per pass, all loaded before any store so the loads overlap
# (out may alias an input, which stops the compiler from reordering itself);
# unsigned indices spare Numba's negative-index wraparound.
_FLAT = """
def {name}(out, size, {params}):
    i = u64(cuda.grid(1))
    step = u64(cuda.gridsize(1))
    n = u64(size){vector}
    j1 = i + step
    j2 = j1 + step
    j3 = j2 + step
    while j3 < n:
        v0 = f({loads_i})
        v1 = f({loads_j1})
        v2 = f({loads_j2})
        v3 = f({loads_j3})
        store(out, i, {w}(v0))
        store(out, j1, {w}(v1))
        store(out, j2, {w}(v2))
        store(out, j3, {w}(v3))
        i = j3 + step
        j1 = i + step
        j2 = j1 + step
        j3 = j2 + step
    while i < n:
        store(out, i, {w}(f({loads_i})))
        i += step
"""

# Where every array is C-contiguous and 16-byte aligned (a fresh allocation
# is; a view at an offset may not be), four elements a thread first go through one
# vector load per array and one vector store (kernels/_vector.py; Python twins
# on the simulator); the loop above then takes the last n % 4 elements (or all
# of them, unaligned).
_FLAT_VECTOR = """
    if ({addresses}) & u64(15) == u64(0):
        nv = n // u64(4)
        while i < nv:
{loads}
            store4(out, i, {results})
            i += step
        i = nv * u64(4) + u64(cuda.grid(1))"""

# The common case of _FLAT, chosen on the host: every array 16-byte aligned, the
# count a multiple of four, a thread per group of four (launch.grid_groups). No
# check, loop or tail: in a graph on the H200, x * 2 on 1M float32 took 2.28 us a
# launch written so, against 2.48 for _FLAT (torch 2.23; benchmarks/RESULTS.md).
# It begins by waiting for the kernels before it (kernels/_dependency.py): in a
# graph it may then launch while the one before it drains.
_FLAT_EXACT = """
def {name}(out, size, {params}):
    wait_for_prior_grids()
    i = u64(cuda.grid(1))
    if i < u64(size) // u64(4):
{loads}
        store4(out, i, {results})
"""

# One row per block row (threadIdx.y), shared by gridDim.y blocks when rows are
# few and long: outer indices found once per row, then four elements per pass
# along it, loads before stores as in _FLAT.
_ROWS = """
def {name}(out, {params}):
    inner = u64(out.shape[{last}]){shapes}
    nrows = u64(out.size) // inner
    step = u64(cuda.blockDim.x) * u64(cuda.gridDim.y)
    start = u64(cuda.blockIdx.y) * u64(cuda.blockDim.x) + u64(cuda.threadIdx.x)
    row = u64(cuda.blockIdx.x) * u64(cuda.blockDim.y) + u64(cuda.threadIdx.y)
    rstep = u64(cuda.gridDim.x) * u64(cuda.blockDim.y)
    while row < nrows:
{outer}
        i = start
        j1 = i + step
        j2 = j1 + step
        j3 = j2 + step
        while j3 < inner:
            v0 = f({loads_i})
            v1 = f({loads_j1})
            v2 = f({loads_j2})
            v3 = f({loads_j3})
            out[{at_i}] = {w}(v0)
            out[{at_j1}] = {w}(v1)
            out[{at_j2}] = {w}(v2)
            out[{at_j3}] = {w}(v3)
            i = j3 + step
            j1 = i + step
            j2 = j1 + step
            j3 = j2 + step
        while i < inner:
            out[{at_i}] = {w}(f({loads_i}))
            i += step
        row += rstep
"""

_ND = """
def {name}(out, {params}):
    i = u64(cuda.grid(1))
    step = u64(cuda.gridsize(1))
    n = u64(out.size){shapes}
    while i < n:
{indices}
        out[{at}] = {w}(f({loads}))
        i += step
"""


# A 2-D operand stored column-major written to a row-major output (a transpose):
# 32 x 32 tiles through shared memory, read down the operand's columns and
# written along the output's rows, so both sides are coalesced. A row of 33
# keeps the column reads free of bank conflicts.
_TRANSPOSE = """
def {name}(out, x0):
    tile = cuda.shared.array((32, 33), tile_type)
    nr, nc = u64(out.shape[0]), u64(out.shape[1])
    tx, ty = u64(cuda.threadIdx.x), u64(cuda.threadIdx.y)
    tr = u64(cuda.blockIdx.y)
    while tr * 32 < nr:
        tc = u64(cuda.blockIdx.x)
        while tc * 32 < nc:
            r0, c0 = tr * 32, tc * 32
            for k in range(0, 32, 8):
                r, col = r0 + tx, c0 + ty + k
                if r < nr and col < nc:
                    tile[ty + k, tx] = x0[r, col]
            cuda.syncthreads()
            for k in range(0, 32, 8):
                r, col = r0 + ty + k, c0 + tx
                if r < nr and col < nc:
                    out[r, col] = f(c(tile[tx, ty + k]))
            cuda.syncthreads()
            tc += u64(cuda.gridDim.x)
        tr += u64(cuda.gridDim.y)
"""


def _split(var: str, dims: range, indent: str) -> str:
    """Code setting ``k{d}`` for ``d`` in ``dims`` from the flat index ``var`` over
    those dimensions (the first takes what is left, so needs no size)."""
    dims = list(dims)
    if len(dims) == 1:
        return f"{indent}k{dims[0]} = {var}"
    lines = [f"{indent}r = {var}"]
    for d in reversed(dims[1:]):
        lines += [f"{indent}k{d} = r % s{d}", f"{indent}r //= s{d}"]
    return "\n".join([*lines, f"{indent}k{dims[0]} = r"])


# How the op takes each operand, by its pattern letter: an array's element
# converted (``c``) or decoded from bfloat16 bits (``h``), a scalar as it is.
_TAKE = {"a": "c({})", "h": "h({})", "s": "{}"}


def _operands(params: list[str], pattern: str, element) -> str:
    """The op's arguments: ``element(p)`` names array operand ``p``'s element."""
    taken = (_TAKE[kind].format(p if kind == "s" else element(p)) for p, kind in zip(params, pattern, strict=True))
    return ", ".join(taken)


def _vector_code(params: list[str], pattern: str, w: str, indent: int) -> tuple[str, str, list[str]]:
    """The vector loads of the array operands (``x`` gives ``x_0 .. x_3``), the four
    results to store, and the arrays' names (the output's first)."""
    arrays = [p for p, kind in zip(params, pattern, strict=True) if kind != "s"]
    pad = " " * indent
    loads = "\n".join(f"{pad}{', '.join(f'{p}_{k}' for k in range(4))} = load4({p}, i)" for p in arrays)

    def element(k: int) -> str:
        return f"{w}(f({_operands(params, pattern, lambda p: f'{p}_{k}')}))"

    return loads, ", ".join(element(k) for k in range(4)), ["out", *arrays]


def _flat_vector(params: list[str], pattern: str, w: str) -> str:
    """The flat kernel's vector loop."""
    loads, results, arrays = _vector_code(params, pattern, w, 12)
    addresses = " | ".join(f"vector_base({p})" for p in arrays)
    return _FLAT_VECTOR.format(addresses=addresses, loads=loads, results=results)


def _source(name: str, layout: str, params: list[str], pattern: str, loads, w: str = "") -> str:
    """The kernel's Python source for ``layout``; ``loads(index)`` gives the op's
    arguments, ``w`` names what each result passes through to be stored ("": nothing)."""
    if layout == "flat_exact":
        loads, results, _ = _vector_code(params, pattern, w, 8)
        return _FLAT_EXACT.format(name=name, params=", ".join(params), loads=loads, results=results)
    if layout == "flat":
        indices = {f"loads_{j}": loads(j) for j in ("i", "j1", "j2", "j3")}
        vector = _flat_vector(params, pattern, w)
        return _FLAT.format(name=name, params=", ".join(params), vector=vector, w=w, **indices)
    if layout.startswith("transpose"):
        return _TRANSPOSE.format(name=name)
    ndim = int(layout[-1])
    outer = ", ".join(f"k{d}" for d in range(ndim - 1))
    if layout.startswith("rows"):
        shapes = "".join(f"\n    s{d} = u64(out.shape[{d}])" for d in range(1, ndim - 1))
        at = {j: f"{outer}, {j}" for j in ("i", "j1", "j2", "j3")}
        return _ROWS.format(
            name=name, params=", ".join(params), last=ndim - 1, shapes=shapes, w=w,
            outer=_split("row", range(ndim - 1), " " * 8),
            **{f"loads_{j}": loads(a) for j, a in at.items()}, **{f"at_{j}": a for j, a in at.items()},
        )  # fmt: skip
    at = ", ".join(f"k{d}" for d in range(ndim))
    shapes = "".join(f"\n    s{d} = u64(out.shape[{d}])" for d in range(1, ndim))
    indices = _split("i", range(ndim), " " * 8)
    return _ND.format(name=name, params=", ".join(params), shapes=shapes, indices=indices, at=at, loads=loads(at), w=w)


def _op(name: str):
    if name in OPS:
        return OPS[name].fn
    for table in (TERNARY, FILL):
        if name in table:
            return table[name]
    raise KeyError(f"no elementwise op named {name!r}")


@functools.cache
def kernel(op: str, pattern: str, layout: str, cast: str = "none"):
    """The kernel computing ``out = op(*operands)``.

    Parameters
    ----------
    op : a key of OPS, TERNARY or FILL.
    pattern : one letter per operand, ``a`` for an array, ``h`` for an array of
        bfloat16 bits (decoded to float32), ``s`` for a scalar.
    layout : ``"flat"``, ``"flat_exact"``, or ``"rowsK"`` / ``"ndK"`` for K-D arrays (2 <= K <= MAXDIM),
        or ``"transpose_<dtype>"`` for one 2-D operand of that dtype stored column-major.
    cast : ``"none"``, ``"float32"`` (float16 math is done in float32), ``"int64"``
        (arithmetic on bools counts them), ``"bfloat16"`` (bfloat16 math in
        float32, the output holding bfloat16 bits) or ``"bfloat16_in"`` (the
        same math, a result of another dtype).
    """
    params = [f"x{k}" for k in range(len(pattern))]

    def loads(index: str) -> str:
        return _operands(params, pattern, lambda p: f"{p}[{index}]")

    name = f"{op}_{pattern}_{layout}"
    source = _source(name, layout, params, pattern, loads, "w" if cast == "bfloat16" else "")
    namespace = {"cuda": cuda, "f": _op(op), "c": CASTS[cast], "h": bf16.decode, "w": bf16.encode, "u64": np.uint64}
    namespace.update(load4=load4, store=store, store4=store4, vector_base=vector_base)
    namespace.update(wait_for_prior_grids=wait_for_prior_grids)
    if layout.startswith("transpose"):
        from numba.cuda.np.numpy_support import from_dtype

        namespace["tile_type"] = from_dtype(np.dtype(layout.split("_", 1)[1]))
    filename = f"<tensorplay.kernels.elementwise.{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    fn = namespace[name]
    fn.__qualname__ = f"elementwise.{name}"
    fn.__module__ = __name__
    compiled = cuda.jit(fn)
    compiled.tp_recipe = ("elementwise", "kernel", (op, pattern, layout, cast))  # how to build it again elsewhere
    compiled.tp_counted = layout.startswith("flat")  # its second parameter, the count, follows from the output
    compiled.tp_exact = layout == "flat_exact"  # its arrays must be aligned and the count a multiple of four
    compiled.tp_waits_for_prior_grids = compiled.tp_exact and GRID_DEPENDENCY  # see kernels/_dependency.py
    return compiled
