"""Fused kernels: one generated Numba kernel for a chain of elementwise ops.

``tp.compile``'s fusion pass (``tensorplay/compiler/fusion.py``) describes a
chain as ``Step``s over one iteration space of ``n`` elements, and ``source``
writes it out as plain Numba: per element, each external array is loaded once,
each op is a call of its device function from the op table
(``kernels/elementwise.OPS``), each result is converted to the dtype of the
tensor it would have been written to (so that the values are those of the
eager ops: bit for bit on the simulator; on a GPU, NVVM contracts a multiply
followed by an add into one fused multiply-add, rounded once instead of twice,
as it does in every kernel, so such a pair can differ from eager in the last
bit), and only the results that someone still reads are stored. Where no
input is strided and every array is 16-byte aligned, a thread takes four
elements side by side at a time, through one vector load per input and one
vector store per output (``kernels/_vector.py``).

An output may be a strided view (an in-place update of a slice): each
element is stored at the offset its index gives, as strided inputs are read.
A strided input may be read rolled (``tp.roll``): its coordinates along some
dimensions moved by a shift, modulo the dimension's size. A chain may draw
uniform random numbers (``tp.rand``) as ``kernels/random.py``'s ``uniform``
(float32) and ``uniform_double`` (float64, 53 random bits) draw them: draw ``d``
of element ``i`` is the hash of the generator's seed
and ``offset + d * n + i``, the offset read from its state (``rng``) when the
kernel starts and moved past the kernel's draws by its last block.

A chain may end in full reductions (``sum``, ``mean``, ``max``, ``min``) of
its values, in the same kernel, each with an accumulator of its own: each
block writes a partial of each and counts itself done on a ticket (an int32
that is zero between launches); the last block to finish combines the
partials, writes the reductions' values, runs the chain's *tail* (ops on
one-element tensors that follow the reductions, such as a loop's counter and
convergence test) on one thread, and sets the ticket back to zero. A chain
without a reduction may have a tail too, of ops that touch nothing the chain
reads or writes: the first thread runs it. A reduction along the last
dimensions instead is done a block a row, or a thread a row where rows are
short (``_rows``), or where a few long rows would leave the device idle, by
several blocks a row whose partials the last block combines (``_pieced_rows``,
on a ticket as the full reductions); several such reductions of one chain may share the kernel
where they reduce the same rows (the three components of an N-body step's
pulls), but not with full reductions.

After full reductions or rows that blocks share, the last block may run
*epilogues* (``Epilogue``): small chains of their own, its threads ``BLOCK``
elements apart, each after a barrier and followed by its own tail, reading
what the stage before stored (the moments of an Ising sweep from the
magnetisations, then its histogram); their parameters follow the tail's
outputs, named with the suffix ``_e{k}``.

A chain may begin with a *head*: ops on one-element tensors that every
thread runs before its elements (a step size from a time and its bound, which
the elements then read), the first thread storing their results. Ops over
fewer elements whose results the chain reads broadcast (``-2.0 * beta`` over a
few temperatures, before the lattices' chain) are its first steps instead,
each thread computing the values its elements read; an output whose strides
are 0 along some dimensions is stored by the first element along them.

The source is what runs: it is compiled from the same text that
``compiled.kernels()`` prints, and it can be pasted into a file as it stands;
on a GPU it is kept on disk, compiled, for other processes (``_source``).

Parameters of a kernel, in order: ``n``, the full-size inputs ``a0, a1, ...``
(read at ``[i]``), the one-element inputs ``b0, ...`` (read at ``[0]``), the
broadcast or strided inputs ``c0, ...`` (read at an offset computed from
``i``, the group's shape and the input's strides, which the text holds), the
scalars ``s0, ...``, the outputs ``o0, ...``, the head's one-element outputs
``e0, ...``, the generator's state ``rng``
where the chain draws, then for full reductions the
``ticket`` and the means' ``scale`` (1/n), and for each reduction ``m`` its
``partials{m}`` array (one element per block), its one-element output
``red{m}`` and its accumulator's starting value ``init{m}`` (reductions along
rows: each one's ``red{m}`` and ``init{m}``, then ``scale``; rows shared by
blocks take the full reductions' parameters, ``scale`` 1/k), and last the
tail's one-element outputs ``q0, ...``.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace

from . import _convert  # noqa: F401 (the texts import its conversions: loaded with this module)
from . import elementwise as ew
from ._fused_lines import _CONVERT, _accumulate, _advance_lines, _assign, _draws, _elements, _fn_name, _tail_lines
from ._source import jit_source
from ._target import SMALL_BLOCKS

__all__ = ["BLOCK", "EPILOGUE_MAX", "Epilogue", "Head", "Reduction", "Step", "Tail", "kernel", "op_functions", "source"]

UNROLL = 4  # elements a thread loads before it computes (while it has that many left)
BLOCK = 32 if SMALL_BLOCKS else 256  # threads per block of a fused reduction (its shared scratch has this size)
THREAD_ROWS = 16  # rows of at most this many elements are reduced a thread a row (a block would idle most lanes)
EPILOGUE_MAX = 16 * BLOCK  # elements of an epilogue at most: the last block's threads take them in turn
_ENDS_PASS = "end_pass = pass_end()"  # the line of a kernel that ends a while node's pass (Tail.go)
_SETS_NODE = "set_handle = set_node()"  # the line of a kernel that sets the next node's handle (Tail.node)


@dataclass(frozen=True)
class Step:
    """One op of a chain: ``op`` (a key of the op table, ``where``, ``clamp`` or
    ``fill``) of ``args``, each ``("a", k)`` full-size input k, ``("b", k)``
    one-element input k, ``("c", k)`` strided input k, ``("s", k)`` scalar k,
    ``("u", d)`` the uniform draw d, ``("v", j)`` the value of step j,
    ``("h", j)`` the value of head step j, and in a tail ``("r", m)`` the
    value of reduction m or ``("w", j)`` the value of tail step j; ``cast`` is
    the eager kernel's (``"none"`` or ``"int64"``), ``dtype``
    the NumPy name of the result's dtype."""

    op: str
    args: tuple
    cast: str
    dtype: str


