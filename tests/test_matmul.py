"""matmul against NumPy in float64: 1-D, 2-D, batched and broadcast operands."""

import math
import re

import numpy as np
import pytest
from helpers import FLOAT_DTYPES, INT_DTYPES, assert_close, random_tensor, reference

import tensorplay as tp
from tensorplay.kernels import matmul as mk
from tensorplay.runtime.backend import get as get_backend

NUM_DTYPES = FLOAT_DTYPES + INT_DTYPES


@pytest.fixture(autouse=True)
def numba_kernels():
    """These are tests of tensorplay's own kernels: on a GPU, cuBLAS would take the
    float products (tests/test_matmul_library.py tests that path and compares the two)."""
    saved = tp.backends.matmul.library
    tp.backends.matmul.library = False
    yield
    tp.backends.matmul.library = saved


@pytest.mark.parametrize(
    "shape_a, shape_b",
    [
        ((4,), (4,)),
        ((3,), (3, 5)),
        ((4, 3), (3,)),
        ((5, 7), (7, 3)),
        ((17, 2), (2, 3)),
        ((2, 3, 4), (2, 4, 5)),
        ((1, 2, 3), (2, 3, 4)),
        ((3, 4), (2, 4, 5)),
        ((2, 1, 2, 3), (1, 3, 2)),
        ((2, 3, 4), (4,)),
        ((4,), (2, 4, 3)),
    ],
    ids=str,
)
def test_matmul_shapes(shape_a, shape_b):
    x, a = random_tensor(shape_a, tp.float32, seed=36)
    y, b = random_tensor(shape_b, tp.float32, seed=37)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    assert_close(x @ y, want, atol=1e-5, dtype=tp.float32)


@pytest.mark.parametrize("dtype", NUM_DTYPES, ids=str)
def test_matmul_dtypes(dtype):
    x, a = random_tensor((5, 7), dtype, seed=38)
    y, b = random_tensor((7, 3), dtype, seed=39)
    assert_close(x.matmul(y), reference(np.matmul, a, b), atol=1e-5 if dtype is tp.float32 else None, dtype=dtype)


def test_matmul_mixed_dtypes_and_layouts():
    x, a = random_tensor((4, 3), tp.int32, seed=40)
    y, b = random_tensor((4, 5), tp.float32, seed=41)
    want = a.T.astype(np.float64) @ b
    assert_close(tp.matmul(x.t(), y), want, atol=1e-5, dtype=tp.float32)  # transposed int32 @ float32
    assert_close(y.t() @ x.float(), b.T.astype(np.float64) @ a, atol=1e-5)
    assert_close(x[::2, 1:] @ y[1::2, ::2], a[::2, 1:].astype(np.float64) @ b[1::2, ::2], atol=1e-5)
    assert_close(x.t() @ x, a.T.astype(np.int64) @ a, dtype=tp.int32)
    z, c = random_tensor((3, 4), tp.float64, seed=42)
    assert_close(x.t().long() @ z.t()[:, :2], a.T @ c.T[:, :2], dtype=tp.float64)


def test_matmul_of_empty_operands():
    assert_close(tp.ones(0, 3) @ tp.ones(3, 2), np.zeros((0, 2)))
    assert_close(tp.ones(2, 0) @ tp.ones(0, 3), np.zeros((2, 3)))
    assert_close(tp.ones(0) @ tp.ones(0), 0.0)


def test_matmul_errors():
    with pytest.raises(ValueError, match=re.escape("matmul shapes (2, 3) and (4, 2) do not match: 3 != 4")):
        tp.ones(2, 3) @ tp.ones(4, 2)
    with pytest.raises(ValueError, match=re.escape("matmul shapes (3,) and (2,) do not match: 3 != 2")):
        tp.ones(3) @ tp.ones(2)
    with pytest.raises(ValueError, match=re.escape("shapes (2,), (3,) cannot be broadcast together")):
        tp.ones(2, 2, 3) @ tp.ones(3, 3, 1)
    with pytest.raises(ValueError, match="matmul needs operands of at least one dimension"):
        tp.tensor(2.0) @ tp.ones(2)
    with pytest.raises(TypeError, match="matmul is not defined for bool tensors"):
        tp.ones(2, 2, dtype=tp.bool) @ tp.ones(2, 2, dtype=tp.bool)
    with pytest.raises(TypeError, match="matmul expects two tensors, got Tensor and list"):
        tp.matmul(tp.ones(2), [1.0, 2.0])


