"""Manipulation functions of the array API standard, with PyTorch's names and
argument spellings as aliases (``concat`` and ``cat``, ``moveaxis`` and
``movedim``, ``axis=`` and ``dim=``).

Views where the layout allows (``broadcast_to``, ``expand_dims``,
``permute_dims``, ``squeeze``, ``unstack``, ``split``); copies composed of
views and the copy kernel (``repeat``, ``tile``, ``pad``), differentiable
through the views'; ``flip`` and ``roll`` through ``kernels/manipulation``,
their backward next to them; ``repeat`` with a count per element through
``index_select``. Nothing reads device data on the host, and all are
captured into graphs, except ``repeat`` with a count per element (the
output's size depends on them; their index is copied to the device).
"""

from __future__ import annotations

import math
from itertools import accumulate

import numpy as np

from . import _functions
from ._aliases import either
from ._grad_mode import no_grad
from ._indexing_functions import index_select
from ._ops import fill
from ._shape import _as_shape, broadcast_shapes, contiguous_strides, infer_shape, numel, view_strides
from ._tape import record
from ._tensor import Tensor, add_methods
from .kernels import manipulation as mk
from .runtime.capture import capture_state, current_fuser
from .runtime.launch import grid_1d, launch

__all__ = [
    "broadcast_arrays", "broadcast_tensors", "broadcast_to", "cat", "chunk", "concat", "expand_dims", "flatten",
    "flip", "moveaxis", "movedim", "pad", "permute", "permute_dims", "repeat", "repeat_interleave", "reshape",
    "roll", "split", "squeeze", "stack", "tile", "unbind", "unflatten", "unsqueeze", "unstack",
]  # fmt: skip


_INTS = (int, np.integer)  # an axis, a size or a shift: a NumPy integer too, as the reductions take them


def _axes(fn: str, x: Tensor, axis, what: str = "axes") -> tuple[int, ...]:
    """``axis`` (an int or a sequence of them) as non-negative dimensions of ``x``."""
    axes = (axis,) if isinstance(axis, _INTS) else tuple(axis)
    out = tuple(x._dim(a) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"{fn}() expects unique {what}, got {axis!r}")
    return out


def _fresh(y: Tensor, x: Tensor) -> Tensor:
    """``y``, copied when it is a view of ``x``'s memory (a function that copies always returns new memory)."""
    return y.clone() if y._storage is x._storage else y


# -- broadcasting -------------------------------------------------------------------------


def broadcast_arrays(*arrays: Tensor) -> list[Tensor]:
    """The tensors broadcast against one another (views).

    Examples
    --------
    >>> import tensorplay as tp
    >>> [t.shape for t in tp.broadcast_arrays(tp.ones((3, 1)), tp.ones(4))]
    [(3, 4), (3, 4)]
    """
    if not arrays:
        return []
    shape = broadcast_shapes(*[a.shape for a in arrays])
    return [a if a.shape == shape else a.expand(shape) for a in arrays]


broadcast_tensors = broadcast_arrays  # PyTorch's name


def broadcast_to(x: Tensor, /, shape) -> Tensor:
    """``x`` broadcast to ``shape`` (a view)."""
    return x.expand(_as_shape((shape,) if isinstance(shape, int) else tuple(shape)))


# -- joining and splitting ------------------------------------------------------------------


def concat(arrays, /, dim: int | None = None, *, axis: int | None = 0) -> Tensor:
    """Join tensors along an existing axis; ``axis=None`` joins them flattened.

    ``cat`` is the same function (PyTorch's ``cat(tensors, dim)``).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.concat([tp.ones((1, 2)), tp.zeros((1, 2))], axis=None).tolist()
    [1.0, 1.0, 0.0, 0.0]
    """
    axis = either("concat", "axis", axis, "dim", dim, 0)
    arrays = list(arrays)
    if axis is None:
        arrays, axis = [a.reshape(-1) for a in arrays], 0
    return _functions.cat(arrays, axis)


cat = concat


