"""Loss modules: ``MSELoss`` and ``CrossEntropyLoss`` over ``nn.functional``."""

from __future__ import annotations

from .._tensor import Tensor
from . import functional as F
from .module import Module

__all__ = ["CrossEntropyLoss", "MSELoss"]


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        F.check_reduction(type(self).__name__, reduction)
        self.reduction = reduction

    def extra_repr(self) -> str:
        return f"reduction={self.reduction!r}"


class MSELoss(_Loss):
    """The squared error between input and target (see ``functional.mse_loss``).

    Parameters
    ----------
    reduction : {"mean", "sum", "none"}, default "mean"

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> nn.MSELoss(reduction="sum")(tp.tensor([1.0, 2.0]), tp.tensor([1.0, 0.0])).item()
    4.0
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
        return F.mse_loss(input, target, self.reduction)


class CrossEntropyLoss(_Loss):
    """Cross entropy of logits against integer class indices (see
    ``functional.cross_entropy``).

    Parameters
    ----------
    reduction : {"mean", "sum", "none"}, default "mean"

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> loss = nn.CrossEntropyLoss()(tp.tensor([[10.0, -10.0]]), tp.tensor([0]))
    >>> loss.item() < 1e-6
    True
    """

    def forward(self, input: Tensor, target: Tensor) -> Tensor:  # noqa: A002
        return F.cross_entropy(input, target, self.reduction)
