"""``Adam``: adaptive moment estimation, with the step count on the device."""

from __future__ import annotations

from collections.abc import Iterable

from .. import _dtype as dt
from .._factories import zeros, zeros_like
from .optimizer import Optimizer, check_lr, check_number, scalar_lr

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
    ) -> None:
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    def _check_options(self, group: dict) -> None:
        check_lr(group["lr"])
        betas = group["betas"]
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"expected betas as a pair (beta1, beta2), got {betas!r}")
        group["betas"] = tuple(betas)
        check_number("beta1", betas[0], below_one=True)
        check_number("beta2", betas[1], below_one=True)
        check_number("eps", group["eps"])
        check_number("weight_decay", group["weight_decay"])

    def _update_group(self, group: dict) -> None:
        lr, (beta1, beta2) = scalar_lr(group["lr"]), group["betas"]
        eps, weight_decay = group["eps"], group["weight_decay"]
        for p in group["params"]:
            g = p.grad
            if g is None:
                continue
            state = self.state.get(p)
            if not state:
                step_dtype = dt.float64 if p.dtype is dt.float64 else dt.float32
                state = self.state[p] = {
                    "step": zeros((), dtype=step_dtype),  # 0-d: it broadcasts against 0-d parameters too
                    "exp_avg": zeros_like(p),
                    "exp_avg_sq": zeros_like(p),
                }
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
