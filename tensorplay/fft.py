"""Discrete Fourier transforms: the array API standard's ``fft`` extension, as ``tp.fft``.

The standard's functions (2024.12) with its signatures, and PyTorch's
``fft2``, ``ifft2``, ``rfft2``, ``irfft2`` and ``dim=`` for ``axis=`` /
``axes=`` (PyTorch's arguments positional, as in PyTorch)::

    fft ifft fftn ifftn rfft irfft rfftn irfftn hfft ihfft   the transforms
    fftfreq rfftfreq fftshift ifftshift                      their helpers

**Types.** complex64 and complex128 transform in their own precision; a
real float32 (float64) input of ``fft`` and the other complex transforms is
made complex64 (complex128), as PyTorch does; ``rfft`` takes real input only
and gives complex64 (complex128); ``irfft`` and ``hfft`` give float32
(float64). float16 and bfloat16 are computed in float32 and give complex64
(or float32): neither cuFFT's half-precision transforms (powers of two
only) nor NumPy's serve them in general. Integer and bool tensors are
refused with a sentence.

**Lengths.** ``n`` (``s``) cuts or pads with zeros each axis before the
transform, ``-1`` in ``s`` keeping an axis's own length; any axes, in any
layout, the others a batch. ``norm`` is "backward" (the default; None too),
"ortho" or "forward", applied by one tensorplay multiply after the transform.

**Where.** On the GPU cuFFT computes every transform (nvmath-python's
bindings; without them a transform is refused with a sentence saying what to
install, tensorplay having no FFT kernel of its own); on the simulator
``numpy.fft`` does, as the library's call. Both are captured in graphs and
run inside while and if bodies like any kernel. ``tp.backends.fft.explain``
(``_fft_choice.FFT``) says which path a call takes.

**Gradients.** Every transform is linear, and records one node whose
backward is its adjoint, as PyTorch's (for complex tensors the gradient is
the conjugate Wirtinger derivative, PyTorch's convention): the transform the
other way with the same scale, cut or padded back to the input's lengths; the
real part for a real input; for ``irfft``/``hfft`` an ``rfft`` with the
entries that stand for two doubled. Complex inputs and results take part in
autograd like real ones (``x.requires_grad_()`` on a complex ``x`` too); a
gradient's backward is the transform itself, so ``create_graph=True`` works too.

Examples
--------
>>> import numpy as np
>>> import tensorplay as tp
>>> x = tp.tensor([1.0, 2.0, 3.0, 4.0])
>>> X = tp.fft.fft(x)
>>> X.dtype, X.shape, bool(np.allclose(X.numpy(), [10, -2 + 2j, -2, -2 - 2j]))
(tensorplay.complex64, (4,), True)
>>> bool(np.allclose(tp.fft.irfft(tp.fft.rfft(x), n=4).numpy(), [1, 2, 3, 4]))
True
"""

from __future__ import annotations

from dataclasses import replace

from . import _dtype as dt
from ._aliases import either
from ._complex import real_part
from ._creation_functions import arange
from ._device import check_device
from ._fft_choice import Call, integer, resolve
from ._fft_ops import resize, transform
from ._grad_mode import no_grad
from ._manipulation_functions import concat, roll
from ._tape import record
from ._tensor import Tensor
from .runtime.caches import BoundedCache

__all__ = [
    "fft", "fft2", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifft2", "ifftn", "ifftshift", "ihfft", "irfft",
    "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq", "rfftn",
]  # fmt: skip


# -- one axis -------------------------------------------------------------------------------


def fft(
    x: Tensor, /, n: int | None = None, dim: int | None = None, norm: str | None = "backward", *, axis: int = -1
) -> Tensor:
    """The one-dimensional discrete Fourier transform along ``axis``
    (PyTorch's ``dim``), of ``n`` points (cut or padded with zeros).

    Examples
    --------
    >>> import numpy as np
    >>> import tensorplay as tp
    >>> x = tp.tensor([[0.0, 1.0, 0.0, 0.0]] * 2)
    >>> bool(np.allclose(tp.fft.fft(x, axis=1).numpy(), np.fft.fft(x.numpy(), axis=1)))
    True
    >>> tp.fft.fft(x, n=6).shape, tp.fft.fft(x, 3, 0).shape  # PyTorch's (input, n, dim)
    ((2, 6), (3, 4))
    """
    return _call("fft", x, n, either("fft", "axis", axis, "dim", dim, -1), norm)


