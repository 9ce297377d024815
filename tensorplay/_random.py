"""Random draws: ``rand``, ``randn``, ``manual_seed`` and the generator's state.

The numbers are counter-based (``kernels/random.py``): draw element i is a
hash of (seed, offset + i). The seed and the offset live on the device, and
each draw's kernel moves the offset on by itself, so a draw captured in a CUDA
graph takes fresh numbers at every replay, and in a while node's body at every
pass, with no host work; and the numbers a graph draws are the ones the same
ops would draw eagerly from the same state. Draws are ordered with each other
the way kernels are: by the streams they run on (two draws on streams not
ordered with each other may take the same numbers).

With ``tp.compile``, the warm-up calls draw eagerly and the replays draw on
the device, both from this generator; ``stage_and_launch`` stages tensors
only, so it changes nothing here.
"""

from __future__ import annotations

import threading

import numpy as np

from . import _dtype as dt
from ._device import check_device
from ._factories import _leaf, empty
from ._grad_mode import is_grad_enabled
from ._tape import needs_grad, record
from ._tensor import Tensor
from .kernels import random as rnd
from .runtime.capture import CaptureError, capture_state, current_fuser, prepare_before_captures
from .runtime.launch import grid_1d, launch
from .runtime.streams import current_stream

__all__ = ["dropout", "get_rng_state", "manual_seed", "rand", "randn", "set_rng_state"]

DEFAULT_SEED = 0x2545F4914F6CDD1D


class _Generator:
    """The device state [seed, offset, block counts...], made on first use outside
    any capture (before each capture begins, at the latest)."""

    def __init__(self) -> None:
        self._state: Tensor | None = None
        self._lock = threading.Lock()

    def state(self) -> Tensor:
        state = self._state
        if state is None:
            if capture_state.active:
                raise CaptureError(
                    "the random generator's state is made before a capture begins; this capture was begun "
                    "while another was in progress: draw once (or call tp.manual_seed) before capturing"
                )
            self.prepare()
            state = self._state
        return state

    def prepare(self) -> None:
        with self._lock:
            if self._state is None and not capture_state.active:
                state = empty(rnd.STATE_SIZE, dtype=dt.int64)
                _seed(state, DEFAULT_SEED)
                current_stream().synchronize()  # seeded before any graph that draws replays, on any stream
                self._state = state


generator = _Generator()
prepare_before_captures(generator.prepare)


_MASK = (1 << 64) - 1


def mixed_seed(seed: int) -> int:
    """The seed as the kernels take it: its 64 bits through SplitMix64's finaliser, a
    one-to-one mix, so that no seed's first draw is 0 (seed 0's was) and no two
    seeds' sequences are one another's shifted by a few numbers."""
    z = (int(seed) + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _seed(state: Tensor, seed: int) -> None:
    bits = np.array(mixed_seed(int(seed) & _MASK), dtype=np.uint64).view(np.int64)[()]
    launch(rnd.seed_state, (1, 1, 1), (1, 1, 1), [state, bits])


def manual_seed(seed: int) -> None:
    """Seed the random draws (``rand``, ``randn``, dropout) and start their
    sequence again; the graphs captured before draw from it too."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"manual_seed expects an int, got {type(seed).__name__}")
    if not -(1 << 63) <= seed < 1 << 64:
        raise ValueError(f"manual_seed expects a seed from -2**63 to 2**64 - 1 (64 bits), got {seed}")
    _refuse_in_capture("tp.manual_seed()", "; seed before capture_begin(): " + _REPLAYS_DRAW_ON)
    _seed(generator.state(), seed)


def get_rng_state() -> Tensor:
    """A copy of the generator's state (a device tensor of the seed and the
    offset, 2 int64 values), for ``set_rng_state``. Refused while the current
    stream captures a graph, as ``manual_seed`` and ``set_rng_state`` are: the
    state is taken and set between captures, and a graph's draws go on from it."""
    _refuse_in_capture(
        "tp.get_rng_state()",
        ", where the copy would be made only at each replay; take the state before capture_begin()",
    )
    return generator.state()[:2].clone()


