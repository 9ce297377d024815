"""Making tensors: from host data, filled and ranges (random draws: ``_random``;
the rest of the array API's creation functions: ``_creation_functions``).

Each takes PyTorch's arguments and the array API standard's: a shape as
separate sizes or one tuple, ``dtype=``, ``device=`` (the one device) and
``requires_grad=``."""

from __future__ import annotations

import functools

import numpy as np

from . import _dtype as dt
from ._aliases import either
from ._device import check_device
from ._shape import _as_shape
from ._tensor import Tensor, add_methods
from .kernels import sequence as seq
from .runtime.backend import get as get_backend
from .runtime.capture import refuse_host_transfer
from .runtime.launch import grid_1d, launch
from .runtime.streams import current_stream

__all__ = [
    "arange", "empty", "empty_like", "from_numpy", "full", "full_like",
    "ones", "ones_like", "tensor", "upload", "zeros", "zeros_like",
]  # fmt: skip


def _shape_arg(shape) -> tuple[int, ...]:
    shape = _as_shape(shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"expected non-negative sizes, got shape {shape}")
    return shape


def _leaves(data):
    """The numbers in ``data`` (a number or nested lists and tuples of them)."""
    if isinstance(data, (list, tuple)):
        for item in data:
            yield from _leaves(item)
    else:
        yield data


def _refuse_big_ints(data, arr: np.ndarray) -> None:
    """An OverflowError, as PyTorch's, for a Python int outside int64 (the type Python ints
    take) in ``data`` of ints only, which NumPy made ``arr`` of another kind (uint64, float64, object)."""
    if arr.dtype.kind not in "ufO" or (arr.dtype.kind == "f" and not np.any(np.abs(arr) >= 2.0**63)):
        return
    leaves = list(_leaves(data))
    if any(not isinstance(v, (int, np.integer)) for v in leaves):  # a float among them: a floating tensor
        return
    big = next((v for v in leaves if type(v) is int and not -(1 << 63) <= v < 1 << 63), None)
    if big is not None:
        fix = "pass dtype=tp.uint64 (for values up to 2**64 - 1) or" if 0 < big < 1 << 64 else "pass"
        raise OverflowError(
            f"tensor(): the Python int {big} does not fit int64, the type Python ints take; {fix} a floating dtype"
        )


def _element_dtype(value) -> dt.DType:
    # A tensor or NumPy value brings its dtype; a Python number the default dtype of its kind.
    if isinstance(value, Tensor):
        return value.dtype
    if isinstance(value, (np.generic, np.ndarray)):
        return dt.from_numpy_dtype(value.dtype)
    return dt.scalar_dtype(value)


def _typed_list_dtype(data) -> dt.DType | None:
    """The dtype of a tensor of the list ``data``, inferred as ``torch.tensor`` does
    when the list holds tensors or NumPy values: every element's dtype (Python
    numbers counting as float32, int64, complex64 or bool) promoted together, so the
    order does not matter and a float64 element keeps float64. None for a list of
    Python numbers only, whose dtype NumPy's reading of them decides."""
    if _plain_numbers(data) or not any(isinstance(v, (Tensor, np.generic, np.ndarray)) for v in _leaves(data)):
        return None  # Python numbers only (or something NumPy's reading refuses with a sentence)
    return functools.reduce(dt.promote, map(_element_dtype, _leaves(data)))


_PLAIN = frozenset({int, float, complex, bool})


def _plain_numbers(data) -> bool:
    """True for nested lists and tuples of Python numbers only (the common case,
    which NumPy reads as it stands): each innermost row checked by its set of types."""
    kinds = set(map(type, data))
    if kinds <= _PLAIN:
        return True
    nested = kinds & {list, tuple}
    return (
        bool(nested) and kinds <= _PLAIN | nested and all(_plain_numbers(item) for item in data if type(item) in nested)
    )


def _on_host(data):
    """``data`` with each tensor in it replaced by a host copy (NumPy cannot read one)."""
    if isinstance(data, (list, tuple)):
        return [_on_host(item) for item in data]
    return data.numpy() if isinstance(data, Tensor) else data


def _typed(data) -> bool:
    """Whether ``data`` is a buffer (``array.array``, a ``memoryview``), whose own
    element type a tensor of it keeps, as of a NumPy array."""
    try:
        memoryview(data)
    except TypeError:
        return False
    return True


