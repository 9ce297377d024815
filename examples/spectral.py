"""2-D incompressible Navier-Stokes on a periodic box, pseudo-spectral, the
whole run to a final time in one while node of a CUDA graph.

The vorticity form on [0, 2π)², with a uniform stream (U, V) that may carry
the flow::

    ∂ω/∂t + (U + u) ∂ω/∂x + (V + v) ∂ω/∂y = ν ∇²ω,   ∇²ψ = -ω,   (u, v) = (∂ψ/∂y, -∂ψ/∂x)

**Method.** ω is kept as its real-to-complex transform ω̂ (``tp.fft.rfft2``:
n x (n/2 + 1) modes). The advection term is computed in physical space: u, v,
∂ω/∂x and ∂ω/∂y are made from ω̂ in one kernel and brought back by one
batched ``tp.fft.irfft2``, multiplied point by point, and transformed forward
again (``tp.fft.rfft2``); modes with |k_x| or |k_y| at n/3 or more are
dropped (the 2/3 rule), so that the product's aliases fall on modes that are
dropped. Time steps are the classical fourth-order Runge-Kutta with an
integrating factor (Kassam and Trefethen 2005's IF-RK4): viscosity is
integrated exactly, exp(-ν k² t), and only advection is stepped.

**In one graph.** A replay is the whole run: the initial vorticity copied in,
then a do-while node whose body is one time step (four stages, each: a
kernel for the stage's update and the next stage's four fields, the inverse
transform, the product, the forward transform), then ``tick``, a one-thread
kernel that counts the step and keeps the loop going while the count is short
of ``steps`` (``tp.cuda.set_conditional``), and sets the handle of an if node
that records the energy and the enstrophy every ``--every`` steps. One launch
from the host; no value comes back until the end.

The tensor-ops version (``--only ops``) is the same method as a user writes
it first: tensor ops on complex tensors, ``tp.compile`` fusing each stage's
update, the same transforms, the same counter.

**Validation.** (1) The Taylor-Green vortex u = sin kx cos ky, v = -cos kx sin ky,
carried by the stream: the exact solution is the same vortex moved by (U t, V t),
its vorticity 2k sin k(x - Ut) sin k(y - Vt) decaying as exp(-2νk²t), its energy
and enstrophy as exp(-4νk²t); the velocity made from the vorticity at t = 0
is the vortex's own, and halving the step divides the error by 2⁴ (the
method's fourth order). (2) A double shear layer (Minion and Brown 1997's,
the unit box scaled to 2π): the energy budget dE/dt = -2νZ holds over the run,
and neither the energy nor the enstrophy ever grows; at ``--quick`` sizes the
field matches an independent NumPy version of the method (float64).

    python examples/spectral.py [--quick] [--n 512] [--dtype float64] [--only kernel ops] [--plot] [--pictures DIR]
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import tensorplay as tp  # before numba.cuda: tensorplay chooses the GPU or the simulator for it

# isort: split
sys.path.insert(0, str(Path(__file__).resolve().parent / "gallery"))  # the gallery's helpers
from numba import cuda, float64  # noqa: E402
from spectral_pictures import draw  # noqa: E402
from validation import Validation, backend_line, parser, pictures_folder, timed, timing_note  # noqa: E402

GPU = tp.cuda.backend() == "cuda"
BLOCK = (32, 8) if GPU else (8, 8)  # threads along the fast (last) axis, then rows
SUM_BLOCK = 256 if GPU else 32
DOCS = Path(__file__).resolve().parent.parent / "docs" / "spectral"
VERSIONS = ["kernel", "ops"]


@dataclass(frozen=True)
class Flow:
    """A run: ``steps`` steps of ``dt`` on an n x n grid, viscosity ``nu``,
    the stream (``U``, ``V``), and the initial velocity ``velocity(x, y)``."""

    name: str
    n: int
    nu: float
    dt: float
    steps: int
    velocity: object  # (x, y) -> (u, v), arrays on the grid
    U: float = 0.0
    V: float = 0.0

    def grid(self) -> tuple[np.ndarray, np.ndarray]:
        """(x, y) at the grid's points, each [row = y index, column = x index]."""
        s = 2 * np.pi * np.arange(self.n) / self.n
        return np.meshgrid(s, s)

    def vorticity_hat(self) -> np.ndarray:
        """ω̂ at t = 0 (unnormalised rfft2, modes dropped by the 2/3 rule), from the velocity."""
        u, v = self.velocity(*self.grid())
        kx, ky, keep = modes(self.n)
        return keep * (1j * kx * np.fft.rfft2(v) - 1j * ky * np.fft.rfft2(u))


