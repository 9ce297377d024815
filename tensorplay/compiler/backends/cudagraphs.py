"""The ``cudagraphs`` backend: one CUDA graph per argument signature.

A call's *signature* is the structure of its arguments (tuples, lists,
namedtuples and dicts are walked: ``_trees.py``) with, for each tensor, its
shape, dtype and strides, and for any other value the value itself, which
must be hashable: it is baked into the capture, so another value is another
signature. Which tensor arguments share memory is part of it too: ``f(a,
a)``, ``f(a, b)`` and ``f(x[:4], x[2:])`` are three signatures. Per signature:

1. the first ``warmup`` calls run ``fn`` eagerly (its kernels are compiled
   there, outside any capture);
2. the next call (in each thread) captures ``fn`` once, on private copies of the tensor
   arguments (the graph's static inputs, with the arguments' strides where
   those leave no gaps), into a ``CUDAGraph`` with a pool of its own.
   Arguments that share memory get copies that share it the same way: each
   group of overlapping arguments is staged as one copy of the memory they
   span, and their static inputs are views of it with the arguments' offsets
   and strides, so that a write through one is read through the others, as
   in eager mode. (A group that mixes dtypes cannot be staged so: its
   signature runs eagerly, with a warning.);
3. that call and every later one copies the tensor arguments into the static
   inputs and replays, through ``CUDAGraph.stage_and_launch``: one launch.

The tensors returned are views of the graph's static outputs, whose memory
the next call of the compiled function overwrites (as PyTorch's CUDA graphs
do): ``.clone()`` what must outlive the next call. Using a returned tensor
after that raises ``StaleOutputError`` (``tensorplay/_stale.py``; turned off
by ``tp.compiler.config.check_stale_outputs = False``). Each thread
captures a graph of its own (``_replay.py``), in ``thread_local`` mode so
that other threads go on reading and waiting meanwhile: calls from several
threads never share memory, each gets its own result, and an output goes
stale only at the next call of the thread that got it. An output that is an
argument, or a view of one, is that argument or that view of the caller's
tensor, and one the function closes over is that tensor, as eagerly. A
function that changes its arguments in place changes the caller's tensors,
as eagerly: the capture notes which static inputs its ops and kernels may
write (a kernel of your own may write any array it is given), and after each
replay those are copied back into the call's arguments.

What a graph reads besides the arguments is followed as the arguments are
(``_switch_to``): a module's modes, its parameters (and whether each
requires grad), buffers and tensor attributes; a Python function's tensors and
numbers in its closure and in the globals its code names; the same of what it
wraps (a ``functools.partial``'s function, a decorator's ``__wrapped__``), and
a bound method's or callable object's tensor and number attributes (a module's
as a module's: ``tp.compile(model.forward)`` follows ``eval()``). When one of them
changes (a global rebound to another tensor or number, a parameter frozen,
``self.state = ...`` in ``forward``) the calls use that state's signatures,
captured anew the first time, and the tensors a kept state's graphs use are
held with them, so that no replay reaches memory given to another tensor.
What is reached through other objects or functions (an attribute of a global
object, a helper's globals) is read as it was at the capture: pass it as an
argument. An argument that is an earlier call's output, changed in place,
is not copied back: that output is stale from this call on.

A signature runs eagerly, with one warning saying why (``_fallbacks.py``),
when ``fn`` does what a capture refuses (reads a tensor's value on the host,
as ``if x.sum().item() > 0:`` does), returns an object other than tensors,
containers of them and constants, or returns a view of an argument that the
graph cannot give back as a view of the caller's tensor. A function that
returns a generator is refused with a ``TypeError``.

A signature whose call autograd records (grad mode on, and a tensor argument
or a parameter of ``fn`` as a module requires grad) is captured as graphed
callables are (``cuda/graphed.py``): its forward and its backward
(``autograd.grad`` of the outputs for those tensors) each become a graph, both
fused, sharing one pool; a call replays the forward through an
``autograd.Function`` whose backward replays the backward graph. Which
arguments require grad is part of the signature. Such a signature runs
eagerly when its outputs depend on a tensor that requires grad reached
through a closure (the graphed backward would give it no gradient), when
its tensor arguments share memory, or when it returns an argument. The
backward replay cannot be differentiated again (``create_graph=True`` is
refused), and, as with any graph, each call's backward must run before the
next call (from one thread at a time). Graphs are freed with the compiled
function (or by ``reset()``, or ``tp.cuda.clear_caches()`` for every
compiled function).
"""

