"""The shape helpers NumPy and PyTorch users reach for beyond the standard's
manipulation functions: ``transpose`` and ``swapaxes``, ``narrow``,
``ravel``, ``atleast_1d``/``2d``/``3d``, the stacks (``vstack``, ``hstack``,
``dstack``, ``column_stack``), the splits (``tensor_split``, ``hsplit``,
``vsplit``, ``dsplit``), and ``fliplr``, ``flipud`` and ``rot90``.

Each is views, ``concat`` or ``flip`` of the operands, so each is
differentiable and captures as they do.
"""

from __future__ import annotations

import numpy as np

from ._manipulation_functions import concat, flip
from ._tensor import Tensor, add_methods

__all__ = [
    "atleast_1d", "atleast_2d", "atleast_3d", "column_stack", "dsplit", "dstack", "fliplr", "flipud", "hsplit",
    "hstack", "narrow", "ravel", "rot90", "row_stack", "swapaxes", "swapdims", "t", "tensor_split", "transpose",
    "vsplit", "vstack",
]  # fmt: skip


def t(input: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """A matrix transposed, a view; a tensor of fewer dimensions as it is (``x.t()``)."""
    return input.t()


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:  # noqa: A002 (PyTorch's name)
    """``input`` with dimensions ``dim0`` and ``dim1`` swapped, a view (PyTorch's
    ``transpose``; ``permute_dims`` reorders them all)."""
    return input.transpose(dim0, dim1)


swapaxes = swapdims = transpose


def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:  # noqa: A002 (PyTorch's name)
    """Elements ``start`` to ``start + length`` of dimension ``dim``, a view."""
    return input.narrow(dim, start, length)


def ravel(input: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """The elements in one dimension, in C order (a view where the strides allow)."""
    return input.reshape(-1)


def _at_least(n: int, tensors, place):
    """Each tensor with dimensions of one added by ``place`` (from its dimension
    count) until it has ``n``; one tensor for one, a tuple for several."""
    one = len(tensors) == 1 and isinstance(tensors[0], Tensor)
    items = tensors if not (len(tensors) == 1 and isinstance(tensors[0], (list, tuple))) else tensors[0]
    out = tuple(t if t.ndim >= n else t.reshape(place(t)) for t in items)
    return out[0] if one else out


def atleast_1d(*tensors):
    """Each tensor with at least 1 dimension (a 0-d one as shape (1,))."""
    return _at_least(1, tensors, lambda t: (1,))


def atleast_2d(*tensors):
    """Each tensor with at least 2 dimensions: a vector of n as a row (1, n)."""
    return _at_least(2, tensors, lambda t: (1,) * (2 - t.ndim) + t.shape)


def atleast_3d(*tensors):
    """Each tensor with at least 3 dimensions: n as (1, n, 1), (m, n) as (m, n, 1)."""
    return _at_least(3, tensors, lambda t: {0: (1, 1, 1), 1: (1, *t.shape, 1), 2: (*t.shape, 1)}[t.ndim])


def _sequence(fn: str, tensors) -> list[Tensor]:
    if isinstance(tensors, Tensor) or not tensors:
        raise TypeError(f"{fn}() takes a non-empty list or tuple of tensors, got {type(tensors).__name__}")
    return list(tensors)


def vstack(tensors) -> Tensor:
    """Tensors stacked as rows: vectors become rows, the rest join along dimension 0.

    >>> import tensorplay as tp
    >>> tp.vstack([tp.tensor([1, 2]), tp.tensor([3, 4])]).tolist()
    [[1, 2], [3, 4]]
    """
    return concat(atleast_2d(_sequence("vstack", tensors)), axis=0)


row_stack = vstack


def hstack(tensors) -> Tensor:
    """Tensors side by side: vectors joined end to end, the rest along dimension 1."""
    parts = atleast_1d(_sequence("hstack", tensors))
    return concat(parts, axis=0 if parts[0].ndim == 1 else 1)


def dstack(tensors) -> Tensor:
    """Tensors stacked in depth: along dimension 2, after ``atleast_3d``."""
    return concat(atleast_3d(_sequence("dstack", tensors)), axis=2)


def column_stack(tensors) -> Tensor:
    """Vectors as the columns of a matrix (0-d and 1-d tensors become columns),
    other tensors joined along dimension 1."""
    parts = [t.reshape(t.numel(), 1) if t.ndim < 2 else t for t in _sequence("column_stack", tensors)]
    return concat(parts, axis=1)


def tensor_split(input: Tensor, indices_or_sections, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002
    """``input`` cut along ``dim``: into ``n`` parts as equal as can be (the first
    ``size % n`` one longer) for an int, or before each index of a list (views).

    >>> import tensorplay as tp
    >>> x = tp.arange(5)
    >>> [p.tolist() for p in tp.tensor_split(x, 2)], [p.tolist() for p in tp.tensor_split(x, [1, 4])]
    ([[0, 1, 2], [3, 4]], [[0], [1, 2, 3], [4]])
    """
    if input.ndim == 0:
        raise ValueError("tensor_split() cuts a dimension: a 0-d tensor has none")
    size = input.shape[input._dim(dim)]
    indices_or_sections = _host_ints(indices_or_sections)
    if isinstance(indices_or_sections, int) and not isinstance(indices_or_sections, bool):
        n = indices_or_sections
        if n < 1:
            raise ValueError(f"tensor_split() takes at least 1 section, got {n}")
        step, longer = divmod(size, n)
        cuts = [k * step + min(k, longer) for k in range(1, n)]
    elif isinstance(indices_or_sections, (list, tuple)):
        cuts = [int(i) for i in indices_or_sections]
    else:
        raise TypeError(
            f"tensor_split() takes a number of sections or a list of indices, got {type(indices_or_sections).__name__}"
        )
    bounds = [0, *(min(max(c + size if c < 0 else c, 0), size) for c in cuts), size]
    return tuple(input.narrow(dim, a, max(b - a, 0)) for a, b in zip(bounds, bounds[1:], strict=False))


def _host_ints(value):
    """A number of sections or a list of indices as Python ints, from a NumPy
    integer or array, or a tensor (read on the host, as PyTorch reads its CPU one)."""
    if isinstance(value, Tensor):
        if value.dtype.kind not in "iu" or value.ndim > 1:
            raise TypeError(
                f"expected an integer tensor of 0 or 1 dimension for the sections, got {value.dtype} {value.shape}"
            )
        value = value.tolist()
    elif isinstance(value, (np.integer, np.ndarray)):
        value = value.tolist()
    return value


def _split_along(fn: str, dim: int, least: int):
    def split(input: Tensor, indices_or_sections) -> tuple[Tensor, ...]:  # noqa: A002
        if input.ndim < least:
            raise ValueError(f"{fn}() needs at least {least} dimension(s), got shape {input.shape}")
        d = 0 if fn == "hsplit" and input.ndim == 1 else dim
        indices_or_sections = _host_ints(indices_or_sections)
        whole = isinstance(indices_or_sections, int) and indices_or_sections > 0  # fewer: tensor_split's sentence
        if whole and input.shape[d] % indices_or_sections:
            raise ValueError(
                f"{fn}() into {indices_or_sections} equal parts, but dimension {d} has {input.shape[d]} "
                "elements; tensor_split allows unequal parts"
            )
        return tensor_split(input, indices_or_sections, d)

    split.__name__ = fn
    split.__doc__ = f"``tensor_split`` along dimension {dim}, into equal parts where a number is given."
    return split


hsplit, vsplit, dsplit = _split_along("hsplit", 1, 1), _split_along("vsplit", 0, 2), _split_along("dsplit", 2, 3)


def fliplr(input: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """``input`` with its columns (dimension 1) in reverse order."""
    if input.ndim < 2:
        raise ValueError(f"fliplr() needs at least 2 dimensions, got shape {input.shape}")
    return flip(input, axis=1)


def flipud(input: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """``input`` with its rows (dimension 0) in reverse order."""
    if input.ndim < 1:
        raise ValueError("flipud() needs at least 1 dimension, got a 0-d tensor")
    return flip(input, axis=0)


def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:  # noqa: A002 (PyTorch's name)
    """``input`` turned by 90 degrees ``k`` times, from the first of ``dims``
    towards the second (NumPy's and PyTorch's direction).

    >>> import tensorplay as tp
    >>> tp.rot90(tp.tensor([[1, 2], [3, 4]])).tolist()
    [[2, 4], [1, 3]]
    """
    if len(dims) != 2 or input.ndim < 2:
        raise ValueError(f"rot90() turns the plane of two dimensions, got dims={dims} for shape {input.shape}")
    a, b = input._dim(dims[0]), input._dim(dims[1])
    if a == b:
        raise ValueError(f"rot90() needs two different dimensions, got dims={dims}")
    k %= 4
    if k == 0:
        return input
    if k == 2:
        return flip(input, axis=(a, b))
    if k == 1:
        return flip(input, axis=b).transpose(a, b)
    return flip(input.transpose(a, b), axis=b)


add_methods(
    {
        "fliplr": fliplr, "flipud": flipud, "hsplit": hsplit, "ravel": ravel, "rot90": rot90, "swapaxes": swapaxes,
        "swapdims": swapdims, "tensor_split": tensor_split, "vsplit": vsplit, "dsplit": dsplit,
    }
)  # fmt: skip