def stack(arrays, /, dim: int | None = None, *, axis: int = 0) -> Tensor:
    """Join tensors of one shape along a new axis (PyTorch's ``dim=`` too)."""
    return _functions.stack(list(arrays), either("stack", "axis", axis, "dim", dim, 0))


def unstack(x: Tensor, /, dim: int | None = None, *, axis: int = 0) -> tuple[Tensor, ...]:
    """The slices of ``x`` along ``axis`` (views); ``unbind`` is PyTorch's name."""
    if x.ndim == 0:
        raise ValueError("unstack() needs a tensor of at least one dimension, got a 0-d tensor")
    axis = x._dim(either("unstack", "axis", axis, "dim", dim, 0))
    lead = (slice(None),) * axis
    return tuple(x[lead + (i,)] for i in range(x.shape[axis]))


unbind = unstack


def split(x: Tensor, split_size_or_sections, dim: int = 0) -> tuple[Tensor, ...]:
    """PyTorch's ``split``: pieces of ``split_size_or_sections`` along ``dim``
    (an int: that size, the last piece shorter; a list: those sizes), as views."""
    _refuse_0d("split", x)
    dim = x._dim(dim)
    n = x.shape[dim]
    if isinstance(split_size_or_sections, _INTS):
        size = int(split_size_or_sections)
        if size < 0 or (size == 0 and n):
            raise ValueError(f"split expects a positive split size, got {size}")
        sizes = [min(size, n - s) for s in range(0, n, size)] if n else [0]
    else:
        sizes = [int(s) for s in split_size_or_sections]
        if sum(sizes) != n or any(s < 0 for s in sizes):
            raise ValueError(
                f"split sizes {sizes} add up to {sum(sizes)}, but dimension {dim} has size {n}; "
                "give non-negative sizes that add up to it"
            )
    starts = [0, *accumulate(sizes)]
    return tuple(x.narrow(dim, s, size) for s, size in zip(starts, sizes, strict=False))


def _refuse_0d(fn: str, x: Tensor) -> None:
    if x.ndim == 0:
        raise ValueError(f"{fn}() cuts a dimension: a 0-d tensor has none")