def _host_array(data, dtype: dt.DType | None) -> np.ndarray:
    if isinstance(data, Tensor):
        raise TypeError("tensor() got a Tensor; use .clone() or .to(dtype) to copy it")
    if isinstance(data, np.generic):  # a NumPy scalar keeps its dtype, as an array does
        data = np.asarray(data)
    if isinstance(data, np.ndarray):
        arr = data
        if dtype is None:
            dt.from_numpy_dtype(arr.dtype)
    elif isinstance(data, (list, tuple)) and (inferred := _typed_list_dtype(data)) is not None:
        arr = np.asarray(_on_host(data))
        dtype = dtype or inferred
    else:
        arr = np.asarray(data)
        if arr.dtype == object and dtype is not None and dtype.kind in "fc":  # ints past 64 bits, as floats
            arr = np.asarray(data, dtype=dtype.np)
        if dtype is None:
            _refuse_big_ints(data, arr)
        if arr.dtype == object or arr.dtype.kind not in "biufc":
            raise TypeError(f"expected numbers, nested lists of numbers or an array, got {type(data).__name__}")
        if dtype is None:
            dtype = dt.from_numpy_dtype(arr.dtype) if _typed(data) else dt.default_for_kind(arr.dtype.kind)
        elif dtype.kind == "i" and arr.dtype.kind != "c":  # from the Python ints themselves: [0, 2**64 - 1]
            arr = np.asarray(data, dtype=dtype.np)  # alone is float64 to NumPy
    if arr.dtype.kind == "c" and dtype is not None and dtype.kind != "c":
        raise TypeError(
            f"expected real numbers for a tensor of {dtype.name}, got complex data; "
            "make the tensor complex (dtype=tp.complex64) or pass the data's real parts"
        )
    # not np.ascontiguousarray: it turns 0-d data into shape (1,)
    return np.asarray(arr, dtype=(dtype or dt.from_numpy_dtype(arr.dtype)).np, order="C")


def upload(dst: Tensor, data) -> Tensor:
    """Copy host data into ``dst`` (cast and broadcast to its dtype and shape)."""
    refuse_host_transfer("copying host data to the device (tensor/from_numpy/copy_ from NumPy)", current_stream())
    host = _host_array(data, dst.dtype)
    if host.shape != dst.shape:
        try:
            host = np.asarray(np.broadcast_to(host, dst.shape), order="C")
        except ValueError:
            message = f"cannot copy host data of shape {host.shape} into a tensor of shape {dst.shape}"
            raise ValueError(message) from None
    if dst._contig:
        if host.nbytes:
            get_backend().copy_htod(dst._ptr, host, current_stream()._h)
        return dst
    return dst.copy_(tensor(host))


def _leaf(t: Tensor, requires_grad: bool) -> Tensor:
    """``t``, recording the ops on it when ``requires_grad`` (floating point only)."""
    return t.requires_grad_() if requires_grad else t


def tensor(data, dtype=None, *, device=None, requires_grad: bool = False) -> Tensor:
    """A device copy of ``data`` (nested lists, numbers or a NumPy array).

    Python floats become float32, complex numbers complex64 and ints int64, as
    in PyTorch; NumPy arrays keep their dtype unless ``dtype`` is given. With
    ``requires_grad=True`` (floating point data only) autograd records the ops on it.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.tensor([1, 2, 3]).dtype
    tensorplay.int64
    >>> tp.tensor([[1.5, 2.0]]).shape
    (1, 2)
    """
    check_device(device)
    refuse_host_transfer("copying host data to the device (tensor/from_numpy/copy_ from NumPy)", current_stream())
    host = _host_array(data, None if dtype is None else dt.as_dtype(dtype))
    t = Tensor._empty(host.shape, dt.from_numpy_dtype(host.dtype))
    return _leaf(upload(t, host), requires_grad)


def from_numpy(a: np.ndarray) -> Tensor:
    """A device copy of the NumPy array ``a``, keeping its dtype."""
    if not isinstance(a, np.ndarray):
        raise TypeError(f"expected a numpy.ndarray, got {type(a).__name__}")
    return tensor(a)


_MAX_BYTES = (1 << 63) - 1  # a byte count the device's size arguments can hold


