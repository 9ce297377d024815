"""Grad mode: whether ops record what ``backward`` needs (per thread, as in PyTorch)."""

from __future__ import annotations

import functools
import inspect
import threading

__all__ = ["enable_grad", "is_grad_enabled", "no_grad", "set_grad_enabled"]

_state = threading.local()


def is_grad_enabled() -> bool:
    """Whether ops on tensors that require grad are recorded on this thread."""
    return getattr(_state, "enabled", True)


class set_grad_enabled:  # noqa: N801 (PyTorch's name)
    """Turn recording on or off: from now on (called plainly), for a ``with``
    block, or for every call of a function it decorates.

    Examples
    --------
    >>> import tensorplay as tp
    >>> w = tp.ones(2).requires_grad_()
    >>> with tp.set_grad_enabled(False):
    ...     (w * 2).requires_grad
    False
    """

    def __init__(self, mode: bool) -> None:
        self.mode, self._previous = bool(mode), is_grad_enabled()
        _state.enabled = self.mode

    def __enter__(self) -> None:
        pass

    def __exit__(self, *exc) -> None:
        _state.enabled = self._previous

    def __call__(self, fn):
        _state.enabled = self._previous  # a decorator: the mode applies inside each call only
        mode = self.mode
        return _decorate(fn, lambda: set_grad_enabled(mode))


class _Mode:
    """A context manager (and decorator) that sets grad mode for its block."""

    _mode = True

    def __enter__(self) -> None:
        self._previous = is_grad_enabled()
        _state.enabled = self._mode

    def __exit__(self, *exc) -> None:
        _state.enabled = self._previous

    def __call__(self, fn):
        return _decorate(fn, type(self))


def _decorate(fn, mode):
    """``fn`` run under the context manager ``mode()``; for a generator function,
    under it at each resume (as PyTorch's decorators), since its body runs
    between ``next()`` calls, long after the call that made the generator."""
    if inspect.isgeneratorfunction(fn):

        @functools.wraps(fn)
        def generate(*args, **kwargs):
            return _resumed_in(mode, fn(*args, **kwargs))

        return generate

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with mode():
            return fn(*args, **kwargs)

    return wrapped


def _resumed_in(mode, gen):
    """Yield what ``gen`` yields, running each of its steps under ``mode()`` and
    passing on what is sent or thrown into it."""
    try:
        with mode():
            response = gen.send(None)
        while True:
            try:
                request = yield response
            except GeneratorExit:
                with mode():
                    gen.close()
                raise
            except BaseException as e:
                with mode():
                    response = gen.throw(e)
            else:
                with mode():
                    response = gen.send(request)
    except StopIteration as stop:
        return stop.value


class no_grad(_Mode):  # noqa: N801
    """Ops in this block are not recorded: for inference and optimizer updates.

    Examples
    --------
    >>> import tensorplay as tp
    >>> w = tp.ones(2).requires_grad_()
    >>> with tp.no_grad():
    ...     w.mul_(0.5)  # an in-place update of a leaf is allowed here
    tensor([0.5, 0.5], requires_grad=True)
    """

    _mode = False


class enable_grad(_Mode):  # noqa: N801
    """Record ops again inside a ``no_grad`` block."""

    _mode = True
