"""2-D heat equation, Jacobi iteration to a tolerance, entirely on the GPU.

The whole loop (sweep, residual, convergence test) is one CUDA graph with a
while node: one launch runs every iteration. It is timed next to the same loop
driven from the host, replaying a one-sweep graph and reading the residual back
every iteration, and next to plain eager ops. With no GPU it runs on the CPU
simulator at a small grid.

    python examples/heat.py [--n 256] [--tol 1e-5] [--max-iters 4000] [--dot heat.dot]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import tensorplay as tp


@tp.jit
def jacobi_sweep(u, v):
    """v = average of u's four neighbours, inside the fixed boundary."""
    i, j = tp.cuda.grid(2)
    if i > 0 and j > 0 and i < u.shape[0] - 1 and j < u.shape[1] - 1:
        v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])


class Heat:
    """A plate held at 1 on its top edge and 0 elsewhere, relaxed to steady state."""

    def __init__(self, n: int, block: int) -> None:
        self.n, self.block = n, (block, block)
        self.grid = ((n + block - 1) // block,) * 2
        self.u = tp.zeros(n, n)
        self.v = tp.zeros(n, n)
        self.iters = tp.zeros(1, dtype=tp.int32)
        self.go = tp.empty(1, dtype=tp.bool)

    def reset(self) -> None:
        for t in (self.u, self.v):
            t.zero_()
            t[0] = 1.0
        self.iters.zero_()

    def sweep(self) -> tp.Tensor:
        """One Jacobi sweep; returns the largest change (a one-element tensor)."""
        jacobi_sweep[self.grid, self.block](self.u, self.v)
        residual = (self.v - self.u).abs().max()
        self.u.copy_(self.v)
        self.iters.add_(1)
        return residual

    def keep_going(self, residual: tp.Tensor, tol: float, max_iters: int) -> None:
        tp.logical_and(tp.gt(residual, tol), tp.lt(self.iters, max_iters), out=self.go)


def numpy_reference(n: int, tol: float, max_iters: int) -> tuple[np.ndarray, int]:
    u = np.zeros((n, n))
    u[0] = 1.0
    for k in range(1, max_iters + 1):
        v = u.copy()
        v[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])
        change = np.abs(v - u).max()
        u = v
        if change <= tol:
            return u, k
    return u, max_iters


def main() -> None:
    sim = tp.cuda.backend() == "sim"
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=8 if sim else 256)
    parser.add_argument("--tol", type=float, default=1e-3 if sim else 1e-5)
    parser.add_argument("--max-iters", type=int, default=200 if sim else 4000)
    parser.add_argument("--dot", default="heat_while.dot")
    args = parser.parse_args()
    print(f"heat equation on a {args.n}x{args.n} grid, tol {args.tol:g}, backend {tp.cuda.backend()}")

    heat = Heat(args.n, block=8 if sim else 16)
    heat.reset()
    heat.sweep()  # compile every kernel before capturing
    tp.cuda.synchronize()

    # 1. the whole loop in one graph: while (go) { sweep; go = residual > tol and iters < max }
    heat.reset()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        heat.keep_going(tp.full((1,), np.inf), args.tol, args.max_iters)
        with g.while_(heat.go):
            residual = heat.sweep()
            heat.keep_going(residual, args.tol, args.max_iters)
    heat.reset()
    tp.cuda.synchronize()
    t0 = time.perf_counter()
    g.replay()
    tp.cuda.synchronize()
    t_graph = time.perf_counter() - t0
    iters, final = heat.iters.item(), residual.item()
    u_graph = heat.u.numpy()

    # 2. the host drives: replay a one-sweep graph, read the residual back each time
    one = tp.cuda.CUDAGraph()
    with tp.cuda.graph(one):
        step_residual = heat.sweep()
    heat.reset()
    tp.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.max_iters):
        one.replay()
        if step_residual.item() <= args.tol:
            break
    t_host = time.perf_counter() - t0
    host_iters = heat.iters.item()

    # 3. eager ops, residual read back each iteration
    heat.reset()
    tp.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.max_iters):
        if heat.sweep().item() <= args.tol:
            break
    t_eager = time.perf_counter() - t0
    eager_iters = heat.iters.item()

    assert iters == host_iters == eager_iters, (iters, host_iters, eager_iters)
    np.testing.assert_allclose(u_graph, heat.u.numpy(), rtol=0, atol=1e-6)
    print(f"converged in {iters} iterations, final residual {final:.3g}")
    if args.n <= 64:
        ref, ref_iters = numpy_reference(args.n, args.tol, args.max_iters)
        err = np.abs(u_graph - ref).max()
        print(f"NumPy float64 reference: {ref_iters} iterations, max difference {err:.2g}")
    print(f"{'':34}{'us/iteration':>14}{'speed-up':>10}")
    for name, t in [
        ("while node, one graph launch", t_graph),
        ("host loop, graph replay + check", t_host),
        ("host loop, eager ops + check", t_eager),
    ]:
        print(f"{name:34}{t / iters * 1e6:14.1f}{t / t_graph:9.1f}x")
    if sim:
        print("(on the simulator these times measure Python, not a GPU; the loop logic is what runs the same)")
    print(f"graph written to {g.debug_dump(args.dot)} (render with: dot -Tsvg {args.dot})")


if __name__ == "__main__":
    main()
