"""Elementwise kernel variants beside torch's, on the GPU: where the graph of
100 ops loses time against torch's.

Each variant computes ``out = x + y`` on float32 and is launched 100 times
inside one graph; a replay's GPU time is divided by 100. The variants change
one thing at a time: the launch shape (threads per block), the loop (a
grid-stride loop with a scalar tail, or one group of four a thread and no
loop), and how arrays are passed (Numba's array structs, 56 bytes each, or
bare addresses, 8 bytes each: the library's flat kernels take addresses and
the element count). A second table times each op of
``benchmarks/graph_ops.py``'s 100-op graph on its own, tensorplay beside
torch, so that a gap in that graph can be put down to the ops that make it; the
first table times that whole graph with the ``flat_exact`` kernels at several
block sizes (``launch.GROUP_BLOCK``), beside torch's, in interleaved rounds.

    python3 benchmarks/elementwise_variants.py        (needs a GPU)
"""

from __future__ import annotations

import inspect
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import cuda  # noqa: E402
from numba.cuda import types  # noqa: E402
from numba.cuda.extending import intrinsic  # noqa: E402

import tensorplay as tp  # noqa: E402
from benchmarks.common import device_ms, peer, torch_events, tp_events  # noqa: E402
from benchmarks.graph_ops import OPS, run_ops  # noqa: E402
from tensorplay.kernels import elementwise as ew  # noqa: E402
from tensorplay.kernels._vector import load4, store, store4, vector_base  # noqa: E402
from tensorplay.runtime import launch  # noqa: E402
from tensorplay.runtime.launch import grid_1d, launch_packed, pointer_key, resolve  # noqa: E402

LAUNCHES = 100


def _vector_load(read_only: bool):
    """Four float32 at a bare address; ``read_only``: through the read-only
    path (``ld.global.nc``, as nvcc emits for ``const __restrict__`` pointers)."""

    @intrinsic
    def load(typingctx, addr, index):
        def codegen(context, builder, sig, args):
            vty = ir.VectorType(ir.FloatType(), 4)
            ptr = builder.gep(
                builder.inttoptr(args[0], ir.PointerType(vty, addrspace=1 if read_only else 0)), [args[1]]
            )
            vec = builder.load(ptr, align=16)
            if read_only:
                vec.set_metadata("invariant.load", builder.module.add_metadata([]))
            return context.make_tuple(
                builder, sig.return_type, [builder.extract_element(vec, ir.IntType(32)(k)) for k in range(4)]
            )

        return types.UniTuple(types.float32, 4)(types.uint64, types.uint64), codegen

    return load


_load4_at, _load4_nc_at = _vector_load(False), _vector_load(True)


@intrinsic
def _store4_at(typingctx, addr, index, v0, v1, v2, v3):
    def codegen(context, builder, sig, args):
        vty = ir.VectorType(ir.FloatType(), 4)
        vec = ir.Constant(vty, None)
        for k in range(4):
            vec = builder.insert_element(vec, args[2 + k], ir.IntType(32)(k))
        builder.store(vec, builder.gep(builder.inttoptr(args[0], vty.as_pointer()), [args[1]]), align=16)
        return context.get_dummy_value()

    sig = types.void(types.uint64, types.uint64, types.float32, types.float32, types.float32, types.float32)
    return sig, codegen


@cuda.jit
def add_groups(out, x, y):
    """One group of four a thread, no loop (n a multiple of 4, aligned)."""
    i = np.uint64(cuda.grid(1))
    if i < np.uint64(out.size) // np.uint64(4):
        a0, a1, a2, a3 = load4(x, i)
        b0, b1, b2, b3 = load4(y, i)
        store4(out, i, a0 + b0, a1 + b1, a2 + b2, a3 + b3)


@cuda.jit
def add_groups_at(out, x, y, groups):
    """The same on bare addresses: 32 bytes of parameters instead of 168."""
    i = np.uint64(cuda.grid(1))
    if i < groups:
        a0, a1, a2, a3 = _load4_at(x, i)
        b0, b1, b2, b3 = _load4_at(y, i)
        _store4_at(out, i, a0 + b0, a1 + b1, a2 + b2, a3 + b3)


