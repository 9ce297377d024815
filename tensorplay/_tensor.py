"""The Tensor: a typed, strided view of device memory.

Ops are in ``_ops.py`` (kernels launched on the current stream); this file
holds the object, its views and indexing, and host readback.
"""

from __future__ import annotations

import functools
import struct

import numpy as np

from . import _dtype as dt
from . import _shape
from ._device import DEVICE, Device
from ._export import cuda_array_interface, dlpack_device, to_dlpack
from ._grad_mode import is_grad_enabled, no_grad
from ._shape import broadcast_strides, contiguous_strides, infer_shape, is_contiguous, numel, parse_index, view_strides
from ._tape import Meta, record, refuse_in_place, sum_to
from .runtime import memory as _memory
from .runtime.backend import get as get_backend
from .runtime.backend.params import array_struct
from .runtime.caches import BoundedCache
from .runtime.capture import refuse_host_transfer
from .runtime.launch import ArrayArg, KernelArray
from .runtime.streams import current_stream

_allocate = _memory.allocator.allocate
# A flat kernel's output: its address and element count (kernels/elementwise.py)
_PACK_FLAT = struct.Struct("<QQ").pack

__all__ = ["TENSOR_TYPES", "Storage", "Tensor", "add_methods"]


class Storage:
    """Device memory shared by a tensor and its views: an allocator block or
    foreign memory kept alive through ``owner``."""

    __slots__ = ("ptr", "nbytes", "block", "owner", "__weakref__")

    def __init__(self, ptr: int, nbytes: int, block=None, owner=None) -> None:
        self.ptr, self.nbytes, self.block, self.owner = ptr, nbytes, block, owner

    def __reduce_ex__(self, protocol):
        raise TypeError(
            "device memory cannot be pickled or copied as bytes; pickle the tensor (its values), or copy.deepcopy it"
        )

    def __del__(self) -> None:
        if self.block is not None:
            try:
                _memory.allocator.free(self.block)
            except Exception:  # interpreter shutdown
                pass


def _differentiable_view(kind: str):
    """Record a view method for autograd when its tensor requires grad (see
    ``_record_view`` below); plain tensors pay one attribute test."""

    def wrap(method):
        @functools.wraps(method)
        def tracked(self, *args, **kwargs):
            if self._ag is None or not is_grad_enabled():  # nothing to record (an optimizer's views)
                return method(self, *args, **kwargs)
            return _record_view(kind, method, self, args, kwargs)

        return tracked

    return wrap


_LAYOUTS = BoundedCache("tensor.layouts", 4096)  # shape -> its elements and C-contiguous strides


def _layout(shape) -> tuple[int, tuple[int, ...]]:
    layout = numel(shape), contiguous_strides(shape)
    return _LAYOUTS.put(shape, layout) if type(shape) is tuple else layout


TENSOR_TYPES: set = set()  # Tensor and its subclasses: ``type(x) in TENSOR_TYPES`` is the fast paths' test