from __future__ import annotations

import builtins
import dis
import functools
import inspect
import math
import threading
import types
from contextlib import contextmanager

import numpy as np

from ..._overlap import byte_span
from ..._tensor import Tensor
from ...autograd import is_grad_enabled, no_grad
from ...cuda.graphed import Captured, hides_leaves, trainable_parameters
from ...cuda.graphs import CUDAGraph, graph, graph_pool_handle
from ...runtime.backend import CaptureError
from ...runtime.caches import BoundedCache
from ...runtime.capture import capture_state
from ...runtime.streams import current_stream
from ..fusion import fusing, tickets
from ._fallbacks import Warner
from ._replay import UNMAPPABLE, Entry, Replay, dense_like, returned_as
from ._trees import call_of, flatten, grad_part, signature

__all__ = ["CompiledFunction", "compile_fn"]


SIGNATURE_LIMIT = 32  # signatures one compiled function keeps graphs for; later ones run eagerly
CAPTURE_MODE = "thread_local"  # a capture leaves other threads free to read back and wait (as PyTorch's trees do)
_EAGER = object()  # _first_calls' answer: run fn eagerly, outside the lock
_LAZY = (
    (inspect.isgenerator, "a generator"),
    (inspect.iscoroutine, "a coroutine"),
    (inspect.isasyncgen, "an async generator"),
)


def compile_fn(fn, warmup: int = 1, fuse: bool = True) -> CompiledFunction:
    """``fn`` compiled by this backend (``tp.compile(fn, backend="cudagraphs")``)."""
    return CompiledFunction(fn, warmup, fuse)


