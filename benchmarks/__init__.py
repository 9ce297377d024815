"""Benchmarks run on the GPU: ``python -m benchmarks.run`` (see RESULTS.md)."""
