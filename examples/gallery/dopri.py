"""Adaptive Runge-Kutta (Dormand-Prince 5(4)) for an ensemble of trajectories,
every step attempt inside one CUDA graph, an if/else node accepting or
rejecting it.

An ensemble of initial value problems (the Lorenz system, or Van der Pol
oscillators, stiff-ish as μ grows) integrated together, one trajectory per
thread, with one step size: the error of an attempt is the root mean square
over every component of every trajectory, as for one system of all of them.
A pass of the while node: ``attempt`` (the six stages of every trajectory, the
fifth-order result and the embedded error, summed per block; the last block to
finish takes the error norm and sets the if/else node's handle and the
loop's), then the if/else node: ``accept`` (the new state, the derivative kept for the
next step, time and step size moved on) or ``reject`` (a smaller step). The
step size control is SciPy's RK45's (safety 0.9, factors between 0.2 and 10,
no growth right after a rejection, the last step cut at the end).

Validated against ``scipy.integrate.RK45`` on the same ensemble as one system,
with the same tolerances and first step: the same numbers of accepted and
rejected steps, and the same end states within 1e-8 (relative); and a sample of
trajectories integrated one by one by ``scipy.integrate.solve_ivp`` at a tight
tolerance, within 100 times the requested one.

The ops-only version (``--only ops``) is the same algorithm in tensor ops: the
state held component by component ([components, trajectories], each
component a tensor of every trajectory), the scalars as one-element tensors,
the if/else on a flag tensor.

    python examples/gallery/dopri.py [--quick] [--system lorenz vdp] [--trajectories 4096] [--only kernel ops]
"""

from __future__ import annotations

import functools
import math
import sys
from dataclasses import dataclass

import numpy as np

import tensorplay as tp  # before numba.cuda: tensorplay chooses the GPU or the simulator for it

# isort: split
from charts import Series, chart
from numba import cuda, float64
from validation import Validation, backend_line, parser, pictures_folder, timed, timing_note

VERSIONS = ["kernel", "ops"]
BLOCK = 128 if tp.cuda.backend() == "cuda" else 8
SAFETY, MIN_FACTOR, MAX_FACTOR = 0.9, 0.2, 10.0  # SciPy's RK45's
# Dormand & Prince (1980), as SciPy's RK45 holds them: nodes, stages, the fifth-order weights and the
# error weights (the fifth-order minus the embedded fourth-order, with the last stage's derivative).
C = np.array([0.0, 1 / 5, 3 / 10, 4 / 5, 8 / 9, 1.0])
A = np.array([
    [0.0, 0.0, 0.0, 0.0, 0.0],
    [1 / 5, 0.0, 0.0, 0.0, 0.0],
    [3 / 40, 9 / 40, 0.0, 0.0, 0.0],
    [44 / 45, -56 / 15, 32 / 9, 0.0, 0.0],
    [19372 / 6561, -25360 / 2187, 64448 / 6561, -212 / 729, 0.0],
    [9017 / 3168, -355 / 33, 46732 / 5247, 49 / 176, -5103 / 18656],
])  # fmt: skip
B = np.array([35 / 384, 0.0, 500 / 1113, 125 / 192, -2187 / 6784, 11 / 84])
E = np.array([-71 / 57600, 0.0, 71 / 16695, -71 / 1920, 17253 / 339200, -22 / 525, 1 / 40])
T, H_ABS, ERR_SUM, ERR, JUST_REJECTED, ACCEPTED, REJECTED = range(7)  # the solver's scalars on the device
# Attempts a pass of the while node: a pass costs about 4 us beyond its body on an H100, a quarter of an
# attempt here; four a pass pay it once for four. Once t has reached the end, a later attempt of the
# pass returns at once and marks its error -1, and its if/else node's bodies do nothing (``skipped``).
PER_PASS = 4


# -- the systems: the right-hand sides on the device, and in NumPy for the references ----------------


@cuda.jit(device=True)
def lorenz(t, y, out, p):
    """σ = 10, β = 8/3, ρ = p[0]."""
    out[0] = 10.0 * (y[1] - y[0])
    out[1] = y[0] * (p[0] - y[2]) - y[1]
    out[2] = y[0] * y[1] - 8.0 / 3.0 * y[2]


@cuda.jit(device=True)
def van_der_pol(t, y, out, p):
    """μ = p[0]."""
    out[0] = y[1]
    out[1] = p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0]


