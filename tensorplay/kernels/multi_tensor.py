"""Kernels that update many tensors in one launch (the optimizers' fused steps).

``multi_tensor(name, count, roles, scalars, prologue, head, loop)`` generates a
kernel over ``count`` tensors, each given as one 1-D array per role (``p``,
``g``...: arguments ``p0, g0, p1, g1, ...``, then the shared ``scalars``, then
``count - 1`` block numbers ``_end0, _end1, ...``). The grid is one row of
blocks shared out among the tensors: tensor ``t`` takes the blocks from
``_end{t-1}`` (0 for the first) up to ``_end{t}`` (the grid's end for the
last), so that each gets blocks in proportion to its size and none is launched
for nothing (``blocks_for`` counts them). Its blocks run ``head`` once per
thread, then ``loop`` for each element ``j`` of that tensor in a grid-stride
loop over those blocks (``loop``: lines ``name = value`` that read an element
before writing it). Where the tensor's arrays are 16-byte aligned, a thread
takes groups of four elements, each array's group in one vector load and one
vector store, and the last ``size % 4`` elements one by one; unaligned, every
element one by one, four (eight of bfloat16) an iteration whose loads go out
together. In ``head`` and
``loop``, ``{p}`` names the tensor's array of role ``p``. ``prologue`` runs
first, for every tensor. The text may call ``sqrt``: ``math.sqrt`` on a GPU,
NumPy's on the simulator (which keeps float32 as the GPU does, where Python's
gives a float). The generated text is what runs (``kernel.tp_source``), kept
on disk on a GPU like fused kernels.

Examples
--------
>>> import numpy as np
>>> k = multi_tensor("axpy", 2, ("y", "x"), ("a",), "", "", "{y}[j] = {y}[j] + a * {x}[j]")
>>> y0, y1 = np.zeros(3, np.float32), np.ones(5, np.float32)
>>> k[2, 32](y0, np.ones(3, np.float32), y1, np.ones(5, np.float32), np.float32(2.0), np.int64(1))
>>> y0.tolist(), y1.tolist()
([2.0, 2.0, 2.0], [3.0, 3.0, 3.0, 3.0, 3.0])
"""

from __future__ import annotations

import functools
import math
import re
import textwrap

import numpy as np

from ._source import jit_source
from ._target import IEEE_MATH

__all__ = ["blocks_for", "multi_tensor", "sqrt"]

sqrt = math.sqrt if IEEE_MATH else np.sqrt


UNROLL = 4  # elements a thread updates an iteration: their loads go out together


def unroll_for(storage: str) -> int:
    """Elements a thread updates an iteration: twice as many of two-byte
    bfloat16, so that as many bytes are in flight a thread as of float32."""
    return 2 * UNROLL if storage == "bfloat16" else UNROLL


_ELEMENT = re.compile(r"\{(\w+)\}\[j\]")  # an element of a tensor, as a loop names it: {p}[j]


def _codec(storage: str) -> tuple[str, str, str]:
    """How an element is decoded as it is loaded and encoded as it is stored:
    (the decoder's opening, the encoder's, their closing), bfloat16's bits or nothing."""
    return ("h(", "w(", ")") if storage == "bfloat16" else ("", "", "")


def _split(line: str) -> tuple[str, str]:
    target, value = (side.strip() for side in line.split("=", 1))
    return target, value


def _element_lines(loop: str, suffix: str, decode: str = "", close: str = ""):
    """The loop's lines for one element: (the role whose element the line
    writes, or None; its target; its value, each element read named
    ``{role}_{suffix}``, wrapped in ``decode``...``close``)."""
    for line in filter(str.strip, loop.splitlines()):
        target, value = _split(line)
        value = _ELEMENT.sub(lambda m: f"{decode}{m.group(1)}_{suffix}{close}", value)
        written = _ELEMENT.fullmatch(target)
        yield (written.group(1) if written else None), target, value


def _roles(loop: str) -> tuple[list[str], list[str]]:
    """The roles whose elements ``loop`` reads, and those it writes."""
    lines = [_split(line) for line in loop.splitlines() if line.strip()]
    read = sorted({m.group(1) for _, value in lines for m in _ELEMENT.finditer(value)})
    written = sorted({m.group(1) for target, _ in lines for m in [_ELEMENT.fullmatch(target)] if m})
    return read, written


def _vectored(loop: str, names: dict, first: str, storage: str = "") -> list[str]:
    """Where every array the loop reads or writes is 16-byte aligned (a fresh
    allocation is; a view at an offset may not be), the loop over one tensor's
    groups of four elements: one vector load per array read and one vector
    store per array written for each group (``kernels/_vector.py``: one memory
    instruction where four scalar ones took four; Python twins on the
    simulator), ``unroll_for(storage) // 4`` groups a thread an iteration,
    ``stride`` groups apart, all their loads first. ``_begin`` is then the
    first element the scalar loop (``_unrolled``) takes: the last ``size % 4``,
    or all of them, unaligned. The loop's lines run for each element of a
    group in turn, as in ``_unrolled``; an element written is kept until its
    group is stored whole."""
    decode, encode, close = _codec(storage)
    groups = unroll_for(storage) // 4
    read, written = _roles(loop)
    aligned = " | ".join(f"vector_base({names[r]})" for r in sorted(set(read) | set(written)))
    out = [
        "_begin = start",
        f"if ({aligned}) & u64(15) == u64(0):",
        f"    _nv = {names[first]}.size // 4",
        f"    for _g0 in range(start, _nv, stride * {groups}):",
    ]
    for k in range(groups):  # past the end, this thread's own first group again: no other thread's
        if k:
            out.append(f"        _g{k} = _g0 + {k} * stride")
        at = f"_g{k} if _g{k} < _nv else _g0" if k else "_g0"
        out += [f"        {', '.join(f'{r}_{k}_{e}' for e in range(4))} = load4({names[r]}, {at})" for r in read]
    for k in range(groups):
        for e in range(4):
            for role, target, value in _element_lines(loop, f"{k}_{e}", decode, close):
                out.append(f"        {f'{role}_new_{k}_{e}' if role else target} = {value}")
        for r in written:
            values = ", ".join(f"{encode}{r}_new_{k}_{e}{close}" for e in range(4))
            store = f"store4({names[r]}, _g{k}, {values})"
            out += [f"        if _g{k} < _nv:", f"            {store}"] if k else [f"        {store}"]
    out.append("    _begin = _nv * 4 + start")
    return out