def ifft(
    x: Tensor, /, n: int | None = None, dim: int | None = None, norm: str | None = "backward", *, axis: int = -1
) -> Tensor:
    """The inverse of ``fft``: ``ifft(fft(x)) == x`` (scaled by ``1/n`` with the default norm)."""
    return _call("ifft", x, n, either("ifft", "axis", axis, "dim", dim, -1), norm)


def rfft(
    x: Tensor, /, n: int | None = None, dim: int | None = None, norm: str | None = "backward", *, axis: int = -1
) -> Tensor:
    """The transform of a real input along ``axis``: its ``n // 2 + 1`` first
    values (the others are their conjugates).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.fft.rfft(tp.ones(8)).shape, tp.fft.rfft(tp.ones(8, dtype=tp.float64)).dtype
    ((5,), tensorplay.complex128)
    """
    return _call("rfft", x, n, either("rfft", "axis", axis, "dim", dim, -1), norm)


def irfft(
    x: Tensor, /, n: int | None = None, dim: int | None = None, norm: str | None = "backward", *, axis: int = -1
) -> Tensor:
    """The inverse of ``rfft``: ``n`` real values (``2 * (m - 1)`` by default,
    for ``m`` given along ``axis``) from the first ``n // 2 + 1`` of a
    Hermitian-symmetric transform (the imaginary parts of the zero-frequency
    and, for even ``n``, the Nyquist terms are ignored)."""
    return _call("irfft", x, n, either("irfft", "axis", axis, "dim", dim, -1), norm)


def hfft(
    x: Tensor, /, n: int | None = None, dim: int | None = None, norm: str | None = "backward", *, axis: int = -1
) -> Tensor:
    """The transform of a signal with Hermitian symmetry given by its first
    half: ``n`` real values (``2 * (m - 1)`` by default)."""
    return _call("hfft", x, n, either("hfft", "axis", axis, "dim", dim, -1), norm)


def ihfft(
    x: Tensor, /, n: int | None = None, dim: int | None = None, norm: str | None = "backward", *, axis: int = -1
) -> Tensor:
    """The inverse of ``hfft`` for a real input: ``n // 2 + 1`` complex values."""
    return _call("ihfft", x, n, either("ihfft", "axis", axis, "dim", dim, -1), norm)


# -- several axes ---------------------------------------------------------------------------


def fftn(x: Tensor, /, s=None, dim=None, norm: str | None = "backward", *, axes=None) -> Tensor:
    """The transform over ``axes`` (all of them by default; the last
    ``len(s)`` when only ``s`` is given), each cut or padded to its size in ``s``.

    Examples
    --------
    >>> import numpy as np
    >>> import tensorplay as tp
    >>> x = tp.arange(24, dtype=tp.float64).reshape(2, 3, 4)
    >>> bool(np.allclose(tp.fft.fftn(x, axes=(0, 2)).numpy(), np.fft.fftn(x.numpy(), axes=(0, 2))))
    True
    """
    return _call("fftn", x, s, either("fftn", "axes", axes, "dim", dim), norm)


def ifftn(x: Tensor, /, s=None, dim=None, norm: str | None = "backward", *, axes=None) -> Tensor:
    """The inverse of ``fftn``."""
    return _call("ifftn", x, s, either("ifftn", "axes", axes, "dim", dim), norm)


def rfftn(x: Tensor, /, s=None, dim=None, norm: str | None = "backward", *, axes=None) -> Tensor:
    """The transform of a real input over ``axes``, one-sided along the last of them."""
    return _call("rfftn", x, s, either("rfftn", "axes", axes, "dim", dim), norm)


