"""``Function``: an op with a hand-written backward, as in PyTorch."""

from __future__ import annotations

import weakref

from .._grad_mode import is_grad_enabled, no_grad
from .._tape import Meta, needs_grad, record
from .._tensor import Tensor

__all__ = ["Function", "FunctionCtx"]


class FunctionCtx:
    """What ``forward`` leaves for ``backward``: tensors saved with
    ``save_for_backward``, anything set as an attribute, and
    ``needs_input_grad`` (one bool per argument of ``apply``)."""

    def __init__(self, needs_input_grad: tuple) -> None:
        self.needs_input_grad = needs_input_grad
        self.saved_tensors: tuple = ()
        self.non_differentiable: tuple = ()

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors

    def mark_non_differentiable(self, *tensors) -> None:
        """Outputs that do not require grad (as PyTorch's): their gradient given
        to ``backward`` is zero."""
        self.non_differentiable = tensors


class Function:
    """Define an op by its forward and backward; call it with ``apply``.

    ``forward(ctx, *args)`` runs with recording off and returns a tensor or a
    tuple of tensors; ``backward(ctx, *grads)`` gets one gradient per output and
    returns one per argument of ``forward`` (None for those without).

    Examples
    --------
    >>> import tensorplay as tp
    >>> class Cube(tp.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, x):
    ...         ctx.save_for_backward(x)
    ...         return x * x * x
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         (x,) = ctx.saved_tensors
    ...         return 3 * x * x * g
    >>> x = tp.tensor([2.0]).requires_grad_()
    >>> Cube.apply(x).sum().backward()
    >>> x.grad.tolist()
    [12.0]
    """

    @staticmethod
    def forward(ctx, *args):
        raise NotImplementedError("a Function subclass defines forward(ctx, *args)")

    @staticmethod
    def backward(ctx, *grads):
        raise NotImplementedError("a Function subclass defines backward(ctx, *grads) to be differentiated")

    @classmethod
    def apply(cls, *args):
        ctx = FunctionCtx(tuple(needs_grad(a) for a in args))
        with no_grad():
            out = cls.forward(ctx, *args)
        single = not isinstance(out, tuple)
        outs = tuple(
            o.detach() if any(o is a for a in args) else o  # an argument returned: a new tensor on its memory
            for o in ((out,) if single else out)
        )
        for i, o in enumerate(outs):
            if not isinstance(o, Tensor):
                raise TypeError(f"{cls.__name__}.forward must return tensors, got {type(o).__name__} as output {i}")
        saved_outputs = [next((i for i, o in enumerate(outs) if o is t), None) for t in ctx.saved_tensors]
        ctx.saved_tensors = tuple(  # the outputs kept without a cycle through their own node
            t if i is None else outs[i].detach() for t, i in zip(ctx.saved_tensors, saved_outputs, strict=True)
        )
        node = None  # set once recorded; the backward holds it weakly, as the node holds the backward

        def grads(gs):
            detached = ctx.saved_tensors
            if is_grad_enabled():  # create_graph=True: saved outputs must lead back through this node
                ctx.saved_tensors = _attached(detached, saved_outputs, outs_recorded, node())
            try:
                result = cls.backward(ctx, *gs)
            finally:
                ctx.saved_tensors = detached
            result = result if isinstance(result, tuple) else (result,)
            if len(result) != len(args):
                raise ValueError(
                    f"{cls.__name__}.backward returned {len(result)} gradients; forward takes {len(args)} arguments"
                )
            checked = []
            for i, (a, g) in enumerate(zip(args, result, strict=True)):
                if g is None or not needs_grad(a):
                    checked.append(None)
                    continue
                if not isinstance(g, Tensor):
                    raise TypeError(
                        f"{cls.__name__}.backward must return tensors or None, got {type(g).__name__} for argument {i}"
                    )
                if g.shape != a.shape:
                    raise ValueError(
                        f"{cls.__name__}.backward returned a gradient of shape {g.shape} "
                        f"for an argument of shape {a.shape}"
                    )
                checked.append(g if g.dtype is a.dtype else g.to(a.dtype))
            return _unshared(checked, _held_storages(ctx, args, outs))

        record(f"{cls.__name__}Backward", outs, args, grads)
        for o in outs:
            if any(o is t for t in ctx.non_differentiable):
                o._ag = None
        outs_recorded = tuple(needs_grad(o) for o in outs)
        made = next((o._ag.node for o in outs if needs_grad(o)), None)
        if made is not None:
            node = weakref.ref(made)
        return outs[0] if single else outs


def _held_storages(ctx: FunctionCtx, args: tuple, outs: tuple) -> set:
    """The ids of the memory of every tensor the Function keeps past its
    backward: its arguments, its outputs, what ``forward`` saved, and the
    tensors set on ``ctx`` (directly or in a tuple, list or dict)."""
    held = [*args, *outs, *ctx.saved_tensors]
    for value in vars(ctx).values():
        if isinstance(value, dict):
            value = tuple(value.values())
        held.extend(value if isinstance(value, (tuple, list)) else (value,))
    return {id(t._storage) for t in held if isinstance(t, Tensor)}


def _unshared(grads: list, held: set) -> tuple:
    """The gradients, each one on memory the Function keeps (a saved tensor
    returned as it is) copied: the engine adopts a new gradient as a leaf's
    ``.grad`` and later adds into it in place, which must not write the
    Function's tensors (PyTorch copies a gradient referenced elsewhere too)."""
    return tuple(g.clone() if g is not None and id(g._storage) in held else g for g in grads)


def _attached(saved: tuple, saved_outputs: list, recorded: tuple, node) -> tuple:
    """The saved tensors with each saved output that autograd records given back
    its place in the graph (output ``i`` of ``node``), so that a backward
    computed with ``create_graph=True`` is differentiated through it too (the
    second derivative of ``exp`` needs its saved output's gradient)."""
    attached = []
    for t, i in zip(saved, saved_outputs, strict=True):
        if i is not None and recorded[i]:
            t = t.detach()
            t._ag = Meta(True, node, i)
        attached.append(t)
    return tuple(attached)
