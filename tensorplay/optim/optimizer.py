"""``Optimizer``: parameter groups, per-parameter state and its state dict.

Subclasses write one method, ``_update_group(group)``, which ``step()`` calls
for each group under ``no_grad``. Updates must stay on the device (in-place
tensor ops, no ``.item()``, no ``bool(tensor)``): then a ``step()`` never waits
for the GPU and can be captured in a CUDA graph and replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .._dtype import DType
from .._factories import full
from .._tensor import Tensor
from ..autograd import enable_grad, no_grad
from ..autograd._engine import clear_grads
from ..runtime.streams import is_current_stream_capturing

__all__ = ["Optimizer"]


def check_lr(lr: Any) -> Any:
    """``lr`` as kept: a number >= 0 (see ``check_number``) or a one-element floating
    point tensor (which a captured ``step()`` reads at each replay: a schedule can change it)."""
    if isinstance(lr, Tensor):
        if lr.numel() != 1 or not lr.dtype.is_floating_point:
            raise ValueError(
                f"expected a one-element floating point tensor as lr, got shape {lr.shape} of {lr.dtype.name}"
            )
        return lr
    return check_number("lr", lr)


def scalar_lr(lr: Any) -> Any:
    """``lr`` as the update uses it: a number, or a tensor lr seen as 0-d, which
    broadcasts against parameters of every shape (0-d ones included)."""
    return lr.reshape(()) if isinstance(lr, Tensor) else lr


def check_number(name: str, value: Any, below_one: bool = False) -> float | int:
    """``value`` as a Python number, if it is a real number >= 0 (and < 1 if
    ``below_one``), Python's or NumPy's (``np.float32(0.1)``) as PyTorch takes
    them; else TypeError or ValueError. A NumPy scalar becomes Python's, so that
    a step computes in the parameters' dtype (``1 - dampening`` too)."""
    if not is_real(value):
        raise TypeError(f"expected a number as {name}, got {type(value).__name__}")
    if not 0.0 <= value < (1.0 if below_one else float("inf")):
        raise ValueError(f"expected {name} in [0, {'1' if below_one else 'inf'}), got {value}")
    return value.item() if isinstance(value, np.generic) else value


