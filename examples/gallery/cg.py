"""Conjugate gradient on the 2-D Poisson equation, the whole solve one CUDA graph.

-Δu = f on the unit square with u = 0 on its edges, on n x n interior points
(the 5-point stencil, A = 4 on the diagonal and -1 beside it, b = h² f), solved
by conjugate gradient to a relative residual of 1e-8 in float64. Five
versions, each one graph launch whose while node runs every iteration:

* ``stencil``: two kernels of our own per iteration, the matrix applied
  matrix-free: ``direction`` (p = r + βp read on the fly, Ap, and p·Ap summed
  per block with one atomic add each) and ``update`` (p, x and r, and r·r
  summed the same way; its last block to finish, counted by a ticket, does the
  scalar work: β, the convergence test, ``tp.cuda.set_conditional`` on the
  loop: a do-while driven by our kernel), ``PER_PASS`` iterations a pass;
* ``csr``: the same with the matrix as a CSR sparse matrix (built here, in
  NumPy) and a sparse matrix-vector kernel of our own;
* ``cooperative``: a pass is one kernel that synchronises its whole grid
  (``cuda.cg.this_grid().sync()``; tensorplay launches it cooperatively, every
  block on the device at once). Each thread keeps its share of x, r and p in
  registers for the pass's ``COOPERATIVE_PER_PASS`` iterations: an iteration
  writes p for the stencil's neighbours and reads it back, and waits for the
  whole grid three times (p written, p·Ap summed, r·r summed); its loop is
  ``g.while_(go)``, the flag written by the kernel;
* ``shared``: a pass is one cooperative kernel too, each block holding a
  band of rows of x, r and p in shared memory for the pass (more than the
  48 KiB a kernel gets by default: tensorplay's launch raises the kernel's
  limit), with the neighbouring bands' edge rows swapped through a small
  buffer; two grid-wide waits an iteration (p·Ap, r·r), each block adding the
  blocks' partial sums in the same order. It fits grids whose vectors do not
  fit in registers (the 1024² grid on an H100);
* ``ops``: what a user writes first, tensor ops in a ``tp.compile``d step (the
  stencil as five in-place shifted-slice updates of a padded array, two dot
  products, α and β as one-element tensors) inside ``g.while_(flag)``.

Validated against ``scipy.sparse.linalg.cg`` on SciPy's own matrix (built with
``kron``): the same iteration count within 2 % and the same solution within
1e-6 (relative to its largest value). The right-hand side comes from
u(x, y) = x(1 - x) y(1 - y), whose fourth derivatives vanish, so the 5-point
stencil is exact for it: the discrete solution is that function at the points,
a check with no solver in it at all.

    python examples/gallery/cg.py [--quick] [--n 256 1024] [--plot] [--pictures DIR]
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from functools import cache, cached_property

import numpy as np

import tensorplay as tp  # before numba.cuda: tensorplay chooses the GPU or the simulator for it

# isort: split
from charts import Series, chart, write_png
from numba import cuda, float64
from validation import Validation, backend_line, parser, pictures_folder, timed, timing_note

TOL = 1e-8
BLOCK = 256 if tp.cuda.backend() == "cuda" else 32  # the simulator runs a Python thread per CUDA thread
# Blocks of a kernel at most (about a wave of the H100's or H200's 132 SMs; the threads loop over the
# rest): each block adds its share of a dot product to one float64 with an atomic add, and the adds to
# one address queue up (a block per 256 points was 4096 of them a dot product on the 1024² grid).
MAX_BLOCKS = 1056 if tp.cuda.backend() == "cuda" else 4
# Iterations a pass of the while node: a pass costs about 4 us beyond its kernels on an H100, as much as
# half an iteration on the 256² grid; four a pass pay it once for four. Once r·r is under the tolerance,
# the kernels of the pass's later iterations return at once (``converged``), so the iterations and the
# answer are those of one a pass.
PER_PASS = 4
# Iterations a pass of the cooperative version: x, r and p are read into registers at a pass's start
# and written back at its end, three vectors each way, as much memory as an iteration of ``stencil``.
COOPERATIVE_PER_PASS = 32
VERSIONS = ["stencil", "csr", "cooperative", "shared", "ops"]
RR, RR_NEW, PAP, BETA, STOP = range(5)  # the solver's scalars, in one float64 tensor on the device


@dataclass(frozen=True)
class Poisson:
    """The n x n problem: point (i, j) at (x_i, y_j) = ((i + 1) h, (j + 1) h),
    h = 1 / (n + 1), unknown k = i n + j."""

    n: int

    @cached_property
    def points(self) -> np.ndarray:
        return (np.arange(self.n) + 1.0) / (self.n + 1)

    @cached_property
    def exact(self) -> np.ndarray:
        """u = x(1 - x) y(1 - y) at the points: the discrete solution too."""
        s = self.points * (1 - self.points)
        return np.outer(s, s)

    @cached_property
    def b(self) -> np.ndarray:
        """h² f, f = -Δu = 2 (x(1 - x) + y(1 - y))."""
        s, h = self.points * (1 - self.points), 1.0 / (self.n + 1)
        return h * h * 2.0 * (s[:, None] + s[None, :])

    def csr(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(row pointers, column indices, values) of A, rows in order, columns sorted."""
        n = self.n
        k = np.arange(n * n)
        i, j = k // n, k % n
        cols = np.stack([k - n, k - 1, k, k + 1, k + n], axis=1)
        keep = np.stack([i > 0, j > 0, np.ones_like(i, bool), j < n - 1, i < n - 1], axis=1)
        values = np.broadcast_to(np.array([-1.0, -1.0, 4.0, -1.0, -1.0]), cols.shape)
        indptr = np.concatenate([[0], np.cumsum(keep.sum(axis=1))]).astype(np.int32)
        return indptr, cols[keep].astype(np.int32), values[keep].copy()

    def residual(self, x: np.ndarray) -> float:
        """‖b - A x‖ / ‖b‖ in float64 on the host (A applied as the stencil)."""
        u = np.pad(x.reshape(self.n, self.n), 1)
        ax = 4 * u[1:-1, 1:-1] - u[:-2, 1:-1] - u[2:, 1:-1] - u[1:-1, :-2] - u[1:-1, 2:]
        return float(np.linalg.norm(self.b - ax) / np.linalg.norm(self.b))