def modes(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(k_x, k_y, kept) of the n x (n/2 + 1) modes of rfft2: kept is 1 where
    both |k_x| and |k_y| are below n/3 (the 2/3 rule), else 0."""
    kx = np.arange(n // 2 + 1, dtype=np.float64)[None, :]
    ky = np.fft.fftfreq(n, 1.0 / n)[:, None]
    keep = ((3 * np.abs(kx) < n) & (3 * np.abs(ky) < n)).astype(np.float64)
    return kx, ky, keep


def taylor_green(n: int, k: int, nu: float, dt: float, steps: int, U: float, V: float) -> Flow:
    def velocity(x, y):
        return np.sin(k * x) * np.cos(k * y), -np.cos(k * x) * np.sin(k * y)

    return Flow(f"Taylor-Green k={k}", n, nu, dt, steps, velocity, U, V)


def taylor_green_exact(flow: Flow, k: int, t: float) -> np.ndarray:
    """The exact vorticity at ``t``: the vortex moved by the stream, decayed."""
    x, y = flow.grid()
    return 2 * k * np.sin(k * (x - flow.U * t)) * np.sin(k * (y - flow.V * t)) * np.exp(-2 * flow.nu * k * k * t)


def shear_layer(n: int, rho: float, delta: float, nu: float, dt: float, steps: int) -> Flow:
    """Minion and Brown's double shear layer, u = tanh(ρ(y - 1/4)) below y = 1/2 and
    tanh(ρ(3/4 - y)) above, v = δ sin 2πx, on the unit box scaled to 2π."""
    r = rho / (2 * np.pi)

    def velocity(x, y):
        u = np.where(y <= np.pi, np.tanh(r * (y - np.pi / 2)), np.tanh(r * (3 * np.pi / 2 - y)))
        return u, delta * np.sin(x)

    return Flow(f"double shear layer rho={rho:g}", n, nu, dt, steps, velocity)


# -- the kernels ------------------------------------------------------------------------------


@cuda.jit(device=True)
def wavenumbers(i, j, n):
    """(k_x, k_y, k², kept) of mode [i, j] of an n x n grid's rfft2."""
    ky = i if 2 * i < n else i - n
    kx = j
    return kx, ky, kx * kx + ky * ky, 3 * abs(kx) < n and 3 * abs(ky) < n


@cuda.jit(device=True)
def write_fields(fields, i, j, kx, ky, k2, w, scale):
    """The transforms of u, v, ∂ω/∂x and ∂ω/∂y at mode [i, j], from ω̂ there
    (``scale`` = 1/n²: the inverse transform that follows is unnormalised)."""
    w = w * scale
    psi = w / k2 if k2 > 0 else 0.0 * w
    fields[0, i, j] = 1j * ky * psi
    fields[1, i, j] = -1j * kx * psi
    fields[2, i, j] = 1j * kx * w
    fields[3, i, j] = 1j * ky * w


@tp.jit
def prepare(w, fields, scale):
    """The first stage's four fields, from ω̂."""
    j, i = tp.cuda.grid(2)
    n = w.shape[0]
    if i < n and j < w.shape[1]:
        kx, ky, k2, _ = wavenumbers(i, j, n)
        write_fields(fields, i, j, kx, ky, k2, w[i, j], scale)


@tp.jit
def advect(phys, out, U, V):
    """The advection term in physical space: (U + u) ∂ω/∂x + (V + v) ∂ω/∂y."""
    j, i = tp.cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = (U + phys[0, i, j]) * phys[2, i, j] + (V + phys[1, i, j]) * phys[3, i, j]


@tp.jit
def advance(w, acc, r, fields, stage, dt, nu, scale):
    """IF-RK4's ``stage`` (0 to 3) from r, the transform of the advection term
    at the stage's input: N = -r on the kept modes. ``acc`` gathers the step;
    the last stage writes ω̂. Then the next stage's input, made into its four
    fields (the input itself is not kept)."""
    j, i = tp.cuda.grid(2)
    n = w.shape[0]
    if i >= n or j >= w.shape[1]:
        return
    kx, ky, k2, kept = wavenumbers(i, j, n)
    nl = -r[i, j] if kept else 0.0 * r[i, j]
    half = math.exp(-0.5 * nu * k2 * dt)  # exp(-ν k² dt/2): the integrating factor over half a step
    full = half * half
    if stage == 0:
        acc[i, j] = full * (w[i, j] + dt / 6 * nl)
        nxt = half * (w[i, j] + dt / 2 * nl)
    elif stage == 1:
        acc[i, j] += dt / 3 * half * nl
        nxt = half * w[i, j] + dt / 2 * nl
    elif stage == 2:
        acc[i, j] += dt / 3 * half * nl
        nxt = full * w[i, j] + dt * half * nl
    else:
        nxt = acc[i, j] + dt / 6 * nl
        w[i, j] = nxt
    write_fields(fields, i, j, kx, ky, k2, nxt, scale)


@tp.jit
def tick(clock, steps, loop):
    """After a step: count it; the loop goes on while fewer than ``steps`` are done."""
    if tp.cuda.grid(1) == 0:
        done = clock[0] + 1
        clock[0] = done
        tp.cuda.set_conditional(loop, np.uint32(1 if done < steps else 0))


@tp.jit
def tick_and_record(clock, steps, every, loop, record):
    """``tick``, and the handle of the record's if node: set every ``every`` steps."""
    if tp.cuda.grid(1) == 0:
        done = clock[0] + 1
        clock[0] = done
        tp.cuda.set_conditional(loop, np.uint32(1 if done < steps else 0))
        tp.cuda.set_conditional(record, np.uint32(1 if done % every == 0 else 0))


@cuda.jit(device=True)
def shared_block_sum(value, total, a, b):
    """Add the ``value`` of every thread of the block to ``total[a, b]``:
    summed in shared memory, then one atomic add per block."""
    partial = cuda.shared.array(SUM_BLOCK, float64)
    t = cuda.threadIdx.x
    partial[t] = value
    cuda.syncthreads()
    size = SUM_BLOCK // 2
    while size > 0:
        if t < size:
            partial[t] += partial[t + size]
        cuda.syncthreads()
        size //= 2
    if t == 0:
        cuda.atomic.add(total, (a, b), partial[0])


@cuda.jit(device=True)
def atomic_sum(value, total, a, b):
    """The same sum, an atomic add per thread: what the simulator runs, where a
    kernel that names no shared memory or barrier runs one thread after another."""
    cuda.atomic.add(total, (a, b), value)


add_block_sum = shared_block_sum if GPU else atomic_sum


@tp.jit
def record(w, history, clock, every, scale):
    """history[step / every] += (E, Z), the energy ½<u² + v²> and the enstrophy
    ½<ω²> (means over the box; ``scale`` = 1/(2 n⁴)), from ω̂ by Parseval:
    the modes that rfft2 leaves out count through their conjugates, twice."""
    t = tp.cuda.grid(1)
    n, m = w.shape
    energy = enstrophy = 0.0
    if t < n * m:
        i, j = t // m, t % m
        _, _, k2, _ = wavenumbers(i, j, n)
        a2 = (w[i, j].real * w[i, j].real + w[i, j].imag * w[i, j].imag) * (1.0 if j == 0 or 2 * j == n else 2.0)
        enstrophy = a2 * scale
        energy = enstrophy / k2 if k2 > 0 else 0.0
    slot = clock[0] // every if every > 0 else 0
    add_block_sum(energy, history, slot, 0)
    add_block_sum(enstrophy, history, slot, 1)


# -- the solver: its state, and the run as one graph ------------------------------------------


class Solver:
    """A ``Flow`` in ``dtype`` (float32 or float64). ``solve()`` replays the
    graph: the whole run, from the initial vorticity; afterwards ``vorticity()``,
    ``steps_done()`` and ``history()`` (E and Z at every ``every`` steps)."""

    def __init__(self, flow: Flow, dtype, every: int = 1) -> None:
        n, m = flow.n, flow.n // 2 + 1
        if n < 8 or n % 2:
            raise ValueError(f"expected an even grid size of 8 or more, got {n}")
        if flow.steps < 1 or every < 0:
            raise ValueError(f"expected steps >= 1 and every >= 0, got {flow.steps} and {every}")
        self.flow, self.every = flow, every
        self.real = tp.float64 if dtype in ("float64", tp.float64) else tp.float32
        self.complex = tp.complex128 if self.real is tp.float64 else tp.complex64
        self.w0 = tp.tensor(flow.vorticity_hat()).to(self.complex)
        self.w, self.acc = tp.zeros(n, m, dtype=self.complex), tp.zeros(n, m, dtype=self.complex)
        self.fields = tp.zeros(4, n, m, dtype=self.complex)
        self.prod = tp.zeros(n, n, dtype=self.real)
        self.clock = tp.zeros(1, dtype=tp.int64)
        self.rows = flow.steps // every + 1 if every else 1
        self.records = tp.zeros(self.rows, 2, dtype=tp.float64)
        self.spectral = ((m + BLOCK[0] - 1) // BLOCK[0], (n + BLOCK[1] - 1) // BLOCK[1])
        self.physical = ((n + BLOCK[0] - 1) // BLOCK[0], (n + BLOCK[1] - 1) // BLOCK[1])
        self.sums = (n * m + SUM_BLOCK - 1) // SUM_BLOCK
        self.scale = 1.0 / (n * n)
        self.graph = None

    # each version defines the first fields (from ω̂) and a stage (from the fields to the next ones)
    def first_fields(self) -> None:
        prepare[self.spectral, BLOCK](self.w, self.fields, self.scale)

    def stage(self, k: int) -> None:
        f = self.flow
        phys = tp.fft.irfft2(self.fields, s=(f.n, f.n), norm="forward")  # unnormalised: the kernels scale
        advect[self.physical, BLOCK](phys, self.prod, f.U, f.V)
        r = tp.fft.rfft2(self.prod)
        advance[self.spectral, BLOCK](self.w, self.acc, r, self.fields, k, f.dt, f.nu, self.scale)

    def _record(self) -> None:
        record[self.sums, SUM_BLOCK](self.w, self.records, self.clock, self.every, 0.5 * self.scale**2)

    def capture(self) -> None:
        """The run as one graph: start, then ``do { step; tick; if (record) record } while (loop)``,
        its kernels compiled (and the transforms' plans made) by an eager step first."""
        self.warm_up()
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            self.w.copy_(self.w0)
            self.clock.zero_()
            self.records.zero_()
            self._record()
            self.first_fields()
            with g.while_() as loop:
                for k in range(4):
                    self.stage(k)
                if self.every:
                    due = g.conditional_handle()
                    tick_and_record[1, 1](self.clock, self.flow.steps, self.every, loop, due)
                    with g.if_(due):
                        self._record()
                else:
                    tick[1, 1](self.clock, self.flow.steps, loop)
        self.graph = g

    def solve(self) -> None:
        """The whole run: one replay."""
        if self.graph is None:
            raise RuntimeError("solve() before capture(): call capture() once first")
        self.graph.replay()

    def warm_up(self) -> None:
        """One step eagerly."""
        self.w.copy_(self.w0)
        self.first_fields()
        for k in range(4):
            self.stage(k)
        self._record()
        tp.cuda.synchronize()

    def vorticity(self) -> np.ndarray:
        """ω on the grid (float64), from ω̂."""
        return np.fft.irfft2(self.w.numpy().astype(np.complex128), s=(self.flow.n,) * 2)

    def velocity(self) -> tuple[np.ndarray, np.ndarray]:
        """(u, v) on the grid from the current ω̂, made by the version's own first fields."""
        self.first_fields()
        phys = tp.fft.irfft2(self.fields, s=(self.flow.n,) * 2, norm="forward").numpy()
        return phys[0], phys[1]

    def steps_done(self) -> int:
        return int(self.clock.item())

    def history(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(t, E, Z) at every record."""
        h = self.records.numpy()
        return np.arange(self.rows) * self.every * self.flow.dt, h[:, 0], h[:, 1]


# -- what a user writes first: tensor ops, tp.compile -------------------------------------------


def ops_fields(s, ikx, iky, inv_k2, scale: float, fields):
    """The four fields from the stage input ``s`` (``inv_k2`` = 1/(n² k²), 0 at k = 0)."""
    psi = s * inv_k2
    fields[0].copy_(iky * psi)
    fields[1].copy_(-ikx * psi)
    fields[2].copy_(ikx * s * scale)
    fields[3].copy_(iky * s * scale)


def ops_advect(phys, prod, U: float, V: float):
    prod.copy_((phys[0] + U) * phys[2] + (phys[1] + V) * phys[3])


def ops_update(w, acc, s, r, dropped, half, stage: int, dt: float):
    """IF-RK4's ``stage`` (as ``advance``): N = r * dropped (-1 on the kept modes, 0 elsewhere)."""
    nl = r * dropped
    if stage == 0:
        acc.copy_(half * half * (w + (dt / 6) * nl))
        s.copy_(half * (w + (dt / 2) * nl))
    elif stage == 1:
        acc.add_(half * nl * (dt / 3))
        s.copy_(half * w + (dt / 2) * nl)
    elif stage == 2:
        acc.add_(half * nl * (dt / 3))
        s.copy_(half * half * w + half * nl * dt)
    else:
        w.copy_(acc + (dt / 6) * nl)
        s.copy_(w)


class OpsSolver(Solver):
    """The same run with tensor ops in place of ``prepare``, ``advect`` and ``advance``."""

    def __init__(self, flow: Flow, dtype, every: int = 1) -> None:
        super().__init__(flow, dtype, every)
        self.s = tp.zeros_like(self.w)  # the stage's input
        kx, ky, keep = modes(flow.n)
        k2 = kx**2 + ky**2
        shape = k2.shape
        self.ikx = tp.tensor(np.broadcast_to(1j * kx, shape).copy()).to(self.complex)
        self.iky = tp.tensor(np.broadcast_to(1j * ky, shape).copy()).to(self.complex)
        self.inv_k2 = tp.tensor(self.scale / np.where(k2 > 0, k2, np.inf)).to(self.real)
        self.dropped = tp.tensor(-keep).to(self.real)
        self.half = tp.tensor(np.exp(-0.5 * flow.nu * k2 * flow.dt)).to(self.real)
        self.make_fields, self.advect = tp.compile(ops_fields), tp.compile(ops_advect)
        self.update = tp.compile(ops_update)

    def first_fields(self) -> None:
        self.make_fields(self.w, self.ikx, self.iky, self.inv_k2, self.scale, self.fields)

    def stage(self, k: int) -> None:
        f = self.flow
        phys = tp.fft.irfft2(self.fields, s=(f.n, f.n), norm="forward")
        self.advect(phys, self.prod, f.U, f.V)
        r = tp.fft.rfft2(self.prod)
        self.update(self.w, self.acc, self.s, r, self.dropped, self.half, k, f.dt)
        self.make_fields(self.s, self.ikx, self.iky, self.inv_k2, self.scale, self.fields)


# -- references ---------------------------------------------------------------------------------


def numpy_run(flow: Flow) -> np.ndarray:
    """The method in NumPy, in float64, with NumPy's normalised transforms: ω after the run."""
    n = flow.n
    kx, ky, keep = modes(n)
    k2 = kx**2 + ky**2
    inv_k2 = np.where(k2 > 0, 1.0 / np.where(k2 > 0, k2, 1.0), 0.0)

    def rhs(w_hat):
        psi = w_hat * inv_k2
        u = flow.U + np.fft.irfft2(1j * ky * psi, s=(n, n))
        v = flow.V + np.fft.irfft2(-1j * kx * psi, s=(n, n))
        w_x, w_y = np.fft.irfft2(1j * kx * w_hat, s=(n, n)), np.fft.irfft2(1j * ky * w_hat, s=(n, n))
        return -keep * np.fft.rfft2(u * w_x + v * w_y)

    half = np.exp(-0.5 * flow.nu * k2 * flow.dt)
    h, w = flow.dt, flow.vorticity_hat()
    for _ in range(flow.steps):
        a = rhs(w)
        b = rhs(half * (w + h / 2 * a))
        c = rhs(half * w + h / 2 * b)
        d = rhs(half**2 * w + h * half * c)
        w = half**2 * w + h / 6 * (half**2 * a + 2 * half * (b + c) + d)
    return np.fft.irfft2(w, s=(n, n))


# -- the runs and their checks ------------------------------------------------------------------

LIMITS = {  # per dtype: what each check allows
    "float64": {"exact": 1e-12, "tg": 2e-5, "order": 0.3, "budget": 1e-4, "grow": 1e-12, "numpy": 1e-10},
    "float32": {"exact": 1e-5, "tg": 2e-4, "order": None, "budget": 1e-2, "grow": 1e-6, "numpy": 1e-4},
}
SOLVERS = {"kernel": Solver, "ops": OpsSolver}


@dataclass(frozen=True)
class Sizes:
    """The runs' parameters: --quick sizes on the simulator, full sizes on a GPU."""

    tg_n: int
    tg_k: int
    tg_nu: float
    tg_steps: int  # the fine run's steps to t = 1 (the coarse run takes half as many): stable at n/3 modes
    shear_n: int
    shear_rho: float
    shear_t: float  # the shear layer's end time (2π: the unit box's t = 1)
    shear_steps: int
    every: int

    @classmethod
    def of(cls, quick: bool, n: int | None, steps: int | None) -> Sizes:
        if quick:
            n = n or 16
            return cls(n, 2, 0.05, 20, n, 30.0, np.pi / 2, steps or 16, 1)
        n = n or 512
        steps = steps or 3 * n
        return cls(n, 8, 0.01, max(n, 256), n, 80.0, 2 * np.pi, steps, max(1, steps // 256))


def _solved(version: str, flow: Flow, dtype: str, every: int) -> tuple[Solver, float]:
    solver = SOLVERS[version](flow, dtype, every)
    solver.capture()
    if GPU:
        solver.solve()  # the graph's first replay uploads it: time the second
    seconds = timed(solver.solve)
    print(f"  {version}: {solver.steps_done()} steps of {flow.n}x{flow.n}, {seconds / flow.steps * 1e6:.1f} us/step")
    return solver, seconds


def taylor_green_checks(version: str, sizes: Sizes, dtype: str, v: Validation) -> Solver:
    """The vortex carried by the stream (U, V) = (1, 0.5) to t = 1, at dt and dt/2."""
    lim, k, errors = LIMITS[dtype], sizes.tg_k, []
    name = f"{version}: Taylor-Green"
    for steps in (sizes.tg_steps // 2, sizes.tg_steps):
        flow = taylor_green(sizes.tg_n, k, sizes.tg_nu, 1.0 / steps, steps, 1.0, 0.5)
        solver, _ = _solved(version, flow, dtype, sizes.every)
        exact = taylor_green_exact(flow, k, 1.0)
        errors.append(np.abs(solver.vorticity() - exact).max() / np.abs(exact).max())
        v.equal(f"{name}, {steps} steps: steps the loop counted", solver.steps_done(), steps)
    t, energy, enstrophy = solver.history()
    decay = np.exp(-4 * flow.nu * k * k * t)
    v.at_most(f"{name}: ω at t = 1 against the exact solution (max, relative)", errors[1], lim["tg"])
    v.at_most(f"{name}: energy against exp(-4νk²t) / 4, every record (relative)",
              np.abs(energy / (0.25 * decay) - 1).max(), lim["tg"])  # fmt: skip
    v.at_most(f"{name}: enstrophy against k² exp(-4νk²t) / 2, every record (relative)",
              np.abs(enstrophy / (0.5 * k * k * decay) - 1).max(), lim["tg"])  # fmt: skip
    if lim["order"] is not None:
        order = math.log2(errors[0] / errors[1])
        print(f"  {version}: error at t = 1 {errors[0]:.3g} with dt, {errors[1]:.3g} with dt/2: order {order:.2f}")
        v.at_most(f"{name}: |order of accuracy - 4| from dt and dt/2", abs(order - 4), lim["order"])
    solver.w.copy_(solver.w0)  # back to t = 0: the velocity made from ω̂ there
    u, w_ = solver.velocity()
    u_exact, v_exact = flow.velocity(*flow.grid())
    v.at_most(f"{name}: velocity from ω at t = 0 against the vortex's (max abs)",
              max(np.abs(u - u_exact).max(), np.abs(w_ - v_exact).max()), lim["exact"])  # fmt: skip
    return solver


def shear_checks(version: str, sizes: Sizes, dtype: str, quick: bool, v: Validation) -> Solver:
    """The double shear layer: the energy budget, and no growth of E or Z."""
    lim, steps = LIMITS[dtype], sizes.shear_steps
    flow = shear_layer(sizes.shear_n, sizes.shear_rho, 0.05, 2 * np.pi * 1e-4, sizes.shear_t / steps, steps)
    solver, _ = _solved(version, flow, dtype, sizes.every)
    name = f"{version}: shear layer"
    t, energy, enstrophy = solver.history()
    dissipated = 2 * flow.nu * integral(enstrophy, t[1] - t[0])
    print(f"  {version}: E from {energy[0]:.6g} to {energy[-1]:.6g}, 2ν∫Z dt = {dissipated:.6g}")
    v.at_most(f"{name}: energy budget |E(T) - E(0) + 2ν∫Z dt| / (E(0) - E(T))",
              abs(energy[-1] - energy[0] + dissipated) / (energy[0] - energy[-1]), lim["budget"])  # fmt: skip
    v.at_most(f"{name}: the energy's largest rise between records / E(0)", np.diff(energy).max() / energy[0],
              lim["grow"])  # fmt: skip
    v.at_most(f"{name}: the enstrophy's largest rise between records / Z(0)",
              np.diff(enstrophy).max() / enstrophy[0], lim["grow"])  # fmt: skip
    if quick:
        ref = numpy_run(flow)
        v.at_most(f"{name}: ω against NumPy's float64 run of the method (max, relative)",
                  np.abs(solver.vorticity() - ref).max() / np.abs(ref).max(), lim["numpy"])  # fmt: skip
    return solver


def integral(y: np.ndarray, dx: float) -> float:
    """∫y by Simpson's rule on samples ``dx`` apart (the trapezoid on the last
    interval when their number is odd)."""
    m = len(y) - 1 - (len(y) - 1) % 2
    simpson = dx / 3 * (y[0] + y[m] + 4 * y[1:m:2].sum() + 2 * y[2 : m - 1 : 2].sum()) if m else 0.0
    return float(simpson + (dx / 2 * (y[m] + y[-1]) if m < len(y) - 1 else 0.0))


def main() -> int:
    p = parser(__doc__)
    p.set_defaults(docs=str(DOCS))
    p.add_argument("--n", type=int, help="grid points per side (default 512; --quick: 16)")
    p.add_argument("--steps", type=int, help="the shear layer's steps (default 3n, to t = 2π; --quick: 16, to t = π/2)")
    p.add_argument("--dtype", choices=sorted(LIMITS), default="float64", help="the fields' precision")
    p.add_argument("--only", nargs="+", choices=VERSIONS, default=VERSIONS, help="the versions to run (default: all)")
    args = p.parse_args()
    sizes = Sizes.of(args.quick, args.n, args.steps)
    folder = pictures_folder(args)
    print(backend_line(f"2-D Navier-Stokes, pseudo-spectral (rfft2, 2/3 rule, IF-RK4), {args.dtype}"))
    v = Validation("2-D Navier-Stokes against the Taylor-Green vortex and the energy budget")
    print(f"\nTaylor-Green vortex, k = {sizes.tg_k}, ν = {sizes.tg_nu:g}, carried by (U, V) = (1, 0.5), to t = 1")
    tg = {version: taylor_green_checks(version, sizes, args.dtype, v) for version in args.only}
    print(f"\ndouble shear layer, ρ = {sizes.shear_rho:g}, δ = 0.05, ν = 2π 1e-4, to t = {sizes.shear_t:.4g}")
    shear = {version: shear_checks(version, sizes, args.dtype, args.quick, v) for version in args.only}
    if folder is not None:
        draw(folder, next(iter(tg.values())), next(iter(shear.values())), sizes.tg_k)
    note = timing_note()
    if note:
        print(note)
    print()
    return v.report()


if __name__ == "__main__":
    sys.exit(main())
