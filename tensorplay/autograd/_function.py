"""``Function``: an op with a hand-written backward, as in PyTorch."""

from __future__ import annotations

from ._graph import needs_grad, record
from ._mode import no_grad

__all__ = ["Function", "FunctionCtx"]


class FunctionCtx:
    """What ``forward`` leaves for ``backward``: tensors saved with
    ``save_for_backward``, anything set as an attribute, and
    ``needs_input_grad`` (one bool per argument of ``apply``)."""

    def __init__(self, needs_input_grad: tuple) -> None:
        self.needs_input_grad = needs_input_grad
        self.saved_tensors: tuple = ()

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors


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
        if any(out is a for a in args):  # an argument returned as is: the result is a new tensor on its memory
            out = out.detach()
        outs = out if isinstance(out, tuple) else (out,)
        name = f"{cls.__name__}Backward"

        def grads(gs):
            result = cls.backward(ctx, *gs)
            result = result if isinstance(result, tuple) else (result,)
            if len(result) != len(args):
                raise ValueError(
                    f"{cls.__name__}.backward returned {len(result)} gradients; forward takes {len(args)} arguments"
                )
            for a, g in zip(args, result, strict=True):
                if g is not None and needs_grad(a) and g.shape != a.shape:
                    raise ValueError(
                        f"{cls.__name__}.backward returned a gradient of shape {g.shape} "
                        f"for an argument of shape {a.shape}"
                    )
            return result

        record(name, tuple(o for o in outs), args, grads)
        return out
