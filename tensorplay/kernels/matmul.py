"""Matrix-multiply kernels: a register-tiled batched GEMM and a simple fallback.

``matmul_tiled(a, b, c, k_split)`` computes ``c[z] = a[z] @ b[z]`` for 3-D
C-contiguous arrays ``a`` (B, M, K), ``b`` (B, K, N) and ``c`` (B, M, N); a
2-D product is a batch of one. Each block computes a ``BM x BN`` tile of one
batch entry; each thread holds a ``TM x TN`` micro-tile of accumulators in
registers and walks K in steps of ``BK`` through double-buffered shared tiles
(A stored transposed). Launch it with :func:`matmul_launch_shape`. Other
strides give the right answer too, through Numba's slow general indexing.

Small outputs leave most of the GPU idle, so K can be split: with
``k_split < K`` each block sums one run of ``k_split`` values of K, ``c`` holds
``splits = cdiv(K, k_split)`` partial products per batch entry
(``c[z * splits + s]``), and :func:`matmul_sum_splits` adds them in order.
A variant (:func:`matmul_tiled_variant`) reads an operand stored transposed,
as the backward of a product gets it, without copying it first.

Products accumulate in :func:`accumulator_dtype` of the inputs: float32 for
float16 and float32, float64 for float64, int64 (uint64) for signed (unsigned)
integers; the sum is cast to ``c``'s dtype when stored.

The tile shape (``kernels/matmul_tiles.py``) and the operands' layouts are
module constants read when the kernel compiles; :func:`matmul_tiled_variant`
compiles the same source with others.

Examples
--------
>>> import numpy as np
>>> a = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
>>> b = np.ones((1, 3, 2), dtype=np.float32)
>>> c = np.empty((1, 2, 2), dtype=np.float32)
>>> grid, block = matmul_launch_shape(1, 2, 2)
>>> matmul_tiled[grid, block](a, b, c, 3)
>>> c[0].tolist()
[[3.0, 3.0], [12.0, 12.0]]
"""

import functools
import types as pytypes

import numpy as np
from numba import cuda, types
from numba.np import numpy_support

from ._target import INTRINSICS
from ._vector import load4
from .matmul_tiles import TILE_CHOICES, TILES, MatmulTiles

__all__ = [
    "TILES",
    "TILE_CHOICES",
    "MatmulTiles",
    "accumulator_dtype",
    "matmul_launch_shape",
    "matmul_simple",
    "matmul_simple_launch_shape",
    "matmul_sum_launch_shape",
    "matmul_sum_splits",
    "matmul_tiled",
    "matmul_tiled_variant",
    "split_k",
]

_GRID_YZ_LIMIT = 65535


_CONSTANTS = TILES.constants()
EXACT = _CONSTANTS["EXACT"]
A_VLOADS = _CONSTANTS["A_VLOADS"]
B_VLOADS = _CONSTANTS["B_VLOADS"]
A_LANES = _CONSTANTS["A_LANES"]
B_LANES = _CONSTANTS["B_LANES"]
A_VSTEP = _CONSTANTS["A_VSTEP"]
B_VSTEP = _CONSTANTS["B_VSTEP"]
BM = _CONSTANTS["BM"]
BN = _CONSTANTS["BN"]
BK = _CONSTANTS["BK"]
TM = _CONSTANTS["TM"]
TN = _CONSTANTS["TN"]
VEC = _CONSTANTS["VEC"]
KU = _CONSTANTS["KU"]
THREADS_X = _CONSTANTS["THREADS_X"]
THREADS_Y = _CONSTANTS["THREADS_Y"]
TRANS_A = _CONSTANTS["TRANS_A"]
TRANS_B = _CONSTANTS["TRANS_B"]
A_LOADS = _CONSTANTS["A_LOADS"]
B_LOADS = _CONSTANTS["B_LOADS"]
A_STEP = _CONSTANTS["A_STEP"]
B_STEP = _CONSTANTS["B_STEP"]
A_TILE_WIDTH = _CONSTANTS["A_TILE_WIDTH"]
B_TILE_WIDTH = _CONSTANTS["B_TILE_WIDTH"]
SHARED_ALIGN = _CONSTANTS["SHARED_ALIGN"]

SIMPLE_BLOCK = (16, 16)


def _accumulator_type(dtype: types.Type) -> types.Type:
    if isinstance(dtype, types.Float):
        return types.float64 if dtype.bitwidth == 64 else types.float32
    if isinstance(dtype, types.Integer):
        return types.int64 if dtype.signed else types.uint64
    raise TypeError(f"matmul: expected a float or integer dtype, got {dtype}")


