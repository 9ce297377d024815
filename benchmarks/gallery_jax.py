"""The gallery's entries in JAX: each the same algorithm as ``examples/gallery/``,
its loop a ``lax.while_loop`` under ``jit``, in float64.

Run as a script in its own process, since XLA reads ``XLA_FLAGS`` once, when
JAX starts (``benchmarks/gallery.py`` runs it with XLA's defaults and with
command buffers for WHILE and CONDITIONAL)::

    python benchmarks/gallery_jax.py ENTRY IN.npz OUT.npz

reads the problem from IN.npz, writes the answer to OUT.npz and prints one JSON
line: {"seconds": best of three solves, "steps": the loop's passes}.
"""

from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

CX = np.array([0, 1, 0, -1, 0, 1, -1, -1, 1])
CY = np.array([0, 0, 1, 0, -1, 1, 1, -1, -1])
W = np.array([4 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 36, 1 / 36, 1 / 36, 1 / 36])
OPPOSITE = np.array([0, 3, 4, 1, 2, 7, 8, 5, 6])


def cg(a: dict):
    """CG on the 5-point Poisson matrix, matrix-free, to ‖r‖ <= tol ‖b‖."""
    b, stop, cap = jnp.asarray(a["b"]), float(a["stop"]), int(a["max_iters"])

    def apply(p):
        q = jnp.pad(p, 1)
        return 4 * p - q[:-2, 1:-1] - q[2:, 1:-1] - q[1:-1, :-2] - q[1:-1, 2:]

    def body(s):
        x, r, p, rr, k = s
        q = apply(p)
        alpha = rr / jnp.vdot(p, q)
        x, r = x + alpha * p, r - alpha * q
        rr_new = jnp.vdot(r, r)
        return x, r, r + (rr_new / rr) * p, rr_new, k + 1

    @jax.jit
    def solve(b):
        s = (jnp.zeros_like(b), b, b, jnp.vdot(b, b), 0)
        return lax.while_loop(lambda s: (s[3] > stop) & (s[4] < cap), body, s)

    return solve, (b,), lambda out: ({"x": out[0]}, out[4])


def cavity(a: dict):
    """Lattice Boltzmann D2Q9 (BGK) in a lid-driven cavity: ``check`` steps a
    pass, until the velocity changes by at most ``tol`` or ``max_steps``."""
    f0, omega, speed = jnp.asarray(a["f"]), float(a["omega"]), float(a["lid_speed"])
    check, tol, cap = int(a["check"]), float(a["tol"]), int(a["max_steps"])
    n = f0.shape[1]
    walls, lids = [], []
    for i in range(9):  # the nodes whose upstream neighbour is a wall, and the lid
        wall = np.zeros((n, n), bool)
        if CX[i] == 1:
            wall[:, 0] = True
        if CX[i] == -1:
            wall[:, -1] = True
        if CY[i] == 1:
            wall[0, :] = True
        top = np.zeros((n, n), bool)
        if CY[i] == -1:
            top[-1, :] = True
        walls.append(wall & ~top)
        lids.append(top)
    walls, lids = jnp.asarray(np.array(walls)), jnp.asarray(np.array(lids))
    kick = jnp.asarray(6.0 * W * CX * speed)[:, None, None]  # off the moving lid
    c, w = jnp.asarray(np.stack([CX, CY]).astype(float)), jnp.asarray(W)[:, None, None]

    def velocity(f):
        return jnp.einsum("ci,iyx->cyx", c, f) / f.sum(axis=0)

    def step(_, f):
        pulled = jnp.stack([jnp.roll(f[i], (CY[i], CX[i]), axis=(0, 1)) for i in range(9)])
        bounced = f[OPPOSITE]
        g = jnp.where(walls, bounced, jnp.where(lids, bounced + kick, pulled))
        rho = g.sum(axis=0)
        u = jnp.einsum("ci,iyx->cyx", c, g) / rho
        cu = jnp.einsum("ci,cyx->iyx", c, u)
        feq = w * rho * (1 + 3 * cu + 4.5 * cu**2 - 1.5 * (u**2).sum(axis=0))
        return g + omega * (feq - g)

    def body(s):
        f, u, steps, _ = s
        f = lax.fori_loop(0, check, step, f)
        new = velocity(f)
        return f, new, steps + check, jnp.abs(new - u).max()

    @jax.jit
    def solve(f):
        s = (f, jnp.zeros((2, n, n)), 0, jnp.inf)
        return lax.while_loop(lambda s: (s[3] > tol) & (s[2] < cap), body, s)

    return solve, (f0,), lambda out: ({"u": out[1] / speed}, out[2])


