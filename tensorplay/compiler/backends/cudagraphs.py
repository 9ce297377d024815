"""The ``cudagraphs`` backend: one CUDA graph per argument signature.

A call's *signature* is the structure of its arguments (tuples, lists and
dicts are walked) with, for each tensor, its shape, dtype and strides, and for
any other value the value itself, which must be hashable: it is baked into the
capture, so another value is another signature. Which tensor arguments share
memory is part of it too: ``f(a, a)``, ``f(a, b)`` and ``f(x[:4], x[2:])`` are
three signatures. Per signature:

1. the first ``warmup`` calls run ``fn`` eagerly (its kernels are compiled
   there, outside any capture);
2. the next call captures ``fn`` once, on private copies of the tensor
   arguments (the graph's static inputs), into a ``CUDAGraph`` with a pool of
   its own. Arguments that share memory get copies that share it the same
   way: each group of overlapping arguments is staged as one copy of the
   memory they span, and their static inputs are views of it with the
   arguments' offsets and strides, so that a write through one is read
   through the others, as in eager mode. (A group that mixes dtypes cannot be
   staged so: its signature runs eagerly, with a warning.);
3. that call and every later one copies the tensor arguments into the static
   inputs and replays, through ``CUDAGraph.stage_and_launch``: one launch.

The tensors returned are views of the graph's static outputs, whose memory
the next call of the compiled function overwrites (as PyTorch's CUDA graphs
do): ``.clone()`` what must outlive the next call. Using a returned tensor
after that raises ``StaleOutputError`` (``tensorplay/_stale.py``; turned off
by ``tp.compiler.config.check_stale_outputs = False``). A function that
changes its arguments in place changes the caller's tensors, as eagerly: the
capture notes which static inputs its ops and kernels may write (a kernel of
your own may write any array it is given), and after each replay those are
copied back into the call's arguments.

A signature whose call autograd records (grad mode on, and a tensor argument
or a parameter of ``fn`` as a module requires grad) is captured as graphed
callables are (``cuda/graphed.py``): its forward and its backward
(``autograd.grad`` of the outputs for those tensors) each become a graph, both
fused, sharing one pool; a call replays the forward through an
``autograd.Function`` whose backward replays the backward graph. Which
arguments require grad is part of the signature. Such a signature runs
eagerly when its outputs depend on a tensor that requires grad reached
through a closure (the graphed backward would give it no gradient), or when
its tensor arguments share memory. The backward replay cannot be
differentiated again (``create_graph=True`` is refused), and, as with any
graph, each call's backward must run before the next call. Graphs are freed
with the compiled function (or by ``reset()``, or ``tp.cuda.clear_caches()``
for every compiled function).
"""

from __future__ import annotations

import functools
import math
import threading
import warnings
from contextlib import contextmanager

from ..._overlap import byte_span, overlap_groups
from ..._stale import Handout, config
from ..._tensor import Tensor
from ...autograd import is_grad_enabled, no_grad
from ...cuda.graphed import Captured, hides_leaves, trainable_parameters
from ...cuda.graphs import CUDAGraph, graph, graph_pool_handle
from ...runtime.caches import BoundedCache
from ...runtime.capture import capture_state
from ...runtime.streams import current_stream
from ..fusion import fusing, tickets

__all__ = ["CompiledFunction", "compile_fn"]


SIGNATURE_LIMIT = 32  # graphs one compiled function keeps; later signatures run eagerly


def compile_fn(fn, warmup: int = 1, fuse: bool = True) -> CompiledFunction:
    """``fn`` compiled by this backend (``tp.compile(fn, backend="cudagraphs")``)."""
    return CompiledFunction(fn, warmup, fuse)


