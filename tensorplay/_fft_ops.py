"""The transforms of ``tp.fft`` computed on tensors: a ``Call`` (see
``_fft_choice``) cut into its steps, each run by cuFFT on the GPU or by
``numpy.fft`` on the simulator, on dense operands.

Each step moves its axes last (the others, in order, are its batch) and
makes the operand dense where it is not already: one copy, which also casts
the type and cuts or pads the input to the call's lengths in the first
step. Its output is dense in that order and is seen back in the input's
order through a permute, with no copy. cuFFT's real transforms run one way
only (R2C forward, C2R inverse): the other direction conjugates the input
(C2R: the copy made anyway, since C2R overwrites its input) or the output
(R2C), both in place on memory the call owns. Nothing here normalises or
records gradients: ``fft.py`` does.
"""

from __future__ import annotations

import numpy as np

from . import _dtype as dt
from ._complex import imag_part, real_part
from ._fft_choice import Call, Step, refusal, refuse, steps
from ._grad_mode import no_grad
from ._tensor import Tensor
from .runtime.backend import CaptureError
from .runtime.backend import get as get_backend
from .runtime.caches import BoundedCache
from .runtime.libraries import cufft
from .runtime.libraries.simulated import Operand, call
from .runtime.streams import current_stream

__all__ = ["resize", "transform"]


def transform(x: Tensor, c: Call) -> Tensor:
    """The unnormalised transform ``c`` of ``x`` (a new tensor, never ``x``
    nor a view of it), recording no gradient."""
    with no_grad():
        return _transform(x.detach(), c)


_STEPS = BoundedCache("fft.steps", 4096)  # Call -> (the kind it is computed as, its steps)


def _transform(x: Tensor, c: Call) -> Tensor:
    kind, todo = _STEPS.get(c) or _STEPS.put(c, steps(c))
    library = refusal() is None
    if todo and not library and get_backend().name != "sim":
        refuse()
    if not todo or 0 in c.out_shape:
        return _without_steps(x, c, kind)
    resize = dict(zip(c.axes, c.pre, strict=True))
    work = dt.real_dtype(c.work) if kind == "R2C" else dt.complex_dtype(c.work)
    conj_input = c.kind == "C2R" and kind == "C2R" and c.forward
    t = x
    for i, step in enumerate(todo):
        first = i == 0
        copy = first and (conj_input or step.kind == "C2R")  # C2R overwrites its input: never the caller's
        src, perm = _dense(t, step.axes, resize if first else {}, work if first else t.dtype, copy)
        if first and conj_input:
            imag_part(src).mul_(-1.0)
        t = _run(step, src, perm, c.precision, c.forward if kind == "C2C" else kind == "R2C")
    if kind == "R2C" and not c.forward:
        imag_part(t).mul_(-1.0)
    if c.kind == "C2R" and kind == "C2C":  # a C2R of last length one: the real parts
        t = _copy(real_part(t), c.out_dtype)
    return t


def _without_steps(x: Tensor, c: Call, kind: str) -> Tensor:
    """A call with no library step: every axis of length one (the transform is
    the input itself, cut or padded), or an empty input or output."""
    shape = c.out_shape
    if 0 in shape:
        return Tensor._empty(shape, c.out_dtype)
    t = resize(x, c.axes, c.pre)
    if c.kind == "C2R":
        t = real_part(t) if t.dtype.kind == "c" else t
    return _copy(t, c.out_dtype)


def _copy(t: Tensor, dtype: dt.DType) -> Tensor:
    out = Tensor._empty(t.shape, dtype)
    out.copy_(t)
    return out


def resize(t: Tensor, axes, sizes) -> Tensor:
    """``t`` cut or padded with zeros at the end to ``sizes`` along ``axes``
    (``t`` itself where nothing changes), recording no gradient."""
    src, target = t, list(t.shape)
    for a, m in zip(axes, sizes, strict=True):
        if src.shape[a] > m:
            src = src.narrow(a, 0, m)
        target[a] = m
    if tuple(target) == t.shape:
        return t
    with no_grad():
        out = Tensor._empty(tuple(target), t.dtype)
        if src.shape != out.shape:
            out.zero_()
        _corner(out, src.shape).copy_(src)
    return out


def _corner(t: Tensor, shape) -> Tensor:
    """The view of ``t`` of ``shape`` at its first element."""
    for a, m in enumerate(shape):
        if t.shape[a] != m:
            t = t.narrow(a, 0, m)
    return t