@dataclass(frozen=True)
class Reduction:
    """A full reduction ``op`` of the value of step ``step``, accumulated in
    ``acc``, its result of dtype ``dtype``; ``k`` > 0: along a block of
    dimensions instead, ``k`` elements into each value, the dimensions after
    the block ``trail`` elements (1: the last dimensions), the chain's only
    reduction but for others along the same rows (its tail, if any, run by
    the first thread, as without one)."""

    op: str
    step: int
    acc: str
    dtype: str
    k: int = 0  # 0: over all elements; else along a block of dimensions, k elements a value
    trail: int = 1  # elements of the dimensions after the block


@dataclass(frozen=True)
class Head:
    """Steps on one-element tensors that every thread runs before the chain's
    elements (the chain's steps read their values as ``("h", j)``);
    ``stores[k]`` is the head step whose value output ``e{k}`` takes, stored
    by the first thread."""

    steps: tuple = ()
    stores: tuple = ()


@dataclass(frozen=True)
class Tail:
    """Steps on one-element tensors that one thread runs once the chain's
    elements are done (after its full reductions, if any); ``stores[k]`` is the
    tail step whose value output ``q{k}`` takes. Their one-element inputs are
    read when the tail runs. ``go``: the tail step whose value is the flag of
    the while node whose pass the kernel ends (``conditional.pass_end``, after
    the stores), or None. ``node``: (step, cases) where the kernel sets the
    handle of the conditional node captured right after it (its last
    parameter, ``node``) from that step's value: an if node's from its truth
    (``cases`` 0), a switch's of ``cases`` bodies from the index
    (``conditional.set_node``); else None."""

    steps: tuple = ()
    stores: tuple = ()
    go: int | None = None
    node: tuple | None = None

    def setting(self, step: int, cases: int) -> Tail:
        """This tail, setting the handle of the node after the kernel from ``step``."""
        return replace(self, node=(step, cases))


@dataclass(frozen=True)
class Epilogue:
    """A small chain of ``n`` elements (``EPILOGUE_MAX`` at most) that the last
    block of a kernel with full reductions or shared rows runs after them, its
    threads ``BLOCK`` elements apart, then its tail on its first thread (the
    moments and the histogram of an Ising sweep, after the magnetisations):
    a kernel of its own less. Its parameters are those of a chain (``counts``,
    ``steps``, ``stores``, ``shape``, ``strided``, ``out_strides``,
    ``shifts``, ``tail``, as ``source`` takes them), named with the suffix
    ``_e{k}`` for the kernel's ``k``-th epilogue."""

    n: int
    counts: tuple
    steps: tuple
    stores: tuple
    shape: tuple
    strided: tuple = ()
    out_strides: tuple = ()
    shifts: tuple = ()
    tail: Tail = Tail()


