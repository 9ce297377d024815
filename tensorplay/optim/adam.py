"""``Adam``: adaptive moment estimation, with the step count on the device."""

from __future__ import annotations

from collections.abc import Iterable

from .. import _dtype as dt
from .._factories import zeros, zeros_like
from ._fused import fusable, launch_fused, lr_prologue
from .optimizer import Optimizer, check_lr, check_number, is_real, scalar_lr

__all__ = ["Adam"]


class Adam(Optimizer):
    """Adam (Kingma & Ba), as PyTorch computes it.

    For each parameter ``p`` with gradient ``g``, at step ``t`` (from 1)::

        g = g + weight_decay * p              # L2 penalty (not AdamW)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        p = p - lr / (1 - beta1 ** t) * m / (sqrt(v) / sqrt(1 - beta2 ** t) + eps)

    The step count ``t`` is a one-element tensor in the state and the bias
    corrections are computed from it on the device, so a captured ``step()``
    replayed N times equals N eager steps, and no step reads anything back.

    Parameters
    ----------
    params : iterable of Tensor or of dict
        Parameters, or parameter groups (see ``Optimizer``).
    lr : float or Tensor, default 1e-3
    betas : (float, float), default (0.9, 0.999)
        Decay rates of the moment estimates, each in [0, 1).
    eps : float, default 1e-8
    weight_decay : float, default 0
    foreach : bool or None, default None
        None or True: update a group's parameters in two launches (the step
        counts, then the rest) where they allow it (see
        ``tensorplay.optim._fused``); False: tensor ops per parameter.

    Notes
    -----
    The state (``step``, ``exp_avg``, ``exp_avg_sq``) is made at a parameter's
    first step: warm up with a few eager steps before capturing ``step()``.
    ``step`` has the parameter's dtype (float32 for float16 parameters).

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn as nn
    >>> import tensorplay.optim as optim
    >>> w = nn.Parameter(tp.tensor([1.0, -2.0]))
    >>> opt = optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()  # the first step moves each weight by lr against its gradient's sign
    >>> [round(v, 4) for v in w.tolist()]
    [0.9, -1.9]
    """

    _PARAM_SHAPED = ("exp_avg", "exp_avg_sq")

    def __init__(
        self,
        params: Iterable,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        foreach: bool | None = None,
    ) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, foreach=foreach))

    def _check_options(self, group: dict) -> None:
        group["lr"] = check_lr(group["lr"])
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"expected betas as a pair (beta1, beta2), got {betas!r}")
        group["betas"] = (
            check_number("beta1", betas[0], below_one=True),
            check_number("beta2", betas[1], below_one=True),
        )
        group["eps"] = check_number("eps", group["eps"])
        group["weight_decay"] = check_number("weight_decay", group["weight_decay"])

    def _state_layout(self, p) -> dict:
        return {"step": ((), _step_dtype(p)), **super()._state_layout(p)}

    def _check_state(self, index: int, p, entries) -> None:
        super()._check_state(index, p, entries)
        step = entries.get("step")
        if is_real(step) and not (step >= 0 and float(step).is_integer()):
            raise ValueError(f"the loaded state 'step' of parameter {index} is {step}, expected a whole number >= 0")

    def _state_of(self, p) -> dict:
        """``p``'s state, made (zeros) at its first step."""
        state = self.state.get(p)
        if not state:
            state = self.state[p] = {
                "step": zeros((), dtype=_step_dtype(p)),  # 0-d: it broadcasts against 0-d parameters too
                "exp_avg": zeros_like(p),
                "exp_avg_sq": zeros_like(p),
            }
        return state

    def _update_group(self, group: dict) -> None:
        params = fusable(group)
        if params is not None:
            self._fused_update(group, params)
            return
        lr, (beta1, beta2) = scalar_lr(group["lr"]), group["betas"]
        eps, weight_decay = group["eps"], group["weight_decay"]
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            state = self._state_of(p)
            step, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
            step.add_(1.0)
            if weight_decay:
                g = g + p * weight_decay
            m.mul_(beta1)
            m.add_(g * (1.0 - beta1))
            v.mul_(beta2)
            v.add_(g * g * (1.0 - beta2))
            bias_correction1 = 1.0 - beta1**step  # tensors: computed on the device
            bias_correction2_sqrt = (1.0 - beta2**step).sqrt()
            denom = v.sqrt() / bias_correction2_sqrt + eps
            p.sub_(m / denom * (lr / bias_correction1))

    def _fused_update(self, group: dict, params: list) -> None:
        """The loop of ``_update_group`` as two launches (the same operations):
        the step counts first, as every block of the update reads them."""
        (beta1, beta2), dtype = group["betas"], params[0].dtype
        prologue, lr = lr_prologue(group["lr"], dtype)
        states = [self._state_of(p) for p in params]
        steps = [(s["step"],) for s in states]
        launch_fused("adam_steps", steps, ("s",), {}, "", "if start == 0: {s}[0] = {s}[0] + 1", "")
        head = "\n".join(
            [
                "step_v = {s}[0]",
                f"bc1 = one - {dtype.name}(beta1 ** step_v)",
                f"bc2s = sqrt(one - {dtype.name}(beta2 ** step_v))",
                "scale = lr_v / bc1",
            ]
        )
        loop = ["d = {g}[j]"]
        if group["weight_decay"]:
            loop.append("d = d + {p}[j] * weight_decay")
        loop += [
            "m = {m}[j] * beta1",
            "m = m + d * c1",
            "v = {v}[j] * beta2",
            "v = v + d * d * c2",
            "{m}[j] = m",
            "{v}[j] = v",
            "{p}[j] = {p}[j] - m / (sqrt(v) / bc2s + eps) * scale",
        ]
        rows = [(p, p.grad, s["exp_avg"], s["exp_avg_sq"], s["step"]) for p, s in zip(params, states, strict=True)]
        scalars = {
            "lr": lr,
            "beta1": beta1,
            "beta2": beta2,
            "c1": 1.0 - beta1,
            "c2": 1.0 - beta2,
            "eps": group["eps"],
            "weight_decay": group["weight_decay"],
            "one": 1.0,
        }
        launch_fused("adam", rows, ("p", "g", "m", "v", "s"), scalars, prologue, head, "\n".join(loop))


def _step_dtype(p) -> dt.DType:
    """The step count's dtype: the parameter's, float32 for narrower ones."""
    return dt.float64 if p.dtype is dt.float64 else dt.float32