class _Uncapturable(Exception):
    """``fn`` did what a capture refuses while it was being captured (the
    ``CaptureError`` is ``error``): its signature runs eagerly."""

    def __init__(self, error: CaptureError) -> None:
        super().__init__(str(error))
        self.error = error


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
        self._kernels: dict[str, None] = {}  # the sources of the fused kernels generated so far, in order
        self._entries = BoundedCache("compile.cudagraphs.signatures", SIGNATURE_LIMIT)  # signature -> Entry
        self._read_state = _state_reader(fn)  # None when fn reads nothing the calls follow
        self._state, self._held = (None, ()) if self._read_state is None else self._read_state()
        self._held_memory = frozenset(id(t._storage) for t in self._held)
        self._other_states: dict = {}  # fn's other states -> (their signatures, what those hold)
        self._new_states = 0  # states met so far besides the first (many: a warning)
        self._lock = threading.RLock()  # one warm-up or capture at a time
        self._warner = Warner(self._name)  # why signatures run eagerly, said once each

    def __call__(self, *args, **kwargs):
        if capture_state.active and current_stream().is_capturing():
            return self._traced(args, kwargs)[0]  # into the capture in progress
        if self._read_state is not None:
            self._switch_to(*self._read_state())
        key, tensors = signature(args, kwargs)
        if self._held_memory and any(id(t._storage) in self._held_memory for t in tensors):
            self._warner.shares_state()
            return self._call(args, kwargs)
        entry = self._entries.get(key)
        replay = None if entry is None else getattr(entry.mine, "replay", None)
        if replay is None:
            return self._first_calls(key, args, kwargs, tensors)
        return replay.launch(tensors)

    def _switch_to(self, state, held) -> None:
        """Graphs keep what ``fn`` read besides its arguments as it was at their capture: a
        module's modes (``train()``/``eval()``: dropout on or off...), its parameters (and whether
        each requires grad), buffers and tensor attributes; a function's tensors and numbers in its
        closure and the globals it names. In another state (a mode switched, a parameter frozen or
        replaced, a global rebound) the calls use that state's signatures, captured anew the first
        time. The tensors of each state kept are held with its graphs, which use their memory."""
        if state == self._state:
            return
        with self._lock:
            if state == self._state:  # another thread switched first
                return
            self._other_states[self._state] = (self._entries, self._held)
            entries = self._other_states.pop(state, (None,))[0]
            if entries is None:
                entries = BoundedCache("compile.cudagraphs.signatures", SIGNATURE_LIMIT)
                self._new_states += 1
                if self._new_states > 2 * _STATES_KEPT:
                    self._warner.changing_state()
            while len(self._other_states) > _STATES_KEPT:  # the longest unused goes, with its graphs
                del self._other_states[next(iter(self._other_states))]
            self._entries, self._state, self._held = entries, state, held
            self._held_memory = frozenset(id(t._storage) for t in held)

    def _first_calls(self, key, args, kwargs, tensors):
        """A signature not captured yet: warm up, capture, or run eagerly."""
        with self._lock:
            if self._read_state is None:
                out = self._warm_up_or_capture(key, args, kwargs, tensors)
            else:  # the state as this capture sees it, and the same after it (else another thread changed it)
                state = self._read_state()
                self._switch_to(*state)
                out = self._warm_up_or_capture(key, args, kwargs, tensors)
                if self._read_state()[0] != state[0]:  # changed meanwhile: a graph captured may have read the
                    self._entries.pop(key, None)  # new state, which its table does not hold: dropped
        return self._call(args, kwargs) if out is _EAGER else out

    def _warm_up_or_capture(self, key, args, kwargs, tensors):
        entry = self._entries.get(key)
        if entry is None:
            if len(self._entries) >= self._entries.cap:
                self._warner.limit(self._entries.cap, [*self._entries, key])
                return _EAGER
            entry = self._entries[key] = Entry()
        if entry.eager:
            return _EAGER
        if entry.calls < self._warmup:
            out = self._call(args, kwargs)
            entry.calls += 1
            leaves = flatten(out)[1]
            entry.records_grad = _records_grad(leaves)
            entry.eager = entry.records_grad and self._hides_leaves(leaves, tensors)
            return out
        replay = self._capture(entry, key, tensors)
        if replay is None:
            return _EAGER
        entry.mine.replay = replay
        return replay.launch(tensors)

    def _call(self, args: tuple, kwargs: dict):
        """``fn(*args, **kwargs)``, refusing a generator or coroutine as its result."""
        return self._checked(self._fn(*args, **kwargs))

    def _checked(self, out):
        kind = next((kind for test, kind in _LAZY if test(out)), None)
        if kind is not None:
            if not inspect.isasyncgen(out):
                out.close()  # never started: no "never awaited" warning
            raise TypeError(
                f"compiled {self._name} returned {kind}, which runs its body only later (as it is iterated or "
                "awaited), after the call has returned, so a graph cannot capture it; return a tuple or list of "
                "tensors instead"
            )
        return out

    def _capture(self, entry: Entry, key, tensors) -> Replay | None:
        """This thread's capture of ``fn`` on private copies of ``tensors``
        (sharing memory as they do), with its backward where autograd records
        it; None (and the signature turns eager, with a warning where the user
        can change it) when it cannot be captured, staged or graphed."""
        try:
            if entry.records_grad or grad_part(key):
                return self._capture_with_backward(entry, key, tensors)
            return self._capture_plain(entry, key, tensors)
        except _Uncapturable as e:
            return self._eager(entry, self._warner.uncapturable, e.error)

    def _capture_plain(self, entry: Entry, key, tensors) -> Replay | None:
        aliases = key[-1]
        if not aliases:
            with no_grad():
                statics, sources = [dense_like(t).copy_(t) for t in tensors], None
            arg_statics = statics
        else:
            staged = _aliased_statics(tensors, aliases)
            if staged is None:
                return self._eager(entry, self._warner.unstaged)
            arg_statics, statics, sources = staged
        g = CUDAGraph()
        with graph(g, capture_error_mode=CAPTURE_MODE):
            out, fuser = self._traced(*call_of(key, arg_statics), own=True)
        out_spec, out_leaves, opaque = flatten(out)
        if opaque:
            return self._eager(entry, self._warner.opaque, *opaque[0])
        if _records_grad(out_leaves):  # a parameter or closure the warm-up did not show (warmup=0)
            if self._hides_leaves(out_leaves, arg_statics):
                return self._eager(entry)
            return self._capture_with_backward(entry, key, tensors)
        returns = [returned_as(o, arg_statics, tensors, g.pool_id) for o in out_leaves]
        for r in returns:
            if type(r) is tuple and r[0] is UNMAPPABLE:
                return self._eager(entry, self._warner.unmappable, r[1])
        replay = Replay(self._name)
        replay.graph, replay.statics, replay.sources = g, statics, sources
        replay.written = tuple(k for k, t in enumerate(statics) if fuser.wrote(*byte_span(t)))
        replay.out_spec = out_spec
        replay.out_leaves = [o for o, r in zip(out_leaves, returns, strict=True) if r is None]
        replay.returns = tuple(returns) if any(r is not None for r in returns) else None
        return replay

    def _capture_with_backward(self, entry: Entry, key, tensors) -> Replay | None:
        """Capture the forward and, where its outputs require grad, the backward
        of ``fn``, both fused, as graphed callables are (``cuda/graphed.py``);
        None (and the signature turns eager) when its arguments share memory,
        it reads a tensor that requires grad through a closure, or it returns
        an argument (or a view of one)."""
        if key[-1]:  # shared memory: the graphed forward stages each argument by itself
            return self._eager(entry)
        with no_grad():
            statics = [t.clone() for t in tensors]
        for s, t in zip(statics, tensors, strict=True):
            s.requires_grad_(t.requires_grad)
        out_spec, fusers = [], []
        fn, fuse, kernels, checked = self._fn, self._fuse, self._kernels, self._checked  # not self (no cycle)

        def flat(*statics):  # fn on the staged tensors, its result's tensors as a tuple
            args, kwargs = call_of(key, statics)
            spec, leaves, opaque = flatten(checked(_refusing(fn, args, kwargs)))
            out_spec.append((spec, opaque))
            return tuple(leaves)

        @contextmanager
        def trace():  # entered inside both captures
            with _fusing(fuse, kernels) as fuser:
                fusers.append(fuser)
                yield

        flat.__qualname__ = self._name
        c = Captured(
            flat, tuple(statics), graph_pool_handle(), warmup=0, allow_unused=True, mode=CAPTURE_MODE,
            label=f"compiled {self._name}", trace=trace, parameters=trainable_parameters(self._fn),
        )  # fmt: skip
        if self._hides_leaves(c.outputs, statics):  # (with no warm-up, nothing showed it before)
            return self._eager(entry)
        spec, opaque = out_spec[0]
        if opaque:
            return self._eager(entry, self._warner.opaque, *opaque[0])
        for o in c.outputs:
            owner = next((i for i, s in enumerate(statics) if o._storage is s._storage), None)
            if owner is not None:
                return self._eager(entry, self._warner.aliased_with_grad, owner)
        replay = Replay(self._name)
        if any(o.requires_grad for o in c.outputs):
            c.capture_backward()
            replay.captured, replay.backward = c, c.backward
            replay.parameters = c.static_inputs[len(statics) :]
        replay.graph, replay.statics = c.forward, statics
        replay.written = tuple(k for k, t in enumerate(statics) if fusers[0].wrote(*byte_span(t)))
        replay.out_spec, replay.out_leaves = spec, list(c.outputs)
        return replay

    @staticmethod
    def _eager(entry: Entry, warn=None, *details) -> None:
        """The signature runs eagerly from now on (``warn(*details)`` says why)."""
        entry.eager = True
        if warn is not None:
            warn(*details)

    def _hides_leaves(self, outputs, tensors) -> bool:
        """True when ``outputs`` depend on a tensor that requires grad which is
        neither one of ``tensors`` nor a parameter of ``fn`` (a closure's):
        a graphed backward would give it no gradient."""
        return hides_leaves(outputs, [*tensors, *trainable_parameters(self._fn)])

    def _traced(self, args: tuple, kwargs: dict, own: bool = False):
        """``fn(*args, **kwargs)`` issued into the capture in progress, fused
        (unless ``fuse=False``); returns its result and the ``Fuser``, which
        noted what it may have written. In a capture of its own (``own``), what
        the capture refuses raises ``_Uncapturable``."""
        with _fusing(self._fuse, self._kernels) as fuser:
            out = _refusing(self._fn, args, kwargs) if own else self._fn(*args, **kwargs)
        return self._checked(out), fuser

    def kernels(self) -> list[str]:
        """The source of every fused kernel this function's captures generated, as
        plain Numba (each can be pasted into a file and launched by itself)."""
        return list(self._kernels)

    def graph(self, *args, backward: bool = False, **kwargs) -> CUDAGraph | None:
        """The graph that this thread's calls with these arguments replay (None
        before its capture); with ``backward=True`` the graph their backward
        replays (None when autograd records no gradient for them)."""
        entry = self._entries.get(signature(args, kwargs)[0])
        replay = None if entry is None else getattr(entry.mine, "replay", None)
        if replay is None:
            return None
        return replay.backward if backward else replay.graph

    def reset(self) -> None:
        """Forget every signature: graphs are freed, the next calls warm up again."""
        with self._lock:
            self._entries.clear()
            self._other_states.clear()
            self._warner.reset()

    def __repr__(self) -> str:
        graphs = sum(getattr(e.mine, "replay", None) is not None for e in list(self._entries.values()))
        return f"<tensorplay compiled {self._name} (cudagraphs, {graphs} graph(s) in this thread)>"


