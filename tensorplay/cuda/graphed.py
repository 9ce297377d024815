"""``make_graphed_callables``: a function or module whose forward and backward
each replay as one CUDA graph.

Each callable is warmed up, its forward is captured into one graph and its
backward (``autograd.grad`` of the outputs with respect to the inputs and
parameters that require grad) into another, sharing one private pool. The
graphed callable is an ``autograd.Function``: its forward stages fresh inputs
into the captured ones and replays the forward graph; its backward stages the
output gradients and replays the backward graph. Outputs live in the graph's
memory: the next call overwrites them (``.clone()`` keeps one).
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from .. import autograd
from .._factories import empty_like, ones_like
from .._grad_mode import is_grad_enabled
from .._stale import Handout, config
from .._tensor import Tensor
from ..autograd import Function
from .graphs import CUDAGraph, graph, graph_pool_handle

__all__ = ["Captured", "hides_leaves", "make_graphed_callables", "trainable_parameters"]


def _tensors(args, what: str) -> tuple:
    args = args if isinstance(args, tuple) else (args,)
    for i, a in enumerate(args):
        if not isinstance(a, Tensor):
            raise TypeError(f"{what}: expected tensors as sample arguments, got {type(a).__name__} at position {i}")
        first = next(j for j, b in enumerate(args) if b is a)
        if first != i:  # each becomes a graph input of its own, copied into and given a gradient
            raise ValueError(f"{what}: sample arguments {first} and {i} are the same tensor; pass distinct tensors")
    return args


def _outputs(out, name: str) -> tuple[tuple, bool]:
    single = isinstance(out, Tensor)
    outs = (out,) if single else out
    if not isinstance(outs, (tuple, list)) or not all(isinstance(o, Tensor) for o in outs):
        raise TypeError(f"{name} must return a tensor or a tuple of tensors to be graphed, got {type(out).__name__}")
    return tuple(outs), single


_HOOKS = {  # Module attribute -> what it holds (the backward ones, should a module grow them)
    "_forward_pre_hooks": "a forward pre-hook",
    "_forward_hooks": "a forward hook",
    "_backward_pre_hooks": "a backward pre-hook",
    "_backward_hooks": "a backward hook",
    "_full_backward_hooks": "a backward hook",
}


def _refuse_hooks_and_trainable_buffers(fn) -> None:
    """A replay runs the captured kernels, never a hook, and the graphed
    backward gives buffers no gradient: refuse both before anything runs."""
    named = getattr(fn, "named_modules", None)
    modules = list(named()) if callable(named) else [("", fn)]
    top = type(fn).__name__
    for prefix, module in modules:
        where = top if not prefix else f"submodule {prefix!r} of {top}"
        for attr, kind in _HOOKS.items():
            if getattr(module, attr, None):
                raise ValueError(
                    f"make_graphed_callables: {where} carries {kind}, which a replay would not run (it replays the "
                    "captured kernels only); graphed modules may not carry hooks: remove it with handle.remove() "
                    "before graphing"
                )
        buffers = getattr(module, "named_buffers", None)
        for name, b in buffers(recurse=False) if callable(buffers) else ():
            if b is not None and b.requires_grad:
                raise ValueError(
                    f"make_graphed_callables: buffer {name!r} of {where} requires grad, and the graphed backward "
                    "gives buffers no gradient; make it a Parameter, or call requires_grad_(False) on it"
                )


def trainable_parameters(fn) -> tuple:
    """The parameters of ``fn`` (a module) that require grad; none for a function."""
    params = getattr(fn, "parameters", None)
    return tuple(p for p in params() if p.requires_grad) if callable(params) else ()


class _Replay(Function):
    """The autograd node of a graphed call: ``apply(c, *inputs)`` replays the
    forward graph of ``c`` (a ``Captured``) and its backward the backward graph.
    One class for every callable (a subclass per callable only names it), so
    that no class, which Python frees only by its cycle collector, holds a
    callable's graphs: they go with the last call that needs them."""

    @staticmethod
    def forward(ctx, c, *inputs):
        # the parameters are their own static inputs: only the arguments are staged
        c.forward.stage_and_launch(c.static_args, inputs[: c.n_args])
        c.calls += 1
        ctx.c, ctx.call = c, c.calls
        if config.check_stale_outputs:  # the previous call's outputs are stale from now on
            outs = tuple(c.handout.give(c.outputs))
        else:
            c.handout.expire()
            outs = tuple(o.detach() for o in c.outputs)
        ctx.mark_non_differentiable(*[o for o, g in zip(outs, c.grad_outputs, strict=True) if g is None])
        return outs

    @staticmethod
    def backward(ctx, *grads):
        c = ctx.c
        if ctx.call != c.calls:
            raise RuntimeError(
                f"{c.label} was called again before the backward of an earlier call; its graphs keep "
                "one call's activations, so run each call's backward before the next call"
            )
        if is_grad_enabled():  # create_graph=True: the replay would record nothing to differentiate
            raise RuntimeError(
                f"{c.label} replays its backward as a graph, which autograd cannot differentiate again; "
                "compute gradients of gradients (create_graph=True) with the function run eagerly"
            )
        for static, g in zip(c.grad_outputs, grads, strict=True):
            if static is not None:
                static.copy_(g)
        c.backward.replay()
        return (None, *[None if g is None else g.clone() for g in c.grad_inputs])  # the next replay rewrites them


