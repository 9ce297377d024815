"""Grad mode: whether ops record what ``backward`` needs (per thread, as in PyTorch)."""

from __future__ import annotations

import functools
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

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapped


class _Mode:
    """A context manager (and decorator) that sets grad mode for its block."""

    _mode = True

    def __enter__(self) -> None:
        self._previous = is_grad_enabled()
        _state.enabled = self._mode

    def __exit__(self, *exc) -> None:
        _state.enabled = self._previous

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)

        return wrapped


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
