"""Lid-driven cavity flow by the lattice Boltzmann method (D2Q9, BGK), run to
steady state in one CUDA graph.

A square cavity of n x n lattice nodes, its walls halfway between the outer
nodes and the wall nodes (bounce-back), its lid moving at U = 0.1 lattice
units a step (the moving-wall bounce-back of Ladd), viscosity from the Reynolds
number, Re = U n / ν. One kernel per step streams (pulling each population
from its upstream neighbour, or bouncing it off a wall) and collides (BGK) in
float64. The whole run is one graph: a while node whose body is ``--check``
steps (two buffers, swapped), then the velocity field and, in a ``tp.compile``d
function, its largest change since the last pass; the loop stops once no
velocity changed by more than ``--tol`` U over those steps.

Validated against Ghia, Ghia & Shin (1982), Tables I and II: the horizontal
velocity along the vertical centreline and the vertical velocity along the
horizontal one, at Re = 100 and 1000, deviating by at most 0.02 U at each of
the paper's points (the profiles interpolated linearly between nodes; the
walls, at 0 and 1, are the paper's end points). At ``--quick`` sizes the
simulator cannot reach those Reynolds numbers on a fine enough grid: it checks
the same steps against an independent NumPy version of the method, and mass
conservation, instead.

The ops-only version (``--only ops``) is the same method as a user writes it with
tensor ops (``ops_step``: walls as ghost cells, streaming as shifted-slice
copies, the collision in a ``tp.compile``d function).

    python examples/gallery/cavity.py [--quick] [--re 100 1000] [--n 129] [--only kernel ops] [--plot] [--pictures DIR]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

import tensorplay as tp  # before numba.cuda: tensorplay chooses the GPU or the simulator for it

# isort: split
from charts import Series, chart, write_png
from validation import Validation, backend_line, parser, pictures_folder, timed, timing_note

U = 0.1  # the lid's speed, lattice units per step
CX = (0, 1, 0, -1, 0, 1, -1, -1, 1)  # D2Q9: rest, the four axes, the four diagonals
CY = (0, 0, 1, 0, -1, 1, 1, -1, -1)
W = (4 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 9, 1 / 36, 1 / 36, 1 / 36, 1 / 36)
OPPOSITE = (0, 3, 4, 1, 2, 7, 8, 5, 6)
VERSIONS = ["kernel", "ops"]
BLOCK = (32, 4) if tp.cuda.backend() == "cuda" else (8, 8)

# Ghia, U., Ghia, K. N. and Shin, C. T. (1982), "High-Re solutions for incompressible flow using the
# Navier-Stokes equations and a multigrid method", Journal of Computational Physics 48, 387-411.
# Table I: u / U along the vertical line through the cavity's centre (x = 0.5), at the heights y.
GHIA_Y = (1.0, 0.9766, 0.9688, 0.9609, 0.9531, 0.8516, 0.7344, 0.6172, 0.5,
          0.4531, 0.2813, 0.1719, 0.1016, 0.0703, 0.0625, 0.0547, 0.0)  # fmt: skip
GHIA_U = {
    100: (1.0, 0.84123, 0.78871, 0.73722, 0.68717, 0.23151, 0.00332, -0.13641, -0.20581,
          -0.21090, -0.15662, -0.10150, -0.06434, -0.04775, -0.04192, -0.03717, 0.0),
    1000: (1.0, 0.65928, 0.57492, 0.51117, 0.46604, 0.33304, 0.18719, 0.05702, -0.06080,
           -0.10648, -0.27805, -0.38289, -0.29730, -0.22220, -0.20196, -0.18109, 0.0),
}  # fmt: skip
# Table II: v / U along the horizontal line through the centre (y = 0.5), at the abscissae x.
GHIA_X = (1.0, 0.9688, 0.9609, 0.9531, 0.9453, 0.9063, 0.8594, 0.8047, 0.5,
          0.2344, 0.2266, 0.1563, 0.0938, 0.0781, 0.0703, 0.0625, 0.0)  # fmt: skip
GHIA_V = {
    100: (0.0, -0.05906, -0.07391, -0.08864, -0.10313, -0.16914, -0.22445, -0.24533, 0.05454,
          0.17527, 0.17507, 0.16077, 0.12317, 0.10890, 0.10091, 0.09233, 0.0),
    1000: (0.0, -0.21388, -0.27669, -0.33714, -0.39188, -0.51550, -0.42665, -0.31966, 0.02526,
           0.32235, 0.33075, 0.37095, 0.32627, 0.30353, 0.29012, 0.27485, 0.0),
}  # fmt: skip


@dataclass(frozen=True)
class Cavity:
    """n x n nodes at Reynolds number ``re``; the relaxation rate ω = 1 / τ, τ = 3ν + 1/2."""

    n: int
    re: float

    @property
    def omega(self) -> float:
        return 1.0 / (3.0 * U * self.n / self.re + 0.5)

    def at_rest(self) -> np.ndarray:
        """The populations of fluid at rest, density 1: f[i, y, x] = w_i."""
        return np.broadcast_to(np.array(W)[:, None, None], (9, self.n, self.n)).copy()


# -- the kernels ------------------------------------------------------------------------------


@tp.jit
def stream_collide(f, g, omega, lid):
    """One step: node (x, y) pulls each population from its upstream neighbour,
    or off the wall it hit (bounced back, plus ``lid`` = 6 w ρ U off the lid for
    the diagonals), and relaxes them towards equilibrium into ``g``."""
    x, y = tp.cuda.grid(2)
    n = f.shape[2]
    if x >= n or y >= n:
        return
    top, right = y == n - 1, x == n - 1
    f0 = f[0, y, x]
    f1 = f[1, y, x - 1] if x > 0 else f[3, y, x]
    f2 = f[2, y - 1, x] if y > 0 else f[4, y, x]
    f3 = f[3, y, x + 1] if not right else f[1, y, x]
    f4 = f[4, y + 1, x] if not top else f[2, y, x]
    f5 = f[5, y - 1, x - 1] if x > 0 and y > 0 else f[7, y, x]
    f6 = f[6, y - 1, x + 1] if not right and y > 0 else f[8, y, x]
    f7 = f[5, y, x] - lid if top else (f[5, y, x] if right else f[7, y + 1, x + 1])
    f8 = f[6, y, x] + lid if top else (f[6, y, x] if x == 0 else f[8, y + 1, x - 1])
    rho = f0 + f1 + f2 + f3 + f4 + f5 + f6 + f7 + f8
    ux = (f1 - f3 + f5 - f6 - f7 + f8) / rho
    uy = (f2 - f4 + f5 + f6 - f7 - f8) / rho
    base = 1.0 - 1.5 * (ux * ux + uy * uy)
    g[0, y, x] = f0 + omega * (4.0 / 9.0 * rho * base - f0)
    a = 1.0 / 9.0 * rho
    g[1, y, x] = f1 + omega * (a * (base + 3.0 * ux + 4.5 * ux * ux) - f1)
    g[2, y, x] = f2 + omega * (a * (base + 3.0 * uy + 4.5 * uy * uy) - f2)
    g[3, y, x] = f3 + omega * (a * (base - 3.0 * ux + 4.5 * ux * ux) - f3)
    g[4, y, x] = f4 + omega * (a * (base - 3.0 * uy + 4.5 * uy * uy) - f4)
    a = 1.0 / 36.0 * rho
    s, d = ux + uy, ux - uy
    g[5, y, x] = f5 + omega * (a * (base + 3.0 * s + 4.5 * s * s) - f5)
    g[6, y, x] = f6 + omega * (a * (base - 3.0 * d + 4.5 * d * d) - f6)
    g[7, y, x] = f7 + omega * (a * (base - 3.0 * s + 4.5 * s * s) - f7)
    g[8, y, x] = f8 + omega * (a * (base + 3.0 * d + 4.5 * d * d) - f8)


@tp.jit
def velocity(f, u):
    """u[0] and u[1]: the velocity at every node (the moments of the populations ``f`` hold)."""
    x, y = tp.cuda.grid(2)
    n = f.shape[2]
    if x < n and y < n:
        rho = 0.0
        for i in range(9):
            rho += f[i, y, x]
        u[0, y, x] = (f[1, y, x] - f[3, y, x] + f[5, y, x] - f[6, y, x] - f[7, y, x] + f[8, y, x]) / rho
        u[1, y, x] = (f[2, y, x] - f[4, y, x] + f[5, y, x] + f[6, y, x] - f[7, y, x] - f[8, y, x]) / rho


def settle(u, u_old, steps, go, check: int, tol: float, max_steps: int):
    """After ``check`` steps: the largest change of the velocity since the last
    pass, kept; ``go`` = it exceeds ``tol`` and the cap is not reached."""
    change = (u - u_old).abs().max()
    u_old.copy_(u)
    steps.add_(check)
    tp.logical_and(tp.gt(change, tol), tp.lt(steps, max_steps), out=go)
    return change


class KernelCavity:
    """The run as one graph: ``while (go) { check steps; velocity; settle }``."""

    def __init__(self, cavity: Cavity, check: int, tol: float, max_steps: int) -> None:
        if check < 2 or check % 2:
            raise ValueError(f"expected an even number of steps between checks, got {check}")
        self.cavity, self.check, self.max_steps = cavity, check, max_steps
        n = cavity.n
        self.f, self.g = tp.empty(9, n, n, dtype=tp.float64), tp.empty(9, n, n, dtype=tp.float64)
        self.u, self.u_old = tp.zeros(2, n, n, dtype=tp.float64), tp.zeros(2, n, n, dtype=tp.float64)
        self.steps, self.go = tp.zeros(1, dtype=tp.int64), tp.empty(1, dtype=tp.bool)
        self.grid = ((n + BLOCK[0] - 1) // BLOCK[0], (n + BLOCK[1] - 1) // BLOCK[1])
        self.settle = tp.compile(settle)
        self.graph = self._capture(tol * U)

    def reset(self) -> None:
        self.f.copy_(tp.tensor(self.cavity.at_rest()))
        self.u_old.zero_()
        self.steps.zero_()

    def _capture(self, tol: float) -> tp.cuda.CUDAGraph:
        omega, lid = self.cavity.omega, 6.0 * W[5] * U
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            self.go.fill_(True)
            with g.while_(self.go):
                for _ in range(self.check // 2):
                    stream_collide[self.grid, BLOCK](self.f, self.g, omega, lid)
                    stream_collide[self.grid, BLOCK](self.g, self.f, omega, lid)
                velocity[self.grid, BLOCK](self.f, self.u)
                self.change = self.settle(self.u, self.u_old, self.steps, self.go, self.check, tol, self.max_steps)
        return g

    def solve(self) -> None:
        self.reset()
        self.graph.replay()

    def result(self) -> tuple[np.ndarray, int, float]:
        """(u[2, y, x] / U, steps, the last pass's largest change / U)."""
        return self.u.numpy() / U, int(self.steps.item()), float(self.change.item()) / U

    def mass(self) -> float:
        return float(self.f.numpy().sum())


# -- what a user writes first: tensor ops, tp.compile --------------------------------------------


def collide(f, fp, rho, ux, uy, omega: float):
    """BGK on the populations ``f[:, 1:-1, 1:-1]`` (streamed), into the same
    place of ``fp``; ``rho``, ``ux``, ``uy`` are kept."""
    inner = f[:, 1:-1, 1:-1]
    rho.copy_(inner[0] + inner[1] + inner[2] + inner[3] + inner[4] + inner[5] + inner[6] + inner[7] + inner[8])
    ux.copy_((inner[1] - inner[3] + inner[5] - inner[6] - inner[7] + inner[8]) / rho)
    uy.copy_((inner[2] - inner[4] + inner[5] + inner[6] - inner[7] - inner[8]) / rho)
    base = 1.0 - 1.5 * (ux * ux + uy * uy)
    for i in range(9):
        cu = CX[i] * ux + CY[i] * uy
        feq = W[i] * rho * (base + 3.0 * cu + 4.5 * cu * cu)
        fp[i, 1:-1, 1:-1].copy_(inner[i] + omega * (feq - inner[i]))


def bounce(fp, lid: float):
    """Fill the ghost nodes of ``fp`` (post-collision, a ghost ring around the
    n x n nodes) so that streaming brings back each population that hit a wall:
    the opposite one, plus ``lid`` = 6 w ρ U off the moving lid. The lid comes
    last: it owns the top corners, as in ``stream_collide``."""
    m = fp.shape[1] - 1  # the ghost row and column at the far side
    for i in range(1, 9):
        o, cx, cy = OPPOSITE[i], CX[i], CY[i]
        if cx == 1:  # arrives from the left wall: the ghost column 0, rows shifted by cy
            fp[i, 1 - cy : m - cy, 0].copy_(fp[o, 1:m, 1])
        if cx == -1:
            fp[i, 1 - cy : m - cy, m].copy_(fp[o, 1:m, m - 1])
        if cy == 1:  # from the bottom wall
            fp[i, 0, 1 - cx : m - cx].copy_(fp[o, 1, 1:m])
    for i in (4, 7, 8):  # from the lid, moving in +x
        o, cx = OPPOSITE[i], CX[i]
        fp[i, m, 1 - cx : m - cx].copy_(fp[o, m - 1, 1:m] + cx * lid)


def stream(fp, f):
    """Every population one node along its direction: shifted-slice copies."""
    m = f.shape[1] - 1
    for i in range(9):
        f[i, 1:m, 1:m].copy_(fp[i, 1 - CY[i] : m - CY[i], 1 - CX[i] : m - CX[i]])


def ops_step(f, fp, rho, ux, uy, omega: float, lid: float):
    """One step: walls (ghost nodes), streaming, collision."""
    bounce(fp, lid)
    stream(fp, f)
    collide(f, fp, rho, ux, uy, omega)


class OpsCavity:
    """The ops-only version: ``fp`` (post-collision) with a ghost ring, the run
    one graph whose while node runs ``check`` compiled steps, then ``settle``."""

    def __init__(self, cavity: Cavity, check: int, tol: float, max_steps: int) -> None:
        self.cavity, self.check, self.max_steps = cavity, check, max_steps
        n = cavity.n
        self.fp, self.f = tp.zeros(9, n + 2, n + 2, dtype=tp.float64), tp.zeros(9, n + 2, n + 2, dtype=tp.float64)
        self.rho, self.ux, self.uy = (tp.zeros(n, n, dtype=tp.float64) for _ in range(3))
        self.u, self.u_old = tp.zeros(2, n, n, dtype=tp.float64), tp.zeros(2, n, n, dtype=tp.float64)
        self.steps, self.go = tp.zeros(1, dtype=tp.int64), tp.empty(1, dtype=tp.bool)
        self.step, self.settle = tp.compile(ops_step), tp.compile(settle)
        self.graph = self._capture(tol * U)

    def reset(self) -> None:
        self.fp.zero_()
        self.fp[:, 1:-1, 1:-1].copy_(tp.tensor(self.cavity.at_rest()))
        self.u_old.zero_()
        self.steps.zero_()

    def _capture(self, tol: float) -> tp.cuda.CUDAGraph:
        omega, lid = self.cavity.omega, 6.0 * W[5] * U
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            self.go.fill_(True)
            with g.while_(self.go):
                for _ in range(self.check):
                    self.step(self.f, self.fp, self.rho, self.ux, self.uy, omega, lid)
                self.u[0].copy_(self.ux)
                self.u[1].copy_(self.uy)
                self.change = self.settle(self.u, self.u_old, self.steps, self.go, self.check, tol, self.max_steps)
        return g

    def solve(self) -> None:
        self.reset()
        self.graph.replay()

    def result(self) -> tuple[np.ndarray, int, float]:
        return self.u.numpy() / U, int(self.steps.item()), float(self.change.item()) / U

    def mass(self) -> float:
        return float(self.fp.numpy()[:, 1:-1, 1:-1].sum())


# -- references ---------------------------------------------------------------------------------


def numpy_steps(cavity: Cavity, steps: int) -> np.ndarray:
    """The method in NumPy, another way round (push, then bounce-back at the
    walls), from rest: the populations after ``steps`` steps (pre-collision
    moments: u[2, y, x] / U)."""
    n, omega = cavity.n, cavity.omega
    c, w = np.array([CX, CY]), np.array(W)[:, None, None]
    f = cavity.at_rest()
    for _ in range(steps):
        streamed = np.empty_like(f)
        for i in range(9):
            streamed[i] = np.roll(f[i], (CY[i], CX[i]), axis=(0, 1))
            o = OPPOSITE[i]
            wall = np.zeros((n, n), bool)  # nodes whose upstream neighbour is a wall
            if CX[i] == 1:
                wall[:, 0] = True
            if CX[i] == -1:
                wall[:, -1] = True
            if CY[i] == 1:
                wall[0, :] = True
            lid = np.zeros((n, n), bool)
            if CY[i] == -1:
                lid[-1, :] = True
            streamed[i][wall] = f[o][wall]
            streamed[i][lid] = f[o][lid] + 6.0 * W[i] * CX[i] * U
        rho = streamed.sum(axis=0)
        u = np.einsum("ci,iyx->cyx", c, streamed) / rho
        cu = np.einsum("ci,cyx->iyx", c, u)
        feq = w * rho * (1 + 3 * cu + 4.5 * cu**2 - 1.5 * (u**2).sum(axis=0))
        f = streamed + omega * (feq - streamed)
    rho = f.sum(axis=0)
    return np.einsum("ci,iyx->cyx", c, f) / rho / U


def centrelines(u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(positions, u along x = 0.5, v along y = 0.5), walls included (0 and 1:
    the lid's u is 1), interpolated linearly across the centre."""
    n = u.shape[1]
    pos = (np.arange(n) + 0.5) / n
    mid = [np.interp(0.5, pos, row) for row in u[0]]  # u[0][y, :] at x = 0.5, for every y
    v_mid = [np.interp(0.5, pos, col) for col in u[1].T]  # v[:, x] at y = 0.5, for every x
    return np.concatenate([[0.0], pos, [1.0]]), np.array([0.0, *mid, 1.0]), np.array([0.0, *v_mid, 0.0])


def ghia_deviation(u: np.ndarray, re: int) -> tuple[float, float]:
    """The largest |u - Ghia| on Table I's points and |v - Ghia| on Table II's, in units of U."""
    pos, u_mid, v_mid = centrelines(u)
    du = np.interp(GHIA_Y, pos, u_mid) - np.array(GHIA_U[re])
    dv = np.interp(GHIA_X, pos, v_mid) - np.array(GHIA_V[re])
    return float(np.abs(du).max()), float(np.abs(dv).max())


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--re", type=int, nargs="+", help="Reynolds numbers (default 100 1000; --quick: 10)")
    p.add_argument("--n", type=int, help="nodes per side (default 129; --quick: 8)")
    p.add_argument("--check", type=int, help="steps between convergence checks (default 200; --quick: 8)")
    p.add_argument(
        "--tol",
        type=float,
        help="stop once no velocity changes more than this x U between checks (default 1e-9 per step)",
    )
    p.add_argument("--max-steps", type=int, help="the loop's cap (default 2000000; --quick: 3 checks)")
    p.add_argument("--only", nargs="+", choices=VERSIONS, default=VERSIONS, help="the versions to run (default: all)")
    args = p.parse_args()
    if not args.quick and set(args.re or ()) - set(GHIA_U):
        p.error(f"Ghia, Ghia & Shin's tables used here are for Re = 100 and 1000, got {args.re}")
    n, check = args.n or (8 if args.quick else 129), args.check or (8 if args.quick else 200)
    tol = args.tol or (1e-3 if args.quick else 1e-9 * check)
    cap = args.max_steps or (3 * check if args.quick else 2_000_000)
    folder = pictures_folder(args)
    print(backend_line(f"lid-driven cavity, lattice Boltzmann D2Q9 (BGK), float64, {n}x{n} nodes, lid speed {U}"))
    validation = Validation("lid-driven cavity against Ghia, Ghia & Shin (1982)")
    versions = [(name, {"kernel": KernelCavity, "ops": OpsCavity}[name]) for name in args.only]
    for re in args.re or ([10] if args.quick else [100, 1000]):
        cavity = Cavity(n, re)
        print(f"\nRe = {re}: ν = {U * n / re:.4g}, τ = {1 / cavity.omega:.4f}")
        fields = {}
        for name, make in versions:
            run = make(cavity, check, tol, cap)
            seconds = timed(run.solve)
            u, steps, change = run.result()
            fields[name] = u
            print(f"  {name}: {steps} steps, last change {change:.2g} U, {seconds / steps * 1e6:.1f} us/step")
            if args.quick:
                diff, mass = np.abs(u - numpy_steps(cavity, steps)).max(), abs(run.mass() / n**2 - 1)
                validation.at_most(f"Re {re} {name}: velocity / U against NumPy's after {steps} steps", diff, 1e-10)
                validation.at_most(f"Re {re} {name}: mass (the populations' sum) against n² (relative)", mass, 1e-12)
                continue
            validation.at_most(f"Re {re} {name}: converged, last change / (tol U)", change / tol, 1.0)
            du, dv = ghia_deviation(u, re)
            validation.at_most(f"Re {re} {name}: u on x = 0.5 against Ghia's Table I (max, / U)", du, 0.02)
            validation.at_most(f"Re {re} {name}: v on y = 0.5 against Ghia's Table II (max, / U)", dv, 0.02)
        if folder is not None:
            _draw(folder, re, next(iter(fields.values())))
    note = timing_note()
    if note:
        print(note)
    print()
    return validation.report()


def _draw(folder, re: int, u: np.ndarray) -> None:
    pos, u_mid, v_mid = centrelines(u)
    u_series, v_series = [Series("tensorplay", u_mid, pos)], [Series("tensorplay", pos, v_mid)]
    if re in GHIA_U:
        u_series.append(Series("Ghia et al. 1982", GHIA_U[re], GHIA_Y, "points"))
        v_series.append(Series("Ghia et al. 1982", GHIA_X, GHIA_V[re], "points"))
    title = "{} on the {} centreline, Re = {}"
    profile = chart(
        folder / f"cavity_re{re}_u.svg", u_series, title.format("u / U", "vertical", re), "u / U", "y",
        legend="lower right",
    )  # fmt: skip
    other = chart(folder / f"cavity_re{re}_v.svg", v_series, title.format("v / U", "horizontal", re), "x", "v / U")
    speed = write_png(str(folder / f"cavity_re{re}_speed.png"), np.hypot(u[0], u[1])[::-1])  # the lid on top
    print(f"  pictures: {profile}, {other}, {speed}")


if __name__ == "__main__":
    sys.exit(main())
