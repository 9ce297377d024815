"""The recorded graph: what each tensor that requires grad knows, and the engine
that walks it backwards.

A tensor that requires grad carries a ``Meta``: a leaf's holds its ``grad``; a
result's points at the ``Node`` of the op that made it. A node keeps its
backward function (the gradients of the op's inputs from those of its outputs)
and the metas of the inputs it sends gradients to.

Real floating-point and complex tensors take part. For a complex tensor
``z = a + ib`` the gradient is PyTorch's, the conjugate Wirtinger derivative
scaled by two: for a real loss ``L`` it is ``dL/da + i dL/db``, so that
``dL = Re(sum(conj(grad) * dz))``; a holomorphic ``f`` sends ``g`` back as
``g * conj(f'(z))``, and a real input of a complex result gets the real part
of what reaches it.
"""

from __future__ import annotations

from ._dtype import real_dtype
from ._grad_mode import is_grad_enabled, set_grad_enabled

__all__ = ["Meta", "Node", "needs_grad", "record", "refuse_in_place", "run_backward", "sum_to"]


class Meta:
    """Autograd state of one tensor."""

    __slots__ = ("requires_grad", "grad", "node", "index", "retains_grad")

    def __init__(self, requires_grad: bool, node: Node | None = None, index: int = 0) -> None:
        self.requires_grad, self.node, self.index = requires_grad, node, index
        self.grad = None
        self.retains_grad = False


class Node:
    """One recorded op: ``backward(grads of outputs) -> grads of inputs``.

    ``grad_fn`` of a result; its ``name`` reads like PyTorch's (``MulBackward``).
    """

    __slots__ = ("name", "backward", "inputs", "outputs", "__weakref__")

    def __init__(self, name: str, backward, inputs: tuple, outputs: tuple) -> None:
        self.name, self.backward, self.inputs = name, backward, inputs
        self.outputs = outputs  # (shape, dtype) of each output, for the zero gradient of an unused one

    @property
    def next_functions(self) -> tuple:
        return tuple((m.node if m is not None else None) for m in self.inputs)

    def __repr__(self) -> str:
        return f"<{self.name}>"


def needs_grad(t) -> bool:
    """Whether an op on ``t`` must be recorded."""
    ag = getattr(t, "_ag", None)
    return ag is not None and ag.requires_grad


def record(name: str, outputs, inputs, backward):
    """Attach a node to ``outputs`` (a tensor or a tuple) if grad mode is on and
    any of ``inputs`` requires grad; ``backward`` maps the output gradients (a
    tuple) to one gradient (or None) per input. Returns ``outputs``.

    The real floating-point and complex outputs get gradients; integer and
    bool ones (indices, masks) do not."""
    if not is_grad_enabled():
        return outputs
    metas = tuple(t._ag if needs_grad(t) else None for t in inputs)
    if not any(metas):
        return outputs
    outs = outputs if isinstance(outputs, tuple) else (outputs,)
    node = Node(name, backward, metas, tuple((o.shape, o.dtype) for o in outs))
    for i, o in enumerate(outs):
        if o.dtype.kind in "fc":
            o._ag = Meta(True, node, i)
    return outputs


def _first(g, seen: set, create_graph: bool):
    """The first gradient a tensor keeps: ``g`` itself the first time its memory
    is handed out, a copy after (two tensors must never share one ``.grad``:
    ``+=`` on one would change the other), and always a dense tensor, never a
    broadcast view."""
    g = g if create_graph else g.detach()
    key = id(g._storage)
    if key in seen or not g.is_contiguous():
        return g.contiguous() if key not in seen else g.clone()
    seen.add(key)
    return g


def _order(roots) -> list:
    """The nodes reachable from ``roots``, each after every node that feeds it."""
    users: dict[Node, int] = {}
    stack = [m.node for m in roots if m.node is not None]
    seen = set(stack)
    while stack:
        node = stack.pop()
        for m in node.inputs:
            if m is not None and m.node is not None:
                users[m.node] = users.get(m.node, 0) + 1
                if m.node not in seen:
                    seen.add(m.node)
                    stack.append(m.node)
    ready = [n for n in {m.node for m in roots if m.node is not None} if users.get(n, 0) == 0]
    order = []
    while ready:
        node = ready.pop()
        order.append(node)
        for m in node.inputs:
            if m is not None and m.node is not None:
                users[m.node] -= 1
                if users[m.node] == 0:
                    ready.append(m.node)
    return order


def _add(a, b):
    return b if a is None else a + b


def _accumulate(meta: Meta, g, seen: set, fresh: set, create_graph: bool) -> None:
    """Add ``g`` to ``meta.grad``. A gradient that existed before this backward
    pass grows in place, as in PyTorch, so a captured backward keeps adding into
    the same memory at every replay; one made during this pass grows out of
    place, since it may still be another node's pending input."""
    if meta.grad is not None and g.dtype is not meta.grad.dtype:
        g = g.to(meta.grad.dtype)  # .grad keeps its tensor's dtype, as in PyTorch
    if meta.grad is None:
        meta.grad = _first(g, seen, create_graph)
        fresh.add(id(meta))
    elif create_graph or id(meta) in fresh or meta.grad.requires_grad:
        meta.grad = meta.grad + g
    else:
        meta.grad.add_(g)


