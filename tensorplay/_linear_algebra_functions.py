"""Linear algebra of the main namespace: the standard's ``matmul``,
``matrix_transpose``, ``tensordot`` and ``vecdot``, and PyTorch's ``bmm``,
``outer``, ``trace``, ``diagonal``, ``diag`` and ``einsum``.

Every product is ``_matmul``'s kernel on operands brought to (batch, M, K)
and (batch, K, N) by permutes and reshapes, ``diagonal`` is a view; all are
differentiable through the ops they are made of (``diagonal`` records its own
backward), and none reads device data on the host.
"""

from __future__ import annotations

from . import _differentiable as AG
from . import _dtype as dt
from ._aliases import either
from ._differentiable import tracked
from ._grad_mode import no_grad
from ._matmul import matmul as _matmul
from ._shape import broadcast_shapes, numel
from ._statistical_functions import sum as _sum
from ._tape import record
from ._tensor import Tensor, add_methods

__all__ = [
    "bmm", "diag", "diagonal", "einsum", "matmul", "matrix_transpose", "outer", "tensordot", "trace", "vecdot",
]  # fmt: skip


def matmul(x1: Tensor, x2: Tensor, /) -> Tensor:
    """The matrix product ``x1 @ x2`` (1-D operands as vectors, leading
    dimensions broadcast), differentiable.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.matmul(tp.tensor([[1.0, 2.0]]), tp.tensor([[3.0], [4.0]])).tolist()
    [[11.0]]
    """
    if tracked(x1) or tracked(x2):
        return AG.matmul(x1, x2)
    return _matmul(x1, x2)