def op_functions(*ops: str) -> tuple:
    """The device functions of ``ops``, for a pasted fused kernel's imports."""
    return tuple(ew._op(op) for op in ops)


def source(name: str, counts: tuple[int, int, int], steps: tuple[Step, ...], stores: tuple[int, ...],
           reductions: tuple[Reduction, ...] = (), shape: tuple = (), strided: tuple = (),
           out_strides: tuple = (), tail: Tail = Tail(), shifts: tuple = (), draws: tuple = (),
           head: Head = Head(), pieces: int = 0, epilogues: tuple[Epilogue, ...] = (),
           one_each: bool = False) -> str:  # fmt: skip
    """The kernel's Python source. ``counts`` is (full-size inputs, one-element
    inputs, scalars); ``stores[k]`` is the step whose value output ``k`` takes;
    ``strided[k]`` are the element strides of strided input ``k`` over ``shape``
    and ``shifts[k]`` (left out: none) what it is read rolled by along each
    dimension (element ``c`` reads the input's ``(c + shift) % size``);
    ``out_strides[k]`` are those of output ``k`` (None, or left out:
    contiguous); ``draws`` are its uniform draws of ``n`` numbers, whether each is
    float64 (53 random bits; else float32's 24);
    ``head`` the one-element steps every thread runs first; ``pieces``, for
    reductions along rows, the blocks that share each row (0: a block or a
    thread a row); ``epilogues``, after full reductions or shared rows, the
    small chains the last block runs after them, in order (the kernel's tail
    then runs in that block too, before them, and the last one's tail ends
    the while node's pass where one does); ``one_each``, without reductions,
    that the grid has a thread for every element: the loops that take four
    elements a thread are left out, whose registers would cost the kernel its
    occupancy for nothing (89 against 32 a thread, a colour of the ops-only
    Ising sweep on sm_90)."""
    na, nb, ns = counts
    out_strides = out_strides or (None,) * len(stores)
    ops = sorted(
        {s.op for s in (*head.steps, *steps, *tail.steps, *[s for e in epilogues for s in (*e.steps, *e.tail.steps)])}
    )
    params = ["n", *[f"a{k}" for k in range(na)], *[f"b{k}" for k in range(nb)]]
    params += [*[f"c{k}" for k in range(len(strided))], *[f"s{k}" for k in range(ns)]]
    params += [f"o{k}" for k in range(len(stores))] + [f"e{k}" for k in range(len(head.stores))]
    params += ["rng"] if draws else []
    rows = bool(reductions) and reductions[0].k
    if rows and not pieces:
        params += [*[f"{p}{m}" for m in range(len(reductions)) for p in ("red", "init")], "scale"]
    elif reductions:  # full ones, or rows that blocks share
        params += ["ticket", "scale", *[f"{p}{m}" for m in range(len(reductions)) for p in ("partials", "red", "init")]]
    params += [f"q{k}" for k in range(len(tail.stores))]
    params += [name for k, e in enumerate(epilogues) for name in _epilogue_params(e, k)]
    ends_pass = (epilogues[-1].tail if epilogues else tail).go is not None  # by the last stage's tail
    if ends_pass:
        params += ["loop", "counter", "cancel", "max_iters"]
    params += ["node"] if tail.node is not None else []
    body = [f"def {name}({', '.join(params)}):"]
    body += [
        f"    y{k} = b{k}[0]"
        for k in sorted({arg[1] for s in (*head.steps, *steps) for arg in s.args if arg[0] == "b"})
    ]
    body += _head_lines(head)
    if draws:
        body += ["    seed, base = np.uint64(rng[0]), rng[1]"]
    layout = (shape, strided, shifts or ((),) * len(strided), out_strides, draws)
    if rows and pieces:
        body += _pieced_rows(steps, stores, reductions, layout, pieces)
        body += _last_block_lines(tail, epilogues) if epilogues else _first_thread(tail)
    elif rows:
        body += _rows(steps, stores, reductions, layout) + _first_thread(tail)
    else:
        body += _grid_stride(steps, stores, reductions, layout, tail, one_each)
        body += _last_block_lines(Tail(), epilogues)  # after _finish's tail
    names = ", ".join(_fn_name(op) for op in ops) + ("," if len(ops) == 1 else "")
    head = ["import numpy as np", "from numba import cuda", ""]
    if any("vector_base(" in line for line in body):
        head += ["from tensorplay.kernels._vector import load4, store4, vector_base"]
    head += ["from tensorplay.kernels.fused import op_functions"]
    if any("to_int" in line for line in body):
        head += ["from tensorplay.kernels._convert import to_int32, to_int64"]
    if draws:
        head += ["from tensorplay.kernels.random import _advance, _unit, _unit53"]
    if reductions:
        head += ["from tensorplay.kernels.reduce import COMBINE, FINALIZE, block_total"]
    if ends_pass:
        head += ["from tensorplay.kernels.conditional import pass_end"]
    if tail.node is not None:
        head += ["from tensorplay.kernels.conditional import set_node"]
    head += ["", f"{names} = op_functions({', '.join(repr(op) for op in ops)})"]
    if ends_pass:
        head += [_ENDS_PASS]
    if tail.node is not None:
        head += [_SETS_NODE]
    for m, r in enumerate(reductions):
        head += [f"combine{m} = COMBINE[{'sum' if r.op == 'mean' else r.op!r}]"]
        head += [f"finalize{m} = FINALIZE[{'mean' if r.op == 'mean' else 'sum'!r}]"]
        head += [f"total{m} = block_total({r.op!r}, {r.acc!r})"] if not rows or pieces else []
    return "\n".join(head) + "\n\n\n" + "\n".join(body) + "\n"


