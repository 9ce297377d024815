"""A compiled function's arguments and results as trees: containers walked,
tensors taken out, everything else kept as a value.

The containers walked, nested freely, are tuples, lists, namedtuples, dicts,
``OrderedDict`` and ``defaultdict`` (PyTorch's pytree walks the same). A
tensor anywhere in them is an argument of its own, keyed by its shape, dtype
and strides and staged into the graph; any other value is part of the key
(it is baked into the capture), so it must be hashable.

A call's *signature* (``signature``) is its arguments' tree with each tensor
reduced to ``(shape, dtype, strides)``, plus grad mode and which tensors
require grad, and which tensors share memory. ``differences`` says, in words,
what tells a set of signatures apart (for the warning at the signature limit).
"""

from __future__ import annotations

import enum
import math
from collections import OrderedDict, defaultdict

import numpy as np

from ..._dtype import DType
from ..._overlap import overlap_groups
from ..._tensor import Tensor
from ...autograd import is_grad_enabled

__all__ = ["call_of", "differences", "flatten", "grad_part", "signature", "unflatten"]

_TENSOR, _VALUE, _NODE = "tensor", "value", "node"
_NAN = float("nan")  # NaN != NaN, but a key holding this one object matches itself
# Values a result may hold as they are: they cannot hold a tensor, so one capture's are every call's.
_CONSTANTS = (type(None), bool, int, float, complex, str, bytes, range, slice, type, enum.Enum, np.generic, DType)


# -- containers ------------------------------------------------------------------------
def _node(obj):
    """``(kind, meta, children)`` of a container the trees walk, or None."""
    kind = type(obj)
    if kind is tuple or kind is list:
        return kind, None, obj
    if kind is dict or kind is OrderedDict:
        keys = tuple(obj)
        return kind, keys, [obj[k] for k in keys]
    if kind is defaultdict:
        keys = tuple(obj)
        return kind, (obj.default_factory, keys), [obj[k] for k in keys]
    if isinstance(obj, tuple) and hasattr(kind, "_fields") and hasattr(kind, "_make"):  # a namedtuple
        return kind, None, obj
    return None


def _rebuild(kind, meta, children: list):
    if kind is tuple or kind is list:
        return kind(children)
    if kind is dict or kind is OrderedDict:
        return kind(zip(meta, children, strict=True))
    if kind is defaultdict:
        return defaultdict(meta[0], zip(meta[1], children, strict=True))
    return kind._make(children)


def _child_paths(kind, meta, n: int, path: str) -> list[str]:
    """How a message names each child of a container at ``path``."""
    if kind is dict or kind is OrderedDict:
        return [f"{path}[{k!r}]" for k in meta]
    if kind is defaultdict:
        return [f"{path}[{k!r}]" for k in meta[1]]
    if kind is tuple or kind is list:
        return [f"{path}[{i}]" for i in range(n)]
    return [f"{path}.{field}" for field in kind._fields]


# -- taking trees apart and building them again ----------------------------------------
def _spec(obj, tensors: list, path: str, opaque: list | None = None):
    """``obj``'s structure, its tensors appended to ``tensors``. An argument's
    other values must be hashable (they become part of the key); a result's
    (``opaque`` given) that are neither constants nor containers are noted there."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return (_TENSOR, obj.shape, obj.dtype, obj.stride())
    node = _node(obj)
    if node is not None:
        kind, meta, children = node
        paths = _child_paths(kind, meta, len(children), path)
        specs = tuple(_spec(v, tensors, p, opaque) for v, p in zip(children, paths, strict=True))
        return (_NODE, kind, meta, specs)
    if isinstance(obj, (float, np.floating)):  # keyed with the sign, so that 0.0 and -0.0 are two signatures
        return (_VALUE, type(obj), _NAN if obj != obj else obj, math.copysign(1.0, obj))
    if opaque is not None:
        if not isinstance(obj, _CONSTANTS) and obj is not Ellipsis:
            opaque.append((path, type(obj).__name__))
    else:
        try:
            hash(obj)
        except TypeError:
            raise TypeError(
                "expected tensors, or hashable values that the graph bakes in, as a compiled function's "
                f"arguments; {path} is a {type(obj).__name__}, which is not hashable"
            ) from None
    return (_VALUE, type(obj), obj)


def flatten(obj):
    """``(spec, tensors, opaque)`` of a function's result: its structure, its
    tensors in order, and ``(path, type name)`` of each value in it that is
    neither a constant nor a container walked (it might hold tensors that a
    replay would not hand out afresh)."""
    tensors: list[Tensor] = []
    opaque: list = []
    return _spec(obj, tensors, "its result", opaque), tensors, opaque


def unflatten(spec, tensors):
    """Rebuild what ``flatten`` took apart, with ``tensors`` in the tensors' places."""
    return _build(spec, iter(tensors))


def _build(spec, tensors):
    tag = spec[0]
    if tag is _TENSOR:
        return next(tensors)
    if tag is _NODE:
        return _rebuild(spec[1], spec[2], [_build(s, tensors) for s in spec[3]])
    return spec[2]


# -- signatures ------------------------------------------------------------------------
def signature(args: tuple, kwargs: dict):
    """``(key, tensors)`` of a call: for positional tensors only, ``_grad_key``
    and their shapes, dtypes and strides; else ``("tree", _grad_key, args'
    specs, kwargs' specs)``; either way followed by which tensors share memory
    (``_aliases``)."""
    if not kwargs and all(isinstance(a, Tensor) for a in args):
        return (_grad_key(args), *[(a.shape, a.dtype, a.stride()) for a in args], _aliases(args)), args
    tensors: list[Tensor] = []
    positional = tuple(_spec(v, tensors, f"argument {i}") for i, v in enumerate(args))
    named = tuple((k, _spec(kwargs[k], tensors, f"argument {k!r}")) for k in sorted(kwargs))
    return ("tree", _grad_key(tensors), positional, named, _aliases(tensors)), tensors