def _dense(t: Tensor, axes: tuple, resize_to: dict, dtype: dt.DType, copy: bool) -> tuple[Tensor, list]:
    """``t`` with the other axes first and ``axes`` last (the permutation, and
    the operand: C-contiguous, of ``dtype``, cut or padded per ``resize_to``),
    copied only where needed or ``copy``."""
    perm = [d for d in range(t.ndim) if d not in axes] + list(axes)
    src = t
    for a, m in resize_to.items():
        if src.shape[a] > m:
            src = src.narrow(a, 0, m)
    v = src.permute(perm)
    target = tuple(resize_to.get(d, t.shape[d]) for d in perm)
    if v.shape == target and v.dtype is dtype and v._contig and not copy:
        return v, perm
    out = Tensor._empty(target, dtype)
    if v.shape != target:
        out.zero_()
    _corner(out, v.shape).copy_(v)
    return out, perm


def _run(step: Step, src: Tensor, perm: list, precision: str, forward: bool) -> Tensor:
    """One step on the dense ``src`` (its axes last): the output, seen in the
    tensor's own axis order."""
    k = len(step.axes)
    lead = src.shape[:-k]
    sizes = step.sizes
    in_sizes = cufft.half(sizes) if step.kind == "C2R" else sizes
    out_sizes = cufft.half(sizes) if step.kind == "R2C" else sizes
    real, complex_ = dt.as_dtype(precision), dt.complex_dtype(dt.as_dtype(precision))
    out_dtype = real if step.kind == "C2R" else complex_
    _refuse_new_plan(step, precision)
    out = Tensor._empty(tuple(lead) + tuple(out_sizes), out_dtype)
    if refusal() is None:
        cufft.plan(step.kind, precision, sizes, step.batch)(src._ptr, out._ptr, forward)
    else:
        _simulated(step, src, out, in_sizes, out_sizes, forward)
    inverse = [0] * len(perm)
    for i, d in enumerate(perm):
        inverse[d] = i
    return out.permute(inverse)


_PLANNED: set = set()  # (kind, precision, sizes, batch) of every step run eagerly, on either backend


BLUESTEIN_PRIME = 127  # cuFFT computes lengths with a prime factor over this by Bluestein's algorithm


def _refuse_new_plan(step: Step, precision: str) -> None:
    """A step of a length with a prime factor over 127 meets its first call
    inside a capture: cuFFT makes such a plan (Bluestein's) by computing tables
    on the device, which fails while a graph is captured (CUFFT_INTERNAL_ERROR
    on the H200), so the call is refused with what to do, on the simulator too.
    Other plans are made inside captures as well as outside."""
    key = (step.kind, precision, tuple(step.sizes), step.batch)
    if key in _PLANNED:
        return
    s = current_stream()
    if s.is_capturing() and any(_largest_prime_factor(n) > BLUESTEIN_PRIME for n in step.sizes):
        raise CaptureError(
            f"a {step.kind} transform of sizes {list(step.sizes)} ({precision}, batch {step.batch}) meets its first "
            f"call inside a capture on stream {s.handle:#x}: a length with a prime factor over {BLUESTEIN_PRIME} "
            "needs a cuFFT plan that cannot be made while a graph is captured; call the same transform once before "
            "capturing (a warm-up, as tp.compile's first call makes), or pad to a length of small prime factors"
        )
    _PLANNED.add(key)


def _largest_prime_factor(n: int) -> int:
    largest, p = 1, 2
    while p * p <= n:
        while n % p == 0:
            largest, n = p, n // p
        p += 1
    return max(largest, n)


def _simulated(step: Step, src: Tensor, out: Tensor, in_sizes, out_sizes, forward: bool) -> None:
    """The step as the simulator's library call: ``numpy.fft`` on the views,
    unnormalised, as cuFFT computes it."""
    axes = tuple(range(1, len(step.sizes) + 1))
    sizes = step.sizes

    def compute(a: np.ndarray, b: np.ndarray) -> None:
        if step.kind == "C2C":
            b[...] = np.fft.fftn(a, axes=axes) if forward else np.fft.ifftn(a, axes=axes, norm="forward")
        elif step.kind == "R2C":
            b[...] = np.fft.rfftn(a, axes=axes)
        else:
            b[...] = np.fft.irfftn(a, s=sizes, axes=axes, norm="forward")

    operands = [
        Operand.dense(src._ptr, (step.batch,) + tuple(in_sizes), src.dtype.np),
        Operand.dense(out._ptr, (step.batch,) + tuple(out_sizes), out.dtype.np),
    ]
    call(f"cufftExec{step.kind} (rank {len(sizes)}, sizes {list(sizes)}, batch {step.batch})", compute, operands)
