"""Time ``matmul_tiled`` tile variants on a real GPU, next to torch.matmul.

Stand-alone: it loads ``tensorplay/kernels/matmul.py`` by file path (no package
import) and uses numba.cuda directly, so run it where a GPU is visible::

    python benchmarks/matmul_variants.py            # 4096^3 fp32, all variants
    python benchmarks/matmul_variants.py --size 8192 --repeat 20

For each tile variant it checks a batched product with ragged edges against
NumPy in float64, then times a ``size``^3 fp32 product with CUDA events
(warm-up, then the median of ``repeat`` launches) and prints TFLOP/s beside
torch.matmul with TF32 off, measured in the same run. It also checks the
default kernel on 1024^3 against torch in float64, and each supported dtype on
a small ragged batch.
"""

import argparse
import importlib
import os
import statistics
import sys
import time
import types
from pathlib import Path

import numpy as np

if os.environ.get("NUMBA_ENABLE_CUDASIM", "0") != "0":
    sys.exit("matmul_variants.py times the real GPU: unset NUMBA_ENABLE_CUDASIM")

from numba import cuda

MATMUL_PATH = Path(__file__).resolve().parents[1] / "tensorplay" / "kernels" / "matmul.py"


def load_matmul_module():
    """Import tensorplay/kernels/matmul.py without tensorplay/__init__: the
    kernels folder as a package of its own (its modules import only each other)."""
    package = types.ModuleType("tensorplay_kernels")
    package.__path__ = [str(MATMUL_PATH.parent)]
    sys.modules[package.__name__] = package
    return importlib.import_module("tensorplay_kernels.matmul")


mm = load_matmul_module()

T = mm.MatmulTiles
# name -> (tiles, exact): ``exact`` is the variant for products that fill their tiles (vector loads, no bounds checks)
VARIANTS = {
    "default": (mm.TILES, False),
    "default exact": (mm.TILES, True),
    "128x128x8 ku8 exact": (T(128, 128, 8, 8, 8, vec=4, ku=8), True),
    "128x128x16 exact": (T(128, 128, 16, 8, 8, vec=4, ku=4), True),
    "128x128x16 min2 exact": (T(128, 128, 16, 8, 8, vec=4, ku=4, min_blocks=2), True),
    "64x128x8 exact": (T(64, 128, 8, 8, 8, vec=4, ku=4), True),
    "64x128x16 min4 exact": (T(64, 128, 16, 8, 8, vec=4, ku=4, min_blocks=4), True),
}


def random(shape, dtype, rng):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-20, 21, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def rel_err(got, ref) -> float:
    return float(np.linalg.norm(got.astype(np.float64) - ref) / np.linalg.norm(ref))


def launch(tiles, a, b, c, exact=False):
    batch, m, n = c.shape
    grid, block = mm.matmul_launch_shape(batch, m, n, tiles)
    mm.matmul_tiled_variant(tiles, exact=exact)[grid, block](a, b, c, a.shape[2])


def check(tiles, batch, m, k, n, dtype, rng, exact=False) -> float:
    a = random((batch, m, k), dtype, rng)
    b = random((batch, k, n), dtype, rng)
    fill = np.nan if np.dtype(dtype).kind == "f" else -7
    d_c = cuda.to_device(np.full((batch, m, n), fill, dtype=dtype))
    launch(tiles, cuda.to_device(a), cuda.to_device(b), d_c, exact)
    return rel_err(d_c.copy_to_host(), np.matmul(a.astype(np.float64), b.astype(np.float64)))


def time_events(fn, warmup: int, repeat: int, start, stop, elapsed) -> float:
    """Median milliseconds of ``fn`` between two events, after ``warmup`` calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(elapsed(start, stop))
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096, help="M = N = K of the timed product")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), help="names from VARIANTS")
    args = parser.parse_args()

    try:
        import torch

        torch.backends.cuda.matmul.allow_tf32 = False
        has_torch = torch.cuda.is_available()
    except ImportError:
        has_torch = False

    rng = np.random.default_rng(0)
    size = args.size
    flops = 2.0 * size**3
    name = cuda.get_current_device().name
    name = name.decode() if isinstance(name, bytes) else name
    print(f"device: {name}; fp32 {size}^3; median of {args.repeat}")

    print("\n-- correctness of the default kernel per dtype, (3, 300, 257, 129) ragged batch")
    for dtype, tol in (
        (np.float32, 1e-5),
        (np.float64, 1e-12),
        (np.float16, 1e-2),
        (np.int32, 0),
        (np.int64, 0),
    ):
        err = check(mm.TILES, 3, 300, 257, 129, dtype, rng)
        print(f"{np.dtype(dtype).name:>8}: rel err {err:.2e}  {'ok' if err <= tol else 'FAIL'}")

    a = rng.standard_normal((1, 1024, 1024), dtype=np.float32)
    b = rng.standard_normal((1, 1024, 1024), dtype=np.float32)
    d_c = cuda.device_array((1, 1024, 1024), np.float32)
    launch(mm.TILES, cuda.to_device(a), cuda.to_device(b), d_c)
    if has_torch:
        ref = (torch.from_numpy(a[0]).cuda().double() @ torch.from_numpy(b[0]).cuda().double()).cpu().numpy()
        ref_name = "torch float64"
    else:
        ref, ref_name = (
            a[0].astype(np.float64) @ b[0].astype(np.float64),
            "numpy float64",
        )
    print(f"1024^3 fp32 vs {ref_name}: rel err {rel_err(d_c.copy_to_host()[0], ref):.2e}")

    d_a = cuda.to_device(rng.standard_normal((1, size, size), dtype=np.float32))
    d_b = cuda.to_device(rng.standard_normal((1, size, size), dtype=np.float32))
    d_c = cuda.device_array((1, size, size), np.float32)
    start, stop = cuda.event(), cuda.event()

    print(f"\n-- {size}^3 fp32 (checked vs numpy float64 on (2, 1000, 999, 1001), exact ones on (2, 512, 256, 384))")
    print(f"{'variant':<26}{'tiles':<52}{'ms':>8}{'TFLOP/s':>9}{'compile s':>10}{'rel err':>10}")
    for name in args.variants:
        tiles, exact = VARIANTS[name]
        t0 = time.perf_counter()
        shape = (2, 512, 256, 384) if exact else (2, 1000, 999, 1001)
        err = check(tiles, *shape, np.float32, rng, exact)  # also compiles
        compile_s = time.perf_counter() - t0
        ms = time_events(
            lambda tiles=tiles, exact=exact: launch(tiles, d_a, d_b, d_c, exact),
            args.warmup,
            args.repeat,
            start,
            stop,
            cuda.event_elapsed_time,
        )
        desc = f"{tiles}{' exact' if exact else ''}"
        print(f"{name:<26}{desc:<52}{ms:8.3f}{flops / ms / 1e9:9.2f}{compile_s:10.1f}{err:10.1e}")

    if has_torch:
        ta = torch.randn(size, size, device="cuda")
        tb = torch.randn(size, size, device="cuda")
        t_start = torch.cuda.Event(enable_timing=True)
        t_stop = torch.cuda.Event(enable_timing=True)
        ms = time_events(
            lambda: torch.matmul(ta, tb),
            args.warmup,
            args.repeat,
            t_start,
            t_stop,
            lambda s, e: s.elapsed_time(e),
        )
        print(f"{'torch.matmul (TF32 off)':<78}{ms:8.3f}{flops / ms / 1e9:9.2f}")
    else:
        print("torch not importable: no reference timing")


if __name__ == "__main__":
    main()
