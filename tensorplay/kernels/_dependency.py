"""Programmatic dependent launch (sm_90 and later): a kernel that may begin
while the kernel before it in a graph is still draining.

``wait_for_prior_grids()``, the first statement of such a kernel, blocks its
threads until every kernel it depends on has finished and its writes are
visible (PTX ``griddepcontrol.wait``, CUDA's ``cudaGridDependencySynchronize``),
then lets the kernels that depend on it begin to launch
(``griddepcontrol.launch_dependents``). Launched as usual, after a plain
dependency, both instructions do nothing. The graph code turns a kernel ->
kernel edge into a programmatic one only where the second kernel begins with
this call (``runtime/backend/driver_overlap.py``, ``overlap_kernels``): its launch
then overlaps the first kernel's last blocks and the flush of its writes, and
no memory access of it comes before the first kernel is done, reads or writes
(so a buffer the first kernel reads may be the second's output).

Where ``GRID_DEPENDENCY`` is false (the simulator, a GPU before sm_90) the
call is an empty device function, and the graph code leaves every edge plain.
This module imports nothing of tensorplay.
"""

from __future__ import annotations

from ._target import GRID_DEPENDENCY, device_function

__all__ = ["GRID_DEPENDENCY", "wait_for_prior_grids"]

if GRID_DEPENDENCY:
    from llvmlite import ir
    from numba.cuda import types
    from numba.cuda.extending import intrinsic

    @intrinsic
    def wait_for_prior_grids(typingctx):
        def codegen(context, builder, sig, args):
            fnty = ir.FunctionType(ir.VoidType(), [])
            for instruction in ("griddepcontrol.wait;", "griddepcontrol.launch_dependents;"):
                builder.call(ir.InlineAsm(fnty, instruction, "~{memory}", side_effect=True), [])
            return context.get_dummy_value()

        return types.void(), codegen

else:

    @device_function
    def wait_for_prior_grids() -> None:
        """Nothing to wait for: no kernel here begins before the one it depends on ends."""