# -- the kernels ------------------------------------------------------------------------------


@cuda.jit(device=True)
def shared_block_sum(value, total, slot):
    """Add the ``value`` of every thread of the block to ``total[slot]``: summed
    in shared memory, then one atomic add per block."""
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
    if t == 0:
        cuda.atomic.add(total, slot, partial[0])


@cuda.jit(device=True)
def atomic_sum(value, total, slot):
    """The same sum, an atomic add per thread: what the simulator runs, where a
    kernel that names no shared memory or barrier runs one thread after another
    instead of a Python thread each, ten times faster."""
    cuda.atomic.add(total, slot, value)


add_block_sum = shared_block_sum if tp.cuda.backend() == "cuda" else atomic_sum


@cuda.jit(device=True)
def converged(s):
    """True once r·r is under the tolerance: a later iteration of the pass does nothing."""
    return s[RR] <= s[STOP]


@tp.jit
def stencil_direction(r, p, ap, s, n):
    """Ap for p = r + βp (read on the fly: ``update`` stores it), matrix-free; p·Ap into s[PAP]."""
    if converged(s):
        return
    k, step = tp.cuda.grid(1), cuda.gridsize(1)
    beta, v = s[BETA], 0.0
    while k < n * n:
        i = k // n
        j = k - i * n
        c = r[k] + beta * p[k]
        a = 4.0 * c
        if i > 0:
            a -= r[k - n] + beta * p[k - n]
        if i < n - 1:
            a -= r[k + n] + beta * p[k + n]
        if j > 0:
            a -= r[k - 1] + beta * p[k - 1]
        if j < n - 1:
            a -= r[k + 1] + beta * p[k + 1]
        ap[k] = a
        v += c * a
        k += step
    add_block_sum(v, s, PAP)


@tp.jit
def csr_direction(indptr, indices, values, r, p, ap, s):
    """As ``stencil_direction``, A a CSR sparse matrix: a row per thread at a time."""
    if converged(s):
        return
    k, step = tp.cuda.grid(1), cuda.gridsize(1)
    beta, v = s[BETA], 0.0
    while k < r.size:
        a = 0.0
        for e in range(indptr[k], indptr[k + 1]):
            j = indices[e]
            a += values[e] * (r[j] + beta * p[j])
        ap[k] = a
        v += (r[k] + beta * p[k]) * a
        k += step
    add_block_sum(v, s, PAP)