def empty(shape=(), *sizes, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor (of float32 unless ``dtype`` says otherwise).

    ``shape`` is a size or a tuple of them (the standard's form); PyTorch's
    ``empty(2, 3)`` passes the further sizes after it (so do ``zeros`` and ``ones``).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.empty(2, 3).shape, tp.empty((2, 3), dtype=tp.int8).dtype
    ((2, 3), tensorplay.int8)
    """
    check_device(device)
    shape, dtype = _shape_arg((shape, *sizes)), dt.as_dtype(dtype or dt.DEFAULT_FLOAT)
    nbytes = dtype.itemsize
    for d in shape:
        nbytes *= d
    if nbytes > _MAX_BYTES:
        raise ValueError(
            f"cannot allocate {nbytes} bytes for a tensor of shape {shape} and {dtype}: "
            "no device can address that many; ask for fewer elements"
        )
    return _leaf(Tensor._empty(shape, dtype), requires_grad)


def full(shape, fill_value, dtype=None, *, device=None, requires_grad: bool = False) -> Tensor:
    """A tensor of ``shape`` holding ``fill_value`` everywhere; its dtype, unless
    given, is the value's (bool, int64, float32 or complex64)."""
    if dtype is None:
        dtype = dt.scalar_dtype(fill_value)
    return _leaf(empty(shape, dtype=dtype, device=device).fill_(fill_value), requires_grad)


def zeros(shape=(), *sizes, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _leaf(empty(shape, *sizes, dtype=dtype, device=device).zero_(), requires_grad)


def ones(shape=(), *sizes, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    return _leaf(empty(shape, *sizes, dtype=dtype, device=device).fill_(1), requires_grad)


def empty_like(x: Tensor, dtype=None, *, device=None, requires_grad: bool = False) -> Tensor:
    return empty(x.shape, dtype=dtype or x.dtype, device=device, requires_grad=requires_grad)


def zeros_like(x: Tensor, dtype=None, *, device=None, requires_grad: bool = False) -> Tensor:
    return zeros(x.shape, dtype=dtype or x.dtype, device=device, requires_grad=requires_grad)


def ones_like(x: Tensor, dtype=None, *, device=None, requires_grad: bool = False) -> Tensor:
    return ones(x.shape, dtype=dtype or x.dtype, device=device, requires_grad=requires_grad)


def full_like(x: Tensor, fill_value, dtype=None, *, device=None, requires_grad: bool = False) -> Tensor:
    return full(x.shape, fill_value, dtype=dtype or x.dtype, device=device, requires_grad=requires_grad)


def _refuse_out_of_range(fn: str, dtype: dt.DType, *values: int) -> None:
    """An OverflowError, as NumPy's, where a value that defines an integer
    sequence does not fit its dtype (which the kernel would wrap)."""
    info = np.iinfo(dtype.np)
    for value in values:
        if not info.min <= value <= info.max:
            raise OverflowError(
                f"{fn}(): the value {value} does not fit {dtype.name} ({info.min} to {info.max}); "
                "pass a wider dtype or a smaller range"
            )


def _integer_sequence(start, step, n: int, dtype: dt.DType) -> tuple[int, int]:
    """The first value and the step of an integer ``arange``, made as NumPy makes
    them: ``start`` and ``start + step`` are cast to integers (floats truncate
    toward zero) and their difference is the step, so ``arange(0, 5, 1.5)`` is
    ``[0, 1, 2, 3]``. Those two values must fit ``dtype``; later ones wrap, as NumPy's
    do, so a negative step of an unsigned sequence is fine."""
    start, step = (v.item() if isinstance(v, np.generic) else v for v in (start, step))
    values = (int(start), int(start + step))[:n]  # exact for ints: no NumPy scalar wraps
    _refuse_out_of_range("arange", dtype, *values)
    return values[0], values[-1] - values[0]


def arange(start, stop=None, step=1, dtype=None, *, end=None, device=None, requires_grad: bool = False) -> Tensor:
    """``start, start + step, ...`` below ``stop``, as NumPy's ``arange`` (the
    values are written on the device: it works inside a graph capture too).
    ``end=`` is PyTorch's name for ``stop``.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.arange(4).tolist(), tp.arange(1, 2, 0.25).tolist(), tp.arange(2, end=5).tolist()
    ([0, 1, 2, 3], [1.0, 1.25, 1.5, 1.75], [2, 3, 4])
    """
    check_device(device)
    end = either("arange", "stop", stop, "end", end)
    if end is None:
        start, end = 0, start
    for name, value in (("start", start), ("end", end), ("step", step)):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f"arange expects numbers, got {name}={value!r}")
    if step == 0:
        raise ValueError("arange needs a nonzero step")
    for name, value in (("start", start), ("end", end), ("step", step)):
        if isinstance(value, (float, np.floating)) and not np.isfinite(value):  # ints: any size
            raise ValueError(f"arange expects finite start, end and step, got {name}={value!r}")
    whole = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
    n = max(0, -(-(end - start) // step) if whole else int(np.ceil((end - start) / step)))
    dtype = dt.as_dtype(dtype) if dtype is not None else dt.default_for_kind("i" if whole else "f")
    if dtype is dt.bfloat16:  # the kernel writes plain values: made in float32, then rounded
        return arange(start, end, step, dt.float32, requires_grad=requires_grad).to(dtype)
    out = empty(n, dtype=dtype)
    if n:
        if dtype.kind in "iu":
            first, delta = _integer_sequence(start, step, n, dtype)
        else:
            first, delta = (int(start), int(step)) if whole else (float(start), float(step))
        launch(seq.arange, *grid_1d(n), [out._flat(), first, delta])
    if requires_grad:
        out.requires_grad_(True)
    return out


# -- Python protocols that read values back (here, as _tensor.py is at its size limit) --------


def _contains(self: Tensor, element) -> bool:
    """``element in x``, as PyTorch's: whether any element of ``x`` equals it (a
    number, or a tensor compared by broadcasting)."""
    if not isinstance(element, (Tensor, int, float, complex, np.number, np.bool_)):  # bool is an int
        raise TypeError(
            f"expected a number or a tensor to look for in a tensor, got {type(element).__name__}; "
            "look in its values (x.tolist()) instead"
        )
    return bool((self == element).any())


def _format(self: Tensor, spec: str) -> str:
    """``format(x, spec)`` and f-strings: a 0-d tensor formats as its value (as in
    PyTorch), other tensors only with an empty spec, as ``str(x)``."""
    if self.ndim == 0:
        return format(self.item(), spec)
    if spec:
        raise TypeError(
            f"cannot format a tensor of shape {self.shape} with {spec!r}: only 0-d tensors take a format spec; "
            "format its values (x.tolist()) or a single element (x[i].item())"
        )
    return str(self)


add_methods({"__contains__": _contains, "__format__": _format})