def test_repeated_products_of_one_layout_use_each_calls_data():
    # A plan is kept per operand layout when the operands are used in place;
    # each call still reads its own operands and writes a new output.
    for seed in (70, 71):
        a, a_np = random_tensor((3, 5), tp.float32, seed=seed)
        b, b_np = random_tensor((5, 4), tp.float32, seed=seed + 10)
        v, v_np = random_tensor((5,), tp.float32, seed=seed + 20)
        a64, b64, v64 = (t.astype(np.float64) for t in (a_np, b_np, v_np))
        for _ in range(2):
            assert_close(a @ b, a64 @ b64, atol=1e-5)
            assert_close(a @ v, a64 @ v64, atol=1e-5)
            assert_close(v @ b, v64 @ b64, atol=1e-5)
            assert_close(b.t() @ a.t(), (a64 @ b64).T, atol=1e-5)  # copies: no plan
            assert_close(a[1:] @ b, a64[1:] @ b64, atol=1e-5)  # a view at an offset


@pytest.mark.parametrize("flip_a, flip_b", [(False, False), (True, False), (False, True), (True, True)])
def test_products_that_fill_their_tiles_take_aligned_operands_and_views_at_any_offset(flip_a, flip_b):
    # M, N and K whole tiles: aligned operands get the exact variant's vector
    # loads; the same plan then meets operands one element off 16 bytes, which
    # must take the general kernel (a vector load there faults, on the GPU and
    # on the simulator alike).
    t = mk.TILES
    side = math.isqrt(2 * get_backend().sm_count - 1) + 1  # blocks enough for the largest tiles, untimed
    m, k, n = side * t.bm, 4 * t.bk, side * t.bn
    assert str(t) in tp.backends.matmul.explain(m, n, k, trans_a=flip_a, trans_b=flip_b)
    for offset in (0, 1, 0):
        xa, a = random_tensor((k * m + offset,), tp.float32, seed=90 + offset)
        xb, b = random_tensor((k * n + offset,), tp.float32, seed=95 + offset)
        a2, b2 = a[offset:].reshape((k, m) if flip_a else (m, k)), b[offset:].reshape((n, k) if flip_b else (k, n))
        x = xa[offset:].view(*a2.shape)
        y = xb[offset:].view(*b2.shape)
        if flip_a:
            x, a2 = x.t(), a2.T
        if flip_b:
            y, b2 = y.t(), b2.T
        assert (x.data_ptr() % 16 == 0) == (offset == 0)
        assert_close(x @ y, a2.astype(np.float64) @ b2, atol=1e-5, dtype=tp.float32)  # after the first, by the plan


@pytest.mark.parametrize(
    "shape_a, shape_b, flip_a, flip_b",
    [
        ((3, 5), (5, 4), True, False),
        ((6, 9), (9, 7), False, True),
        ((6, 9), (9, 7), True, True),
        ((2, 5, 3), (2, 3, 4), True, True),
        ((19, 33), (33, 5), True, True),
    ],
    ids=str,
)
def test_transposed_operands_are_read_where_they_lie(shape_a, shape_b, flip_a, flip_b):
    # The transposes that linear and the backward of a product make (.t(),
    # .transpose(-1, -2) of a contiguous tensor) reach the kernel as they are:
    # the product allocates its output and nothing else, every time.
    def stored(shape, flip, seed):
        if not flip:
            return random_tensor(shape, tp.float32, seed=seed)
        t, t_np = random_tensor(shape[:-2] + shape[-2:][::-1], tp.float32, seed=seed)
        return t.transpose(-1, -2), np.swapaxes(t_np, -1, -2)

    x, a = stored(shape_a, flip_a, 60)
    y, b = stored(shape_b, flip_b, 61)
    want = np.matmul(a.astype(np.float64), b.astype(np.float64))
    x @ y  # on a GPU the first product of a small shape class times the candidates
    for _ in range(2):  # the first product makes a plan, the second uses it
        before = tp.cuda.memory_stats()["num_allocs"]
        out = x @ y
        assert tp.cuda.memory_stats()["num_allocs"] - before == 1
        assert_close(out, want, atol=1e-5)