def _head_lines(head: Head) -> list[str]:
    """The head's steps, on every thread, then its stores, by the first thread."""
    lines = [f"    {_assign(f'h{j}', s)}" for j, s in enumerate(head.steps)]
    if head.stores:
        lines += [
            "    if cuda.grid(1) == 0:  # the head's results",
            *[f"        e{k}[0] = h{j}" for k, j in enumerate(head.stores)],
        ]
    return lines


def _grid_stride(steps, stores, reductions, layout: tuple, tail: Tail, one_each: bool = False) -> list[str]:
    """The body of a kernel over every element: a grid-stride loop, ``UNROLL``
    elements a thread at a time while it has that many left, then the rest
    together (``_last_elements``; where every element has a thread of its own,
    ``one_each``, its element); then the full reductions' finish, or the tail on
    the first thread."""
    body = ["    i = cuda.grid(1)", "    step = cuda.gridsize(1)"]
    body += [f"    acc{m} = init{m}" for m in range(len(reductions))]
    _, strided, _, out_strides, draws = layout
    if not strided and not any(out_strides) and not one_each:
        body += _vector_loop(steps, stores, reductions, draws)
    if not one_each:
        body.append(f"    while i + {UNROLL - 1} * step < n:  # {UNROLL} elements at a time, loaded together")
        body += [f"        i{u} = i + {u} * step" for u in range(1, UNROLL)]
        at = [("i", "_0")] + [(f"i{u}", f"_{u}") for u in range(1, UNROLL)]
        body += _elements(steps, stores, reductions, at, layout)
        body.append(f"        i += {UNROLL} * step")
        body += _last_elements(steps, stores, reductions, layout)
    else:
        body.append("    while i < n:")
        body += _elements(steps, stores, reductions, [("i", "")], layout)
        body.append("        i += step")
    body += _advance_lines(draws)
    if reductions:
        body += _finish(reductions, tail)
    else:
        body += _first_thread(tail)
    return body


def _last_elements(steps, stores, reductions, layout: tuple) -> list[str]:
    """After the loop over ``UNROLL`` elements at a time, the thread's last
    elements (fewer than ``UNROLL``), loaded together: one wait for memory where
    a loop of one element at a time waited once an element (a thread of a
    stencil's kernel had four such waits after its loop). An element past the
    end reads the thread's first one and is neither stored nor reduced."""
    lines = ["    if i < n:  # the last elements, loaded together"]
    for u in range(1, UNROLL - 1):
        lines += [f"        g{u} = i + {u} * step < n", f"        i{u} = i + {u} * step if g{u} else i"]
    at = [("i", "_0")] + [(f"i{u}", f"_{u}") for u in range(1, UNROLL - 1)]
    guards = {f"_{u}": f"g{u}" for u in range(1, UNROLL - 1)}
    return lines + _elements(steps, stores, reductions, at, layout, guards)