class Optimizer:
    """Base class of optimizers.

    Parameters
    ----------
    params : iterable of Tensor, or iterable of dict
        The tensors to optimize, or parameter groups: dicts with a ``"params"``
        entry and any options that override ``defaults`` for that group.
    defaults : dict
        The options of groups that do not set them.

    Attributes
    ----------
    param_groups : list of dict
        One dict per group: ``"params"`` (a list) and the group's options.
        Options are read at each ``step()``; a captured step keeps the values
        it was captured with (use a tensor ``lr`` to change it between replays,
        and write into it, ``group["lr"].fill_(x)``: a value assigned to
        ``group["lr"]`` replaces the tensor that the graph reads).
    state : dict
        Per-parameter state (momentum buffers, moments), keyed by parameter.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> import tensorplay.optim as optim
    >>> net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    >>> opt = optim.SGD([{"params": net[0].parameters(), "lr": 0.5}, {"params": net[1].parameters()}], lr=0.1)
    >>> [g["lr"] for g in opt.param_groups]
    [0.5, 0.1]
    """

    def __init__(self, params: Iterable, defaults: dict) -> None:
        self.defaults = dict(defaults)
        self.state: dict[Tensor, dict[str, Any]] = {}
        self.param_groups: list[dict[str, Any]] = []
        if isinstance(params, Tensor):
            raise TypeError("expected an iterable of Tensors or dicts as params, got a Tensor; pass [tensor]")
        groups = list(params)
        if not groups:
            raise ValueError("the optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, group: dict) -> None:
        """Add a group of parameters with its own options (missing ones from ``defaults``).

        Examples
        --------
        >>> import tensorplay as tp
        >>> import tensorplay.nn as nn
        >>> import tensorplay.optim as optim
        >>> a, b = nn.Parameter(tp.zeros(2)), nn.Parameter(tp.zeros(3))
        >>> opt = optim.SGD([a], lr=0.1)
        >>> opt.add_param_group({"params": [b], "momentum": 0.9})
        >>> opt.param_groups[1]["lr"], opt.param_groups[1]["momentum"]
        (0.1, 0.9)
        """
        if not isinstance(group, dict):
            raise TypeError(f"expected a dict as parameter group, got {type(group).__name__}")
        if "params" not in group:
            raise ValueError("a parameter group needs a 'params' entry")
        params = group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError("parameters must be given in a fixed order (a list or a generator), got a set")
        else:
            params = list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"an optimizer can only optimize Tensors, got {type(p).__name__}")
            if not p.dtype.is_floating_point:
                raise TypeError(f"an optimizer can only optimize floating point tensors, got {p.dtype.name}")
            if not p.is_leaf:
                raise ValueError(
                    "cannot optimize a tensor made by an op (not a leaf); optimize the leaves it comes from"
                )
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            raise ValueError("a parameter group lists the same parameter twice")
        taken = {id(p) for g in self.param_groups for p in g["params"]}
        if taken.intersection(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        group = {**self.defaults, **group, "params": params}
        self._check_options(group)
        self.param_groups.append(group)

    def _check_options(self, group: dict) -> None:
        """Validate a group's options (subclasses raise ValueError with a sentence)."""

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Drop every parameter's gradient (``set_to_none``) or fill it with zeros."""
        clear_grads((p for group in self.param_groups for p in group["params"]), set_to_none)

    def step(self, closure: Callable[[], Tensor] | None = None) -> Tensor | None:
        """Update every parameter that has a gradient (those whose ``.grad`` is
        None are skipped). ``closure``, if given, recomputes and returns the
        loss first (with gradients on); its result is returned.

        Nothing here waits for the device: a warmed-up ``step()`` can be
        captured into a CUDA graph, and each replay is one more step.
        """
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        self._refuse_capture_without_state()
        with no_grad():
            for group in self.param_groups:
                self._update_group(group)
        return loss

    def _update_group(self, group: dict) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not define _update_group(group)")

    def _keeps_state(self, group: dict) -> bool:
        """Whether a step of this group makes per-parameter state on first use."""
        return bool(self._PARAM_SHAPED)

    def _refuse_capture_without_state(self) -> None:
        """State made inside a capture would be made again at every replay
        (zeroed moments, a restarted momentum): ask for an eager step first."""
        if not is_current_stream_capturing():
            return
        for group in self.param_groups:
            if self._keeps_state(group) and any(p.grad is not None and p not in self.state for p in group["params"]):
                raise RuntimeError(
                    f"{type(self).__name__}.step() is being captured before its state exists, so every replay "
                    "would start it again; run one eager step() first, then capture"
                )

    # -- state dict ----------------------------------------------------------------------
    #: state entries shaped like their parameter (checked when a state dict is loaded)
    _PARAM_SHAPED: tuple[str, ...] = ()

    def state_dict(self) -> dict[str, Any]:
        """``{"state": {index: {...}}, "param_groups": [{..., "params": [index, ...]}]}``.

        Parameters are numbered in group order. The state's tensors are the
        live ones (not copies): clone them for a snapshot.

        Examples
        --------
        >>> import tensorplay as tp
        >>> import tensorplay.nn as nn
        >>> import tensorplay.optim as optim
        >>> w = nn.Parameter(tp.ones(2))
        >>> opt = optim.SGD([w], lr=0.1, momentum=0.9)
        >>> w.grad = tp.ones(2)
        >>> opt.step()
        >>> sd = opt.state_dict()
        >>> list(sd["state"][0]), sd["param_groups"][0]["params"]
        (['momentum_buffer'], [0])
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = [index.setdefault(id(p), len(index)) for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: dict(s) for p, s in self.state.items() if id(p) in index}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Take the state and group options of ``state_dict`` (from ``state_dict()``
        of an optimizer over parameters of the same shapes, in the same order).

        Everything is checked before anything changes: the groups' options as
        the constructor checks them, and each parameter's state against what
        this optimizer keeps (its entries, their shapes and dtypes); an empty
        state means none (it is made at the next step). Tensors that already
        exist are written in place (``copy_``, ``fill_``): the state's, and a
        tensor option such as a tensor ``lr``, so that a captured ``step()``
        reads the loaded values. New state tensors are copies, in the dtype the
        optimizer keeps; a number (a step count) becomes a tensor.

        Examples
        --------
        >>> import tensorplay as tp
        >>> import tensorplay.nn as nn
        >>> import tensorplay.optim as optim
        >>> lr = tp.tensor([0.1])
        >>> opt = optim.SGD([nn.Parameter(tp.ones(2))], lr=lr)
        >>> sd = opt.state_dict()
        >>> opt.load_state_dict({"state": {}, "param_groups": [{**sd["param_groups"][0], "lr": 0.5}]})
        >>> opt.param_groups[0]["lr"] is lr, lr.tolist()
        (True, [0.5])
        """
        by_index, options = self._check_loaded(state_dict)
        with no_grad():
            loaded = {id(by_index[i]) for i, entries in state_dict["state"].items() if entries}
            for p in [p for p in self.state if id(p) not in loaded]:
                del self.state[p]
            for index, entries in state_dict["state"].items():
                if entries:
                    p = by_index[index]
                    layout, current = self._state_layout(p), self.state.setdefault(p, {})
                    for key, value in entries.items():
                        current[key] = _loaded_entry(current.get(key), value, *layout[key])
            for group, taken in zip(self.param_groups, options, strict=True):
                for key, value in taken.items():
                    group[key] = _loaded_option(group.get(key), value)

    def _check_loaded(self, state_dict: Any) -> tuple[dict[int, Tensor], list[dict[str, Any]]]:
        """(the parameters by their index in ``state_dict``, each group's loaded
        options as checked), or ValueError/TypeError with a sentence."""
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError("expected a dict with 'state' and 'param_groups', as Optimizer.state_dict() returns")
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups):
            raise ValueError(
                f"the loaded state has {len(saved)} parameter groups, this optimizer has {len(self.param_groups)}"
            )
        by_index: dict[int, Tensor] = {}
        options = []
        for i, (group, saved_group) in enumerate(zip(self.param_groups, saved, strict=True)):
            if not isinstance(saved_group, dict) or "params" not in saved_group:
                raise ValueError(f"expected parameter group {i} of the loaded state as a dict with 'params'")
            if len(group["params"]) != len(saved_group["params"]):
                raise ValueError(
                    f"parameter group {i} has {len(saved_group['params'])} parameters in the loaded state, "
                    f"{len(group['params'])} in this optimizer"
                )
            by_index.update(zip(saved_group["params"], group["params"], strict=True))
            merged = {**group, **saved_group, "params": group["params"]}
            try:
                self._check_options(merged)
            except (TypeError, ValueError) as e:
                raise type(e)(f"parameter group {i} of the loaded state: {e}") from None
            options.append({key: merged[key] for key in saved_group if key != "params"})
        for index, entries in state_dict["state"].items():
            if index not in by_index:
                raise ValueError(f"the loaded state has an entry for parameter {index}, which no group lists")
            self._check_state(index, by_index[index], entries)
        return by_index, options

    def _state_layout(self, p: Tensor) -> dict[str, tuple[tuple[int, ...], DType]]:
        """The (shape, dtype) of each state entry this optimizer keeps for ``p``."""
        return {key: (p.shape, p.dtype) for key in self._PARAM_SHAPED}

    def _check_state(self, index: int, p: Tensor, entries: Any) -> None:
        """ValueError/TypeError with a sentence unless the loaded ``entries`` of
        parameter ``index`` are empty or are those of ``_state_layout(p)``, each
        a tensor of its shape, of floats (a number or a tensor of integers is
        taken for a 0-d entry too)."""
        if not isinstance(entries, dict):
            raise TypeError(f"expected a dict as the loaded state of parameter {index}, got {type(entries).__name__}")
        if not entries:
            return
        layout, name = self._state_layout(p), type(self).__name__
        keeps = ", ".join(map(repr, layout)) or "nothing"
        for key in entries:
            if key not in layout:
                raise ValueError(
                    f"the loaded state of parameter {index} has {key!r}, which {name} does not keep "
                    f"(it keeps {keeps}); load a state dict saved by a {name}"
                )
        for key in layout:
            if key not in entries:
                raise ValueError(
                    f"the loaded state of parameter {index} lacks {key!r}; {name} keeps {keeps} for each "
                    "parameter, or nothing before its first step"
                )
        for key, value in entries.items():
            _check_entry(f"the loaded state {key!r} of parameter {index}", value, *layout[key])

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {group[k]}" for k in sorted(group) if k != "params"]
        return "\n".join(lines) + "\n)"


