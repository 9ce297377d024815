"""Errors raised by the device layer, shared by both backends, and the words
both give for a graph update the driver refuses (``update_refusal``)."""

from __future__ import annotations

__all__ = ["CaptureError", "CudaError", "HazardError", "explain", "too_many_cooperative_blocks", "update_refusal"]

# Plain words for the codes users meet; anything else falls back to the
# driver's own description.
_ADVICE = {
    "CUDA_ERROR_OUT_OF_MEMORY": "the device is out of memory; free tensors or call tensorplay.cuda.empty_cache()",
    "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED": "this operation is not allowed while "
    "a stream is capturing; warm up before capture or use "
    "capture_error_mode='relaxed'",
    "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED": "the capture was invalidated by an "
    "operation not allowed during capture; end it and capture again",
    "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT": "the legacy default stream cannot take "
    "part in a capture; launch on the capturing stream instead",
    "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED": "the capture was not begun on this stream",
    "CUDA_ERROR_STREAM_CAPTURE_UNJOINED": "a stream forked from the capture was "
    "not joined back before the capture ended; make the capturing stream wait "
    "on it",
    "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD": "the capture was begun on another "
    "thread; use capture_error_mode='thread_local' or 'relaxed'",
    "CUDA_ERROR_NOT_READY": "the work is not finished yet",
    "CUDA_ERROR_INVALID_VALUE": "an argument passed to the driver is invalid",
    "CUDA_ERROR_ILLEGAL_ADDRESS": "a kernel accessed memory out of bounds; the context is now unusable",
    "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES": "the kernel asks for more registers or "
    "threads per block than the device has; use fewer threads per block",
    "CUDA_ERROR_NO_DEVICE": "no CUDA device is visible",
    "CUDA_ERROR_NOT_INITIALIZED": "the driver was not initialised",
}


def too_many_cooperative_blocks(name: str, blocks: int, most: int, why: str) -> ValueError:
    """The error for a launch of a kernel that synchronises its whole grid with
    more blocks than can be on the device at once (``why``: how many can)."""
    return ValueError(
        f"{name} synchronises its whole grid (cuda.cg.this_grid().sync()), so every block of a launch must be "
        f"on the device at once: at most {most} here ({why}), got {blocks}; launch fewer blocks and let each "
        "thread loop over several items (kernel.max_cooperative_blocks(threads, *args) gives the most)"
    )


def grid_sync_with_set_conditional(name: str) -> ValueError:
    """The error for a kernel that both synchronises its whole grid and sets a conditional node's handle."""
    return ValueError(
        f"{name} both synchronises its whole grid (cuda.cg.this_grid().sync()) and calls "
        "tp.cuda.set_conditional: each links CUDA's device runtime library, which the GPU's linker refuses to "
        "link twice into one kernel; write the decision into a flag tensor and loop on it (g.while_(flag)), "
        "or set the handle in a small kernel launched after this one"
    )


def explain(code_name: str, fallback: str = "") -> str:
    """The plain explanation for a driver result code name."""
    return _ADVICE.get(code_name, fallback or "see the CUDA driver documentation")


class CudaError(RuntimeError):
    """A device call failed.

    Attributes
    ----------
    function : str
        The driver function that failed ("" when not a single call).
    code : str
        The result code's name, e.g. ``"CUDA_ERROR_OUT_OF_MEMORY"``.
    """

    def __init__(self, message: str, function: str = "", code: str = "") -> None:
        super().__init__(message)
        self.function = function
        self.code = code

    @classmethod
    def from_result(cls, function: str, code: str, description: str = "") -> CudaError:
        return cls(f"{function} failed: {code}: {explain(code, description)}", function, code)


class CaptureError(CudaError):
    """An operation that is not allowed while a stream is capturing."""


class HazardError(RuntimeError):
    """Two accesses to the same memory, at least one a write, with nothing
    ordering them: two operations (no stream order, event, ``wait_stream``,
    host synchronisation or graph edge between them), or two threads of one
    kernel launch. On a GPU they may happen in either order, or at once.
    Raised while hazard checking is on (``tp.cuda.sanitize()``).

    ``first`` and ``second`` describe the two accesses, as the message does.
    """

    def __init__(self, message: str, first: str = "", second: str = "") -> None:
        super().__init__(message)
        self.first, self.second = first, second


_REFUSALS = {  # CUgraphExecUpdateResult names -> why, in words
    "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED": "the graph's topology changed (nodes or edges)",
    "CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED": "a node's type changed",
    "CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED": "a kernel node's function changed",
    "CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE": "a kernel node's function changed",
    "CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED": "a node's parameters changed in a way the driver cannot update",
    "CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED": "a node's attributes changed",
    "CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED": "the graph holds a node the driver cannot update",
}


def update_refusal(result_name: str) -> str:
    """Why ``cuGraphExecUpdate`` refused, from its result's name."""
    return _REFUSALS.get(result_name, f"the driver refused the update ({result_name})")