@tp.jit
def update(x, r, p, ap, s, done, iters, history, loop):
    """p = r + βp, x += αp, r -= αAp with α = r·r / p·Ap; the new r·r into
    s[RR_NEW]. The block that finishes last (``done`` counts them) then does the
    pass's scalar work: β for the next pass, the sums zeroed, the residual kept,
    and the loop goes on while r·r > tol² b·b."""
    if converged(s):  # in an earlier iteration of the pass, which ended the loop
        return
    k, step = r.size - 1 - tp.cuda.grid(1), cuda.gridsize(1)
    alpha, beta, v = s[RR] / s[PAP], s[BETA], 0.0
    while k >= 0:  # from the end: what stencil_direction wrote last is still in the L2 cache, and so for it
        pk = r[k] + beta * p[k]
        p[k] = pk
        x[k] += alpha * pk
        rk = r[k] - alpha * ap[k]
        r[k] = rk
        v += rk * rk
        k -= step
    add_block_sum(v, s, RR_NEW)
    cuda.syncthreads()  # every thread's share of r·r added before the block counts itself done
    if cuda.threadIdx.x == 0:
        cuda.threadfence()
        if cuda.atomic.add(done, 0, 1) == cuda.gridDim.x - 1:  # the last block: every sum is complete
            rr = cuda.atomic.add(s, RR_NEW, 0.0)  # read where the other blocks' atomic adds landed
            s[BETA] = rr / s[RR]
            s[RR] = rr
            s[RR_NEW] = 0.0
            s[PAP] = 0.0
            done[0] = 0
            n = iters[0] + 1
            iters[0] = n
            if n < history.size:
                history[n] = rr
            tp.cuda.set_conditional(loop, np.uint32(1 if rr > s[STOP] else 0))


