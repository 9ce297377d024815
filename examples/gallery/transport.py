"""Monte Carlo particle transport through a slab, event by event, a switch node
choosing each pass's event.

Particles enter a slab of thickness L at x = 0 going right, and move along the
x axis only (the rod model): a free flight of exponential length (total cross
section σ), then, inside the slab, a collision that absorbs the particle with
probability 1 - c or sends it right or left with c / 2 each; a particle that
leaves the slab is transmitted (x >= L) or reflected (x < 0). The simulation
is event-based, as GPU transport codes do it: every particle waits for its
next event, FLIGHT or COLLISION, and each pass of a while node runs one kernel
over the particles waiting for one event: a one-thread kernel picks the event
with the longer queue and sets a switch node's handle
(``tp.cuda.set_conditional``), whose cases are ``flight`` and ``collide``.
Each particle's random numbers are a hash of (seed, particle, its draw count),
so its history does not depend on the order events run in.

Validated against the exact solution of the rod model (two streams):
with κ = σ sqrt(1 - c) and a = σ (1 - c/2), transmission
T = κ / (κ cosh κL + a sinh κL) and reflection R = (cσ/2) sinh κL / (κ cosh κL + a sinh κL),
within 4 standard errors of the tallies; and the tallies against a NumPy
history-by-history version drawing the same numbers, exactly.

The ops-only version (``--only ops``) is tensor ops under ``tp.compile``: the
events as masks, the draws by ``tp.rand``, the switch's index computed by ops.

    python examples/gallery/transport.py [--quick] [--particles 4194304] [--only kernel ops]
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import numpy as np

import tensorplay as tp  # before numba.cuda: tensorplay chooses the GPU or the simulator for it

# isort: split
from charts import Series, chart
from numba import cuda, int64
from validation import Validation, backend_line, parser, pictures_folder, timed, timing_note

VERSIONS = ["kernel", "ops"]
BLOCK = 256 if tp.cuda.backend() == "cuda" else 8
FLIGHT, COLLISION, DONE = 0, 1, 2
TRANSMITTED, REFLECTED, ABSORBED = 0, 1, 2  # the tallies
GOLDEN, M1, M2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
S30, S27, S31, S11, S32 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11), np.uint64(32)
INV53 = 1.0 / (1 << 53)


@dataclass(frozen=True)
class Slab:
    """Thickness ``length`` in mean free paths (σ = 1) and the scattering probability ``c``."""

    length: float = 2.0
    c: float = 0.8

    def exact(self) -> tuple[float, float, float]:
        """(transmitted, reflected, absorbed) shares, from the two-stream equations."""
        k, a, b = math.sqrt(1.0 - self.c), 1.0 - self.c / 2, self.c / 2
        den = k * math.cosh(k * self.length) + a * math.sinh(k * self.length)
        t, r = k / den, b * math.sinh(k * self.length) / den
        return t, r, 1.0 - t - r


# -- the kernels ------------------------------------------------------------------------------


@cuda.jit(device=True)
def uniform(seed, particle, draw):
    """A float64 in [0, 1), the ``draw``-th of ``particle``: SplitMix64's finaliser, the top 53 bits."""
    z = seed + ((np.uint64(particle) << S32) + np.uint64(draw)) * GOLDEN
    z = (z ^ (z >> S30)) * M1
    z = (z ^ (z >> S27)) * M2
    return np.float64((z ^ (z >> S31)) >> S11) * INV53


@cuda.jit(device=True)
def shared_block_sum(value, total, slot):
    """Add the ``value`` of every thread of the block to ``total[slot]``:
    summed in shared memory, then one atomic add per block."""
    partial = cuda.shared.array(BLOCK, int64)
    t = cuda.threadIdx.x
    partial[t] = value
    cuda.syncthreads()
    half = BLOCK // 2
    while half > 0:
        if t < half:
            partial[t] += partial[t + half]
        cuda.syncthreads()
        half //= 2
    if t == 0 and partial[0] != 0:
        cuda.atomic.add(total, slot, partial[0])


