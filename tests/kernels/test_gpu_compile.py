"""Every library kernel the simulator launched also compiles for a real GPU.

The simulator runs kernels as Python; this compiles them to PTX (sm_90) the way
the GPU backend would, in a subprocess without the simulator, so type errors in
GPU-only code fail here rather than on the GPU. It needs NVIDIA's NVRTC and NVVM
libraries (the ``test`` extra installs them) but no GPU.
"""

from __future__ import annotations

import importlib
import json
import operator
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import EVERY_DTYPE
from helpers.gpu_compile import MISSING_LIBRARIES, signatures

import tensorplay as tp
from tensorplay.runtime.backend import get as get_backend

pytestmark = pytest.mark.skipif(tp.cuda.backend() != "sim", reason="on a GPU every test compiles its kernels")

UNARY = [operator.neg, operator.invert, abs] + [
    getattr(tp.Tensor, name) for name in ("exp", "log", "sqrt", "tanh", "sin", "cos", "sigmoid", "relu")
]
BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod, operator.pow]
# Ops whose device functions are one Python operator of the same family (kernels/elementwise.py), which Numba
# types by one template, are checked through one of each family: == and < for the six comparisons, & for the
# three bitwise ops, maximum for minimum too (the same expression with > for <): 230 kernels fewer, a sixth.
BINARY += [operator.and_, tp.maximum, tp.fmod]
COMPARE = [tp.eq, tp.lt]
# The array API's functions (kernels/op_table.py): those whose device function is typed on each dtype's own
# elements, on every dtype; those that convert integers (and float16) to float32 first, on float32 and float64
# only: on the other dtypes their kernels differ from exp's in nothing but that device function, typed the same.
UNARY += [getattr(tp, name) for name in ("square", "sign", "signbit", "isnan", "isinf", "isfinite", "logical_not")]
FLOAT_UNARY = [getattr(tp, name) for name in (
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "sinh", "tan", "expm1", "log1p", "log2", "log10",
    "reciprocal", "rsqrt", "erf", "erfc", "lgamma", "digamma", "floor", "ceil", "trunc", "round",
)]  # fmt: skip
FLOAT_BINARY = [tp.atan2, tp.hypot, tp.copysign, tp.logaddexp, tp.nextafter]
BINARY += [operator.lshift, operator.rshift]
COMPARE += [tp.logical_and, tp.logical_xor]
# Complex tensors: each op that takes them (its device function picks cmath's or its own complex function as
# Numba types it: kernels/scalar_math.py), with real and complex numbers and real tensors as other operands.
COMPLEX_UNARY = [getattr(tp, name) for name in (
    "exp", "expm1", "log", "log1p", "log2", "log10", "sqrt", "sin", "cos", "tan", "sinh", "cosh", "tanh", "asin",
    "acos", "atan", "asinh", "acosh", "atanh", "abs", "conj", "real", "imag", "sign", "square", "negative",
    "reciprocal", "rsqrt", "round", "isnan", "isinf", "isfinite",
)]  # fmt: skip
COMPLEX_BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow, tp.eq, tp.ne]
# The layouts other than flat are checked one op per (pattern, cast, argument types) (``_sampled``):
# these ops give every such kernel (a result of the operand's dtype, a float one, a bool one, an
# integer-only op); compiling the others there too would check the same typing again, at 0.2 s a kernel.
LAYOUT_UNARY = [operator.neg, operator.invert, tp.Tensor.exp]
LAYOUT_BINARY = [operator.add, operator.truediv, operator.and_, tp.eq]
# Numba types the integers narrower than 64 bits alike: each is promoted to int64 (signed) or uint64
# (unsigned) in arithmetic, comparisons and bitwise ops, so int8 < int8 and int32 < int32 are both
# int64 < int64, and uint8 + uint8 and uint32 + uint32 both uint64 + uint64. The ops are checked on one
# dtype of each such class (int32 and uint8, with int64, uint64, the floats, bfloat16 and bool); int8,
# int16, uint16 and uint32 go through their loads, stores and conversions (``ODD_ONES``): a third fewer
# kernels.
TYPED_ALIKE = {tp.int8: tp.int32, tp.int16: tp.int32, tp.uint16: tp.uint8, tp.uint32: tp.uint8}
OP_DTYPES = [d for d in EVERY_DTYPE if d not in TYPED_ALIKE]
ODD_ONES = {tp.float32, tp.int64, tp.bool, tp.bfloat16}  # what the others convert to and from


def _attempt(fn, *args) -> None:
    try:
        fn(*args)
    except (TypeError, ValueError):
        pass  # an op this dtype does not take: nothing launched


