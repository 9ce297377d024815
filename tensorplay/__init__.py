"""tensorplay: GPU kernels written in Python, run as CUDA graphs.

A small PyTorch-like ``Tensor`` whose ops are Numba kernels, streams and a
caching allocator through the CUDA driver, and ``tensorplay.cuda.graphs``.
Without a GPU everything runs on a CPU simulator with the same rules.
"""

from __future__ import annotations

from . import runtime  # noqa: F401 (first: it chooses the backend before anything imports numba.cuda)

# isort: split
from . import (
    _methods,  # noqa: F401 (gives Tensor its math methods)
    autograd,
    backends,
    cuda,
    nn,
    optim,
)
from ._dtype import (
    DType,
    bfloat16,
    bool,  # noqa: A004
    float16,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._factories import (
    arange,
    empty,
    empty_like,
    from_numpy,
    full,
    full_like,
    ones,
    ones_like,
    tensor,
    zeros,
    zeros_like,
)
from ._functions import *  # noqa: F403 (the ops' functions, made from the op table)
from ._functions import __all__ as _functions_all
from ._interop import as_tensor, from_dlpack
from ._jit import jit
from ._matmul import matmul
from ._random import get_rng_state, manual_seed, rand, randn, set_rng_state
from ._tensor import Tensor
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .compiler import compile  # noqa: A004 (PyTorch's name)

__version__ = "0.1.0"

dtype = DType


def sum(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return x.sum(dim, keepdim)


def mean(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return x.mean(dim, keepdim)


def max(x: Tensor, dim=None, keepdim: bool = False):  # noqa: A001
    return x.max(dim, keepdim)


def min(x: Tensor, dim=None, keepdim: bool = False):  # noqa: A001
    return x.min(dim, keepdim)


def amax(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return x.amax(dim, keepdim)


def amin(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return x.amin(dim, keepdim)


def argmax(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return x.argmax(dim, keepdim)


def argmin(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return x.argmin(dim, keepdim)


def any(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return x.any(dim, keepdim)


def all(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:  # noqa: A001
    return x.all(dim, keepdim)


__all__ = [
    "DType", "Tensor", "all", "amax", "amin", "any", "arange", "argmax", "argmin", "as_tensor", "autograd",
    "backends", "bfloat16", "bool", "compile", "cuda", "dtype", "empty", "empty_like", "enable_grad", "float16",
    "float32", "float64", "from_dlpack", "from_numpy", "full", "full_like", "get_rng_state", "int8", "int16",
    "int32", "int64", "is_grad_enabled", "jit", "manual_seed", "matmul", "max", "mean", "min", "nn", "no_grad",
    "ones", "ones_like", "optim", "rand", "randn", "set_grad_enabled", "set_rng_state", "sum", "tensor", "uint8",
    "uint16", "uint32", "uint64", "zeros", "zeros_like",
    *_functions_all,
]  # fmt: skip