def _leading_to(order: list, targets: dict) -> set:
    """The nodes from which a target is reached, through other targets too (the
    gradient of an input counts every path to it, as in PyTorch)."""
    needed: set = set()
    for node in reversed(order):  # inputs first
        for m in node.inputs:
            if m is not None and (id(m) in targets or (m.node is not None and m.node in needed)):
                needed.add(node)
                break
    return needed


def _as_output(g, dtype):
    """``g`` in the dtype of the output it is the gradient of: PyTorch casts at
    every edge, so a gradient of another dtype never spreads to the inputs."""
    return g if g.dtype is dtype else g.to(dtype)


def _zeros_like_one_of(slots: list, shape, dtype):
    """A zero gradient for an output no gradient reached, made as a tensor of
    its sibling outputs' gradients is (``_empty`` of the Tensor class)."""
    made = next(g for g in slots if g is not None)
    return made._empty(shape, dtype).zero_()


def run_backward(roots, grads, retain_graph: bool, create_graph: bool, targets=None):
    """Send ``grads`` back from the ``roots`` (metas). Without ``targets`` the
    gradients accumulate into the leaves' ``.grad``; with them (a list of metas)
    they are returned instead, one per target (None where none arrived), and
    only the nodes that lead to a target run."""
    pending: dict[Node, list] = {}
    found = {id(m): None for m in targets} if targets is not None else None
    seen = {id(g._storage) for g in grads}
    fresh: set = set()  # metas whose .grad this pass made

    def arrive(meta: Meta, g) -> None:
        if found is not None:
            if id(meta) in found:  # a target computed from another target passes its gradient on too
                found[id(meta)] = _add(found[id(meta)], g)
            if meta.node is None:
                return
        elif meta.node is None:
            if meta.requires_grad:
                _accumulate(meta, g, seen, fresh, create_graph)
            return
        elif meta.retains_grad:
            _accumulate(meta, g, seen, fresh, create_graph)
        slots = pending.setdefault(meta.node, [None] * len(meta.node.outputs))
        slots[meta.index] = _add(slots[meta.index], g)

    with set_grad_enabled(create_graph):
        for meta, g in zip(roots, grads, strict=True):
            arrive(meta, g)
        order = _order(roots)
        needed = _leading_to(order, found) if found is not None else None
        for node in order:
            slots = pending.pop(node, None)
            if slots is None or (needed is not None and node not in needed):
                continue
            if node.backward is None:
                raise RuntimeError(
                    f"{node.name} was already run backward and its saved tensors freed; "
                    "pass retain_graph=True to the first backward() to run it again"
                )
            outs = tuple(
                _as_output(g, dtype) if g is not None else _zeros_like_one_of(slots, shape, dtype)
                for g, (shape, dtype) in zip(slots, node.outputs, strict=True)
            )
            in_grads = node.backward(outs)
            if not retain_graph:
                node.backward = None
            for meta, g in zip(node.inputs, in_grads, strict=True):
                if meta is not None and g is not None:
                    arrive(meta, g)
    return None if targets is None else [found[id(m)] for m in targets]


def sum_to(g, shape):
    """``g`` summed down to ``shape``: the gradient of broadcasting to ``g.shape``."""
    shape = tuple(shape)
    if g.shape == shape:
        return g
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1)
    if not dims:
        return g.reshape(shape)
    return (_complex_sum(g, dims) if g.dtype.kind == "c" else g.sum(dims, keepdim=True)).reshape(shape)


def _complex_sum(g, dims):
    """The sum of a complex ``g`` over ``dims`` (kept), as the sums of its real
    and imaginary parts (``Tensor.sum`` reduces real tensors only), recorded
    like any op when ``g`` requires grad."""
    part = real_dtype(g.dtype)
    real, imag = g.to(part).sum(dims, keepdim=True), (g * -1j).to(part).sum(dims, keepdim=True)
    return real + imag * 1j


def refuse_in_place(what: str, target, *sources) -> None:
    """In-place ops are not recorded: refuse them where a gradient would be lost."""
    if not is_grad_enabled():
        return
    if needs_grad(target):
        leaf = target._ag.node is None
        raise RuntimeError(
            f"{what} on a tensor that requires grad is not recorded by autograd"
            + ("; update a leaf inside `with tp.no_grad():`" if leaf else "; write it out of place (y = y + x)")
        )
    if any(needs_grad(s) for s in sources):
        raise RuntimeError(
            f"{what} would write a tensor that requires grad into one that does not; "
            "autograd does not record in-place ops: write it out of place (y = x * 1 ...) or detach() the source"
        )