def lorenz_numpy(y, p):
    x, v, z = y[:, 0], y[:, 1], y[:, 2]
    return np.stack([10.0 * (v - x), x * (p[:, 0] - z) - v, x * v - 8.0 / 3.0 * z], axis=1)


def van_der_pol_numpy(y, p):
    return np.stack([y[:, 1], p[:, 0] * (1.0 - y[:, 0] ** 2) * y[:, 1] - y[:, 0]], axis=1)


@dataclass(frozen=True)
class System:
    name: str
    dim: int
    device: object
    numpy: object
    t_end: float

    def ensemble(self, n: int, seed: int = 7) -> tuple[np.ndarray, np.ndarray]:
        """(initial states [n, dim], parameters [n, 1]) of ``n`` trajectories."""
        rng = np.random.default_rng(seed)
        if self.name == "lorenz":  # near (1, 1, 1), ρ from 24 to 32
            return 1.0 + 0.1 * rng.standard_normal((n, 3)), rng.uniform(24.0, 32.0, (n, 1))
        return np.stack([rng.uniform(1.0, 2.5, n), np.zeros(n)], axis=1), rng.uniform(1.0, 5.0, (n, 1))


SYSTEMS = {
    "lorenz": System("lorenz", 3, lorenz, lorenz_numpy, 5.0),  # chaos: later, 1e-6 errors grow past 1e-4
    "vdp": System("vdp", 2, van_der_pol, van_der_pol_numpy, 10.0),
}


# -- the kernels ------------------------------------------------------------------------------


@cuda.jit(device=True)
def shared_block_sum(value, total, slot, ticket):
    """Add the ``value`` of every thread of the block to ``total[slot]``:
    summed in shared memory, then one atomic add per block. True on one thread
    of the grid, after every block has added its sum (the first thread of the
    last block to count itself on ``ticket``)."""
    partial = cuda.shared.array(BLOCK, float64)
    t = cuda.threadIdx.x
    partial[t] = value
    cuda.syncthreads()
    half = BLOCK // 2
    while half > 0:
        if t < half:
            partial[t] += partial[t + half]
        cuda.syncthreads()
        half //= 2
    last = False
    if t == 0:
        cuda.atomic.add(total, slot, partial[0])
        cuda.threadfence()  # the sum is in before the count
        last = cuda.atomic.add(ticket, 0, 1) == cuda.gridDim.x - 1
    return last


@cuda.jit(device=True)
def atomic_sum(value, total, slot, ticket):
    """The same sum, an atomic add per thread, and True on the thread that adds
    last: what the simulator runs, where a kernel that names no shared memory
    or barrier runs one thread after another instead of a Python thread each,
    ten times faster."""
    cuda.atomic.add(total, slot, value)
    return cuda.atomic.add(ticket, 0, 1) == cuda.gridDim.x * cuda.blockDim.x - 1


add_block_sum = shared_block_sum if tp.cuda.backend() == "cuda" else atomic_sum


@cuda.jit(device=True)
def step_to(s, t_bound):
    """(t_new, h) of the attempt: t + |h|, but not past ``t_bound``."""
    t = s[T]
    t_new = min(t + s[H_ABS], t_bound)
    return t_new, t_new - t


