"""The array API standard's creation functions, with PyTorch's spellings kept.

The filled ones and ``arange`` are ``_factories``' (re-exported here, so that
the standard's list reads in one place); this module adds ``asarray``,
``eye``, ``linspace``, ``meshgrid``, ``tril``, ``triu`` and the standard's
``from_dlpack``. What needs values written on the device (eye, linspace,
tril, triu) launches a kernel of ``kernels/creation.py``: it can be captured
in a graph.

Examples
--------
>>> import tensorplay as tp
>>> tp.eye(2, 3, k=1).tolist()
[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
>>> tp.linspace(0, 1, 5).tolist()
[0.0, 0.25, 0.5, 0.75, 1.0]
>>> tp.tril(tp.ones(2, 2)).tolist()
[[1.0, 0.0], [1.0, 1.0]]
"""

from __future__ import annotations

import numpy as np

from . import _dlpack, _interop
from . import _dtype as dt
from ._aliases import either
from ._complex import imag_part, real_part
from ._device import check_device
from ._export import dlpack_device
from ._factories import (
    arange,
    empty,
    empty_like,
    full,
    full_like,
    ones,
    ones_like,
    tensor,
    zeros,
    zeros_like,
)
from ._tape import record
from ._tensor import Tensor
from .kernels import creation as kernels
from .runtime.launch import grid_1d, launch

__all__ = [
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like", "linspace", "meshgrid",
    "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
]  # fmt: skip

_NUMBERS = (int, float, complex, np.number)


def asarray(obj, /, *, dtype=None, device=None, copy: bool | None = None, requires_grad: bool = False) -> Tensor:
    """``obj`` as a tensor: a tensor (or device memory shared through DLPack or
    the CUDA Array Interface) as it is, host data (numbers, nested sequences,
    NumPy arrays, buffers) copied to the device.

    ``copy=True`` always copies; ``copy=False`` never does, and refuses what
    needs a copy (host data, another dtype); ``None`` copies only when needed.
    Without ``dtype``, Python data gives bool, int64, float32 or complex64.

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.asarray([1, 2])
    >>> tp.asarray(x) is x, tp.asarray(x, dtype=tp.float64).tolist(), tp.asarray([1.5, 2j]).dtype
    (True, [1.0, 2.0], tensorplay.complex64)
    """
    check_device(device)
    dtype = None if dtype is None else dt.as_dtype(dtype)
    shared = _on_the_device(obj)
    if shared is None:
        if copy is False:
            raise ValueError(
                f"asarray(copy=False) cannot put host data ({type(obj).__name__}) on the device without a copy; "
                "pass copy=None or copy=True"
            )
        out = tensor(obj, dtype=dtype)
    elif dtype is None or dtype is shared.dtype:
        out = shared.clone() if copy else shared
    elif copy is False:
        raise ValueError(
            f"asarray(copy=False) cannot convert {shared.dtype.name} to {dtype.name} without a copy; "
            "pass copy=None, or leave dtype=None"
        )
    else:
        out = shared.to(dtype)
    if requires_grad:  # a new leaf: the caller's tensor stays as it was
        return (out.detach() if out is obj else out).requires_grad_()
    return out


def _on_the_device(obj) -> Tensor | None:
    """A tensor over ``obj``'s memory when it is device memory (a tensor, a CUDA
    Array Interface or DLPack producer of tensorplay's device); None for host data."""
    if isinstance(obj, Tensor):
        return obj
    if isinstance(obj, (np.ndarray, np.generic)):  # host data, on every backend
        return None
    if hasattr(obj, "__cuda_array_interface__"):
        return _interop.as_tensor(obj)
    if hasattr(obj, "__dlpack__") and _dlpack_device_type(obj) == dlpack_device()[0]:
        return _interop.from_dlpack(obj)
    return None


def _dlpack_device_type(obj) -> int | None:
    return obj.__dlpack_device__()[0] if hasattr(obj, "__dlpack_device__") else None