def _last_block_lines(tail: Tail, epilogues) -> list[str]:
    """Lines that end the last block's branch of a kernel with epilogues (none
    without): ``tail``, the chain's where its reductions are along shared rows
    (after full ones ``_finish`` ran it: an empty one), then each epilogue in
    turn, the block's threads synchronised between stages so that each reads
    what the one before stored."""
    if not epilogues:
        return []
    lines = ["        if t == 0:", *_tail_lines(tail)] if tail.steps else []
    for k, e in enumerate(epilogues):
        lines += _epilogue_lines(e, k)
    return lines


def _epilogue_params(e: Epilogue, k: int) -> list[str]:
    """The parameters of epilogue ``k``: a chain's, suffixed ``_e{k}``."""
    na, nb, ns = e.counts
    names = [*[f"a{j}" for j in range(na)], *[f"b{j}" for j in range(nb)], *[f"c{j}" for j in range(len(e.strided))]]
    names += [*[f"s{j}" for j in range(ns)], *[f"o{j}" for j in range(len(e.stores))]]
    names += [f"q{j}" for j in range(len(e.tail.stores))]
    return [f"{name}_e{k}" for name in names]


_STAGE_NAME = re.compile(r"\b([abcoqsvwxyz]\d+)\b")  # a chain's parameters and values, as the lines name them


def _epilogue_lines(e: Epilogue, k: int) -> list[str]:
    """Epilogue ``k``'s lines in the last block's branch: its elements, its
    threads ``BLOCK`` apart, then its tail on the block's first thread, each
    after a barrier; every name of the chain suffixed ``_e{k}``."""
    ones = sorted({arg[1] for s in e.steps for arg in s.args if arg[0] == "b"})
    layout = (e.shape, e.strided, e.shifts or ((),) * len(e.strided), e.out_strides or (None,) * len(e.stores), ())
    lines = [
        "        cuda.syncthreads()  # what the stage before stored is seen",
        *[f"        y{j} = b{j}[0]" for j in ones],
    ]
    lines += ["        ep = t", f"        while ep < {e.n}:"]
    lines += ["    " + line for line in _elements(e.steps, e.stores, (), [("ep", "")], layout)]
    lines += [f"            ep += {BLOCK}"]
    if e.tail.steps:
        lines += ["        cuda.syncthreads()", "        if t == 0:", *_tail_lines(e.tail)]
    return [_STAGE_NAME.sub(lambda m: f"{m[1]}_e{k}", line) for line in lines]


def _first_thread(tail: Tail) -> list[str]:
    """Lines that run a tail of ops that touch nothing the other threads read
    or write (a chain without full reductions) on the kernel's first thread."""
    if not tail.steps:
        return []
    return ["    if cuda.grid(1) == 0:  # the tail", *[line[4:] for line in _tail_lines(tail)]]


def _vector_loop(steps, stores, reductions, draws: tuple) -> list[str]:
    """Where every array is C-contiguous and 16-byte aligned, the elements in
    groups of four, one vector load per input and one vector store per output
    (``kernels/_vector.py``); the loops after it take the last ``n % 4``. Not
    where the grid has more than twice the groups in threads, as a grid of a
    thread an element (``grid_1d`` of fewer elements than a wave) has: there
    a thread an element spreads a long chain over four times the threads (an
    ops-only Dormand-Prince attempt over 4096 trajectories)."""
    used = sorted({arg[1] for s in steps for arg in s.args if arg[0] == "a"})
    arrays = [f"a{k}" for k in used] + [f"o{k}" for k in range(len(stores))]
    if not arrays:
        return []
    tags = [f"_{u}" for u in range(4)]
    lines = [f"        {', '.join(f'x{k}{tag}' for tag in tags)} = load4(a{k}, i)" for k in used]
    lines += [line for u, tag in enumerate(tags) for line in _draws(draws, f"4 * i + {u}", tag)]
    lines += [f"        {_assign(f'v{j}{tag}', s, tag)}" for tag in tags for j, s in enumerate(steps)]
    lines += [f"        store4(o{k}, i, {', '.join(f'v{j}{tag}' for tag in tags)})" for k, j in enumerate(stores)]
    lines += [_accumulate(m, r, tag) for tag in tags for m, r in enumerate(reductions)]
    aligned = " | ".join(f"vector_base({a})" for a in arrays)
    return [  # where it would leave most threads idle (a grid of a thread an element: few elements), one at a time
        f"    if 2 * (n // 4) >= step and ({aligned}) % 16 == 0:  # four elements a load",
        "        nv = n // 4",
        "        while i < nv:",
        *["    " + line for line in lines],
        "            i += step",
        "        i = nv * 4 + cuda.grid(1)",
    ]