@cuda.jit(device=True)
def atomic_sum(value, total, slot):
    """The same sum, an atomic add per thread that has one: what the simulator
    runs, where a kernel that names no shared memory or barrier runs one thread
    after another instead of a Python thread each, ten times faster."""
    if value != 0:
        cuda.atomic.add(total, slot, value)


add_block_sum = shared_block_sum if tp.cuda.backend() == "cuda" else atomic_sum


@tp.jit
def choose(waiting, case, loop):
    """The event with the longer queue runs next; with none waiting, no case
    runs (the index is out of range) and the loop ends."""
    if tp.cuda.grid(1) == 0:
        flights, collisions = waiting[FLIGHT], waiting[COLLISION]
        left = flights + collisions > 0
        tp.cuda.set_conditional(case, np.uint32(2 if not left else FLIGHT if flights >= collisions else COLLISION))
        tp.cuda.set_conditional(loop, np.uint32(1 if left else 0))


@tp.jit
def flight(x, mu, event, draws, seed, length, waiting, tallies):
    """Every particle waiting for a flight flies: out of the slab (tallied, done)
    or to a collision."""
    i = tp.cuda.grid(1)
    left, hit, out, back = 0, 0, 0, 0
    if i < x.size and event[i] == FLIGHT:
        u = uniform(np.uint64(seed), i, draws[i])
        draws[i] += 1
        to = x[i] - mu[i] * math.log(1.0 - u)
        left = 1
        if to >= length:
            event[i], out = DONE, 1
        elif to < 0.0:
            event[i], back = DONE, 1
        else:
            x[i], event[i], hit = to, COLLISION, 1
    add_block_sum(-left, waiting, FLIGHT)
    add_block_sum(hit, waiting, COLLISION)
    add_block_sum(out, tallies, TRANSMITTED)
    add_block_sum(back, tallies, REFLECTED)


@tp.jit
def collide(x, mu, event, draws, seed, c, waiting, tallies):
    """Every particle waiting at a collision is absorbed (done) or sent right or left."""
    i = tp.cuda.grid(1)
    here, again, gone = 0, 0, 0
    if i < x.size and event[i] == COLLISION:
        u = uniform(np.uint64(seed), i, draws[i])
        draws[i] += 1
        here = 1
        if u < c:
            mu[i] = 1.0 if u < 0.5 * c else -1.0
            event[i], again = FLIGHT, 1
        else:
            event[i], gone = DONE, 1
    add_block_sum(-here, waiting, COLLISION)
    add_block_sum(again, waiting, FLIGHT)
    add_block_sum(gone, tallies, ABSORBED)


class KernelTransport:
    """The whole simulation as one graph:
    ``do { choose; switch (event) { flight | collide } } while (particles left)``."""

    def __init__(self, slab: Slab, particles: int, seed: int = 12345) -> None:
        self.slab, self.n, self.seed = slab, particles, np.int64(seed)
        self.x, self.mu = tp.zeros(particles, dtype=tp.float64), tp.zeros(particles, dtype=tp.float64)
        self.event, self.draws = tp.zeros(particles, dtype=tp.int32), tp.zeros(particles, dtype=tp.int64)
        self.waiting, self.tallies = tp.zeros(2, dtype=tp.int64), tp.zeros(3, dtype=tp.int64)
        self.blocks = (particles + BLOCK - 1) // BLOCK
        self.graph = self._capture()

    def _capture(self) -> tp.cuda.CUDAGraph:
        args = (self.x, self.mu, self.event, self.draws, self.seed)
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.while_(max_iters=1 << 40) as self.loop:
                case = g.conditional_handle()
                choose[1, 1](self.waiting, case, self.loop)
                with g.switch_(case, 2) as cases:
                    flight[self.blocks, BLOCK](*args, self.slab.length, self.waiting, self.tallies)
                    cases.next()
                    collide[self.blocks, BLOCK](*args, self.slab.c, self.waiting, self.tallies)
        return g

    def reset(self) -> None:
        """Every particle at x = 0 going right, waiting for a flight."""
        for t in (self.x, self.event, self.draws, self.tallies, self.waiting):
            t.zero_()
        self.mu.fill_(1.0)
        self.waiting[:1].fill_(self.n)

    def solve(self) -> None:
        self.reset()
        self.graph.replay()

    def result(self) -> tuple[np.ndarray, int]:
        """(the tallies: transmitted, reflected, absorbed; the passes)."""
        return self.tallies.numpy(), int(self.loop.iterations.item())


