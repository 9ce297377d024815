"""The optimizers' fused steps (one launch per group) against their tensor-op
steps (``foreach=False``): the same operations, so equal results (bit for bit
on the simulator, within the last bits on a GPU, where a multiply and an add
may contract), one kernel per group in a captured step, and the fallbacks."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn
import tensorplay.optim as optim
from tensorplay.runtime.launch import _launchers

ON_GPU = tp.cuda.backend() == "cuda"
# of every kind the fused kernels take: matrices, vectors, one element, 0-d
SHAPES = [(4, 3), (5,), (1,), (), (2, 2, 3)]


def _params(shapes, seed, dtype=tp.float32):
    rng = np.random.default_rng(seed)
    return [nn.Parameter(tp.tensor(rng.uniform(-1, 1, s), dtype=dtype)) for s in shapes]


def _run(make, shapes, steps=4, dtype=tp.float32, foreach=None):
    """The parameters after ``steps`` steps of ``make(params, foreach)`` with fixed gradients."""
    params = _params(shapes, 1, dtype)
    opt = make(params, foreach)
    rng = np.random.default_rng(2)
    for _ in range(steps):
        for p in params:
            p.grad = tp.tensor(rng.uniform(-1, 1, p.shape), dtype=dtype)
        opt.step()
    return [p.numpy() for p in params], opt


def _assert_same(fused, plain):
    for f, p in zip(fused, plain, strict=True):
        if ON_GPU:
            np.testing.assert_allclose(f, p, rtol=1e-6, atol=1e-7)
        else:
            np.testing.assert_array_equal(f, p)


OPTIMIZERS = {
    "sgd": lambda ps, fe: optim.SGD(ps, lr=0.1, foreach=fe),
    "sgd-wd": lambda ps, fe: optim.SGD(ps, lr=0.1, weight_decay=0.01, foreach=fe),
    "sgd-momentum": lambda ps, fe: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.1, foreach=fe),
    "sgd-nesterov": lambda ps, fe: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.1, foreach=fe),
    "adam": lambda ps, fe: optim.Adam(ps, lr=0.05, foreach=fe),
    "adam-wd": lambda ps, fe: optim.Adam(ps, lr=0.05, betas=(0.8, 0.99), weight_decay=0.1, foreach=fe),
    "adam-lr-tensor": lambda ps, fe: optim.Adam(ps, lr=tp.tensor(0.05, dtype=tp.float64), foreach=fe),
    "sgd-lr-tensor": lambda ps, fe: optim.SGD(ps, lr=tp.tensor([0.1]), momentum=0.5, foreach=fe),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_fused_steps_equal_tensor_op_steps(name):
    fused, _ = _run(OPTIMIZERS[name], SHAPES)
    plain, _ = _run(OPTIMIZERS[name], SHAPES, foreach=False)
    _assert_same(fused, plain)


@pytest.mark.parametrize("name", ["sgd-momentum", "adam"])
def test_float64_and_groups_of_many_launches(name):
    # 30 parameters: more than one launch takes (its arguments are limited)
    shapes = [(i % 4 + 1, 3) for i in range(30)]
    fused, _ = _run(OPTIMIZERS[name], shapes, steps=2, dtype=tp.float64)
    plain, _ = _run(OPTIMIZERS[name], shapes, steps=2, dtype=tp.float64, foreach=False)
    _assert_same(fused, plain)


@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_a_captured_fused_step_is_one_kernel_and_replays_like_eager_steps(name):
    params = _params(SHAPES, 3)
    twin = _params(SHAPES, 3)
    opt, opt_twin = OPTIMIZERS[name](params, None), OPTIMIZERS[name](twin, False)
    for p, q in zip(params, twin, strict=True):
        p.grad = tp.full(p.shape, 0.5)
        q.grad = tp.full(q.shape, 0.5)
    opt.step()  # eager: makes the state
    opt_twin.step()
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        opt.step()
    kernels = re.findall(r"multi_tensor\.(\w+)", g.dot())
    assert kernels == (["sgd_5"] if name == "sgd" else ["adam_steps_5", "adam_5"]), g.dot()
    for _ in range(3):
        g.replay()
        opt_twin.step()
    _assert_same([p.numpy() for p in params], [q.numpy() for q in twin])


@pytest.mark.parametrize("name", ["sgd", "sgd-wd", "sgd-momentum", "sgd-nesterov"])
def test_bfloat16_sgd_steps_are_one_kernel_rounded_as_the_tensor_ops_round(name):
    """bfloat16 parameters: computed in float32 and rounded to bfloat16 after each
    operation, as the tensor ops do, so the same bits (a rounding after each
    product leaves a GPU nothing to contract); and a captured step is one kernel."""
    fused, _ = _run(OPTIMIZERS[name], SHAPES, dtype=tp.bfloat16)
    plain, _ = _run(OPTIMIZERS[name], SHAPES, dtype=tp.bfloat16, foreach=False)
    for f, p in zip(fused, plain, strict=True):
        np.testing.assert_array_equal(f.view(np.uint16), p.view(np.uint16))
    params = _params(SHAPES, 3, tp.bfloat16)
    opt = OPTIMIZERS[name](params, None)
    for p in params:
        p.grad = tp.full(p.shape, 0.5, dtype=tp.bfloat16)
    opt.step()  # eager: makes the state
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        opt.step()
    assert re.findall(r"multi_tensor\.(\w+)", g.dot()) == ["sgd_5_bf16"], g.dot()


@pytest.mark.parametrize("name", ["sgd-momentum", "adam-wd"])
@pytest.mark.parametrize("dtype", [tp.float32, tp.bfloat16], ids=str)
def test_parameters_off_the_vector_alignment_step_as_the_tensor_ops_do(name, dtype):
    # The fused kernel loads and stores groups of four elements where every array is 16-byte
    # aligned, and takes the others (views into a buffer, here) and the last size % 4 element by
    # element; the simulator, as the GPU, refuses a misaligned vector load.
    def run(foreach):
        rng = np.random.default_rng(4)
        buffer = tp.tensor(rng.uniform(-1, 1, 64), dtype=dtype)
        params = [nn.Parameter(buffer[1:14]), nn.Parameter(buffer[16:32]), nn.Parameter(tp.ones(7, dtype=dtype))]
        opt = OPTIMIZERS[name](params, foreach)
        for _ in range(3):
            for p in params:
                p.grad = tp.tensor(rng.uniform(-1, 1, p.shape), dtype=dtype)
            opt.step()
        return [p.numpy().astype(np.float32) for p in params]

    _assert_same(run(None), run(False))


def test_groups_the_kernel_cannot_take_use_tensor_ops():
    # A strided parameter, a float16 one, and one without a gradient: the
    # strided group and the float16 group step through tensor ops, still right.
    base = nn.Parameter(tp.ones(4, 6))
    strided = base[:, ::2]
    half = nn.Parameter(tp.ones(3, dtype=tp.float16))
    idle = nn.Parameter(tp.ones(2))
    opt = optim.SGD([{"params": [base, idle]}, {"params": [half]}], lr=0.5)
    base.grad = tp.ones(4, 6)
    half.grad = tp.ones(3, dtype=tp.float16)
    opt.step()
    np.testing.assert_array_equal(base.numpy(), np.full((4, 6), 0.5, np.float32))
    np.testing.assert_array_equal(half.numpy(), np.full(3, 0.5, np.float16))
    np.testing.assert_array_equal(idle.numpy(), np.ones(2, np.float32))
    assert strided.shape == (4, 3)


def test_fused_kernels_can_be_read():
    # The text a fused step runs, as plain Numba, named after its optimizer.
    _run(OPTIMIZERS["sgd-nesterov"], [(2,), (3,)], steps=2)
    texts = [key[0].tp_source for key in list(_launchers) if hasattr(key[0], "tp_source")]
    signature = "def sgd_2(p0, g0, b0, p1, g1, b1, lr, weight_decay, momentum, undamped, _end0):"
    assert any(signature in text and "d = d + b * momentum" in text for text in texts)


@pytest.mark.parametrize("name", ["sgd-momentum", "adam-wd"])
def test_a_fused_step_reads_options_changed_between_steps(name):
    # a step's launches are planned once per layout; the numbers are packed at every step
    def run(foreach):
        params = _params(SHAPES, 4)
        opt = OPTIMIZERS[name](params, foreach)
        rng = np.random.default_rng(5)
        for step in range(4):
            for p in params:
                p.grad = tp.tensor(rng.uniform(-1, 1, p.shape), dtype=tp.float32)
            opt.param_groups[0]["lr"] = 0.1 / (step + 1)  # as a learning-rate schedule sets it
            opt.param_groups[0]["weight_decay"] = 0.01 * step
            opt.step()
        return [p.numpy() for p in params]

    _assert_same(run(None), run(False))


def _to_bf16_bits(v: np.ndarray) -> np.ndarray:
    """float32 values as bfloat16 bits, rounded to nearest even."""
    u = v.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _from_bf16_bits(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


@pytest.mark.parametrize("storage", ["", "bfloat16"])
def test_each_tensor_takes_its_own_blocks_of_one_row(storage):
    # Blocks shared out in proportion to the sizes (several blocks a tensor, which the optimizers' launches on the
    # simulator never give): every element of every tensor updated once, none of another tensor's touched.
    from tensorplay.kernels.multi_tensor import blocks_for, multi_tensor

    sizes, block = [1000, 3, 517, 64], 8
    counts = blocks_for(sizes, block, storage)
    assert counts == [-(-n // (block * (8 if storage else 4))) for n in sizes]
    ends = np.cumsum(counts)
    kernel = multi_tensor("axpy", len(sizes), ("y", "x"), ("a",), "", "", "{y}[j] = {y}[j] + a * {x}[j]", storage)
    rng = np.random.default_rng(3)
    xs = [rng.uniform(-1, 1, n).astype(np.float32) for n in sizes]
    ys = [rng.uniform(-1, 1, n).astype(np.float32) for n in sizes]
    if storage:  # the arrays hold bfloat16 bits, as the optimizers' do
        xs, ys = [_to_bf16_bits(x) for x in xs], [_to_bf16_bits(y) for y in ys]
    decode = _from_bf16_bits if storage else np.copy
    want = [decode(y).astype(np.float64) + 2 * decode(x).astype(np.float64) for y, x in zip(ys, xs, strict=True)]
    args = [a for pair in zip(ys, xs, strict=True) for a in pair]
    kernel[int(ends[-1]), block](*args, np.float32(2.0), *[np.int64(e) for e in ends[:-1]])
    tol = 1e-2 if storage else 1e-6  # bfloat16 keeps 8 bits of mantissa
    for y, w in zip(ys, want, strict=True):
        np.testing.assert_allclose(decode(y), w, rtol=tol, atol=tol)
