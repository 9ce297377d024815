"""The 2-D Ising model by checkerboard Metropolis, many temperatures at once,
every sweep inside one CUDA graph.

L x L spins on a torus (J = 1, no field), one lattice per temperature. A sweep
is two kernels, one per colour of the checkerboard (a site's four neighbours
are of the other colour, so every site of a colour flips at once), whose
random numbers are a hash of (seed, sweep, site): counter-based, so a graph
draws fresh numbers at every pass and every replay with no host work (the
sweep count lives on the device). The second kernel also sums the
magnetisation per temperature; a one-thread-per-temperature kernel keeps the
moments of |m| and counts the sweep, and ends the do-while loop
(``tp.cuda.set_conditional``) after the last.

Validated against the exact solution: below the critical temperature
Tc = 2 / ln(1 + √2), the spontaneous magnetisation of Onsager and Yang,
M = (1 - sinh(2/T)^-4)^(1/8), within 1 % on 256 x 256; and Tc itself, located
within 1 % where the Binder cumulants U = 1 - <m^4> / (3 <m^2>^2) of 16² and
32² lattices cross (a million sweeps each, the kernel version). At ``--quick``
sizes: the 4 x 4 lattice against the exact averages of all its 2^16 states
(within 4 standard errors of the run's own estimate).

The ops-only version (``--only ops``) is tensor ops under ``tp.compile`` (the
neighbours by ``tp.roll``, the draws by ``tp.rand``, the flips by ``tp.where``).

    python examples/gallery/ising.py [--quick] [--only kernel ops] [--sweeps N] [--plot] [--pictures DIR]
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

import numpy as np

import tensorplay as tp  # before numba.cuda: tensorplay chooses the GPU or the simulator for it

# isort: split
from charts import Series, chart, write_png
from numba import cuda, int64
from validation import Validation, backend_line, parser, pictures_folder, timed, timing_note

TC = 2.0 / math.log(1.0 + math.sqrt(2.0))  # Onsager's critical temperature (J = k = 1)
BLOCK = (32, 8) if tp.cuda.backend() == "cuda" else (4, 4)
SUM_THREADS = BLOCK[0] * BLOCK[1]
GOLDEN, M1, M2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
S30, S27, S31, S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)
INV53 = 1.0 / (1 << 53)
VERSIONS = ["kernel", "ops"]


def onsager(t: float) -> float:
    """The spontaneous magnetisation per spin (Onsager, Yang 1952); 0 above Tc."""
    return (1.0 - math.sinh(2.0 / t) ** -4) ** 0.125 if t < TC else 0.0


@dataclass
class Run:
    """A run's settings: lattice side, temperatures, sweeps (the first ``burn_in``
    not measured), and a seed."""

    side: int
    temperatures: list[float]
    sweeps: int
    burn_in: int
    seed: int = 2024
    ordered: bool = True  # start from all spins up (else at random)
    moments: np.ndarray = field(default=None, repr=False)  # per temperature: <|m|>, <m^2>, <m^4>
    bins: np.ndarray = field(default=None, repr=False)  # per temperature: <|m|> in each of 16 bins of sweeps

    def binder(self) -> np.ndarray:
        return 1.0 - self.moments[:, 2] / (3.0 * self.moments[:, 1] ** 2)

    def error(self) -> np.ndarray:
        """The standard error of <|m|> from the spread of the bin means."""
        return self.bins.std(axis=1, ddof=1) / math.sqrt(self.bins.shape[1])


# -- the kernels ------------------------------------------------------------------------------


@cuda.jit(device=True)
def uniform(seed, counter):
    """A float64 in [0, 1) from the counter: SplitMix64's finaliser, the top 53 bits."""
    z = seed + counter * GOLDEN
    z = (z ^ (z >> S30)) * M1
    z = (z ^ (z >> S27)) * M2
    return np.float64((z ^ (z >> S31)) >> S11) * INV53