def _launch_a_bit_of_everything() -> None:
    """Each op family on each class of dtype, flat and strided, with tensors and
    numbers; conversions between every dtype and every class."""
    for dtype in TYPED_ALIKE:
        x = tp.ones(3, dtype=dtype)
        for other in ODD_ONES:
            _attempt(x.to, other)
            _attempt(tp.ones(3, dtype=other).to, dtype)
    for dtype in OP_DTYPES:
        x = tp.ones((2, 3), dtype=dtype)
        xt = x.t()  # a strided view with short rows: the per-element nd layout
        rows = tp.ones((2, 96), dtype=dtype)[:, :64:2]  # rows of 32 that do not merge: the rows layout
        tiles = tp.ones((32, 32), dtype=dtype).t()  # column-major: one transpose tile
        for op in UNARY + (FLOAT_UNARY if dtype in (tp.float32, tp.float64) else []):
            _attempt(op, x)
        for op in BINARY + COMPARE + (FLOAT_BINARY if dtype in (tp.float32, tp.float64) else []):
            _attempt(op, x, x)
            _attempt(op, x, 2)
            _attempt(op, 2.5, x)
        for op in LAYOUT_UNARY:
            _attempt(op, xt)
            _attempt(op, rows)
            _attempt(op, tiles)
        for op in LAYOUT_BINARY:
            _attempt(op, xt, x.t())
            _attempt(op, rows, 2)
        _attempt(tp.eq, rows, rows)  # as max(dim) finds its indices
        _attempt(tp.where, x > 0, x, x)
        _attempt(x.clamp, 0, 1)
        _attempt(xt.contiguous)
        for other in OP_DTYPES:
            _attempt(x.to, other)
        for op in ("sum", "mean", "max", "min"):
            _attempt(getattr(x, op))
            _attempt(getattr(x, op), -1)  # max, min: values and indices
            values_only = {"max": "amax", "min": "amin"}.get(op, op)  # the indices' kernels are the ones above
            _attempt(getattr(tp.ones((2, 700), dtype=dtype), values_only), -1)  # the two-pass path
        _attempt(x.fill_, 1)
    for dtype in (tp.float32, tp.float64, tp.float16):
        tp.rand(4, dtype=dtype)
        tp.randn(4, dtype=dtype)
        tp.nn.functional.dropout(tp.ones(4, dtype=dtype), 0.5)
        tp.ones((2, 3), dtype=dtype) @ tp.ones((3, 2), dtype=dtype)
        tp.ones((2, 2, 3), dtype=dtype) @ tp.ones((2, 3, 2), dtype=dtype)
    tp.ones((2, 3), dtype=tp.int8) @ tp.ones((3, 2), dtype=tp.int8)  # an integer product (int64 sums)
    square = tp.ones((64, 64))  # in float32 only: each matmul variant takes seconds to compile
    square @ square  # the default tiles; they fill the square: the exact variant too
    square.t() @ square.t()  # operands read transposed
    square @ square.t()  # B alone transposed, as linear layers give it
    ragged = tp.ones((64, 63))  # K of 63 fills no K tile: the general kernels
    ragged @ ragged.t()
    ragged.t().t().contiguous() @ tp.ones((63, 64))
    tp.ones((8, 512)) @ tp.ones((512, 8))  # K split, partial products summed
    tp.logical_not(tp.ones(2, dtype=tp.bool))
    for dtype in (tp.complex64, tp.complex128):
        z, real = tp.ones((2, 3), dtype=dtype), tp.ones((2, 3))
        for op in COMPLEX_UNARY:
            _attempt(op, z)
        for op in COMPLEX_BINARY:
            _attempt(op, z, z)
            _attempt(op, z, 2.5)  # a real number: a real scalar parameter
            _attempt(op, 1j, z)  # a complex one: a one-element tensor, broadcast
            _attempt(op, real, z)
        _attempt(tp.exp, z.t())
        _attempt(tp.exp, tp.ones((32, 32), dtype=dtype).t())
        _attempt(operator.add, tp.ones((2, 96), dtype=dtype)[:, :64:2], 2.0)
    tp.ones((2, 3, 40)) + tp.ones((2, 1, 40))  # three unmergeable dimensions, rows of 40
    tp.ones((2, 3, 4)) + tp.ones((2, 1, 4))  # the same with short rows
    tp.ones(9)[::3] * 2.0  # one strided dimension: the flat kernel on a strided array


