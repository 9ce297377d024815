"""tensorplay: GPU kernels written in Python, run as CUDA graphs.

A small PyTorch-like ``Tensor`` whose ops are Numba kernels, streams and a
caching allocator through the CUDA driver, and ``tensorplay.cuda.graphs``.
Without a GPU everything runs on a CPU simulator with the same rules.
"""

from __future__ import annotations

from . import runtime  # isort: skip (chooses the backend before anything imports numba.cuda)
from . import autograd, cuda, nn, optim
from ._dtype import DType, bool, float16, float32, float64, int32, int64  # noqa: A004
from ._factories import (
    arange,
    empty,
    empty_like,
    from_numpy,
    full,
    full_like,
    manual_seed,
    ones,
    ones_like,
    rand,
    randn,
    tensor,
    zeros,
    zeros_like,
)
from ._functions import (
    add,
    cat,
    clamp,
    div,
    eq,
    exp,
    ge,
    gt,
    le,
    log,
    logical_and,
    logical_not,
    logical_or,
    lt,
    maximum,
    minimum,
    mul,
    ne,
    relu,
    sigmoid,
    sqrt,
    stack,
    sub,
    tanh,
    where,
)
from ._interop import as_tensor, from_dlpack
from ._jit import jit
from ._matmul import matmul
from ._tensor import Tensor
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .compiler import compile  # noqa: A004 (PyTorch's name)

__version__ = "0.1.0"

dtype = DType


def sum(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return x.sum(dim, keepdim)


def mean(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return x.mean(dim, keepdim)


__all__ = [
    "DType", "Tensor", "add", "arange", "autograd", "div", "enable_grad", "eq", "ge", "gt", "is_grad_enabled",
    "le", "logical_and", "logical_not", "nn", "no_grad", "optim", "set_grad_enabled",
    "logical_or", "lt", "mul", "ne", "sub", "as_tensor", "bool", "cat", "clamp", "compile", "cuda", "dtype", "empty",
    "empty_like", "exp", "float16", "float32", "float64", "from_dlpack", "from_numpy", "full",
    "full_like", "int32", "int64", "jit", "log", "manual_seed", "matmul", "maximum", "mean",
    "minimum", "ones", "ones_like", "rand", "randn", "relu", "sigmoid", "sqrt", "stack", "sum",
    "tanh", "tensor", "where", "zeros", "zeros_like",
]  # fmt: skip