def _unrolled(loop: str, names: dict, first: str, storage: str = "", begin: str = "start") -> list[str]:
    """The grid-stride loop over one tensor's elements from ``begin`` (this
    thread's first), ``unroll_for`` elements an iteration (``stride`` apart):
    every element the loop reads is loaded first
    (all the loads in flight at once; an element past the tensor's end reads
    the thread's first one again, never an element another thread writes),
    then the loop's lines run for each element in turn, writing those inside
    the tensor. The loop's lines are ``name = value``, reading each element
    before writing it. ``storage="bfloat16"``: the arrays hold bfloat16 bits,
    decoded as they are loaded and encoded (rounded) as they are stored."""
    decode, encode, close = _codec(storage)
    unroll = unroll_for(storage)
    size = f"{names[first]}.size"
    out = [f"for j in range({begin}, {size}, stride * {unroll}):"]
    read, _ = _roles(loop)
    out.append("    j0 = j")
    out += [f"    {r}_0 = {decode}{names[r]}[j]{close}" for r in read]
    for k in range(1, unroll):  # past the end, this thread's own first element again: no other thread's
        out.append(f"    j{k} = j + {k} * stride")
        out += [f"    {r}_{k} = {decode}{names[r]}[j{k} if j{k} < {size} else j]{close}" for r in read]
    for k in range(unroll):
        for role, target, value in _element_lines(loop, str(k)):
            if role:
                out.append(f"    if j{k} < {size}:")
                out.append(f"        {names[role]}[j{k}] = {encode}{value}{close}")
            else:
                out.append(f"    {target} = {value}")
    return out


def _blocks_of(t: int, count: int) -> str:
    """The test that opens tensor ``t``'s lines: whether this block is one of its blocks."""
    if count == 1:
        return "if True:"
    if t == count - 1:
        return "else:"
    return f"{'if' if t == 0 else 'elif'} b < _end{t}:"


def blocks_for(sizes, block: int, storage: str = "", limit: int | None = None) -> list[int]:
    """Blocks of ``block`` threads for each tensor of ``sizes`` elements: a
    thread per ``unroll_for(storage)`` elements (one pass), at least one block
    each; with ``limit`` (the most blocks a launch may have), each tensor at
    most its share of it (then the threads loop)."""
    per_block = block * unroll_for(storage)
    one_pass = [max(1, -(-n // per_block)) for n in sizes]
    if limit is None:
        return one_pass
    share = max(1, limit // len(sizes))
    return [min(n, share) for n in one_pass]


@functools.cache
def multi_tensor(
    name: str, count: int, roles: tuple, scalars: tuple, prologue: str, head: str, loop: str, storage: str = ""
):
    """The kernel described in the module docstring (built once per arguments).
    ``storage="bfloat16"``: the arrays hold bfloat16 bits, which ``loop``
    reads and writes as float32 values (decoded and encoded by the kernel);
    its text may round a float32 to bfloat16 with ``r(...)``."""
    bits = storage == "bfloat16"
    kernel_name = f"{name}_{count}{'_bf16' if bits else ''}"
    ends = [f"_end{t}" for t in range(count - 1)]
    params = [f"{role}{t}" for t in range(count) for role in roles] + list(scalars) + ends
    lines = [
        "from numba import cuda, float32, float64",
        "from numba import uint64 as u64",
        "",
        "from tensorplay.kernels._vector import load4, store4, vector_base",
        "from tensorplay.kernels.multi_tensor import sqrt",
        *(["from tensorplay.kernels.bfloat16 import decode as h, encode as w, round_float32 as r"] if bits else []),
        "",
        "",
        f"def {kernel_name}({', '.join(params)}):",
        "    b = cuda.blockIdx.x",
    ]
    lines += [f"    {line}" for line in prologue.splitlines() if line.strip()]
    for t in range(count):
        names = {role: f"{role}{t}" for role in roles}
        end = "cuda.gridDim.x" if t == count - 1 else ends[t]
        own = (f"(b - {ends[t - 1]})", f"({end} - {ends[t - 1]})") if t else ("b", end)  # its block, its blocks
        lines += [
            f"    {_blocks_of(t, count)}",
            f"        start = {own[0]} * cuda.blockDim.x + cuda.threadIdx.x",
            f"        stride = {own[1]} * cuda.blockDim.x",
        ]
        lines += [f"        {line.format(**names)}" for line in head.splitlines() if line.strip()]
        if loop.strip():
            body = _vectored(loop, names, roles[0], storage) + _unrolled(loop, names, roles[0], storage, "_begin")
            lines += [f"        {line}" for line in body]
    text = textwrap.dedent("\n".join(lines)) + "\n"
    kernel = jit_source(kernel_name, text, "multi_tensor", f"multi_tensor.{kernel_name}")
    kernel.tp_source = text
    kernel.tp_recipe = ("multi_tensor", "multi_tensor", (name, count, roles, scalars, prologue, head, loop, storage))
    return kernel
