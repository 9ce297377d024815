"""2-D heat equation, Jacobi iteration to a tolerance, entirely on the GPU.

The whole loop (sweep, residual, convergence test) is one CUDA graph with a
while node: one launch runs every iteration. The body after the sweep is
written with ordinary tensor ops in ``relax``, which ``tp.compile`` fuses:
called inside the capture, it emits one kernel for ``(v - u).abs().max()`` and
``u.copy_(v)`` and one for the counter and the convergence test (``--no-fuse``
keeps one kernel per op, for comparison). It is timed next to the same loop
driven from the host, replaying a one-sweep graph and reading the residual back
every iteration, and next to plain eager ops. With no GPU it runs on the CPU
simulator at a small grid (the defaults below are the simulator's; on a GPU
they are --n 256 --tol 1e-5 --max-iters 20000). It ships with the package, so
it runs without the repository too::

    python -m tensorplay.examples.heat [--n 8] [--tol 1e-3] [--max-iters 400] [--no-fuse]
                                       [--dot heat_while.dot] [--pictures heat]

(``tensorplay-heat`` and, in the repository, ``python examples/heat.py`` run the
same). It writes the graph's picture (heat_while.svg), the final field with its
axes and colour scale (heat_field.png) and the largest change per iteration on a
log scale (heat_residual.svg), with no plotting library (``plots.py``).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import tensorplay as tp

from .plots import write_line_svg, write_png


@tp.jit
def jacobi_sweep(u, v):
    """v = average of u's four neighbours, inside the fixed boundary."""
    i, j = tp.cuda.grid(2)
    if i > 0 and j > 0 and i < u.shape[0] - 1 and j < u.shape[1] - 1:
        v[i, j] = 0.25 * (u[i - 1, j] + u[i + 1, j] + u[i, j - 1] + u[i, j + 1])


def relax(u, v, iters, go, tol: float, max_iters: int):
    """After a sweep into ``v``: the largest change, ``u = v``, one more
    iteration, and ``go`` = not converged and under the cap. Returns the change."""
    residual = (v - u).abs().max()
    u.copy_(v)
    iters.add_(1)
    tp.logical_and(tp.gt(residual, tol), tp.lt(iters, max_iters), out=go)
    return residual


class Heat:
    """A plate held at 1 on its top edge and 0 elsewhere, relaxed to steady state."""

    def __init__(self, n: int, block: int, fuse: bool = True) -> None:
        self.n, self.block = n, (block, block)
        self.relax = tp.compile(relax, fuse=fuse)  # inside a capture: fused into it
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

    def step(self, tol: float, max_iters: int, captured: bool = False) -> tp.Tensor:
        """One Jacobi sweep and ``relax``; returns the largest change (a one-element
        tensor). ``captured``: inside a graph capture, where ``relax`` is fused."""
        jacobi_sweep[self.grid, self.block](self.u, self.v)
        return (self.relax if captured else relax)(self.u, self.v, self.iters, self.go, tol, max_iters)

    def while_graph(self, tol: float, max_iters: int) -> tuple[tp.cuda.CUDAGraph, tp.Tensor]:
        """The whole solve as one graph, ``while (go) { sweep; relax }``, its
        kernels compiled by an eager step first. Returns the graph and the
        largest change of its last pass (a one-element tensor)."""
        self.reset()
        self.step(tol, max_iters)  # compile every kernel before capturing
        tp.cuda.synchronize()
        self.reset()
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            self.go.fill_(True)
            with g.while_(self.go):
                residual = self.step(tol, max_iters, captured=True)
        return g, residual


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