@functools.cache
def kernels(system: str):
    """(derivative, attempt) for ``system``: built once, its right-hand side and size compiled in."""
    rhs, dim = SYSTEMS[system].device, SYSTEMS[system].dim

    @tp.jit
    def derivative(y, f, p, t):
        """f = the right-hand side at (t, y), one trajectory per thread."""
        b = tp.cuda.grid(1)
        if b < y.shape[0]:
            rhs(t, y[b], f[b], p[b])

    @tp.jit
    def attempt(y, f, y_new, f_new, p, s, t_bound, rtol, atol, components, ticket, branch, loop):
        """One attempt of every trajectory: the six stages, y_new and f_new (the
        derivative there), and the sum of the squared scaled errors into
        s[ERR_SUM]; then, on the thread that adds last, the decision: the error
        norm, the if/else node's handle (``accept`` when it is below 1) and the
        loop's (it stops after an accepted step that reached ``t_bound``)."""
        b = tp.cuda.grid(1)
        if s[T] >= t_bound:  # an earlier attempt of the pass ended the integration
            if b == 0:
                s[ERR] = -1.0
            return
        t_new, h = step_to(s, t_bound)
        t = s[T]
        squares = 0.0
        if b < y.shape[0]:
            k = cuda.local.array((7, dim), float64)
            z = cuda.local.array(dim, float64)
            for d in range(dim):
                k[0, d] = f[b, d]
            for stage in range(1, 6):
                for d in range(dim):
                    dy = 0.0
                    for j in range(stage):
                        dy += A[stage, j] * k[j, d]
                    z[d] = y[b, d] + dy * h
                rhs(t + C[stage] * h, z, k[stage], p[b])
            for d in range(dim):
                dy = 0.0
                for j in range(6):
                    dy += B[j] * k[j, d]
                y_new[b, d] = y[b, d] + h * dy
            rhs(t_new, y_new[b], f_new[b], p[b])
            for d in range(dim):
                k[6, d] = f_new[b, d]
                err = 0.0
                for j in range(7):
                    err += E[j] * k[j, d]
                scale = atol + max(abs(y[b, d]), abs(y_new[b, d])) * rtol
                squares += (err * h / scale) ** 2
        if add_block_sum(squares, s, ERR_SUM, ticket):  # every thread's squares are in
            cuda.threadfence()
            err = math.sqrt(cuda.atomic.add(s, ERR_SUM, 0.0) / components)  # read where the adds went
            s[ERR], s[ERR_SUM] = err, 0.0
            ticket[0] = 0  # for the next attempt
            tp.cuda.set_conditional(branch, np.uint32(1 if err < 1.0 else 0))
            tp.cuda.set_conditional(loop, np.uint32(0 if err < 1.0 and t_new == t_bound else 1))

    return derivative, attempt


@cuda.jit(device=True)
def skipped(s):
    """True after an attempt that found the integration done: its branch does nothing."""
    return s[ERR] < 0.0


@tp.jit
def accept(y, f, y_new, f_new, s, t_bound, path):
    """The then-body: the new state and its derivative (the next step's first
    stage); thread 0 moves time on, grows the step (not after a rejection), and
    keeps (t, h, trajectory 0's state) in ``path`` while there is room."""
    if skipped(s):
        return
    b = tp.cuda.grid(1)
    if b < y.shape[0]:
        for d in range(y.shape[1]):
            y[b, d] = y_new[b, d]
            f[b, d] = f_new[b, d]
    if b == 0:
        t_new, h = step_to(s, t_bound)
        err = s[ERR]
        factor = MAX_FACTOR if err == 0.0 else min(MAX_FACTOR, SAFETY * err**-0.2)
        if s[JUST_REJECTED] != 0.0:
            factor = min(1.0, factor)
        s[T], s[H_ABS] = t_new, h * factor
        s[JUST_REJECTED] = 0.0
        n = int(s[ACCEPTED])
        if n < path.shape[0]:
            path[n, 0], path[n, 1] = t_new, h
            for d in range(y.shape[1]):
                path[n, 2 + d] = y_new[0, d]
        s[ACCEPTED] = n + 1.0


@tp.jit
def reject(s, t_bound):
    """The else-body: a smaller step, remembered as just rejected."""
    if tp.cuda.grid(1) == 0 and not skipped(s):
        t_new, h = step_to(s, t_bound)
        s[H_ABS] = h * max(MIN_FACTOR, SAFETY * s[ERR] ** -0.2)
        s[JUST_REJECTED] = 1.0
        s[REJECTED] += 1.0


