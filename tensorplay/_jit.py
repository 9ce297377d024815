"""Custom kernels: ``@tp.jit`` and ``tp.cuda.launch``.

A kernel is compiled by Numba once per argument signature and launched through
the same fast path as the built-in ops, on the current stream, so a launch
inside a graph capture is captured (and the graph keeps its tensors alive).
Tensors go in as Numba arrays.
"""

from __future__ import annotations

import functools

import numpy as np

from ._export import hold_for_graph
from ._interop import as_tensor
from ._tensor import Tensor
from .runtime.backend import get as get_backend
from .runtime.backend.launch_limits import refuse_launch_shape
from .runtime.caches import BoundedCache
from .runtime.capture import capture_state
from .runtime.launch import KernelArray, launch, launcher_for
from .runtime.streams import Stream, as_stream

__all__ = ["Kernel", "jit", "launch_kernel"]


def _dim3(v, what: str) -> tuple[int, int, int]:
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        v = (int(v),)
    if (
        not isinstance(v, (tuple, list))
        or not 1 <= len(v) <= 3
        or not all(isinstance(d, (int, np.integer)) and d > 0 for d in v)
    ):
        raise ValueError(f"expected {what} as a positive int or a tuple of 1 to 3 positive ints, got {v!r}")
    return tuple(int(d) for d in v) + (1,) * (3 - len(v))


_ARITIES = BoundedCache("jit.arities", 4096)  # kernel -> its number of parameters (None: any)


def _check_arity(kernel, given: int) -> None:
    """Refuse a launch with another number of arguments than the kernel's
    parameters, before anything is queued (the GPU fails at the launch, the
    simulator inside the kernel, or at every replay of a capture)."""
    want = _ARITIES.get(kernel, -1)
    if want == -1:
        code = getattr(getattr(kernel, "py_func", None), "__code__", None)
        want = _ARITIES.put(kernel, None if code is None or code.co_flags & 0x04 else code.co_argcount)  # *args
    if want is not None and given != want:
        raise TypeError(f"kernel {kernel.py_func.__name__}() takes {want} argument(s), got {given}")


def _kernel_arg(a, position: int):
    if type(a) is int and not -(1 << 63) <= a < 1 << 63:
        raise OverflowError(
            f"kernel argument {position}: the int {a} does not fit int64, the type a Python int takes in a "
            "kernel; pass a NumPy integer of the type you mean (np.uint64(...)) or a float"
        )
    if isinstance(a, (KernelArray, bool, int, float, np.number, np.bool_)):
        return a
    handle = getattr(a, "conditional_handle", None)  # a conditional node's (tensorplay.cuda.Loop, ...)
    if handle is not None:
        return handle
    if isinstance(a, np.ndarray):
        raise TypeError(
            f"kernel argument {position} is a NumPy array, which lives on the host; "
            "pass tp.tensor(array) (a device copy) instead"
        )
    if hasattr(a, "__cuda_array_interface__") or hasattr(a, "__dlpack__"):
        return as_tensor(a)
    raise TypeError(
        f"kernel argument {position}: expected a Tensor, a device array or a number, got {type(a).__name__}"
    )


@functools.cache
def _limits() -> dict:
    """The device's launch limits (see the backends' ``launch_limits``), read once."""
    return get_backend().launch_limits()


def _check_launch(grid: tuple, block: tuple, shared_bytes) -> None:
    """Refuse a launch configuration the device would refuse: the same sentence on the GPU and on the simulator."""
    refuse_launch_shape(_limits(), grid, block, shared_bytes)


def launch_kernel(kernel, blocks, threads, args, stream: Stream | None = None, shared_bytes: int = 0) -> None:
    """Launch a ``numba.cuda.jit`` kernel with tensorplay's rules (see ``tp.cuda.launch``)."""
    if isinstance(kernel, Kernel):
        kernel = kernel.dispatcher
    if stream is not None and not isinstance(stream, Stream):
        raise TypeError(f"expected a tensorplay.cuda.Stream, got {type(stream).__name__}")
    grid, block = _dim3(blocks, "blocks"), _dim3(threads, "threads")
    _check_launch(grid, block, shared_bytes)
    _check_arity(kernel, len(args))
    converted = [_kernel_arg(a, i) for i, a in enumerate(args)]
    launch(kernel, grid, block, converted, stream, shared_bytes)
    if capture_state.active:
        hold_for_graph(as_stream(stream), [a for a in converted if isinstance(a, Tensor)])