def _finish(reductions, tail: Tail) -> list[str]:
    """Lines after the element loop of full reductions: each block's
    accumulators combined through shared memory into its partials; the last
    block to take a ticket combines the partials, stores the values and runs
    the tail."""
    each, values = range(len(reductions)), list(enumerate(reductions))
    return [
        *_scratch(reductions, last=True, trees=False),
        *_block_partials(each),
        *[f"        acc{m} = init{m}" for m in each],
        "        j = t",
        "        while j < cuda.gridDim.x:",
        *[f"            acc{m} = combine{m}(acc{m}, partials{m}[j])" for m in each],
        f"            j += {BLOCK}",
        *[f"        acc{m} = total{m}(t, {BLOCK}, acc{m})" for m in each],
        "        if t == 0:",
        *[f"            r{m} = {_CONVERT[r.dtype]}(finalize{m}(acc{m}, scale))" for m, r in values],
        *[f"            red{m}[0] = r{m}" for m in each],
        *_tail_lines(tail),
        "            ticket[0] = 0  # for the next launch",
    ]


def _rows(steps, stores, reductions, layout: tuple) -> list[str]:
    """The body of a kernel whose chain ends in reductions along a block of its
    dimensions, all along the same rows: ``k`` elements into each value,
    ``trail`` elements apart, each value stored at ``red{m}[row]``. Rows of at
    most ``THREAD_ROWS`` elements are a thread's each (a grid-stride loop over
    rows); longer ones a block's, its threads along the row (a power of two
    of them), their accumulators combined through shared memory."""
    k, index = reductions[0].k, _row_element(reductions[0])
    each, values = range(len(reductions)), list(enumerate(reductions))
    elements = ["    " + line for line in _elements(steps, stores, reductions, [("i", "")], layout)]

    def stored(value: str) -> list[str]:  # the row's values, from ``value`` (a format of ``m``)
        return [f"red{m}[row] = {_CONVERT[r.dtype]}(finalize{m}({value.format(m=m)}, scale))" for m, r in values]

    if k <= THREAD_ROWS:
        return [
            "    row = cuda.grid(1)",
            f"    while row < n // {k}:",
            *[f"        acc{m} = init{m}" for m in each],
            f"        for j in range({k}):",
            f"            i = {index}",
            *elements,
            *[f"        {line}" for line in stored("acc{m}")],
            "        row += cuda.gridsize(1)",
            *_advance_lines(layout[4]),
        ]
    return [
        *_scratch(reductions),
        "    row = cuda.blockIdx.x",
        f"    while row < n // {k}:",
        *[f"        acc{m} = init{m}" for m in each],
        "        j = t",
        f"        while j < {k}:",
        f"            i = {index}",
        *elements,
        "            j += cuda.blockDim.x",
        *["    " + line for line in _tree(each, "cuda.blockDim.x // 2")],
        "        if t == 0:",
        *[f"            {line}" for line in stored("scratch{m}[0]")],
        "        cuda.syncthreads()  # before the next row uses the scratch arrays",
        "        row += cuda.gridDim.x",
        *_advance_lines(layout[4]),
    ]


