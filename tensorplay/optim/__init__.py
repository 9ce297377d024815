"""Optimizers: ``SGD`` and ``Adam`` over ``Optimizer``'s parameter groups.

A ``step()`` is in-place tensor ops on the device under ``no_grad``: it never
waits for the GPU, and after a warm-up it can be captured in a CUDA graph.
"""

from __future__ import annotations

from .adam import Adam
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["SGD", "Adam", "Optimizer"]
