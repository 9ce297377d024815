"""Compiler backends by name: each is a module whose ``compile_fn(fn, **options)``
returns the compiled callable."""

from __future__ import annotations

import importlib

__all__ = ["list_backends", "lookup"]

_BACKENDS = {"cudagraphs": "cudagraphs"}  # name -> module in this package


def list_backends() -> list[str]:
    """The names ``tp.compile(..., backend=...)`` takes."""
    return sorted(_BACKENDS)


def lookup(name: str):
    """The ``compile_fn`` of the backend called ``name``."""
    module = _BACKENDS.get(name) if isinstance(name, str) else None
    if module is None:
        known = ", ".join(repr(b) for b in list_backends())
        raise ValueError(f"unknown compiler backend {name!r}; the known backends are {known}")
    return importlib.import_module(f"{__name__}.{module}").compile_fn