def ising(a: dict):
    """Checkerboard Metropolis at several temperatures; <|m|>, <m^2>, <m^4> after the burn-in."""
    spins, beta = jnp.asarray(a["spins"]), jnp.asarray(a["beta"])[:, None, None]
    sweeps, burn_in, seed = int(a["sweeps"]), int(a["burn_in"]), int(a["seed"])
    side = spins.shape[1]
    checker = (np.arange(side)[:, None] + np.arange(side)[None, :]) % 2
    colours = jnp.asarray(np.stack([checker == 0, checker == 1]))
    key = jax.random.PRNGKey(seed)

    def half(s, colour, k):
        near = jnp.roll(s, 1, 1) + jnp.roll(s, -1, 1) + jnp.roll(s, 1, 2) + jnp.roll(s, -1, 2)
        u = jax.random.uniform(jax.random.fold_in(key, 2 * k + colour), s.shape, jnp.float64)
        return jnp.where((u < jnp.exp(-2.0 * beta * s * near)) & colours[colour], -s, s)

    def body(state):
        s, moments, k = state
        s = half(half(s, 0, k), 1, k)
        m = jnp.abs(s.sum(axis=(1, 2))) / side**2 * (k >= burn_in)
        return s, moments + jnp.stack([m, m**2, m**4], axis=1), k + 1

    @jax.jit
    def solve(s):
        return lax.while_loop(lambda st: st[2] < sweeps, body, (s, jnp.zeros((s.shape[0], 3)), 0))

    return solve, (spins,), lambda out: ({"moments": out[1] / (sweeps - burn_in)}, out[2])


def nbody(a: dict):
    """Leapfrog, all pairs as one broadcast, ``steps`` steps."""
    m, x, v = jnp.asarray(a["m"]), jnp.asarray(a["x"]), jnp.asarray(a["v"])
    dt, eps2, steps = float(a["dt"]), float(a["eps2"]), int(a["steps"])
    n = m.shape[0]
    others = jnp.asarray(1.0 - np.eye(n))

    def accel(x):
        d = x[:, None, :] - x[:, :, None]  # d[:, i, j] = x_j - x_i
        r2 = (d * d).sum(axis=0) + eps2
        return (d * (m[None, None, :] * others / (r2 * jnp.sqrt(r2) + (1.0 - others)))).sum(axis=2)

    def body(s):
        x, v, a, k = s
        v = v + 0.5 * dt * a
        x = x + dt * v
        a = accel(x)
        return x, v + 0.5 * dt * a, a, k + 1

    @jax.jit
    def solve(x, v):
        return lax.while_loop(lambda s: s[3] < steps, body, (x, v, accel(x), 0))

    return solve, (x, v), lambda out: ({"x": out[0], "v": out[1]}, out[3])