class Captured:
    """The two graphs of one callable and the tensors they read and write.

    ``trace`` is entered inside each capture (``tp.compile`` fuses the ops of
    both passes with it); ``label`` names the callable in errors ("graphed f");
    ``parameters`` are the tensors besides ``args`` that get gradients (by
    default those of ``fn`` as a module). The forward is captured here,
    the backward by ``capture_backward()``; ``apply`` replays them.
    """

    def __init__(
        self, fn, args: tuple, pool, warmup: int, allow_unused: bool, mode: str, label: str | None = None,
        trace=nullcontext, parameters: tuple | None = None,
    ) -> None:  # fmt: skip
        self.name = getattr(fn, "__qualname__", type(fn).__name__)
        self.label = label or f"graphed {self.name}"
        self.fn, self.static_args, self.n_args = fn, args, len(args)
        self.static_inputs = args + (trainable_parameters(fn) if parameters is None else parameters)
        self.differentiable = [i for i, t in enumerate(self.static_inputs) if t.requires_grad]
        self.allow_unused = allow_unused
        self.trace = trace
        for _ in range(warmup):  # compiles every kernel before the capture
            outs, _single = _outputs(fn(*args), self.name)
            self._grads(outs, [ones_like(o) for o in outs if o.requires_grad], autograd)
        self.forward = CUDAGraph()
        with graph(self.forward, pool=pool, capture_error_mode=mode), trace():
            outs, self.single = _outputs(fn(*args), self.name)
        self.outputs = outs  # kept with their recorded nodes: the memory they save stays the graphs'
        self.grad_outputs = tuple(empty_like(o) if o.requires_grad else None for o in outs)
        self.mode, self.pool = mode, pool
        self.calls = 0  # forwards so far: a backward must belong to the latest one
        self.handout = Handout(self.label)  # each forward's outputs, stale at the next forward
        self._function = type(f"Graphed_{self.name}", (_Replay,), {})  # named for grad_fn

    def apply(self, *inputs) -> tuple:
        """Replay the forward on ``inputs`` (the arguments, then the other
        static inputs), recorded by autograd as one node whose backward replays
        the backward graph; returns the outputs."""
        return self._function.apply(self, *inputs)

    def capture_backward(self) -> None:
        self.backward = CUDAGraph()
        with graph(self.backward, pool=self.pool, capture_error_mode=self.mode), self.trace():
            self.grad_inputs = self._grads(self.outputs, [g for g in self.grad_outputs if g is not None], autograd)

    def _grads(self, outs, grad_outs, autograd) -> list:
        """Gradients of ``outs`` for every static input (None where it needs none)."""
        wanted = [o for o in outs if o.requires_grad]
        grads = [None] * len(self.static_inputs)
        if not wanted or not self.differentiable:
            return grads
        try:
            found = autograd.grad(
                wanted, [self.static_inputs[i] for i in self.differentiable], grad_outputs=grad_outs,
                retain_graph=True, allow_unused=self.allow_unused,
            )  # fmt: skip
        except RuntimeError as e:
            if "was not used to compute the outputs" not in str(e):
                raise
            unused = self.differentiable[int(str(e).split("input ", 1)[1].split(" ", 1)[0])]
            what = f"argument {unused}" if unused < self.n_args else "a parameter of the module"
            raise RuntimeError(
                f"{self.label}: {what} requires grad but the outputs do not use it; pass allow_unused_input=True "
                "to make_graphed_callables to get None as its gradient"
            ) from None
        for i, g in zip(self.differentiable, found, strict=True):
            grads[i] = g
        return grads