def from_dlpack(x, /, *, device=None, copy: bool | None = None) -> Tensor:
    """A tensor over the memory of ``x``, a DLPack producer (or capsule) on
    tensorplay's device; ``copy=True`` copies it. Host memory on the GPU
    backend is copied unless ``copy=False`` (a BufferError then, as the
    standard says for memory that cannot be shared).

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.arange(3)
    >>> tp.from_dlpack(x).data_ptr() == x.data_ptr(), tp.from_dlpack(x, copy=True).data_ptr() == x.data_ptr()
    (True, False)
    """
    check_device(device, BufferError)
    host = _dlpack_device_type(x) == _dlpack.DLPACK_CPU
    # host memory is copied through NumPy where the device is not the host, and where a copy is asked for
    # of a producer other than a tensor (read-only memory included, as on the GPU backend)
    if host and (dlpack_device()[0] != _dlpack.DLPACK_CPU or (copy and not isinstance(x, Tensor))):
        if copy is False:
            raise BufferError(
                "from_dlpack(copy=False) cannot share host memory with the GPU; pass copy=None or copy=True"
            )
        return tensor(np.from_dlpack(x))
    out = _interop.from_dlpack(x)
    return out.clone() if copy else out


def eye(
    n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype=None, device=None, requires_grad: bool = False
) -> Tensor:
    """A matrix of ``n_rows`` by ``n_cols`` (default ``n_rows``) with ones on the
    ``k``-th diagonal (above the main one for ``k > 0``) and zeros elsewhere."""
    check_device(device)
    n_cols = n_rows if n_cols is None else n_cols
    for name, value in (("n_rows", n_rows), ("n_cols", n_cols), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"eye() expects integer sizes and k, got {name}={value!r}")
    if n_rows < 0 or n_cols < 0:
        raise ValueError(f"eye() expects non-negative sizes, got n_rows={n_rows} and n_cols={n_cols}")
    dtype = dt.as_dtype(dtype or dt.DEFAULT_FLOAT)
    if dtype is dt.bfloat16:  # the kernel writes plain values: made in float32, then rounded
        out = eye(n_rows, n_cols, k=k).to(dt.bfloat16)
    else:
        out = empty((n_rows, n_cols), dtype=dtype)
        if out.numel():
            k = max(-n_rows, min(int(k), n_cols))  # a diagonal outside the matrix is none: the kernel's k fits
            launch(kernels.eye, *grid_1d(out.numel()), [out._flat(), int(n_cols), k])
    return out.requires_grad_() if requires_grad else out


def linspace(
    start,
    stop,
    /,
    num: int | None = None,
    *,
    dtype=None,
    device=None,
    endpoint: bool = True,
    steps: int | None = None,
    requires_grad: bool = False,
) -> Tensor:
    """``num`` evenly spaced values from ``start`` to ``stop`` (included unless
    ``endpoint=False``), computed as NumPy's ``linspace`` computes them.

    ``steps`` is PyTorch's name for ``num``. The dtype is float32 unless given,
    complex64 when ``start`` or ``stop`` is complex; an integer dtype takes the
    floor of the values (NumPy's rule).
    """
    check_device(device)
    num = either("linspace", "num", num, "steps", steps)
    if num is None:
        raise TypeError("linspace() needs num (PyTorch: steps), the number of values")
    if isinstance(num, bool) or not isinstance(num, (int, np.integer)):
        raise TypeError(f"linspace() expects an integer number of values, got num={num!r}")
    if num < 0:
        raise ValueError(f"linspace() expects a non-negative number of values, got num={num}")
    for name, value in (("start", start), ("stop", stop)):
        if not isinstance(value, _NUMBERS):
            raise TypeError(f"linspace() expects numbers for start and stop, got {name}={value!r}")
    is_complex = any(isinstance(v, (complex, np.complexfloating)) for v in (start, stop))
    dtype = dt.as_dtype(dtype) if dtype is not None else dt.DEFAULT_COMPLEX if is_complex else dt.DEFAULT_FLOAT
    if is_complex and dtype.kind != "c":
        raise TypeError(f"linspace() expects a complex dtype for complex start or stop, got {dtype.name}")
    if dtype is dt.bfloat16:  # the kernel writes plain values: made in float32, then rounded
        out = linspace(start, stop, num, endpoint=endpoint, dtype=dt.float32).to(dt.bfloat16)
    else:
        out = empty(int(num), dtype=dtype)
        if num and dtype.kind == "c":
            start, stop = complex(start), complex(stop)
            _spaced(real_part(out), start.real, stop.real, endpoint)
            _spaced(imag_part(out), start.imag, stop.imag, endpoint)
        elif num:
            _spaced(out, start, stop, endpoint)
    return out.requires_grad_() if requires_grad else out


