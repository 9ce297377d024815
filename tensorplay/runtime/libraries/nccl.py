"""NCCL, NVIDIA's collective library, bound through ``ctypes``: the GPU engine of
``tensorplay.distributed``.

The library is the one the ``nvidia-nccl-cu13`` (or ``-cu12``) wheel installs
(``TENSORPLAY_NCCL_LIBRARY`` names another file), found when a group first
asks for it, never at tensorplay's import. Its calls take device pointers, an
element count, a data type and a stream handle as integers, and queue kernels
on that stream: captured into graphs and conditional bodies like any launch.

**What a capture needs.** NCCL's calls are made on the caller's stream (no
stream of NCCL's own is joined through events), and NCCL's graph-mixing support
is off (``NCCL_GRAPH_MIXING_SUPPORT=0``, unless the environment sets it): with
it on, NCCL adds event-record and event-wait nodes around each captured call,
which a conditional body refuses (the driver: "conditional nodes do not support
EVENT_WAIT nodes"). Off, NCCL's rule is that no call is made eagerly while a
replayed graph's calls may still run: ``Communicator`` keeps it by waiting for
the device before an eager call that follows a launch of a graph holding calls
of its own (``note_replay``).

NVLink multicast stays off (``NCCL_NVLS_ENABLE=0`` unless set): the GPU
machines this runs on require it.

Like the rest of ``runtime``, nothing here knows ``Tensor``.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
from contextlib import contextmanager
from pathlib import Path

from ..backend import get as get_backend
from ..capture import capture_state, flush_fused, refuse_legacy_launch
from ._nvmath import LibraryUnavailable, library_calls

__all__ = ["DEFAULTS", "Communicator", "NcclError", "check_reduction", "data_type", "library", "unique_id", "version"]

DEFAULTS = {"NCCL_GRAPH_MIXING_SUPPORT": "0", "NCCL_NVLS_ENABLE": "0"}  # see the module docstring
UNIQUE_ID_BYTES = 128
INSTALL = "pip install nvidia-nccl-cu13 (nvidia-nccl-cu12 with a CUDA 12 driver), or tensorplay's cu13 extra"

# ncclDataType_t and ncclRedOp_t (nccl.h); the element types with no NCCL type of their own move as bytes
_TYPES = {
    "int8": 0, "uint8": 1, "bool": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
    "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9, "complex64": 7, "complex128": 8,
}  # fmt: skip
_OPS = {"SUM": 0, "PROD": 1, "MAX": 2, "MIN": 3, "AVG": 4}
_BYTES = 1  # ncclUint8, for what only moves
_lock = threading.Lock()
_lib = None
_reason: str | None = None


class _UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]  # passed by value to ncclCommInitRank


class NcclError(RuntimeError):
    """A call NCCL refused or failed; the message carries NCCL's own words."""


def data_type(dtype: str, itemsize: int, op: str | None) -> tuple[int, int]:
    """(ncclDataType_t, elements of it per element) for ``dtype`` reduced by
    ``op`` (None: only moved). Complex numbers are pairs of their real type
    (summed and averaged part by part); types NCCL has none for move as bytes.
    Raises ``TypeError`` with a sentence where NCCL cannot reduce so."""
    if op is None:
        return (_TYPES[dtype], 2 if dtype.startswith("complex") else 1) if dtype in _TYPES else (_BYTES, itemsize)
    check_reduction(dtype, op)
    return _TYPES[dtype], 2 if dtype.startswith("complex") else 1


def check_reduction(dtype: str, op: str) -> None:
    """Raise ``TypeError`` with a sentence where NCCL cannot reduce ``dtype``
    tensors by ``op``. tensorplay's own engine refuses the same, so that a
    program that runs on the simulator runs on GPUs with NCCL too."""
    if dtype not in _TYPES:
        raise TypeError(f"NCCL cannot reduce {dtype} tensors: cast them to a wider type first (int32 or float32)")
    if dtype.startswith("complex") and op not in ("SUM", "AVG"):
        raise TypeError(f"NCCL reduces complex tensors with SUM and AVG only, not {op}")