@pytest.mark.parametrize("dtype", [tp.float32, tp.float64, tp.int64], ids=str)
def test_small_outputs_split_k(dtype):
    # (8, 8) fills one block of the simulator's four "SMs": the rule cuts K
    # into runs, and the partial products are summed in order.
    text = tp.backends.matmul.explain(8, 8, 512, dtype=dtype.name)
    assert "K in 4 runs of 128" in text, text
    x, a = random_tensor((8, 512), dtype, seed=62)
    y, b = random_tensor((8, 512), dtype, seed=63)
    want = reference(np.matmul, a, b.T)
    assert_close(x @ y.t(), want, atol=1e-4 if dtype is tp.float32 else None, dtype=dtype)


def test_explain_large_products_keep_the_largest_tiles():
    text = tp.backends.matmul.explain(4096, 4096, 4096)
    assert text.startswith("matmul (4096, 4096) @ (4096, 4096) float32, A, B: tiles ")
    assert "K whole" in text and "rule: the largest tiles that give every SM a block" in text


@pytest.fixture
def tuned(tmp_path):
    """tp.backends.matmul timing candidates here (on the simulator too), its
    choices kept in a file of tmp_path; everything restored afterwards."""
    settings = tp.backends.matmul
    saved = settings.autotune, settings.choices_path
    settings.forget()
    settings.choices_path = tmp_path / "choices.json"
    settings.autotune = True
    yield settings
    settings.autotune, settings.choices_path = saved
    settings.forget()


def test_autotune_times_a_small_class_once_and_keeps_it_on_disk(tuned):
    x, a = random_tensor((8, 64), tp.float32, seed=64)
    y, b = random_tensor((64, 8), tp.float32, seed=65)
    want = a.astype(np.float64) @ b
    assert "not timed yet" in tuned.explain(8, 8, 64)
    assert_close(x @ y, want, atol=1e-4)
    text = tuned.explain(8, 8, 64)
    assert "timed over" in text and "us" in text, text
    generation = tuned.generation
    assert_close(x @ y, want, atol=1e-4)  # chosen already: nothing timed again
    assert tuned.generation == generation
    assert "timed over" in tuned.explain(5, 7, 60)  # the same shape class (8, 8, 64)

    stored = tuned.choices_path.read_text()
    assert '"splits"' in stored
    tuned.forget()  # as a new process: the choice comes back from the file
    assert "from disk" in tuned.explain(8, 8, 64)
    assert_close(x @ y, want, atol=1e-4)

    tuned.forget(disk=True)
    assert not tuned.choices_path.exists()
    assert "not timed yet" in tuned.explain(8, 8, 64)


def test_autotune_waits_for_an_eager_product_when_capturing(tuned):
    x, a = random_tensor((8, 64), tp.float32, seed=66)
    y, b = random_tensor((64, 8), tp.float32, seed=67)
    want = a.astype(np.float64) @ b
    x @ y  # warm-up of everything but the choice
    tuned.forget(disk=True)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        out = x @ y  # captured with the rule's choice: nothing can be timed in a capture
    assert "not timed yet" in tuned.explain(8, 8, 64)
    g.replay()
    assert_close(out, want, atol=1e-4)
    assert_close(x @ y, want, atol=1e-4)  # eager: timed now
    assert "timed over" in tuned.explain(8, 8, 64)
    g.replay()  # the graph keeps the kernels it captured
    assert_close(out, want, atol=1e-4)


def test_a_broken_choices_file_is_timed_again(tuned):
    tuned.choices_path.write_text("{not json")
    tuned.forget()
    assert "not timed yet" in tuned.explain(8, 8, 64)
    x, a = random_tensor((8, 64), tp.float32, seed=68)
    assert_close(x @ x.t(), a.astype(np.float64) @ a.T, atol=1e-4)
    assert "timed over" in tuned.explain(8, 8, 64, trans_b=True)
