"""Tests of tensorplay/kernels/matmul.py, launched directly with NumPy arrays.

They run on Numba's CUDA simulator unless ``TENSORPLAY_BACKEND=cuda``, where
the same launches run on the GPU with its full-size tiles. The module is
loaded by path so that these tests need nothing else from the package.
"""

import importlib
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest

ON_GPU = os.environ.get("TENSORPLAY_BACKEND") == "cuda"
if not ON_GPU:
    # Must be set before numba first reads its configuration.
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

from numba import config, cuda  # noqa: E402

if not ON_GPU and not config.ENABLE_CUDASIM:
    pytest.skip(
        "numba was imported without NUMBA_ENABLE_CUDASIM=1 before this module",
        allow_module_level=True,
    )
if ON_GPU and not cuda.is_available():
    pytest.skip("TENSORPLAY_BACKEND=cuda but no GPU is visible", allow_module_level=True)

# The kernels folder as a package of its own (its modules import each other,
# never the rest of tensorplay), so matmul.py is tested without the package.
_KERNELS = types.ModuleType("_tp_kernels_under_test")
_KERNELS.__path__ = [str(Path(__file__).resolve().parents[2] / "tensorplay" / "kernels")]
sys.modules[_KERNELS.__name__] = _KERNELS
mm = importlib.import_module("_tp_kernels_under_test.matmul")

# The GPU's default tiles; on the simulator they run as a variant.
FULL_TILES = mm.MatmulTiles(bm=128, bn=128, bk=8, tm=8, tn=8, vec=4, ku=4)
TOLERANCE = {np.float16: 1e-2, np.float32: 1e-5, np.float64: 1e-12}


def random_operands(batch, m, k, n, dtype, seed=0):
    """Random non-zero a (batch, m, k), b (batch, k, n) and a poisoned c."""
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        a = rng.choice([-3, -2, -1, 1, 2, 3, 4], size=(batch, m, k)).astype(dtype)
        b = rng.choice([-3, -2, -1, 1, 2, 3, 4], size=(batch, k, n)).astype(dtype)
        c = np.full((batch, m, n), np.iinfo(dtype).min, dtype=dtype)
    else:
        a = rng.uniform(0.5, 1.5, size=(batch, m, k)) * rng.choice([-1, 1], (batch, m, k))
        b = rng.uniform(0.5, 1.5, size=(batch, k, n)) * rng.choice([-1, 1], (batch, k, n))
        a, b = a.astype(dtype), b.astype(dtype)
        c = np.full((batch, m, n), np.nan, dtype=dtype)
    return a, b, c


def reference(a, b):
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


def assert_matches(c, a, b):
    ref = reference(a, b)
    if np.issubdtype(c.dtype, np.integer):
        np.testing.assert_array_equal(c, ref.astype(c.dtype))
    else:
        assert np.isfinite(c).all(), "some outputs were never written"
        err = np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref)
        assert err < TOLERANCE[c.dtype.type], f"relative error {err:.2e}"


def run_tiled(a, b, c, tiles=None, splits=1, trans_a=False, trans_b=False, exact=False):
    """c = a @ b through matmul_tiled; a (b) is passed transposed where asked,
    and K is cut in ``splits`` runs whose partial products are then summed;
    ``exact``: through the variant for products that fill their tiles."""
    tiles = tiles or mm.TILES
    batch, m, n = c.shape
    k = a.shape[2]
    k_split = mm.split_k(k, splits, tiles)
    runs = -(-k // k_split)
    kernel = mm.matmul_tiled_variant(tiles, trans_a, trans_b, exact)
    a_arg = np.ascontiguousarray(a.transpose(0, 2, 1)) if trans_a else a
    b_arg = np.ascontiguousarray(b.transpose(0, 2, 1)) if trans_b else b
    grid, block = mm.matmul_launch_shape(batch, m, n, tiles, runs)
    if runs == 1:
        kernel[grid, block](a_arg, b_arg, c, k_split)
        return
    poison = np.nan if c.dtype.kind == "f" else np.iinfo(c.dtype).min
    partial = cuda.to_device(np.full((batch * runs, m, n), poison, dtype=c.dtype))
    kernel[grid, block](a_arg, b_arg, partial, k_split)
    d_c = cuda.to_device(c)
    mm.matmul_sum_splits[8, 32](partial, d_c)
    c[...] = d_c.copy_to_host()


@pytest.mark.parametrize(
    ("batch", "m", "k", "n"),
    [(1, 5, 7, 3), (2, 33, 17, 9), (1, 16, 8, 16), (1, 3, 1, 20)],
)
def test_tiled_float32_matches_numpy(batch, m, k, n):
    a, b, c = random_operands(batch, m, k, n, np.float32)
    run_tiled(a, b, c)
    assert_matches(c, a, b)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32, np.int64])
