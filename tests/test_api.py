"""The public contract (../shared/API.md): every name it lists exists where it says."""

import inspect

import pytest

import tensorplay as tp

TOP = """__version__ tensor empty zeros ones full arange rand randn manual_seed zeros_like empty_like ones_like
from_numpy from_dlpack float32 float64 float16 bfloat16 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool cat
stack where clamp matmul no_grad compile autograd nn optim cuda Tensor""".split()
CUDA = """is_available backend device_count current_device get_device_name synchronize Stream stream current_stream
default_stream Event memory_allocated memory_reserved max_memory_allocated reset_peak_memory_stats empty_cache
memory_stats launch grid CUDAGraph graph graphs make_graphed_callables""".split()
GRAPHS = """CUDAGraph graph graph_pool_handle is_current_stream_capturing export_dot make_graphed_callables""".split()
CUDAGRAPH = """capture_begin capture_end instantiate replay reset pool_id enable_debug_mode debug_dump
begin_capture_to_if_node begin_capture_to_while_node end_capture_to_conditional_node
set_conditional_handle_for_current_node stage_and_launch""".split()
TENSOR = """shape dtype ndim numel data_ptr is_contiguous device copy_ fill_ zero_ clone contiguous view reshape t T
numpy item tolist add_ sub_ mul_ div_ sum mean max min exp log sqrt tanh sigmoid relu sin cos clamp where matmul
backward grad requires_grad_ detach __dlpack__ __cuda_array_interface__""".split()
NN = "Module Parameter Linear ReLU Tanh Sigmoid Sequential MSELoss functional".split()
FUNCTIONAL = "relu tanh linear mse_loss softmax cross_entropy".split()
MODULE = """parameters named_parameters buffers train eval zero_grad register_forward_hook
register_forward_pre_hook state_dict load_state_dict""".split()


@pytest.mark.parametrize(
    "owner, names",
    [
        (tp, TOP),
        (tp.cuda, CUDA),
        (tp.cuda.graphs, GRAPHS),
        (tp.cuda.CUDAGraph, CUDAGRAPH),
        (tp.Tensor, TENSOR),
        (tp.nn, NN),
        (tp.nn.functional, FUNCTIONAL),
        (tp.nn.Module, MODULE),
        (tp.optim, ["SGD", "Adam"]),
        (tp.autograd, ["grad", "Function"]),
    ],  # fmt: skip
    ids=["tp", "cuda", "graphs", "CUDAGraph", "Tensor", "nn", "functional", "Module", "optim", "autograd"],
)
def test_every_name_of_the_contract_exists(owner, names):
    missing = [n for n in names if not hasattr(owner, n)]
    assert not missing, f"missing from {getattr(owner, '__name__', owner)}: {missing}"


def test_the_graphs_module_and_tp_cuda_share_their_objects():
    for name in ("CUDAGraph", "graph", "make_graphed_callables"):
        assert getattr(tp.cuda, name) is getattr(tp.cuda.graphs, name)


def test_signatures_follow_the_contract():
    params = inspect.signature(tp.cuda.make_graphed_callables).parameters
    assert list(params)[:5] == ["callables", "sample_args", "num_warmup_iters", "allow_unused_input", "pool"]
    assert params["num_warmup_iters"].default == 3 and params["capture_error_mode"].default == "global"
    grad = inspect.signature(tp.autograd.grad).parameters
    assert list(grad) == ["outputs", "inputs", "grad_outputs", "retain_graph", "create_graph", "allow_unused"]
    assert inspect.signature(tp.optim.SGD).parameters["momentum"].default == 0
    assert inspect.signature(tp.compile).parameters["backend"].default == "cudagraphs"
