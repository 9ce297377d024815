"""``backward`` and ``grad``: check what is asked, then run the graph backwards."""

from __future__ import annotations

from .._factories import ones
from .._grad_mode import no_grad
from .._tape import needs_grad, run_backward
from .._tensor import Tensor, add_methods

__all__ = ["backward", "clear_grads", "grad"]


def _as_list(x) -> list:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _roots(outputs, grad_outputs, what: str):
    """The outputs' metas and their starting gradients (ones for one-element outputs)."""
    outputs = _as_list(outputs)
    grads = _as_list(grad_outputs) if grad_outputs is not None else [None] * len(outputs)
    if len(grads) != len(outputs):
        raise ValueError(f"{what}: got {len(grads)} gradients for {len(outputs)} outputs")
    metas, starts = [], []
    for i, (out, g) in enumerate(zip(outputs, grads, strict=True)):
        if not isinstance(out, Tensor) or (g is not None and not isinstance(g, Tensor)):
            bad = out if not isinstance(out, Tensor) else g
            raise TypeError(f"{what}: expected tensors as outputs and gradients, got {type(bad).__name__}")
        if not needs_grad(out):
            raise RuntimeError(
                f"{what}: output {i} does not require grad and has no grad_fn; "
                "call requires_grad_() on an input before computing it (and not under tp.no_grad())"
            )
        if g is None:
            if out.dtype.kind == "c":
                raise RuntimeError(
                    f"{what}: a gradient can only be implied for a real output, got {out.dtype}; "
                    "pass the gradient of the output explicitly, or make a real loss of it first (tp.real(y), y.abs())"
                )
            if out.numel() != 1:
                raise RuntimeError(
                    f"{what}: a gradient can only be implied for a one-element output, got shape {out.shape}; "
                    "pass the gradient of the output explicitly"
                )
            g = ones(out.shape, dtype=out.dtype)
        elif g.shape != out.shape:
            raise ValueError(f"{what}: gradient of shape {g.shape} given for an output of shape {out.shape}")
        elif g.dtype is not out.dtype:
            g = g.to(out.dtype)  # as PyTorch: the gradient takes its output's dtype
        metas.append(out._ag)
        starts.append(g)
    return metas, starts


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False) -> None:
    """Accumulate the gradients of ``tensors`` into the ``.grad`` of the leaves
    they were computed from.

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([1.0, 2.0]).requires_grad_()
    >>> (x * x).sum().backward()
    >>> x.grad.tolist()
    [2.0, 4.0]
    """
    metas, starts = _roots(tensors, grad_tensors, "backward()")
    run_backward(metas, starts, bool(create_graph if retain_graph is None else retain_graph), create_graph)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph: bool = False, allow_unused: bool = False):
    """The gradients of ``outputs`` with respect to ``inputs``, returned as a
    tuple (the inputs' ``.grad`` is left alone).

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([3.0]).requires_grad_()
    >>> (g,) = tp.autograd.grad((x * x).sum(), x, create_graph=True)
    >>> g.tolist(), tp.autograd.grad(g.sum(), x)[0].tolist()
    ([6.0], [2.0])
    """
    inputs = _as_list(inputs)
    for i, x in enumerate(inputs):
        if not needs_grad(x):
            raise RuntimeError(f"grad(): input {i} does not require grad")
    metas, starts = _roots(outputs, grad_outputs, "grad()")
    found = run_backward(
        metas, starts, bool(create_graph if retain_graph is None else retain_graph), create_graph,
        targets=[x._ag for x in inputs],
    )  # fmt: skip
    for i, g in enumerate(found):
        if g is None and not allow_unused:
            raise RuntimeError(
                f"grad(): input {i} was not used to compute the outputs; pass allow_unused=True to get None for it"
            )
    return tuple(found)


def clear_grads(tensors, set_to_none: bool = True) -> None:
    """Drop the tensors' gradients (``set_to_none``) or fill them with zeros in
    place (a captured ``zero_grad`` then clears the same memory at each replay):
    ``Module.zero_grad`` and ``Optimizer.zero_grad``. A gradient made by a
    ``create_graph=True`` backward is taken out of its graph first, as in
    PyTorch: a zero that still required grad would keep the old graph alive
    and make the next backward replace it rather than add into it."""
    for t in tensors:
        if t.grad is None:
            continue
        if set_to_none:
            t.grad = None
        else:
            with no_grad():
                t.grad.detach_().zero_()


def _tensor_backward(self, gradient=None, retain_graph=None, create_graph: bool = False) -> None:
    """Accumulate the gradient of this tensor into the leaves' ``.grad``
    (``gradient`` is implied as 1 for a one-element tensor)."""
    backward(self, gradient, retain_graph, create_graph)


_tensor_backward.__name__ = _tensor_backward.__qualname__ = "backward"
add_methods({"backward": _tensor_backward})