_STATES_KEPT = 4  # fn's states whose graphs are kept besides the current one
_NUMBERS = (int, float, complex, np.number, np.bool_)  # bool among the ints
_CODE = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)  # never followed
_NOT_FOLLOWED = (types.ModuleType, types.BuiltinFunctionType, type)  # nor looked into as what fn wraps


def _state_reader(fn):
    """A function giving ``(key, held)``: what ``fn``'s graphs depend on besides the arguments,
    as a hashable key (a tensor by its id, a number by its value and type, a float with its
    sign), and the tensors in it (held with the key, so that no other tensor takes their ids
    while it is kept). For a module, every submodule's mode, its parameters and whether each
    requires grad, its buffers and tensor attributes; for a Python function, its closure's
    tensors and numbers and those of the globals it names (any not bound to a module, function
    or class when compiled); the same for what ``fn`` wraps (``_followed``).
    None when there is nothing to follow."""
    readers = [r for r in map(_own_state_reader, _followed(fn)) if r is not None]
    if len(readers) < 2:
        return readers[0] if readers else None
    return functools.partial(_joined_state, tuple(readers))


def _followed(fn) -> list:
    """``fn`` and what runs its code: a ``functools.partial``'s function, a decorator's
    ``__wrapped__`` (``functools.wraps``: ``@tp.no_grad()``...), a bound method's function and
    its object (``model.forward``: the module), a callable object's ``__call__``. Each of them
    reads globals, a closure or attributes that a graph keeps as they were at its capture."""
    found, todo = [], [fn]
    while todo:
        f = todo.pop()
        if f is None or isinstance(f, _NOT_FOLLOWED) or any(f is seen for seen in found):
            continue
        found.append(f)
        if _is_module(f):
            continue
        if isinstance(f, functools.partial):
            todo.append(f.func)
        elif inspect.ismethod(f):
            todo += [f.__func__, f.__self__]
        elif not isinstance(f, types.FunctionType):  # an object whose class defines __call__ in Python
            call = inspect.getattr_static(type(f), "__call__", None)
            todo.append(call if isinstance(call, types.FunctionType) else None)
        wrapped = inspect.getattr_static(f, "__wrapped__", None)
        todo.append(wrapped if callable(wrapped) else None)
    return found


