"""A first look at tensorplay: tensors, ops, streams and a custom kernel.

Runs on the GPU when one answers, otherwise on the CPU simulator.
"""

import numpy as np

import tensorplay as tp


@tp.jit
def saxpy(a, x, y):
    """y = a * x + y, one element per thread."""
    i = tp.cuda.grid(1)
    if i < x.size:
        y[i] = a * x[i] + y[i]


def main() -> None:
    print(f"tensorplay {tp.__version__} on {tp.cuda.get_device_name()} (backend: {tp.cuda.backend()})")
    tp.manual_seed(0)
    x = tp.randn(4, 6)
    w = tp.rand(6, 3)
    y = (x @ w).relu() + 0.5  # matmul, elementwise ops with broadcasting
    ref = np.maximum(x.numpy().astype(np.float64) @ w.numpy(), 0) + 0.5
    print("relu(x @ w) + 0.5 matches NumPy:", np.allclose(y.numpy(), ref, rtol=1e-5, atol=1e-5))
    print("column means:", [round(float(v), 4) for v in y.mean(0).numpy()])

    n = 1000
    a, b = tp.arange(n).float(), tp.ones(n)
    s = tp.cuda.Stream()
    s.wait_stream(tp.cuda.current_stream())  # a and b are made on the current stream: s must not start before them
    with tp.cuda.stream(s):  # the kernel runs on s, like any op issued here
        saxpy[(n + 127) // 128, 128](2.0, a, b)
    s.synchronize()
    print("saxpy on a side stream, sum:", b.sum().item(), "expected:", 2.0 * n * (n - 1) / 2 + n)
    print("memory allocated:", tp.cuda.memory_allocated(), "bytes")


if __name__ == "__main__":
    main()