def test_tiled_other_dtypes(dtype):
    a, b, c = random_operands(2, 20, 9, 17, dtype, seed=1)
    run_tiled(a, b, c)
    assert_matches(c, a, b)


def test_tiled_float16_accumulates_in_float32():
    # Every partial sum k * 0.1 (fp16) is exact in float32, and the total
    # 25.59375 is exact in float16; summing in float16 would round it.
    a = np.full((1, 2, 256), 0.1, dtype=np.float16)
    b = np.ones((1, 256, 3), dtype=np.float16)
    c = np.full((1, 2, 3), np.nan, dtype=np.float16)
    run_tiled(a, b, c)
    np.testing.assert_array_equal(c, np.float16(25.59375))


def test_tiled_full_size_tiles():
    # The GPU's 128 x 128 tiles with 8 x 8 micro-tiles and vector runs,
    # with ragged edges in M, K and N (two blocks on the simulator).
    a, b, c = random_operands(1, 130, 11, 5, np.float32, seed=2)
    run_tiled(a, b, c, FULL_TILES)
    assert_matches(c, a, b)


def test_tiled_takes_strided_views():
    # Documented as C-contiguous for speed, but a strided view is still right.
    a_wide, b, c = random_operands(1, 6, 10, 5, np.float32, seed=5)
    d_c = cuda.to_device(c)
    grid, block = mm.matmul_launch_shape(1, 6, 5)
    mm.matmul_tiled[grid, block](cuda.to_device(a_wide)[:, :, ::2], b[:, :5], d_c, 5)
    assert_matches(d_c.copy_to_host(), a_wide[:, :, ::2], b[:, :5])


def test_tiled_variant_scalar_runs():
    tiles = mm.MatmulTiles(bm=8, bn=8, bk=2, tm=2, tn=2, vec=1)
    a, b, c = random_operands(3, 10, 5, 11, np.float32, seed=3)
    run_tiled(a, b, c, tiles)
    assert_matches(c, a, b)


@pytest.mark.parametrize(("trans_a", "trans_b"), [(True, False), (False, True), (True, True)])
@pytest.mark.parametrize("tiles", [None, FULL_TILES], ids=["default", "full"])
def test_tiled_reads_transposed_operands(trans_a, trans_b, tiles):
    # Ragged in every dimension, two batch entries: the transposed layouts
    # stage their tiles along M (N) instead of K.
    a, b, c = random_operands(2, 19, 13, 21, np.float32, seed=6)
    run_tiled(a, b, c, tiles, trans_a=trans_a, trans_b=trans_b)
    assert_matches(c, a, b)


@pytest.mark.parametrize(("k", "splits"), [(40, 2), (37, 3), (64, 4), (9, 8)])
def test_tiled_split_k_sums_partial_products(k, splits):
    # K cut into whole K tiles (the last one ragged), partial products summed in order.
    a, b, c = random_operands(2, 11, k, 18, np.float32, seed=7)
    run_tiled(a, b, c, splits=splits, trans_b=True)
    assert_matches(c, a, b)


