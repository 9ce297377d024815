"""Which kernel a matrix product gets: cuBLAS, or a Numba kernel of some tile
shape with K cut in some runs.

On a GPU, float16, bfloat16, float32 and float64 products go to cuBLAS
(``runtime/libraries/cublas.py``, through nvmath-python) unless
``tp.backends.matmul.library = False``; float32 stays exact there unless
``tp.backends.matmul.allow_tf32 = True``. Everything else (integer products,
the simulator, a GPU without nvmath-python or libcublas) takes tensorplay's
Numba kernels, chosen as follows.

With the largest tiles a small output leaves the GPU idle: (128, 1024) is 8
blocks of 128 x 128 for the H200's 132 SMs. A product whose output gives fewer
than two such blocks per SM is "small"; for each *shape class* of small
products (dtype, the operands' layouts, and batch, M, N, K each rounded up to a
power of two) the first eager product on a GPU times the candidates (every
tile shape of ``kernels.matmul.TILE_CHOICES``, with K in 1, 2, 4, 8 or 16
runs) on its own operands and keeps the fastest, in memory and in a file of
the cache folder, so that another process does not time them again.

Where nothing is timed (a product that is not small, the simulator, a capture
in progress, ``tp.backends.matmul.autotune = False``) a rule picks: the largest
tiles that give every SM a block, else the smallest tiles with K cut in runs
(of at least 128) until there are about two blocks per SM.
``tp.backends.matmul.explain(m, n, k)`` says what a product gets and why.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import _dtype as dt
from ._tensor import Tensor
from .kernels import matmul as mk
from .kernels import timing
from .kernels._source import cache_dir
from .kernels._target import DISK_CACHE
from .runtime.backend import get as get_backend
from .runtime.capture import capture_state
from .runtime.launch import launch
from .runtime.libraries import cublas
from .runtime.streams import Event

__all__ = ["MATMUL", "MatmulChoice", "MatmulSettings", "Problem"]

SPLITS = (1, 2, 4, 8, 16)  # the runs of K a candidate may have
MIN_RUN = 64  # a candidate's runs of K are at least this long
RULE_MIN_RUN = 128  # the rule's, when it splits K
TIMED_REPEATS = 5


@dataclass(frozen=True, slots=True)
class Problem:
    """One product: ``batch`` entries of (m, k) @ (k, n) in ``dtype``; an operand
    marked ``trans_*`` is read transposed (stored (k, m) or (n, k))."""

    batch: int
    m: int
    n: int
    k: int
    dtype: str = "float32"
    trans_a: bool = False
    trans_b: bool = False

    def shape_class(self) -> tuple:
        def up(x: int) -> int:
            return 1 << max(0, x - 1).bit_length()

        return (self.dtype, self.trans_a, self.trans_b, up(self.batch), up(self.m), up(self.n), up(self.k))

    def blocks(self, tiles: mk.MatmulTiles) -> int:
        return self.batch * -(-self.m // tiles.bm) * -(-self.n // tiles.bn)

    def runs(self, tiles: mk.MatmulTiles, splits: int) -> int:
        """How many runs K really has when cut in ``splits`` (whole K tiles each)."""
        return -(-self.k // mk.split_k(self.k, splits, tiles))

    def fills(self, tiles: mk.MatmulTiles) -> bool:
        """Whether ``tiles`` fill the matrices (M, N and K whole tiles) with
        runs of four per thread: the kernel's exact variant then serves
        16-byte aligned operands."""
        return tiles.vector_loads and self.m % tiles.bm == 0 and self.n % tiles.bn == 0 and self.k % tiles.bk == 0

    def layout(self) -> str:
        return f"A{' transposed' if self.trans_a else ''}, B{' transposed' if self.trans_b else ''}"


@dataclass(frozen=True, slots=True)
class MatmulChoice:
    """A kernel for a product: ``tiles``, and K cut in ``splits`` runs; ``how`` it
    was chosen ("timed", "from disk", "rule") with the candidates' times (µs)."""

    tiles: mk.MatmulTiles
    splits: int
    how: str
    timings: tuple = ()  # ((tiles, splits, µs), ...), fastest first

    def describe(self, p: Problem) -> str:
        runs = p.runs(self.tiles, self.splits)
        cut = f"K in {runs} runs of {mk.split_k(p.k, self.splits, self.tiles)}" if runs > 1 else "K whole"
        blocks = p.blocks(self.tiles) * runs
        exact = "; tiles fill the matrices: 16-byte loads for aligned operands" if p.fills(self.tiles) else ""
        return f"tiles {self.tiles}, {cut}: {blocks} blocks{exact}"


