"""Reverse-mode automatic differentiation: a tape of the ops on tensors that
require grad, walked backwards by ``backward()`` and ``grad()``."""

from __future__ import annotations

from .._grad_mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from ._engine import backward, grad
from ._function import Function, FunctionCtx

__all__ = [
    "Function", "FunctionCtx", "backward", "enable_grad", "grad", "is_grad_enabled", "no_grad", "set_grad_enabled",
]  # fmt: skip
