"""``tp.compile``: run a function of tensors faster, through a compiler backend.

One backend exists, ``"cudagraphs"`` (``backends/cudagraphs.py``): it captures
the function into a CUDA graph per argument signature and replays it through
``CUDAGraph.stage_and_launch``.
"""

from __future__ import annotations

from .._stale import StaleOutputError, config
from ._compile import compile  # noqa: A004 (PyTorch's name)
from .backends import list_backends
from .backends.cudagraphs import CompiledFunction

__all__ = ["CompiledFunction", "StaleOutputError", "compile", "config", "list_backends"]