class MatmulSettings:
    """``tp.backends.matmul``: how matrix products choose their kernels.

    ``library`` (True) lets cuBLAS take the products it can (float16,
    bfloat16, float32, float64 on a GPU with nvmath-python); False keeps them
    all on tensorplay's Numba kernels. ``allow_tf32`` (False, PyTorch's name
    and default) lets cuBLAS multiply float32 in TF32 on the tensor cores.
    For the Numba kernels, ``autotune`` (True on a GPU, False on the
    simulator, whose timings mean nothing) says whether the first eager
    product of a small shape class times the candidates; ``choices_path`` is
    the file the timed choices are kept in (None: memory only). :meth:`explain`
    says what a product gets, and why.

    Examples
    --------
    >>> import tensorplay as tp
    >>> tp.backends.matmul.library = False  # the Numba kernels, on any backend
    >>> text = tp.backends.matmul.explain(4096, 4096, 4096)
    >>> print(text)  # doctest: +ELLIPSIS
    matmul (4096, 4096) @ (4096, 4096) float32, A, B: tiles ..., K whole: ... (rule: ...); Numba kernel: ...
    >>> text.endswith("; Numba kernel: tp.backends.matmul.library is False")
    True
    >>> tp.backends.matmul.library = True
    """

    def __init__(self) -> None:
        self._autotune = DISK_CACHE
        self._path: Path | None | bool = DISK_CACHE  # True: the default file, read when first needed
        self.generation = 0  # changes whenever a choice could: plans made before are stale
        self._choices: dict[tuple, MatmulChoice] = {}
        self._loaded_from: Path | None = None
        self._lock = threading.Lock()
        self._library = True
        self._allow_tf32 = False

    @property
    def library(self) -> bool:
        return self._library

    @library.setter
    def library(self, value: bool) -> None:
        self._library = _boolean("library", value)
        self.generation += 1

    @property
    def allow_tf32(self) -> bool:
        return self._allow_tf32

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        self._allow_tf32 = _boolean("allow_tf32", value)
        self.generation += 1

    def library_refusal(self, p: Problem) -> str | None:
        """None when cuBLAS computes ``p``, else why the Numba kernels do."""
        if not self._library:
            return "tp.backends.matmul.library is False"
        if p.dtype not in cublas.DTYPES:
            return f"cuBLAS serves float16, bfloat16, float32 and float64 products, not {p.dtype}"
        if max(p.batch, p.m, p.n, p.k) > cublas.MAX_DIM:
            return f"a dimension is over cuBLAS's {cublas.MAX_DIM}"
        return cublas.unavailable()

    @property
    def autotune(self) -> bool:
        return self._autotune

    @autotune.setter
    def autotune(self, value: bool) -> None:
        self._autotune = bool(value)
        self.generation += 1

    @property
    def choices_path(self) -> Path | None:
        if self._path is True:  # named after the device, so two kinds of GPU do not share one
            name = "".join(ch if ch.isalnum() else "_" for ch in get_backend().device_name())
            self._path = cache_dir("matmul") / f"choices_{name}.json"
        return self._path or None

    @choices_path.setter
    def choices_path(self, value: str | os.PathLike | None) -> None:
        self._path = Path(value) if value is not None else None
        self.generation += 1

    # -- choosing --------------------------------------------------------------------------

    def choose(
        self, p: Problem, prepare: Callable[[MatmulChoice], Callable[[], None]] | None = None
    ) -> tuple[MatmulChoice, bool]:
        """The kernel for ``p``, and whether that choice is final (a plan may keep
        it). ``prepare(choice)`` gives a function computing the product with a
        choice: given, and where timing is allowed, a small product's class is
        timed now."""
        key = p.shape_class()
        known = self._known(key)
        if known is not None:
            return known, True
        rule = self.rule(p)
        if not self._small(p):
            return rule, True
        if not self.autotune or prepare is None:
            return rule, not self.autotune
        if capture_state.active:  # nothing can be timed now: tune at the first eager product
            return rule, False
        with self._lock:
            known = self._choices.get(key)
            if known is None:
                known = self._time(p, prepare)
                self._choices[key] = known
                self.generation += 1
                self._save()
        return known, True

    def rule(self, p: Problem) -> MatmulChoice:
        """The choice made without timing (see the module docstring)."""
        sms = get_backend().sm_count
        for tiles in mk.TILE_CHOICES:
            if p.blocks(tiles) >= sms:
                return MatmulChoice(tiles, 1, "rule: the largest tiles that give every SM a block")
        tiles = mk.TILE_CHOICES[-1]
        splits = 1
        while p.blocks(tiles) * splits * 2 <= 2 * sms and p.k // (splits * 2) >= RULE_MIN_RUN:
            splits *= 2
        return MatmulChoice(tiles, splits, "rule: the smallest tiles, K cut for about two blocks per SM")

    def candidates(self, p: Problem) -> list[MatmulChoice]:
        """What a small product's class is timed over: each tile shape with K in
        1, 2, 4, ... runs of at least MIN_RUN, at most eight blocks per SM."""
        sms = get_backend().sm_count
        out, seen = [], set()
        for tiles in mk.TILE_CHOICES:
            for splits in SPLITS:
                runs = p.runs(tiles, splits)
                if (tiles, runs) in seen or (runs > 1 and p.k // runs < MIN_RUN):
                    continue
                if runs > 1 and p.blocks(tiles) * runs > 8 * sms:
                    continue
                seen.add((tiles, runs))
                out.append(MatmulChoice(tiles, splits, "candidate"))
        return out

    def _small(self, p: Problem) -> bool:
        return p.blocks(mk.TILE_CHOICES[0]) < 2 * get_backend().sm_count

    def _time(self, p: Problem, prepare: Callable[[MatmulChoice], Callable[[], None]]) -> MatmulChoice:
        start, end = Event(enable_timing=True), Event(enable_timing=True)
        scratch = Tensor._empty((1,), dt.float32)
        steps = timing.HOLD_STEPS if DISK_CACHE else 1
        timings = []
        for c in self.candidates(p):
            run = prepare(c)
            run()  # compiles the variant and warms it up
            # The device holds while the host queues the timed launches: they
            # run back to back, and the events time the device alone.
            launch(timing.hold, (1, 1, 1), (1, 1, 1), [scratch, steps])
            start.record()
            for _ in range(TIMED_REPEATS):
                run()
            end.record()
            end.synchronize()
            timings.append((c.tiles, c.splits, start.elapsed_time(end) * 1e3 / TIMED_REPEATS))
        timings.sort(key=lambda t: t[2])
        best_tiles, best_splits, _ = timings[0]
        return MatmulChoice(best_tiles, best_splits, f"timed over {len(timings)} candidates", tuple(timings))

    # -- what is known ----------------------------------------------------------------------

    def _known(self, key: tuple) -> MatmulChoice | None:
        if self.choices_path is not None and self._loaded_from != self.choices_path:
            self._load()
        return self._choices.get(key)

    def _load(self) -> None:
        path = self._loaded_from = self.choices_path
        try:
            stored = json.loads(path.read_text())["choices"]
        except (OSError, ValueError, KeyError, TypeError):
            return
        for key_text, entry in stored.items():
            try:
                key = tuple(json.loads(key_text))
                tiles = mk.MatmulTiles(*entry["tiles"])
                if tiles in mk.TILE_CHOICES:
                    self._choices.setdefault(key, MatmulChoice(tiles, int(entry["splits"]), "from disk"))
            except (ValueError, KeyError, TypeError):
                continue  # a line from another version: timed again when met

    def _save(self) -> None:
        path = self.choices_path
        if path is None:
            return
        entries = {
            json.dumps(list(key)): {
                "tiles": list(c.tiles.fields),
                "splits": c.splits,
            }
            for key, c in self._choices.items()
        }
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".{os.getpid()}.tmp")
            partial.write_text(json.dumps({"version": 1, "choices": entries}, indent=1))
            os.replace(partial, path)
        except OSError:
            pass  # a read-only cache folder: choices last for this process

    def forget(self, disk: bool = False) -> None:
        """Drop the choices made in this process (they are read again from the
        file where one is kept), and with ``disk=True`` the file too, so that
        every small shape class is timed again."""
        with self._lock:
            self._choices.clear()
            self._loaded_from = None
            path = self.choices_path
            if disk and path is not None:
                path.unlink(missing_ok=True)
            self.generation += 1

    # -- explaining -------------------------------------------------------------------------

    def explain(
        self, m: int, n: int, k: int, *, batch: int = 1, dtype: str = "float32", trans_a=False, trans_b=False
    ) -> str:
        """What a product of (m, k) by (k, n) gets, and why, as one paragraph."""
        p = Problem(batch, m, n, k, str(dtype), bool(trans_a), bool(trans_b))
        entries = f"{batch} x " if batch > 1 else ""
        head = f"matmul {entries}({m}, {k}) @ ({k}, {n}) {p.dtype}, {p.layout()}: "
        refusal = self.library_refusal(p)
        if refusal is None:
            return head + cublas.describe(p.dtype, batch, self._allow_tf32)
        why = f"; Numba kernel: {refusal}"
        known = self._known(p.shape_class())
        if known is not None:
            lines = [head + f"{known.describe(p)} ({known.how}, for shape class {p.shape_class()[3:]}){why}"]
            lines += [f"  {tiles}, K in {p.runs(tiles, s)} runs: {us:.1f} us" for tiles, s, us in known.timings]
            return "\n".join(lines)
        rule = self.rule(p)
        text = head + f"{rule.describe(p)} ({rule.how})"
        if self._small(p):
            text += (
                f"; not timed yet: {len(self.candidates(p))} candidates are timed at the first eager product"
                if self.autotune
                else "; autotune is off"
            )
        return text + why


def _boolean(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"tp.backends.matmul.{name} expects True or False, got {value!r}")
    return value


MATMUL = MatmulSettings()