def _launch_every_fused_kind() -> set[str]:
    """Compiled functions whose captures generate each kind of fused kernel:
    elementwise with a broadcast operand, a reduction along the last dimension,
    two full reductions with a tail of one-element ops and full-size ops after
    the tail, a chain of mixed dtypes,
    and an in-place update of a slice with a tail and no reduction, with
    rolled reads and uniform draws, a reduction over a leading dimension
    with a tail, and a head of one-element ops before two reductions along
    short rows, then two along long ones, and ops over fewer elements before
    a chain that reads them broadcast, one of their results stored by the
    first element along the broadcast dimensions, and a reduction along a
    few long rows that blocks share. Returns their sources."""

    def f(x, row, w, it, go):
        rows = (x * row * tp.rand(4, 40)).exp().sum(-1)  # uniform draws in a kernel of rows
        change = (w - 1).abs().max()
        spread = (w * w).sum()  # a second full reduction of the chain, in the same kernel
        it.add_(1)
        tp.logical_and(tp.gt(change, spread), tp.lt(it, 5), out=go)
        return rows, w * 3 + 1  # after the tail, in its kernel: it touches neither it nor go

    def mixed(i, h, b):  # three dtypes promoted in one chain, bfloat16's bits decoded and encoded
        return ((i * h).exp() + b).relu(), (b * 2).sum()

    def stencil(p, q, it, go):  # stored through the slice's strides; the tail on the first thread
        p[1:-1, 1:-1].mul_(0.5).add_(q + p[:-2, 1:-1] + tp.roll(q, 1, 1) * tp.rand(4, 7))  # rolled, drawn
        twice = q * 2.0
        it.add_(1)
        tp.lt(it, 5, out=go)
        return twice.sum(dim=0)  # over a leading dimension, after the tail: a kernel of rows with a tail

    def heads_and_rows(x, z, t, h_abs):
        t_new = tp.minimum(t + h_abs, 1.0)  # one-element ops first: the next kernel's head, its result stored
        y = x * (t_new - t)
        short = y.sum(-1), y.amax(-1)  # rows of 3: a thread a row, two reductions in one kernel
        w = z * 2.0
        return t_new, *short, w.sum(-1), w.amin(-1)  # rows of 40: a block a row

    def widened(x, beta):
        twice = -2.0 * beta  # over the lattices, then the chain over their sites reads it broadcast
        kept = twice + 1.0  # returned: stored by the first site of each lattice
        return tp.exp(twice * x), kept

    compiled, compiled_mixed, compiled_stencil = tp.compile(f), tp.compile(mixed), tp.compile(stencil)

    def pieced(x):  # a few long rows, as on a GPU's wave of threads: blocks share each one
        return (x * 2.0).sum(dim=(1, 2))

    compiled_rows, compiled_widened = tp.compile(heads_and_rows), tp.compile(widened)
    compiled_pieced = tp.compile(pieced)
    args = tp.ones((4, 40)), tp.ones(40), tp.ones(64), tp.zeros(1, dtype=tp.int32), tp.ones(1, dtype=tp.bool)
    mixed_args = tp.ones(64, dtype=tp.int16), tp.ones(64, dtype=tp.float16), tp.ones(64, dtype=tp.bfloat16)
    with tp.cuda.graph(tp.cuda.CUDAGraph()):
        compiled(*args)
        compiled_mixed(*mixed_args)
        compiled_stencil(tp.ones((6, 9)), tp.ones((4, 7)), tp.zeros(1, dtype=tp.int64), tp.ones(1, dtype=tp.bool))
        compiled_rows(tp.ones((50, 3)), tp.ones((4, 40)), tp.zeros(1), tp.full((1,), 0.5))
        compiled_widened(tp.ones((3, 6, 5)), tp.ones((3, 1, 1)))
        device = get_backend()
        threads, device.max_threads_per_launch = device.max_threads_per_launch, 270_336
        try:
            compiled_pieced(tp.ones((4, 32, 600)))
        finally:
            device.max_threads_per_launch = threads
    assert len(compiled.kernels()) == 2 and len(compiled_mixed.kernels()) == 1  # its reduction reads the chain
    assert len(compiled_stencil.kernels()) == 3  # a shifted read of what a chain writes ends it: mul_, +, add_
    assert len(compiled_rows.kernels()) == 2 and len(compiled_widened.kernels()) == 1
    assert "partials0[row * " in compiled_pieced.kernels()[0]
    every = (compiled, compiled_mixed, compiled_stencil, compiled_rows, compiled_widened, compiled_pieced)
    return set().union(*(set(c.kernels()) for c in every))


def _gather_kernels() -> list:
    """The staged replays' gather kernels (``kernels/gather.py``) for 1, 3 and the most pairs a launch takes."""
    from tensorplay.kernels.gather import MAX_PAIRS

    return [
        {"recipe": ["gather", "kernel", [k]], "args": [["int64", 1, True]] + ["int64"] * (2 * k)}
        for k in (1, 3, MAX_PAIRS)
    ]