class KernelDopri:
    """The ensemble's whole integration as one graph:
    ``do { attempt (and decide); if (err < 1) accept else reject } while (t < t_end)``,
    ``PER_PASS`` attempts a pass."""

    def __init__(self, system: System, y0: np.ndarray, p: np.ndarray, first_step: float, rtol: float, atol: float):
        self.system, self.first_step, self.rtol, self.atol = system, first_step, rtol, atol
        self.y0, self.p = tp.tensor(y0), tp.tensor(p)
        self.y, self.f, self.y_new, self.f_new = (tp.zeros(*y0.shape, dtype=tp.float64) for _ in range(4))
        self.s = tp.zeros(7, dtype=tp.float64)
        self.ticket = tp.zeros(1, dtype=tp.int32)  # blocks of an attempt done: zero between attempts
        self.path = tp.zeros(4096, 2 + system.dim, dtype=tp.float64)
        self.blocks = (y0.shape[0] + BLOCK - 1) // BLOCK
        self.graph = self._capture()

    def _capture(self) -> tp.cuda.CUDAGraph:
        _, attempt_ = kernels(self.system.name)
        t_end, size = self.system.t_end, float(self.y0.numel())
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.while_(max_iters=10_000_000) as loop:
                for _ in range(PER_PASS):
                    branch = g.conditional_handle()
                    attempt_[self.blocks, BLOCK](
                        self.y, self.f, self.y_new, self.f_new, self.p, self.s, t_end, self.rtol, self.atol, size,
                        self.ticket, branch, loop,
                    )  # fmt: skip
                    with g.if_else(branch) as choice:
                        accept[self.blocks, BLOCK](self.y, self.f, self.y_new, self.f_new, self.s, t_end, self.path)
                        choice.else_()
                        reject[1, 1](self.s, t_end)
        return g

    def reset(self) -> None:
        derivative, _ = kernels(self.system.name)
        self.y.copy_(self.y0)
        derivative[self.blocks, BLOCK](self.y, self.f, self.p, 0.0)
        self.s.copy_(tp.tensor(np.array([0.0, self.first_step, 0, 0, 0, 0, 0])))
        self.ticket.zero_()

    def solve(self) -> None:
        self.reset()
        self.graph.replay()

    def result(self) -> tuple[np.ndarray, int, int]:
        """(end states, accepted steps, rejected steps)."""
        s = self.s.numpy()
        return self.y.numpy(), int(s[ACCEPTED]), int(s[REJECTED])

    def steps(self) -> np.ndarray:
        """[accepted step, (t, h, trajectory 0's state)] of the last run (the first 4096)."""
        return self.path.numpy()[: min(int(self.s[ACCEPTED].item()), self.path.shape[0])]


# -- what a user writes first: tensor ops, tp.compile --------------------------------------------


def lorenz_ops(t, y, p):
    """The Lorenz system on components: ``y`` holds x, y, z ([n] each), ``p`` ρ."""
    x, v, z = y
    return [10.0 * (v - x), x * (p[0] - z) - v, x * v - 8.0 / 3.0 * z]


def van_der_pol_ops(t, y, p):
    """Van der Pol on components: ``y`` holds y, dy/dt ([n] each), ``p`` μ."""
    return [y[1], p[0] * (1.0 - y[0] * y[0]) * y[1] - y[0]]


OPS_RHS = {"lorenz": lorenz_ops, "vdp": van_der_pol_ops}


def combination(weights, k, d: int, h):
    """h times the sum of ``weights[j] * k[j][d]`` over the stages whose weight is not zero."""
    return h * sum(float(w) * k[j][d] for j, w in enumerate(weights) if w != 0.0)


def ops_attempt(y, f, y_new, f_new, p, t, h_abs, err, accepted, go, system: str, t_end: float, rtol, atol):
    """The stages of the whole ensemble, component by component (``y`` [dim, n]:
    ``y[d]`` is component d of every trajectory); ``accepted`` = the error norm
    ``err`` < 1; ``go`` = not (accepted and at the end)."""
    rhs, dim = OPS_RHS[system], y.shape[0]
    t_new = tp.minimum(t + h_abs, t_end)
    h = t_new - t
    k = [[f[d] for d in range(dim)]]
    for stage in range(1, 6):
        z = [y[d] + combination(A[stage, :stage], k, d, h) for d in range(dim)]
        k.append(rhs(t + float(C[stage]) * h, z, p))
    for d in range(dim):
        y_new[d].copy_(y[d] + combination(B, k, d, h))
    k.append(rhs(t_new, [y_new[d] for d in range(dim)], p))
    squares = []
    for d in range(dim):
        f_new[d].copy_(k[6][d])
        scale = atol + tp.maximum(y[d].abs(), y_new[d].abs()) * rtol
        squares.append(((combination(E, k, d, h) / scale) ** 2).sum())
    err.copy_((sum(squares) / y.numel()).sqrt().reshape(1))
    tp.lt(err, 1.0, out=accepted)
    tp.logical_not(tp.logical_and(accepted, t_new == t_end), out=go)


