"""Arguments spelled two ways: the array API standard's (``axis=``,
``keepdims=``) and PyTorch's (``dim=``, ``keepdim=``). A function takes both,
PyTorch's positional where PyTorch has it, the standard's keyword-only, and
resolves them here into one value."""

from __future__ import annotations

__all__ = ["either"]


def either(fn: str, std_name: str, std, torch_name: str, torch, std_default=None):
    """The value of an argument the standard calls ``std_name`` and PyTorch
    ``torch_name`` (whose default, None, means not given): PyTorch's when
    given, else the standard's; both given and different is a TypeError."""
    if torch is None:
        return std
    if not _same(std, std_default) and not _same(std, torch):
        raise TypeError(
            f"{fn}() got {std_name}={std!r} and {torch_name}={torch!r}, two spellings of one argument; pass one of them"
        )
    return torch


def _same(a, b) -> bool:
    if isinstance(a, list):
        a = tuple(a)
    if isinstance(b, list):
        b = tuple(b)
    return a is b or (type(a) is type(b) and isinstance(a, (int, tuple, str)) and a == b)