def _spaced(out: Tensor, start, stop, endpoint: bool) -> None:
    """Write ``linspace``'s values into the 1-D real tensor ``out`` (NumPy's arithmetic, in float64)."""
    n = out.shape[0]
    divisions = n - 1 if endpoint else n
    start, stop = float(start), float(stop)
    step = (stop - start) / divisions if divisions > 0 else 0.0
    last = n - 1 if endpoint and n > 1 else -1
    args = [out, start, step, stop, last, out.dtype.kind == "i"]
    launch(kernels.linspace, *grid_1d(n), args)


def meshgrid(*arrays: Tensor, indexing: str = "xy") -> list[Tensor]:
    """Coordinate tensors from one-dimensional ones, as NumPy's ``meshgrid``:
    for ``x`` and ``y`` of lengths M and N, tensors of shape (N, M) with
    ``indexing="xy"`` (the standard's default), (M, N) with ``"ij"`` (PyTorch's).
    They are broadcast views of the inputs (as PyTorch's): copy one with
    ``.clone()`` before writing into it. PyTorch's single list argument works too.

    Examples
    --------
    >>> import tensorplay as tp
    >>> xs, ys = tp.meshgrid(tp.arange(3), tp.arange(2))
    >>> xs.tolist(), ys.tolist()
    ([[0, 1, 2], [0, 1, 2]], [[0, 0, 0], [1, 1, 1]])
    """
    if len(arrays) == 1 and isinstance(arrays[0], (list, tuple)):
        arrays = tuple(arrays[0])
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid() expects indexing='xy' or 'ij', got {indexing!r}")
    if not all(isinstance(a, Tensor) for a in arrays):
        raise TypeError(f"meshgrid() expects tensors, got {[type(a).__name__ for a in arrays]}")
    if any(a.ndim != 1 for a in arrays):
        raise ValueError(f"meshgrid() expects one-dimensional tensors, got shapes {[a.shape for a in arrays]}")
    for a in arrays[1:]:
        if a.dtype is not arrays[0].dtype:
            raise TypeError(f"meshgrid() expects tensors of one dtype, got {arrays[0].dtype.name} and {a.dtype.name}")
    n = len(arrays)
    axes = list(range(n))
    if indexing == "xy" and n > 1:
        axes[0], axes[1] = 1, 0
    shape = [0] * n
    for a, axis in zip(arrays, axes, strict=True):
        shape[axis] = a.shape[0]
    grids = []
    for a, axis in zip(arrays, axes, strict=True):
        along = [1] * n
        along[axis] = a.shape[0]
        grids.append(a.reshape(along).expand(shape))
    return grids


def tril(x: Tensor, diagonal: int | None = None, *, k: int = 0) -> Tensor:
    """The lower triangle of each matrix of ``x`` (its last two dimensions): the
    elements on and below the ``k``-th diagonal, zeros above. ``diagonal`` is
    PyTorch's name for ``k``."""
    return _triangle("tril", x, either("tril", "k", k, "diagonal", diagonal, 0), lower=True)


def triu(x: Tensor, diagonal: int | None = None, *, k: int = 0) -> Tensor:
    """The upper triangle of each matrix of ``x``: the elements on and above the
    ``k``-th diagonal, zeros below. ``diagonal`` is PyTorch's name for ``k``."""
    return _triangle("triu", x, either("triu", "k", k, "diagonal", diagonal, 0), lower=False)


def _triangle(name: str, x: Tensor, k: int, lower: bool) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}() expects a tensor, got {type(x).__name__}")
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"{name}() expects an integer k, got {k!r}")
    if x.ndim < 2:
        raise ValueError(f"{name}() expects a tensor of at least 2 dimensions, got shape {x.shape}")
    out = Tensor._empty(x.shape, x.dtype)
    if out.numel():
        rows, cols = x.shape[-2:]
        stacked = x.detach().reshape(-1, rows, cols)  # a view where the strides allow it
        launch(kernels.triangle, *grid_1d(out.numel()), [out.view(-1, rows, cols), stacked, int(k), lower])
    # the gradient is the same triangle of the output's gradient
    return record(f"{name.capitalize()}Backward", out, (x,), lambda gs: (_triangle(name, gs[0], k, lower),))