def hides_leaves(outs, inputs) -> bool:
    """True when ``outs`` were computed from a tensor that requires grad which
    is none of ``inputs`` (one reached through a closure): a graphed backward
    would give it no gradient."""
    known = {id(t._ag) for t in inputs if t.requires_grad}
    stack = [o.grad_fn for o in outs if o.grad_fn is not None]
    seen = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for meta in node.inputs:
            if meta is None:
                continue
            if meta.node is not None:
                stack.append(meta.node)
            elif meta.requires_grad and id(meta) not in known:
                return True
    return False


def _refuse_hidden_leaves(c: Captured) -> None:
    """A tensor that requires grad reached through a closure would silently get
    no gradient from the graphed backward: say so at capture time."""
    if hides_leaves(c.outputs, c.static_inputs):
        raise ValueError(
            f"{c.name} uses a tensor that requires grad but is neither one of its arguments nor a parameter "
            "of the module; its gradient would be lost in the graphed backward: pass it as an argument"
        )


def _module_parameters(fn) -> list:
    """``(name, parameter)`` of each parameter of ``fn`` (a module); none for a function."""
    named = getattr(fn, "named_parameters", None)
    return list(named()) if callable(named) else []


def _refuse_replaced(c: Captured, at_capture: list) -> None:
    """A parameter assigned anew or cast (``Module.to``) since the capture is not
    the tensor the graphs read: a replay would silently compute with the old
    one and give it the gradient. Say which, and how to graph the new ones."""
    now = _module_parameters(c.fn)
    if len(now) == len(at_capture) and all(p is q for (_, p), (_, q) in zip(now, at_capture, strict=True)):
        return
    was = dict(at_capture)
    name = next((n for n, p in now if was.get(n) is not p), None) or next(
        n for n, _ in at_capture if n not in dict(now)
    )
    raise ValueError(
        f"parameter {name!r} of graphed {c.name} is not the tensor it was captured with (it was assigned, removed "
        "or cast by Module.to since), so a replay would read the old one; call make_graphed_callables again "
        "after replacing parameters (load_state_dict writes into the captured ones)"
    )


def _left_out_parameters(c: Captured) -> list:
    """``(name, parameter)`` of each parameter of ``c.fn`` (a module) that the
    captured backward gives no gradient: those frozen at capture time."""
    captured = {id(t) for t in c.static_inputs}
    return [(name, p) for name, p in _module_parameters(c.fn) if id(p) not in captured]


def _refuse_unfrozen(c: Captured, left_out: list) -> None:
    """A parameter frozen at capture and unfrozen since would silently get no
    gradient from the graphed backward: say which, and how to get one."""
    if not is_grad_enabled():  # nothing is recorded, so no gradient is lost
        return
    for name, p in left_out:
        if p.requires_grad:
            raise ValueError(
                f"parameter {name!r} of graphed {c.name} requires grad now but did not when it was captured, so "
                "the captured backward computes no gradient for it; call make_graphed_callables again after "
                "changing which parameters require grad"
            )


def _graphed(c: Captured):
    n_args = c.n_args
    at_capture, left_out = _module_parameters(c.fn), _left_out_parameters(c)

    def graphed(*args, **kwargs):
        if kwargs:
            names = ", ".join(map(repr, kwargs))
            raise TypeError(
                f"graphed {c.name} takes its {n_args} tensor arguments by position, as captured; got keyword "
                f"argument(s) {names}: pass them positionally, in the order of the sample arguments"
            )
        if len(args) != n_args:
            raise TypeError(f"graphed {c.name} takes {n_args} tensor arguments, as captured; got {len(args)}")
        for i, (a, s) in enumerate(zip(args, c.static_inputs, strict=False)):
            if not isinstance(a, Tensor):
                what = "a NumPy array" if isinstance(a, np.ndarray) else f"a {type(a).__name__}"
                raise TypeError(
                    f"argument {i} of graphed {c.name} is {what}; graphed callables take tensorplay Tensors, as "
                    "captured: copy it to the device with tp.tensor(...)"
                )
            if a.shape != s.shape or a.dtype is not s.dtype:
                raise ValueError(
                    f"graphed {c.name} was captured for shape {s.shape} and {s.dtype}; got {a.shape} and {a.dtype}"
                )
            if a.requires_grad and not s.requires_grad:
                raise ValueError(
                    f"argument {i} of graphed {c.name} requires grad but its sample did not, so the captured "
                    "backward computes no gradient for it; capture with a sample that requires grad"
                )
        _refuse_replaced(c, at_capture)
        _refuse_unfrozen(c, left_out)
        outs = c.apply(*args, *c.static_inputs[n_args:])
        return outs[0] if c.single else outs

    return graphed


