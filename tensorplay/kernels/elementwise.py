"""Elementwise kernels: one generated kernel per (op, operand pattern, layout).

An op is a Numba device function ``f``; a pattern says which operands are
arrays (``a``) and which are scalars (``s``). Two layouts exist:

- ``flat``: every array is 1-D and C-contiguous with the output's size;
- ``nd``: every array is a 6-D strided view (broadcast dimensions have stride 0,
  missing leading dimensions have size 1), so one kernel serves any broadcast
  or slice of up to six (coalesced) dimensions.

Both use a grid-stride loop, so any launch shape covers the whole output. The
kernels are built once per key by ``kernel(op, pattern, layout, cast)``.
"""

from __future__ import annotations

import functools
import linecache
import math

import numpy as np
from numba import cuda

__all__ = ["BINARY", "UNARY", "MAXDIM", "kernel"]

MAXDIM = 6


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


UNARY = {
    "copy": identity,
    "neg": _device(lambda x: -x),
    "abs": _device(lambda x: abs(x)),
    "exp": _device(lambda x: math.exp(x)),
    "log": _device(lambda x: math.log(x)),
    "sqrt": _device(lambda x: math.sqrt(x)),
    "tanh": _device(lambda x: math.tanh(x)),
    "sin": _device(lambda x: math.sin(x)),
    "cos": _device(lambda x: math.cos(x)),
    "sigmoid": _device(lambda x: 1.0 / (1.0 + math.exp(-x))),
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

_ND = """
def {name}(out, {params}):
    i = cuda.grid(1)
    step = cuda.gridsize(1)
    n = out.size
    s1, s2, s3, s4, s5 = out.shape[1], out.shape[2], out.shape[3], out.shape[4], out.shape[5]
    while i < n:
        r = i
        i5 = r % s5
        r //= s5
        i4 = r % s4
        r //= s4
        i3 = r % s3
        r //= s3
        i2 = r % s2
        r //= s2
        i1 = r % s1
        i0 = r // s1
        out[i0, i1, i2, i3, i4, i5] = f({loads})
        i += step
"""


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
    layout : ``"flat"`` or ``"nd"``.
    cast : ``"none"``, ``"float32"`` (float16 math is done in float32) or ``"int64"``
        (arithmetic on bools counts them).
    """
    params = [f"x{k}" for k in range(len(pattern))]

    def loads(index: str) -> str:
        return ", ".join(f"c({p}[{index}])" if kind == "a" else p for p, kind in zip(params, pattern, strict=True))

    name = f"{op}_{pattern}_{layout}"
    if layout == "flat":
        indices = {f"loads_{j}": loads(j) for j in ("i", "j1", "j2", "j3")}
        source = _FLAT.format(name=name, params=", ".join(params), **indices)
    else:
        source = _ND.format(name=name, params=", ".join(params), loads=loads("i0, i1, i2, i3, i4, i5"))
    namespace = {"cuda": cuda, "f": _op(op), "c": CASTS[cast], "u64": np.uint64}
    filename = f"<tensorplay.kernels.elementwise.{name}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    fn = namespace[name]
    fn.__qualname__ = f"elementwise.{name}"
    fn.__module__ = __name__
    compiled = cuda.jit(fn)
    compiled.tp_recipe = ("elementwise", "kernel", (op, pattern, layout, cast))  # how to build it again elsewhere
    return compiled