@cuda.jit(device=True)
def shared_block_sum(value, total, slot):
    """Add the ``value`` of every thread of the (2-D) block to ``total[slot]``:
    summed in shared memory, then one atomic add per block."""
    partial = cuda.shared.array(SUM_THREADS, int64)
    t = cuda.threadIdx.x + cuda.blockDim.x * cuda.threadIdx.y
    partial[t] = value
    cuda.syncthreads()
    half = SUM_THREADS // 2
    while half > 0:
        if t < half:
            partial[t] += partial[t + half]
        cuda.syncthreads()
        half //= 2
    if t == 0:
        cuda.atomic.add(total, slot, partial[0])


@cuda.jit(device=True)
def atomic_sum(value, total, slot):
    """The same sum, an atomic add per thread: what the simulator runs, where a
    kernel that names no shared memory or barrier runs one thread after another
    instead of a Python thread each, ten times faster."""
    cuda.atomic.add(total, slot, value)


add_block_sum = shared_block_sum if tp.cuda.backend() == "cuda" else atomic_sum


@tp.jit
def metropolis(spins, colour, accept, sweep, offset, seed, m):
    """Flip each site of ``colour`` with Metropolis's probability; thread (h, y, t)
    owns the pair of sites (2h, y), (2h + 1, y) of lattice t, and updates the
    one of this colour. ``accept[t, k]`` = exp(-4 (k + 1) / T); the draws are
    numbered from the sweep (the loop's pass) past ``offset`` (earlier replays').
    After the second colour (1) the pair is final: its spins are added to ``m[t]``."""
    h, y, t = tp.cuda.grid(3)
    lattices, side = spins.shape[0], spins.shape[2]
    pair = 0
    if h < side // 2 and y < side:
        x = 2 * h + ((y + colour) & 1)
        s = spins[t, y, x]
        # the neighbours on the torus by comparisons, not the integer divisions of a modulo
        up, down = (y + 1 if y + 1 < side else 0), (y - 1 if y > 0 else side - 1)
        right, left = (x + 1 if x + 1 < side else 0), (x - 1 if x > 0 else side - 1)
        near = spins[t, up, x] + spins[t, down, x] + spins[t, y, right] + spins[t, y, left]
        k = s * near  # a flip raises the energy by 2k: always taken if k <= 0, else with exp(-2k / T)
        flip = k <= 0
        if not flip:
            draw = (((offset[0] + sweep[0]) * 2 + colour) * lattices + t) * side * side + y * side + x
            flip = uniform(np.uint64(seed), np.uint64(draw)) < accept[t, k // 2 - 1]
        if flip:
            s = -s
            spins[t, y, x] = s
        if colour == 1:
            pair = s + spins[t, y, x ^ 1]
    if colour == 1:
        add_block_sum(pair, m, t)


@tp.jit
def measure(m, moments, bins, sweep, burn_in, sweeps, per_spin, loop):
    """One thread per temperature: the moments of |m| (``per_spin`` = 1 / L²)
    after the burn-in, and <|m|> per bin of sweeps; m zeroed for the next sweep.
    The loop goes on while sweeps are left."""
    t = tp.cuda.grid(1)
    done = sweep[0] + 1  # the loop's own count of passes: the sweeps before this one
    if t < m.size:
        if done > burn_in:
            a = abs(np.float64(m[t])) * per_spin
            a2 = a * a
            moments[t, 0] += a
            moments[t, 1] += a2
            moments[t, 2] += a2 * a2
            bins[t, (done - burn_in - 1) * bins.shape[1] // (sweeps - burn_in)] += a
        m[t] = 0
    if t == 0:
        tp.cuda.set_conditional(loop, np.uint32(1 if done < sweeps else 0))


@tp.jit
def advance(offset, sweeps):
    """After the loop: the next replay draws past this one's numbers."""
    if tp.cuda.grid(1) == 0:
        offset[0] += sweeps


class KernelIsing:
    """A run as one graph: ``do { metropolis 0; metropolis 1; measure } while (sweeps left)``."""

    BINS = 16

    def __init__(self, run: Run, dtype=tp.int32) -> None:
        if run.side % 2 or run.sweeps - run.burn_in < self.BINS:
            raise ValueError(f"expected an even side and at least {self.BINS} measured sweeps, got {run}")
        self.run = run
        n, side = len(run.temperatures), run.side
        self.spins = tp.empty(n, side, side, dtype=dtype)
        beta = 1.0 / np.array(run.temperatures)
        self.accept = tp.tensor(np.exp(-4.0 * beta[:, None] * np.array([1.0, 2.0])))
        self.m = tp.zeros(n, dtype=tp.int64)
        self.moments = tp.zeros(n, 3, dtype=tp.float64)
        self.bins = tp.zeros(n, self.BINS, dtype=tp.float64)
        self.offset = tp.zeros(1, dtype=tp.int64)
        self.grid = (-(-side // 2 // BLOCK[0]), -(-side // BLOCK[1]), n)
        self.graph = self._capture()

    def _capture(self) -> tp.cuda.CUDAGraph:
        run, seed, n = self.run, np.int64(self.run.seed), len(self.run.temperatures)
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.while_(max_iters=run.sweeps) as loop:
                sweep = loop.iterations  # the passes done: counted by the loop itself
                for colour in (0, 1):
                    metropolis[self.grid, BLOCK](self.spins, colour, self.accept, sweep, self.offset, seed, self.m)
                per_spin = 1.0 / run.side**2
                measure[-(-n // 32), 32](
                    self.m, self.moments, self.bins, sweep, run.burn_in, run.sweeps, per_spin, loop
                )
            advance[1, 1](self.offset, run.sweeps)
        return g

    def reset(self) -> None:
        """The spins at their start; the moments zeroed (the random numbers go on)."""
        rng = np.random.default_rng(self.run.seed)
        shape = tuple(self.spins.shape)
        start = np.ones(shape, np.int32) if self.run.ordered else rng.choice(np.array([-1, 1], np.int32), shape)
        self.spins.copy_(tp.tensor(start))
        for t in (self.moments, self.bins, self.m):
            t.zero_()

    def solve(self) -> Run:
        self.reset()
        self.graph.replay()
        return self.result()

    def result(self) -> Run:
        measured = self.run.sweeps - self.run.burn_in
        self.run.moments = self.moments.numpy() / measured
        self.run.bins = self.bins.numpy() / (measured / self.BINS)
        return self.run


# -- what a user writes first: tensor ops, tp.compile --------------------------------------------


def neighbours(spins):
    """The sum of each site's four neighbours on the torus."""
    return tp.roll(spins, 1, 1) + tp.roll(spins, -1, 1) + tp.roll(spins, 1, 2) + tp.roll(spins, -1, 2)


def flipped(spins, near, beta, colour):
    """``spins`` with those of ``colour`` (a checkerboard mask) flipped where a
    uniform draw is under the Metropolis acceptance exp(-2 beta s near)."""
    flip = tp.logical_and(tp.exp(-2.0 * beta * spins * near) > tp.rand(*spins.shape, dtype=tp.float64), colour)
    return tp.where(flip, -spins, spins)


def ops_sweep(spins, colours, beta, moments, bins, bin_numbers, sweep, go, burn_in: int, sweeps: int, per_spin):
    """One sweep of float64 ``spins`` [t, y, x]; ``colours[c]`` is the checkerboard
    mask of colour c; ``beta`` [t, 1, 1] = 1 / T; ``bin_numbers`` = arange(bins).
    The moments as ``measure``'s."""
    for colour in (0, 1):
        spins.copy_(flipped(spins, neighbours(spins), beta, colours[colour]))
    sweep.add_(1)
    weight = (sweep > burn_in).double()  # 0 during the burn-in
    a = spins.sum(dim=(1, 2)).abs() * per_spin * weight
    a2 = a * a
    moments[:, 0].add_(a)
    moments[:, 1].add_(a2)
    moments[:, 2].add_(a2 * a2)
    here = (sweep - burn_in - 1) * bins.shape[1] // (sweeps - burn_in)  # this sweep's bin
    bins.add_(a[:, None] * (bin_numbers == here).double())
    tp.lt(sweep, sweeps, out=go)


class OpsIsing(KernelIsing):
    """The ops-only version: ``ops_sweep``, compiled, in ``g.while_(go)``."""

    def __init__(self, run: Run) -> None:
        side = run.side
        checker = (np.arange(side)[:, None] + np.arange(side)[None, :]) % 2
        self.colours = tp.tensor(np.stack([checker == 0, checker == 1])[:, None])  # [c, 1, y, x]
        self.beta = tp.tensor(1.0 / np.array(run.temperatures)[:, None, None])
        self.sweep_count, self.go = tp.zeros(1, dtype=tp.int64), tp.empty(1, dtype=tp.bool)
        self.bin_numbers = tp.arange(self.BINS, dtype=tp.int64)
        self.step = tp.compile(ops_sweep)
        super().__init__(run, dtype=tp.float64)  # which captures the graph: ours

    def _capture(self) -> tp.cuda.CUDAGraph:
        run = self.run
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            self.go.fill_(True)
            with g.while_(self.go):
                self.step(
                    self.spins, self.colours, self.beta, self.moments, self.bins, self.bin_numbers, self.sweep_count,
                    self.go, run.burn_in, run.sweeps, 1.0 / run.side**2,
                )  # fmt: skip
        return g

    def reset(self) -> None:
        super().reset()
        self.sweep_count.zero_()


# -- the references -----------------------------------------------------------------------------


def exact_moments(side: int, temperatures) -> np.ndarray:
    """<|m|>, <m^2>, <m^4> per temperature over all 2^(side²) states (side <= 4)."""
    n = side * side
    states = ((np.arange(2**n)[:, None] >> np.arange(n)) & 1).astype(np.int8) * 2 - 1
    s = states.reshape(-1, side, side)
    energy = -(s * np.roll(s, 1, 1) + s * np.roll(s, 1, 2)).sum(axis=(1, 2)).astype(np.float64)
    m = np.abs(s.sum(axis=(1, 2))) / n
    out = []
    for t in temperatures:
        w = np.exp(-(energy - energy.min()) / t)
        out.append([np.sum(w * m**k) / w.sum() for k in (1, 2, 4)])
    return np.array(out)


def crossing(temperatures, small: np.ndarray, large: np.ndarray) -> float:
    """Where the Binder cumulants of two sizes cross: the root of a straight line
    fitted to their difference."""
    slope, intercept = np.polyfit(np.asarray(temperatures), large - small, 1)
    return float(-intercept / slope)


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--only", nargs="+", choices=VERSIONS, default=VERSIONS, help="the versions to run (default: all)")
    p.add_argument("--sweeps", type=int, help="sweeps per run (default 20000 on 256²; --quick: 400)")
    p.add_argument("--side", type=int, default=256, help="the lattices' side for the magnetisation (default 256)")
    p.add_argument("--binder-sides", type=int, nargs=2, default=[16, 32], help="the two sizes whose cumulants cross")
    p.add_argument("--binder-sweeps", type=int, default=1_000_000, help="sweeps of each size for the cumulants")
    p.add_argument("--temperatures", type=float, nargs="+", help="--quick: the temperatures (default 2 3)")
    args = p.parse_args()
    folder = pictures_folder(args)
    print(backend_line("2-D Ising model, checkerboard Metropolis, many temperatures at once"))
    validation = Validation("2-D Ising model against its exact solution")
    versions = [(name, {"kernel": KernelIsing, "ops": OpsIsing}[name]) for name in args.only]
    if args.quick:
        temps = args.temperatures or [2.0, 3.0]
        exact = exact_moments(4, temps)
        for name, make in versions:
            sweeps = args.sweeps or 400
            run = Run(4, temps, sweeps, burn_in=sweeps // 10)
            solver = make(run)
            seconds = timed(solver.solve)
            solver.result()
            us = seconds / run.sweeps * 1e6
            print(f"  {name}: {run.sweeps} sweeps of {len(temps)} lattices of 4x4, {us:.0f} us/sweep")
            for k, t in enumerate(temps):
                got, sigma, want = run.moments[k, 0], run.error()[k], exact[k, 0]
                print(f"    T = {t}: <|m|> = {got:.4f} ± {sigma:.4f}, exact {want:.4f}")
                validation.at_most(f"{name} T={t}: |<|m|> - exact| / its standard error", abs(got - want) / sigma, 4.0)
        return _finish(validation)
    below = [1.5, 1.8, 2.0, 2.1, 2.2]
    for name, make in versions:
        sweeps = args.sweeps or 20_000
        run = Run(args.side, below, sweeps, burn_in=sweeps // 10)
        solver = make(run)
        solver.solve()  # once untimed: kernels compiled
        seconds = timed(solver.solve)
        us = seconds / run.sweeps * 1e6
        print(f"\n{name}: {run.side}x{run.side}, {len(below)} temperatures, {run.sweeps} sweeps, {us:.1f} us/sweep")
        for k, t in enumerate(below):
            got, want = run.moments[k, 0], onsager(t)
            print(f"  T = {t}: <|m|> = {got:.5f} ± {run.error()[k]:.5f}, Onsager-Yang {want:.5f}")
            validation.at_most(f"{name} T={t}: <|m|> against Onsager-Yang (relative)", abs(got / want - 1), 0.01)
        if folder is not None and name == "kernel":
            _draw_magnetisation(folder, run)
            write_png(str(folder / "ising_spins_2.2.png"), solver.spins.numpy()[-1])
    if "kernel" not in args.only:
        return _finish(validation)
    near = np.round(np.linspace(2.24, 2.30, 7), 3)  # the cumulants' difference is close to a line here
    runs = [Run(side, list(near), args.binder_sweeps, burn_in=args.binder_sweeps // 20) for side in args.binder_sides]
    for run in runs:
        KernelIsing(run).solve()
    binder = [run.binder() for run in runs]
    tc = crossing(near, *binder)
    sides = " and ".join(f"{side}x{side}" for side in args.binder_sides)
    print(f"\nkernel: the Binder cumulants of {sides} ({args.binder_sweeps} sweeps) cross at T = {tc:.4f}")
    print(f"  Onsager's Tc: {TC:.4f}")
    validation.at_most("kernel: Tc where the Binder cumulants cross (relative)", abs(tc / TC - 1), 0.01)
    if folder is not None:
        series = [Series(f"{run.side}x{run.side}", near, b) for run, b in zip(runs, binder, strict=True)]
        series.append(Series("Tc (Onsager)", [TC, TC], [min(map(min, binder)), max(map(max, binder))]))
        print(f"  picture: {chart(folder / 'ising_binder.svg', series, 'Binder cumulant', 'T', 'U')}")
    return _finish(validation)


def _draw_magnetisation(folder, run: Run) -> None:
    t = np.linspace(1.0, 3.0, 400)
    series = [Series("Onsager-Yang", t, [onsager(v) for v in t])]
    series.append(Series("tensorplay", run.temperatures, run.moments[:, 0], "points"))
    title = f"magnetisation per spin, {run.side}x{run.side}"
    path = chart(folder / "ising_magnetisation.svg", series, title, "T", "<|m|>")
    print(f"  picture: {path}")


def _finish(validation: Validation) -> int:
    note = timing_note()
    if note:
        print(note)
    print()
    return validation.report()


if __name__ == "__main__":
    sys.exit(main())