def ops_accept(y, f, y_new, f_new, t, h_abs, err, just_rejected, counts, t_end: float):
    y.copy_(y_new)
    f.copy_(f_new)
    t_new = tp.minimum(t + h_abs, t_end)
    factor = tp.where(err == 0.0, MAX_FACTOR, tp.minimum(SAFETY * err**-0.2, MAX_FACTOR))
    factor = tp.where(just_rejected, tp.minimum(factor, 1.0), factor)
    h_abs.copy_((t_new - t) * factor)
    t.copy_(t_new)
    just_rejected.fill_(False)
    counts[0:1].add_(1)


def ops_reject(t, h_abs, err, just_rejected, counts, t_end: float):
    h = tp.minimum(t + h_abs, t_end) - t
    h_abs.copy_(h * tp.maximum(SAFETY * err**-0.2, MIN_FACTOR))
    just_rejected.fill_(True)
    counts[1:2].add_(1)


class OpsDopri:
    """The ops-only version: the three functions above, compiled, in a while node
    whose body ends with ``g.if_else(accepted)``. The state is held component by
    component, ``[dim, n]`` (a structure of arrays), so that every op of an
    attempt runs over the trajectories alone and the compiler fuses a stage with
    its right-hand side."""

    def __init__(self, system: System, y0: np.ndarray, p: np.ndarray, first_step: float, rtol: float, atol: float):
        self.system, self.first_step, self.rtol, self.atol = system, first_step, rtol, atol
        self.y0, self.p = tp.tensor(np.ascontiguousarray(y0.T)), tp.tensor(np.ascontiguousarray(p.T))
        self.y, self.f, self.y_new, self.f_new = (tp.zeros(*self.y0.shape, dtype=tp.float64) for _ in range(4))
        self.t, self.h_abs, self.err = (tp.zeros(1, dtype=tp.float64) for _ in range(3))
        self.accepted, self.go, self.just_rejected = (tp.zeros(1, dtype=tp.bool) for _ in range(3))
        self.counts = tp.zeros(2, dtype=tp.int64)
        self.attempt, self.accept, self.reject = (tp.compile(fn) for fn in (ops_attempt, ops_accept, ops_reject))
        self.graph = self._capture()

    def _capture(self) -> tp.cuda.CUDAGraph:
        t_end, name = self.system.t_end, self.system.name
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            self.go.fill_(True)
            with g.while_(self.go, max_iters=10_000_000):
                self.attempt(
                    self.y, self.f, self.y_new, self.f_new, self.p, self.t, self.h_abs, self.err, self.accepted,
                    self.go, name, t_end, self.rtol, self.atol,
                )  # fmt: skip
                with g.if_else(self.accepted) as choice:
                    self.accept(
                        self.y, self.f, self.y_new, self.f_new, self.t, self.h_abs, self.err, self.just_rejected,
                        self.counts, t_end,
                    )  # fmt: skip
                    choice.else_()
                    self.reject(self.t, self.h_abs, self.err, self.just_rejected, self.counts, t_end)
        return g

    def reset(self) -> None:
        self.y.copy_(self.y0)
        for d, value in enumerate(OPS_RHS[self.system.name](0.0, list(self.y0), self.p)):
            self.f[d].copy_(value)
        self.t.zero_()
        self.h_abs.fill_(self.first_step)
        self.just_rejected.fill_(False)
        self.counts.zero_()

    def solve(self) -> None:
        self.reset()
        self.graph.replay()

    def result(self) -> tuple[np.ndarray, int, int]:
        counts = self.counts.numpy()
        return self.y.numpy().T, int(counts[0]), int(counts[1])


# -- references ---------------------------------------------------------------------------------


def scipy_ensemble(system: System, y0, p, first_step: float, rtol: float, atol: float):
    """(end states, accepted, rejected) of ``scipy.integrate.RK45`` on the ensemble as one system."""
    from scipy.integrate import RK45

    n = y0.shape[0]
    solver = RK45(
        lambda t, y: system.numpy(y.reshape(n, system.dim), p).ravel(), 0.0, y0.ravel(), system.t_end,
        rtol=rtol, atol=atol, first_step=first_step,
    )  # fmt: skip
    accepted = 0
    while solver.status == "running":
        message = solver.step()
        if solver.status == "failed":
            raise RuntimeError(f"scipy's RK45 failed on {system.name}: {message}")
        accepted += 1
    return solver.y.reshape(n, system.dim), accepted, (solver.nfev - 1) // 6 - accepted


