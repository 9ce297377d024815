"""Elementwise kernels: one generated kernel per (op, operand pattern, layout).

An op is a Numba device function ``f``; a pattern says which operands are
arrays (``a``) and which are scalars (``s``). The layouts:

- ``flat``: every array is 1-D with the output's size (C-contiguous, or strided:
  Numba compiles the same loop for either), a grid-stride loop over elements;
- ``rowsK``: K-D strided arrays (K >= 2 coalesced dimensions; broadcast
  dimensions have stride 0), walked as rows of the last dimension: a block row
  of threads takes a row, finds its outer indices once, then strides along it
  with no division per element;
- ``ndK``: the same arrays, an index decomposed per element: for last dimensions
  too short to fill a warp;
- ``transpose_<dtype>``: a unary op on one 2-D operand stored column-major into a
  row-major output, through shared-memory tiles.

The kernels are built once per key by ``kernel(op, pattern, layout, cast)``.
"""

from __future__ import annotations

import functools
import linecache
import math

import numpy as np
from numba import cuda
from numba.cuda.core import config

__all__ = ["BINARY", "UNARY", "MAXDIM", "kernel"]

MAXDIM = 6  # coalesced dimensions of a strided or broadcast operand


def _device(fn):
    return cuda.jit(device=True, inline=True)(fn)


@_device
def identity(x):
    return x


@_device
def to_float32(x):
    return np.float32(x)


@_device
def to_int64(x):
    return np.int64(x)


CASTS = {"none": identity, "float32": to_float32, "int64": to_int64}


def _ieee(name: str):
    """``math.<name>`` for the kernels. On the simulator, NumPy's instead: it
    gives inf and NaN where Python's ``math`` raises (``log(0)``, ``sqrt(-1)``,
    ``exp(1000)``, ``sin(inf)``), as the GPU does."""
    if not config.ENABLE_CUDASIM:
        return getattr(math, name)
    fn = getattr(np, name)

    def twin(x):
        with np.errstate(all="ignore"):
            return fn(x)

    return twin


_exp, _log, _sqrt, _tanh, _sin, _cos = (_ieee(n) for n in ("exp", "log", "sqrt", "tanh", "sin", "cos"))


UNARY = {
    "copy": identity,
    "neg": _device(lambda x: -x),
    "abs": _device(lambda x: abs(x)),
    "exp": _device(lambda x: _exp(x)),
    "log": _device(lambda x: _log(x)),
    "sqrt": _device(lambda x: _sqrt(x)),
    "tanh": _device(lambda x: _tanh(x)),
    "sin": _device(lambda x: _sin(x)),
    "cos": _device(lambda x: _cos(x)),
    "sigmoid": _device(lambda x: 1.0 / (1.0 + _exp(-x))),
    "relu": _device(lambda x: x if (x > 0 or x != x) else 0),
    "invert": _device(lambda x: ~x),
    "logical_not": _device(lambda x: not x),
}

