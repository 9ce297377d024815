"""DLPack capsules in pure Python (ctypes), for zero-copy exchange with other libraries.

Implements DLPack 1.0's ``DLManagedTensorVersioned`` (a PyCapsule named
``"dltensor_versioned"``, with a version and flags: writable unless marked
read-only) and the legacy unversioned ``DLManagedTensor`` of DLPack 0.8
(``"dltensor"``), which consumers that ask for no version get: NumPy makes a
read-only array of those. The consumer renames the capsule ``"used_..."`` and
later calls the tensor's ``deleter`` to say it is done with the memory. Only the
standard library, NumPy, ml_dtypes (for bfloat16) and Numba (for the capsule
destructor) are imported, so this module sits below the rest of tensorplay.
"""

from __future__ import annotations

import ctypes
import functools
import weakref
from typing import Any

import ml_dtypes
import numpy as np
from numba import cfunc, types
from numba.core import cgutils
from numba.extending import intrinsic

__all__ = ["DLPACK_CPU", "DLPACK_CUDA", "DLPACK_VERSION", "DLPackView", "from_capsule", "to_capsule"]

DLPACK_CPU = 1  # kDLCPU
DLPACK_CUDA = 2  # kDLCUDA
DLPACK_VERSION = (1, 0)  # the versioned capsules made here
READ_ONLY = 1 << 0  # DLPACK_FLAG_BITMASK_READ_ONLY

# kDLInt, kDLUInt, kDLFloat, kDLBfloat, kDLComplex, kDLBool
_INT, _UINT, _FLOAT, _BFLOAT, _COMPLEX, _BOOL = 0, 1, 2, 4, 5, 6

# numpy dtype <-> (DLPack type code, bits); lanes is always 1.
_TO_DL: dict[np.dtype, tuple[int, int]] = {
    np.dtype(name): (code, np.dtype(name).itemsize * 8)
    for code, names in [
        (_FLOAT, ["float16", "float32", "float64"]),
        (_INT, ["int8", "int16", "int32", "int64"]),
        (_UINT, ["uint8", "uint16", "uint32", "uint64"]),
        (_BFLOAT, [ml_dtypes.bfloat16]),
        (_COMPLEX, ["complex64", "complex128"]),
        (_BOOL, ["bool"]),
    ]
    for name in names
}
_FROM_DL = {code_bits: dtype for dtype, code_bits in _TO_DL.items()}
_SUPPORTED = ", ".join(str(dtype) for dtype in _TO_DL)


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [
        ("code", ctypes.c_uint8),
        ("bits", ctypes.c_uint8),
        ("lanes", ctypes.c_uint16),
    ]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # void (*)(DLManagedTensor *)


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", _DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _Deleter),
    ]


class _DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", _DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", _Deleter),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", _DLTensor),
    ]


def _api(name: str, restype: Any, *argtypes: Any) -> Any:
    # Private prototypes, so the shared ctypes.pythonapi attributes stay untouched.
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_obj, _ptr, _str = ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p
_CapsuleDestructor = ctypes.CFUNCTYPE(None, _ptr)
_capsule_new = _api("PyCapsule_New", _obj, _ptr, _str, _ptr)
_capsule_is_valid = _api("PyCapsule_IsValid", ctypes.c_int, _obj, _str)
_capsule_get_name = _api("PyCapsule_GetName", _str, _obj)
_capsule_get_pointer = _api("PyCapsule_GetPointer", _ptr, _obj, _str)
_capsule_set_name = _api("PyCapsule_SetName", ctypes.c_int, _obj, _str)
# The capsule destructor sees a capsule whose refcount is already zero; passing it
# as py_object would resurrect it, so these take it as a raw pointer.
_raw_capsule_is_valid = _api("PyCapsule_IsValid", ctypes.c_int, _ptr, _str)
_raw_capsule_get_pointer = _api("PyCapsule_GetPointer", _ptr, _ptr, _str)
_err_fetch = _api("PyErr_Fetch", None, _ptr, _ptr, _ptr)
_err_restore = _api("PyErr_Restore", None, _ptr, _ptr, _ptr)

# Capsules keep a pointer to their name, so the names must live as long as the module.
_NAME = ctypes.c_char_p(b"dltensor")
_USED_NAME = ctypes.c_char_p(b"used_dltensor")
_VERSIONED_NAME = ctypes.c_char_p(b"dltensor_versioned")
_USED_VERSIONED_NAME = ctypes.c_char_p(b"used_dltensor_versioned")

# DLManagedTensor address -> everything it points into (struct, shape, strides, owner).
_LIVE: dict[int, tuple[Any, ...]] = {}


@_Deleter
def _deleter(managed_addr: int | None) -> None:
    # Called by the consumer, from any thread; ctypes takes the GIL for us.
    _LIVE.pop(managed_addr, None)


@_CapsuleDestructor
def _release_unconsumed(capsule_addr: int | None) -> None:
    # A capsule that was never consumed still owns its tensor.
    for name in (_NAME, _VERSIONED_NAME):
        if _raw_capsule_is_valid(capsule_addr, name):
            _deleter(_raw_capsule_get_pointer(capsule_addr, name))


