"""The ``cudagraphs`` backend: one CUDA graph per argument signature.

A call's *signature* is the structure of its arguments (tuples, lists and
dicts are walked) with, for each tensor, its shape, dtype and strides, and for
any other value the value itself, which must be hashable: it is baked into the
capture, so another value is another signature. Per signature:

1. the first ``warmup`` calls run ``fn`` eagerly (its kernels are compiled
   there, outside any capture);
2. the next call captures ``fn`` once, on private copies of the tensor
   arguments (the graph's static inputs), into a ``CUDAGraph`` with a pool of
   its own;
3. that call and every later one copies the tensor arguments into the static
   inputs and replays, through ``CUDAGraph.stage_and_launch``: one launch.

The tensors returned are the graph's static outputs, the same tensors at every
call: the next call of the compiled function overwrites them (as PyTorch's
CUDA graphs do). ``.clone()`` what must outlive the next call. A function that
changes its arguments in place changes the private copies, not the caller's
tensors.

Calls run eagerly, never captured, when autograd must record them: grad mode
is on and a tensor argument requires grad, or the warm-up's outputs require
grad (parameters captured by the function). Graphs are freed with the compiled
function (or by ``reset()``).
"""

from __future__ import annotations

import functools
import math
import threading
import warnings

from ..._tensor import Tensor
from ...autograd import is_grad_enabled
from ...cuda.graphs import CUDAGraph, graph

__all__ = ["CompiledFunction", "compile_fn"]


SIGNATURE_LIMIT = 32  # graphs one compiled function keeps; later signatures run eagerly


def compile_fn(fn, warmup: int = 1) -> CompiledFunction:
    """``fn`` compiled by this backend (``tp.compile(fn, backend="cudagraphs")``)."""
    return CompiledFunction(fn, warmup)


class _Entry:
    """One signature: its eager calls so far, then its graph."""

    __slots__ = ("calls", "eager", "graph", "statics", "out_spec", "out_leaves")

    def __init__(self) -> None:
        self.calls = 0
        self.eager = False  # autograd records this signature: never captured
        self.graph: CUDAGraph | None = None
        self.statics: list[Tensor] = []
        self.out_spec = self.out_leaves = None