class KernelCG:
    """CG with the kernels above, the solve one graph: ``with g.while_() as loop``
    (a do-while that ``update``'s last block drives), ``PER_PASS`` iterations of
    two kernels a pass."""

    def __init__(self, problem: Poisson, matrix: str = "stencil", max_iters: int | None = None) -> None:
        if matrix not in ("stencil", "csr"):
            raise ValueError(f"expected matrix 'stencil' or 'csr', got {matrix!r}")
        self.problem, self.matrix = problem, matrix
        self.max_iters = max_iters or 20 * problem.n + 100
        size = problem.n * problem.n
        self.b = tp.tensor(problem.b.ravel())
        self.x, self.r, self.p, self.ap = (tp.zeros(size, dtype=tp.float64) for _ in range(4))
        self.s = tp.zeros(5, dtype=tp.float64)
        self.iters = tp.zeros(1, dtype=tp.int64)
        self.done = tp.zeros(1, dtype=tp.int32)  # blocks of ``update`` done this pass
        self.history = tp.zeros(self.max_iters + 1, dtype=tp.float64)
        self.csr = tuple(tp.tensor(a) for a in problem.csr()) if matrix == "csr" else None
        self.blocks = min((size + BLOCK - 1) // BLOCK, MAX_BLOCKS)
        bb = float(np.sum(problem.b**2))
        self.start = tp.tensor([bb, 0.0, 0.0, 0.0, TOL * TOL * bb], dtype=tp.float64)
        self.graph = self._capture()

    def reset(self) -> None:
        """x = 0, r = b, p = 0, β = 0: the first pass's direction is r."""
        for t in (self.x, self.p, self.iters, self.history, self.done):
            t.zero_()
        self.r.copy_(self.b)
        self.s.copy_(self.start)
        self.history[:1].copy_(self.start[:1])

    def _capture(self) -> tp.cuda.CUDAGraph:
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.while_(max_iters=-(-self.max_iters // PER_PASS)) as loop:
                for _ in range(PER_PASS):
                    if self.csr is None:
                        stencil_direction[self.blocks, BLOCK](self.r, self.p, self.ap, self.s, self.problem.n)
                    else:
                        csr_direction[self.blocks, BLOCK](*self.csr, self.r, self.p, self.ap, self.s)
                    update[self.blocks, BLOCK](
                        self.x, self.r, self.p, self.ap, self.s, self.done, self.iters, self.history, loop
                    )
        return g

    def solve(self) -> None:
        """Reset, then the whole solve in one launch."""
        self.reset()
        self.graph.replay()

    def result(self) -> tuple[np.ndarray, int]:
        return self.x.numpy(), int(self.iters.item())

    def residuals(self) -> np.ndarray:
        """‖r‖ / ‖b‖ after each iteration (index 0: before the first)."""
        rr = self.history.numpy()[: int(self.iters.item()) + 1]
        return np.sqrt(rr / rr[0])


# -- one cooperative kernel a pass ------------------------------------------------------------

PAP_SUMS, RR_SUMS = 0, 2  # the cooperative pass's sums, two slots each: iteration t adds into slot t % 2


@cache
def cooperative_pass(per_thread: int):
    """The pass kernel with ``per_thread`` elements a thread (thread k's are k, k + T, k + 2T, ...
    for T threads in all), kept in registers between the grid's waits."""

    @tp.jit
    def cg_pass(x, r, p, shared_p, s, sums, iters, history, go, n, per_pass):
        """``per_pass`` iterations at most, fewer once r·r is under the tolerance; s holds r·r, β
        and the tolerance between passes, ``sums`` the iterations' block sums; ``go[0]``: not
        yet converged (the while node's flag: a kernel that waits for its grid cannot also set
        the node's handle, as both link CUDA's device runtime)."""
        grid = cuda.cg.this_grid()
        k0, step, size = tp.cuda.grid(1), cuda.gridsize(1), n * n
        first = k0 == 0
        xs = cuda.local.array(per_thread, float64)
        rs = cuda.local.array(per_thread, float64)
        ps = cuda.local.array(per_thread, float64)
        aps = cuda.local.array(per_thread, float64)
        for e in range(per_thread):
            k = k0 + e * step
            if k < size:
                xs[e], rs[e], ps[e] = x[k], r[k], p[k]
        rr, beta, stop, done = s[RR], s[BETA], s[STOP], iters[0]
        t = 0
        while rr > stop and t < per_pass:
            slot = t % 2
            for e in range(per_thread):  # p = r + βp, for the neighbours too
                k = k0 + e * step
                if k < size:
                    ps[e] = rs[e] + beta * ps[e]
                    shared_p[k] = ps[e]
            grid.sync()
            if first:
                sums[RR_SUMS + 1 - slot] = 0.0  # every thread read it before the wait above
            v = 0.0
            for e in range(per_thread):  # Ap, and p·Ap
                k = k0 + e * step
                if k < size:
                    i = k // n
                    j = k - i * n
                    a = 4.0 * ps[e]
                    if i > 0:
                        a -= shared_p[k - n]
                    if i < n - 1:
                        a -= shared_p[k + n]
                    if j > 0:
                        a -= shared_p[k - 1]
                    if j < n - 1:
                        a -= shared_p[k + 1]
                    aps[e] = a
                    v += ps[e] * a
            add_block_sum(v, sums, PAP_SUMS + slot)
            grid.sync()
            alpha, v = rr / sums[PAP_SUMS + slot], 0.0
            for e in range(per_thread):  # x += αp, r -= αAp, and r·r
                k = k0 + e * step
                if k < size:
                    xs[e] += alpha * ps[e]
                    rs[e] -= alpha * aps[e]
                    v += rs[e] * rs[e]
            if first:
                sums[PAP_SUMS + 1 - slot] = 0.0  # read before the wait above
            add_block_sum(v, sums, RR_SUMS + slot)
            grid.sync()
            rr_new = sums[RR_SUMS + slot]
            beta, rr, done, t = rr_new / rr, rr_new, done + 1, t + 1
            if first and done < history.size:
                history[done] = rr
        for e in range(per_thread):
            k = k0 + e * step
            if k < size:
                x[k], r[k], p[k] = xs[e], rs[e], ps[e]
        grid.sync()  # every thread has read the sums
        if first:
            s[RR], s[BETA], iters[0] = rr, beta, done
            for q in range(4):
                sums[q] = 0.0
            go[0] = rr > stop

    return cg_pass


MAX_PER_THREAD = 8  # beyond, the four vectors' registers spill (255 registers a thread at 8 on sm_90)


class DoesNotFit(ValueError):
    """The grid is too large for the cooperative version on this device."""


class CooperativeCG(KernelCG):
    """CG as one cooperative kernel a pass (``cooperative_pass``), ``COOPERATIVE_PER_PASS`` iterations
    of it a pass of ``g.while_(go)``, each thread with as few elements as lets every block
    of the grid be on the device at once."""

    def __init__(self, problem: Poisson, max_iters: int | None = None) -> None:
        super().__init__(problem, "stencil", max_iters)

    def _capture(self) -> tp.cuda.CUDAGraph:
        n = self.problem.n
        self.sums = tp.zeros(4, dtype=tp.float64)
        self.go = tp.ones(1, dtype=tp.bool)
        args = [self.x, self.r, self.p, self.ap, self.s, self.sums, self.iters, self.history, self.go, n]
        args += [COOPERATIVE_PER_PASS]
        kernel, self.blocks = self._fitting_kernel(args)  # chosen before the capture, which a refusal would end
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.while_(self.go, max_iters=-(-self.max_iters // COOPERATIVE_PER_PASS)):
                kernel[self.blocks, BLOCK](*args)
        return g

    def _fitting_kernel(self, args: list):
        """(kernel, blocks) with the fewest points a thread whose grid fits on the device at once."""
        size = self.problem.n**2
        for per_thread in (1, 2, 4, MAX_PER_THREAD):
            kernel = cooperative_pass(per_thread)
            blocks = -(-size // (per_thread * BLOCK))
            most = kernel.max_cooperative_blocks(BLOCK, *args)
            if blocks <= most:
                return kernel, blocks
        raise DoesNotFit(
            f"the cooperative version keeps x, r, p and Ap in registers, {MAX_PER_THREAD} points a thread at "
            f"most: {size} points need more threads than the {most * BLOCK} that fit on this device at once; "
            "the stencil version takes any size"
        )

    def reset(self) -> None:
        super().reset()
        self.sums.zero_()
        self.go.fill_(True)


# -- one cooperative kernel a pass, the vectors in shared memory ------------------------------------

# Threads a block of the shared-memory version at most (the simulator runs a Python thread per CUDA thread).
SHARED_THREADS = 1024 if tp.cuda.backend() == "cuda" else 32
SCRATCH = 33  # a block sum's shared slots: a partial per warp and the total


@cuda.jit(device=True)
def shuffle_block_total(value, scratch):
    """The sum of ``value`` over the block's threads, in every thread: within each warp by
    shuffles, then the warps' partials by the first warp. Blocks of whole warps."""
    d = 16
    while d > 0:
        value += cuda.shfl_down_sync(0xFFFFFFFF, value, d)
        d //= 2
    t = cuda.threadIdx.x
    if t % 32 == 0:
        scratch[t // 32] = value
    cuda.syncthreads()
    if t < 32:
        v = scratch[t] if t < cuda.blockDim.x // 32 else 0.0
        d = 16
        while d > 0:
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, d)
            d //= 2
        if t == 0:
            scratch[32] = v
    cuda.syncthreads()
    return scratch[32]


@cuda.jit(device=True)
def tree_block_total(value, scratch):
    """The same in a tree in shared memory, for the simulator (which has no shuffles): one warp."""
    t = cuda.threadIdx.x
    scratch[t] = value
    cuda.syncthreads()
    half = 16
    while half > 0:
        if t < half:
            scratch[t] += scratch[t + half]
        cuda.syncthreads()
        half //= 2
    total = scratch[0]
    cuda.syncthreads()  # every thread has read it before the next sum writes
    return total


block_total = shuffle_block_total if tp.cuda.backend() == "cuda" else tree_block_total


@cuda.jit(device=True)
def grid_total(partials, first, blocks, scratch):
    """The sum of ``partials[first : first + blocks]``, in every thread of every block, each
    block adding them in the same order: the same float64 everywhere."""
    v, q = 0.0, cuda.threadIdx.x
    while q < blocks:
        v += partials[first + q]
        q += cuda.blockDim.x
    return block_total(v, scratch)


@cuda.jit(device=True)
def halo_row(sh, at, r, p, start, beta, n):
    """p = r + βp for the n points of a neighbour's row (``r[start:]`` and ``p[start:]``) into ``sh[at:]``."""
    j = cuda.threadIdx.x
    while j < n:
        sh[at + j] = r[start + j] + beta * p[start + j]
        j += cuda.blockDim.x


@cuda.jit(device=True)
def stencil_at(sh, at, j, n):
    """(Ap, p) at the point whose p is ``sh[at]``, in column j: the rows above and below are n apart."""
    c = sh[at]
    a = 4.0 * c - sh[at - n] - sh[at + n]
    if j > 0:
        a -= sh[at - 1]
    if j < n - 1:
        a -= sh[at + 1]
    return a, c


@cuda.jit(device=True)
def next_column(j, step, n):
    """The column ``step`` points after column j, in rows of n."""
    j += step
    while j >= n:
        j -= n
    return j


@tp.jit
def shared_pass(x, r, p, edges, s, partials, iters, history, go, n, rows, per_pass):
    """``per_pass`` iterations at most, fewer once r·r is under the tolerance. Block b holds rows
    ``[b rows, (b + 1) rows)`` of x, r and p in shared memory for the pass, p with a row of each
    neighbour block above and below (zero at the domain's edge); an iteration writes its first and
    last rows of r and p to ``edges`` for the neighbours and waits for the grid twice: p·Ap summed,
    then r·r summed. ``partials``: the blocks' sums, p·Ap then r·r. Ap is formed twice from the
    shared p, for p·Ap and for r, as no fourth vector fits beside the three."""
    grid = cuda.cg.this_grid()
    sh = cuda.shared.array(0, float64)
    scratch = cuda.shared.array(SCRATCH, float64)
    b, t, threads, blocks = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x, cuda.gridDim.x
    row0 = b * rows
    own = min(rows, n - row0) * n  # this block's points
    base, xs, rs = row0 * n, 0, rows * n
    ps = 2 * rows * n + n  # p's own rows in sh; the halo rows just before and after
    q = t
    while q < own:
        sh[xs + q], sh[rs + q], sh[ps + q] = x[base + q], r[base + q], p[base + q]
        q += threads
    j = t
    while j < n:
        if b == 0:
            sh[ps - n + j] = 0.0
        if b == blocks - 1:
            sh[ps + own + j] = 0.0
        j += threads
    rr, beta, stop, done = s[RR], s[BETA], s[STOP], iters[0]
    mine = b * 4 * n  # this block's rows in edges: r and p of its first row, then of its last
    t0 = t % n  # the column of the thread's first point (then kept by next_column: no division a point)
    it = 0
    while rr > stop and it < per_pass:
        q = t
        while q < own:  # p = r + βp
            sh[ps + q] = sh[rs + q] + beta * sh[ps + q]
            q += threads
        if b > 0:  # the row above: from r and p at the pass's start, then from the neighbour's edges
            if it == 0:
                halo_row(sh, ps - n, r, p, base - n, beta, n)
            else:
                halo_row(sh, ps - n, edges, edges[n:], mine - 2 * n, beta, n)
        if b < blocks - 1:
            if it == 0:
                halo_row(sh, ps + own, r, p, base + own, beta, n)
            else:
                halo_row(sh, ps + own, edges, edges[n:], mine + 4 * n, beta, n)
        cuda.syncthreads()
        v, q, j = 0.0, t, t0
        while q < own:  # p·Ap
            a, c = stencil_at(sh, ps + q, j, n)
            v += c * a
            q, j = q + threads, next_column(j, threads, n)
        v = block_total(v, scratch)
        if t == 0:
            partials[b] = v
        grid.sync()
        alpha, v, q, j = rr / grid_total(partials, 0, blocks, scratch), 0.0, t, t0
        while q < own:  # x += αp, r -= αAp, r·r; the first and last rows for the neighbours
            a, c = stencil_at(sh, ps + q, j, n)
            sh[xs + q] += alpha * c
            rq = sh[rs + q] - alpha * a
            sh[rs + q] = rq
            v += rq * rq
            if q < n:
                edges[mine + q], edges[mine + n + q] = rq, c
            if q >= own - n:
                edges[mine + 2 * n + q - (own - n)], edges[mine + 3 * n + q - (own - n)] = rq, c
            q, j = q + threads, next_column(j, threads, n)
        v = block_total(v, scratch)
        if t == 0:
            partials[blocks + b] = v
        grid.sync()
        rr_new = grid_total(partials, blocks, blocks, scratch)
        beta, rr, done, it = rr_new / rr, rr_new, done + 1, it + 1
        if b == 0 and t == 0 and done < history.size:
            history[done] = rr
    q = t
    while q < own:
        x[base + q], r[base + q], p[base + q] = sh[xs + q], sh[rs + q], sh[ps + q]
        q += threads
    if b == 0 and t == 0:  # every block read s before its first wait, or read the same values
        s[RR], s[BETA], iters[0] = rr, beta, done
        go[0] = rr > stop


class SharedCG(KernelCG):
    """CG as one cooperative kernel a pass (``shared_pass``), ``COOPERATIVE_PER_PASS`` iterations a
    pass of ``g.while_(go)``: each block keeps a band of rows of x, r and p in shared memory for the
    pass, as few rows as let the grid be on the device at once and the band fit a block's shared
    memory (227 KiB on an H100 or H200: eight rows of 1024 points)."""

    def __init__(self, problem: Poisson, max_iters: int | None = None) -> None:
        super().__init__(problem, "stencil", max_iters)

    def _capture(self) -> tp.cuda.CUDAGraph:
        n = self.problem.n
        self.go = tp.ones(1, dtype=tp.bool)
        self.blocks, threads, rows, nbytes = self._fitting_band()
        self.edges = tp.zeros(4 * n * self.blocks, dtype=tp.float64)
        self.partials = tp.zeros(2 * self.blocks, dtype=tp.float64)
        args = [self.x, self.r, self.p, self.edges, self.s, self.partials, self.iters, self.history, self.go]
        args += [n, rows, COOPERATIVE_PER_PASS]
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.while_(self.go, max_iters=-(-self.max_iters // COOPERATIVE_PER_PASS)):
                shared_pass[self.blocks, threads, None, nbytes](*args)
        return g

    def _fitting_band(self):
        """(blocks, threads, rows a block, shared bytes): the fewest rows a block (from enough for
        512 points), then the most threads, whose grid fits on the device at once."""
        n = self.problem.n
        limit = tp.cuda.get_device_properties().shared_memory_per_block_optin - 8 * SCRATCH  # beside the sums
        probe = [self.x, self.r, self.p, self.x, self.s, self.x, self.iters, self.history, self.go, n, 1, 1]
        rows = min(n, max(1, -(-512 // n)))
        while (nbytes := 8 * (3 * rows + 2) * n) <= limit:
            blocks = -(-n // rows)
            for threads in (1024, 512, 256, 128, 64, 32):
                if threads <= SHARED_THREADS and threads < 2 * rows * n:
                    if blocks <= shared_pass.max_cooperative_blocks(threads, *probe, shared_bytes=nbytes):
                        return blocks, threads, rows, nbytes
            rows += 1
        raise DoesNotFit(
            f"the shared-memory version keeps bands of x, r and p in shared memory: {n} rows of {n} points "
            f"need more than the {limit} bytes a block may have, with every block on the device at once"
        )

    def reset(self) -> None:
        super().reset()
        self.go.fill_(True)


# -- what a user writes first: tensor ops, tp.compile --------------------------------------------


def ops_step(x, r, p, ap, rr, go, stop: float):
    """One CG iteration on ``p``, padded with a zero edge; ``go`` = not converged."""
    inner = p[1:-1, 1:-1]
    ap.copy_(inner * 4.0)
    ap.sub_(p[:-2, 1:-1])
    ap.sub_(p[2:, 1:-1])
    ap.sub_(p[1:-1, :-2])
    ap.sub_(p[1:-1, 2:])
    alpha = rr / (inner * ap).sum()
    x.add_(alpha * inner)
    r.sub_(alpha * ap)
    rr_new = (r * r).sum()
    inner.mul_(rr_new / rr).add_(r)
    rr.copy_(rr_new)
    tp.gt(rr, stop, out=go)


class OpsCG:
    """CG as tensor ops: ``ops_step``, compiled, in ``g.while_(go)``."""

    def __init__(self, problem: Poisson, max_iters: int | None = None) -> None:
        n, self.problem = problem.n, problem
        self.max_iters = max_iters or 20 * n + 100
        self.b = tp.tensor(problem.b)
        self.x, self.r, self.ap = (tp.zeros(n, n, dtype=tp.float64) for _ in range(3))
        self.p = tp.zeros(n + 2, n + 2, dtype=tp.float64)
        self.rr = tp.zeros(1, dtype=tp.float64)
        self.go = tp.empty(1, dtype=tp.bool)
        self.stop = TOL * TOL * float(np.sum(problem.b**2))
        self.step = tp.compile(ops_step)
        self.graph = self._capture()

    def reset(self) -> None:
        self.x.zero_()
        self.r.copy_(self.b)
        self.p.zero_()
        self.p[1:-1, 1:-1].copy_(self.b)
        self.rr.copy_((self.b * self.b).sum().reshape(1))

    def _capture(self) -> tp.cuda.CUDAGraph:
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            tp.gt(self.rr, self.stop, out=self.go)
            with g.while_(self.go, max_iters=self.max_iters) as self.loop:
                self.step(self.x, self.r, self.p, self.ap, self.rr, self.go, self.stop)
        return g

    def solve(self) -> None:
        self.reset()
        self.graph.replay()

    def result(self) -> tuple[np.ndarray, int]:
        return self.x.numpy().ravel(), int(self.loop.iterations.item())


# -- the reference ------------------------------------------------------------------------------


def scipy_cg(problem: Poisson) -> tuple[np.ndarray, int, np.ndarray]:
    """(solution, iterations, ‖r‖ / ‖b‖ per iteration) from ``scipy.sparse.linalg.cg``
    on SciPy's own 2-D Laplacian (``kron`` of the 1-D one)."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import cg

    n = problem.n
    t = sp.diags([-1.0, 2.0, -1.0], [-1, 0, 1], shape=(n, n))
    eye = sp.identity(n)
    a = (sp.kron(eye, t) + sp.kron(t, eye)).tocsr()
    b = problem.b.ravel()
    norm_b, residuals = np.linalg.norm(b), [1.0]

    def seen(xk):
        residuals.append(np.linalg.norm(b - a @ xk) / norm_b)

    x, info = cg(a, b, rtol=TOL, atol=0.0, maxiter=20 * n + 100, callback=seen)
    if info != 0:
        raise RuntimeError(f"scipy.sparse.linalg.cg did not converge (info {info})")
    return x, len(residuals) - 1, np.array(residuals)


def main() -> int:
    p = parser(__doc__)
    p.add_argument("--n", type=int, nargs="+", help="interior points per side (default 256 1024; --quick: 6)")
    p.add_argument("--only", nargs="+", choices=VERSIONS, default=VERSIONS, help="the versions to run (default: all)")
    p.add_argument(
        "--shared-sums", action="store_true", help="on the simulator too, the GPU's block sums in shared memory (slow)"
    )
    args = p.parse_args()
    if args.shared_sums:
        global add_block_sum
        add_block_sum = shared_block_sum  # the kernels read it when they first run
    sizes = args.n or ([6] if args.quick else [256, 1024])
    folder = pictures_folder(args)
    print(backend_line(f"conjugate gradient, 2-D Poisson, float64, to a relative residual of {TOL:g}"))
    validation = Validation("conjugate gradient against scipy.sparse.linalg.cg")
    for n in sizes:
        problem = Poisson(n)
        x_ref, it_ref, res_ref = scipy_cg(problem)
        scale = np.abs(x_ref).max()
        print(f"\n{n}x{n} ({n * n} unknowns): scipy.sparse.linalg.cg, {it_ref} iterations")
        print(f"  {'version':10}{'iterations':>12}{'us/iteration':>15}{'residual':>12}{'vs scipy':>12}")
        curves = {}
        for name in args.only:
            try:
                solver = {"ops": OpsCG, "cooperative": CooperativeCG, "shared": SharedCG}.get(
                    name, lambda p, m=name: KernelCG(p, m)
                )(problem)
            except DoesNotFit as e:
                print(f"  {name:10}  not run: {e}")
                continue
            if not args.quick:
                solver.solve()  # once untimed: kernels compiled
            seconds = timed(solver.solve)
            x, iters = solver.result()
            residual, diff = problem.residual(x), np.abs(x - x_ref).max() / scale
            print(f"  {name:10}{iters:12d}{seconds / iters * 1e6:15.1f}{residual:12.2e}{diff:12.2e}")
            validation.at_most(
                f"{n}x{n} {name}: iterations against scipy's (relative)", abs(iters - it_ref) / it_ref, 0.02
            )
            validation.at_most(f"{n}x{n} {name}: solution against scipy's (max, relative)", diff, 1e-6)
            validation.at_most(f"{n}x{n} {name}: relative residual ‖b - Ax‖ / ‖b‖", residual, 1.01 * TOL)
            if name != "ops":
                curves[f"tensorplay {name}"] = solver.residuals()
                exact = np.abs(x - problem.exact.ravel()).max() / problem.exact.max()
                validation.at_most(f"{n}x{n} {name}: solution against u = x(1-x)y(1-y) (max, relative)", exact, 1e-6)
        if folder is not None:
            curves["scipy"] = res_ref
            series = [Series(k, np.arange(len(v)), v) for k, v in curves.items()]
            title = f"CG on the {n}x{n} Poisson problem"
            curve = chart(folder / f"cg_residual_{n}.svg", series, title, "iteration", "‖r‖ / ‖b‖", logy=True)
            print(f"  pictures: {curve}")
            print(f"            {write_png(str(folder / f'cg_solution_{n}.png'), x.reshape(n, n))}")
    note = timing_note()
    if note:
        print(note)
    print()
    return validation.report()


if __name__ == "__main__":
    sys.exit(main())
