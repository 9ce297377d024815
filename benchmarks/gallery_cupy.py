"""The gallery's entries in CuPy: the same algorithms as ``examples/gallery/`` as
a CuPy user writes them, array ops with the loop on the host (a convergence
test reads a scalar back, which waits for the device), in float64.

Every function takes the array module first: ``cupy`` in the benchmark,
``numpy`` in the tests, which check the algorithms on the host. Each returns
(answer, steps). ``cg_graph`` replays one iteration captured as a CuPy graph.
"""

from __future__ import annotations

import math

import numpy as np

CX = (0, 1, 0, -1, 0, 1, -1, -1, 1)
CY = (0, 0, 1, 0, -1, 1, 1, -1, -1)
W = (4 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 36, 1 / 36, 1 / 36, 1 / 36)
OPPOSITE = (0, 3, 4, 1, 2, 7, 8, 5, 6)


def _apply(xp, p):
    q = xp.pad(p, 1)
    return 4 * p - q[:-2, 1:-1] - q[2:, 1:-1] - q[1:-1, :-2] - q[1:-1, 2:]


def cg(xp, b, stop: float, cap: int):
    """CG on the 5-point Poisson matrix, matrix-free; r·r read back every iteration."""
    x, r = xp.zeros_like(b), b.copy()
    p, rr, k = r.copy(), float(xp.vdot(r, r)), 0
    while rr > stop and k < cap:
        q = _apply(xp, p)
        alpha = rr / xp.vdot(p, q)
        x += alpha * p
        r -= alpha * q
        rr_new = float(xp.vdot(r, r))
        p = r + (rr_new / rr) * p
        rr, k = rr_new, k + 1
    return {"x": x}, k


def cg_iteration(xp, x, r, p, rr, rr_new) -> None:
    """One CG iteration in place, its scalars in one-element arrays (what a graph can replay)."""
    q = _apply(xp, p)
    alpha = rr / (p * q).sum()
    x += alpha * p
    r -= alpha * q
    rr_new[...] = (r * r).sum()
    p *= rr_new / rr
    p += r
    rr[...] = rr_new


def cg_graph(cp, b, stop: float, cap: int):
    """The same, one iteration captured as a CuPy graph (temporaries from a
    stream-ordered pool) and replayed, r·r read back after each replay. The
    dot products inside the capture are CuPy's own reductions: ``vdot`` goes
    through cuBLAS, whose calls CuPy does not support during a capture (its
    issue #6290). The iteration runs once on copies before the capture, so
    that every kernel is compiled and loaded outside it (with ``vdot``
    alone, and without that warm-up, the capture failed on the H100 and the
    H200 with cudaErrorInvalidValue)."""
    stream = cp.cuda.Stream(non_blocking=True)
    x, r, p = cp.zeros_like(b), b.copy(), b.copy()
    rr, rr_new = cp.vdot(b, b).reshape(1), cp.zeros(1)
    with cp.cuda.using_allocator(cp.cuda.MemoryAsyncPool().malloc), stream:
        cg_iteration(cp, *[a.copy() for a in (x, r, p, rr, rr_new)])  # the warm-up
        stream.synchronize()
        stream.begin_capture()
        cg_iteration(cp, x, r, p, rr, rr_new)
        graph = stream.end_capture()
    k = 0
    with stream:  # the read-back waits for the replays on this stream
        while float(rr[0]) > stop and k < cap:
            graph.launch(stream)
            k += 1
    return {"x": x}, k


def cavity(xp, f, omega: float, speed: float, steps: int):
    """Lattice Boltzmann D2Q9 (BGK), ``steps`` steps from ``f``; the velocity / U at the end."""
    n = f.shape[1]
    wall, top = np.zeros((9, n, n), bool), np.zeros((9, n, n), bool)
    for i in range(9):
        if CX[i] == 1:
            wall[i, :, 0] = True
        if CX[i] == -1:
            wall[i, :, -1] = True
        if CY[i] == 1:
            wall[i, 0, :] = True
        if CY[i] == -1:
            top[i, -1, :] = True
    wall, top = xp.asarray(wall & ~top), xp.asarray(top)
    kick = xp.asarray(6.0 * np.array(W) * np.array(CX) * speed)[:, None, None]
    c, w = xp.asarray(np.array([CX, CY], dtype=float)), xp.asarray(np.array(W))[:, None, None]
    for _ in range(steps):
        pulled = xp.stack([xp.roll(f[i], (CY[i], CX[i]), axis=(0, 1)) for i in range(9)])
        bounced = f[list(OPPOSITE)]
        g = xp.where(wall, bounced, xp.where(top, bounced + kick, pulled))
        rho = g.sum(axis=0)
        u = xp.einsum("ci,iyx->cyx", c, g) / rho
        cu = xp.einsum("ci,cyx->iyx", c, u)
        feq = w * rho * (1 + 3 * cu + 4.5 * cu**2 - 1.5 * (u**2).sum(axis=0))
        f = g + omega * (feq - g)
    return {"u": xp.einsum("ci,iyx->cyx", c, f) / f.sum(axis=0) / speed}, steps