class Tensor(KernelArray, *get_backend().tensor_bases()):
    """An n-dimensional array on the device.

    This file holds the object itself: its memory and layout, views (recorded
    for autograd here), indexing, readback and autograd state. The layers built
    on it add the rest through ``add_methods``: the ops' methods and operators
    (``_methods``, generated from the op table in ``kernels/elementwise``) and
    ``backward`` (``autograd``).

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> (x * 2 + 1).tolist()
    [[3.0, 5.0], [7.0, 9.0]]
    >>> x[:, 1].tolist()
    [2.0, 4.0]
    """

    __slots__ = ("_storage", "_ptr", "shape", "_strides", "dtype", "_contig", "_k", "_kb", "_kf", "_ag", "__weakref__")
    __array_priority__ = 1000  # NumPy scalars on the left defer to our operators
    __hash__ = object.__hash__  # kept hashable although the op table gives it __eq__

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        TENSOR_TYPES.add(cls)  # nn.Parameter takes the same fast paths

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("create tensors with tp.tensor(), tp.empty(), tp.zeros() and friends")

    @classmethod
    def _make(cls, storage: Storage, ptr: int, shape, strides, dtype: dt.DType) -> Tensor:
        t = object.__new__(cls)
        t._storage, t._ptr, t.shape, t._strides, t.dtype = storage, ptr, shape, strides, dtype
        t._contig = is_contiguous(shape, strides)
        t._k = t._kb = t._kf = t._ag = None
        return t

    @classmethod
    def _empty(cls, shape: tuple[int, ...], dtype: dt.DType) -> Tensor:
        n, strides = (_LAYOUTS.get(shape) if type(shape) is tuple else None) or _layout(shape)
        nbytes = n * dtype.itemsize
        block = _allocate(nbytes, current_stream())
        storage = Storage(block.ptr, nbytes, block)
        t = object.__new__(cls)
        t._storage, t._ptr, t.shape, t.dtype = storage, storage.ptr, shape, dtype
        t._strides, t._contig = strides, True
        t._k = t._kb = t._kf = t._ag = None
        return t

    def _view(self, shape, strides, offset_elems: int = 0) -> Tensor:
        ptr = self._ptr + offset_elems * self.dtype.itemsize
        return Tensor._make(self._storage, ptr, tuple(shape), tuple(strides), self.dtype)

    # -- kernel arguments ------------------------------------------------------
    @property
    def _karray(self) -> tuple:
        k = self._k
        if k is None:
            isz = self.dtype.itemsize
            k = self._k = (0, 0, self.numel(), isz, self._ptr, *self.shape, *[s * isz for s in self._strides])
        return k

    @property
    def _kbytes(self) -> bytes:
        kb = self._kb
        if kb is None:
            k = self._karray
            kb = self._kb = array_struct(self.ndim).pack(*k)
        return kb

    @property
    def _kflat(self) -> bytes:
        """The packed parameters of this (contiguous) tensor as a flat kernel's
        output: its address and element count."""
        kf = self._kf
        if kf is None:
            kf = self._kf = _PACK_FLAT(self._ptr, self.numel())
        return kf

    @property
    def _kkey(self) -> tuple:
        return (self.dtype.name, len(self.shape), self._contig)

    def _flat(self) -> KernelArray:
        """This (contiguous) tensor as a 1-D kernel argument."""
        if len(self.shape) == 1:
            return self
        n, isz = self.numel(), self.dtype.itemsize
        return ArrayArg(self._ptr, (n,), (isz,), self.dtype.name, isz, True)

    # -- properties --------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def dim(self) -> int:
        return len(self.shape)

    def size(self, dim: int | None = None):
        return self.shape if dim is None else self.shape[dim]

    def numel(self) -> int:
        return numel(self.shape)

    def stride(self, dim: int | None = None):
        return self._strides if dim is None else self._strides[dim]

    def storage_offset(self) -> int:
        return (self._ptr - self._storage.ptr) // self.dtype.itemsize

    def data_ptr(self) -> int:
        return self._ptr

    def element_size(self) -> int:
        return self.dtype.itemsize

    def is_contiguous(self) -> bool:
        return self._contig

    @property
    def device(self) -> Device:
        return DEVICE

    @property
    def is_cuda(self) -> bool:
        return True

    @property
    def is_floating_point(self) -> bool:
        return self.dtype.kind == "f"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def record_stream(self, stream) -> None:
        """Mark this tensor's memory as used on ``stream``: its reuse waits for it."""
        if self._storage.block is not None:
            _memory.allocator.record_stream(self._storage.block, stream)

    # -- views ---------------------------------------------------------------------
    def _dim(self, d: int, extra: int = 0) -> int:
        n = self.ndim + extra
        if d.__class__ is not int and not isinstance(d, (int, np.integer)):
            raise TypeError(f"expected a dimension as an int, got {d!r}")
        if not -max(n, 1) <= d < max(n, 1):
            raise IndexError(f"dimension {d} is out of range for a tensor of {self.ndim} dimensions")
        return d % max(n, 1)

    @_differentiable_view("reshape")
    def view(self, *shape) -> Tensor:
        """The same memory seen with another shape (no copy); see ``reshape``."""

        shape = infer_shape(shape, self.numel())
        strides = view_strides(self.shape, self._strides, shape)
        if strides is None:
            raise ValueError(
                f"view of shape {shape} is not compatible with the tensor's shape {self.shape} "
                f"and strides {self._strides}; use .reshape() (which copies when needed)"
            )
        return self._view(shape, strides)

    @_differentiable_view("reshape")
    def reshape(self, *shape) -> Tensor:
        """``view`` when the memory allows it, otherwise a contiguous copy."""

        shape = infer_shape(shape, self.numel())
        strides = view_strides(self.shape, self._strides, shape)
        if strides is not None:
            return self._view(shape, strides)
        return self.contiguous().view(shape)

    @_differentiable_view("permute")
    def permute(self, *dims) -> Tensor:
        dims = tuple(dims[0]) if len(dims) == 1 and isinstance(dims[0], (tuple, list)) else dims
        dims = tuple(self._dim(d) for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            raise ValueError(f"expected a permutation of {self.ndim} dimensions, got {dims}")
        return self._view([self.shape[d] for d in dims], [self._strides[d] for d in dims])

    def transpose(self, d0: int, d1: int) -> Tensor:
        dims = list(range(self.ndim))
        d0, d1 = self._dim(d0), self._dim(d1)
        dims[d0], dims[d1] = dims[d1], dims[d0]
        return self.permute(dims)

    def t(self) -> Tensor:
        if len(self.shape) != 2:
            if len(self.shape) > 2:
                raise ValueError(f"t() expects a tensor of at most 2 dimensions, got {self.ndim}")
            return self
        if self._ag is not None and is_grad_enabled():  # recorded, as every view of such a tensor
            return self.permute(1, 0)
        (rows, cols), (row_stride, col_stride) = self.shape, self._strides  # the common case, in one step
        return self._view((cols, rows), (col_stride, row_stride))

    @property
    def T(self) -> Tensor:
        return self.permute(list(reversed(range(self.ndim))))

    @_differentiable_view("reshape")
    def unsqueeze(self, dim: int) -> Tensor:
        dim = self._dim(dim, extra=1)
        shape, strides = list(self.shape), list(self._strides)
        stride = strides[dim] * shape[dim] if dim < self.ndim else 1
        shape.insert(dim, 1)
        strides.insert(dim, stride)
        return self._view(shape, strides)

    @_differentiable_view("reshape")
    def squeeze(self, dim: int | tuple | None = None) -> Tensor:
        """Without the dimensions of size 1 among ``dim`` (an int or a tuple of them; all
        of them if None); those of other sizes stay, as in PyTorch."""
        if dim is None:
            dims = set(range(self.ndim))
        else:
            dims = {self._dim(d) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
        keep = [i for i, d in enumerate(self.shape) if d != 1 or i not in dims]
        return self._view([self.shape[i] for i in keep], [self._strides[i] for i in keep])

    @_differentiable_view("narrow")
    def narrow(self, dim: int, start: int, length: int) -> Tensor:
        dim = self._dim(dim)
        begin = start + self.shape[dim] if start < 0 else start
        if not (0 <= begin and length >= 0 and begin + length <= self.shape[dim]):
            raise IndexError(f"narrow({dim}, {start}, {length}) is out of range for size {self.shape[dim]}")
        shape = list(self.shape)
        shape[dim] = length
        return self._view(shape, self._strides, begin * self._strides[dim])

    @_differentiable_view("expand")
    def expand(self, *sizes) -> Tensor:

        sizes = _shape.expanded_sizes(self.shape, sizes)
        return self._view(sizes, broadcast_strides(self.shape, self._strides, sizes))

    def expand_as(self, other: Tensor) -> Tensor:
        return self.expand(other.shape)

    def __getitem__(self, index) -> Tensor:
        """NumPy's indexing. Integers, slices (of any step: a negative one gives
        negative strides), None and ``...`` give a view; integer arrays and
        boolean masks (tensors, NumPy arrays, lists) a new tensor
        (``_indexing_functions``; out-of-range indices in a tensor are clamped,
        see there). ``x[mask]`` with a mask tensor reads how many elements it
        selects, so it is refused inside a graph capture.

        Examples
        --------
        >>> import tensorplay as tp
        >>> x = tp.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        >>> x[:, ::-1].tolist()
        [[3.0, 2.0, 1.0], [6.0, 5.0, 4.0]]
        >>> x[tp.tensor([1, 0, 1]), 2].tolist()
        [6.0, 3.0, 6.0]
        >>> x[x > 3.5].tolist()
        [4.0, 5.0, 6.0]
        """
        plan = parse_index(self.shape, self._strides, index)
        if plan.arrays:
            return self._getitem_arrays(index, plan)  # added by _indexing_functions
        if self._ag is None or not is_grad_enabled():
            return self._view(plan.shape, plan.strides, plan.offset)
        return _record_view("index", lambda x, _: x._view(plan.shape, plan.strides, plan.offset), self, (index,), {})

    def __setitem__(self, index, value) -> None:
        """``x[index] = value`` (NumPy's rules; ``value`` broadcast and cast to
        ``x.dtype``). Of repeated integer indices the last write wins; a mask
        tensor writes where it is True, inside a graph capture too."""
        if self._ag is not None or getattr(value, "_ag", None) is not None:
            refuse_in_place("x[...] = value", self, value)
        plan = parse_index(self.shape, self._strides, index)
        if plan.arrays:
            self._setitem_arrays(plan, value)  # added by _indexing_functions
            return
        target = self._view(plan.shape, plan.strides, plan.offset)
        if isinstance(value, (list, tuple)):
            value = np.asarray(value)
        if not isinstance(value, (Tensor, np.ndarray)):
            target.fill_(value)
            return
        while value.ndim > target.ndim and value.shape[0] == 1:  # leading 1s dropped, as NumPy broadcasts
            value = value[0]
        target.copy_(value)

    # -- host readback -----------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """A host copy (waits for the current stream; not allowed during capture)."""
        return self._read().reshape(self.shape)

    def item(self):
        """The value of a one-element tensor as a Python number."""
        if self.numel() != 1:
            raise ValueError(f"only one-element tensors can be converted to Python numbers, got shape {self.shape}")
        return self._read()[0].item()

    def _read(self) -> np.ndarray:
        """The elements, in order, as a new flat host array."""
        s = current_stream()
        refuse_host_transfer("reading a tensor back to the host (numpy/item/tolist/bool)", s)
        nbytes = self.numel() * self.dtype.itemsize
        if not nbytes:
            return np.empty(0, self.dtype.np)
        src = self if self._contig else self.contiguous()
        return get_backend().read(src._ptr, nbytes, s._h).view(self.dtype.np)

    def tolist(self):
        return self.numpy().tolist()

    def __bool__(self) -> bool:
        if self.numel() != 1:
            raise ValueError(
                f"the truth value of a tensor with {self.numel()} elements is ambiguous; "
                "reduce it first, with t.any() or t.all()"
            )
        return bool(self.item())

    def __float__(self) -> float:
        return float(self.item())

    def __int__(self) -> int:
        return int(self.item())

    def __index__(self) -> int:
        if self.dtype.kind not in "ib" or self.numel() != 1:
            raise TypeError("only one-element integer tensors can be used as an index")
        return int(self.item())

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        if copy is False:  # NumPy 2's "never copy": a tensor's memory is the device's
            raise ValueError("np.asarray(tensor, copy=False): NumPy gets a copy of device memory; pass copy=None")
        a = self.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    def __repr__(self) -> str:
        if current_stream().is_capturing():
            return f"tensor(<capturing>, shape={self.shape}, dtype={self.dtype})"
        values = self.numpy()
        if self.dtype is dt.bfloat16:  # NumPy formats bfloat16 as integers; PyTorch prints it as floats
            values = values.astype(np.float32)
        body = np.array2string(values, separator=", ", prefix="tensor(")
        suffix = "" if self.dtype in (dt.float32, dt.int64, dt.bool) else f", dtype={self.dtype}"
        if not self.numel() and self.shape != (0,):  # "[]" alone would hide the shape
            suffix = f", size={self.shape}{suffix}"
        if self.grad_fn is not None:
            suffix += f", grad_fn={self.grad_fn!r}"
        elif self.requires_grad:
            suffix += ", requires_grad=True"
        return f"tensor({body}{suffix})"

    def __deepcopy__(self, memo) -> Tensor:
        """A copy in new memory (``copy.deepcopy`` of a module copies its
        parameters): same type, values, ``requires_grad`` and ``.grad``."""
        if id(self) in memo:
            return memo[id(self)]
        with no_grad():
            data = self.detach().clone()
        copied = type(self)._make(data._storage, data._ptr, data.shape, data._strides, data.dtype)
        memo[id(self)] = copied
        if self.requires_grad and self.is_leaf:
            copied.requires_grad_()
        if self.grad is not None:
            copied.grad = self.grad.__deepcopy__(memo)
        return copied

    # -- autograd ------------------------------------------------------------------------
    @property
    def requires_grad(self) -> bool:
        """Whether ops on this tensor are recorded so that ``backward`` reaches it."""
        return self._ag is not None and self._ag.requires_grad

    @requires_grad.setter
    def requires_grad(self, flag: bool) -> None:
        self.requires_grad_(flag)

    def requires_grad_(self, requires_grad: bool = True) -> Tensor:
        """Make this leaf tensor record the ops on it (gradients land in ``.grad``).

        Examples
        --------
        >>> import tensorplay as tp
        >>> w = tp.tensor([1.0, 2.0]).requires_grad_()
        >>> (w * w).sum().backward()
        >>> w.grad.tolist()
        [2.0, 4.0]
        """
        if self._ag is not None and self._ag.node is not None:
            if requires_grad:
                return self
            raise RuntimeError(
                "requires_grad can only be turned off on a leaf tensor; use .detach() for a tensor outside the graph"
            )
        if requires_grad and self.dtype.kind not in "fc":
            raise TypeError(
                f"only floating point tensors can require gradients, got {self.dtype}; "
                "make it floating point first (dtype=tp.float32, or .float())"
            )
        if self._ag is None:
            if requires_grad:
                self._ag = Meta(True)
        else:
            self._ag.requires_grad = bool(requires_grad)
        return self

    @property
    def grad(self) -> Tensor | None:
        """The gradient accumulated by ``backward`` (None before the first)."""
        return None if self._ag is None else self._ag.grad

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise TypeError(f"expected a Tensor or None as .grad, got {type(value).__name__}")
            if value.shape != self.shape or value.dtype is not self.dtype:
                raise ValueError(
                    f"a gradient must match its tensor: got shape {value.shape} and {value.dtype} "
                    f"for shape {self.shape} and {self.dtype}"
                )
        if self._ag is None:
            if value is None:
                return
            self._ag = Meta(False)
        self._ag.grad = value

    @property
    def grad_fn(self):
        """The node of the op that made this tensor (None for a leaf)."""
        return None if self._ag is None else self._ag.node

    @property
    def is_leaf(self) -> bool:
        return self._ag is None or self._ag.node is None

    def retain_grad(self) -> None:
        """Keep this non-leaf tensor's gradient in ``.grad`` during ``backward``."""
        if not self.requires_grad:
            raise RuntimeError("retain_grad() needs a tensor that requires grad")
        self._ag.retains_grad = True

    def detach(self) -> Tensor:
        """The same memory, as a tensor outside the autograd graph."""
        return Tensor._make(self._storage, self._ptr, self.shape, self._strides, self.dtype)

    def detach_(self) -> Tensor:
        """Take this tensor out of the autograd graph, in place."""
        self._ag = None
        return self

    # -- interop -------------------------------------------------------------------------
    @property
    def __cuda_array_interface__(self) -> dict:
        return cuda_array_interface(self)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        return to_dlpack(self, stream, max_version, dl_device, copy)

    def __dlpack_device__(self) -> tuple[int, int]:
        return dlpack_device()


TENSOR_TYPES.add(Tensor)


def add_methods(methods: dict) -> None:
    """Attach methods made by the layers built on Tensor (which import this
    module, so cannot be imported by it): see the class docstring."""
    for name, method in methods.items():
        setattr(Tensor, name, method)


# -- views, recorded for autograd ------------------------------------------------------------


def _index_of_narrow(x, dim, start, length):
    dim = x._dim(dim)
    start = start + x.shape[dim] if start < 0 else start
    return (slice(None),) * dim + (slice(start, start + length),)


def _scatter(g, shape, dtype, index):
    """A zero tensor of ``shape`` with ``g`` written at ``index``: the gradient of
    ``x[index]`` (itself differentiable, for gradients of gradients)."""
    with no_grad():
        out = Tensor._empty(shape, dtype).zero_()
        out[index] = g
    return record("IndexBackwardBackward", out, (g,), lambda gs: (gs[0][index],))


def _record_view(kind: str, method, x, args, kwargs):
    """Run the view ``method`` and record how its gradient goes back to ``x``."""
    with no_grad():
        out = method(x, *args, **kwargs)
    if kind == "reshape":
        back = lambda g: g.reshape(x.shape)  # noqa: E731
    elif kind == "permute":
        dims = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        order = [x._dim(d) for d in dims]
        inverse = [order.index(i) for i in range(len(order))]
        back = lambda g: g.permute(inverse)  # noqa: E731
    elif kind == "expand":
        back = lambda g: sum_to(g, x.shape)  # noqa: E731
    else:  # "index" or "narrow": the gradient lands in a zero tensor of x's shape
        index = args[0] if kind == "index" else _index_of_narrow(x, *args, **kwargs)
        back = lambda g: _scatter(g, x.shape, x.dtype, index)  # noqa: E731
    name = {"reshape": "ViewBackward", "permute": "PermuteBackward", "expand": "ExpandBackward"}
    return record(name.get(kind, "IndexBackward"), out, (x,), lambda gs: (back(gs[0]),))
