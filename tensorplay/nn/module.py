"""``Module``: the base class of layers and models.

A module keeps its parameters, buffers and submodules in three ordered dicts,
filled by plain attribute assignment (``self.fc = Linear(2, 3)``) as in
PyTorch. Everything else (names, state dicts, hooks, train/eval) walks them.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from .._device import to_arguments
from .._dtype import DType, as_dtype
from .._overlap import same_view, storage_key
from .._tensor import Tensor
from ..autograd import no_grad
from ..autograd._engine import clear_grads
from .parameter import Parameter

__all__ = ["IncompatibleKeys", "Module", "RemovableHandle"]

_hook_ids = itertools.count()


class RemovableHandle:
    """What ``register_forward_hook`` and ``register_forward_pre_hook`` return:
    ``remove()`` takes the hook off (also as a ``with`` block)."""

    def __init__(self, hooks: dict) -> None:
        self._hooks, self.id = hooks, next(_hook_ids)

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class IncompatibleKeys(NamedTuple):
    """The keys ``load_state_dict(strict=False)`` skipped."""

    missing_keys: list[str]
    unexpected_keys: list[str]


_training = threading.local()  # .seen: the modules a train() call has set, while it runs


def _check_name(kind: str, name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a str, got {type(name).__name__}")
    if not name or "." in name:
        raise KeyError(f"{kind} name must be non-empty and contain no '.', got {name!r}")


def _indent(text: str, spaces: int) -> str:
    return text.replace("\n", "\n" + " " * spaces)


class Module:
    """Base class of layers and models: subclass it, assign parameters and
    submodules in ``__init__``, compute in ``forward``, call the module.

    Attributes
    ----------
    training : bool
        True in training mode (the default), False after ``eval()``.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> class Net(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.fc = nn.Linear(3, 2)
    ...         self.scale = nn.Parameter(tp.ones(2))
    ...
    ...     def forward(self, x):
    ...         return self.fc(x) * self.scale
    >>> net = Net()
    >>> [name for name, _ in net.named_parameters()]
    ['scale', 'fc.weight', 'fc.bias']
    >>> net(tp.ones(4, 3)).shape
    (4, 2)
    """

    training: bool

    def __init__(self) -> None:
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = OrderedDict()
        d["_buffers"] = OrderedDict()
        d["_non_persistent"] = set()
        d["_modules"] = OrderedDict()
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward(); define forward(self, ...) in the subclass")

    def __call__(self, *args, **kwargs):
        """``forward(*args, **kwargs)`` between the forward pre-hooks and hooks
        (which see the positional arguments only)."""
        for hook in list(self._forward_pre_hooks.values()):
            result = hook(self, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hook in list(self._forward_hooks.values()):
            result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    # -- attribute registration ------------------------------------------------------
    def _require_init(self, name: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(
                f"cannot assign {name!r} before Module.__init__() is called; call super().__init__() first"
            )

    def __setattr__(self, name: str, value: Any) -> None:
        d = self.__dict__
        params, buffers, modules = d.get("_parameters"), d.get("_buffers"), d.get("_modules")
        if isinstance(value, Parameter):
            self._require_init(name)
            self._forget(name, keep="_parameters")
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign a {type(value).__name__} as parameter {name!r} (tp.nn.Parameter or None expected)"
                )
            params[name] = None
        elif isinstance(value, Module):
            self._require_init(name)
            self._forget(name, keep="_modules")
            modules[name] = value
        elif modules is not None and name in modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign a {type(value).__name__} as child module {name!r} (Module or None expected)"
                )
            modules[name] = None
        elif buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign a {type(value).__name__} as buffer {name!r} (Tensor or None expected)")
            buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def _forget(self, name: str, keep: str) -> None:
        """Drop ``name`` from the instance dict and every registry but ``keep``,
        the one it is about to be assigned in: an entry already there is
        replaced where it stands (as PyTorch), so a re-assigned child keeps its
        place in ``forward`` of a Sequential, in ``state_dict()`` and in
        ``parameters()`` (an optimizer's order)."""
        d = self.__dict__
        d.pop(name, None)
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry != keep:
                d[registry].pop(name, None)
        d["_non_persistent"].discard(name)

    def __getattr__(self, name: str) -> Any:
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                return d[registry][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name: str) -> None:
        d = self.__dict__
        for registry in ("_parameters", "_buffers", "_modules"):
            if registry in d and name in d[registry]:
                del d[registry][name]
                d["_non_persistent"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self) -> list[str]:
        names = set(super().__dir__())
        for registry in ("_parameters", "_buffers", "_modules"):
            names.update(self.__dict__.get(registry, ()))
        return sorted(names)

    def _check_new(self, kind: str, name: str) -> None:
        self._require_init(name)
        _check_name(kind, name)
        d = self.__dict__
        taken = name in d or hasattr(type(self), name)
        registry = {"parameter": "_parameters", "buffer": "_buffers", "module": "_modules"}[kind]
        if taken or any(name in d[r] for r in ("_parameters", "_buffers", "_modules") if r != registry):
            raise KeyError(f"attribute {name!r} already exists on {type(self).__name__}")

    def register_parameter(self, name: str, param: Parameter | None) -> None:
        """Add ``param`` (a ``Parameter`` or None) under ``name``."""
        self._check_new("parameter", name)
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot register a {type(param).__name__} as parameter {name!r} (tp.nn.Parameter or None expected)"
            )
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor: Tensor | None, persistent: bool = True) -> None:
        """Add a tensor that is state but not a parameter (a running mean, a
        mask); ``persistent=False`` leaves it out of ``state_dict()``.

        Examples
        --------
        >>> import tensorplay as tp
        >>> import tensorplay.nn as nn
        >>> m = nn.Module()
        >>> m.register_buffer("steps", tp.zeros(1))
        >>> list(m.state_dict())
        ['steps']
        """
        self._check_new("buffer", name)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot register a {type(tensor).__name__} as buffer {name!r} (Tensor or None expected)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent.discard(name)
        else:
            self._non_persistent.add(name)

    def add_module(self, name: str, module: Module | None) -> None:
        """Add a child module under ``name`` (as ``self.name = module`` does)."""
        self._check_new("module", name)
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"expected a Module, got {type(module).__name__}")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target: str) -> Module:
        """The submodule at dotted path ``target`` (``""`` is this module)."""
        module = self
        for part in target.split(".") if target else ():
            child = module._modules.get(part)
            if child is None:
                raise AttributeError(f"{type(module).__name__} has no submodule {part!r} (looking up {target!r})")
            module = child
        return module

    # -- walking -------------------------------------------------------------------------
    def named_modules(self, prefix: str = "", _memo: set | None = None) -> Iterator[tuple[str, Module]]:
        """This module and every submodule below it, each once, with dotted names."""
        memo = set() if _memo is None else _memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            if child is not None:
                yield from child.named_modules(f"{prefix}.{name}" if prefix else name, memo)

    def modules(self) -> Iterator[Module]:
        for _, m in self.named_modules():
            yield m

    def named_children(self) -> Iterator[tuple[str, Module]]:
        seen = set()
        for name, child in self._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                yield name, child

    def children(self) -> Iterator[Module]:
        for _, child in self.named_children():
            yield child

    def _named_members(self, registry: str, prefix: str, recurse: bool) -> Iterator[tuple[str, Tensor]]:
        seen = set()  # by identity: == on tensors compares elements
        modules = self.named_modules(prefix) if recurse else [(prefix, self)]
        for module_prefix, module in modules:
            for name, t in module.__dict__[registry].items():
                if t is None or id(t) in seen:
                    continue
                seen.add(id(t))
                yield (f"{module_prefix}.{name}" if module_prefix else name), t

    def named_parameters(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` pairs, each parameter once (shared ones too)."""
        yield from self._named_members("_parameters", prefix, recurse)

    def parameters(self, recurse: bool = True) -> Iterator[Parameter]:
        """Every parameter of this module and (``recurse``) its submodules, once each."""
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix: str = "", recurse: bool = True) -> Iterator[tuple[str, Tensor]]:
        yield from self._named_members("_buffers", prefix, recurse)

    def buffers(self, recurse: bool = True) -> Iterator[Tensor]:
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def apply(self, fn: Callable[[Module], None]) -> Module:
        """Call ``fn`` on every submodule, then on this module; returns self."""
        for child in self.children():
            child.apply(fn)
        fn(self)
        return self

    # -- modes and gradients ----------------------------------------------------------------
    def train(self, mode: bool = True) -> Module:
        """Set ``training`` on this module, then call ``train(mode)`` on each
        child (so that a child's own ``train`` override, such as one keeping a
        frozen part in eval mode, runs, as in PyTorch); returns self."""
        if not isinstance(mode, bool):
            raise TypeError(f"train() expects a bool mode, got {type(mode).__name__}; pass True or False")
        outermost = getattr(_training, "seen", None) is None
        if outermost:
            _training.seen = set()  # each module once: a module may hold itself, or one twice
        try:
            if id(self) not in _training.seen:
                _training.seen.add(id(self))
                self.__dict__["training"] = mode
                for child in self.children():
                    child.train(mode)
        finally:
            if outermost:
                _training.seen = None
        return self

    def eval(self) -> Module:
        """``train(False)``."""
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True) -> Module:
        """Turn gradient tracking of every parameter on or off; returns self."""
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop the parameters' gradients (``set_to_none``) or fill them with zeros."""
        clear_grads(self.parameters(), set_to_none)

    # -- dtype -------------------------------------------------------------------------------
    def to(self, *args, dtype: DType | str | None = None, device=None) -> Module:
        """Cast floating point parameters and buffers to ``dtype``; returns self.
        PyTorch's forms: ``m.to(dtype)``, ``m.to(device)``, ``m.to(device, dtype)``; the
        device is cuda:0, the one there is.

        A parameter whose dtype changes becomes a new ``Parameter`` object (its
        gradient dropped): build the optimizer after the cast. A parameter shared
        by several modules (tied weights) stays shared: one new ``Parameter``.
        """
        dtype = to_arguments(args, dtype, device)
        if dtype is None:
            return self
        dtype = as_dtype(dtype)
        if not dtype.is_floating_point:
            raise TypeError(f"Module.to() expects a floating point dtype, got {dtype.name}")
        converted: dict[int, tuple] = {}  # id of a tensor -> (it, its cast): tied ones stay one
        for m in self.modules():
            for registry in ("_parameters", "_buffers"):
                table = m.__dict__[registry]
                for name, t in table.items():
                    if t is None or not t.dtype.is_floating_point or t.dtype is dtype:
                        continue
                    if id(t) not in converted:
                        with no_grad():
                            cast = t.detach().to(dtype)
                        converted[id(t)] = (t, Parameter(cast, t.requires_grad) if isinstance(t, Parameter) else cast)
                    table[name] = converted[id(t)][1]
        return self

    def float(self) -> Module:
        return self.to("float32")

    def double(self) -> Module:
        return self.to("float64")

    def half(self) -> Module:
        return self.to("float16")

    # -- hooks -------------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Run ``hook(module, args)`` before each ``forward``; a result that is not
        None replaces the positional arguments (a non-tuple becomes a 1-tuple).

        Examples
        --------
        >>> import tensorplay as tp
        >>> import tensorplay.nn as nn
        >>> relu = nn.ReLU()
        >>> handle = relu.register_forward_pre_hook(lambda m, args: (args[0] - 1,))
        >>> relu(tp.tensor([0.5, 3.0])).tolist()
        [0.0, 2.0]
        >>> handle.remove()
        """
        handle = RemovableHandle(self._forward_pre_hooks)
        self._forward_pre_hooks[handle.id] = hook
        return handle

    def register_forward_hook(self, hook: Callable) -> RemovableHandle:
        """Run ``hook(module, args, output)`` after each ``forward``; a result that
        is not None replaces the output.

        Examples
        --------
        >>> import tensorplay as tp
        >>> import tensorplay.nn as nn
        >>> seen = []
        >>> relu = nn.ReLU()
        >>> with relu.register_forward_hook(lambda m, args, out: seen.append(out.shape)):
        ...     _ = relu(tp.ones(2, 3))
        >>> seen
        [(2, 3)]
        """
        handle = RemovableHandle(self._forward_hooks)
        self._forward_hooks[handle.id] = hook
        return handle

    # -- state dict ----------------------------------------------------------------------------
    def _own_state(self) -> Iterator[tuple[str, Tensor]]:
        for name, p in self._parameters.items():
            if p is not None:
                yield name, p
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent:
                yield name, b

    def _state_items(self, prefix: str = "", _path: tuple = ()) -> Iterator[tuple[str, Tensor]]:
        """``(dotted key, tensor)`` of this module's state and its children's.
        A child registered under two names is listed under both, as PyTorch's
        state dict does (a checkpoint holds every key a model can be reached
        by); only a module that contains itself is cut short, where it recurs."""
        for name, t in self._own_state():
            yield prefix + name, t
        path = _path + (id(self),)
        for name, child in self._modules.items():
            if child is not None and id(child) not in path:
                yield from child._state_items(f"{prefix}{name}.", path)

    def state_dict(self, prefix: str = "", keep_vars: bool = False) -> OrderedDict[str, Tensor]:
        """Parameters and persistent buffers by dotted name.

        The tensors share memory with the module's (detached unless
        ``keep_vars``): clone them for a snapshot that training will not change.

        Examples
        --------
        >>> import tensorplay.nn as nn
        >>> net = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
        >>> {k: v.shape for k, v in net.state_dict().items()}
        {'0.weight': (3, 2), '0.bias': (3,), '2.weight': (1, 3), '2.bias': (1,)}
        """
        return OrderedDict((key, t if keep_vars else t.detach()) for key, t in self._state_items(prefix))

    def load_state_dict(self, state_dict: dict, strict: bool = True) -> IncompatibleKeys:
        """Copy ``state_dict``'s values into the parameters and buffers.

        Values are written with ``copy_`` into the existing tensors, so the
        module keeps its tensor objects and a captured CUDA graph that reads
        them sees the new values. Nothing is copied unless every shape matches
        (and, with ``strict``, the keys match exactly). Values that share memory
        with the module's tensors (its own state dict, entries swapped) are all
        read before any is written.

        Parameters
        ----------
        state_dict : dict
            Name to tensor (or array), as ``state_dict()`` gives.
        strict : bool, default True
            Raise on missing or unexpected keys; with False they are returned.

        Returns
        -------
        IncompatibleKeys
            ``(missing_keys, unexpected_keys)``.

        Examples
        --------
        >>> import tensorplay.nn as nn
        >>> a, b = nn.Linear(2, 1), nn.Linear(2, 1)
        >>> b.load_state_dict(a.state_dict())
        IncompatibleKeys(missing_keys=[], unexpected_keys=[])
        >>> b.weight.tolist() == a.weight.tolist()
        True
        """
        if not hasattr(state_dict, "keys"):
            raise TypeError(f"expected a dict of tensors, got {type(state_dict).__name__}")
        targets = OrderedDict(self._state_items())
        missing = [k for k in targets if k not in state_dict]
        unexpected = [k for k in state_dict if k not in targets]
        errors = []
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        for key, target in targets.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            shape = value.shape if isinstance(value, Tensor) else np.shape(value)
            if tuple(shape) != target.shape:
                errors.append(
                    f"size mismatch for {key}: copying a value of shape {tuple(shape)} from the state dict, "
                    f"the shape in the current model is {target.shape}."
                )
        if errors:
            name = type(self).__name__
            raise RuntimeError(f"Error(s) in loading state_dict for {name}:\n\t" + "\n\t".join(errors))
        # a value over the memory of another target (a state dict with swapped or
        # shared entries) is read before any target is written, as a snapshot would be
        written = {storage_key(t) for t in targets.values()}
        with no_grad():
            values = {}
            for key, target in targets.items():
                if key in state_dict:
                    value = state_dict[key]
                    aliased = isinstance(value, Tensor) and storage_key(value) in written
                    values[key] = value.clone() if aliased and not same_view(value, target) else value
            for key, value in values.items():
                targets[key].detach().copy_(value)  # the same memory, written as a plain tensor
        return IncompatibleKeys(missing, unexpected)

    # -- repr ------------------------------------------------------------------------------------
    def extra_repr(self) -> str:
        """The text inside this module's parentheses in ``repr`` (override it)."""
        return ""

    def __repr__(self) -> str:
        extra = self.extra_repr()
        lines = extra.split("\n") if extra else []
        for name, child in self._modules.items():
            lines.append(f"({name}): {_indent(repr(child), 2)}")
        if not self._modules and len(lines) <= 1:
            return f"{type(self).__name__}({extra})"
        body = "\n  ".join(lines)
        return f"{type(self).__name__}(\n  {body}\n)"