@pytest.mark.parametrize(("trans_a", "trans_b"), [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize(("dtype", "splits"), [(np.float32, 1), (np.float32, 2), (np.float64, 1), (np.int32, 3)])
def test_exact_variant_loads_runs_of_four(trans_a, trans_b, dtype, splits):
    # Tiles that fill M, N and every run of K: each thread loads its share as
    # runs of four adjacent elements with no bounds checks, along K or along
    # M (N) as the operand lies. Two tiles each way and two batch entries, so
    # a misplaced run lands in another tile's output.
    t = mm.TILES
    a, b, c = random_operands(2, 2 * t.bm, 6 * t.bk, 2 * t.bn, dtype, seed=9)
    run_tiled(a, b, c, splits=splits, trans_a=trans_a, trans_b=trans_b, exact=True)
    assert_matches(c, a, b)


def test_exact_variant_needs_runs_of_four():
    assert mm.TILES.vector_loads and FULL_TILES.vector_loads
    scalar = mm.MatmulTiles(bm=8, bn=8, bk=4, tm=2, tn=2, vec=2)  # two elements of each tile per thread
    assert not scalar.vector_loads
    with pytest.raises(ValueError, match="^exact matmul tiles need runs of four elements per thread"):
        mm.matmul_tiled_variant(scalar, exact=True)


@pytest.mark.parametrize("splits", [2, 5, 9])
@pytest.mark.parametrize("launch_shape", ["per entry", "one row of blocks"])
def test_sum_splits_adds_the_runs_in_order(splits, launch_shape):
    # the sum is left to right, as a host loop in float32 makes it: equal bits
    batch, m, n = 3, 5, 7
    partial = np.random.default_rng(splits).standard_normal((batch * splits, m, n)).astype(np.float32)
    want = partial[::splits].copy()
    for s in range(1, splits):
        want = want + partial[s::splits]
    d_c = cuda.to_device(np.full((batch, m, n), np.nan, np.float32))
    one_row = ((2, 1, 1), (16, 1, 1))  # fewer threads than elements, every entry in one row of blocks
    grid, block = mm.matmul_sum_launch_shape(batch, m * n, 32) if launch_shape == "per entry" else one_row
    mm.matmul_sum_splits[grid, block](cuda.to_device(partial), d_c)
    np.testing.assert_array_equal(d_c.copy_to_host(), want)


def test_tiled_split_k_integers_exact():
    a, b, c = random_operands(3, 5, 30, 7, np.int64, seed=8)
    run_tiled(a, b, c, splits=3, trans_a=True)
    assert_matches(c, a, b)


def test_split_k_runs_are_whole_tiles():
    tiles = mm.MatmulTiles(bm=8, bn=8, bk=8, tm=2, tn=2)
    assert mm.split_k(1024, 4, tiles) == 256
    assert mm.split_k(100, 3, tiles) == 40  # cdiv(100, 3) = 34, rounded up to tiles of 8
    assert mm.split_k(5, 4, tiles) == 8  # never less than one tile
    assert mm.split_k(64, 1, tiles) == 64


def test_simple_takes_strided_operands():
    a_wide, b_tall, c = random_operands(2, 9, 12, 7, np.float32, seed=4)
    a, b = a_wide[:, :, ::2], np.ascontiguousarray(b_tall[:, :6])
    d_a = cuda.to_device(a_wide)[:, :, ::2]  # every other column: strided
    d_c = cuda.to_device(c)
    grid, block = mm.matmul_simple_launch_shape(2, 9, 7)
    mm.matmul_simple[grid, block](d_a, b, d_c)
    assert_matches(d_c.copy_to_host(), a, b)


def test_launch_shape_covers_output():
    grid, block = mm.matmul_launch_shape(3, 2 * mm.BM + 1, mm.BN - 1)
    assert grid == (1, 3, 3)
    assert block == (mm.BN // mm.TN, mm.BM // mm.TM)
    assert mm.matmul_launch_shape(1, 300, 129, FULL_TILES) == ((2, 3, 1), (16, 16))


def test_launch_shape_rejects_bad_sizes():
    with pytest.raises(ValueError, match="^matmul launch: expected batch a positive int, got 0"):
        mm.matmul_launch_shape(0, 4, 4)
    with pytest.raises(ValueError, match="^matmul launch: expected batch <= 65535"):
        mm.matmul_launch_shape(70000, 4, 4)


def test_tiles_reject_inconsistent_shapes():
    with pytest.raises(ValueError, match="^expected tiles with tm \\| bm"):
        mm.MatmulTiles(bm=128, bn=128, bk=8, tm=8, tn=8, vec=3)
