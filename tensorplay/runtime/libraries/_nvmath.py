"""nvmath-python, imported when a library is first needed, and the rules every
library call follows.

Importing ``nvmath`` takes about a second (it brings ``cuda.core`` and every
binding module) and needs the package: tensorplay imports it at the first
product that would use a library, never at its own import. ``bindings(name)``
gives ``nvmath.bindings.<name>`` or raises ``LibraryUnavailable`` with a
sentence saying what stopped it and what to do.

``library_calls()`` wraps every call into a library: while any capture is in
progress, this thread's capture mode is relaxed for the call, so that what the
library does on its first use of something (load its kernels' module, make a
handle, which allocates) does not break a global-mode capture, this thread's or
another's. The work it queues on a capturing stream is captured all the same.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext

from ..backend import get as get_backend
from ..capture import capture_state

__all__ = ["INSTALL", "LibraryUnavailable", "bindings", "data_type", "library_calls", "load", "version"]

INSTALL = "pip install 'nvmath-python[cu13]' (or [cu12] with a CUDA 12 driver), or tensorplay's extra of the same name"


class LibraryUnavailable(RuntimeError):
    """A math library cannot be used here; the message says why."""


def bindings(name: str):
    """``nvmath.bindings.<name>`` (``"cublas"``, ``"cublasLt"``...), imported now if not yet.

    Raises ``LibraryUnavailable`` when nvmath-python is not installed or cannot
    be imported."""
    try:
        importlib.import_module("nvmath")
        return importlib.import_module(f"nvmath.bindings.{name}")
    except ModuleNotFoundError as e:
        if e.name == "nvmath":
            raise LibraryUnavailable(f"nvmath-python is not installed; {INSTALL}") from None
        raise LibraryUnavailable(f"nvmath-python could not be imported ({type(e).__name__}: {e}); {INSTALL}") from None
    except Exception as e:  # a binary built for another Python, a dependency that fails to load...
        raise LibraryUnavailable(f"nvmath-python could not be imported ({type(e).__name__}: {e}); {INSTALL}") from None


def data_type(name: str) -> int:
    """The ``cudaDataType`` value named ``name`` (``"CUDA_R_16BF"``), once ``bindings`` has imported nvmath."""
    return int(importlib.import_module("nvmath").CudaDataType[name])


def version() -> str:
    """nvmath-python's version (once ``bindings`` has imported it)."""
    try:
        return importlib.import_module("nvmath").__version__
    except Exception:
        return "unknown version"


def load(title: str, start: Callable[[], str]) -> tuple[str | None, str]:
    """(why the library ``title`` cannot serve here, or None; its versions as
    text): on a GPU, ``start()`` imports its bindings, loads it and proves that
    it starts (under ``library_calls``, on a thread the device knows),
    returning the versions; on the simulator it is not called."""
    try:
        dev = get_backend()
        if dev.name != "cuda":
            raise LibraryUnavailable(f"{title} runs on a GPU only, and this is the CPU simulator")
        with library_calls():
            dev.ensure_thread()
            return None, start()
    except LibraryUnavailable as e:
        return str(e), ""
    except Exception as e:  # its create call refused, or bindings unlike the ones this was written for
        return f"{title} could not start ({type(e).__name__}: {e})", ""


@contextmanager
def library_calls() -> Iterator[None]:
    """Calls into a library: under relaxed capture mode for this thread while
    any capture is in progress (see the module docstring)."""
    relaxed = getattr(get_backend(), "_relaxed_capture_mode", None) if capture_state.active else None
    with relaxed() if relaxed is not None else nullcontext():
        yield