def set_rng_state(state: Tensor) -> None:
    """Restore a state from ``get_rng_state``: the draws that followed it repeat."""
    if not isinstance(state, Tensor) or state.dtype != dt.int64 or state.shape != (2,):
        raise TypeError("set_rng_state expects a tensor from tp.get_rng_state() (2 int64 values)")
    _refuse_in_capture(
        "tp.set_rng_state()",
        ", where every replay would restore the state and draw the same numbers; restore it before "
        "capture_begin(): " + _REPLAYS_DRAW_ON,
    )
    generator.state()[:2].copy_(state)


_REPLAYS_DRAW_ON = "the graph's draws go on from the generator's state at each replay"


def _refuse_in_capture(call: str, rest: str) -> None:
    """CaptureError (nothing done) if the current stream is capturing: the
    generator's state is set and read on the host's schedule, and a captured
    seed or restore would rewind it at every replay."""
    if capture_state.active and current_stream().is_capturing():
        raise CaptureError(f"{call} was called while a graph is being captured{rest}")


def _draw(kernel, shape, dtype) -> Tensor:
    dtype = dt.as_dtype(dtype or dt.DEFAULT_FLOAT)
    if dtype.kind != "f":
        raise TypeError(f"random draws need a floating point dtype, got {dtype}")
    if dtype is dt.bfloat16:  # drawn in float32 (the kernels write plain values), then rounded
        drawn = _draw(kernel, shape, dt.float32).to(dtype)
        # below 1 as float32, a uniform draw may round up to 1 in bfloat16: keep it below
        return drawn.clamp(max=float(dtype.np.type(1) - dtype.np.type(2**-8))) if kernel is rnd.uniform else drawn
    out = empty(*shape, dtype=dtype)
    n = out.numel()
    fuser = current_fuser() if capture_state.fusers else None
    if n and kernel is rnd.uniform and fuser is not None and fuser.uniform(out, generator.state()):
        return out  # tp.compile: drawn by the fused kernel of its chain, the same numbers
    if n:
        args = [out._flat(), generator.state()]
        if kernel is rnd.uniform and dtype is dt.float64:
            kernel = rnd.uniform_double  # 53 random bits a number
        elif kernel is rnd.uniform:
            args.append(np.float64(np.nextafter(dtype.np.type(1), dtype.np.type(0))))
        launch(kernel, *grid_1d(n), args)
    return out


def rand(*shape, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Uniform draws in [0, 1). Under ``tp.compile`` a float32 or float64 draw
    joins the fused kernel of its chain, which draws the same numbers.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.manual_seed(0)
    >>> a = tp.rand(3)
    >>> tp.manual_seed(0)
    >>> tp.rand(3).tolist() == a.tolist()
    True
    """
    check_device(device)  # the device, as the other factories take it
    return _leaf(_draw(rnd.uniform, shape, dtype), requires_grad)


def randn(*shape, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """Standard normal draws."""
    check_device(device)
    return _leaf(_draw(rnd.normal, shape, dtype), requires_grad)


def dropout(x: Tensor, p: float) -> Tensor:
    """``x`` with each element zeroed with probability ``p`` (0 < p < 1) and the
    others scaled by ``1 / (1 - p)``: one kernel draws, masks and scales, and
    keeps the mask when the gradient needs it (``nn.functional.dropout`` checks ``x``, ``p``)."""
    if x.dtype is dt.bfloat16:  # the kernel scales plain values: bfloat16's go through float32
        return dropout(x.to(dt.float32), p).to(x.dtype)
    src = x if x._contig else x.contiguous()
    store_mask = is_grad_enabled() and needs_grad(x)
    out, keep = empty(*x.shape, dtype=x.dtype), empty(*(x.shape if store_mask else (1,)), dtype=dt.bool)
    n, scale = out.numel(), 1.0 / (1.0 - p)
    if n:
        args = [out._flat(), keep._flat(), src._flat(), generator.state(), float(p), scale, store_mask]
        launch(rnd.dropout, *grid_1d(n), args)
    return record("DropoutBackward", out, (x,), lambda gs: (gs[0] * keep * scale,))