def make_graphed_callables(
    callables, sample_args, num_warmup_iters: int = 3, allow_unused_input: bool = False, pool=None,
    capture_error_mode: str = "global",
):  # fmt: skip
    """Graph the forward and backward of functions or modules.

    Parameters
    ----------
    callables : a function or module, or a tuple of them
        Each takes tensors and returns a tensor or a tuple of tensors. A module's
        parameters that require grad get gradients as in eager mode.
    sample_args : a tuple of tensors (a tuple of such tuples for several callables)
        The arguments to capture with. They become the graphs' inputs: later calls
        copy their arguments into them, so they must keep their shapes and dtypes.
    num_warmup_iters : int
        Eager runs (forward and backward) before the capture, which compile the kernels.
    allow_unused_input : bool
        Give None as the gradient of an input the outputs do not use, rather than raise.
    pool : a pool id, optional
        The private pool the graphs allocate from (a fresh one if None).

    Returns the graphed callables in the same structure. A module comes back with
    its ``forward`` graphed while it stays in the training mode it was captured
    in; in the other mode it runs eagerly. Its graphs read the parameter tensors
    it had at capture: a call after one was assigned anew or cast (``Module.to``)
    is refused with a ``ValueError``; graph the module again (which captures its
    own forward, not the earlier graphs) after such a change, after freezing or
    unfreezing parameters, or for other shapes. Call the graphed callables in the order
    they were captured, as with any graphs that share a pool. They take tensorplay
    Tensors by position, of the samples' shapes and dtypes: a keyword argument or
    host data (a NumPy array) is refused with a ``TypeError``, since the graph's
    inputs are device tensors fed to autograd (``tp.tensor(array)`` copies one there).

    A callable that changes its arguments in place changes the captured sample
    tensors at each replay, not the tensors passed to the call (``tp.compile``
    copies such changes back to the call's arguments).

    A module (and each of its submodules) may not carry hooks, which a replay
    would skip, nor buffers that require grad, which the graphed backward would
    give no gradient: both are refused with a ``ValueError`` before anything runs.

    Examples
    --------
    >>> import tensorplay as tp
    >>> w = tp.tensor([1.0, 2.0]).requires_grad_()
    >>> f = tp.cuda.make_graphed_callables(lambda x, w: (x * w).sum(), (tp.ones(2), w))
    >>> f(tp.tensor([3.0, 4.0]), w).backward()
    >>> w.grad.tolist()
    [3.0, 4.0]
    """
    if not isinstance(num_warmup_iters, int) or isinstance(num_warmup_iters, bool) or num_warmup_iters < 0:
        raise ValueError(f"expected num_warmup_iters to be a number of runs (0 or more), got {num_warmup_iters!r}")
    just_one = not isinstance(callables, tuple)
    if just_one:
        callables, sample_args = (callables,), (sample_args,)
    if not isinstance(sample_args, tuple) or len(sample_args) != len(callables):
        raise ValueError(
            f"make_graphed_callables: expected one tuple of sample arguments per callable ({len(callables)}), "
            f"got {len(sample_args) if isinstance(sample_args, tuple) else type(sample_args).__name__}"
        )
    for fn in callables:
        if not callable(fn):
            raise TypeError(f"make_graphed_callables: expected functions or modules, got {type(fn).__name__}")
        _refuse_hooks_and_trainable_buffers(fn)
    args = [_tensors(a, "make_graphed_callables") for a in sample_args]
    pool = pool if pool is not None else graph_pool_handle()
    # a module graphed before is captured through its own forward, not through its earlier graphs
    earlier = [(fn, fn.forward) for fn in callables if hasattr(getattr(fn, "forward", None), "eager_forward")]
    for module, forward in earlier:
        module.forward = forward.eager_forward
    try:
        captured = []
        for fn, a in zip(callables, args, strict=True):
            captured.append(Captured(fn, a, pool, num_warmup_iters, allow_unused_input, capture_error_mode))
            _refuse_hidden_leaves(captured[-1])
        for c in reversed(captured):  # backward graphs in the order a backward pass runs them
            c.capture_backward()
    except BaseException:
        for module, forward in earlier:  # as it was: still graphed as before
            module.forward = forward
        raise
    results = tuple(_as_callable(c) for c in captured)
    return results[0] if just_one else results


def _as_callable(c: Captured):
    graphed = _graphed(c)
    module = c.fn
    if not all(hasattr(module, a) for a in ("parameters", "training", "forward")):
        return graphed
    eager, training = module.forward, module.training

    def forward(*args, **kwargs):
        return graphed(*args, **kwargs) if module.training == training else eager(*args, **kwargs)

    forward.eager_forward = eager  # what graphing the module again captures
    module.forward = forward
    return module
