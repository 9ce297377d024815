"""Tile shapes of the matrix-multiply kernel (``kernels/matmul.py``): what a
block and a thread of ``matmul_tiled`` compute, the module constants each
shape compiles to, and the shapes a product may be given on this target.

Examples
--------
>>> t = MatmulTiles(bm=8, bn=8, bk=4, tm=2, tn=2)
>>> t.block, str(t)
((4, 4), '8x8x4 t2x2 vec1 ku1')
"""

import dataclasses

from ._target import ALIGNED_SHARED, SMALL_BLOCKS

__all__ = ["TILES", "TILE_CHOICES", "MatmulTiles"]


@dataclasses.dataclass(frozen=True)
class MatmulTiles:
    """Tile shape of ``matmul_tiled``.

    A block computes a ``bm x bn`` tile of C with ``(bn // tn, bm // tm)``
    threads; each thread owns a ``tm x tn`` register micro-tile whose rows
    (columns) come in runs of ``vec`` adjacent ones, so that its shared-memory
    reads merge into vector loads. K advances ``bk`` at a time through the
    shared tiles, and ``ku`` steps of it at a time through registers.
    ``min_blocks`` > 0 asks the compiler to leave room for that many blocks
    per SM (launch bounds: registers capped at 65536 / (threads x
    min_blocks)); 0 leaves registers to it.
    """

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    vec: int = 1
    ku: int = 1
    min_blocks: int = 0

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
            and threads % self.bm == 0
            and (self.bm * self.bk) % threads == 0
            and (self.bn * self.bk) % threads == 0
            and threads <= 1024
        )
        if not ok:
            raise ValueError(
                f"expected tiles with tm | bm, tn | bn, vec | tm and tn, ku | bk, and "
                f"bk, bm and bn dividing the thread count (<= 1024), got {self}"
            )

    @property
    def block(self) -> tuple[int, int]:
        return self.bn // self.tn, self.bm // self.tm

    def __str__(self) -> str:
        bounds = f" min{self.min_blocks}" if self.min_blocks else ""
        return f"{self.bm}x{self.bn}x{self.bk} t{self.tm}x{self.tn} vec{self.vec} ku{self.ku}{bounds}"

    @property
    def fields(self) -> tuple[int, ...]:
        """The fields in order: ``MatmulTiles(*tiles.fields) == tiles``."""
        return dataclasses.astuple(self)

    @property
    def vector_loads(self) -> bool:
        """Whether each thread's share of the A and B tiles is a whole number of
        runs of four adjacent elements, in every layout: the tiles the exact
        variant of ``matmul_tiled`` can load with 16-byte loads."""
        threads_x, threads_y = self.block
        threads = threads_x * threads_y
        loads = (self.bm * self.bk // threads, self.bk * self.bn // threads)
        return all(x % 4 == 0 for x in (*loads, self.bm, self.bn, self.bk)) and all(
            threads % (w // 4) == 0 for w in (self.bm, self.bn, self.bk)
        )

    def constants(self, trans_a: bool = False, trans_b: bool = False, exact: bool = False) -> dict[str, int | None]:
        """The module globals ``matmul_tiled`` reads, for this tile shape and
        the operands' layouts (``trans_a``: A is passed as its (B, K, M)
        transpose; ``trans_b``: B as its (B, N, K) transpose); ``exact``: the
        variant for products whose tiles and runs of K all lie inside the
        matrices, with 16-byte aligned operands (see ``matmul_tiled_variant``)."""
        if exact and not self.vector_loads:
            raise ValueError(f"exact matmul tiles need runs of four elements per thread, got {self}")
        threads_x, threads_y = self.block
        threads = threads_x * threads_y
        # The exact variant loads runs of four elements along an operand's
        # contiguous axis: K for A and for B transposed (K-major), M for A
        # transposed and N for B (MN-major). A thread's runs lie V_STEP rows
        # (K steps, when MN-major) apart.
        a_lanes = b_lanes = 1  # threads per row (K step) of the stored tile, where the variant is exact
        if exact:
            a_lanes = self.bm // 4 if trans_a else self.bk // 4
            b_lanes = self.bk // 4 if trans_b else self.bn // 4
        return {
            "EXACT": exact,
            "A_VLOADS": self.bm * self.bk // threads // 4 if exact else 1,
            "B_VLOADS": self.bk * self.bn // threads // 4 if exact else 1,
            "A_LANES": a_lanes,
            "B_LANES": b_lanes,
            "A_VSTEP": threads // a_lanes,
            "B_VSTEP": threads // b_lanes,
            "BM": self.bm,
            "BN": self.bn,
            "BK": self.bk,
            "TM": self.tm,
            "TN": self.tn,
            "VEC": self.vec,
            "KU": self.ku,
            "THREADS_X": threads_x,
            "THREADS_Y": threads_y,
            "TRANS_A": trans_a,
            "TRANS_B": trans_b,
            # Each thread stages A_LOADS elements of the A tile, A_STEP rows
            # (K steps, when transposed) apart, and B_LOADS of the B tile,
            # B_STEP K steps (columns, when transposed) apart.
            "A_LOADS": self.bm * self.bk // threads,
            "B_LOADS": self.bk * self.bn // threads,
            "A_STEP": threads // self.bm if trans_a else threads // self.bk,
            "B_STEP": threads // self.bk if trans_b else threads // self.bn,
            # The transposed A tile's rows are padded by 4 words: its stores
            # then spread over all 32 banks, and rows stay 16-byte aligned.
            # B's are too where B arrives transposed (its stores go along K).
            "A_TILE_WIDTH": self.bm + 4,
            "B_TILE_WIDTH": self.bn + 4 if trans_b else self.bn,
            # Vector shared loads need the tiles 16-byte aligned; the
            # simulator refuses any alignment argument.
            "SHARED_ALIGN": 16 if ALIGNED_SHARED else None,
        }


# The simulator runs one Python thread per CUDA thread, so it gets small
# blocks: the same code with smaller constants.
if SMALL_BLOCKS:
    TILES = MatmulTiles(bm=16, bn=16, bk=4, tm=4, tn=4, vec=2, ku=2)
    # the tile shapes a product may be given, largest first
    TILE_CHOICES = (TILES, MatmulTiles(bm=8, bn=8, bk=4, tm=2, tn=2, vec=2, ku=2))
else:
    TILES = MatmulTiles(bm=128, bn=128, bk=8, tm=8, tn=8, vec=4, ku=4)
    # The two smaller ones take K 32 and 16 at a time: on the H200 their
    # products of 128 rows, or of K 128, took 20-30 % less device time than
    # with K 8 at a time (fewer barriers a product; benchmarks/matmul_small.py).
    TILE_CHOICES = (
        TILES,
        MatmulTiles(bm=64, bn=128, bk=8, tm=8, tn=8, vec=4, ku=4),
        MatmulTiles(bm=64, bn=64, bk=32, tm=4, tn=4, vec=4, ku=4),
        MatmulTiles(bm=32, bn=64, bk=16, tm=4, tn=4, vec=4, ku=4),
    )