def main(argv: list[str] | None = None) -> None:
    """Solve, time the three ways, check them against each other (and NumPy on
    small grids), and write the pictures; ``argv`` as on the command line."""
    sim = tp.cuda.backend() == "sim"
    parser = argparse.ArgumentParser(
        prog="python -m tensorplay.examples.heat",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--n", type=int, default=8 if sim else 256, help="grid points per side")
    parser.add_argument("--tol", type=float, default=1e-3 if sim else 1e-5, help="stop once no point changes more")
    parser.add_argument("--max-iters", type=int, default=400 if sim else 20000, help="the loop's cap")
    parser.add_argument("--no-fuse", action="store_true", help="one kernel per op in the loop body (no fusion)")
    parser.add_argument(
        "--dot", default="heat_while.dot", help="where to write the graph's DOT view (its picture: the same name, .svg)"
    )
    parser.add_argument(
        "--pictures", default="heat", help="prefix of the field's PNG and the residual's SVG (PREFIX_field.png ...)"
    )
    args = parser.parse_args(argv)
    tol, cap = args.tol, args.max_iters
    print(f"heat equation on a {args.n}x{args.n} grid, tol {tol:g}, cap {cap} iterations, backend {tp.cuda.backend()}")

    heat = Heat(args.n, block=8 if sim else 16, fuse=not args.no_fuse)

    # 1. the whole loop in one graph: while (go) { sweep; relax: go = residual > tol and iters < cap }
    g, residual = heat.while_graph(tol, cap)
    heat.reset()
    tp.cuda.synchronize()
    print("1/3 the whole loop as one graph with a while node ...", flush=True)
    t0 = time.perf_counter()
    g.replay()
    tp.cuda.synchronize()
    t_graph = time.perf_counter() - t0
    iters, final = heat.iters.item(), residual.item()
    u_graph = heat.u.numpy()

    # 2. the host drives: replay a one-sweep graph, read the residual back each time
    one = tp.cuda.CUDAGraph()
    with tp.cuda.graph(one):
        step_residual = heat.step(tol, cap, captured=True)
    heat.reset()
    tp.cuda.synchronize()
    print("2/3 the host drives: a one-sweep graph replayed, the residual read back each time ...", flush=True)
    t0 = time.perf_counter()
    changes = []  # the largest change per iteration, read back anyway: the residual's curve
    for _ in range(cap):
        one.replay()
        changes.append(step_residual.item())
        if changes[-1] <= tol:
            break
    t_host = time.perf_counter() - t0
    host_iters = heat.iters.item()

    # 3. eager ops, residual read back each iteration
    heat.reset()
    tp.cuda.synchronize()
    print("3/3 the host drives eager ops ...", flush=True)
    t0 = time.perf_counter()
    for _ in range(cap):
        if heat.step(tol, cap).item() <= tol:
            break
    t_eager = time.perf_counter() - t0
    eager_iters = heat.iters.item()

    if not iters == host_iters == eager_iters:
        raise RuntimeError(
            f"the three loops ran different iteration counts: while node {iters}, host loop {host_iters}, "
            f"eager {eager_iters}; expected one count"
        )
    np.testing.assert_allclose(u_graph, heat.u.numpy(), rtol=0, atol=1e-6)
    if final <= tol:
        print(f"converged in {iters} iterations: largest change {final:.3g} <= tol {tol:g}")
    else:
        print(f"did NOT converge: stopped at the cap of {iters} iterations, largest change {final:.3g} > tol {tol:g}")
    if args.n <= 64:
        ref, ref_iters = numpy_reference(args.n, tol, cap)
        err = np.abs(u_graph - ref).max()
        print(f"NumPy float64 reference: {ref_iters} iterations, max difference {err:.2g}")
    body = "one kernel per op" if args.no_fuse else "fused by tp.compile"
    print(f"{'':48}{'us/iteration':>14}  {'the while node is':>20}")
    for name, t in [
        (f"while node, one launch ({body})", t_graph),
        ("host loop, graph replay + check", t_host),
        ("host loop, eager ops + check", t_eager),
    ]:
        ratio = t / t_graph
        versus = "(this row)" if t is t_graph else f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower"
        print(f"{name:48}{t / iters * 1e6:14.1f}  {versus:>20}")
    if sim:
        print("(on the simulator these times measure Python, not a GPU; the loop logic is what runs the same)")
    picture = os.path.splitext(args.dot)[0] + ".svg"
    g.draw(picture)
    print(f"graph written to {g.debug_dump(args.dot)} and drawn in {picture}")
    field = write_png(f"{args.pictures}_field.png", u_graph, axes=True)
    curve = write_line_svg(
        f"{args.pictures}_residual.svg", changes, f"heat equation {args.n}x{args.n}: largest change", "largest change"
    )
    print(f"the field drawn in {field}, the largest change per iteration in {curve}")


if __name__ == "__main__":
    main()