class _Configured:
    __slots__ = ("kernel", "blocks", "threads", "stream", "shared_bytes")

    def __init__(self, kernel, blocks, threads, stream, shared_bytes) -> None:
        self.kernel, self.blocks, self.threads = kernel, blocks, threads
        self.stream, self.shared_bytes = stream, shared_bytes

    def __call__(self, *args) -> None:
        launch_kernel(self.kernel, self.blocks, self.threads, args, self.stream, self.shared_bytes)


class Kernel:
    """A Numba CUDA kernel launched with tensorplay's rules.

    ``kernel[blocks, threads](*args)`` launches on the current stream;
    ``kernel[blocks, threads, stream]`` and ``kernel[blocks, threads, stream,
    shared_bytes]`` name a stream and dynamic shared memory.
    """

    def __init__(self, fn, signature=None, **options) -> None:
        self.dispatcher = _numba_jit(fn, signature, options)
        functools.update_wrapper(self, fn)

    def __getitem__(self, config) -> _Configured:
        if not isinstance(config, tuple) or not 2 <= len(config) <= 4:
            raise ValueError("launch a kernel as kernel[blocks, threads] or kernel[blocks, threads, stream]")
        blocks, threads, *rest = config
        stream = rest[0] if rest else None
        shared = rest[1] if len(rest) > 1 else 0
        return _Configured(self, blocks, threads, stream, shared)

    def __call__(self, *args):
        raise TypeError(f"launch {self.__name__} with a configuration: {self.__name__}[blocks, threads](...)")

    def max_cooperative_blocks(self, threads, *args, shared_bytes: int = 0) -> int:
        """The most blocks of ``threads`` threads a launch with ``args`` may have
        where the kernel synchronises its whole grid (``cuda.cg.this_grid().sync()``):
        those that fit on the device at once (1 on the simulator)."""
        block = _dim3(threads, "threads")
        _check_launch((1, 1, 1), block, shared_bytes)
        launcher = launcher_for(self.dispatcher, [_kernel_arg(a, i) for i, a in enumerate(args)])
        return launcher.max_cooperative_blocks(block[0] * block[1] * block[2], shared_bytes)[0]


def jit(fn=None, **options):
    """Compile a Python function as a CUDA kernel (``numba.cuda.jit`` options apply,
    and its signature form: ``@tp.jit("void(float32[:])")`` compiles at once).
    With ``device=True`` it is Numba's device function, for kernels to call.

    Examples
    --------
    >>> import tensorplay as tp
    >>> @tp.jit
    ... def saxpy(a, x, y):
    ...     i = tp.cuda.grid(1)
    ...     if i < x.size:
    ...         y[i] = a * x[i] + y[i]
    >>> x, y = tp.ones(8), tp.zeros(8)
    >>> saxpy[1, 8](2.0, x, y)
    >>> y.tolist()
    [2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    """
    if fn is None or not callable(fn):  # options only, or Numba's signature first: @tp.jit("void(float32[:])")
        return lambda f: _compile(f, fn, options)
    return _compile(fn, None, options)


def _compile(fn, signature, options: dict):
    if options.get("device"):  # kernels call a device function and nothing launches it: Numba's object serves
        return _numba_jit(fn, signature, options)
    return Kernel(fn, signature, **options)


def _numba_jit(fn, signature, options: dict):
    """``fn`` through the backend's ``numba.cuda.jit``, with its signature where one is given."""
    numba_jit = get_backend().jit().jit
    return (numba_jit(**options) if signature is None else numba_jit(signature, **options))(fn)
