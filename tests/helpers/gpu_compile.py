"""Compile, for a real GPU, the kernels a simulator run launched.

Numba's simulator runs kernels as Python, so code that only the GPU compiles
(type inference, lowering, the warp-shuffle path of the reductions) is never
checked there. ``signatures()`` lists the library kernels launched so far in
this process with their argument types; running this file as a script (in a
process without ``NUMBA_ENABLE_CUDASIM``) rebuilds each kernel from
``tensorplay/kernels`` and compiles it to PTX for compute capability 9.0, which
needs NVIDIA's NVRTC and NVVM libraries but no GPU::

    python tests/helpers/gpu_compile.py < signatures.json

Exit status: 0 all compiled, 1 some failed (each named on stdout), 3 the
compiler libraries are missing.
"""

from __future__ import annotations

import importlib
import json
import multiprocessing
import os
import sys
import types
from pathlib import Path

KERNELS = Path(__file__).resolve().parents[2] / "tensorplay" / "kernels"
# free of tensorplay imports
MODULES = (
    "elementwise", "reduce", "random", "matmul", "gather", "fused", "timing", "multi_tensor", "sequence", "creation",
    "indexing",
)  # fmt: skip
MISSING_LIBRARIES = 3


def _scalar_name(key) -> str:
    import numpy as np

    return {bool: "bool", int: "int", float: "float"}.get(key) or np.dtype(key).name


def signatures() -> list[dict]:
    """The launched library kernels: how to rebuild each and its argument keys."""
    from tensorplay.runtime.launch import _launchers

    found = []
    for kernel, *argkeys in list(_launchers):
        recipe = getattr(kernel, "tp_recipe", None)
        if recipe is None:  # a module-level kernel, such as random.uniform
            fn = getattr(kernel, "py_func", None)
            module = sys.modules.get(getattr(fn, "__module__", ""))
            stem = getattr(module, "__name__", "").rpartition(".")[2]
            if stem not in MODULES or getattr(module, fn.__name__, None) is not kernel:
                continue  # a user's kernel, or one this check cannot rebuild
            recipe = (stem, fn.__name__, None)
        args = [list(k) if isinstance(k, tuple) else _scalar_name(k) for k in argkeys]
        found.append({"recipe": list(recipe), "args": args})
    return found


def _load(stem: str):
    """The kernel module ``stem``, loaded on its own: as a module of a package
    over the kernels folder (its relative imports, ``_target``, resolve there),
    without ``tensorplay/__init__`` or the rest of tensorplay."""
    if _PACKAGE not in sys.modules:
        package = types.ModuleType(_PACKAGE)
        package.__path__ = [str(KERNELS)]
        sys.modules[_PACKAGE] = package
    return importlib.import_module(f"{_PACKAGE}.{stem}")


_PACKAGE = "gpu_compile_kernels"


def _numba_type(arg):
    import numpy as np
    from numba.cuda import types
    from numba.cuda.np.numpy_support import from_dtype

    if isinstance(arg, list):  # an array (dtype, ndim, C-contiguous) or an element pointer (dtype, "*")
        element = from_dtype(np.dtype("uint16" if arg[0] == "bfloat16" else arg[0]))  # bfloat16: its bits
        if arg[1] == "*":
            return types.CPointer(element)
        return types.Array(element, arg[1], "C" if arg[2] else "A")
    return {"bool": types.boolean, "int": types.int64, "float": types.float64}.get(arg) or from_dtype(np.dtype(arg))


_modules: dict = {}


def _compile(item: dict) -> str | None:
    """None when the kernel compiles, else a line saying why not."""
    from numba import cuda

    stem, name, args = item["recipe"]
    target = getattr(_modules[stem], name)
    kernel = target(*[tuple(a) if isinstance(a, list) else a for a in args]) if args is not None else target
    sig = tuple(_numba_type(a) for a in item["args"])
    try:
        cuda.compile_ptx(kernel.py_func, sig, cc=(9, 0))
    except Exception as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        return f"FAILED {stem}.{name}{tuple(args or ())} {item['args']}: {type(e).__name__}: {first}"
    return None


def main() -> int:
    if hasattr(os, "sched_setaffinity"):  # the simulator's tests pin themselves to one CPU; compiling needs none
        os.sched_setaffinity(0, range(os.cpu_count() or 1))
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        load_nvidia_dynamic_lib("nvrtc")
        load_nvidia_dynamic_lib("nvvm")
    except Exception as e:
        print(f"NVRTC or NVVM not found: {e}")
        return MISSING_LIBRARIES
    # A device function compiles for the current device's capability; there is none here: 9.0, as the kernels
    import numba.cuda.dispatcher

    numba.cuda.dispatcher.get_current_device = lambda: types.SimpleNamespace(compute_capability=(9, 0))
    items = json.load(sys.stdin)
    stems = set(MODULES) | {item["recipe"][0] for item in items}  # a kernel built by a recipe: its module too
    _modules.update({stem: _load(stem) for stem in sorted(stems)})
    # fused kernels' source imports its helpers from tensorplay.kernels: the modules loaded here
    for package in ("tensorplay", "tensorplay.kernels"):
        sys.modules.setdefault(package, types.ModuleType(package))
    for name, module in list(sys.modules.items()):  # the kernel modules and those they import (_vector)
        if name.startswith(f"{_PACKAGE}."):
            sys.modules.setdefault(f"tensorplay.kernels.{name.removeprefix(_PACKAGE + '.')}", module)
    workers = min(os.cpu_count() or 1, 4)
    if workers > 1 and len(items) > 50:  # forked workers share the loaded modules
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            failures = [f for f in pool.map(_compile, items, chunksize=8) if f]
    else:
        failures = [f for f in map(_compile, items) if f]
    print("\n".join(failures) or f"{len(items)} kernels compiled")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
