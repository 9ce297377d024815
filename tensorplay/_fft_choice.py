"""Which transform an ``tp.fft`` call makes, in which steps, and which path
computes them: cuFFT, NumPy on the simulator, or none (refused).

**The call.** ``resolve`` turns a function's arguments into a ``Call``: the
kind of transform (C2C, R2C: real input, one-sided complex output along the
last axis, C2R: its inverse), its direction, the axes and their logical
lengths ``n``, the types and the normalisation's scale, checking each
argument with a sentence. The input is cut or padded with zeros to ``n``
along the axes first (``pre``: for C2R, ``n // 2 + 1`` along the last).

**The steps.** cuFFT transforms one to three axes of a dense array at once.
``steps`` cuts a call into library calls (``Step``): a real transform takes
the last axis (the last of ``axes``, as NumPy's) with up to two others, the
remaining axes go by complex transforms, three at a time, before a C2R
(which needs the complex side done) and after an R2C. Axes of length one
transform to themselves and take no step; a real transform whose last
length is one is a complex one (R2C: the input made complex; C2R: the real
part of the result).

**The path.** On a GPU every step is a cuFFT plan (nvmath-python's
bindings); without nvmath-python or libcufft a transform is refused with a
sentence saying what to install, since tensorplay has no FFT kernel of its
own. On the simulator each step is one call of ``numpy.fft`` on the views of
the device memory, queued and captured as the cuFFT call would be.
``tp.backends.fft.explain(...)`` says which path a call takes, and why.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

from . import _dtype as dt
from .runtime.backend import get as get_backend
from .runtime.libraries import cufft
from .runtime.libraries._nvmath import LibraryUnavailable

__all__ = ["FFT", "FUNCTIONS", "Call", "FFTSettings", "Family", "Step", "integer", "refusal", "resolve", "steps"]

NORMS = ("backward", "ortho", "forward")


@dataclass(frozen=True, slots=True)
class Family:
    """What a function computes: ``kind`` in ``direction`` (True: the forward
    transform, exponent -1), over one axis (``n=``, ``axis=``) or several
    (``s=``, ``axes=``)."""

    kind: str
    forward: bool
    one_axis: bool


FUNCTIONS = {
    "fft": Family("C2C", True, True), "ifft": Family("C2C", False, True),
    "fftn": Family("C2C", True, False), "ifftn": Family("C2C", False, False),
    "fft2": Family("C2C", True, False), "ifft2": Family("C2C", False, False),
    "rfft": Family("R2C", True, True), "irfft": Family("C2R", False, True),
    "rfftn": Family("R2C", True, False), "irfftn": Family("C2R", False, False),
    "rfft2": Family("R2C", True, False), "irfft2": Family("C2R", False, False),
    "hfft": Family("C2R", True, True), "ihfft": Family("R2C", False, True),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Call:
    """One transform: ``kind`` in direction ``forward`` over ``axes`` of the
    input (``shape``, ``dtype``) at logical lengths ``n``, computed in
    ``work`` (the input's type after promotion), giving ``out_dtype``,
    multiplied by ``scale`` (the ``norm``)."""

    function: str
    kind: str
    forward: bool
    shape: tuple
    dtype: dt.DType
    axes: tuple
    n: tuple
    work: dt.DType
    out_dtype: dt.DType
    norm: str
    scale: float

    @property
    def pre(self) -> tuple:
        """The lengths the input is cut or padded to along ``axes``."""
        return cufft.half(self.n) if self.kind == "C2R" else self.n

    @property
    def out_shape(self) -> tuple:
        sizes = cufft.half(self.n) if self.kind == "R2C" else self.n
        shape = list(self.shape)
        for a, m in zip(self.axes, sizes, strict=True):
            shape[a] = m
        return tuple(shape)

    @property
    def precision(self) -> str:
        """The real side's type, as cuFFT's plans are named: "float32" or "float64"."""
        return dt.real_dtype(self.work).name


@dataclass(frozen=True, slots=True)
class Step:
    """One library call: ``kind`` over ``axes`` of the whole tensor (the real
    one last) of logical lengths ``sizes``, for each of ``batch`` entries of
    the other axes."""

    kind: str
    axes: tuple
    sizes: tuple
    batch: int


def resolve(function: str, shape: tuple, dtype: dt.DType, sizes, axes, norm) -> Call:
    """The ``Call`` of ``function`` on an input of ``shape`` and ``dtype``:
    ``sizes`` is ``n`` (one axis, ``axes`` an int) or ``s`` (``axes`` a
    sequence or None: the last ``len(s)`` axes, all of them without ``s``)."""
    family = FUNCTIONS[function]
    fn, ndim = function, len(shape)
    work, out_dtype = _types(fn, family.kind, dtype)
    if family.one_axis:
        axes_t = (_axis(fn, axes, ndim),)
        if sizes is not None:  # NumPy's integers too, as numpy.fft and PyTorch take them
            given, sizes = sizes, integer(sizes)
            if sizes is None:
                raise TypeError(f"{fn}() expects n to be an int or None, got {given!r}")
        if sizes is not None and sizes < 1:
            raise ValueError(f"{fn}() expects n >= 1, got {sizes}")
        sizes_t: tuple = (sizes,)
    else:
        sizes_t = None if sizes is None else _int_tuple(fn, "s", sizes)
        if axes is None:
            axes = range(ndim) if sizes_t is None else range(ndim - len(sizes_t), ndim)
            if sizes_t is not None and len(sizes_t) > ndim:
                raise ValueError(f"{fn}() got s={sizes!r}, more sizes than the {ndim} axes of the input")
        axes_t = tuple(_axis(fn, a, ndim) for a in _int_tuple(fn, "axes", axes))
        if len(set(axes_t)) != len(axes_t):
            raise ValueError(f"{fn}() expects distinct axes, got axes={axes!r}")
        if sizes_t is None:
            sizes_t = (None,) * len(axes_t)
        elif len(sizes_t) != len(axes_t):
            raise ValueError(f"{fn}() expects one size per axis, got s={sizes!r} for axes {axes_t}")
        for m in sizes_t:
            if m is not None and m < 1 and m != -1:
                raise ValueError(f"{fn}() expects sizes of 1 or more (or -1: the axis's own length), got s={sizes!r}")
        if not axes_t and family.kind != "C2C":
            raise ValueError(f"{fn}() needs at least one axis to transform, got axes=()")
    n = tuple(_length(fn, family, shape, a, m, a == axes_t[-1]) for a, m in zip(axes_t, sizes_t, strict=True))
    norm = _norm(fn, norm)
    total = math.prod(n)
    scale = 1.0 if norm == ("backward" if family.forward else "forward") else total ** (-0.5 if norm == "ortho" else -1)
    return Call(fn, family.kind, family.forward, tuple(shape), dtype, axes_t, n, work, out_dtype, norm, scale)


def _types(fn: str, kind: str, dtype: dt.DType) -> tuple[dt.DType, dt.DType]:
    """(the type computed on, the output's): half types are computed in float32."""
    if kind == "R2C":
        if dtype.kind != "f":
            also = "; fft() transforms complex input" if dtype.kind == "c" else "; convert it first (x.to(tp.float32))"
            raise TypeError(f"{fn}() expects a real floating-point tensor, got {dtype}{also}")
        work = dt.float64 if dtype is dt.float64 else dt.float32
        return work, dt.complex_dtype(work)
    if dtype.kind not in "fc":
        raise TypeError(
            f"{fn}() expects a floating-point or complex tensor, got {dtype}; convert it first (x.to(tp.float32))"
        )
    work = dt.complex_dtype(dtype)
    return work, (dt.real_dtype(work) if kind == "C2R" else work)


def integer(value) -> int | None:
    """``value`` as a Python int where it is an integer (NumPy's too), else None (bools included)."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _axis(fn: str, axis, ndim: int) -> int:
    given, axis = axis, integer(axis)
    if axis is None:
        raise TypeError(f"{fn}() expects axes as ints, got {given!r}")
    if not -ndim <= axis < ndim:
        raise IndexError(f"{fn}() got axis {axis}, out of range for a tensor of {ndim} dimensions")
    return axis % ndim


def _int_tuple(fn: str, name: str, value) -> tuple:
    try:
        return tuple(operator.index(v) for v in value)
    except TypeError:
        raise TypeError(f"{fn}() expects {name} as a sequence of ints, got {value!r}") from None


def _length(fn: str, family: Family, shape: tuple, axis: int, m, last: bool) -> int:
    """The logical length along ``axis``: ``m``, or the input's (for C2R's last axis, 2 (m - 1))."""
    if m is not None and m != -1:
        return m
    size = shape[axis]
    n = 2 * (size - 1) if family.kind == "C2R" and last else size
    if n < 1:
        arg = "n" if family.one_axis else "s"
        got = f"2 * ({size} - 1) = {n} points" if family.kind == "C2R" and last else "length 0"
        raise ValueError(f"{fn}() cannot transform axis {axis} of {got}; pass {arg} of 1 or more")
    return n


def _norm(fn: str, norm) -> str:
    if norm is None:
        return "backward"
    if norm not in NORMS:
        raise ValueError(f"{fn}() expects norm to be 'backward', 'ortho' or 'forward', got {norm!r}")
    return norm


def steps(call: Call) -> tuple[str, list[Step]]:
    """The kind the call is computed as (a real one of last length one is
    "C2C") and its library calls, in order."""
    kind, n = call.kind, call.n
    if kind != "C2C" and n[-1] == 1:
        kind = "C2C"
    shape = list(call.shape)
    for a, m in zip(call.axes, call.pre, strict=True):
        shape[a] = m
    live = [(a, m) for a, m in zip(call.axes, n, strict=True) if m > 1]
    cut = cufft.MAX_RANK
    if kind == "C2C":
        groups = [("C2C", live[i : i + cut]) for i in range(0, len(live), cut)]
    elif kind == "R2C":
        rest = live[:-cut]
        groups = [("R2C", live[-cut:])] + [("C2C", rest[i : i + cut]) for i in range(0, len(rest), cut)]
    else:
        rest = live[:-cut]
        groups = [("C2C", rest[i : i + cut]) for i in range(0, len(rest), cut)] + [("C2R", live[-cut:])]
    out = []
    for step_kind, group in groups:
        axes, sizes = tuple(a for a, _ in group), tuple(m for _, m in group)
        batch = math.prod(d for i, d in enumerate(shape) if i not in axes)
        out.append(Step(step_kind, axes, sizes, batch))
        if step_kind != "C2C":  # the real axis changes sides
            shape[axes[-1]] = sizes[-1] // 2 + 1 if step_kind == "R2C" else sizes[-1]
    return kind, out


def refusal() -> str | None:
    """None when cuFFT computes the transforms here, else why not."""
    return cufft.unavailable()


class FFTSettings:
    """``tp.backends.fft``: which path the transforms take, and their plans.

    On a GPU every transform is computed by cuFFT (nvmath-python's bindings),
    on plans kept per shape (``plans``: how many); on the simulator by
    ``numpy.fft``, in the same steps. :meth:`explain` says what a call gets.

    Examples
    --------
    >>> import tensorplay as tp
    >>> from tensorplay._fft_choice import FFT
    >>> print(FFT.explain("rfft", (4, 8), "float32"))  # doctest: +ELLIPSIS
    rfft (4, 8) float32 -> (4, 5) complex64, axes (1,), n (8,): ...R2C of rank 1, sizes [8], batch 4...
    """

    @property
    def plans(self) -> int:
        """How many cuFFT plans are kept (0 where cuFFT does not serve)."""
        return cufft.plan_count()

    def explain(
        self, function: str, shape, dtype="complex64", *, n=None, s=None, axis=-1, axes=None, norm="backward"
    ) -> str:
        """What ``tp.fft.<function>`` on an input of ``shape`` and ``dtype``
        (with its ``n``/``axis`` or ``s``/``axes`` and ``norm``) gets, and why,
        as one paragraph."""
        if function not in FUNCTIONS:
            raise ValueError(f"explain() expects one of {', '.join(FUNCTIONS)}, got {function!r}")
        dtype = dt.as_dtype(dtype)
        shape = tuple(int(d) for d in shape)
        if function in ("fft2", "ifft2", "rfft2", "irfft2") and axes is None:
            axes = (-2, -1)
        one = FUNCTIONS[function].one_axis
        call = resolve(function, shape, dtype, n if one else s, axis if one else axes, norm)
        head = (
            f"{function} {shape} {dtype.name} -> {call.out_shape} {call.out_dtype.name}, axes {call.axes}, n {call.n}: "
        )
        kind, todo = steps(call)
        scaled = "" if call.scale == 1.0 else f"; then scaled by {call.scale:.6g} (norm={call.norm!r})"
        if not todo or not math.prod(call.out_shape):
            return head + f"no library call (every axis transformed has length one, or nothing to transform){scaled}"
        reason = refusal()
        if reason is not None and get_backend().name != "sim":
            return head + f"refused: {_refusal_sentence(reason)}"
        if reason is None:
            how = f"cuFFT ({cufft.versions()}): " + "; then ".join(
                f"{cufft.describe(st.kind, call.precision, st.sizes, st.batch)} over axes {st.axes}" for st in todo
            )
        else:
            how = f"numpy.fft on the simulator ({reason}), in cuFFT's steps: " + "; then ".join(
                f"{st.kind} of rank {len(st.sizes)}, sizes {list(st.sizes)}, batch {st.batch} over axes {st.axes}"
                for st in todo
            )
        if kind != call.kind:
            how += f" (an {call.kind} of last length one is a C2C)"
        return head + how + scaled


def _refusal_sentence(reason: str) -> str:
    return f"tensorplay computes transforms on the GPU with cuFFT only, which cannot serve: {reason}"


def refuse() -> None:
    """Raise the sentence of a transform that no path can compute here."""
    reason = refusal()
    raise LibraryUnavailable(_refusal_sentence(reason or "unknown"))


FFT = FFTSettings()
