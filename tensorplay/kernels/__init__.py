"""The kernel library: Numba kernels at module level, built per op by cached factories."""