def scipy_one(system: System, y0, p, rtol: float = 1e-12, atol: float = 1e-14) -> np.ndarray:
    """One trajectory's end state from ``solve_ivp`` (RK45) at a tight tolerance."""
    from scipy.integrate import solve_ivp

    def fun(t, y):
        return system.numpy(y[None, :], p[None, :])[0]

    return solve_ivp(fun, (0.0, system.t_end), y0, method="RK45", rtol=rtol, atol=atol).y[:, -1]


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--system", nargs="+", choices=sorted(SYSTEMS), default=sorted(SYSTEMS), help="the systems")
    p.add_argument("--trajectories", type=int, help="trajectories in the ensemble (default 4096; --quick: 8)")
    p.add_argument("--t-end", type=float, help="the end of the integration (default 10, Lorenz 5; --quick: 1)")
    p.add_argument("--rtol", type=float, default=1e-6)
    p.add_argument("--atol", type=float, default=1e-9)
    p.add_argument("--first-step", type=float, default=1e-4, help="the first step's size, for SciPy too")
    p.add_argument("--only", nargs="+", choices=VERSIONS, default=VERSIONS, help="the versions to run (default: all)")
    p.add_argument("--sample", type=int, default=4, help="trajectories checked one by one against solve_ivp")
    args = p.parse_args()
    n = args.trajectories or (8 if args.quick else 4096)
    folder = pictures_folder(args)
    print(
        backend_line(f"Dormand-Prince 5(4), {n} trajectories in one step size, rtol {args.rtol:g}, atol {args.atol:g}")
    )
    validation = Validation("Dormand-Prince against SciPy's RK45")
    for name in args.system:
        base = SYSTEMS[name]
        t_end = args.t_end or (1.0 if args.quick else base.t_end)
        system = System(base.name, base.dim, base.device, base.numpy, t_end)
        y0, params = system.ensemble(n)
        y_ref, acc_ref, rej_ref = scipy_ensemble(system, y0, params, args.first_step, args.rtol, args.atol)
        print(f"\n{name} to t = {t_end:g}: SciPy's RK45 on the ensemble, {acc_ref} steps accepted, {rej_ref} rejected")
        scale = np.abs(y_ref).max()
        for version in args.only:
            make = KernelDopri if version == "kernel" else OpsDopri
            solver = make(system, y0, params, args.first_step, args.rtol, args.atol)
            if not args.quick:
                solver.solve()  # once untimed: kernels compiled
            seconds = timed(solver.solve)
            y, accepted, rejected = solver.result()
            us = seconds / (accepted + rejected) * 1e6
            print(f"  {version}: {accepted} accepted, {rejected} rejected, {us:.1f} us/attempt")
            tag = f"{name} {version}"
            validation.equal(f"{tag}: accepted steps", accepted, acc_ref)
            validation.equal(f"{tag}: rejected steps", rejected, rej_ref)
            validation.at_most(
                f"{tag}: end states against SciPy's (max, relative)", np.abs(y - y_ref).max() / scale, 1e-8
            )
            if version == "kernel":
                for b in range(min(args.sample, n)):
                    one = scipy_one(system, y0[b], params[b])
                    err = np.abs(y[b] - one).max() / np.abs(one).max()
                    validation.at_most(
                        f"{tag}: trajectory {b} against solve_ivp at rtol 1e-12 / rtol", err / args.rtol, 100
                    )
                if folder is not None:
                    _draw(folder, name, solver.steps())
    note = timing_note()
    if note:
        print(note)
    print()
    return validation.report()


def _draw(folder, name: str, steps: np.ndarray) -> None:
    t, h = steps[:, 0], steps[:, 1]
    a, b = (steps[:, 2], steps[:, 4]) if name == "lorenz" else (steps[:, 2], steps[:, 3])
    labels = ("x", "z") if name == "lorenz" else ("y", "dy/dt")
    path = chart(folder / f"dopri_{name}_path.svg", [Series("trajectory 0", a, b)], f"{name}: trajectory 0", *labels)
    size = chart(
        folder / f"dopri_{name}_steps.svg", [Series("accepted step", t, h)], f"{name}: step size", "t", "h", logy=True
    )
    print(f"  pictures: {path}, {size}")


if __name__ == "__main__":
    sys.exit(main())