def reduction(dtype: str, op: str) -> int:
    """The ncclRedOp_t of ``op`` on ``dtype``: on bools (bytes to NCCL) SUM is
    a logical or and PROD a logical and, as PyTorch and NumPy give them."""
    if dtype == "bool":
        op = {"SUM": "MAX", "PROD": "MIN"}.get(op, op)
    return _OPS[op]


def _candidates() -> list[str]:
    named = os.environ.get("TENSORPLAY_NCCL_LIBRARY", "")
    if named:
        return [named]
    found = []
    try:
        spec = importlib.util.find_spec("nvidia.nccl")
    except (ImportError, ValueError):
        spec = None
    for root in (spec.submodule_search_locations or []) if spec is not None else []:
        found += [str(p) for p in sorted(Path(root, "lib").glob("libnccl.so*"))]
    return [*found, "libnccl.so.2"]  # then wherever the system's loader finds it


def library():
    """The loaded NCCL (a ``ctypes.CDLL``), loaded now if not yet; raises
    ``LibraryUnavailable`` with a sentence where none loads."""
    global _lib, _reason
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is None and _reason is None:
            errors = []
            for path in _candidates():
                try:
                    lib = ctypes.CDLL(path)
                    break
                except OSError as e:
                    errors.append(f"{path}: {e}")
            else:
                _reason = f"NCCL is not installed ({'; '.join(errors)}); {INSTALL}"
            if _reason is None:
                _declare(lib)
                _lib = lib
    if _lib is None:
        raise LibraryUnavailable(_reason)
    return _lib


def _declare(lib) -> None:
    p, i, size = ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t
    lib.ncclGetErrorString.restype = ctypes.c_char_p
    lib.ncclGetLastError.restype = ctypes.c_char_p
    lib.ncclGetLastError.argtypes = [p]
    lib.ncclGetUniqueId.argtypes = [ctypes.POINTER(_UniqueId)]
    lib.ncclCommInitRank.argtypes = [ctypes.POINTER(p), i, _UniqueId, i]
    lib.ncclAllReduce.argtypes = [p, p, size, i, i, p, p]
    lib.ncclBroadcast.argtypes = [p, p, size, i, i, p, p]
    lib.ncclAllGather.argtypes = [p, p, size, i, p, p]
    lib.ncclReduceScatter.argtypes = [p, p, size, i, i, p, p]
    lib.ncclSend.argtypes = lib.ncclRecv.argtypes = [p, size, i, i, p, p]
    lib.ncclCommGetAsyncError.argtypes = [p, ctypes.POINTER(i)]
    for name in ("ncclCommDestroy", "ncclCommAbort", "ncclCommFinalize"):
        getattr(lib, name).argtypes = [p]


def _check(what: str, result: int, comm=None) -> None:
    if result:
        lib = _lib
        said = lib.ncclGetErrorString(result).decode(errors="replace")
        last = (lib.ncclGetLastError(comm) or b"").decode(errors="replace")
        raise NcclError(f"NCCL's {what} failed: {said}{' (' + last + ')' if last else ''}")


