"""The heat demo's plate (``tensorplay/examples/heat.py``) split over ranks: each
rank relaxes a band of rows, swapping its edge rows with its neighbours
(``send``/``recv``) and taking the largest change over all ranks
(``all_reduce(MAX)``) at every iteration, until no point changes more than the
tolerance. The halos travel on a second stream while the band's interior rows
are swept, and its two edge rows wait for them. On the simulator, and on GPUs
with NCCL's engine, the whole solve is one while node per rank, its halo swaps
and reduction inside the body; with
tensorplay's own engine on a GPU the host drives the same iteration (that
engine's collectives go through the host, which a graph cannot: see
docs/distributed.md). At the end the bands are gathered and compared with the
one-process solve: same iterations, same field::

    python -m tensorplay.distributed.run --nproc-per-node 4 examples/heat_distributed.py [--n 32] [--tol 1e-3]
    TENSORPLAY_DIST_BACKEND=nccl python -m tensorplay.distributed.run --nproc-per-node 2 examples/heat_distributed.py
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import tensorplay as tp
import tensorplay.distributed as dist
from tensorplay.examples.heat import Heat, numpy_reference


@tp.jit
def band_sweep(u, v, first, last):
    """v = the average of u's four neighbours on the band's rows ``first`` to
    ``last`` (local rows; row 0 and the last are the neighbours' halo rows).
    Threads next to each other take columns next to each other, so a warp's
    loads and stores of a row coalesce."""
    j, i = tp.cuda.grid(2)
    if i >= first and i <= last and j > 0 and j < u.shape[1] - 1:
        v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])


@tp.jit
def edge_sweep(u, v, top, bottom):
    """``band_sweep`` on the two rows ``top`` and ``bottom`` alone (the ones next to the halos)."""
    j, k = tp.cuda.grid(2)
    if k < 2 and j > 0 and j < u.shape[1] - 1:
        i = top if k == 0 else bottom
        v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])


def largest_change(u, v, out):
    """``out`` = the largest change of a point of ``u`` (this rank's own rows)."""
    out.copy_((v - u).abs().max().reshape(1))


def advance(u, v, iters, go, change, tol: float, max_iters: int):
    """``u = v``, one more iteration, and ``go`` = not converged anywhere and under the cap."""
    u.copy_(v)
    iters.add_(1)
    tp.logical_and(tp.gt(change, tol), tp.lt(iters, max_iters), out=go)


class Band:
    """This rank's rows of the n x ``cols`` plate (n x n by default; held at 1
    on its top edge), with a halo row above and below: local row k is global
    row ``start + k - 1``."""

    def __init__(self, n: int, rank: int, world: int, cols: int | None = None) -> None:
        if n % world or n // world < 2:
            raise SystemExit(f"--n ({n}) must be a multiple of the ranks ({world}), with at least 2 rows each")
        self.n, self.rank, self.world, self.rows = n, rank, world, n // world
        self.cols = n if cols is None else cols
        self.start = rank * self.rows
        self.u, self.v = tp.zeros(self.rows + 2, self.cols), tp.zeros(self.rows + 2, self.cols)
        # the rows to relax: not the plate's own top and bottom edges, which stay as they are
        self.first = 2 if rank == 0 else 1
        self.last = self.rows - 1 if rank == world - 1 else self.rows
        self.change, self.iters, self.go = tp.zeros(1), tp.zeros(1, dtype=tp.int32), tp.ones(1, dtype=tp.bool)
        self.block = (min(32, self.cols), 8)  # up to 32 columns x 8 rows
        self.grid = (-(-self.cols // self.block[0]), -(-(self.rows + 2) // 8))
        self.edge_grid = ((self.cols + 127) // 128, 2)
        self.fused = (tp.compile(largest_change), tp.compile(advance))  # inside a capture: fused into it
        self.side = tp.cuda.Stream()  # where the halos travel while the interior is swept

    def reset(self) -> None:
        for t in (self.u, self.v):
            t.zero_()
            if self.rank == 0:
                t[1] = 1.0  # the plate's top edge
        self.iters.zero_()
        self.go.fill_(True)

    def swap_halos(self) -> None:
        """My edge rows to my neighbours, theirs into my halo rows."""
        ops = []
        if self.rank > 0:
            ops += [dist.P2POp(dist.isend, self.u[1], self.rank - 1), dist.P2POp(dist.irecv, self.u[0], self.rank - 1)]
        if self.rank < self.world - 1:
            ops += [
                dist.P2POp(dist.isend, self.u[self.rows], self.rank + 1),
                dist.P2POp(dist.irecv, self.u[self.rows + 1], self.rank + 1),
            ]
        if ops:
            dist.batch_isend_irecv(ops)

    def step(self, tol: float, max_iters: int, overlap: bool = True) -> None:
        """One iteration: halos, sweep, the largest change over every rank, ``u = v``, ``go``.
        ``overlap``: the halos travel on ``side`` while the rows that need none are swept."""
        if overlap:
            here = tp.cuda.current_stream()
            self.side.wait_stream(here)
            with tp.cuda.stream(self.side):
                self.swap_halos()
            band_sweep[self.grid, self.block](self.u, self.v, self.first + 1, self.last - 1)
            here.wait_stream(self.side)
            edge_sweep[self.edge_grid, (128, 1)](self.u, self.v, self.first, self.last)
        else:
            self.swap_halos()
            band_sweep[self.grid, self.block](self.u, self.v, self.first, self.last)
        change, then = self.fused if tp.cuda.is_current_stream_capturing() else (largest_change, advance)
        own = slice(1, self.rows + 1)
        change(self.u[own], self.v[own], self.change)
        dist.all_reduce(self.change, op=dist.ReduceOp.MAX)
        then(self.u, self.v, self.iters, self.go, self.change, tol, max_iters)

    def field(self) -> np.ndarray:
        """The whole plate, gathered from every rank's band."""
        whole = tp.empty(self.n, self.cols)
        dist.all_gather_into_tensor(whole, self.u[1 : self.rows + 1].contiguous())
        return whole.numpy()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=16, help="grid points per side (a multiple of the ranks)")
    parser.add_argument("--tol", type=float, default=1e-3, help="stop once no point changes more")
    parser.add_argument("--max-iters", type=int, default=2000, help="the loop's cap")
    args = parser.parse_args(argv)
    dist.init_process_group()
    rank, world = dist.get_rank(), dist.get_world_size()
    band = Band(args.n, rank, world)
    band.reset()
    band.step(args.tol, args.max_iters)  # compiles every kernel eagerly first
    band.reset()
    if tp.cuda.backend() == "sim" or dist.get_backend() == "nccl":
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            with g.while_(band.go):
                band.step(args.tol, args.max_iters)
        g.replay()
        how = "one while node per rank"
    else:
        while band.go.item():
            band.step(args.tol, args.max_iters)
        how = "the host drives each iteration"
    iters, field = band.iters.item(), band.field()
    if rank == 0:
        print(f"heat {args.n}x{args.n} on {world} ranks ({how}): {iters} iterations, "
              f"largest change {band.change.item():.3g}")  # fmt: skip
        one = Heat(args.n, block=8)  # the demo's solve in this one process: its while node
        g, _ = one.while_graph(args.tol, args.max_iters)
        one.reset()
        g.replay()
        one_iters, difference = one.iters.item(), np.abs(field - one.u.numpy()).max()
        print(f"one process: {one_iters} iterations, largest difference {difference:.2g}")
        ref, ref_iters = numpy_reference(args.n, args.tol, args.max_iters)
        print(f"NumPy in float64: {ref_iters} iterations, largest difference {np.abs(field - ref).max():.2g}")
        if iters != one_iters or difference > 1e-6:
            print("the split solve differs from the one-process solve", file=sys.stderr)
            return 1
        print("same iterations and field as one process")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