@cuda.jit
def add_groups_out_array(out, x, y):
    """The library's parameters: the output a Numba array (its size bounds the
    work), the operands bare addresses."""
    i = np.uint64(cuda.grid(1))
    if i < np.uint64(out.size) // np.uint64(4):
        a0, a1, a2, a3 = _load4_at(x, i)
        b0, b1, b2, b3 = _load4_at(y, i)
        store4(out, i, a0 + b0, a1 + b1, a2 + b2, a3 + b3)


@cuda.jit
def scale_at(out, x, groups, s):
    """``out = x * s``, one group of four a thread, bare addresses."""
    i = np.uint64(cuda.grid(1))
    if i < groups:
        a0, a1, a2, a3 = _load4_at(x, i)
        _store4_at(out, i, a0 * s, a1 * s, a2 * s, a3 * s)


@cuda.jit
def scale_nc_at(out, x, groups, s):
    """The same, ``x`` read through the read-only path."""
    i = np.uint64(cuda.grid(1))
    if i < groups:
        a0, a1, a2, a3 = _load4_nc_at(x, i)
        _store4_at(out, i, a0 * s, a1 * s, a2 * s, a3 * s)


@cuda.jit
def add_groups_nc_at(out, x, y, groups):
    """``add_groups_at`` with both operands read through the read-only path."""
    i = np.uint64(cuda.grid(1))
    if i < groups:
        a0, a1, a2, a3 = _load4_nc_at(x, i)
        b0, b1, b2, b3 = _load4_nc_at(y, i)
        _store4_at(out, i, a0 + b0, a1 + b1, a2 + b2, a3 + b3)


# ``x * s`` written as the library's flat kernel is, one piece of its code more in
# each (out, size, x, s: element pointers and the count, launched as the library's):
# which piece costs what the library's kernel loses to a straight-line group.
@cuda.jit
def scale_a_straight(out, size, x, s):
    i = np.uint64(cuda.grid(1))
    if i < np.uint64(size) // np.uint64(4):
        a0, a1, a2, a3 = load4(x, i)
        store4(out, i, a0 * s, a1 * s, a2 * s, a3 * s)


@cuda.jit
def scale_b_checked(out, size, x, s):
    i = np.uint64(cuda.grid(1))
    n = np.uint64(size)
    if (vector_base(out) | vector_base(x)) & np.uint64(15) == np.uint64(0):
        if i < n // np.uint64(4):
            a0, a1, a2, a3 = load4(x, i)
            store4(out, i, a0 * s, a1 * s, a2 * s, a3 * s)
    else:
        while i < n:
            store(out, i, x[i] * s)
            i += np.uint64(cuda.gridsize(1))


@cuda.jit
def scale_c_looped(out, size, x, s):
    i = np.uint64(cuda.grid(1))
    step = np.uint64(cuda.gridsize(1))
    n = np.uint64(size)
    if (vector_base(out) | vector_base(x)) & np.uint64(15) == np.uint64(0):
        nv = n // np.uint64(4)
        while i < nv:
            a0, a1, a2, a3 = load4(x, i)
            store4(out, i, a0 * s, a1 * s, a2 * s, a3 * s)
            i += step
    else:
        while i < n:
            store(out, i, x[i] * s)
            i += step


@cuda.jit
def scale_d_tail(out, size, x, s):
    i = np.uint64(cuda.grid(1))
    step = np.uint64(cuda.gridsize(1))
    n = np.uint64(size)
    if (vector_base(out) | vector_base(x)) & np.uint64(15) == np.uint64(0):
        nv = n // np.uint64(4)
        while i < nv:
            a0, a1, a2, a3 = load4(x, i)
            store4(out, i, a0 * s, a1 * s, a2 * s, a3 * s)
            i += step
        i = nv * np.uint64(4) + np.uint64(cuda.grid(1))
    while i < n:
        store(out, i, x[i] * s)
        i += step