def irfftn(x: Tensor, /, s=None, dim=None, norm: str | None = "backward", *, axes=None) -> Tensor:
    """The inverse of ``rfftn``: real values, ``2 * (m - 1)`` along the last
    axis unless ``s`` says otherwise."""
    return _call("irfftn", x, s, either("irfftn", "axes", axes, "dim", dim), norm)


def fft2(x: Tensor, /, s=None, dim=None, norm: str | None = "backward", *, axes=None) -> Tensor:
    """PyTorch's ``fft2``: ``fftn`` over the last two axes by default."""
    return _call("fft2", x, s, _two(either("fft2", "axes", axes, "dim", dim)), norm)


def ifft2(x: Tensor, /, s=None, dim=None, norm: str | None = "backward", *, axes=None) -> Tensor:
    """PyTorch's ``ifft2``: ``ifftn`` over the last two axes by default."""
    return _call("ifft2", x, s, _two(either("ifft2", "axes", axes, "dim", dim)), norm)


def rfft2(x: Tensor, /, s=None, dim=None, norm: str | None = "backward", *, axes=None) -> Tensor:
    """PyTorch's ``rfft2``: ``rfftn`` over the last two axes by default."""
    return _call("rfft2", x, s, _two(either("rfft2", "axes", axes, "dim", dim)), norm)


def irfft2(x: Tensor, /, s=None, dim=None, norm: str | None = "backward", *, axes=None) -> Tensor:
    """PyTorch's ``irfft2``: ``irfftn`` over the last two axes by default."""
    return _call("irfft2", x, s, _two(either("irfft2", "axes", axes, "dim", dim)), norm)


def _two(axes):
    return (-2, -1) if axes is None else axes


# -- frequencies and shifts -----------------------------------------------------------------


