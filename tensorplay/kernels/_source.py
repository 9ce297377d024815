"""Kernels generated as Python source (fused chains, gather copies).

The text is what runs: it is compiled from the string itself, so what a user
prints is what the GPU executes. On a GPU the text is also written to a file of
the cache folder (``$TENSORPLAY_CACHE_DIR``, else ``~/.cache/tensorplay``, one
subfolder per kind of kernel) and compiled with Numba's ``cache=True``, so that
another process finds the compiled kernel there instead of compiling it again.
A text is self-contained: it imports what it calls.
"""

from __future__ import annotations

import hashlib
import importlib.util
import linecache
import os
from pathlib import Path

from numba import cuda

from ._target import DISK_CACHE

__all__ = ["cache_dir", "jit_source"]


def jit_source(name: str, text: str, kind: str, qualname: str, cache: bool = True):
    """The kernel ``name`` defined by ``text``, compiled by ``numba.cuda.jit``
    (kept on disk under the cache folder's ``kind`` on a GPU, unless not
    ``cache``); ``qualname`` is how DOT views and errors name it."""
    cache = cache and DISK_CACHE
    fn = (_from_file(name, text, kind) if cache else None) or _from_text(name, text, kind)
    fn.__qualname__ = qualname
    return cuda.jit(fn, cache=cache and fn.__module__.startswith("tensorplay_cached_"))


def cache_dir(kind: str) -> Path:
    """Where generated kernels of ``kind`` (and Numba's cache of them) are kept."""
    root = os.environ.get("TENSORPLAY_CACHE_DIR") or Path.home() / ".cache" / "tensorplay"
    return Path(root) / kind


def _from_file(name: str, text: str, kind: str):
    """``name`` from a file of the cache folder holding ``text`` (written once,
    atomically); None when the folder cannot be written."""
    path = cache_dir(kind) / f"{name}_{hashlib.sha256(text.encode()).hexdigest()[:16]}.py"
    try:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text(text)
            os.replace(partial, path)
        spec = importlib.util.spec_from_file_location(f"tensorplay_cached_{kind}_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except OSError:
        return None
    return getattr(module, name)


def _from_text(name: str, text: str, kind: str):
    filename = f"<tensorplay {kind} kernel {name}>"
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace: dict = {"__name__": f"{__package__}.{kind}"}
    exec(compile(text, filename, "exec"), namespace)
    return namespace[name]
