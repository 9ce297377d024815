"""``Parameter``: a tensor that a ``Module`` registers as one of its weights."""

from __future__ import annotations

from .._factories import empty
from .._tensor import Tensor

__all__ = ["Parameter"]


class Parameter(Tensor):
    """A leaf tensor that requires grad and that a ``Module`` lists in
    ``parameters()`` when it is assigned as an attribute.

    It shares the memory of ``data`` (no copy): writing one changes the other.

    Parameters
    ----------
    data : Tensor
        The values; the parameter is a new leaf over the same memory.
    requires_grad : bool, default True
        Whether ``backward`` computes a gradient for it.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> w = nn.Parameter(tp.zeros(2))
    >>> w.requires_grad, isinstance(w, tp.Tensor)
    (True, True)
    """

    __slots__ = ()

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True) -> Parameter:
        if data is None:
            data = empty(0)
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter expects a Tensor, got {type(data).__name__}")
        p = cls._make(data._storage, data._ptr, data.shape, data._strides, data.dtype)
        p.requires_grad_(requires_grad)
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True) -> None:
        pass  # all done in __new__ (Tensor.__init__ refuses direct construction)

    def __repr__(self) -> str:
        return f"Parameter containing:\n{super().__repr__()}"