if not INTRINSICS:

    def accumulator_dtype(x):
        """The NumPy scalar type that products of ``x``'s elements sum in."""
        acc = _accumulator_type(numpy_support.from_dtype(x.dtype))
        return numpy_support.as_dtype(acc).type

else:
    from numba.cuda.extending import intrinsic

    @intrinsic
    def accumulator_dtype(typingctx, x):
        """The scalar type that products of ``x``'s elements sum in.

        Resolved when the kernel is typed, so it can serve as the dtype of
        ``cuda.local.array`` and ``cuda.shared.array``.
        """
        sig = types.NumberClass(_accumulator_type(x.dtype))(x)

        def codegen(context, builder, signature, args):
            return context.get_dummy_value()

        return sig, codegen


@cuda.jit
def matmul_tiled(a, b, c, k_split):
    """``c[z] = a[z] @ b[z]``, K split in runs of ``k_split``; see the module docstring."""
    acc_t = accumulator_dtype(a)
    a_tile = cuda.shared.array((2, BK, A_TILE_WIDTH), acc_t, alignment=SHARED_ALIGN)
    b_tile = cuda.shared.array((2, BK, B_TILE_WIDTH), acc_t, alignment=SHARED_ALIGN)
    acc = cuda.local.array((TM, TN), acc_t)
    a_frag = cuda.local.array((KU, TM), acc_t)
    b_frag = cuda.local.array((KU, TN), acc_t)
    a_next = cuda.local.array(A_LOADS, acc_t)
    b_next = cuda.local.array(B_LOADS, acc_t)

    m = c.shape[1]
    n = c.shape[2]
    k_total = a.shape[1] if TRANS_A else a.shape[2]
    # max(.., 0) tells LLVM these are non-negative, so Numba's negative-index
    # wraparound on each array access folds away.
    zs = max(cuda.blockIdx.z, 0)  # the output entry: batch entry z, split s
    splits = (k_total + k_split - 1) // k_split
    z = zs // splits
    k_begin = (zs - z * splits) * k_split
    k_end = min(k_total, k_begin + k_split)
    tx = max(cuda.threadIdx.x, 0)
    ty = max(cuda.threadIdx.y, 0)
    row0 = max(cuda.blockIdx.y, 0) * BM
    col0 = max(cuda.blockIdx.x, 0) * BN
    # The elements of the A and B tiles this thread stages: consecutive
    # threads read consecutive addresses of global memory, along K for a
    # row-major operand and along M (N) for a transposed one.
    tid = ty * THREADS_X + tx
    if TRANS_A:
        a_r, a_k = tid % BM, tid // BM
    else:
        a_r, a_k = tid // BK, tid % BK
    if TRANS_B:
        b_k, b_c = tid % BK, tid // BK
    else:
        b_k, b_c = tid // BN, tid % BN
    # Thread (tx, ty) owns runs of VEC adjacent rows (columns) of the C tile,
    # the runs a_run (b_run) apart: a warp reads adjacent shared words, and
    # each run loads as one vector.
    a_own = ty * VEC
    b_own = tx * VEC
    a_run = THREADS_Y * VEC
    b_run = THREADS_X * VEC

    for i in range(TM):
        for j in range(TN):
            acc[i, j] = 0

    # Flat (C-order) index of the elements this thread stages from K = 0, or
    # -1 where its row of A (column of B) lies outside the matrix. Of an
    # operand's loads either the rows (columns) differ, and each has an index
    # (a_src, b_src), or only K does, and one index serves (a_one, b_one).
    # Indexing ``x.flat`` of a C-contiguous array is one add: no per-axis
    # arithmetic.
    a_src = cuda.local.array(A_LOADS, types.int64)
    a_one = -1
    if TRANS_A:
        if row0 + a_r < m:
            a_one = (z * k_total + a_k) * m + row0 + a_r
    else:
        for p in range(A_LOADS):
            r = row0 + a_r + p * A_STEP
            a_src[p] = (z * m + r) * k_total + a_k if r < m else -1
    b_src = cuda.local.array(B_LOADS, types.int64)
    b_one = -1
    if TRANS_B:
        for p in range(B_LOADS):
            col = col0 + b_c + p * B_STEP
            b_src[p] = (z * n + col) * k_total + b_k if col < n else -1
    elif col0 + b_c < n:
        b_one = (z * k_total + b_k) * n + col0 + b_c

    # The exact variant's runs of four: this thread's first, at K = 0, in
    # units of four elements (the slow index is a row of the stored tile, the
    # fast one a column), then the distance to its next run and to the next K.
    a_slow, a_fast = tid // A_LANES, (tid % A_LANES) * 4
    b_slow, b_fast = tid // B_LANES, (tid % B_LANES) * 4
    if TRANS_A:
        a_v0 = ((z * k_total + a_slow) * m + row0 + a_fast) // 4
        a_vskip, a_vk = A_VSTEP * m // 4, m
    else:
        a_v0 = ((z * m + row0 + a_slow) * k_total + a_fast) // 4
        a_vskip, a_vk = A_VSTEP * k_total // 4, 1
    if TRANS_B:
        b_v0 = ((z * n + col0 + b_slow) * k_total + b_fast) // 4
        b_vskip, b_vk = B_VSTEP * k_total // 4, 1
    else:
        b_v0 = ((z * k_total + b_slow) * n + col0 + b_fast) // 4
        b_vskip, b_vk = B_VSTEP * n // 4, n

    # Iteration t loads K tile t into registers, computes on tile t - 1 while
    # those loads are in flight, then stores tile t into shared buffer t & 1.
    n_tiles = (k_end - k_begin + BK - 1) // BK
    for t in range(n_tiles + 1):
        k0 = k_begin + t * BK
        if t < n_tiles and EXACT:
            k4 = (k_begin // 4) + t * (BK // 4)  # K tile t's first K, over four
            for p in range(A_VLOADS):
                v = load4(a, a_v0 + p * a_vskip + k4 * a_vk)
                a_next[4 * p], a_next[4 * p + 1], a_next[4 * p + 2], a_next[4 * p + 3] = v
            for p in range(B_VLOADS):
                v = load4(b, b_v0 + p * b_vskip + k4 * b_vk)
                b_next[4 * p], b_next[4 * p + 1], b_next[4 * p + 2], b_next[4 * p + 3] = v
        elif t < n_tiles:
            if TRANS_A:
                for p in range(A_LOADS):
                    if a_one >= 0 and k0 + a_k + p * A_STEP < k_end:
                        a_next[p] = a.flat[a_one + (k0 + p * A_STEP) * m]
                    else:
                        a_next[p] = 0
            else:
                a_k_ok = k0 + a_k < k_end
                for p in range(A_LOADS):
                    if a_k_ok and a_src[p] >= 0:
                        a_next[p] = a.flat[a_src[p] + k0]
                    else:
                        a_next[p] = 0
            if TRANS_B:
                b_k_ok = k0 + b_k < k_end
                for p in range(B_LOADS):
                    if b_k_ok and b_src[p] >= 0:
                        b_next[p] = b.flat[b_src[p] + k0]
                    else:
                        b_next[p] = 0
            else:
                for p in range(B_LOADS):
                    if b_one >= 0 and k0 + b_k + p * B_STEP < k_end:
                        b_next[p] = b.flat[b_one + (k0 + p * B_STEP) * n]
                    else:
                        b_next[p] = 0

        if t > 0:
            cur = (t - 1) & 1
            # k is unsigned because Numba wraps negative signed indices unless
            # LLVM can prove them non-negative. KU steps of k go together:
            # LLVM unrolls these short loops (not a long k loop), so that the
            # shared loads of one step overlap the FMAs of the previous one.
            for kk in range(np.uint64(BK // KU)):
                k_first = kk * np.uint64(KU)
                for u in range(KU):
                    k = k_first + np.uint64(u)
                    for i in range(TM):
                        a_frag[u, i] = a_tile[cur, k, (i // VEC) * a_run + a_own + i % VEC]
                    for j in range(TN):
                        b_frag[u, j] = b_tile[cur, k, (j // VEC) * b_run + b_own + j % VEC]
                for u in range(KU):
                    for i in range(TM):
                        for j in range(TN):
                            acc[i, j] += a_frag[u, i] * b_frag[u, j]

        if t < n_tiles and EXACT:
            nxt = t & 1
            for p in range(A_VLOADS):
                for e in range(4):
                    if TRANS_A:  # a run along M: a row of the A tile
                        a_tile[nxt, a_slow + p * A_VSTEP, a_fast + e] = a_next[4 * p + e]
                    else:  # along K: a column of it
                        a_tile[nxt, a_fast + e, a_slow + p * A_VSTEP] = a_next[4 * p + e]
            for p in range(B_VLOADS):
                for e in range(4):
                    if TRANS_B:
                        b_tile[nxt, b_fast + e, b_slow + p * B_VSTEP] = b_next[4 * p + e]
                    else:
                        b_tile[nxt, b_slow + p * B_VSTEP, b_fast + e] = b_next[4 * p + e]
        elif t < n_tiles:
            nxt = t & 1
            for p in range(A_LOADS):
                if TRANS_A:
                    a_tile[nxt, a_k + p * A_STEP, a_r] = a_next[p]
                else:
                    a_tile[nxt, a_k, a_r + p * A_STEP] = a_next[p]
            for p in range(B_LOADS):
                if TRANS_B:
                    b_tile[nxt, b_k, b_c + p * B_STEP] = b_next[p]
                else:
                    b_tile[nxt, b_k + p * B_STEP, b_c] = b_next[p]
        # One barrier per K tile publishes tile t. Buffer t & 1 was last read
        # by the compute of iteration t - 1, which the previous barrier closed.
        cuda.syncthreads()

    for i in range(TM):
        r = row0 + (i // VEC) * a_run + a_own + i % VEC
        if r < m:
            for j in range(TN):
                col = col0 + (j // VEC) * b_run + b_own + j % VEC
                if col < n:
                    c[zs, r, col] = acc[i, j]


@cuda.jit
def matmul_sum_splits(partial, c):
    """``c[z] = partial[z * s] + ... + partial[z * s + s - 1]`` with ``s`` the
    splits of each batch entry: the split-K partial products summed in order.

    Any grid serves; ``matmul_sum_launch_shape`` gives one whose ``y`` blocks
    take a batch entry each (no division by the entry size per element). Each
    thread loads four partials before it adds them: the loads of one element
    overlap, where a load after each add would wait its latency s times."""
    per_entry = c.shape[1] * c.shape[2]
    splits = partial.shape[0] // c.shape[0]
    start, step = cuda.grid(1), cuda.gridsize(1)
    for z in range(cuda.blockIdx.y, c.shape[0], cuda.gridDim.y):
        base = z * splits * per_entry
        for i in range(start, per_entry, step):
            first = base + i
            total = partial.flat[first]
            s = 1
            while s + 3 < splits:
                p1 = partial.flat[first + s * per_entry]
                p2 = partial.flat[first + (s + 1) * per_entry]
                p3 = partial.flat[first + (s + 2) * per_entry]
                p4 = partial.flat[first + (s + 3) * per_entry]
                total = total + p1 + p2 + p3 + p4  # left to right: the same order, the same rounding
                s += 4
            while s < splits:
                total += partial.flat[first + s * per_entry]
                s += 1
            c.flat[z * per_entry + i] = total


def matmul_sum_launch_shape(batch: int, per_entry: int, block: int = 256):
    """Grid and block for ``matmul_sum_splits``: a thread per element of an
    entry, a row of blocks per batch entry (entries past the grid's ``y``
    limit loop).

    Examples
    --------
    >>> matmul_sum_launch_shape(3, 1000)
    ((4, 3, 1), (256, 1, 1))
    """
    return (-(-per_entry // block), min(batch, _GRID_YZ_LIMIT), 1), (block, 1, 1)


@functools.cache
def matmul_tiled_variant(tiles: MatmulTiles, trans_a: bool = False, trans_b: bool = False, exact: bool = False):
    """``matmul_tiled`` compiled with ``tiles`` instead of :data:`TILES`, and
    for operands passed transposed (``trans_a``: A as a (B, K, M) array whose
    ``[z, k, i]`` is ``A[z, i, k]``; ``trans_b``: B as (B, N, K)).

    ``exact=True`` gives the variant for products that fill their tiles:
    ``bm | M``, ``bn | N``, ``bk | k_split`` and ``k_split | K``, with both
    operands' data 16-byte aligned. It loads each thread's share of a tile as
    runs of four adjacent elements (one 16-byte load each for float32) with no
    bounds checks; ``tiles.vector_loads`` must hold.

    Launch it with ``matmul_launch_shape(batch, m, n, tiles, splits)``.

    Examples
    --------
    >>> kernel = matmul_tiled_variant(MatmulTiles(bm=8, bn=8, bk=4, tm=2, tn=2))
    >>> matmul_launch_shape(1, 9, 8, MatmulTiles(bm=8, bn=8, bk=4, tm=2, tn=2))
    ((1, 2, 1), (4, 4))
    """
    if not isinstance(tiles, MatmulTiles):  # its fields, as the GPU compile check passes them
        tiles = MatmulTiles(*tiles)
    if tiles == TILES and not trans_a and not trans_b and not exact:
        return matmul_tiled
    source = matmul_tiled.py_func
    env = dict(source.__globals__)
    env.update(tiles.constants(trans_a, trans_b, exact))
    fn = pytypes.FunctionType(source.__code__, env, source.__name__)
    fn.__doc__ = source.__doc__
    fn.__qualname__ = source.__qualname__
    threads = tiles.block[0] * tiles.block[1]
    kernel = cuda.jit(fn, launch_bounds=(threads, tiles.min_blocks)) if tiles.min_blocks else cuda.jit(fn)
    # how to build it again elsewhere (the GPU compile check)
    kernel.tp_recipe = ("matmul", "matmul_tiled_variant", (tiles.fields, trans_a, trans_b, exact))
    return kernel


def split_k(k: int, splits: int, tiles: MatmulTiles = TILES) -> int:
    """The ``k_split`` argument that cuts K into at most ``splits`` runs, each a
    whole number of K tiles; ``cdiv(k, k_split)`` runs result.

    Examples
    --------
    >>> split_k(1000, 4, MatmulTiles(bm=8, bn=8, bk=8, tm=2, tn=2))
    256
    """
    per = -(-k // max(1, splits))
    return max(tiles.bk, -(-per // tiles.bk) * tiles.bk)


@cuda.jit
def matmul_simple(a, b, c):
    """``c[z] = a[z] @ b[z]``, one thread per element of ``c``; any strides.

    Launch with :func:`matmul_simple_launch_shape`.
    """
    col, r, z = cuda.grid(3)
    if z < c.shape[0] and r < c.shape[1] and col < c.shape[2]:
        acc_t = accumulator_dtype(a)
        acc = acc_t(0)
        for k in range(a.shape[2]):
            acc += acc_t(a[z, r, k]) * acc_t(b[z, k, col])
        c[z, r, col] = acc


def _blocks(size: int, tile: int) -> int:
    return (size + tile - 1) // tile


def _check_shape(batch: int, m: int, n: int) -> None:
    for name, value in (("batch", batch), ("m", m), ("n", n)):
        if int(value) != value or value < 1:
            raise ValueError(f"matmul launch: expected {name} a positive int, got {value!r}")
    if batch > _GRID_YZ_LIMIT:
        raise ValueError(f"matmul launch: expected batch <= {_GRID_YZ_LIMIT}, got {batch}")


def matmul_launch_shape(
    batch: int, m: int, n: int, tiles: MatmulTiles = TILES, splits: int = 1
) -> tuple[tuple[int, int, int], tuple[int, int]]:
    """Grid and block for ``matmul_tiled`` on a (batch, m, n) output, its K
    cut in ``splits`` runs (``cdiv(k, k_split)``).

    One block per ``bm x bn`` tile of each batch entry and run of K: grid
    ``(ceil(n / bn), ceil(m / bm), batch * splits)``, block ``(bn // tn, bm // tm)``.

    Examples
    --------
    >>> grid, block = matmul_launch_shape(2, 33, 9)
    >>> grid[2], block == (BN // TN, BM // TM)
    (2, True)
    """
    _check_shape(batch * splits, m, n)
    rows = _blocks(m, tiles.bm)
    if rows > _GRID_YZ_LIMIT:
        raise ValueError(f"matmul launch: expected m <= {_GRID_YZ_LIMIT * tiles.bm}, got {m}")
    return (_blocks(n, tiles.bn), rows, int(batch * splits)), tiles.block


def matmul_simple_launch_shape(batch: int, m: int, n: int) -> tuple[tuple[int, int, int], tuple[int, int]]:
    """Grid and block for ``matmul_simple`` on a (batch, m, n) output.

    Examples
    --------
    >>> matmul_simple_launch_shape(3, 20, 5)
    ((1, 2, 3), (16, 16))
    """
    _check_shape(batch, m, n)
    bx, by = SIMPLE_BLOCK
    if _blocks(m, by) > _GRID_YZ_LIMIT:
        raise ValueError(f"matmul launch: expected m <= {_GRID_YZ_LIMIT * by}, got {m}")
    return (_blocks(n, bx), _blocks(m, by), int(batch)), SIMPLE_BLOCK