def _is_module(fn) -> bool:
    return callable(getattr(fn, "modules", None)) and callable(getattr(fn, "parameters", None))


def _own_state_reader(fn):
    """``_state_reader`` for ``fn`` alone: a module, a function (its code), or an object (the
    tensors and numbers among its attributes)."""
    if _is_module(fn):
        return functools.partial(_module_state, fn)
    if inspect.ismethod(fn) or isinstance(fn, functools.partial):  # followed through what they hold
        return None
    if not isinstance(fn, types.FunctionType):
        return functools.partial(_object_state, fn) if type(getattr(fn, "__dict__", None)) is dict else None
    code = fn.__code__
    g = fn.__globals__
    names = tuple(n for n in _global_names(code) if not isinstance(g.get(n, builtins.__dict__.get(n)), _CODE))
    cells = tuple(c for c in fn.__closure__ or () if not isinstance(_contents(c), _CODE))
    if not names and not cells:
        return None
    return functools.partial(_function_state, g, names, cells)


def _joined_state(readers: tuple) -> tuple:
    states = [read() for read in readers]
    return tuple(key for key, _ in states), tuple(t for _, held in states for t in held)


def _object_state(obj) -> tuple:
    """An object's tensors and numbers among its attributes (a bound method's ``self``)."""
    d = getattr(obj, "__dict__", None)
    items = [(k, v) for k, v in d.items() if isinstance(v, (Tensor, *_NUMBERS))] if type(d) is dict else []
    return tuple((k, _state_value(v)) for k, v in items), tuple(v for _, v in items if isinstance(v, Tensor))


