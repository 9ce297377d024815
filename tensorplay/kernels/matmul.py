"""Matrix-multiply kernels: a register-tiled batched GEMM and a simple fallback.

``matmul_tiled`` computes ``c[z] = a[z] @ b[z]`` for 3-D C-contiguous arrays
``a`` (B, M, K), ``b`` (B, K, N) and ``c`` (B, M, N); a 2-D product is a batch
of one. Each block computes a ``BM x BN`` tile of one batch entry
(``blockIdx.z``); each thread holds a ``TM x TN`` micro-tile of accumulators in
registers and walks K in steps of ``BK`` through double-buffered shared tiles
(A stored transposed). Launch it with :func:`matmul_launch_shape`. Other
strides give the right answer too, through Numba's slow general indexing.

Products accumulate in :func:`accumulator_dtype` of the inputs: float32 for
float16 and float32, float64 for float64, int64 (uint64) for signed (unsigned)
integers; the sum is cast to ``c``'s dtype when stored.

The tile shape is a set of module constants read when the kernel compiles;
:func:`matmul_tiled_variant` compiles the same source with other tiles.

Examples
--------
>>> import numpy as np
>>> a = np.arange(6, dtype=np.float32).reshape(1, 2, 3)
>>> b = np.ones((1, 3, 2), dtype=np.float32)
>>> c = np.empty((1, 2, 2), dtype=np.float32)
>>> grid, block = matmul_launch_shape(1, 2, 2)
>>> matmul_tiled[grid, block](a, b, c)
>>> c[0].tolist()
[[3.0, 3.0], [12.0, 12.0]]
"""

import functools
import types as pytypes
from dataclasses import dataclass

import numpy as np
from numba import cuda, types
from numba.np import numpy_support

from ._target import ALIGNED_SHARED, INTRINSICS, SMALL_BLOCKS

__all__ = [
    "TILES",
    "MatmulTiles",
    "accumulator_dtype",
    "matmul_launch_shape",
    "matmul_simple",
    "matmul_simple_launch_shape",
    "matmul_tiled",
    "matmul_tiled_variant",
]

_GRID_YZ_LIMIT = 65535


