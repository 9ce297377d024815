"""Gravitational N-body dynamics, all pairs, leapfrog, every step inside one CUDA graph.

Bodies attract each other with Newton's law (G = 1), softened by ε
(the force of a mass m at distance r is m r / (r² + ε²)^(3/2)), integrated in
float64 by leapfrog (kick, drift, kick): three kernels a step,
``half_kick_drift``, ``pulls`` and ``gather_kick``. The pulling bodies are cut
into pieces (``pieces_for``), so that a few thousand bodies still give every SM
of the GPU work: ``pulls`` sums each piece's pull on every body in a block of
its own, one tile of the piece at a time through shared memory, and
``gather_kick`` adds the pieces' sums and kicks. The simulator runs the same
sums without tiles unless ``--shared-tiles`` (a kernel with shared memory costs
a Python thread per CUDA thread there). A while node runs the steps: a fixed number of
them for a cluster, and for a pair of bodies until the pair has come round
``--orbits`` times, which a one-thread kernel watches on the device (the
relative position crossing the x axis, the time interpolated in the step).

Validated against physics nobody here wrote: a Plummer sphere's total energy
after 10 000 steps within 1e-5 of its start (leapfrog conserves it up to a
bounded error), computed on the host in float64 from the positions and
velocities; the accelerations at the start against a NumPy direct sum; and an
eccentric orbit's period (e = 0.5) against Kepler's third law,
P = 2π sqrt(a³ / (G M)), within 1e-6. At ``--quick`` sizes: 16 bodies for a
few steps against NumPy's leapfrog, and a coarse orbit against Kepler within 1 %.

The ops-only version (``--only ops``) is the same step as tensor ops under
``tp.compile``: the pair separations coordinate by coordinate as broadcasts
(N x N each), the pulls summed along rows, which the compiler makes one kernel
with three reductions that stores nothing N x N.

    python examples/gallery/nbody.py [--quick] [--n 4096] [--steps 10000] [--only kernel ops] [--plot]
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

import tensorplay as tp  # before numba.cuda: tensorplay chooses the GPU or the simulator for it

# isort: split
from charts import Series, chart
from numba import cuda, float64
from validation import Validation, backend_line, parser, pictures_folder, timed, timing_note

TILE = 64 if tp.cuda.backend() == "cuda" else 8
VERSIONS = ["kernel", "ops"]
ECCENTRICITY = 0.5


@dataclass
class Bodies:
    """Masses [n], positions and velocities [3, n] (float64), softening ε."""

    m: np.ndarray
    x: np.ndarray
    v: np.ndarray
    eps: float

    def energy(self, x: np.ndarray, v: np.ndarray) -> float:
        """Kinetic plus potential energy, in float64 on the host (rows of pairs at a time)."""
        kinetic = 0.5 * float(np.sum(self.m * (v * v).sum(axis=0)))
        potential, n = 0.0, self.m.size
        for start in range(0, n, 512):
            rows = slice(start, min(n, start + 512))
            d = x[:, None, :] - x[:, rows, None]  # [3, rows, n]
            r = np.sqrt((d * d).sum(axis=0) + self.eps**2)
            r[np.arange(r.shape[0]), np.arange(rows.start, rows.stop)] = np.inf  # no body pulls itself
            potential -= 0.5 * float(np.sum(self.m[rows, None] * self.m[None, :] / r))
        return kinetic + potential

    def accelerations(self, x: np.ndarray) -> np.ndarray:
        """The direct sum in float64 on the host, [3, n]."""
        d = x[:, None, :] - x[:, :, None]  # d[:, i, j] = x_j - x_i
        r2 = (d * d).sum(axis=0) + self.eps**2
        np.fill_diagonal(r2, np.inf)
        return (d * (self.m[None, None, :] / (r2 * np.sqrt(r2)))).sum(axis=2)


def plummer(n: int, eps: float, seed: int = 1) -> Bodies:
    """A Plummer sphere in N-body units (G = M = 1, E = -1/4), sampled as Aarseth,
    Hénon & Wielen (1974) do, at rest on its centre of mass."""
    rng = np.random.default_rng(seed)
    m = np.full(n, 1.0 / n)
    r = 1.0 / np.sqrt(rng.uniform(0, 1, n) ** (-2.0 / 3.0) - 1.0)

    def isotropic(length):
        z, phi = rng.uniform(-1, 1, n), rng.uniform(0, 2 * np.pi, n)
        s = np.sqrt(1 - z * z)
        return np.stack([length * s * np.cos(phi), length * s * np.sin(phi), length * z])

    x = isotropic(r)
    q = np.empty(n)
    k = 0
    while k < n:  # von Neumann rejection for the speed's share of the escape speed
        a, b = rng.uniform(0, 1, 2)
        if 0.1 * b < a * a * (1 - a * a) ** 3.5:
            q[k], k = a, k + 1
    v = isotropic(q * np.sqrt(2.0) * (1 + r * r) ** -0.25)
    x -= (m * x).sum(axis=1, keepdims=True)
    v -= (m * v).sum(axis=1, keepdims=True)
    scale = 3 * np.pi / 16
    return Bodies(m, x * scale, v / np.sqrt(scale), eps)


def kepler_pair() -> tuple[Bodies, float]:
    """Masses 1 and 1/2 on an orbit of semi-major axis 1 and eccentricity 0.5,
    at periapsis on the x axis, on their centre of mass; and the period Kepler's
    third law gives."""
    m = np.array([1.0, 0.5])
    total, a, e = m.sum(), 1.0, ECCENTRICITY
    r = np.array([a * (1 - e), 0.0, 0.0])
    u = np.array([0.0, math.sqrt(total * (1 + e) / (a * (1 - e))), 0.0])
    x = np.stack([-m[1] / total * r, m[0] / total * r], axis=1)
    v = np.stack([-m[1] / total * u, m[0] / total * u], axis=1)
    return Bodies(m, x, v, 0.0), 2 * math.pi * math.sqrt(a**3 / total)


# -- the kernels ------------------------------------------------------------------------------


@tp.jit
def half_kick_drift(x, v, a, half_dt, dt):
    """v += a dt/2, then x += v dt."""
    i = tp.cuda.grid(1)
    if i < x.shape[1]:
        for c in range(3):
            v[c, i] += a[c, i] * half_dt
            x[c, i] += v[c, i] * dt


def pieces_for(n: int) -> int:
    """Pieces the bodies that pull are cut into, one row of blocks each, so that
    a launch has about ``2**16`` threads (a few waves of every SM of a GPU)
    however few bodies there are, each piece at least a tile."""
    return max(1, min(n // TILE, (1 << 16) // max(n, 1)))


@tp.jit
def pulls_tiled(x, m, part, eps2):
    """``part[s, :, i]``: the pull on body i of the bodies of piece s (the
    block's row, ``blockIdx.y``), one tile of them at a time through shared
    memory (every thread of the block loads one)."""
    sx = cuda.shared.array(TILE, float64)
    sy = cuda.shared.array(TILE, float64)
    sz = cuda.shared.array(TILE, float64)
    sm = cuda.shared.array(TILE, float64)
    i, t, s = tp.cuda.grid(1), cuda.threadIdx.x, cuda.blockIdx.y
    n = m.size
    per = (n + cuda.gridDim.y - 1) // cuda.gridDim.y
    first, end = s * per, min(n, s * per + per)
    mine = i < n
    xi = x[0, i] if mine else 0.0
    yi = x[1, i] if mine else 0.0
    zi = x[2, i] if mine else 0.0
    ax, ay, az = 0.0, 0.0, 0.0
    for start in range(first, end, TILE):
        j = start + t
        if j < end:
            sx[t], sy[t], sz[t], sm[t] = x[0, j], x[1, j], x[2, j], m[j]
        cuda.syncthreads()
        for k in range(min(TILE, end - start)):
            if start + k != i:
                dx, dy, dz = sx[k] - xi, sy[k] - yi, sz[k] - zi
                r2 = dx * dx + dy * dy + dz * dz + eps2
                w = sm[k] / (r2 * math.sqrt(r2))
                ax += dx * w
                ay += dy * w
                az += dz * w
        cuda.syncthreads()
    if mine:
        part[s, 0, i], part[s, 1, i], part[s, 2, i] = ax, ay, az


@tp.jit
def pulls_direct(x, m, part, eps2):
    """The same sums in the same order, read from global memory: the simulator's."""
    i, s = tp.cuda.grid(1), cuda.blockIdx.y
    n = m.size
    per = (n + cuda.gridDim.y - 1) // cuda.gridDim.y
    if i < n:
        xi, yi, zi = x[0, i], x[1, i], x[2, i]
        ax, ay, az = 0.0, 0.0, 0.0
        for j in range(s * per, min(n, s * per + per)):
            if j != i:
                dx, dy, dz = x[0, j] - xi, x[1, j] - yi, x[2, j] - zi
                r2 = dx * dx + dy * dy + dz * dz + eps2
                w = m[j] / (r2 * math.sqrt(r2))
                ax += dx * w
                ay += dy * w
                az += dz * w
        part[s, 0, i], part[s, 1, i], part[s, 2, i] = ax, ay, az


pulls = pulls_tiled if tp.cuda.backend() == "cuda" else pulls_direct


@tp.jit
def gather_kick(part, a, v, half_dt):
    """a = the pieces' pulls summed; then v += a dt/2."""
    i = tp.cuda.grid(1)
    if i < a.shape[1]:
        for c in range(3):
            total = 0.0
            for s in range(part.shape[0]):
                total += part[s, c, i]
            a[c, i] = total
            v[c, i] += total * half_dt


@tp.jit
def watch_orbit(x, clock, crossings, dt, loop):
    """After a step of a pair: when body 1 has crossed the positive x axis of
    body 0 going up, the time it did (interpolated in the step) is the next of
    ``crossings``; the loop goes on until all are found. ``clock`` holds the
    time, the last relative y and the crossings found."""
    if tp.cuda.grid(1) == 0:
        t = clock[0] + dt
        rx, ry = x[0, 1] - x[0, 0], x[1, 1] - x[1, 0]
        before, found = clock[1], int(clock[2])
        if before < 0.0 and ry >= 0.0 and rx > 0.0 and found < crossings.size:
            crossings[found] = t - dt + dt * (-before) / (ry - before)
            found += 1
        clock[0], clock[1], clock[2] = t, ry, found
        tp.cuda.set_conditional(loop, np.uint32(1 if found < crossings.size else 0))


class KernelNBody:
    """Leapfrog with the kernels above, on the device from ``bodies``."""

    def __init__(self, bodies: Bodies, dt: float) -> None:
        self.bodies, self.dt = bodies, dt
        n = bodies.m.size
        self.m = tp.tensor(bodies.m)
        self.x, self.v, self.a = (tp.zeros(3, n, dtype=tp.float64) for _ in range(3))
        self.blocks = (n + TILE - 1) // TILE
        self.part = tp.zeros(pieces_for(n), 3, n, dtype=tp.float64)

    def accelerate_kick(self, half_dt: float) -> None:
        """a = the pull of every other body (each piece's, then their sum); then v += a dt/2."""
        pulls[(self.blocks, self.part.shape[0]), TILE](self.x, self.m, self.part, self.bodies.eps**2)
        gather_kick[self.blocks, TILE](self.part, self.a, self.v, half_dt)

    def reset(self) -> None:
        """The bodies' start, and their accelerations (a first step with dt = 0)."""
        self.x.copy_(tp.tensor(self.bodies.x))
        self.v.copy_(tp.tensor(self.bodies.v))
        self.accelerate_kick(0.0)

    def step(self) -> None:
        half = 0.5 * self.dt
        half_kick_drift[self.blocks, TILE](self.x, self.v, self.a, half, self.dt)
        self.accelerate_kick(half)

    def steps_graph(self, steps: int) -> tp.cuda.CUDAGraph:
        """``steps`` steps in one while node (a flag that stays true, and a cap)."""
        self.go = tp.ones(1, dtype=tp.bool)  # held here: the graph reads it at every replay
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.while_(self.go, max_iters=steps):
                self.step()
        return g

    def orbits_graph(self, orbits: int) -> tuple[tp.cuda.CUDAGraph, tp.Tensor, tp.Tensor]:
        """Steps until body 1 has come round body 0 ``orbits`` times: the graph,
        the crossing times and the clock (zero them before each replay)."""
        crossings, clock = tp.zeros(orbits, dtype=tp.float64), tp.zeros(3, dtype=tp.float64)
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.while_(max_iters=1 << 40) as loop:
                self.step()
                watch_orbit[1, 1](self.x, clock, crossings, self.dt, loop)
        return g, crossings, clock

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        return self.x.numpy(), self.v.numpy()


# -- what a user writes first: tensor ops, tp.compile --------------------------------------------


def pulls_by_coordinate(x, m, eps2: float) -> list:
    """The pull of every other body on each of positions ``x`` [3, n], one
    coordinate at a time (three tensors [n]). The pair terms [n, n] die when it
    returns, before the compiler writes its kernel out: none is stored."""
    dx, dy, dz = (x[c][None, :] - x[c][:, None] for c in range(3))  # dx[i, j] = x_j - x_i
    r2 = dx * dx + dy * dy + dz * dz + eps2
    w = tp.where(r2 > 0.0, m[None, :] / (r2 * r2.sqrt()), 0.0)  # no body pulls itself when ε = 0
    return [(d * w).sum(dim=1) for d in (dx, dy, dz)]


def ops_step(x, v, a, m, dt: float, eps2: float):
    """One leapfrog step of positions ``x`` [3, n]."""
    v.add_(a * (0.5 * dt))
    x.add_(v * dt)
    for c, pull in enumerate(pulls_by_coordinate(x, m, eps2)):
        a[c].copy_(pull)
    v.add_(a * (0.5 * dt))


class OpsNBody:
    """The ops-only version: ``ops_step``, compiled, in a while node of ``steps`` passes."""

    def __init__(self, bodies: Bodies, dt: float) -> None:
        self.bodies, self.dt = bodies, dt
        n = bodies.m.size
        self.m = tp.tensor(bodies.m)
        self.x, self.v, self.a = (tp.zeros(3, n, dtype=tp.float64) for _ in range(3))
        self.step = tp.compile(ops_step)

    def reset(self) -> None:
        """The bodies' start, and their accelerations (a first step with dt = 0, eagerly)."""
        self.x.copy_(tp.tensor(self.bodies.x))
        self.v.copy_(tp.tensor(self.bodies.v))
        ops_step(self.x, self.v, self.a, self.m, 0.0, self.bodies.eps**2)

    def steps_graph(self, steps: int) -> tp.cuda.CUDAGraph:
        self.go = tp.ones(1, dtype=tp.bool)  # held here: the graph reads it at every replay
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.while_(self.go, max_iters=steps):
                self.step(self.x, self.v, self.a, self.m, self.dt, self.bodies.eps**2)
        return g

    def state(self) -> tuple[np.ndarray, np.ndarray]:
        return self.x.numpy(), self.v.numpy()


# -- references ---------------------------------------------------------------------------------


def numpy_leapfrog(bodies: Bodies, dt: float, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The same method on the host: (x, v) after ``steps`` steps."""
    x, v = bodies.x.copy(), bodies.v.copy()
    a = bodies.accelerations(x)
    for _ in range(steps):
        v += a * (0.5 * dt)
        x += v * dt
        a = bodies.accelerations(x)
        v += a * (0.5 * dt)
    return x, v


def numpy_orbit(bodies: Bodies, dt: float) -> float:
    """The first crossing time of the pair, by ``numpy_leapfrog``'s steps."""
    x, v = bodies.x.copy(), bodies.v.copy()
    a, t, before = bodies.accelerations(x), 0.0, 0.0
    while True:
        v += a * (0.5 * dt)
        x += v * dt
        a = bodies.accelerations(x)
        v += a * (0.5 * dt)
        t += dt
        rx, ry = x[0, 1] - x[0, 0], x[1, 1] - x[1, 0]
        if before < 0.0 <= ry and rx > 0.0:
            return t - dt + dt * (-before) / (ry - before)
        before = ry


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--n", type=int, help="bodies in the cluster (default 4096, ops-only 1024; --quick: 16)")
    p.add_argument("--steps", type=int, help="steps of the cluster (default 10000; --quick: 6)")
    p.add_argument("--dt", type=float, default=1e-3, help="the cluster's time step (N-body units)")
    p.add_argument("--eps", type=float, default=0.01, help="the softening length")
    p.add_argument("--per-orbit", type=int, help="steps per orbit of the pair (default 40000; --quick: 200)")
    p.add_argument("--orbits", type=int, help="orbits of the pair (default 3; --quick: 1; 0: no pair)")
    p.add_argument("--only", nargs="+", choices=VERSIONS, default=VERSIONS, help="the versions to run (default: all)")
    p.add_argument("--shared-tiles", action="store_true", help="on the simulator too, the GPU's tiled kernel (slow)")
    args = p.parse_args()
    if args.shared_tiles:
        global pulls
        pulls = pulls_tiled  # the steps read it when they first run
    quick = args.quick
    steps = args.steps or (6 if quick else 10_000)
    folder = pictures_folder(args)
    print(backend_line("gravitational N-body, all pairs, leapfrog, float64"))
    validation = Validation("N-body leapfrog against energy conservation, NumPy and Kepler")
    for name in args.only:
        n = args.n or (16 if quick else 4096 if name == "kernel" else 1024)
        bodies = plummer(n, args.eps)
        sim = KernelNBody(bodies, args.dt) if name == "kernel" else OpsNBody(bodies, args.dt)
        g = sim.steps_graph(steps)
        sim.reset()
        a0 = sim.a.numpy()
        want = bodies.accelerations(bodies.x)
        validation.at_most(f"{name}: accelerations at the start against NumPy's (max, relative)",
                           np.abs(a0 - want).max() / np.abs(want).max(), 1e-12)  # fmt: skip
        seconds = timed(g.replay)
        x, v = sim.state()
        e0, e1 = bodies.energy(bodies.x, bodies.v), bodies.energy(x, v)
        drift = abs(e1 / e0 - 1)
        print(f"\n{name}: {n} bodies, {steps} steps of {args.dt:g}, ε = {args.eps:g}: "
              f"{seconds / steps * 1e6:.1f} us/step, energy {e0:.9f} -> {e1:.9f}")  # fmt: skip
        validation.at_most(f"{name}: energy drift over {steps} steps (relative)", drift, 1e-5)
        if quick:
            x_ref, v_ref = numpy_leapfrog(bodies, args.dt, steps)
            diff = max(np.abs(x - x_ref).max(), np.abs(v - v_ref).max())
            validation.at_most(f"{name}: positions and velocities against NumPy's leapfrog (max)", diff, 1e-12)
        if name == "kernel" and args.orbits != 0:
            _orbit(args, validation, folder)
    note = timing_note()
    if note:
        print(note)
    print()
    return validation.report()


def _orbit(args, validation: Validation, folder) -> None:
    pair, period = kepler_pair()
    per_orbit, orbits = args.per_orbit or (200 if args.quick else 40_000), args.orbits or (1 if args.quick else 3)
    sim = KernelNBody(pair, period / per_orbit)
    g, crossings, clock = sim.orbits_graph(orbits)
    sim.reset()
    crossings.zero_()
    clock.zero_()
    seconds = timed(g.replay)
    times = crossings.numpy()
    measured = times[-1] / orbits
    steps = int(round(clock[0].item() / sim.dt))
    print(f"\nkernel: a pair on an orbit of e = {ECCENTRICITY}, {per_orbit} steps an orbit, {orbits} orbits "
          f"({steps} steps, {seconds / steps * 1e6:.1f} us/step)")  # fmt: skip
    print(f"  period {measured:.9f}, Kepler's third law {period:.9f}")
    tol = 1e-2 if args.quick else 1e-6
    validation.at_most(
        "kernel: the pair's period against Kepler's third law (relative)", abs(measured / period - 1), tol
    )
    if args.quick:
        first = numpy_orbit(pair, sim.dt)
        validation.at_most("kernel: the pair's first crossing against NumPy's leapfrog", abs(times[0] - first), 1e-12)
    if folder is not None:
        coarse = KernelNBody(pair, period / 400)  # a picture of one orbit: a point per step of a coarse run
        coarse.reset()
        xs, ys = [], []
        for _ in range(400):
            coarse.step()
            r = coarse.x.numpy()
            xs.append(r[0, 1] - r[0, 0])
            ys.append(r[1, 1] - r[1, 0])
        path = chart(
            folder / "nbody_orbit.svg", [Series("body 1 seen from body 0", xs, ys)], "the pair's orbit", "x", "y"
        )
        print(f"  picture: {path}")


if __name__ == "__main__":
    sys.exit(main())
