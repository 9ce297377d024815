"""Neural network layers, losses and their functional forms.

``Module`` is the base class; ``Parameter`` marks its weights. Layers and losses
are built from tensor ops, so autograd differentiates them without any gradient
code here.
"""

from __future__ import annotations

from . import functional
from .activation import GELU, Dropout, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Softplus, Tanh
from .container import Sequential
from .linear import Linear
from .loss import CrossEntropyLoss, MSELoss
from .module import IncompatibleKeys, Module, RemovableHandle
from .normalization import Embedding, LayerNorm
from .parameter import Parameter

__all__ = [
    "GELU", "CrossEntropyLoss", "Dropout", "Embedding", "IncompatibleKeys", "LayerNorm", "Linear", "LogSoftmax",
    "MSELoss", "Module", "Parameter", "ReLU", "RemovableHandle", "Sequential", "SiLU", "Sigmoid", "Softmax", "Softplus",
    "Tanh", "functional",
]  # fmt: skip