@dataclass(frozen=True)
class MatmulTiles:
    """Tile shape of ``matmul_tiled``.

    A block computes a ``bm x bn`` tile of C with ``(bn // tn, bm // tm)``
    threads; each thread owns a ``tm x tn`` register micro-tile whose rows
    (columns) come in runs of ``vec`` adjacent ones, so that its shared-memory
    reads merge into vector loads. K advances ``bk`` at a time through the
    shared tiles, and ``ku`` steps of it at a time through registers.
    """

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    vec: int = 1
    ku: int = 1

    def __post_init__(self) -> None:
        threads = (self.bm // self.tm) * (self.bn // self.tn)
        ok = (
            self.bm % self.tm == 0
            and self.bn % self.tn == 0
            and self.tm % self.vec == 0
            and self.tn % self.vec == 0
            and self.bk % self.ku == 0
            and threads % self.bk == 0
            and threads % self.bn == 0
            and (self.bm * self.bk) % threads == 0
            and threads <= 1024
        )
        if not ok:
            raise ValueError(
                f"expected tiles with tm | bm, tn | bn, vec | tm and tn, ku | bk, and "
                f"bk and bn dividing the thread count (<= 1024), got {self}"
            )

    @property
    def block(self) -> tuple[int, int]:
        return self.bn // self.tn, self.bm // self.tm

    def constants(self) -> dict[str, int | None]:
        """The module globals ``matmul_tiled`` reads, for this tile shape."""
        threads_x, threads_y = self.block
        threads = threads_x * threads_y
        return {
            "BM": self.bm,
            "BN": self.bn,
            "BK": self.bk,
            "TM": self.tm,
            "TN": self.tn,
            "VEC": self.vec,
            "KU": self.ku,
            "THREADS_X": threads_x,
            "THREADS_Y": threads_y,
            # Each thread stages A_LOADS elements of the A tile, A_ROW_STEP
            # rows apart, and B_LOADS of the B tile, B_ROW_STEP rows apart.
            "A_LOADS": self.bm * self.bk // threads,
            "B_LOADS": self.bk * self.bn // threads,
            "A_ROW_STEP": threads // self.bk,
            "B_ROW_STEP": threads // self.bn,
            # The transposed A tile's rows are padded by 4 words: its stores
            # then spread over all 32 banks, and rows stay 16-byte aligned.
            "A_TILE_WIDTH": self.bm + 4,
            # Vector shared loads need the tiles 16-byte aligned; the
            # simulator refuses any alignment argument.
            "SHARED_ALIGN": 16 if ALIGNED_SHARED else None,
        }


# The simulator runs one Python thread per CUDA thread, so it gets a small
# block by default: the same code with smaller constants.
if SMALL_BLOCKS:
    TILES = MatmulTiles(bm=16, bn=16, bk=4, tm=4, tn=4, vec=2, ku=2)
else:
    TILES = MatmulTiles(bm=128, bn=128, bk=8, tm=8, tn=8, vec=4, ku=4)

_CONSTANTS = TILES.constants()
BM = _CONSTANTS["BM"]
BN = _CONSTANTS["BN"]
BK = _CONSTANTS["BK"]
TM = _CONSTANTS["TM"]
TN = _CONSTANTS["TN"]
VEC = _CONSTANTS["VEC"]
KU = _CONSTANTS["KU"]
THREADS_X = _CONSTANTS["THREADS_X"]
THREADS_Y = _CONSTANTS["THREADS_Y"]
A_LOADS = _CONSTANTS["A_LOADS"]
B_LOADS = _CONSTANTS["B_LOADS"]
A_ROW_STEP = _CONSTANTS["A_ROW_STEP"]
B_ROW_STEP = _CONSTANTS["B_ROW_STEP"]
A_TILE_WIDTH = _CONSTANTS["A_TILE_WIDTH"]
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
def matmul_tiled(a, b, c):
    """``c[z] = a[z] @ b[z]`` with ``z = blockIdx.z``; see the module docstring."""
    acc_t = accumulator_dtype(a)
    a_tile = cuda.shared.array((2, BK, A_TILE_WIDTH), acc_t, alignment=SHARED_ALIGN)
    b_tile = cuda.shared.array((2, BK, BN), acc_t, alignment=SHARED_ALIGN)
    acc = cuda.local.array((TM, TN), acc_t)
    a_frag = cuda.local.array((KU, TM), acc_t)
    b_frag = cuda.local.array((KU, TN), acc_t)
    a_next = cuda.local.array(A_LOADS, acc_t)
    b_next = cuda.local.array(B_LOADS, acc_t)

    m = c.shape[1]
    n = c.shape[2]
    k_total = a.shape[2]
    # max(.., 0) tells LLVM these are non-negative, so Numba's negative-index
    # wraparound on each array access folds away.
    z = max(cuda.blockIdx.z, 0)
    tx = max(cuda.threadIdx.x, 0)
    ty = max(cuda.threadIdx.y, 0)
    row0 = max(cuda.blockIdx.y, 0) * BM
    col0 = max(cuda.blockIdx.x, 0) * BN
    # The element of the A and B tiles this thread stages: consecutive
    # threads read consecutive addresses of global memory.
    tid = ty * THREADS_X + tx
    a_row = tid // BK
    a_col = tid % BK
    b_row = tid // BN
    b_col = tid % BN
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

    # Flat (C-order) index of the elements this thread stages from K tile 0,
    # or -1 where its row of A (column of B) lies outside the matrix. Indexing
    # ``x.flat`` of a C-contiguous array is one add: no per-axis arithmetic.
    a_src = cuda.local.array(A_LOADS, types.int64)
    for p in range(A_LOADS):
        r = row0 + a_row + p * A_ROW_STEP
        a_src[p] = (z * m + r) * k_total + a_col if r < m else -1
    b_src = (z * k_total + b_row) * n + col0 + b_col if col0 + b_col < n else -1
    b_step = B_ROW_STEP * n

    # Iteration t loads K tile t into registers, computes on tile t - 1 while
    # those loads are in flight, then stores tile t into shared buffer t & 1.
    n_tiles = (k_total + BK - 1) // BK
    for t in range(n_tiles + 1):
        k0 = t * BK
        if t < n_tiles:
            a_k_ok = k0 + a_col < k_total
            for p in range(A_LOADS):
                if a_k_ok and a_src[p] >= 0:
                    a_next[p] = a.flat[a_src[p] + k0]
                else:
                    a_next[p] = 0
            for p in range(B_LOADS):
                if k0 + b_row + p * B_ROW_STEP < k_total and b_src >= 0:
                    b_next[p] = b.flat[b_src + k0 * n + p * b_step]
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

        if t < n_tiles:
            nxt = t & 1
            for p in range(A_LOADS):
                a_tile[nxt, a_col, a_row + p * A_ROW_STEP] = a_next[p]
            for p in range(B_LOADS):
                b_tile[nxt, b_row + p * B_ROW_STEP, b_col] = b_next[p]
        # One barrier per K tile publishes tile t. Buffer t & 1 was last read
        # by the compute of iteration t - 1, which the previous barrier closed.
        cuda.syncthreads()

    for i in range(TM):
        r = row0 + (i // VEC) * a_run + a_own + i % VEC
        if r < m:
            for j in range(TN):
                col = col0 + (j // VEC) * b_run + b_own + j % VEC
                if col < n:
                    c[z, r, col] = acc[i, j]


@functools.cache
def matmul_tiled_variant(tiles: MatmulTiles):
    """``matmul_tiled`` compiled with ``tiles`` instead of :data:`TILES`.

    Launch it with ``matmul_launch_shape(batch, m, n, tiles)``.

    Examples
    --------
    >>> kernel = matmul_tiled_variant(MatmulTiles(bm=8, bn=8, bk=4, tm=2, tn=2))
    >>> matmul_launch_shape(1, 9, 8, MatmulTiles(bm=8, bn=8, bk=4, tm=2, tn=2))
    ((1, 2, 1), (4, 4))
    """
    if tiles == TILES:
        return matmul_tiled
    source = matmul_tiled.py_func
    env = dict(source.__globals__)
    env.update(tiles.constants())
    fn = pytypes.FunctionType(source.__code__, env, source.__name__)
    fn.__doc__ = source.__doc__
    fn.__qualname__ = source.__qualname__
    return cuda.jit(fn)


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
    batch: int, m: int, n: int, tiles: MatmulTiles = TILES
) -> tuple[tuple[int, int, int], tuple[int, int]]:
    """Grid and block for ``matmul_tiled`` on a (batch, m, n) output.

    One block per ``bm x bn`` tile of each batch entry: grid
    ``(ceil(n / bn), ceil(m / bm), batch)``, block ``(bn // tn, bm // tm)``.

    Examples
    --------
    >>> grid, block = matmul_launch_shape(2, 33, 9)
    >>> grid[2], block == (BN // TN, BM // TM)
    (2, True)
    """
    _check_shape(batch, m, n)
    rows = _blocks(m, tiles.bm)
    if rows > _GRID_YZ_LIMIT:
        raise ValueError(f"matmul launch: expected m <= {_GRID_YZ_LIMIT * tiles.bm}, got {m}")
    return (_blocks(n, tiles.bn), rows, int(batch)), tiles.block


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