BINARY = {
    "add": _device(lambda a, b: a + b),
    "sub": _device(lambda a, b: a - b),
    "mul": _device(lambda a, b: a * b),
    "truediv": _device(lambda a, b: a / b),
    "floordiv": _device(lambda a, b: a // b),
    "mod": _device(lambda a, b: a % b),
    "pow": _device(lambda a, b: a**b),
    "eq": _device(lambda a, b: a == b),
    "ne": _device(lambda a, b: a != b),
    "lt": _device(lambda a, b: a < b),
    "le": _device(lambda a, b: a <= b),
    "gt": _device(lambda a, b: a > b),
    "ge": _device(lambda a, b: a >= b),
    "and": _device(lambda a, b: a & b),
    "or": _device(lambda a, b: a | b),
    "xor": _device(lambda a, b: a ^ b),
    "maximum": _device(lambda a, b: a if (a > b or a != a) else b),
    "minimum": _device(lambda a, b: a if (a < b or a != a) else b),
}

TERNARY = {
    "where": _device(lambda c, a, b: a if c else b),
    # min(max(x, lo), hi): NaN stays NaN, and lo > hi gives hi (as in PyTorch and NumPy)
    "clamp": _device(lambda x, lo, hi: hi if (lo if x < lo else x) > hi else (lo if x < lo else x)),
}

FILL = {"fill": identity}

# Four elements per pass, all loaded before any store so the loads overlap
# (out may alias an input, which stops the compiler from reordering itself);
# unsigned indices spare Numba's negative-index wraparound.
_FLAT = """
def {name}(out, {params}):
    i = u64(cuda.grid(1))
    step = u64(cuda.gridsize(1))
    n = u64(out.size)
    j1 = i + step
    j2 = j1 + step
    j3 = j2 + step
    while j3 < n:
        v0 = f({loads_i})
        v1 = f({loads_j1})
        v2 = f({loads_j2})
        v3 = f({loads_j3})
        out[i] = v0
        out[j1] = v1
        out[j2] = v2
        out[j3] = v3
        i = j3 + step
        j1 = i + step
        j2 = j1 + step
        j3 = j2 + step
    while i < n:
        out[i] = f({loads_i})
        i += step
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
            out[{at_i}] = v0
            out[{at_j1}] = v1
            out[{at_j2}] = v2
            out[{at_j3}] = v3
            i = j3 + step
            j1 = i + step
            j2 = j1 + step
            j3 = j2 + step
        while i < inner:
            out[{at_i}] = f({loads_i})
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
        out[{at}] = f({loads})
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


def _source(name: str, layout: str, params: list[str], loads) -> str:
    """The kernel's Python source for ``layout``; ``loads(index)`` gives the op's arguments."""
    if layout == "flat":
        indices = {f"loads_{j}": loads(j) for j in ("i", "j1", "j2", "j3")}
        return _FLAT.format(name=name, params=", ".join(params), **indices)
    if layout.startswith("transpose"):
        return _TRANSPOSE.format(name=name)
    ndim = int(layout[-1])
    outer = ", ".join(f"k{d}" for d in range(ndim - 1))
    if layout.startswith("rows"):
        shapes = "".join(f"\n    s{d} = u64(out.shape[{d}])" for d in range(1, ndim - 1))
        at = {j: f"{outer}, {j}" for j in ("i", "j1", "j2", "j3")}
        return _ROWS.format(
            name=name, params=", ".join(params), last=ndim - 1, shapes=shapes,
            outer=_split("row", range(ndim - 1), " " * 8),
            **{f"loads_{j}": loads(a) for j, a in at.items()}, **{f"at_{j}": a for j, a in at.items()},
        )  # fmt: skip
    at = ", ".join(f"k{d}" for d in range(ndim))
    shapes = "".join(f"\n    s{d} = u64(out.shape[{d}])" for d in range(1, ndim))
    indices = _split("i", range(ndim), " " * 8)
    return _ND.format(name=name, params=", ".join(params), shapes=shapes, indices=indices, at=at, loads=loads(at))


def _op(name: str):
    for table in (UNARY, BINARY, TERNARY, FILL):
        if name in table:
            return table[name]
    raise KeyError(f"no elementwise op named {name!r}")


@functools.cache
def kernel(op: str, pattern: str, layout: str, cast: str = "none"):
    """The kernel computing ``out = op(*operands)``.

    Parameters
    ----------
    op : a key of UNARY, BINARY, TERNARY or FILL.
    pattern : one letter per operand, ``a`` for an array, ``s`` for a scalar.
    layout : ``"flat"``, or ``"rowsK"`` / ``"ndK"`` for K-D arrays (2 <= K <= MAXDIM),
        or ``"transpose_<dtype>"`` for one 2-D operand of that dtype stored column-major.
    cast : ``"none"``, ``"float32"`` (float16 math is done in float32) or ``"int64"``
        (arithmetic on bools counts them).
    """
    params = [f"x{k}" for k in range(len(pattern))]

    def loads(index: str) -> str:
        return ", ".join(f"c({p}[{index}])" if kind == "a" else p for p, kind in zip(params, pattern, strict=True))

    name = f"{op}_{pattern}_{layout}"
    source = _source(name, layout, params, loads)
    namespace = {"cuda": cuda, "f": _op(op), "c": CASTS[cast], "u64": np.uint64}
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
    return compiled