def call_of(key: tuple, tensors) -> tuple[tuple, dict]:
    """The arguments of a call of signature ``key`` with ``tensors`` in the tensors' places."""
    if key[0] != "tree":
        return tuple(tensors), {}
    it = iter(tensors)
    return tuple(_build(s, it) for s in key[2]), {k: _build(s, it) for k, s in key[3]}


def _grad_key(tensors):
    """Grad mode and which tensors require grad, for a signature: False under
    ``no_grad`` (a graph captured so records nothing for autograd), else the
    indices of the tensors that require grad (the captured backward gives
    gradients to those only)."""
    return is_grad_enabled() and tuple(i for i, t in enumerate(tensors) if t.requires_grad)


def grad_part(key) -> tuple:
    """The indices of the tensor arguments that require grad, in a signature (see ``_grad_key``)."""
    return key[1 if key[0] == "tree" else 0] or ()


def _aliases(tensors) -> tuple:
    """Which of ``tensors`` share memory: ``()`` when none do, else per group
    of tensors whose bytes overlap (directly or through others), ``((index,
    byte offset of its data pointer from the group's lowest byte), ...)``."""
    groups = overlap_groups(tensors)
    return tuple(sorted(tuple(sorted((i, tensors[i].data_ptr() - lo) for i in members)) for lo, members in groups))


# -- what tells signatures apart -------------------------------------------------------
_ADVICE = {  # {path}: the argument the feature belongs to
    "shape": "keep the shapes fixed (pad to a few sizes)",
    "dtype": "keep the dtypes fixed",
    "strides": "pass tensors of one layout (.contiguous())",
    "value": "pass {path} as a tensor, which is staged at each call (a value is baked into the graph)",
    "identity": "pass the tensors of {path} in a tuple, list, dict or namedtuple, which are keyed by shape and dtype",
    "structure": "keep the arguments' structure fixed",
    "grad": "keep grad mode and requires_grad fixed",
    "aliasing": "pass tensors that share memory the same way at each call",
}


def differences(keys: list) -> list[tuple[str, list[str], str]]:
    """What tells the signatures ``keys`` apart: per feature that differs,
    ``(what, its values in words, advice)``, outer features first (what lies
    inside a structure that differs, and strides where shapes differ, left out)."""
    described = [_features(k) for k in keys]
    names = list(dict.fromkeys(name for d in described for name in d))
    found, structures, shapes = [], [], set()
    for name in names:
        seen = [d.get(name) for d in described]
        if len({None if f is None else f[0] for f in seen}) < 2:
            continue
        _, _, kind, path = next(f for f in seen if f is not None)
        if any(_inside(path, outer) for outer in structures) or (None in seen and structures):
            continue
        if kind == "strides" and path in shapes:
            continue
        structures += [path] if kind == "structure" else []
        shapes |= {path} if kind == "shape" else set()
        kinds = {f[2] for f in seen if f is not None}
        advice = _ADVICE["identity" if "identity" in kinds else kind].format(path=path)
        found.append((name, list(dict.fromkeys(f[1] for f in seen if f is not None)), advice))
    return found


def _inside(path: str, outer: str) -> bool:
    return outer == "" or path.startswith(outer + ".") or path.startswith(outer + "[")


def _features(key) -> dict:
    """A signature in words: feature name -> (comparable value, display, kind, path)."""
    if key[0] == "tree":
        _, grad, positional, named = key[:4]
    else:
        grad, positional, named = key[0], tuple((_TENSOR, *t) for t in key[1:-1]), ()
    given = (len(positional), tuple(k for k, _ in named))
    out = {
        "grad mode and which arguments require grad": (grad, "off" if grad is False else f"on, {grad}", "grad", "-"),
        "which arguments share memory": (key[-1], repr(key[-1]), "aliasing", "-"),
        "the arguments given": (given, _given(positional, named), "structure", ""),
    }
    for i, spec in enumerate(positional):
        _describe(spec, f"argument {i}", out)
    for k, spec in named:
        _describe(spec, f"argument {k!r}", out)
    return out


def _given(positional, named) -> str:
    words = f"{len(positional)} positional"
    return words + (f" and {', '.join(map(repr, (k for k, _ in named)))}" if named else "")


def _describe(spec, path: str, out: dict) -> None:
    tag = spec[0]
    if tag is _TENSOR:
        _, shape, dtype, strides = spec
        out[f"the shape of {path}"] = (shape, repr(shape), "shape", path)
        out[f"the dtype of {path}"] = (dtype, dtype.name, "dtype", path)
        out[f"the strides of {path}"] = (strides, repr(strides), "strides", path)
    elif tag is _NODE:
        _, kind, meta, children = spec
        shown = f"a {kind.__name__} of {len(children)}"
        out[f"the structure of {path}"] = ((kind, meta, len(children)), shown, "structure", path)
        for child, p in zip(children, _child_paths(kind, meta, len(children), path), strict=True):
            _describe(child, p, out)
    else:
        kind, value = spec[1], spec[2]
        if kind.__hash__ is object.__hash__:
            shown, why = f"an instance of {kind.__name__}, compared by identity: each new one is new", "identity"
        else:
            shown, why = repr(value), "value"
        out[f"the value of {path}"] = (spec[1:], shown, why, path)
