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
    fft,
    linalg,
    nn,
    optim,
    testing,  # noqa: F401 (tp.testing.assert_close)
)
from ._array_api_info import *  # noqa: F403 (array API: the namespace's version and inspection)
from ._constants import *  # noqa: F403 (array API: constants)
from ._creation_functions import *  # noqa: F403 (array API: creation functions)
from ._data_type_functions import *  # noqa: F403 (array API: data type functions)
from ._dtype import (
    DType,
    bfloat16,
    bool,  # noqa: A004
    complex64,
    complex128,
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
from ._indexing_functions import *  # noqa: F403 (array API: indexing functions)
from ._interop import as_tensor
from ._jit import jit
from ._linear_algebra_functions import *  # noqa: F403 (array API: linear algebra functions)
from ._manipulation_functions import *  # noqa: F403 (array API: manipulation functions)
from ._pickling import load, save
from ._random import get_rng_state, manual_seed, rand, randn, set_rng_state
from ._scans import *  # noqa: F403 (array API: cumulative_sum and cumulative_prod, of the statistical functions)
from ._searching_functions import *  # noqa: F403 (array API: searching functions)
from ._set_functions import *  # noqa: F403 (array API: set functions)
from ._sorting_functions import *  # noqa: F403 (array API: sorting functions)
from ._statistical_functions import *  # noqa: F403 (array API: statistical functions)
from ._tensor import Tensor
from ._utility_functions import *  # noqa: F403 (array API: utility functions)

# isort: split
from ._counting import *  # noqa: F403 (bincount, histc, histogram, isin)
from ._elementwise_extras import *  # noqa: F403 (frac, lerp, addcmul, addcdiv, nan_to_num)
from ._products import *  # noqa: F403 (dot, vdot, inner, mm, mv, addmm, kron, cross, norm)
from ._shape_helpers import *  # noqa: F403 (transpose, narrow, ravel, the stacks and splits, flips, rot90)
from ._statistics_extras import *  # noqa: F403 (nansum, nanmean, cov, corrcoef, trapezoid)
from .autograd import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .compiler import compile  # noqa: A004 (PyTorch's name)

__version__ = "0.1.0"

dtype = DType


def amax(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return x.amax(dim, keepdim)


def amin(x: Tensor, dim=None, keepdim: bool = False) -> Tensor:
    return x.amin(dim, keepdim)


__all__ = [
    "DType", "Tensor", "all", "amax", "amin", "any", "arange", "argmax", "argmin", "as_tensor", "autograd",  # noqa: F405
    "backends", "bfloat16", "bool", "compile", "complex64", "complex128", "cuda", "dtype", "empty", "empty_like",
    "enable_grad", "fft", "float16", "float32", "float64", "from_dlpack", "from_numpy", "full", "full_like",  # noqa: F405
    "get_rng_state", "int8", "int16", "int32", "int64", "is_grad_enabled", "jit", "linalg", "manual_seed",
    "matmul", "max", "mean", "min", "nn", "no_grad",  # noqa: F405
    "load", "ones", "ones_like", "optim", "rand", "randn", "save", "set_grad_enabled", "set_rng_state", "sum",
    "tensor", "uint8", "uint16", "uint32", "uint64", "zeros", "zeros_like",
    *_functions_all,
]  # fmt: skip
