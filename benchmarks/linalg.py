"""tp.linalg beside torch.linalg, in the same process: ``linalg.solve float64
4096`` (a 4096 x 4096 system, one right-hand side: LU and its solves, in
GFLOP/s of 2/3 n^3 + 2 n^2) and ``linalg.eigh float64 2048`` (eigenvalues and
eigenvectors of a symmetric 2048 x 2048 matrix, in decompositions per
second). Both libraries check the factorisation's ``info`` on the host at
each call, as an eager call must, so the figures are eager calls, host
included; each row names tensorplay's path (``tp.backends.linalg``'s
explain, here ``_linalg_choice.LINALG``).

Every timed result is first checked in float64 on the host: the solve by its
residual ||A x - b|| / (||A|| ||x||), the eigendecomposition by
||A V - V diag(w)|| / ||A|| and ||V^T V - I||.
"""

from __future__ import annotations

from functools import partial

import numpy as np

import tensorplay as tp
from benchmarks.common import checked_figure, on_gpu, peer, torch_events, tp_events
from benchmarks.targets import at_least
from tensorplay._linalg_choice import LINALG

TOL = 1e-11  # float64, residuals relative to the matrix's norm


def _path(text: str) -> str:
    """The path from ``explain``: what follows the shape and dtype."""
    return text.split(": ", 1)[1]


def _problem(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, n)) + np.sqrt(n) * np.eye(n), rng.standard_normal(n)


def solve(rows: list, progress) -> None:
    """GFLOP/s of ``linalg.solve(A, b)``, A n x n float64, b one vector."""
    n = 4096 if on_gpu() else 16
    row = {"name": f"linalg.solve float64 {n}", "unit": "GFLOP/s", "lower_is_better": False}
    a, b = _problem(n, 0)
    norm_a = np.linalg.norm(a)
    err_of = lambda x: float(np.linalg.norm(a @ x - b) / (norm_a * np.linalg.norm(x)))  # noqa: E731
    gflops = lambda ms: (2.0 / 3.0 * n**3 + 2.0 * n**2) / 1e9 / (ms / 1e3)  # noqa: E731
    ta, tb = tp.tensor(a), tp.tensor(b)
    fn = partial(tp.linalg.solve, ta, tb)
    checked_figure(row, "tensorplay", fn, tp.Tensor.numpy, err_of, TOL, tp_events(), tp.cuda.synchronize, gflops)
    del ta, tb, fn
    tp.cuda.empty_cache()
    progress.step(f"linalg.solve {n} tensorplay")
    torch = peer("torch")
    if torch is not None:
        fn = partial(torch.linalg.solve, torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda())
        to_host = lambda t: t.cpu().numpy()  # noqa: E731
        checked_figure(row, "torch", fn, to_host, err_of, TOL, torch_events(torch), torch.cuda.synchronize, gflops)
        del fn
        torch.cuda.empty_cache()
    progress.step(f"linalg.solve {n} torch")
    at_least(row, 0.9, note=f"; tensorplay: {_path(LINALG.explain('solve', (n, n), 'float64'))}")
    rows.append(row)


def eigh(rows: list, progress) -> None:
    """Decompositions per second of ``linalg.eigh(A)``, A n x n symmetric float64."""
    n = 2048 if on_gpu() else 12
    row = {"name": f"linalg.eigh float64 {n}", "unit": "1/s", "lower_is_better": False}
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, n))
    a = (x + x.T) / 2
    norm_a = np.linalg.norm(a)

    def err_of(result) -> float:
        w, v = result
        return max(
            float(np.linalg.norm(a @ v - v * w) / norm_a),
            float(np.linalg.norm(v.T @ v - np.eye(n)) / np.sqrt(n)),
        )

    per_second = lambda ms: 1e3 / ms  # noqa: E731
    ta = tp.tensor(a)
    fn = partial(tp.linalg.eigh, ta)
    to_host = lambda r: (r[0].numpy(), r[1].numpy())  # noqa: E731
    checked_figure(row, "tensorplay", fn, to_host, err_of, TOL, tp_events(), tp.cuda.synchronize, per_second)
    del ta, fn
    tp.cuda.empty_cache()
    progress.step(f"linalg.eigh {n} tensorplay")
    torch = peer("torch")
    if torch is not None:
        fn = partial(torch.linalg.eigh, torch.from_numpy(a).cuda())
        to_host = lambda r: (r[0].cpu().numpy(), r[1].cpu().numpy())  # noqa: E731
        checked_figure(row, "torch", fn, to_host, err_of, TOL, torch_events(torch), torch.cuda.synchronize, per_second)
        del fn
        torch.cuda.empty_cache()
    progress.step(f"linalg.eigh {n} torch")
    at_least(row, 0.9, note=f"; tensorplay: {_path(LINALG.explain('eigh', (n, n), 'float64'))}")
    rows.append(row)


SECTIONS = [(solve, 2), (eigh, 2)]