def chunk(x: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:
    """PyTorch's ``chunk``: ``split`` into pieces of ``ceil(size / chunks)``
    (so possibly fewer than ``chunks`` pieces), as views."""
    if chunks < 1:
        raise ValueError(f"chunk expects at least 1 chunk, got {chunks}")
    _refuse_0d("chunk", x)
    n = x.shape[x._dim(dim)]
    return split(x, max(1, -(-n // chunks)), dim)


# -- views --------------------------------------------------------------------------------


def expand_dims(x: Tensor, /, axis: int = 0, *, dim: int | None = None) -> Tensor:
    """``x`` with a dimension of size 1 inserted at ``axis`` (0 by default, as the
    standard says; a view); ``unsqueeze`` is PyTorch's name."""
    return x.unsqueeze(either("expand_dims", "axis", axis, "dim", dim, 0))


unsqueeze = expand_dims


def moveaxis(x: Tensor, source, destination, /) -> Tensor:
    """``x`` with the axes ``source`` moved to ``destination`` (a view); ``movedim`` is PyTorch's name.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.moveaxis(tp.zeros((2, 3, 4)), 0, -1).shape
    (3, 4, 2)
    """
    src = _axes("moveaxis", x, source, "source axes")
    dst = _axes("moveaxis", x, destination, "destination axes")
    if len(src) != len(dst):
        raise ValueError(f"moveaxis() expects as many destinations as sources, got {source!r} and {destination!r}")
    order = [d for d in range(x.ndim) if d not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return x.permute(order)


movedim = moveaxis


def permute_dims(x: Tensor, /, axes=None, *, dims=None) -> Tensor:
    """``x`` with its axes reordered (a view); ``permute`` is PyTorch's name."""
    return x.permute(either("permute_dims", "axes", axes, "dims", dims))


permute = permute_dims


def reshape(x: Tensor, /, shape, *, copy: bool | None = None) -> Tensor:
    """``x`` with another shape: a view when the layout allows (``copy=None``),
    always a copy (``copy=True``), or never one (``copy=False``: ValueError
    when a view cannot show it)."""
    shape = infer_shape((shape,) if isinstance(shape, int) else tuple(shape), x.numel())
    if copy:
        return x.clone().reshape(shape)
    if copy is False and view_strides(x.shape, x._strides, shape) is None:
        raise ValueError(
            f"reshape() with copy=False cannot show a tensor of shape {x.shape} and strides {x._strides} "
            f"as shape {shape} without copying it; use copy=None to copy when needed"
        )
    return x.reshape(shape)


def squeeze(x: Tensor, /, axis=None, *, dim=None) -> Tensor:
    """``x`` without its dimensions ``axis`` (a view), which must have size 1, as
    the standard says (PyTorch's ``x.squeeze(dim)`` leaves longer ones alone);
    all dimensions of size 1 when ``axis`` is None (PyTorch's default)."""
    axis = either("squeeze", "axis", axis, "dim", dim)
    if axis is None:
        return x.squeeze()
    axes = _axes("squeeze", x, axis)
    if not x.ndim:  # dimension 0 (or -1) of a 0-d tensor, as PyTorch takes it: nothing to remove
        return x.reshape(())
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze() can only remove dimensions of size 1, but dimension {a} has size {x.shape[a]}")
    return x.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))


# -- copies along one dimension: kernels/manipulation ---------------------------------------------------


def _rows(x: Tensor, start: int, stop: int) -> Tensor:
    """``x`` seen as (outer, dims start..stop merged, inner): a view, or a view of a copy."""
    shape = (numel(x.shape[:start]), numel(x.shape[start:stop]), numel(x.shape[stop:]))
    strides = view_strides(x.shape, x._strides, shape)
    if strides is None:
        x = x.contiguous()
        strides = contiguous_strides(shape)
    return x._view(shape, strides)


def _launch_shifted(x: Tensor, start: int, stop: int, begin: int, step: int) -> Tensor:
    """A new tensor of ``x``'s shape, the merged dims start..stop read from ``begin`` by ``step`` (wrapping)."""
    out = Tensor._empty(x.shape, x.dtype)
    if out.numel():
        src = _rows(x, start, stop)
        rows = out._view(src.shape, contiguous_strides(src.shape))
        launch(mk.shifted, *grid_1d(out.numel()), [src, rows, begin, step])
    return out


def _runs(axes) -> list[tuple[int, int]]:
    """Sorted axes as runs of neighbours, each ``(first, past the last)``."""
    runs: list[list[int]] = []
    for a in sorted(axes):
        if runs and runs[-1][1] == a:
            runs[-1][1] = a + 1
        else:
            runs.append([a, a + 1])
    return [(a, b) for a, b in runs]


def flip(x: Tensor, /, dims=None, *, axis=None) -> Tensor:
    """``x`` with the order of its elements reversed along ``axis`` (all axes if
    None); PyTorch's ``flip(x, dims)`` too. A copy: one kernel per run of
    neighbouring axes.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.flip(tp.tensor([[1, 2], [3, 4]]), axis=1).tolist()
    [[2, 1], [4, 3]]
    """
    axis = either("flip", "axis", axis, "dims", dims)
    axes = tuple(range(x.ndim)) if axis is None else _axes("flip", x, axis)
    out = x.detach()
    for start, stop in _runs(a for a in axes if x.ndim and x.shape[a] > 1):  # a 0-d tensor: nothing to reverse
        out = _launch_shifted(out, start, stop, numel(x.shape[start:stop]) - 1, -1)
    if out._storage is x._storage:  # nothing to reverse
        out = out.clone()
    return record("FlipBackward", out, (x,), lambda gs: (flip(gs[0], axis=axes),))


def roll(x: Tensor, /, shift=None, dims=None, *, axis=None, shifts=None) -> Tensor:
    """``x`` with its elements rotated by ``shift`` along ``axis`` (flattened if
    None: the standard's ``roll(x, shift, axis=)`` and PyTorch's
    ``roll(x, shifts, dims)``). A copy: one kernel per axis rotated (under
    ``tp.compile``, a read of ``x`` rolled, in the fused kernel of its chain).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.roll(tp.tensor([1, 2, 3, 4]), 1).tolist()
    [4, 1, 2, 3]
    """
    shift = either("roll", "shift", shift, "shifts", shifts)
    axis = either("roll", "axis", axis, "dims", dims)
    if shift is None:
        raise TypeError("roll() needs the shift, as shift= (or shifts=)")
    if isinstance(shift, np.ndarray) and shift.dtype.kind in "iu":  # NumPy's roll takes an array of shifts
        shift = shift.tolist()
    if not isinstance(shift, _INTS) and not (
        isinstance(shift, (tuple, list)) and all(isinstance(s, _INTS) for s in shift)
    ):
        raise TypeError(f"roll() expects the shift as an int or a tuple of ints, got {shift!r}")
    if axis is None:
        total = shift if isinstance(shift, _INTS) else sum(shift)
        return roll(x.reshape(-1), total, axis=0).reshape(x.shape)
    shift_list = [int(shift)] if isinstance(shift, _INTS) else [int(s) for s in shift]
    axes = [axis] if isinstance(axis, _INTS) else list(axis)
    if len(shift_list) == 1 and len(axes) > 1:
        shift_list *= len(axes)
    if len(shift_list) != len(axes):
        raise ValueError(f"roll() expects as many shifts as axes, got {shift!r} and {axis!r}")
    by_axis: dict[int, int] = {}
    for s, a in zip(shift_list, axes, strict=True):
        a = x._dim(a)
        by_axis[a] = by_axis.get(a, 0) + s
    fuser = current_fuser() if capture_state.fusers else None  # tp.compile: a stencil's neighbours, fused
    out = fuser.roll(x.detach(), by_axis) if fuser is not None else None
    if out is None:
        out = x.detach()
        for a, s in by_axis.items():
            n = x.shape[a] if x.ndim else 1  # a 0-d tensor takes dimension 0 (or -1), as PyTorch's: one element
            if n and s % n:
                out = _launch_shifted(out, a, a + 1, n - s % n, 1)
        if out._storage is x._storage:
            out = out.clone()
    back = list(by_axis)
    return record("RollBackward", out, (x,), lambda gs: (roll(gs[0], [-by_axis[a] for a in back], axis=back),))


def repeat(x: Tensor, repeats, /, dim: int | None = None, *, axis: int | None = None) -> Tensor:
    """Each element of ``x`` repeated ``repeats`` times along ``axis`` (of the
    flattened ``x`` if None): the standard's ``repeat``, which is PyTorch's
    ``repeat_interleave`` (``dim=`` too). ``Tensor.repeat(*sizes)`` is
    PyTorch's, which tiles: see ``tile``.

    ``repeats`` is an int or one count per element along ``axis``: a sequence,
    or a tensor whose counts are read on the host (that waits for the device);
    either way the index they make is copied to the device, which is refused
    while a graph is being captured.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.repeat(tp.tensor([1, 2]), 2).tolist(), tp.repeat(tp.tensor([1, 2]), [1, 3]).tolist()
    ([1, 1, 2, 2], [1, 2, 2, 2])
    """
    axis = either("repeat", "axis", axis, "dim", dim)
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = x._dim(axis)
    if x.ndim == 0:  # dimension 0 (or -1) of a 0-d tensor, as NumPy and PyTorch take it: its one element
        x = x.reshape(1)
    n = x.shape[axis]
    counts = repeats.tolist() if isinstance(repeats, (Tensor, np.ndarray)) else repeats
    counts = [int(c) for c in counts] if isinstance(counts, (list, tuple)) else [int(counts)]
    if any(c < 0 for c in counts):
        raise ValueError(f"repeat() expects non-negative repeat counts, got {min(counts)}")
    if len(counts) == 1:  # every element the same number of times: a broadcast view, copied
        r, shape = counts[0], x.shape
        wide = x.unsqueeze(axis + 1).expand(shape[: axis + 1] + (r,) + shape[axis + 1 :])
        return _fresh(wide.reshape(shape[:axis] + (n * r,) + shape[axis + 1 :]), x)
    if len(counts) != n:
        raise ValueError(f"repeat() expects 1 or {n} repeat counts for axis {axis}, got {len(counts)}")
    return index_select(x, axis, np.repeat(np.arange(n, dtype=np.int64), counts))  # its gradient sums the copies


repeat_interleave = repeat  # PyTorch's name


def tile(x: Tensor, repetitions, /) -> Tensor:
    """``x`` repeated ``repetitions[i]`` times along each axis ``i`` (ones
    prepended to the shorter of ``x.shape`` and ``repetitions``): NumPy's and
    PyTorch's ``tile``, and PyTorch's ``Tensor.repeat``. A copy.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.tile(tp.tensor([1, 2]), (2, 2)).tolist()
    [[1, 2, 1, 2], [1, 2, 1, 2]]
    """
    reps = (int(repetitions),) if isinstance(repetitions, _INTS) else tuple(int(r) for r in repetitions)
    if any(r < 0 for r in reps):
        raise ValueError(f"tile() expects non-negative repetitions, got {reps}")
    nd = max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    shape = (1,) * (nd - x.ndim) + x.shape
    spread = x.reshape(tuple(d for s in shape for d in (1, s)))  # (1, s0, 1, s1, ...): a view
    wide = spread.expand(tuple(d for r, s in zip(reps, shape, strict=True) for d in (r, s)))
    return _fresh(wide.reshape(tuple(r * s for r, s in zip(reps, shape, strict=True))), x)


# -- padding ------------------------------------------------------------------------------

PAD_MODES = ("constant", "reflect", "replicate", "circular")


def pad(x: Tensor, pad, mode: str = "constant", value=None) -> Tensor:
    """PyTorch's ``nn.functional.pad``: ``pad`` holds (before, after) widths for
    the last dimension, then the one before it, and so on; negative widths
    crop. ``mode``: "constant" (``value``, 0 by default), "reflect" (mirrored
    without the edge), "replicate" (the edge repeated) or "circular" (wrapped
    around). Differentiable.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.pad(tp.tensor([1.0, 2.0]), (1, 2), value=9.0).tolist()
    [9.0, 1.0, 2.0, 9.0, 9.0]
    >>> tp.pad(tp.tensor([1.0, 2.0, 3.0]), (2, 1), mode="reflect").tolist()
    [3.0, 2.0, 1.0, 2.0, 3.0, 2.0]
    """
    widths = [int(p) for p in pad]
    if len(widths) % 2:
        raise ValueError(f"pad expects pairs (before, after) of widths, last dimension first, got {len(widths)} values")
    if len(widths) // 2 > x.ndim:
        raise ValueError(f"pad has {len(widths) // 2} pairs of widths for a tensor of {x.ndim} dimensions")
    if mode not in PAD_MODES:
        raise ValueError(f"pad mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}")
    if value is not None and mode != "constant":
        raise ValueError(f"pad takes a value in 'constant' mode only, got value={value!r} with mode {mode!r}")
    sides = {x.ndim - 1 - i: (widths[2 * i], widths[2 * i + 1]) for i in range(len(widths) // 2)}
    for d, (lo, hi) in sides.items():  # negative widths crop (a view)
        if lo < 0 or hi < 0:
            keep = x.shape[d] + min(lo, 0) + min(hi, 0)
            if keep < 0:
                raise ValueError(f"pad widths {(lo, hi)} crop more than the {x.shape[d]} elements of dimension {d}")
            x = x.narrow(d, -min(lo, 0), keep)
    sides = {d: (max(lo, 0), max(hi, 0)) for d, (lo, hi) in sides.items() if lo > 0 or hi > 0}
    if mode == "constant":
        return _pad_constant(x, sides, 0 if value is None else value)
    for d, (lo, hi) in sorted(sides.items()):
        x = cat(_pad_pieces(x, d, lo, hi, mode), d)
    return x


def _pad_constant(x: Tensor, sides: dict, value) -> Tensor:
    """A tensor filled with ``value``, ``x`` copied into its middle; the gradient is that middle."""
    shape = tuple(s + sum(sides.get(d, (0, 0))) for d, s in enumerate(x.shape))
    middle = tuple(slice(sides.get(d, (0, 0))[0], sides.get(d, (0, 0))[0] + s) for d, s in enumerate(x.shape))
    with no_grad():
        out = fill(Tensor._empty(shape, x.dtype), value)
        if x.numel():
            out[middle] = x.detach()
    return record("ConstantPadBackward", out, (x,), lambda gs: (gs[0][middle],))


def _pad_pieces(x: Tensor, d: int, lo: int, hi: int, mode: str) -> list[Tensor]:
    """What goes before and after ``x`` along ``d`` for the modes made of ``x``'s own elements."""
    n = x.shape[d]
    limit = n - 1 if mode == "reflect" else n
    for w in (lo, hi):
        if w > limit:
            bound = "longer than" if mode == "reflect" else "at least as long as"
            raise ValueError(f"{mode} padding of {w} needs a dimension {bound} that, got size {n}")
    if mode == "reflect":
        before, after = flip(x.narrow(d, 1, lo), axis=d), flip(x.narrow(d, n - 1 - hi, hi), axis=d)
    elif mode == "replicate":
        shape = list(x.shape)
        before = x.narrow(d, 0, 1).expand(shape[:d] + [lo] + shape[d + 1 :])
        after = x.narrow(d, n - 1, 1).expand(shape[:d] + [hi] + shape[d + 1 :])
    else:  # circular
        before, after = x.narrow(d, n - lo, lo), x.narrow(d, 0, hi)
    return [p for p in (before, x, after) if p.shape[d]]


def flatten(x: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    """``x`` with its dimensions ``start_dim`` to ``end_dim`` (both included) made
    one, as PyTorch's ``flatten`` (a 0-d tensor gives one element): a view where
    the memory allows, else a copy, as ``reshape``."""
    start, end = x._dim(start_dim), x._dim(end_dim)
    if x.ndim == 0:
        return x.reshape(1)
    if start > end:
        raise ValueError(f"flatten() needs start_dim <= end_dim, got {start_dim} and {end_dim}")
    return x.reshape(*x.shape[:start], math.prod(x.shape[start : end + 1]), *x.shape[end + 1 :])


def unflatten(x: Tensor, dim: int, sizes) -> Tensor:
    """``x`` with dimension ``dim`` split into ``sizes`` (one of them may be -1),
    as PyTorch's ``unflatten``."""
    d = x._dim(dim)
    return x.reshape(*x.shape[:d], *sizes, *x.shape[d + 1 :])


# -- Tensor methods, where PyTorch has them ---------------------------------------------------------


def _method_repeat(self: Tensor, *sizes) -> Tensor:
    """PyTorch's ``Tensor.repeat(*sizes)``: ``tile`` with a size per dimension
    at least (unlike the standard's ``repeat``, which repeats elements)."""
    sizes = tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes
    if len(sizes) < self.ndim:
        raise ValueError(
            f"repeat(*sizes) needs at least {self.ndim} sizes (one per dimension of the tensor), got {len(sizes)}; "
            "tp.tile() prepends ones for you"
        )
    return tile(self, sizes)


def _varargs(fn):
    """A method taking its axes as one sequence or as several arguments (``x.flip(0, 1)``)."""

    def method(self, *dims):
        return fn(self, dims[0] if len(dims) == 1 else dims)

    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


add_methods(
    {
        "broadcast_to": broadcast_to,
        "chunk": chunk,
        "flatten": flatten,
        "flip": _varargs(flip),
        "moveaxis": moveaxis,
        "movedim": moveaxis,
        "repeat": _method_repeat,
        "repeat_interleave": repeat,
        "roll": roll,
        "split": split,
        "tile": _varargs(tile),
        "unbind": unstack,
        "unflatten": unflatten,
    }
)