def bmm(input: Tensor, mat2: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """PyTorch's batched product of two 3-d tensors of one batch size (no broadcasting)."""
    if input.ndim != 3 or mat2.ndim != 3 or input.shape[0] != mat2.shape[0]:
        raise ValueError(f"bmm() expects two 3-d tensors of one batch size, got {input.shape} and {mat2.shape}")
    return matmul(input, mat2)


def matrix_transpose(x: Tensor, /) -> Tensor:
    """``x`` with its last two axes swapped (a view): the transpose of each matrix of a stack."""
    if x.ndim < 2:
        raise ValueError(f"matrix_transpose() expects at least 2 dimensions, got shape {x.shape}")
    return x.transpose(-1, -2)


def tensordot(x1: Tensor, x2: Tensor, /, dims=None, *, axes=2) -> Tensor:
    """The sum of products over ``axes``: an int ``n`` (the last ``n`` axes of
    ``x1`` with the first ``n`` of ``x2``) or two sequences of axes; PyTorch's
    ``dims`` too. The result's axes are ``x1``'s free ones, then ``x2``'s.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.tensordot(tp.ones((2, 3, 4)), tp.ones((3, 4, 5)), axes=2).shape
    (2, 5)
    """
    axes = either("tensordot", "axes", axes, "dims", dims, 2)
    if isinstance(axes, int):
        if axes < 0 or axes > min(x1.ndim, x2.ndim):
            raise ValueError(f"tensordot() expects 0 to {min(x1.ndim, x2.ndim)} axes to contract, got {axes}")
        a_axes, b_axes = tuple(range(x1.ndim - axes, x1.ndim)), tuple(range(axes))
    else:
        first, second = axes
        a_axes = tuple(x1._dim(a) for a in ((first,) if isinstance(first, int) else first))
        b_axes = tuple(x2._dim(b) for b in ((second,) if isinstance(second, int) else second))
    a_sizes, b_sizes = tuple(x1.shape[a] for a in a_axes), tuple(x2.shape[b] for b in b_axes)
    if a_sizes != b_sizes:
        raise ValueError(f"tensordot() contracts axes of sizes {a_sizes} and {b_sizes}, which differ")
    a_free = [d for d in range(x1.ndim) if d not in a_axes]
    b_free = [d for d in range(x2.ndim) if d not in b_axes]
    k = numel(a_sizes)
    a = x1.permute(a_free + list(a_axes)).reshape(numel([x1.shape[d] for d in a_free]), k)
    b = x2.permute(list(b_axes) + b_free).reshape(k, numel([x2.shape[d] for d in b_free]))
    return matmul(a, b).reshape(tuple(x1.shape[d] for d in a_free) + tuple(x2.shape[d] for d in b_free))


def vecdot(x1: Tensor, x2: Tensor, /, *, axis: int = -1, dim: int | None = None) -> Tensor:
    """The dot products of the vectors along ``axis`` (``torch.linalg.vecdot``'s
    ``dim`` too), the other axes broadcast; the contracted axis is not. Complex
    vectors: ``sum(conj(x1) * x2)``, as the standard and PyTorch define it.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.vecdot(tp.tensor([[1.0, 2.0], [3.0, 4.0]]), tp.tensor([1.0, 1.0])).tolist()
    [3.0, 7.0]
    """
    axis = either("vecdot", "axis", axis, "dim", dim, -1)
    if axis >= 0:  # counted in the broadcast shape
        axis -= len(broadcast_shapes(x1.shape, x2.shape))
    n1, n2 = x1.shape[x1._dim(axis)], x2.shape[x2._dim(axis)]
    if n1 != n2:
        raise ValueError(f"vecdot() needs vectors of one length along axis {axis}, got {n1} and {n2}")
    out = _sum((x1.conj() if x1.dtype.kind == "c" else x1) * x2, axis=axis)
    common = dt.promote(x1.dtype, x2.dtype)
    return out if out.dtype is common else out.to(common)


def outer(x1: Tensor, x2: Tensor, /) -> Tensor:
    """The outer product of two vectors: ``out[i, j] = x1[i] * x2[j]``."""
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError(f"outer() expects two 1-d tensors, got shapes {x1.shape} and {x2.shape}")
    return x1.reshape(-1, 1) * x2.reshape(1, -1)


def diagonal(x: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """PyTorch's ``diagonal``: the elements ``x[..., i, i + offset, ...]`` of
    dimensions ``dim1`` and ``dim2`` as a last dimension, a view (no copy).

    Examples
    --------
    >>> import tensorplay as tp
    >>> x = tp.tensor([[1, 2, 3], [4, 5, 6]])
    >>> tp.diagonal(x).tolist(), tp.diagonal(x, 1).tolist(), tp.diagonal(x, -1).tolist()
    ([1, 5], [2, 6], [4])
    """
    d1, d2 = x._dim(dim1), x._dim(dim2)
    if d1 == d2:
        raise ValueError(f"diagonal() needs two different dimensions, got {dim1} and {dim2}")
    n1, n2 = x.shape[d1], x.shape[d2]
    length = max(0, min(n1, n2 - offset) if offset >= 0 else min(n1 + offset, n2))
    start = (offset * x._strides[d2] if offset >= 0 else -offset * x._strides[d1]) if length else 0
    rest = [d for d in range(x.ndim) if d not in (d1, d2)]
    shape = tuple(x.shape[d] for d in rest) + (length,)
    strides = tuple(x._strides[d] for d in rest) + (x._strides[d1] + x._strides[d2],)
    out = x._view(shape, strides, start)

    def grads(gs):  # the gradient on the diagonal, zeros elsewhere (itself differentiable)
        g = gs[0]
        with no_grad():
            full = Tensor._empty(x.shape, g.dtype).zero_()
            diagonal(full, offset, d1, d2).copy_(g.detach())
        return (record("DiagonalBackwardBackward", full, (g,), lambda gg: (diagonal(gg[0], offset, d1, d2),)),)

    return record("DiagonalBackward", out, (x,), grads)


def diag(x: Tensor, diagonal: int = 0) -> Tensor:
    """PyTorch's ``diag``: a vector made the ``diagonal``-th diagonal of a square
    matrix of zeros, or a matrix's ``diagonal``-th diagonal (a copy)."""
    if x.ndim == 2:
        return _diagonal(x, diagonal).clone()
    if x.ndim != 1:
        raise ValueError(f"diag() expects a 1-d or 2-d tensor, got shape {x.shape}")
    size = x.shape[0] + abs(diagonal)
    with no_grad():
        out = Tensor._empty((size, size), x.dtype).zero_()
        _diagonal(out, diagonal).copy_(x.detach())
    return record("DiagBackward", out, (x,), lambda gs: (_diagonal(gs[0], diagonal),))


_diagonal = diagonal  # (``diag``'s argument is called diagonal, as PyTorch's)


def trace(x: Tensor, /, *, offset: int = 0, dtype=None) -> Tensor:
    """The sum of the ``offset``-th diagonal of each matrix (the last two axes);
    integers summed in 64 bits, as ``sum``."""
    if x.ndim < 2:
        raise ValueError(f"trace() expects at least 2 dimensions, got shape {x.shape}")
    return _sum(diagonal(x, offset, -2, -1), axis=-1, dtype=dtype)


# -- einsum ---------------------------------------------------------------------------------


def einsum(equation: str, *operands: Tensor) -> Tensor:
    """Einstein summation: ``"ij,jk->ik"`` and friends, as NumPy and PyTorch.

    Repeated indices of an operand take its diagonal; indices of no other
    operand nor the output are summed; each pair of operands is then one
    ``matmul`` (the indices they share and the output does not, contracted;
    those both keep, batched) or a broadcast product. ``...`` broadcasts.
    Without ``->`` the output holds the indices seen once, in alphabetical order.

    Examples
    --------
    >>> import tensorplay as tp
    >>> a, b = tp.ones((2, 3)), tp.ones((3, 4))
    >>> tp.einsum("ij,jk->ik", a, b).shape, tp.einsum("ii", tp.ones((3, 3))).item()
    ((2, 4), 3.0)
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    inputs, output = _parse(equation, operands)
    sizes: dict[str, int] = {}
    for spec, x in zip(inputs, operands, strict=True):
        for c, n in zip(spec, x.shape, strict=True):
            known = sizes.setdefault(c, n)
            if n != known and not (c in _DOTS and 1 in (n, known)):  # only ... broadcasts
                raise ValueError(f"einsum() index {c!r} has sizes {known} and {n}")
            sizes[c] = max(n, known)
    terms = [
        _single(x, list(spec), output, inputs, i) for i, (spec, x) in enumerate(zip(inputs, operands, strict=True))
    ]
    x, spec = terms[0]
    for i, (y, spec_y) in enumerate(terms[1:], start=1):
        later = set(output).union(*[inputs[j] for j in range(i + 1, len(inputs))])
        x, spec = _pair(x, spec, y, spec_y, later)
    summed = [d for d, c in enumerate(spec) if c not in output]
    if summed:
        x, spec = x.sum(summed), [c for c in spec if c in output]
    return x.permute([spec.index(c) for c in output]) if spec != list(output) else x


_DOTS = "".join(chr(0x3B1 + i) for i in range(25))  # Greek letters: what ``...`` stands for, which no equation uses


def _parse(equation: str, operands) -> tuple[list[str], str]:
    """The operands' subscripts and the output's, ``...`` spelled out as letters of its own."""
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(operands):
        raise ValueError(f"einsum() equation {equation!r} names {len(inputs)} operands, got {len(operands)}")
    spans = [x.ndim - len(s.replace("...", "")) for s, x in zip(inputs, operands, strict=True)]
    dots = _DOTS[: max([0, *spans])]
    for i, (spec, x) in enumerate(zip(inputs, operands, strict=True)):
        inputs[i] = spec.replace("...", dots[len(dots) - spans[i] :] if spans[i] > 0 else "")
        if len(inputs[i]) != x.ndim or not all(c.isalpha() for c in inputs[i]):
            raise ValueError(
                f"einsum() operand {i} has {x.ndim} dimensions, but its subscripts {spec!r} name {len(inputs[i])}"
            )
    if not arrow:
        seen = "".join(inputs)
        rhs = ("..." if dots else "") + "".join(sorted(c for c in set(seen) if seen.count(c) == 1 and c not in dots))
    output = rhs.replace("...", dots)
    for c in output:
        if not any(c in s for s in inputs):
            raise ValueError(f"einsum() output index {c!r} appears in no operand")
    if len(set(output)) != len(output):
        raise ValueError(f"einsum() output {rhs!r} repeats an index")
    return inputs, output


def _single(x: Tensor, spec: list, output: str, inputs: list, i: int) -> tuple[Tensor, list]:
    """Operand ``i`` with its repeated indices made diagonals and its own indices summed."""
    for c in dict.fromkeys(spec):
        while spec.count(c) > 1:
            first = spec.index(c)
            second = spec.index(c, first + 1)
            x = diagonal(x, 0, first, second)
            spec = [s for j, s in enumerate(spec) if j not in (first, second)] + [c]
    others = set(output).union(*[s for j, s in enumerate(inputs) if j != i])
    own = [d for d, c in enumerate(spec) if c not in others]
    if own:
        x, spec = x.sum(own), [c for c in spec if c in others]
    return x, spec


def _pair(a: Tensor, sa: list, b: Tensor, sb: list, keep: set) -> tuple[Tensor, list]:
    """The product of two terms, summed over the indices both have and ``keep`` does not."""
    batch = [c for c in sa if c in sb and c in keep]
    contract = [c for c in sa if c in sb and c not in keep]
    a_only, b_only = [c for c in sa if c not in sb], [c for c in sb if c not in sa]

    def size(t, spec, letters):
        return [t.shape[spec.index(c)] for c in letters]

    a = a.permute([sa.index(c) for c in batch + a_only + contract])
    b = b.permute([sb.index(c) for c in batch + contract + b_only])
    a_batch, b_batch = size(a, batch + a_only + contract, batch), size(b, batch + contract + b_only, batch)
    a_rows, b_cols = size(a, batch + a_only + contract, a_only), size(b, batch + contract + b_only, b_only)
    if not contract:  # a broadcast product
        a = a.reshape(tuple(a_batch + a_rows + [1] * len(b_only)))
        b = b.reshape(tuple(b_batch + [1] * len(a_only) + b_cols))
        return a * b, batch + a_only + b_only
    ka, kb = size(a, batch + a_only + contract, contract), size(b, batch + contract + b_only, contract)
    if ka != kb:  # summed dimensions of "..." that broadcast (1 against n): the ones expanded
        a = a.expand(*a.shape[: len(a.shape) - len(contract)], *map(max, ka, kb))
        b = b.expand(*b.shape[: len(batch)], *map(max, ka, kb), *b.shape[len(batch) + len(contract) :])
    k = numel(list(map(max, ka, kb)))
    product = matmul(a.reshape(tuple(a_batch) + (numel(a_rows), k)), b.reshape(tuple(b_batch) + (k, numel(b_cols))))
    return product.reshape(tuple(product.shape[: len(batch)]) + tuple(a_rows + b_cols)), batch + a_only + b_only


add_methods(
    {
        "bmm": bmm,
        "diag": diag,
        "diagonal": diagonal,
        "mT": property(matrix_transpose, doc="The transpose of each matrix of a stack (the last two axes swapped)."),
        "outer": outer,
        "trace": trace,
    }
)
