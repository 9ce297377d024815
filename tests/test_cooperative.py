"""Kernels that synchronise their whole grid (``cuda.cg.this_grid().sync()``):
launched cooperatively, eagerly, in a graph and in a while node's body."""

import importlib

import numpy as np
import pytest

import tensorplay as tp

# numba.cuda only after tensorplay, which picks the simulator before it loads.
cuda = importlib.import_module("numba.cuda")

THREADS = 128 if tp.cuda.backend() == "cuda" else 8


@tp.jit
def neighbour_sums(x, out, rounds):
    """``rounds`` times, x[i] += x[(i + 1) % n]: each round reads what other
    blocks wrote in the round before, so it is right only if the grid waits."""
    grid = cuda.cg.this_grid()
    n = x.size
    start, step = tp.cuda.grid(1), tp.cuda.gridsize(1)
    for _ in range(rounds):
        for i in range(start, n, step):
            out[i] = x[i] + x[(i + 1) % n]
        grid.sync()
        for i in range(start, n, step):
            x[i] = out[i]
        grid.sync()


@tp.jit
def count_down(counter, go):
    if tp.cuda.grid(1) == 0:
        counter[0] -= 1
        go[0] = counter[0] > 0


def expected(x: np.ndarray, rounds: int) -> np.ndarray:
    for _ in range(rounds):
        x = x + np.roll(x, -1)
    return x


def _inputs(n: int = 300):
    start = np.arange(n, dtype=np.float64) % 7  # sums stay exact in float64
    return start, tp.tensor(start), tp.zeros(n, dtype=tp.float64)


def _blocks(x, out, rounds: int) -> int:
    return min(neighbour_sums.max_cooperative_blocks(THREADS, x, out, rounds), 4)


def test_the_grid_waits_for_every_block():
    start, x, out = _inputs()
    blocks = _blocks(x, out, 3)
    neighbour_sums[blocks, THREADS](x, out, 3)
    np.testing.assert_array_equal(x.numpy(), expected(start, 3))


def test_max_cooperative_blocks_is_what_fits_at_once():
    _, x, out = _inputs()
    most = neighbour_sums.max_cooperative_blocks(THREADS, x, out, 1)
    if tp.cuda.backend() == "sim":
        assert most == 1  # the simulator synchronises a grid of one block
    else:  # a small kernel: several blocks a multiprocessor, on every multiprocessor
        assert most >= 16


def test_too_many_blocks_is_a_sentence_and_nothing_runs():
    start, x, out = _inputs()
    most = neighbour_sums.max_cooperative_blocks(THREADS, x, out, 1)
    with pytest.raises(ValueError, match=rf"synchronises its whole grid .* at most {most} here .* got {most + 1}"):
        neighbour_sums[most + 1, THREADS](x, out, 1)
    np.testing.assert_array_equal(x.numpy(), start)  # nothing ran
    neighbour_sums[_blocks(x, out, 1), THREADS](x, out, 1)  # and the runtime stays usable
    np.testing.assert_array_equal(x.numpy(), expected(start, 1))


def test_in_a_graph_each_replay_runs_the_rounds():
    start, x, out = _inputs()
    blocks = _blocks(x, out, 2)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        neighbour_sums[blocks, THREADS](x, out, 2)
    np.testing.assert_array_equal(x.numpy(), start)  # captured, not run
    g.replay()
    g.replay()
    np.testing.assert_array_equal(x.numpy(), expected(start, 4))


def test_in_a_while_node_body():
    start, x, out = _inputs()
    counter, go = tp.tensor([3], dtype=tp.int32), tp.tensor([True])
    blocks = _blocks(x, out, 2)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(go):
            neighbour_sums[blocks, THREADS](x, out, 2)
            count_down[1, 1](counter, go)
    g.replay()
    np.testing.assert_array_equal(x.numpy(), expected(start, 6))
    assert counter.item() == 0


@tp.jit
def sums_and_decides(x, out, handle):
    """A grid-wide wait and a conditional node's handle in one kernel: refused."""
    grid = cuda.cg.this_grid()
    i = tp.cuda.grid(1)
    if i < x.size:
        out[i] = x[i] + x[(i + 1) % x.size]
    grid.sync()
    if i == 0:
        tp.cuda.set_conditional(handle, np.uint32(1 if out[0] > 0 else 0))


def test_a_grid_wait_with_set_conditional_is_refused_before_it_compiles():
    # Each links CUDA's device runtime library; the GPU's linker refuses (or crashes on) two copies.
    start, x, out = _inputs()
    counter, go = tp.tensor([1], dtype=tp.int32), tp.tensor([True])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(go) as loop:
            with pytest.raises(ValueError, match=r"both synchronises its whole grid .*g\.while_\(flag\)"):
                sums_and_decides[1, THREADS](x, out, loop)
            count_down[1, 1](counter, go)  # the capture goes on
    g.replay()
    np.testing.assert_array_equal(x.numpy(), start)
    assert counter.item() == 0
    neighbour_sums[_blocks(x, out, 1), THREADS](x, out, 1)  # the runtime stays usable
    np.testing.assert_array_equal(x.numpy(), expected(start, 1))