@cuda.jit
def scale_e_two_groups(out, size, x, s):
    """Two groups of four a thread, a grid apart: half the threads of
    ``scale_a_straight``, each with two loads in flight."""
    i = np.uint64(cuda.grid(1))
    groups = np.uint64(size) // np.uint64(4)
    if i < groups:
        a0, a1, a2, a3 = load4(x, i)
        j = i + np.uint64(cuda.gridsize(1))
        if j < groups:
            b0, b1, b2, b3 = load4(x, j)
            store4(out, j, b0 * s, b1 * s, b2 * s, b3 * s)
        store4(out, i, a0 * s, a1 * s, a2 * s, a3 * s)


def _per_launch_us(launch_once) -> float:
    launch_once()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        for _ in range(LAUNCHES):
            launch_once()
    s = tp.cuda.Stream()
    return device_ms(lambda: g.replay(s), *tp_events(s), s.synchronize, n=20, warmup=3, batch=5) * 1e3 / LAUNCHES


def _torch_us(n: int) -> float | None:
    torch = peer("torch")
    if torch is None:
        return None
    x, y = torch.rand(n, device="cuda"), torch.rand(n, device="cuda")
    out = torch.empty_like(x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.add(x, y, out=out)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(LAUNCHES):
            torch.add(x, y, out=out)
    return device_ms(g.replay, *torch_events(torch), torch.cuda.synchronize, n=20, warmup=3, batch=5) * 1e3 / LAUNCHES


def _table(n: int) -> dict:
    x, y, out = tp.rand(n), tp.rand(n), tp.empty(n)
    ptr = pointer_key("float32")
    library = resolve(ew.kernel("add", "aa", "flat"), [ptr, np.uint64, ptr, ptr])
    library_params = struct.pack("<QQQQ", out.data_ptr(), n, x.data_ptr(), y.data_ptr())
    groups = n // 4
    rows = {"torch.add(x, y, out=out)": _torch_us(n), "tp.add(x, y, out=out) (library)": None}
    rows["tp.add(x, y, out=out) (library)"] = _per_launch_us(lambda: tp.add(x, y, out=out))
    for block in (128, 256, 512):
        (blocks, _, _), _ = grid_1d(n, block)
        rows[f"library kernel, {block} threads a block"] = _per_launch_us(
            lambda b=block, g=blocks: launch_packed(library, (g, 1, 1), (b, 1, 1), library_params)
        )
    for block in (128, 256):
        blocks = -(-groups // block)
        rows[f"one group a thread, arrays, {block}"] = _per_launch_us(
            lambda b=block, g=blocks: tp.cuda.launch(add_groups, (g, 1, 1), (b, 1, 1), out, x, y)
        )
        ptrs = (np.uint64(out.data_ptr()), np.uint64(x.data_ptr()), np.uint64(y.data_ptr()), np.uint64(groups))
        rows[f"one group a thread, output array, operand addresses, {block}"] = _per_launch_us(
            lambda b=block, g=blocks, p=ptrs: tp.cuda.launch(add_groups_out_array, (g, 1, 1), (b, 1, 1), out, *p[1:3])
        )
        rows[f"one group a thread, addresses, {block}"] = _per_launch_us(
            lambda b=block, g=blocks, p=ptrs: tp.cuda.launch(add_groups_at, (g, 1, 1), (b, 1, 1), *p)
        )
        rows[f"one group a thread, addresses, read-only loads, {block}"] = _per_launch_us(
            lambda b=block, g=blocks, p=ptrs: tp.cuda.launch(add_groups_nc_at, (g, 1, 1), (b, 1, 1), *p)
        )
    expected = x.numpy() + y.numpy()
    tp.cuda.launch(add_groups_at, (-(-groups // 128), 1, 1), (128, 1, 1), *ptrs)
    if not np.array_equal(out.numpy(), expected):
        raise AssertionError("the address variant computed a different sum")
    return rows


def _torch_graph_us(torch, fn) -> float:
    fn()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(LAUNCHES):
            fn()
    return device_ms(g.replay, *torch_events(torch), torch.cuda.synchronize, n=20, warmup=3, batch=5) * 1e3 / LAUNCHES


def _scale_table(n: int) -> dict:
    """``x * 2``: a new output each launch or one ``out=``, and the library's
    kernel at three launch shapes, to part a fixed cost from the bytes moved."""
    torch = peer("torch")
    rows = {}
    if torch is not None:
        tx, tout = torch.rand(n, device="cuda"), torch.empty(n, device="cuda")
        rows["torch x * 2 (a new output)"] = _torch_graph_us(torch, lambda: tx * 2)
        rows["torch.mul(x, 2, out=out)"] = _torch_graph_us(torch, lambda: torch.mul(tx, 2, out=tout))
    x, out = tp.rand(n), tp.empty(n)
    rows["tp x * 2 (a new output)"] = _per_launch_us(lambda: x * 2)
    rows["tp.mul(x, 2, out=out)"] = _per_launch_us(lambda: tp.mul(x, 2, out=out))
    ptr = pointer_key("float32")
    library = resolve(ew.kernel("mul", "as", "flat"), [ptr, np.uint64, ptr, np.float32])
    params = struct.pack("<QQQf4x", out.data_ptr(), n, x.data_ptr(), 2.0)  # a scalar takes 8 bytes
    for blocks, block in (grid_1d(n)[0][0], 256), (-(-n // 1024), 256), (-(-n // 512), 128):
        rows[f"library kernel, {blocks} x {block}"] = _per_launch_us(
            lambda g=blocks, b=block: launch_packed(library, (g, 1, 1), (b, 1, 1), params)
        )
    keys = [ptr, np.uint64, ptr, np.float32]
    for kernel in (scale_a_straight, scale_b_checked, scale_c_looped, scale_d_tail):
        launcher = resolve(kernel, keys)
        rows[f"{kernel.py_func.__name__}, {grid_1d(n)[0][0]} x 256"] = _per_launch_us(
            lambda k=launcher: launch_packed(k, *grid_1d(n), params)
        )
        if not np.array_equal(out.numpy(), x.numpy() * np.float32(2)):
            raise AssertionError(f"{kernel.py_func.__name__} computed a different product")
    groups = n // 4
    shapes = {scale_a_straight: [(-(-groups // b), b) for b in (64, 128, 256, 512, 1024)],
              scale_e_two_groups: [(-(-groups // (2 * b)), b) for b in (128, 256, 512)]}  # fmt: skip
    for kernel, grids in shapes.items():
        launcher = resolve(kernel, keys)
        for blocks, block in grids:
            out.zero_()
            rows[f"{kernel.py_func.__name__}, {blocks} x {block}"] = _per_launch_us(
                lambda k=launcher, g=blocks, b=block: launch_packed(k, (g, 1, 1), (b, 1, 1), params)
            )
            if not np.array_equal(out.numpy(), x.numpy() * np.float32(2)):
                raise AssertionError(f"{kernel.py_func.__name__} computed a different product")
    groups, addresses = np.uint64(n // 4), (np.uint64(out.data_ptr()), np.uint64(x.data_ptr()))
    for kernel, what in ((scale_at, "plain loads"), (scale_nc_at, "read-only loads")):
        rows[f"one group a thread, addresses, {what}"] = _per_launch_us(
            lambda k=kernel: tp.cuda.launch(k, (-(-n // 1024), 1, 1), (256, 1, 1), *addresses, groups, np.float32(2))
        )
    if not np.array_equal(out.numpy(), x.numpy() * np.float32(2)):
        raise AssertionError("the read-only variant computed a different product")
    return rows


def _per_op_us(n: int) -> list[tuple[str, float, float | None]]:
    """(op, tensorplay us, torch us) per launch of each op of the 100-op graph,
    100 launches of the one op in a graph."""
    torch = peer("torch")
    x = tp.rand(n)
    tx = torch.rand(n, device="cuda") if torch is not None else None
    rows = []
    for op in OPS:
        ours = _per_launch_us(lambda op=op: op(x, x))
        theirs = None
        if torch is not None:
            op(tx, tx)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                for _ in range(LAUNCHES):
                    op(tx, tx)
            theirs = device_ms(g.replay, *torch_events(torch), torch.cuda.synchronize, n=20, warmup=3, batch=5)
            theirs *= 1e3 / LAUNCHES
        rows.append((inspect.getsource(op).strip().rstrip(",").split(": ", 1)[1], ours, theirs))
    return rows


def _chain_us(n: int, blocks=(256, 128, 512, 1024, 64), rounds: int = 2) -> dict:
    """Replay GPU us of ``benchmarks/graph_ops.py``'s 100-op graph with the
    ``flat_exact`` kernels at each block size (``launch.GROUP_BLOCK``), beside
    torch's graph of the same ops, in ``rounds`` interleaved rounds."""
    torch = peer("torch")
    x = tp.rand(n)
    expected = run_ops(x).numpy()
    graphs = {}
    for block in blocks:
        launch.GROUP_BLOCK = block
        launch._grids.clear()
        g = tp.cuda.CUDAGraph()
        with tp.cuda.graph(g):
            y = run_ops(x)
        graphs[f"tensorplay, {block} threads a block"] = (g, y)
    launch.GROUP_BLOCK = 256
    launch._grids.clear()
    s = tp.cuda.Stream()
    k = 20
    timers = {
        name: (lambda g=g: [g.replay(s) for _ in range(k)], tp_events(s), s.synchronize)
        for name, (g, _) in graphs.items()
    }
    if torch is not None:
        xt = torch.from_numpy(x.numpy()).cuda()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            run_ops(xt)
        torch.cuda.current_stream().wait_stream(side)
        tg = torch.cuda.CUDAGraph()
        with torch.cuda.graph(tg):
            run_ops(xt)
        timers["torch"] = (lambda: [tg.replay() for _ in range(k)], torch_events(torch), torch.cuda.synchronize)
    times = {name: [] for name in timers}
    for _ in range(rounds):
        for name, (fn, events, sync) in timers.items():
            times[name].append(device_ms(fn, *events, sync, n=20, warmup=3, batch=5) * 1e3 / k)
    for name, (g, y) in graphs.items():
        g.replay(s)
        s.synchronize()
        if not np.allclose(y.numpy(), expected, rtol=1e-5, atol=1e-6):
            raise AssertionError(f"the 100-op graph ({name}) replayed to a different result than eager")
    return times


def main() -> None:
    if tp.cuda.backend() != "cuda":
        sys.exit("elementwise_variants.py times kernels: run it on a GPU (TENSORPLAY_BACKEND=cuda)")
    n = 1 << 20
    torch = peer("torch")
    print(f"torch {torch.__version__ if torch is not None else 'absent'}")
    print(f"-- the 100-op graph on {n} float32, replay GPU us, flat_exact at each block size (rounds)")
    for name, us in _chain_us(n).items():
        print(f"{name:45} {'  '.join(f'{u:8.2f}' for u in us)}")
    print(f"-- each op of the 100-op graph on {n} float32, GPU us per launch in a graph of {LAUNCHES}")
    print(f"{'op':20} {'tensorplay':>10} {'torch':>8} {'ratio':>6}")
    for name, ours, theirs in _per_op_us(n):
        ratio = "-" if theirs is None else f"{ours / theirs:5.2f}x"
        print(f"{name:20} {ours:10.2f} {'-' if theirs is None else f'{theirs:8.2f}'} {ratio:>6}")
    print(f"-- x * 2 on {n} float32, GPU us per launch in a graph of {LAUNCHES}")
    for name, us in _scale_table(n).items():
        print(f"{name:45} {us:8.2f}")
    for n in (1 << 20, 16 << 20):
        rows = _table(n)
        print(f"-- x + y on {n} float32, GPU us per launch in a graph of {LAUNCHES} (default grid {grid_1d(n)})")
        for name, us in rows.items():
            print(f"{name:45} {'-' if us is None else f'{us:8.2f}'}")


if __name__ == "__main__":
    main()
