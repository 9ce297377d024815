"""``Sequential``: modules called one after another."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator

from .module import Module

__all__ = ["Sequential"]


class Sequential(Module):
    """Modules applied in order, each to the previous one's output.

    Build it from modules (named ``"0"``, ``"1"``, ...) or from an ordered dict
    of names to modules. Index it (negative indices and slices too), take its
    ``len`` and iterate over it.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> net = nn.Sequential(nn.Linear(2, 4), nn.Tanh(), nn.Linear(4, 1))
    >>> net
    Sequential(
      (0): Linear(in_features=2, out_features=4, bias=True)
      (1): Tanh()
      (2): Linear(in_features=4, out_features=1, bias=True)
    )
    >>> len(net), net[-1].out_features, net(tp.ones(3, 2)).shape
    (3, 1, (3, 1))
    """

    def __init__(self, *modules: Module) -> None:
        super().__init__()
        if len(modules) == 1 and isinstance(modules[0], dict):
            for name, module in modules[0].items():
                self._add(name, module)
        else:
            for i, module in enumerate(modules):
                self._add(str(i), module)

    def _add(self, name: str, module: Module) -> None:
        if not isinstance(module, Module):
            raise TypeError(f"Sequential expects Modules, got {type(module).__name__} for entry {name!r}")
        self.add_module(name, module)

    def _index(self, idx: int) -> str:
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise TypeError(f"Sequential indices must be ints or slices, got {type(idx).__name__}")
        n = len(self._modules)
        if not -n <= idx < n:
            raise IndexError(f"index {idx} is out of range for a Sequential of {n} modules")
        return list(self._modules)[idx % n]

    def __getitem__(self, idx: int | slice) -> Module:
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        return self._modules[self._index(idx)]

    def __setitem__(self, idx: int, module: Module) -> None:
        if isinstance(idx, slice):
            raise TypeError("Sequential items are assigned one at a time (an int index, as PyTorch), got a slice")
        name = self._index(idx)
        if not isinstance(module, Module):
            raise TypeError(f"Sequential expects Modules, got {type(module).__name__}")
        self._modules[name] = module

    def __delitem__(self, idx: int | slice) -> None:
        names = list(self._modules)[idx] if isinstance(idx, slice) else [self._index(idx)]
        for name in names:
            del self._modules[name]
        renumbered = OrderedDict((str(i), m) for i, m in enumerate(self._modules.values()))
        self._modules.clear()
        self._modules.update(renumbered)  # as PyTorch: later appends cannot collide

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self) -> Iterator[Module]:
        return iter(self._modules.values())

    def append(self, module: Module) -> Sequential:
        """Add ``module`` at the end; returns self."""
        self._add(str(len(self._modules)), module)
        return self

    def forward(self, x):
        for module in self._modules.values():
            x = module(x)
        return x