def version() -> str:
    """NCCL's version, ``"2.32.6"``."""
    code = ctypes.c_int()
    _check("ncclGetVersion", library().ncclGetVersion(ctypes.byref(code)))
    major, rest = divmod(code.value, 10000) if code.value >= 10000 else divmod(code.value, 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def unique_id() -> bytes:
    """A new group's id (rank 0 makes it; every rank passes it to ``Communicator``)."""
    uid = _UniqueId()
    _check("ncclGetUniqueId", library().ncclGetUniqueId(ctypes.byref(uid)))
    return ctypes.string_at(ctypes.addressof(uid), UNIQUE_ID_BYTES)


class Communicator:
    """Rank ``rank`` of the NCCL group of ``world`` ranks named ``uid`` (every
    rank makes its own at the same time), on this process's device.

    Each call queues NCCL's work on the stream whose handle it is given; see
    the module docstring for what a capture needs. ``abort()`` ends whatever
    of the group's work still runs (its kernels return), from any thread."""

    def __init__(self, world: int, rank: int, uid: bytes) -> None:
        for name, value in DEFAULTS.items():
            os.environ.setdefault(name, value)
        lib = library()
        self.world, self.rank = world, rank
        self._replayed = False  # a graph holding its calls was launched since the device was waited for
        dev = get_backend()
        dev.ensure_thread()
        comm = ctypes.c_void_p()
        with library_calls():
            raw = _UniqueId.from_buffer_copy(uid)
            _check("ncclCommInitRank", lib.ncclCommInitRank(ctypes.byref(comm), world, raw, rank))
        self._comm = comm
        self._lock = threading.Lock()

    # -- queued calls: pointers and counts as integers, ``s`` a tensorplay stream
    def all_reduce(self, send: int, recv: int, count: int, dtype: int, op: int, s) -> None:
        self._queue("ncclAllReduce", s, send, recv, count, dtype, op)

    def broadcast(self, send: int, recv: int, count: int, dtype: int, root: int, s) -> None:
        self._queue("ncclBroadcast", s, send, recv, count, dtype, root)

    def all_gather(self, send: int, recv: int, count: int, dtype: int, s) -> None:
        self._queue("ncclAllGather", s, send, recv, count, dtype)

    def reduce_scatter(self, send: int, recv: int, count: int, dtype: int, op: int, s) -> None:
        self._queue("ncclReduceScatter", s, send, recv, count, dtype, op)

    def send(self, buf: int, count: int, dtype: int, peer: int, s) -> None:
        self._queue("ncclSend", s, buf, count, dtype, peer)

    def recv(self, buf: int, count: int, dtype: int, peer: int, s) -> None:
        self._queue("ncclRecv", s, buf, count, dtype, peer)

    @contextmanager
    def group(self):
        """Calls made inside run together (NCCL's group): sends and receives
        that pair with each other across ranks."""
        _check("ncclGroupStart", library().ncclGroupStart())
        try:
            yield
        finally:
            _check("ncclGroupEnd", library().ncclGroupEnd(), self._comm)

    def _queue(self, name: str, s, *args) -> None:
        if self._comm is None:
            raise NcclError(f"{name}: this rank's NCCL communicator was closed")
        if capture_state.active:
            refuse_legacy_launch(name, s)
            flush_fused()
        elif self._replayed:
            self._replayed = False
            get_backend().synchronize()  # a replay's calls may still run: NCCL takes no eager call beside them
        with library_calls():
            _check(name, getattr(_lib, name)(*args, self._comm, s.handle), self._comm)

    def note_replay(self) -> None:
        """A graph holding calls of this communicator was launched: the next
        eager call waits for the device first (see the module docstring)."""
        self._replayed = True

    # -- state
    def async_error(self) -> str | None:
        """NCCL's words for an error its work met since (None: none)."""
        if self._comm is None:
            return None
        code = ctypes.c_int()
        _check("ncclCommGetAsyncError", _lib.ncclCommGetAsyncError(self._comm, ctypes.byref(code)))
        if code.value in (0, 7):  # success, in progress
            return None
        return _lib.ncclGetErrorString(code.value).decode(errors="replace")

    def abort(self) -> None:
        """End the group's work that still runs and free the communicator."""
        with self._lock:
            comm, self._comm = self._comm, None
        if comm is not None:
            _lib.ncclCommAbort(comm)

    def close(self) -> None:
        """Free the communicator once its work is done (every rank calls it)."""
        with self._lock:
            comm, self._comm = self._comm, None
        if comm is not None:
            get_backend().synchronize()
            _check("ncclCommFinalize", _lib.ncclCommFinalize(comm), comm)
            _check("ncclCommDestroy", _lib.ncclCommDestroy(comm))