def _pieced_rows(steps, stores, reductions, layout: tuple, pieces: int) -> list[str]:
    """The body of a kernel whose chain ends in reductions along a few long
    rows: ``pieces`` blocks a row (block ``b`` takes piece ``b % pieces`` of
    row ``b // pieces``, its threads ``BLOCK`` elements apart), each writing a
    partial of each reduction and counting itself done on the ticket; the last
    block combines the partials, its threads in groups of ``width`` (a power of
    two from 32 to ``BLOCK``: as many groups as rows, up to eight) that each take
    a row, its partials ``width`` apart then a tree through shared memory, and
    stores the row's value. A thread a row, adding the partials in order, took
    9.5 of the 13.5 µs of the Ising sweep's kernel (four rows of 132 partials)
    on an H100."""
    k, index = reductions[0].k, _row_element(reductions[0])
    each, values = range(len(reductions)), list(enumerate(reductions))
    return [
        *_scratch(reductions, last=True),
        f"    row = cuda.blockIdx.x // {pieces}",
        *[f"    acc{m} = init{m}" for m in each],
        f"    j = (cuda.blockIdx.x % {pieces}) * {BLOCK} + t",
        f"    while j < {k}:",
        f"        i = {index}",
        *_elements(steps, stores, reductions, [("i", "")], layout),
        f"        j += {pieces * BLOCK}",
        *_advance_lines(layout[4]),
        *_block_partials(each),
        f"        width = {BLOCK}",
        f"        while width > 32 and width * (n // {k}) > {BLOCK}:",
        "            width //= 2",
        "        lane = t % width",
        "        first = 0",
        f"        while first < n // {k}:  # the same passes for every thread: the tree syncs them",
        "            row = first + t // width",
        *[f"            acc{m} = init{m}" for m in each],
        f"            j = lane if row < n // {k} else {pieces}",
        f"            while j < {pieces}:",
        *[f"                acc{m} = combine{m}(acc{m}, partials{m}[row * {pieces} + j])" for m in each],
        "                j += width",
        *["        " + line for line in _tree(each, "width // 2", "lane")],
        f"            if lane == 0 and row < n // {k}:",
        *[f"                red{m}[row] = {_CONVERT[r.dtype]}(finalize{m}(scratch{m}[t], scale))" for m, r in values],
        "            cuda.syncthreads()  # before the next pass writes the scratch arrays",
        f"            first += {BLOCK} // width",
        "        if t == 0:",
        "            ticket[0] = 0  # for the next launch",
    ]


def _row_element(r: Reduction) -> str:
    """The flat index of element ``j`` of row ``row`` of reduction ``r``'s rows."""
    k, trail = r.k, r.trail
    return f"row * {k} + j" if trail == 1 else f"(row // {trail}) * {k * trail} + j * {trail} + row % {trail}"


def _scratch(reductions, last: bool = False, trees: bool = True) -> list[str]:
    """Lines that name the thread ``t`` and make each reduction's shared scratch
    array for ``_tree`` (unless not ``trees``; ``last``: and the block's flag of
    being the last one done)."""
    return [
        "    t = cuda.threadIdx.x",
        *[f"    scratch{m} = cuda.shared.array({BLOCK}, np.{r.acc})" for m, r in enumerate(reductions) if trees],
        *(["    last = cuda.shared.array(1, np.int32)"] if last else []),
    ]


def _block_partials(each) -> list[str]:
    """Lines that combine the block's accumulators into its partials (warp
    shuffles, ``reduce.block_total``), count the block done on the ticket, and
    open ``if last[0]:`` for the last block."""
    return [
        *[f"    acc{m} = total{m}(t, {BLOCK}, acc{m})" for m in each],
        "    if t == 0:",
        *[f"        partials{m}[cuda.blockIdx.x] = acc{m}" for m in each],
        "        cuda.threadfence()  # the partials are seen before the ticket",
        "        last[0] = cuda.atomic.add(ticket, 0, 1) == cuda.gridDim.x - 1",
        "    cuda.syncthreads()",
        "    if last[0]:  # every other block has written its partials",
        "        cuda.threadfence()",
    ]


def _tree(each, half: str | None = None, lane: str = "t") -> list[str]:
    """Lines that combine ``acc{m}`` of the block's threads into ``scratch{m}[0]``,
    for each ``m`` (or, ``lane`` being ``t`` modulo a width of ``2 * half``, those
    of each group of that width into the group's first element)."""
    return [
        *[f"    scratch{m}[t] = acc{m}" for m in each],
        "    cuda.syncthreads()",
        f"    half = {half or BLOCK // 2}",
        "    while half > 0:",
        f"        if {lane} < half:",
        *[f"            scratch{m}[t] = combine{m}(scratch{m}[t], scratch{m}[t + half])" for m in each],
        "        cuda.syncthreads()",
        "        half //= 2",
    ]


@functools.cache
def kernel(name: str, text: str):
    """The kernel ``name`` compiled from ``text`` (a ``source``), once per text
    in a process and, on a GPU, once per text on this machine (``_source``)."""
    ends_pass = _ENDS_PASS in text
    # one that sets a conditional handle links the driver's setter, which Numba's disk cache does not keep
    compiled = jit_source(name, text, "fused", name, cache=not ends_pass and _SETS_NODE not in text)
    compiled.tp_recipe = ("fused", "kernel", (name, text))  # how to build it again elsewhere
    if ends_pass:
        compiled.tp_polled = frozenset({"cancel"})  # read while CUDAGraph.cancel() may write it, on purpose
    return compiled
