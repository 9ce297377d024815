"""``SGD``: stochastic gradient descent with momentum, dampening, Nesterov and
weight decay, as in PyTorch."""

from __future__ import annotations

from collections.abc import Iterable

from .. import _dtype as dt
from .._tensor import Tensor
from ._fused import fusable, launch_fused, lr_prologue
from .optimizer import Optimizer, check_lr, check_number, scalar_lr

__all__ = ["SGD"]


class SGD(Optimizer):
    """Stochastic gradient descent.

    For each parameter ``p`` with gradient ``g`` (PyTorch's formulation)::

        g = g + weight_decay * p
        buf = g                                   # first step
        buf = momentum * buf + (1 - dampening) * g  # later steps
        g = g + momentum * buf if nesterov else buf   # with momentum
        p = p - lr * g

    Parameters
    ----------
    params : iterable of Tensor or of dict
        Parameters, or parameter groups (see ``Optimizer``).
    lr : float or Tensor
        Learning rate (a one-element tensor is read at each captured replay).
    momentum, dampening, weight_decay : float, default 0
    nesterov : bool, default False
        Needs ``momentum > 0`` and ``dampening == 0``.
    foreach : bool or None, default None
        None or True: update a group's parameters in one launch where they
        allow it (see ``tensorplay.optim._fused``); False: tensor ops per parameter.

    Notes
    -----
    The momentum buffer is made at a parameter's first step (a copy of its
    gradient): warm up with a few eager steps before capturing ``step()``.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> import tensorplay.optim as optim
    >>> w = nn.Parameter(tp.tensor([1.0, -2.0]))
    >>> opt = optim.SGD([w], lr=0.1)
    >>> loss = (w * w).sum()
    >>> loss.backward()
    >>> opt.step()
    >>> [round(v, 4) for v in w.tolist()]
    [0.8, -1.6]
    """

    _PARAM_SHAPED = ("momentum_buffer",)

    def __init__(
        self,
        params: Iterable,
        lr: float,
        momentum: float = 0.0,
        dampening: float = 0.0,
        weight_decay: float = 0.0,
        nesterov: bool = False,
        foreach: bool | None = None,
    ) -> None:
        defaults = dict(
            lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay, nesterov=nesterov, foreach=foreach
        )
        super().__init__(params, defaults)

    def _check_options(self, group: dict) -> None:
        group["lr"] = check_lr(group["lr"])
        for name in ("momentum", "dampening", "weight_decay"):
            group[name] = check_number(name, group[name])
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError(
                f"Nesterov momentum needs momentum > 0 and dampening = 0, "
                f"got momentum={group['momentum']} and dampening={group['dampening']}"
            )

    def _keeps_state(self, group: dict) -> bool:
        return bool(group["momentum"])

    def _update_group(self, group: dict) -> None:
        params = fusable(group, bfloat16=not isinstance(group["lr"], Tensor))
        if params is not None and (not group["momentum"] or all(p in self.state for p in params)):
            self._fused_update(group, params)  # the momentum buffers exist: they are made at a first step
            return
        lr, momentum, dampening = scalar_lr(group["lr"]), group["momentum"], group["dampening"]
        weight_decay, nesterov = group["weight_decay"], group["nesterov"]
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            if weight_decay:
                g = g + p * weight_decay
            if momentum:
                state = self.state.setdefault(p, {})
                buf = state.get("momentum_buffer")
                if buf is None:
                    buf = state["momentum_buffer"] = g.detach().clone()
                else:
                    buf.mul_(momentum)
                    buf.add_(g if dampening == 0 else g * (1.0 - dampening))
                g = g + buf * momentum if nesterov else buf
            p.sub_(g * lr)

    def _fused_update(self, group: dict, params: list) -> None:
        """The loop of ``_update_group`` as one launch (the same operations,
        for bfloat16 each rounded where its tensor op rounds: ``r(...)``)."""
        momentum, nesterov = group["momentum"], group["nesterov"]
        prologue, lr = lr_prologue(group["lr"], params[0].dtype)
        r = (lambda value: f"r({value})") if params[0].dtype is dt.bfloat16 else (lambda value: value)
        loop = ["d = {g}[j]"]
        if group["weight_decay"]:
            loop.append(f"d = {r('d + ' + r('{p}[j] * weight_decay'))}")
        if momentum:
            loop.append(f"b = {r('{b}[j] * momentum')}")
            loop.append(f"b = {r('b + d' if group['dampening'] == 0 else 'b + ' + r('d * undamped'))}")
            loop.append("{b}[j] = b")
            loop.append(f"d = {r('d + ' + r('b * momentum'))}" if nesterov else "d = b")
        loop.append(f"{{p}}[j] = {{p}}[j] - {r('d * lr_v')}")  # rounded as it is stored
        roles = ("p", "g", "b") if momentum else ("p", "g")
        rows = [(p, p.grad, self.state[p]["momentum_buffer"]) if momentum else (p, p.grad) for p in params]
        scalars = {
            "lr": lr,
            "weight_decay": group["weight_decay"],
            "momentum": momentum,
            "undamped": 1.0 - group["dampening"],
        }
        launch_fused("sgd", rows, roles, scalars, prologue, "", "\n".join(loop))