def _sampled(found: list, own: set[str]) -> list:
    """``found``, but of the fused kernels those this file launched (a fused
    kernel is generated per chain: other tests' chains would be checked only
    when they ran first in this process), and of the elementwise kernels of a layout other
    than flat one op per (layout, operand pattern, cast, argument types): an
    op's device function is typed with the same element types in every layout,
    and each op launches flat on each dtype (``_launch_a_bit_of_everything``),
    so the other layouts' own code is what is left to check (a third fewer
    kernels: about a minute of CI); and of those with a scalar operand, typed
    as an array's element, one op per (pattern, layout, cast, argument types)
    where the op was typed on the same element types from arrays."""
    kept, layouts = [], set()
    typed_on_arrays = {_op_typing(s) for s in found if _elementwise(s) and "s" not in s["recipe"][2][1]}
    for s in found:
        if s["recipe"][0] == "fused":
            if s["recipe"][2][1] in own:
                kept.append(s)
        elif _elementwise(s) and "s" in s["recipe"][2][1] and _op_typing(s) in typed_on_arrays:
            # a scalar operand arrives typed as the array's element, so the op is typed as on two arrays;
            # the pattern's own code is checked once per (pattern, layout, cast, argument types)
            _, pattern, layout, cast = s["recipe"][2]
            key = ("scalar", pattern, layout, cast, json.dumps(s["args"]))
            if key not in layouts:
                layouts.add(key)
                kept.append(s)
        elif _elementwise(s) and s["recipe"][2][2] != "flat":
            _, pattern, layout, cast = s["recipe"][2]
            key = (layout, pattern, cast, json.dumps(s["args"]))
            if key not in layouts:
                layouts.add(key)
                kept.append(s)
        else:
            kept.append(s)
    return kept


def _elementwise(s: dict) -> bool:
    return s["recipe"][:2] == ["elementwise", "kernel"]


def _op_typing(s: dict) -> tuple:
    """What an elementwise kernel types its op's device function with: the op,
    its operands' element types and the cast."""
    op, _, _, cast = s["recipe"][2]
    return op, tuple(a[0] if isinstance(a, list) else a for a in s["args"][1:]), cast


def _check(found: list) -> subprocess.CompletedProcess:
    """Run the checker on ``found`` in a process without the simulator (skips
    the test where NVRTC or NVVM is missing)."""
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "TENSORPLAY_BACKEND")}
    env.setdefault("TENSORPLAY_CACHE_DIR", tempfile.mkdtemp(prefix="tensorplay-gpu-compile-"))  # not the user's
    script = Path(__file__).resolve().parents[1] / "helpers" / "gpu_compile.py"
    proc = subprocess.run(
        [sys.executable, str(script)], input=json.dumps(found), capture_output=True, text=True, env=env, timeout=1800
    )
    if proc.returncode == MISSING_LIBRARIES:
        pytest.skip(proc.stdout.strip())
    return proc


@pytest.mark.gpu_compile
def test_every_launched_library_kernel_compiles_for_the_gpu(monkeypatch):
    # Which kernels are launched with which argument types is what counts here, not what they compute: the
    # simulator skips running them (a minute of simulated threads; the values are checked everywhere else).
    simlaunch = importlib.import_module("tensorplay.runtime.backend.simlaunch")
    monkeypatch.setattr(simlaunch, "run_kernel", lambda *args: None)
    _launch_a_bit_of_everything()
    own = _launch_every_fused_kind()
    tp.cuda.synchronize()
    monkeypatch.undo()
    found = _sampled(signatures(), own) + _gather_kernels()
    families = {tuple(s["recipe"][:2]) for s in found}
    assert {("elementwise", "kernel"), ("reduce", "rows_kernel"), ("reduce", "chunks_kernel")} <= families
    assert {("random", "uniform"), ("random", "normal"), ("random", "dropout"), ("fused", "kernel")} <= families
    assert {("matmul", "matmul_tiled"), ("matmul", "matmul_tiled_variant"), ("matmul", "matmul_sum_splits")} <= families
    output_dtypes = {s["args"][0][0] for s in found if s["recipe"][:2] == ["elementwise", "kernel"]}
    assert output_dtypes >= {d.name for d in EVERY_DTYPE} | {"complex64", "complex128"}
    proc = _check(found)
    assert proc.returncode == 0, f"{len(found)} kernels checked:\n{proc.stdout}{proc.stderr[-3000:]}"


def test_a_kernel_that_does_not_compile_fails_the_check():
    # The checker must fail, not pass, on a kernel that does not compile: here an
    # add of two operands given one (its signature names two arrays, not three).
    found = [{"recipe": ["elementwise", "kernel", ["add", "aa", "flat", "none"]], "args": [["float32", 1, True]] * 2}]
    proc = _check(found)
    assert proc.returncode == 1 and "FAILED elementwise.kernel" in proc.stdout, proc.stdout + proc.stderr[-2000:]