def is_real(value: Any) -> bool:
    """Whether ``value`` is a real number (Python's or NumPy's), not a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _check_entry(where: str, value: Any, shape: tuple[int, ...], dtype: DType) -> None:
    """``value`` can be kept as a state entry of ``shape`` and ``dtype``; else a sentence."""
    if isinstance(value, Tensor):
        if value.shape != shape:
            raise ValueError(f"{where} has shape {value.shape}, expected shape {shape}")
        if not (value.dtype.is_floating_point or (value.dtype.kind == "i" and shape == ())):
            wanted = "a number or a tensor of integers or floats" if shape == () else "a floating point tensor"
            raise TypeError(f"{where} has dtype {value.dtype.name}, expected {wanted} (it is kept as {dtype.name})")
    elif not (shape == () and is_real(value)):
        wanted = "a number or a 0-d tensor" if shape == () else f"a tensor of shape {shape}"
        raise TypeError(f"{where} is a {type(value).__name__}, expected {wanted}")


def _loaded_entry(current: Any, value: Any, shape: tuple[int, ...], dtype: DType) -> Tensor:
    """A checked state entry as kept: written into the tensor there is (which a
    captured step reads), else a new tensor of ``dtype``."""
    if isinstance(current, Tensor) and current.shape == shape and current.dtype is dtype:
        if value is current:
            return current
        return current.copy_(value) if isinstance(value, Tensor) else current.fill_(float(value))
    if isinstance(value, Tensor):
        return value.detach().to(dtype, copy=True)
    return full(shape, float(value), dtype=dtype)


def _loaded_option(current: Any, value: Any) -> Any:
    """A checked group option as kept: written into the tensor the group holds
    (a tensor lr, which a captured step reads), else taken (tensors copied)."""
    if isinstance(current, Tensor) and value is not current:
        if isinstance(value, Tensor) and value.numel() == current.numel():
            return current.copy_(value.reshape(current.shape))
        if is_real(value):
            return current.fill_(float(value))
    return value.detach().clone() if isinstance(value, Tensor) and value is not current else value