@intrinsic
def _error_slots(typingctx: Any) -> Any:
    # Three PyObject* on the machine stack, for PyErr_Fetch to fill.
    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        slots = cgutils.alloca_once(builder, cgutils.voidptr_t, size=3)
        addrs = [builder.bitcast(builder.gep(slots, [cgutils.int32_t(i)]), cgutils.voidptr_t) for i in range(3)]
        return context.make_tuple(builder, sig.return_type, addrs)

    return types.UniTuple(types.voidptr, 3)(), codegen


@intrinsic
def _load_pointer(typingctx: Any, addr: Any) -> Any:
    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        return builder.load(builder.bitcast(args[0], cgutils.voidptr_t.as_pointer()))

    return types.voidptr(types.voidptr), codegen


@functools.cache
def _capsule_destructor() -> Any:
    """The capsules' destructor, compiled once (Numba ``cfunc``) on first export.

    A consumer that fails (NumPy refusing bfloat16, say) drops the capsule with its
    exception still pending, and Python code run then cannot even call a function;
    nor can Python code leave an exception set when it returns. So this machine code
    sets the pending error aside, runs ``_release_unconsumed`` and puts the error
    back, for the consumer's caller to see.
    """

    @cfunc(types.void(types.voidptr))
    def destroy(capsule: Any) -> None:
        kind, value, traceback = _error_slots()
        _err_fetch(kind, value, traceback)
        _release_unconsumed(capsule)
        # PyErr_Restore takes over the references that PyErr_Fetch handed us.
        _err_restore(_load_pointer(kind), _load_pointer(value), _load_pointer(traceback))

    return destroy


def to_capsule(
    data_ptr: int,
    shape: tuple[int, ...],
    strides_elems: tuple[int, ...],
    dtype: np.dtype,
    device_type: int,
    device_id: int,
    owner: object,
    versioned: bool = False,
    read_only: bool = False,
) -> Any:
    """Wrap memory at ``data_ptr`` in a ``"dltensor"`` PyCapsule, or with
    ``versioned`` a ``"dltensor_versioned"`` one of DLPack 1.0 (``read_only``
    sets its read-only flag).

    Parameters
    ----------
    data_ptr : int
        Address of the first element.
    shape, strides_elems : tuple of int
        Extent and stride (in elements, not bytes) of each dimension.
    dtype : numpy.dtype
        Element type; one of float16/32/64, bfloat16 (ml_dtypes'), complex64/128, int8/16/32/64, uint8/16/32/64,
        bool.
    device_type, device_id : int
        ``DLPACK_CPU`` or ``DLPACK_CUDA`` and the device ordinal.
    owner : object
        Kept alive until the consumer calls the deleter, or until the capsule is
        destroyed without being consumed.

    Returns
    -------
    PyCapsule
        To be returned from ``__dlpack__``.

    Examples
    --------
    >>> a = np.arange(4.0)
    >>> class Exporter:
    ...     def __dlpack__(self, **kwargs):
    ...         ptr = a.ctypes.data
    ...         return to_capsule(ptr, a.shape, (1,), a.dtype, DLPACK_CPU, 0, a)
    ...     def __dlpack_device__(self):
    ...         return (DLPACK_CPU, 0)
    >>> np.from_dlpack(Exporter())
    array([0., 1., 2., 3.])
    """
    if np.dtype(dtype) not in _TO_DL:
        raise TypeError(f"expected one of {_SUPPORTED} for DLPack export, got {dtype}")
    shape, strides_elems = tuple(map(int, shape)), tuple(map(int, strides_elems))
    if len(strides_elems) != len(shape):
        raise ValueError(f"expected {len(shape)} strides for shape {shape}, got strides {strides_elems}")
    if device_type not in (DLPACK_CPU, DLPACK_CUDA):
        raise ValueError(
            f"expected device_type DLPACK_CPU ({DLPACK_CPU}) or DLPACK_CUDA ({DLPACK_CUDA}), got {device_type}"
        )
    shape_arr = (ctypes.c_int64 * len(shape))(*shape)
    strides_arr = (ctypes.c_int64 * len(shape))(*strides_elems)
    managed = _DLManagedTensorVersioned() if versioned else _DLManagedTensor()
    if versioned:
        managed.version = _DLPackVersion(*DLPACK_VERSION)
        managed.flags = READ_ONLY if read_only else 0
    tensor = managed.dl_tensor
    tensor.data = data_ptr
    tensor.device = _DLDevice(device_type, device_id)
    tensor.ndim = len(shape)
    tensor.dtype = _DLDataType(*_TO_DL[np.dtype(dtype)], 1)
    tensor.shape = ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64))
    tensor.strides = ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64))
    managed.deleter = _deleter
    addr = ctypes.addressof(managed)
    _LIVE[addr] = (managed, shape_arr, strides_arr, owner)
    try:
        return _capsule_new(addr, _VERSIONED_NAME if versioned else _NAME, _capsule_destructor().address)
    except BaseException:
        _LIVE.pop(addr, None)
        raise