def _global_names(code) -> dict:
    """The names ``code`` and the code nested in it (comprehensions, lambdas) read as globals."""
    names = dict.fromkeys(i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME"))
    for const in code.co_consts:
        if inspect.iscode(const):
            names.update(_global_names(const))
    return names


def _module_state(root) -> tuple:
    """A module's state key and its tensors: each submodule's mode; its parameters, buffers
    and tensor attributes by identity; whether each parameter requires grad. Read from the
    modules' dictionaries at each call (the registries' iterators are slower)."""
    modes, tensors, grads, stack, seen = [], [], [], [root], set()
    while stack:
        d = stack.pop().__dict__
        modes.append(d.get("training"))
        tensors.extend(v for v in d.values() if isinstance(v, Tensor))  # plain tensor attributes
        for p in d.get("_parameters", {}).values():
            if p is not None:
                tensors.append(p)
                grads.append(p.requires_grad)
        tensors.extend(t for t in d.get("_buffers", {}).values() if t is not None)
        for m in d.get("_modules", {}).values():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                stack.append(m)
    return (tuple(modes), tuple(map(id, tensors)), tuple(grads)), tuple(tensors)


def _function_state(g: dict, names: tuple, cells: tuple) -> tuple:
    values = [g.get(n) for n in names] + [_contents(c) for c in cells]
    return tuple(map(_state_value, values)), tuple(v for v in values if isinstance(v, Tensor))


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # a cell not yet filled
        return None


def _state_value(v):
    if isinstance(v, Tensor):
        return id(v)
    if isinstance(v, (float, np.floating)):  # 0.0 and -0.0 differ, NaN equals NaN
        return (type(v), "nan" if v != v else v, math.copysign(1.0, v))
    if isinstance(v, _NUMBERS):
        return (type(v), v)
    return None  # anything else is read as it was at the capture


def _refusing(fn, args: tuple, kwargs: dict):
    """``fn(*args, **kwargs)`` in a capture of its own: a ``CaptureError`` it
    raises (a host read, a host wait) becomes ``_Uncapturable``."""
    try:
        return fn(*args, **kwargs)
    except CaptureError as e:
        raise _Uncapturable(e) from e


@contextmanager
def _fusing(fuse: bool, kernels: dict):
    """Fuse the ops issued inside (unless not ``fuse``); yields the ``Fuser``,
    whose kernels' sources join ``kernels`` at the end (two kernels may share
    a name: it says which ops, not how they are laid out)."""
    with fusing(fuse) as fuser:
        yield fuser
    kernels.update(dict.fromkeys(text for _, text in fuser.kernels))


def _records_grad(tensors) -> bool:
    """True when autograd would record ops on ``tensors`` (grad mode on and one requires grad)."""
    return is_grad_enabled() and any(t.requires_grad for t in tensors)


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
            per_tensor[i] = dense_like(t).copy_(t)
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