def dopri(a: dict):
    """Dormand-Prince 5(4) on an ensemble in one step size, SciPy's RK45 control;
    ``lax.cond`` accepts or rejects each attempt."""
    y0, p = jnp.asarray(a["y0"]), jnp.asarray(a["p"])
    first, rtol, atol, t_end, lorenz = (float(a[k]) for k in ("first_step", "rtol", "atol", "t_end", "lorenz"))
    c_, a_, b_, e_ = (np.asarray(a[k]) for k in ("C", "A", "B", "E"))

    def rhs(y):
        if lorenz:
            return jnp.stack([10.0 * (y[:, 1] - y[:, 0]), y[:, 0] * (p[:, 0] - y[:, 2]) - y[:, 1],
                              y[:, 0] * y[:, 1] - 8.0 / 3.0 * y[:, 2]], axis=1)  # fmt: skip
        return jnp.stack([y[:, 1], p[:, 0] * (1.0 - y[:, 0] ** 2) * y[:, 1] - y[:, 0]], axis=1)

    def body(s):
        y, f, t, h_abs, rejected_last, accepted, rejected = s
        t_new = jnp.minimum(t + h_abs, t_end)
        h = t_new - t
        k = [f]
        for stage in range(1, 6):
            k.append(rhs(y + h * sum(a_[stage, j] * k[j] for j in range(stage))))
        y_new = y + h * sum(b_[j] * k[j] for j in range(6))
        f_new = rhs(y_new)
        k.append(f_new)
        scale = atol + jnp.maximum(jnp.abs(y), jnp.abs(y_new)) * rtol
        err = jnp.sqrt(jnp.mean((h * sum(e_[j] * k[j] for j in range(7)) / scale) ** 2))

        def take(_):
            factor = jnp.where(err == 0.0, 10.0, jnp.minimum(10.0, 0.9 * err**-0.2))
            factor = jnp.where(rejected_last, jnp.minimum(1.0, factor), factor)
            return y_new, f_new, t_new, h * factor, False, accepted + 1, rejected

        def refuse(_):
            return y, f, t, h * jnp.maximum(0.2, 0.9 * err**-0.2), True, accepted, rejected + 1

        return lax.cond(err < 1.0, take, refuse, None)

    @jax.jit
    def solve(y):
        s = (y, rhs(y), 0.0, first, False, 0, 0)
        return lax.while_loop(lambda s: s[2] < t_end, body, s)

    return (
        solve, (y0,),
        lambda out: ({"y": out[0], "counts": jnp.array([out[5], out[6]])}, out[5] + out[6]),
    )  # fmt: skip


def transport(a: dict):
    """Event-based Monte Carlo in a slab (rod model): each pass ``lax.switch``
    runs the event with the longer queue over the particles waiting for it."""
    n, length, c, seed = int(a["particles"]), float(a["length"]), float(a["c"]), int(a["seed"])
    key = jax.random.PRNGKey(seed)

    def flight(s):
        x, mu, event, tallies, k = s
        u = jax.random.uniform(jax.random.fold_in(key, k), (n,), jnp.float64)
        to = x - mu * jnp.log(1.0 - u)
        flying = event == 0
        out, back = flying & (to >= length), flying & (to < 0.0)
        hit = flying & ~out & ~back
        event = jnp.where(out | back, 2, jnp.where(hit, 1, event))
        return jnp.where(hit, to, x), mu, event, tallies + jnp.array([out.sum(), back.sum(), 0]), k + 1

    def collide(s):
        x, mu, event, tallies, k = s
        u = jax.random.uniform(jax.random.fold_in(key, k), (n,), jnp.float64)
        here = event == 1
        again, gone = here & (u < c), here & (u >= c)
        mu = jnp.where(again, jnp.where(u < 0.5 * c, 1.0, -1.0), mu)
        event = jnp.where(gone, 2, jnp.where(again, 0, event))
        return x, mu, event, tallies + jnp.array([0, 0, gone.sum()]), k + 1

    def body(s):
        flights, collisions = (s[2] == 0).sum(), (s[2] == 1).sum()
        return lax.switch(jnp.where(flights >= collisions, 0, 1), [flight, collide], s)

    @jax.jit
    def solve(x):
        s = (x, jnp.ones(n), jnp.zeros(n, jnp.int32), jnp.zeros(3, jnp.int64), 0)
        return lax.while_loop(lambda s: (s[2] != 2).any(), body, s)

    return solve, (jnp.zeros(n),), lambda out: ({"tallies": out[3]}, out[4])


ENTRIES = {"cg": cg, "cavity": cavity, "ising": ising, "nbody": nbody, "dopri": dopri, "transport": transport}


def main() -> None:
    entry, source, target = sys.argv[1], sys.argv[2], sys.argv[3]
    solve, args, answer = ENTRIES[entry](dict(np.load(source)))
    out = solve(*args)
    jax.block_until_ready(out)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        out = solve(*args)
        jax.block_until_ready(out)
        best = min(best, time.perf_counter() - t0)
    arrays, steps = answer(out)
    np.savez(target, **{k: np.asarray(v) for k, v in arrays.items()})
    print(json.dumps({"seconds": best, "steps": int(steps)}))


if __name__ == "__main__":
    main()