# -- what a user writes first: tensor ops, tp.compile --------------------------------------------


def ops_choose(event, index, go):
    """The switch's index: the longer queue's event, or 2 (no case) with none left."""
    flights, collisions = (event == FLIGHT).sum(), (event == COLLISION).sum()
    left = flights + collisions > 0
    index.copy_(tp.where(left, tp.where(flights >= collisions, FLIGHT, COLLISION), 2).reshape(1))
    go.copy_(left.reshape(1))


def ops_flight(x, mu, event, tallies, length: float):
    flying = event == FLIGHT
    to = x - mu * tp.log(1.0 - tp.rand(x.shape[0], dtype=tp.float64))
    out, back = tp.logical_and(flying, to >= length), tp.logical_and(flying, to < 0.0)
    hit = tp.logical_and(flying, tp.logical_and(to >= 0.0, to < length))
    x.copy_(tp.where(hit, to, x))
    event.copy_(tp.where(tp.logical_or(out, back), DONE, tp.where(hit, COLLISION, event)))
    tallies[TRANSMITTED : TRANSMITTED + 1].add_(out.sum())
    tallies[REFLECTED : REFLECTED + 1].add_(back.sum())


def ops_collide(mu, event, tallies, c: float):
    here = event == COLLISION
    u = tp.rand(mu.shape[0], dtype=tp.float64)
    again, gone = tp.logical_and(here, u < c), tp.logical_and(here, u >= c)
    mu.copy_(tp.where(again, tp.where(u < 0.5 * c, 1.0, -1.0), mu))
    event.copy_(tp.where(gone, DONE, tp.where(again, FLIGHT, event)))
    tallies[ABSORBED : ABSORBED + 1].add_(gone.sum())


class OpsTransport:
    """The ops-only version: the three functions above, compiled; the switch on an index tensor."""

    def __init__(self, slab: Slab, particles: int, seed: int = 12345) -> None:
        self.slab, self.n = slab, particles
        self.x, self.mu = tp.zeros(particles, dtype=tp.float64), tp.zeros(particles, dtype=tp.float64)
        self.event, self.tallies = tp.zeros(particles, dtype=tp.int64), tp.zeros(3, dtype=tp.int64)
        self.index, self.go = tp.zeros(1, dtype=tp.int64), tp.zeros(1, dtype=tp.bool)
        self.choose, self.flight, self.collide = (tp.compile(f) for f in (ops_choose, ops_flight, ops_collide))
        self.graph = self._capture()

    def _capture(self) -> tp.cuda.CUDAGraph:
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            self.go.fill_(True)
            with g.while_(self.go, max_iters=1 << 40) as self.loop:
                self.choose(self.event, self.index, self.go)
                with g.switch_(self.index, 2) as cases:
                    self.flight(self.x, self.mu, self.event, self.tallies, self.slab.length)
                    cases.next()
                    self.collide(self.mu, self.event, self.tallies, self.slab.c)
        return g

    def reset(self) -> None:
        for t in (self.x, self.event, self.tallies):
            t.zero_()
        self.mu.fill_(1.0)

    def solve(self) -> None:
        self.reset()
        self.graph.replay()

    def result(self) -> tuple[np.ndarray, int]:
        return self.tallies.numpy(), int(self.loop.iterations.item())


# -- the NumPy reference: history by history, the same draws --------------------------------------


