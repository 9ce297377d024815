"""Gradients checked against central finite differences, in float64.

``check_gradients(fn, *arrays, eps=1e-6, rtol=1e-5, atol=1e-7)`` makes float64
tensors that require grad from ``arrays`` (NumPy), runs ``fn`` on them, and
compares ``tp.autograd.grad`` of a random weighting of the output with finite
differences of the same weighting: one evaluation of ``fn`` per element and
sign, so keep the arrays to a few elements on the simulator.
"""

from __future__ import annotations

import numpy as np

import tensorplay as tp

__all__ = ["check_gradients"]


def check_gradients(fn, *arrays, eps: float = 1e-6, rtol: float = 1e-5, atol: float = 1e-7) -> None:
    arrays = [np.asarray(a, dtype=np.float64) for a in arrays]
    inputs = [tp.tensor(a).requires_grad_() for a in arrays]
    out = fn(*inputs)
    weights = np.random.default_rng(7).uniform(0.5, 1.5, out.shape)

    def objective(values) -> float:
        with tp.no_grad():
            y = fn(*[tp.tensor(v) for v in values]).numpy()
        return float((y.astype(np.float64) * weights).sum())

    analytic = tp.autograd.grad((out * tp.tensor(weights)).sum(), inputs, allow_unused=True)
    for i, a in enumerate(arrays):
        numeric = np.zeros_like(a)
        for j in np.ndindex(a.shape):
            up = [v.copy() for v in arrays]
            down = [v.copy() for v in arrays]
            up[i][j] += eps
            down[i][j] -= eps
            numeric[j] = (objective(up) - objective(down)) / (2 * eps)
        got = np.zeros_like(a) if analytic[i] is None else analytic[i].numpy()
        np.testing.assert_allclose(got, numeric, rtol=rtol, atol=atol, err_msg=f"gradient of input {i}")
