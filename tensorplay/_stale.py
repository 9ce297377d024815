"""Outputs that a later call overwrote: reading one raises ``StaleOutputError``.

A compiled function (``tp.compile``) and a graphed callable return tensors over
their graph's own memory, which the next call rewrites. Each call hands out
new tensor objects over that memory (``Handout.give``), and the next call turns
the previous ones *stale*: their class becomes ``StaleTensor``, whose memory
attributes (the data pointer, the packed kernel parameters, the storage) raise
a sentence naming the function and the fix. Ops, readback (``numpy``,
``item``, ``print``), indexing and interop all go through those attributes, so
the check costs the ops nothing; a call pays about a microsecond per output.
A view taken of an output before the next call is not tracked.
"""

from __future__ import annotations

import weakref

from ._tensor import Tensor

__all__ = ["Handout", "StaleOutputError", "StaleTensor", "config"]

_MESSAGE = Tensor._kf  # the slot where a stale tensor keeps its sentence (its packed parameters are void)
_STORAGE = Tensor._storage


class Config:
    """``tp.compiler.config``, read at each call of a compiled or graphed function.

    ``check_stale_outputs`` (True): returned tensors raise ``StaleOutputError``
    when used after a later call overwrote them; False skips the check (a call
    then returns the graph's output tensors themselves, a microsecond sooner
    per output).
    """

    __slots__ = ("check_stale_outputs",)

    def __init__(self) -> None:
        self.check_stale_outputs = True

    def __repr__(self) -> str:
        return f"tp.compiler.config(check_stale_outputs={self.check_stale_outputs})"


config = Config()


class StaleOutputError(RuntimeError):
    """A tensor returned by a compiled or graphed function was used after a
    later call of that function overwrote its memory."""


def _refuse(t: Tensor, *_) -> None:
    raise StaleOutputError(_MESSAGE.__get__(t, Tensor))


_REFUSED = property(_refuse, _refuse)


class StaleTensor(Tensor):
    """An output whose memory a later call of its function rewrote."""

    __slots__ = ()
    _ptr = _storage = _k = _kb = _kf = _karray = _kbytes = _kflat = _REFUSED

    def __repr__(self) -> str:
        return f"<stale output, shape {self.shape}, {self.dtype.name}: {_MESSAGE.__get__(self, Tensor)}>"


class Handout:
    """The outputs of the last call of one function (``what`` names it in the
    error), made stale when the next call hands out new ones."""

    __slots__ = ("what", "_given")

    def __init__(self, what: str) -> None:
        self.what = what
        self._given: list = []

    def give(self, statics: list[Tensor]) -> list[Tensor]:
        """New tensors over ``statics`` (the graph's outputs) for this call;
        the ones the previous call gave are stale from now on."""
        self.expire()
        outs = [Tensor._make(s._storage, s._ptr, s.shape, s._strides, s.dtype) for s in statics]
        self._given = [weakref.ref(t) for t in outs]
        return outs

    def expire(self) -> None:
        """Make stale what the last call gave (the memory is being rewritten)."""
        message = (
            f"this tensor is an output of {self.what}, and a later call overwrote it (each call writes its "
            "outputs into the same graph memory); .clone() an output that must outlive the next call, or "
            "set tp.compiler.config.check_stale_outputs = False to skip this check"
        )
        for ref in self._given:
            t = ref()
            if t is not None and type(t) is Tensor:
                _STORAGE.__set__(t, None)  # a stale tensor no longer holds the graph's memory
                _MESSAGE.__set__(t, message)
                t.__class__ = StaleTensor
        self._given = []
