"""``compile(fn, backend=...)``: the entry point, which only picks the backend."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

from .backends import lookup

__all__ = ["compile"]


def compile(fn: Callable | None = None, *, backend: str = "cudagraphs", warmup: int = 1, fuse: bool = True):  # noqa: A001 (PyTorch's name)
    """Compile ``fn`` with ``backend``; also a decorator, with or without arguments.

    With ``backend="cudagraphs"`` the result runs ``fn`` eagerly for the first
    ``warmup`` calls of each new argument signature (tensor shapes, dtypes and
    strides, and the values of other arguments), then captures it once into a
    CUDA graph and replays that graph for every later call with the same
    signature. The returned tensors are the graph's own outputs: the next call
    of the compiled function overwrites them, as PyTorch's CUDA graphs do, so
    ``.clone()`` what must outlive it. An output that is an argument (or a view
    of one) is that argument, as eagerly. Each thread captures and replays a
    graph of its own, so calls from several threads each get their own
    results. Each signature keeps its graph and its memory; past 32 signatures
    new ones run eagerly, with one warning that names what differs. A function
    that reads a tensor's value on the host (``if x.sum().item() > 0:``) runs
    eagerly for that signature, with one warning naming the line. See
    ``tensorplay.compiler.backends.cudagraphs``.

    Parameters
    ----------
    fn : callable
        A function of tensors (and hashable values) that returns tensors, or
        tuples, lists, dicts and namedtuples of them (walked in its arguments
        too). A generator or coroutine function is refused with a ``TypeError``.
    backend : str
        ``"cudagraphs"`` (``list_backends()`` names them all).
    warmup : int
        Eager calls of each signature before its capture (they compile the
        kernels outside the capture).
    fuse : bool
        Generate one kernel per chain of elementwise ops (and a reduction that
        ends it) while capturing (``tensorplay/compiler/fusion.py``); their
        source is in ``compiled.kernels()``. False: one kernel per op, as eagerly.

    A call that autograd records (an argument, or a parameter of ``fn`` as a
    module, requires grad) captures the backward too, fused the same way:
    ``backward()`` on its result replays it, with the eager gradients. Run
    each call's backward before the next call.

    Called while a graph is being captured (inside ``with tp.cuda.graph(g):``,
    or a ``g.while_()`` body), a compiled function runs ``fn`` on its arguments
    themselves, fused, into that capture: a simulation loop's body is fused and
    its in-place changes reach the caller's tensors.

    Examples
    --------
    >>> import tensorplay as tp
    >>> from tensorplay.compiler import compile
    >>> @compile
    ... def f(x, y):
    ...     return (x * y + 1).sum()
    >>> a, b = tp.ones(4), tp.full((4,), 2.0)
    >>> f(a, b).item()  # the warm-up runs eagerly
    12.0
    >>> f(tp.zeros(4), b).item()  # captured, then replayed with these inputs
    4.0
    >>> f(a, b).item()  # a replay: one launch
    12.0
    """
    if fn is None:
        return functools.partial(compile, backend=backend, warmup=warmup, fuse=fuse)
    if not callable(fn):
        raise TypeError(f"expected a callable to compile, got {type(fn).__name__}")
    _refuse_generators(fn)
    return lookup(backend)(fn, warmup=warmup, fuse=bool(fuse))


_LAZY = (
    (inspect.isgeneratorfunction, "generator function", "a generator runs its body only as it is iterated"),
    (inspect.isasyncgenfunction, "async generator function", "a generator runs its body only as it is iterated"),
    (inspect.iscoroutinefunction, "coroutine function", "a coroutine runs its body only as it is awaited"),
)


def _refuse_generators(fn) -> None:
    """A function whose call returns a generator or coroutine runs its body
    after the call has returned, where no capture sees it: refuse it now."""
    target = fn if inspect.isroutine(fn) or isinstance(fn, functools.partial) else type(fn).__call__
    for test, kind, why in _LAZY:
        if test(target):
            name = getattr(fn, "__qualname__", type(fn).__name__)
            raise TypeError(
                f"cannot compile {kind} {name}: {why}, after the call has returned, so there is nothing to "
                f"capture; have the function return a tuple or list of tensors instead (for instance, compile "
                f"lambda *args: tuple({name}(*args)))"
            )
