"""Kernels that update many tensors in one launch (the optimizers' fused steps).

``multi_tensor(name, count, roles, scalars, prologue, head, loop)`` generates a
kernel over ``count`` tensors, each given as one 1-D array per role (``p``,
``g``...: arguments ``p0, g0, p1, g1, ...``, then the shared ``scalars``). Row
``t`` of the grid (``blockIdx.y``) serves tensor ``t``: it runs ``head`` once
per thread, then ``loop`` for each element ``j`` of that tensor in a
grid-stride loop. In ``head`` and ``loop``, ``{p}`` names the tensor's array
of role ``p``. ``prologue`` runs first, for every tensor. The text may call
``sqrt``: ``math.sqrt`` on a GPU, NumPy's on the simulator (which keeps float32
as the GPU does, where Python's gives a float), and ``kernels.bfloat16``'s
``decode``, ``encode`` and ``round_float32``. The generated text is what
runs (``kernel.tp_source``), kept on disk on a GPU like fused kernels.

Examples
--------
>>> import numpy as np
>>> k = multi_tensor("axpy", 2, ("y", "x"), ("a",), "", "", "{y}[j] = {y}[j] + a * {x}[j]")
>>> y0, y1 = np.zeros(3, np.float32), np.ones(5, np.float32)
>>> k[(1, 2), 32](y0, np.ones(3, np.float32), y1, np.ones(5, np.float32), np.float32(2.0))
>>> y0.tolist(), y1.tolist()
([2.0, 2.0, 2.0], [3.0, 3.0, 3.0, 3.0, 3.0])
"""

from __future__ import annotations

import functools
import math
import textwrap

import numpy as np

from ._source import jit_source
from ._target import IEEE_MATH

__all__ = ["multi_tensor", "sqrt"]

sqrt = math.sqrt if IEEE_MATH else np.sqrt


@functools.cache
def multi_tensor(name: str, count: int, roles: tuple, scalars: tuple, prologue: str, head: str, loop: str):
    """The kernel described in the module docstring (built once per arguments)."""
    kernel_name = f"{name}_{count}"
    params = [f"{role}{t}" for t in range(count) for role in roles] + list(scalars)
    lines = [
        "from numba import cuda, float32, float64",
        "",
        "from tensorplay.kernels.bfloat16 import decode, encode, round_float32",
        "from tensorplay.kernels.multi_tensor import sqrt",
        "",
        "",
        f"def {kernel_name}({', '.join(params)}):",
        "    t = cuda.blockIdx.y",
        "    start = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x",
        "    stride = cuda.gridDim.x * cuda.blockDim.x",
    ]
    lines += [f"    {line}" for line in prologue.splitlines() if line.strip()]
    for t in range(count):
        names = {role: f"{role}{t}" for role in roles}
        lines.append(f"    {'if' if t == 0 else 'elif'} t == {t}:")
        lines += [f"        {line.format(**names)}" for line in head.splitlines() if line.strip()]
        if loop.strip():
            lines.append(f"        for j in range(start, {roles[0]}{t}.size, stride):")
            lines += [f"            {line.format(**names)}" for line in loop.splitlines() if line.strip()]
        elif not head.strip():
            lines.append("        pass")
    text = textwrap.dedent("\n".join(lines)) + "\n"
    kernel = jit_source(kernel_name, text, "multi_tensor", f"multi_tensor.{kernel_name}")
    kernel.tp_source = text
    kernel.tp_recipe = ("multi_tensor", "multi_tensor", (name, count, roles, scalars, prologue, head, loop))
    return kernel