def fftfreq(n: int, /, d: float = 1.0, *, dtype=None, device=None) -> Tensor:
    """The sample frequencies of ``fft``'s ``n`` outputs for samples ``d``
    apart: ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``,
    computed on the device (so inside a capture too).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.fft.fftfreq(5, d=0.5).tolist()
    [0.0, 0.4000000059604645, 0.800000011920929, -0.800000011920929, -0.4000000059604645]
    """
    n, dtype = _freq_args("fftfreq", n, dtype, device)
    k = concat([arange(0, (n - 1) // 2 + 1, dtype=dt.float64), arange(-(n // 2), 0, dtype=dt.float64)])
    return (k * (1.0 / (d * n))).to(dtype)


def rfftfreq(n: int, /, d: float = 1.0, *, dtype=None, device=None) -> Tensor:
    """The sample frequencies of ``rfft``'s ``n // 2 + 1`` outputs: ``[0, 1, ..., n // 2] / (d * n)``.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.fft.rfftfreq(4, dtype=tp.float64).tolist()
    [0.0, 0.25, 0.5]
    """
    n, dtype = _freq_args("rfftfreq", n, dtype, device)
    return (arange(0, n // 2 + 1, dtype=dt.float64) * (1.0 / (d * n))).to(dtype)


def _freq_args(fn: str, n, dtype, device) -> tuple[int, dt.DType]:
    """(``n`` as an int, NumPy's integers taken too; the dtype), checked."""
    check_device(device)
    length = integer(n)
    if length is None or length < 1:
        raise ValueError(f"{fn}() expects n to be an int of 1 or more, got {n!r}")
    dtype = dt.DEFAULT_FLOAT if dtype is None else dt.as_dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"{fn}() expects a real floating-point dtype, got {dtype}")
    return length, dtype


def fftshift(x: Tensor, /, dim=None, *, axes=None) -> Tensor:
    """``x`` rolled so that the zero frequency is in the middle of ``axes``
    (all by default; PyTorch's ``dim`` too).

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.fft.fftshift(tp.fft.fftfreq(5)).tolist() == sorted(tp.fft.fftfreq(5).tolist())
    True
    """
    return _shift("fftshift", x, either("fftshift", "axes", axes, "dim", dim), 1)


def ifftshift(x: Tensor, /, dim=None, *, axes=None) -> Tensor:
    """The inverse of ``fftshift`` (the two differ for odd lengths)."""
    return _shift("ifftshift", x, either("ifftshift", "axes", axes, "dim", dim), -1)


def _shift(fn: str, x: Tensor, axes, sign: int) -> Tensor:
    _check_tensor(fn, x)
    axes = tuple(range(x.ndim)) if axes is None else (axes,) if isinstance(axes, int) else tuple(axes)
    shifts = [sign * (x.shape[x._dim(a)] // 2) for a in axes]
    return roll(x, shifts, axis=axes)


# -- the transforms and their gradients -----------------------------------------------------


def _check_tensor(fn: str, x) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}() expects a tensor, got {type(x).__name__}")


_CALLS = BoundedCache("fft.calls", 4096)  # (function, shape, dtype, n or s, axis or axes, norm) -> Call


def _call(fn: str, x: Tensor, sizes, axes, norm) -> Tensor:
    """``fn`` on ``x``: its ``Call`` (resolved once per arguments of one kind), applied."""
    try:
        key = (fn, x.shape, x.dtype, _frozen(sizes), _frozen(axes), norm)
        c = _CALLS.get(key)
    except (AttributeError, TypeError):  # not a tensor, or an argument that cannot be a key: resolved to a sentence
        key = c = None
    if c is None:
        _check_tensor(fn, x)
        c = resolve(fn, x.shape, x.dtype, sizes, axes, norm)
        if key is not None:
            _CALLS.put(key, c)
    return _apply(x, c)


def _frozen(v):
    """``v`` as a key: lists as tuples (ints kept apart from bools and floats, which resolve refuses)."""
    if isinstance(v, (list, tuple)):
        return tuple(_frozen(e) for e in v)
    return (type(v), v)


def _apply(x: Tensor, c: Call) -> Tensor:
    return _linear(f"Fft{c.kind}Backward", x, lambda t: _scaled(t, c), lambda g: _adjoint(g, c))


def _scaled(x: Tensor, c: Call) -> Tensor:
    out = transform(x, c)
    if c.scale != 1.0:
        with no_grad():
            out.mul_(c.scale)
    return out


def _linear(name: str, x: Tensor, apply, adjoint) -> Tensor:
    """``apply(x)`` (a linear map), recorded for autograd with the backward
    ``adjoint``, whose own backward is ``apply``: gradients of gradients too."""

    def backward(gs):
        return (_linear(name.replace("Backward", "BackwardBackward", 1), gs[0], adjoint, apply),)

    return record(name, apply(x), (x,), backward)


def _adjoint(g: Tensor, c: Call) -> Tensor:
    """The adjoint of the call ``c`` applied to ``g`` (the gradient of its
    result): the gradient of its input, of the input's shape and type."""
    axes, n = c.axes, c.n
    if c.kind == "C2R":  # its adjoint: the R2C the other way, the entries standing for two counted twice
        back = replace(c, kind="R2C", forward=not c.forward, shape=g.shape, dtype=g.dtype, work=c.out_dtype,
                       out_dtype=c.work, scale=1.0)  # fmt: skip
        gx = transform(g, back)
        double = n[-1] - (n[-1] // 2 + 1)
        with no_grad():
            if double > 0:
                gx.narrow(axes[-1], 1, double).mul_(2.0)
    else:  # C2C, and R2C through a C2C of the one-sided gradient padded with zeros
        work = dt.complex_dtype(c.work)
        back = replace(c, kind="C2C", forward=not c.forward, shape=g.shape, dtype=g.dtype, work=work, out_dtype=work,
                       scale=1.0)  # fmt: skip
        gx = transform(g, back)
    with no_grad():
        if c.scale != 1.0:
            gx.mul_(c.scale)
        gx = resize(gx, axes, [c.shape[a] for a in axes])
        if c.dtype.kind != "c":
            gx = real_part(gx)
        return gx if gx.dtype is c.dtype and gx._contig else gx.to(c.dtype).contiguous()