def ising(xp, spins, beta, sweeps: int, burn_in: int, seed: int):
    """Checkerboard Metropolis; the moments of |m| after the burn-in, kept on the device."""
    side = spins.shape[1]
    checker = (np.arange(side)[:, None] + np.arange(side)[None, :]) % 2
    colours = [xp.asarray(checker == k) for k in (0, 1)]
    beta = xp.asarray(beta)[:, None, None]
    rng = xp.random.RandomState(seed) if hasattr(xp.random, "RandomState") else xp.random.default_rng(seed)
    moments = xp.zeros((spins.shape[0], 3))
    s = spins.astype(xp.float64)
    for k in range(sweeps):
        for colour in (0, 1):
            near = xp.roll(s, 1, 1) + xp.roll(s, -1, 1) + xp.roll(s, 1, 2) + xp.roll(s, -1, 2)
            flip = (rng.random_sample(s.shape) < xp.exp(-2.0 * beta * s * near)) & colours[colour]
            s = xp.where(flip, -s, s)
        if k >= burn_in:
            m = xp.abs(s.sum(axis=(1, 2))) / side**2
            moments += xp.stack([m, m**2, m**4], axis=1)
    return {"moments": moments / (sweeps - burn_in)}, sweeps


def nbody(xp, m, x, v, dt: float, eps2: float, steps: int):
    """Leapfrog, all pairs as one broadcast."""
    others = 1.0 - xp.eye(m.shape[0])

    def accel(x):
        d = x[:, None, :] - x[:, :, None]
        r2 = (d * d).sum(axis=0) + eps2
        return (d * (m[None, None, :] * others / (r2 * xp.sqrt(r2) + (1.0 - others)))).sum(axis=2)

    a = accel(x)
    for _ in range(steps):
        v = v + 0.5 * dt * a
        x = x + dt * v
        a = accel(x)
        v = v + 0.5 * dt * a
    return {"x": x, "v": v}, steps


def dopri(xp, lorenz: bool, y0, p, first: float, rtol: float, atol: float, t_end: float, C, A, B, E):
    """Dormand-Prince 5(4), SciPy's RK45 control, the error norm read back at every attempt."""

    def rhs(y):
        if lorenz:
            return xp.stack([10.0 * (y[:, 1] - y[:, 0]), y[:, 0] * (p[:, 0] - y[:, 2]) - y[:, 1],
                             y[:, 0] * y[:, 1] - 8.0 / 3.0 * y[:, 2]], axis=1)  # fmt: skip
        return xp.stack([y[:, 1], p[:, 0] * (1.0 - y[:, 0] ** 2) * y[:, 1] - y[:, 0]], axis=1)

    y, t, h_abs, rejected_last, accepted, rejected = y0.copy(), 0.0, first, False, 0, 0
    f = rhs(y)
    while t < t_end:
        t_new = min(t + h_abs, t_end)
        h = t_new - t
        k = [f]
        for stage in range(1, 6):
            k.append(rhs(y + h * sum(float(A[stage, j]) * k[j] for j in range(stage))))
        y_new = y + h * sum(float(B[j]) * k[j] for j in range(6))
        f_new = rhs(y_new)
        k.append(f_new)
        scale = atol + xp.maximum(xp.abs(y), xp.abs(y_new)) * rtol
        err = float(xp.sqrt(xp.mean((h * sum(float(E[j]) * k[j] for j in range(7)) / scale) ** 2)))
        if err < 1.0:
            factor = 10.0 if err == 0.0 else min(10.0, 0.9 * err**-0.2)
            h_abs = h * (min(1.0, factor) if rejected_last else factor)
            y, f, t, rejected_last, accepted = y_new, f_new, t_new, False, accepted + 1
        else:
            h_abs, rejected_last, rejected = h * max(0.2, 0.9 * err**-0.2), True, rejected + 1
    return {"y": y, "counts": np.array([accepted, rejected])}, accepted + rejected


def transport(xp, n: int, length: float, c: float, seed: int):
    """Event-based Monte Carlo in a slab (rod model); the queues read back at every pass."""
    rng = xp.random.RandomState(seed) if hasattr(xp.random, "RandomState") else xp.random.default_rng(seed)
    x, mu, event = xp.zeros(n), xp.ones(n), xp.zeros(n, dtype=xp.int32)
    tallies, passes = np.zeros(3, np.int64), 0
    while True:
        flights, collisions = int((event == 0).sum()), int((event == 1).sum())
        if flights + collisions == 0:
            break
        u = rng.random_sample(n)
        passes += 1
        if flights >= collisions:
            to = x - mu * xp.log(1.0 - u)
            flying = event == 0
            out, back = flying & (to >= length), flying & (to < 0.0)
            hit = flying & ~out & ~back
            x = xp.where(hit, to, x)
            event = xp.where(out | back, 2, xp.where(hit, 1, event))
            tallies[:2] += [int(out.sum()), int(back.sum())]
        else:
            here = event == 1
            again, gone = here & (u < c), here & (u >= c)
            mu = xp.where(again, xp.where(u < 0.5 * c, 1.0, -1.0), mu)
            event = xp.where(gone, 2, xp.where(again, 0, event))
            tallies[2] += int(gone.sum())
    return {"tallies": tallies}, passes


def rod_model(length: float, c: float) -> tuple[float, float, float]:
    """The exact (transmitted, reflected, absorbed) shares (see examples/gallery/transport.py)."""
    k, a, b = math.sqrt(1.0 - c), 1.0 - c / 2, c / 2
    den = k * math.cosh(k * length) + a * math.sinh(k * length)
    return k / den, b * math.sinh(k * length) / den, 1.0 - (k + b * math.sinh(k * length)) / den