def numpy_uniform(seed: int, particle: np.ndarray, draw: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + ((particle.astype(np.uint64) << S32) + draw.astype(np.uint64)) * GOLDEN
        z = (z ^ (z >> S30)) * M1
        z = (z ^ (z >> S27)) * M2
    return ((z ^ (z >> S31)) >> S11).astype(np.float64) * INV53


def numpy_histories(slab: Slab, particles: int, seed: int = 12345) -> np.ndarray:
    """The tallies of the same particles, each followed flight by collision to its end."""
    x, mu = np.zeros(particles), np.ones(particles)
    draws, alive, tallies = np.zeros(particles, np.int64), np.arange(particles), np.zeros(3, np.int64)
    while alive.size:
        u = numpy_uniform(seed, alive, draws[alive])
        draws[alive] += 1
        to = x[alive] - mu[alive] * np.log(1.0 - u)
        out, back = to >= slab.length, to < 0.0
        tallies[TRANSMITTED] += out.sum()
        tallies[REFLECTED] += back.sum()
        alive, to = alive[~(out | back)], to[~(out | back)]
        x[alive] = to
        u = numpy_uniform(seed, alive, draws[alive])
        draws[alive] += 1
        gone = u >= slab.c
        tallies[ABSORBED] += gone.sum()
        mu[alive] = np.where(u < 0.5 * slab.c, 1.0, -1.0)
        alive = alive[~gone]
    return tallies


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--particles", type=int, help="particles (default 4194304; --quick: 256)")
    p.add_argument("--length", type=float, default=2.0, help="the slab's thickness, in mean free paths")
    p.add_argument("--c", type=float, default=0.8, help="the probability that a collision scatters")
    p.add_argument("--only", nargs="+", choices=VERSIONS, default=VERSIONS, help="the versions to run (default: all)")
    args = p.parse_args()
    n = args.particles or (256 if args.quick else 1 << 22)
    slab = Slab(args.length, args.c)
    folder = pictures_folder(args)
    print(backend_line(f"Monte Carlo transport through a slab (rod model), {n} particles, event-based"))
    exact = np.array(slab.exact())
    print(f"slab of {slab.length:g} mean free paths, c = {slab.c:g}: exact shares T {exact[0]:.6f}, "
          f"R {exact[1]:.6f}, absorbed {exact[2]:.6f}")  # fmt: skip
    validation = Validation("Monte Carlo transport against the rod model's exact solution")
    names = ("transmitted", "reflected", "absorbed")
    reference = numpy_histories(slab, n) if n <= 1 << 16 else None
    shares = {}
    for version in args.only:
        sim = KernelTransport(slab, n) if version == "kernel" else OpsTransport(slab, n)
        if not args.quick:
            sim.solve()  # once untimed: kernels compiled
        seconds = timed(sim.solve)
        tallies, passes = sim.result()
        share = tallies / n
        shares[version] = share
        print(f"  {version}: {passes} passes, {seconds / passes * 1e6:.1f} us/pass; shares {np.round(share, 6)}")
        validation.equal(f"{version}: every particle tallied once", int(tallies.sum()), n)
        for k, what in enumerate(names):
            sigma = math.sqrt(exact[k] * (1 - exact[k]) / n)
            validation.at_most(f"{version}: {what} share against the exact one / its standard error",
                               abs(share[k] - exact[k]) / sigma, 4.0)  # fmt: skip
        if version == "kernel" and reference is not None:
            validation.at_most("kernel: tallies against NumPy's histories of the same draws (max)",
                               np.abs(tallies - reference).max(), 0)  # fmt: skip
    if folder is not None:
        lengths = np.linspace(0.1, 4.0, 40)
        curves = [Series(f"exact {what}", lengths, [Slab(x, slab.c).exact()[k] for x in lengths])
                  for k, what in enumerate(names)]  # fmt: skip
        for version, share in shares.items():
            curves.append(Series(f"{version} at L = {slab.length:g}", [slab.length] * 3, share, "points"))
        print(f"  picture: {chart(folder / 'transport_shares.svg', curves, 'a slab, c = 0.8', 'L', 'share')}")
    note = timing_note()
    if note:
        print(note)
    print()
    return validation.report()


if __name__ == "__main__":
    sys.exit(main())