class CompiledFunction:
    """``fn`` replayed as CUDA graphs, one per argument signature.

    Examples
    --------
    >>> import tensorplay as tp
    >>> from tensorplay.compiler import compile
    >>> f = compile(lambda x: x * 2, backend="cudagraphs")
    >>> x = tp.ones(3)
    >>> [f(x).tolist() for _ in range(2)]  # warm-up, then capture and replay
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    >>> f.graph(x) is not None
    True
    """

    def __init__(self, fn, warmup: int = 1) -> None:
        if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0:
            raise ValueError(f"expected warmup to be a number of calls (0 or more), got {warmup!r}")
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._warmup = warmup
        self._entries: dict = {}
        self._lock = threading.RLock()  # one capture at a time
        self._warned = False

    def __call__(self, *args, **kwargs):
        key, tensors = _signature(args, kwargs)
        if tensors and _records_grad(tensors):
            return self._fn(*args, **kwargs)
        entry = self._entries.get(key)
        if entry is None or entry.graph is None:
            return self._first_calls(key, args, kwargs, tensors)
        entry.graph.stage_and_launch(entry.statics, tensors)
        return _unflatten(entry.out_spec, entry.out_leaves)

    def _first_calls(self, key, args, kwargs, tensors):
        """A signature not captured yet: warm up, or capture."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                if len(self._entries) >= SIGNATURE_LIMIT:
                    self._warn_limit()
                    return self._fn(*args, **kwargs)
                entry = self._entries[key] = _Entry()
            if entry.eager:
                return self._fn(*args, **kwargs)
            if entry.graph is None and entry.calls < self._warmup:
                entry.calls += 1
                out = self._fn(*args, **kwargs)
                entry.eager = _records_grad(_flatten(out)[1])
                return out
            if entry.graph is None and not self._capture(entry, key, tensors):
                return self._fn(*args, **kwargs)  # autograd records it: eager from now on
        entry.graph.stage_and_launch(entry.statics, tensors)
        return _unflatten(entry.out_spec, entry.out_leaves)

    def _capture(self, entry: _Entry, key, tensors) -> bool:
        """Capture ``fn`` on private copies of ``tensors``; False (and the
        signature turns eager) when its outputs record autograd."""
        statics = [t.clone() for t in tensors]
        if key[:1] == ("tree",):
            static_args, static_kwargs = _rebuild_call(key, statics)
        else:
            static_args, static_kwargs = tuple(statics), {}
        g = CUDAGraph()
        with graph(g):
            out = self._fn(*static_args, **static_kwargs)
        out_spec, out_leaves = _flatten(out)
        if _records_grad(out_leaves):
            entry.eager = True
            return False
        entry.graph, entry.statics, entry.out_spec, entry.out_leaves = g, statics, out_spec, out_leaves
        return True

    def _warn_limit(self) -> None:
        if not self._warned:
            self._warned = True
            name = getattr(self._fn, "__qualname__", repr(self._fn))
            warnings.warn(
                f"compiled {name} has seen {SIGNATURE_LIMIT} argument signatures (shapes, dtypes, strides, "
                "values and grad mode), each with its own graph and memory; new ones now run eagerly. "
                "Keep shapes fixed, or call reset() to start again",
                stacklevel=4,
            )

    def graph(self, *args, **kwargs) -> CUDAGraph | None:
        """The graph that calls with these arguments replay (None before its capture)."""
        entry = self._entries.get(_signature(args, kwargs)[0])
        return entry.graph if entry is not None else None

    def reset(self) -> None:
        """Forget every signature: graphs are freed, the next calls warm up again."""
        with self._lock:
            self._entries, self._warned = {}, False

    def __repr__(self) -> str:
        graphs = sum(e.graph is not None for e in self._entries.values())
        name = getattr(self._fn, "__qualname__", repr(self._fn))
        return f"<tensorplay compiled {name} (cudagraphs, {graphs} graph(s))>"


def _records_grad(tensors) -> bool:
    """True when autograd would record ops on ``tensors`` (grad mode on and one requires grad)."""
    return is_grad_enabled() and any(t.requires_grad for t in tensors)


_TENSOR = "tensor"
_NAN = float("nan")  # NaN != NaN, but a key holding this one object matches itself


def _signature(args: tuple, kwargs: dict):
    """``(key, tensors)`` of a call: for positional tensors only, their shapes,
    dtypes and strides; else ``("tree", args' specs, kwargs' specs)``. Grad mode
    is part of the key: a graph captured under ``no_grad`` records nothing for
    autograd, so a call with grad on must not replay it."""
    if not kwargs and all(isinstance(a, Tensor) for a in args):
        return (is_grad_enabled(), *[(a.shape, a.dtype, a._strides) for a in args]), args
    tensors: list[Tensor] = []
    positional = tuple(_spec(v, tensors, f"argument {i}") for i, v in enumerate(args))
    named = tuple((k, _spec(kwargs[k], tensors, f"argument {k!r}")) for k in sorted(kwargs))
    return ("tree", is_grad_enabled(), positional, named), tensors


def _rebuild_call(key: tuple, tensors: list) -> tuple[tuple, dict]:
    """The arguments of a ``"tree"`` signature with ``tensors`` in the tensors' places."""
    it = iter(tensors)
    return tuple(_build(s, it) for s in key[2]), {k: _build(s, it) for k, s in key[3]}


def _flatten(obj):
    """``(spec, tensors)`` of a function's result, its tensors taken out
    (tuples, lists and dicts walked; anything else kept as a constant)."""
    tensors: list[Tensor] = []
    return _spec(obj, tensors, "output", hashable=False), tensors


def _spec(obj, tensors: list, path: str, hashable: bool = True):
    """``obj``'s structure: a tensor leaves its shape, dtype and strides, any
    other value itself (an argument's must be hashable: it becomes part of the key)."""
    if isinstance(obj, Tensor):
        tensors.append(obj)
        return (_TENSOR, obj.shape, obj.dtype, obj._strides)
    if type(obj) in (tuple, list):
        return (type(obj), tuple(_spec(v, tensors, f"{path}[{i}]", hashable) for i, v in enumerate(obj)))
    if type(obj) is dict:
        keys = tuple(obj)
        return (dict, keys, tuple(_spec(obj[k], tensors, f"{path}[{k!r}]", hashable) for k in keys))
    if isinstance(obj, float):  # keyed with the sign, so that 0.0 and -0.0 are two signatures
        return ("value", type(obj), _NAN if obj != obj else obj, math.copysign(1.0, obj))
    if hashable:
        try:
            hash(obj)
        except TypeError:
            raise TypeError(
                "expected tensors, or hashable values that the graph bakes in, as a compiled function's "
                f"arguments; {path} is a {type(obj).__name__}, which is not hashable"
            ) from None
    return ("value", type(obj), obj)


def _unflatten(spec, tensors):
    """Rebuild what ``_flatten`` took apart, with ``tensors`` in the tensors' places."""
    return _build(spec, iter(tensors))


def _build(spec, tensors):
    kind = spec[0]
    if kind is _TENSOR:
        return next(tensors)
    if kind is tuple or kind is list:
        return kind(_build(s, tensors) for s in spec[1])
    if kind is dict:
        return {k: _build(s, tensors) for k, s in zip(spec[1], spec[2], strict=True)}
    return spec[2]
