"""``Optimizer``: parameter groups, per-parameter state and its state dict.

Subclasses write one method, ``_update_group(group)``, which ``step()`` calls
for each group under ``no_grad``. Updates must stay on the device (in-place
tensor ops, no ``.item()``, no ``bool(tensor)``): then a ``step()`` never waits
for the GPU and can be captured in a CUDA graph and replayed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .._tensor import Tensor
from ..autograd import enable_grad, no_grad
from ..autograd._engine import clear_grads
from ..runtime.streams import is_current_stream_capturing

__all__ = ["Optimizer"]


def check_lr(lr: Any) -> None:
    """A learning rate is a number >= 0 or a one-element floating point tensor
    (which a captured ``step()`` reads at each replay: a schedule can change it)."""
    if isinstance(lr, Tensor):
        if lr.numel() != 1 or not lr.dtype.is_floating_point:
            raise ValueError(
                f"expected a one-element floating point tensor as lr, got shape {lr.shape} of {lr.dtype.name}"
            )
        return
    check_number("lr", lr)


def scalar_lr(lr: Any) -> Any:
    """``lr`` as the update uses it: a number, or a tensor lr seen as 0-d, which
    broadcasts against parameters of every shape (0-d ones included)."""
    return lr.reshape(()) if isinstance(lr, Tensor) else lr


def check_number(name: str, value: Any, below_one: bool = False) -> None:
    """ValueError unless ``value`` is a real number >= 0 (and < 1 if ``below_one``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"expected a number as {name}, got {type(value).__name__}")
    if not 0.0 <= value < (1.0 if below_one else float("inf")):
        raise ValueError(f"expected {name} in [0, {'1' if below_one else 'inf'}), got {value}")


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
        it was captured with (use a tensor ``lr`` to change it between replays).
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

        State tensors that already exist are written with ``copy_``, so a
        captured ``step()`` sees the loaded values; new ones are copies.
        """
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError("expected a dict with 'state' and 'param_groups', as Optimizer.state_dict() returns")
        saved = state_dict["param_groups"]
        if len(saved) != len(self.param_groups):
            raise ValueError(
                f"the loaded state has {len(saved)} parameter groups, this optimizer has {len(self.param_groups)}"
            )
        by_index: dict[int, Tensor] = {}
        for i, (group, saved_group) in enumerate(zip(self.param_groups, saved, strict=True)):
            if len(group["params"]) != len(saved_group["params"]):
                raise ValueError(
                    f"parameter group {i} has {len(saved_group['params'])} parameters in the loaded state, "
                    f"{len(group['params'])} in this optimizer"
                )
            by_index.update(zip(saved_group["params"], group["params"], strict=True))
        for index, entries in state_dict["state"].items():
            if index not in by_index:
                raise ValueError(f"the loaded state has an entry for parameter {index}, which no group lists")
            self._check_state(index, by_index[index], entries)
        with no_grad():
            loaded = {id(by_index[i]) for i in state_dict["state"]}
            for p in [p for p in self.state if id(p) not in loaded]:
                del self.state[p]
            for index, entries in state_dict["state"].items():
                p = by_index[index]
                current = self.state.setdefault(p, {})
                for key, value in entries.items():
                    current[key] = self._loaded(current.get(key), value, p if key in self._PARAM_SHAPED else None)
            for group, saved_group in zip(self.param_groups, saved, strict=True):
                for key, value in saved_group.items():
                    if key != "params":
                        group[key] = self._loaded(group.get(key), value, None)

    def _check_state(self, index: int, p: Tensor, entries: dict) -> None:
        current = self.state.get(p, {})
        for key, value in entries.items():
            if not isinstance(value, Tensor):
                continue
            want = p.shape if key in self._PARAM_SHAPED else getattr(current.get(key), "shape", value.shape)
            if value.shape != want:
                raise ValueError(
                    f"the loaded state {key!r} of parameter {index} has shape {value.shape}, expected shape {want}"
                )

    @staticmethod
    def _loaded(current: Any, value: Any, like: Tensor | None) -> Any:
        if not isinstance(value, Tensor):
            return value
        if isinstance(current, Tensor) and current.shape == value.shape:
            return current.copy_(value)
        return value.detach().to(like.dtype if like is not None else value.dtype, copy=True)

    def __repr__(self) -> str:
        lines = [f"{type(self).__name__} ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            lines += [f"    {k}: {group[k]}" for k in sorted(group) if k != "params"]
        return "\n".join(lines) + "\n)"