def _call_deleter(managed_addr: int, struct: type) -> None:
    deleter = struct.from_address(managed_addr).deleter
    if deleter:  # DLPack allows a NULL deleter
        deleter(managed_addr)


class DLPackView:
    """A consumed DLPack tensor: where its memory is and how to read it.

    The memory stays valid until :meth:`release` is called or the view is garbage
    collected, whichever comes first; either calls the producer's deleter once.

    Attributes
    ----------
    data_ptr : int
        Address of the first element (``data + byte_offset``).
    shape, strides_elems : tuple of int
        Extent and stride in elements of each dimension.
    dtype : numpy.dtype
    device_type, device_id : int
    read_only : bool
        The producer marked the memory read-only (versioned capsules only).
    """

    def __init__(self, managed_addr: int, struct: type = _DLManagedTensor) -> None:
        managed = struct.from_address(managed_addr)
        tensor = managed.dl_tensor
        self.read_only: bool = struct is _DLManagedTensorVersioned and bool(managed.flags & READ_ONLY)
        ndim = tensor.ndim
        self.data_ptr: int = (tensor.data or 0) + tensor.byte_offset
        self.shape: tuple[int, ...] = tuple(tensor.shape[:ndim])
        self.strides_elems: tuple[int, ...] = tuple(tensor.strides[:ndim]) if tensor.strides else _c_strides(self.shape)
        self.dtype: np.dtype = _FROM_DL[tensor.dtype.code, tensor.dtype.bits]
        self.device_type: int = tensor.device.device_type
        self.device_id: int = tensor.device.device_id
        self._finalizer = weakref.finalize(self, _call_deleter, managed_addr, struct)

    def release(self) -> None:
        """Call the producer's deleter now; later calls do nothing."""
        self._finalizer()

    @property
    def released(self) -> bool:
        """Whether the producer's deleter has been called."""
        return not self._finalizer.alive

    def __repr__(self) -> str:
        return (
            f"DLPackView(data_ptr=0x{self.data_ptr:x}, shape={self.shape}, "
            f"strides_elems={self.strides_elems}, dtype={self.dtype}, "
            f"device=({self.device_type}, {self.device_id}), "
            f"released={self.released})"
        )


def _c_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    # C-contiguous strides in elements, for producers that leave strides NULL.
    return tuple(int(np.prod(shape[i + 1 :])) for i in range(len(shape)))


def from_capsule(capsule: Any) -> DLPackView:
    """Consume a ``"dltensor"`` or ``"dltensor_versioned"`` capsule, as returned
    by ``__dlpack__()``.

    The capsule is renamed ``"used_..."`` so the producer will not free it; the
    returned view calls the producer's deleter when released or collected, so keep
    the view alive for as long as its memory is used.

    Raises
    ------
    TypeError
        If ``capsule`` is not a PyCapsule or holds an unsupported element type.
    ValueError
        If the capsule was already consumed, is not a DLPack capsule, or is of a
        DLPack major version other than 1.

    Examples
    --------
    >>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
    >>> view = from_capsule(a[:, ::2].__dlpack__())
    >>> view.shape, view.strides_elems, view.dtype
    ((2, 2), (3, 2), dtype('float32'))
    >>> view.release()
    """
    if type(capsule).__name__ != "PyCapsule":
        raise TypeError(f"expected a PyCapsule from __dlpack__(), got {type(capsule).__name__}")
    if _capsule_is_valid(capsule, _VERSIONED_NAME):
        name, used, struct = _VERSIONED_NAME, _USED_VERSIONED_NAME, _DLManagedTensorVersioned
    elif _capsule_is_valid(capsule, _NAME):
        name, used, struct = _NAME, _USED_NAME, _DLManagedTensor
    else:
        found = _capsule_get_name(capsule)
        if found in (_USED_NAME.value, _USED_VERSIONED_NAME.value):
            raise ValueError(
                "DLPack capsule was already consumed; a capsule can be imported "
                "only once, so call __dlpack__() again for a fresh one"
            )
        raise ValueError(f"expected a 'dltensor' or 'dltensor_versioned' capsule, got one named {found!r}")
    addr = _capsule_get_pointer(capsule, name)
    managed = struct.from_address(addr)
    # Checked before consuming, so the producer still frees the unused capsule.
    if struct is _DLManagedTensorVersioned and managed.version.major != DLPACK_VERSION[0]:
        raise ValueError(
            f"DLPack capsule of version {managed.version.major}.{managed.version.minor} is not supported; "
            f"expected version {DLPACK_VERSION[0]}.x"
        )
    dl_type = managed.dl_tensor.dtype
    if dl_type.lanes != 1 or (dl_type.code, dl_type.bits) not in _FROM_DL:
        raise TypeError(
            f"DLPack tensor of type code {dl_type.code}, bits {dl_type.bits}, lanes "
            f"{dl_type.lanes} is not supported; supported: {_SUPPORTED}"
        )
    # Rename first: a failure after this leaks the tensor rather than freeing it twice.
    _capsule_set_name(capsule, used)
    return DLPackView(addr, struct)