class _Entry:
    """One signature: its eager calls so far, then its graph."""

    __slots__ = (
        "calls", "eager", "records_grad", "graph", "statics", "sources", "written", "out_spec", "out_leaves",
        "handout", "captured", "parameters", "backward",
    )  # fmt: skip

    def __init__(self, name: str) -> None:
        self.calls = 0
        self.eager = False  # it cannot be staged, or its backward not graphed: never captured
        self.records_grad = False  # a warm-up's outputs required grad: capture the backward too
        self.graph: CUDAGraph | None = None
        self.statics: list[Tensor] = []  # what stage_and_launch copies into
        self.sources: tuple | None = None  # with shared memory: what it copies from (see _aliased_statics)
        self.written: tuple = ()  # indices of the statics the function writes: copied back after a replay
        self.out_spec = self.out_leaves = None
        self.handout = Handout(f"compiled {name}")  # each call's outputs, stale at the next call
        self.captured: Captured | None = None  # with a graphed backward: what replays both graphs
        self.parameters: tuple = ()  # what it takes after the arguments (a module's parameters)
        self.backward: CUDAGraph | None = None

    def launch(self, tensors: list):
        """Stage this call's ``tensors``, replay, and return the static outputs."""
        if self.captured is not None:  # recorded by autograd as one node, which replays the backward
            outs = self.captured.apply(*tensors, *self.parameters)
            if self.written:
                self._copy_back(tensors)
            return _unflatten(self.out_spec, outs)
        if self.sources is not None:
            tensors = [
                tensors[src] if type(src) is int else tensors[src[0]]._view((src[2],), (1,), src[1])
                for src in self.sources
            ]
        self.graph.stage_and_launch(self.statics, tensors)
        if self.written:
            self._copy_back(tensors)
        if config.check_stale_outputs:
            return _unflatten(self.out_spec, self.handout.give(self.out_leaves))
        self.handout.expire()
        return _unflatten(self.out_spec, self.out_leaves)

    def _copy_back(self, tensors: list) -> None:
        """In-place changes reach the caller's tensors (not recorded by autograd, as eagerly)."""
        with no_grad():
            for k in self.written:
                tensors[k].copy_(self.statics[k])


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

    def __init__(self, fn, warmup: int = 1, fuse: bool = True) -> None:
        if not isinstance(warmup, int) or isinstance(warmup, bool) or warmup < 0:
            raise ValueError(f"expected warmup to be a number of calls (0 or more), got {warmup!r}")
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._name = getattr(fn, "__qualname__", type(fn).__name__)  # in warnings and errors (a module: its class)
        self._warmup = warmup
        self._fuse = fuse
        if fuse:
            tickets.prepare()  # what fused reductions count on, made before any capture
        self._kernels: dict[str, str] = {}  # fused kernels generated so far: name -> source
        self._entries = BoundedCache("compile.cudagraphs.signatures", SIGNATURE_LIMIT)  # signature -> _Entry
        self._lock = threading.RLock()  # one capture at a time
        self._warned = self._warned_unstaged = False

    def __call__(self, *args, **kwargs):
        if capture_state.active and current_stream().is_capturing():
            return self._traced(args, kwargs)[0]  # into the capture in progress
        key, tensors = _signature(args, kwargs)
        entry = self._entries.get(key)
        if entry is None or entry.graph is None:
            return self._first_calls(key, args, kwargs, tensors)
        return entry.launch(tensors)

    def _first_calls(self, key, args, kwargs, tensors):
        """A signature not captured yet: warm up, or capture."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                if len(self._entries) >= self._entries.cap:
                    self._warn_limit()
                    return self._fn(*args, **kwargs)
                entry = self._entries[key] = _Entry(self._name)
            if entry.eager:
                return self._fn(*args, **kwargs)
            if entry.graph is None and entry.calls < self._warmup:
                entry.calls += 1
                out = self._fn(*args, **kwargs)
                leaves = _flatten(out)[1]
                entry.records_grad = _records_grad(leaves)
                entry.eager = entry.records_grad and self._hides_leaves(leaves, tensors)
                return out
            if entry.graph is None and not self._capture(entry, key, tensors):
                return self._fn(*args, **kwargs)  # eager from now on
        return entry.launch(tensors)

    def _capture(self, entry: _Entry, key, tensors) -> bool:
        """Capture ``fn`` on private copies of ``tensors`` (sharing memory as
        they do), with its backward where autograd records it; False (and the
        signature turns eager) when it cannot be staged or graphed."""
        if entry.records_grad or _grad_part(key):
            return self._capture_with_backward(entry, key, tensors)
        aliases = key[-1]
        if not aliases:
            statics, sources = [t.clone() for t in tensors], None
            arg_statics = statics
        else:
            staged = _aliased_statics(tensors, aliases)
            if staged is None:
                entry.eager = True
                self._warn_unstaged()
                return False
            arg_statics, statics, sources = staged
        g = CUDAGraph()
        with graph(g):
            out, fuser = self._traced(*_call_of(key, arg_statics))
        out_spec, out_leaves = _flatten(out)
        if _records_grad(out_leaves):  # a parameter or closure the warm-up did not show (warmup=0)
            entry.eager = self._hides_leaves(out_leaves, arg_statics)
            return not entry.eager and self._capture_with_backward(entry, key, tensors)
        entry.graph, entry.statics, entry.sources = g, statics, sources
        entry.written = tuple(k for k, t in enumerate(statics) if fuser.wrote(*byte_span(t)))
        entry.out_spec, entry.out_leaves = out_spec, out_leaves
        return True

    def _capture_with_backward(self, entry: _Entry, key, tensors) -> bool:
        """Capture the forward and, where its outputs require grad, the backward
        of ``fn``, both fused, as graphed callables are (``cuda/graphed.py``);
        False (and the signature turns eager) when its arguments share memory
        or it reads a tensor that requires grad through a closure."""
        if key[-1]:  # shared memory: the graphed forward stages each argument by itself
            entry.eager = True
            return False
        with no_grad():
            statics = [t.clone() for t in tensors]
        for s, t in zip(statics, tensors, strict=True):
            s.requires_grad_(t.requires_grad)
        out_spec, fusers = [], []
        fn, fuse, kernels = self._fn, self._fuse, self._kernels  # kept by the entry: not self (no cycle)

        def flat(*statics):  # fn on the staged tensors, its result's tensors as a tuple
            args, kwargs = _call_of(key, statics)
            spec, leaves = _flatten(fn(*args, **kwargs))
            out_spec.append(spec)
            return tuple(leaves)

        @contextmanager
        def trace():  # entered inside both captures
            with _fusing(fuse, kernels) as fuser:
                fusers.append(fuser)
                yield

        flat.__qualname__ = self._name
        c = Captured(
            flat, tuple(statics), graph_pool_handle(), warmup=0, allow_unused=True, mode="global",
            label=f"compiled {self._name}", trace=trace, parameters=trainable_parameters(self._fn),
        )  # fmt: skip
        if self._hides_leaves(c.outputs, statics):  # (with no warm-up, nothing showed it before)
            entry.eager = True
            return False
        if any(o.requires_grad for o in c.outputs):
            c.capture_backward()
            entry.captured, entry.backward = c, c.backward
            entry.parameters = c.static_inputs[len(statics) :]
        entry.graph, entry.statics = c.forward, statics
        entry.written = tuple(k for k, t in enumerate(statics) if fusers[0].wrote(*byte_span(t)))
        entry.out_spec, entry.out_leaves = out_spec[0], list(c.outputs)
        return True

    def _hides_leaves(self, outputs, tensors) -> bool:
        """True when ``outputs`` depend on a tensor that requires grad which is
        neither one of ``tensors`` nor a parameter of ``fn`` (a closure's):
        a graphed backward would give it no gradient."""
        return hides_leaves(outputs, [*tensors, *trainable_parameters(self._fn)])

    def _warn_unstaged(self) -> None:
        if not self._warned_unstaged:
            self._warned_unstaged = True
            warnings.warn(
                f"compiled {self._name} got tensor arguments of different dtypes over the same memory, which its graph "
                "cannot stage as they share it; calls with such arguments run eagerly (pass tensors that do not "
                "share memory, or views of one dtype, to replay a graph)",
                stacklevel=5,
            )

    def _warn_limit(self) -> None:
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"compiled {self._name} has seen {self._entries.cap} argument signatures (shapes, dtypes, strides, "
                "values and grad mode), each with its own graph and memory; new ones now run eagerly. "
                "Keep shapes fixed, or call reset() to start again",
                stacklevel=4,
            )

    def _traced(self, args: tuple, kwargs: dict):
        """``fn(*args, **kwargs)`` issued into the capture in progress, fused
        (unless ``fuse=False``); returns its result and the ``Fuser``, which
        noted what it may have written."""
        with _fusing(self._fuse, self._kernels) as fuser:
            out = self._fn(*args, **kwargs)
        return out, fuser

    def kernels(self) -> list[str]:
        """The source of every fused kernel this function's captures generated, as
        plain Numba (each can be pasted into a file and launched by itself)."""
        return list(self._kernels.values())

    def graph(self, *args, backward: bool = False, **kwargs) -> CUDAGraph | None:
        """The graph that calls with these arguments replay (None before its
        capture); with ``backward=True`` the graph their backward replays
        (None when autograd records no gradient for them)."""
        entry = self._entries.get(_signature(args, kwargs)[0])
        if entry is None:
            return None
        return entry.backward if backward else entry.graph

    def reset(self) -> None:
        """Forget every signature: graphs are freed, the next calls warm up again."""
        with self._lock:
            self._entries.clear()
            self._warned = self._warned_unstaged = False

    def __repr__(self) -> str:
        graphs = sum(e.graph is not None for e in self._entries.values())
        return f"<tensorplay compiled {self._name} (cudagraphs, {graphs} graph(s))>"


@contextmanager
def _fusing(fuse: bool, kernels: dict):
    """Fuse the ops issued inside (unless not ``fuse``); yields the ``Fuser``,
    whose kernels join ``kernels`` (name -> source) at the end."""
    with fusing(fuse) as fuser:
        yield fuser
    kernels.update(fuser.kernels)


def _records_grad(tensors) -> bool:
    """True when autograd would record ops on ``tensors`` (grad mode on and one requires grad)."""
    return is_grad_enabled() and any(t.requires_grad for t in tensors)


def _grad_key(tensors):
    """Grad mode and which tensors require grad, for a signature: False under
    ``no_grad`` (a graph captured so records nothing for autograd), else the
    indices of the tensors that require grad (the captured backward gives
    gradients to those only)."""
    return is_grad_enabled() and tuple(i for i, t in enumerate(tensors) if t.requires_grad)


def _grad_part(key) -> tuple:
    """The indices of the tensor arguments that require grad, in a signature (see ``_grad_key``)."""
    return key[1 if key[0] == "tree" else 0] or ()


_TENSOR = "tensor"
_NAN = float("nan")  # NaN != NaN, but a key holding this one object matches itself


def _signature(args: tuple, kwargs: dict):
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


def _aliases(tensors) -> tuple:
    """Which of ``tensors`` share memory: ``()`` when none do, else per group
    of tensors whose bytes overlap (directly or through others), ``((index,
    byte offset of its data pointer from the group's lowest byte), ...)``."""
    groups = overlap_groups(tensors)
    return tuple(sorted(tuple(sorted((i, tensors[i].data_ptr() - lo) for i in members)) for lo, members in groups))


def _aliased_statics(tensors, aliases: tuple):
    """Private copies of ``tensors`` that share memory as they do, or None
    when a group of them mixes dtypes. Returns ``(one static per tensor, what
    stage_and_launch copies into, where each of those is copied from)``: a
    tensor that shares nothing gets a clone (its source: its index); a group
    gets one contiguous copy of the bytes it spans, the group's statics are
    views of it at the tensors' offsets and strides, and its source is
    ``(index of its first tensor, element offset from that tensor's data to
    the group's lowest byte, elements)``, rebuilt as a view at every call."""
    grouped = {i for group in aliases for i, _ in group}
    per_tensor = [None] * len(tensors)
    statics, sources = [], []
    for i, t in enumerate(tensors):
        if i not in grouped:
            per_tensor[i] = t.clone()
            statics.append(per_tensor[i])
            sources.append(i)
    for group in aliases:
        first, first_offset = group[0]
        dtype = tensors[first].dtype
        isz = dtype.itemsize
        if any(tensors[i].dtype is not dtype or offset % isz for i, offset in group):
            return None
        lo = tensors[first].data_ptr() - first_offset
        n = (max(byte_span(tensors[i])[1] for i, _ in group) - lo) // isz
        source = (first, -first_offset // isz, n)
        base = tensors[first]._view((n,), (1,), source[1]).clone()
        for i, offset in group:
            per_tensor[i] = base._view(tensors[i].shape, tensors[i].stride(), offset // isz)
        statics.append(base)
        sources.append(source)
    return per_tensor, statics, tuple(sources)


def _call_of(key: tuple, tensors) -> tuple[tuple, dict]:
    """The arguments of a call of signature ``key`` with ``tensors`` in the tensors' places."""
    if key[0] != "tree":
        return tuple(tensors), {}
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
        return (_TENSOR, obj.shape, obj.dtype, obj.stride())
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
