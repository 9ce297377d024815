"""Changing captured graphs: a capture with update=True applied to the graph's
executable (or instantiated when the topology changed), and kernel nodes given
new arguments; each checked against eager results or a fresh capture."""

from __future__ import annotations

import gc
import struct

import numpy as np
import pytest

import tensorplay as tp


@tp.jit
def scale_into(out, x, factor):
    i = tp.cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * factor


def _body(x):
    return (x * 2.0 + 1.0).exp()


def test_an_update_with_the_same_topology_is_applied_in_place():
    a, b = tp.tensor([0.0, 1.0, 2.0]), tp.tensor([-1.0, 0.5, 3.0])
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = _body(a)
    pool = g.pool_id
    with tp.cuda.graph(g, update=True):
        y = _body(b)  # the same kernels on other memory
    assert g.last_update.updated and g.last_update.reason is None and str(g.last_update) == "updated in place"
    assert g.pool_id == pool
    g.replay()
    np.testing.assert_allclose(y.numpy(), np.exp(b.numpy().astype(np.float64) * 2 + 1), rtol=1e-6)
    b.fill_(0.0)
    g.replay()  # the updated graph reads b at every replay
    np.testing.assert_allclose(y.numpy(), np.exp(1.0), rtol=1e-6)


def test_an_update_may_change_kernels_and_launch_shapes():
    x = tp.arange(8, dtype=tp.float32)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x * 3.0
    big = tp.arange(5000, dtype=tp.float32)
    with tp.cuda.graph(g, update=True):
        y = big - 1.0  # another kernel, another grid
    g.replay()
    assert g.last_update.updated
    np.testing.assert_array_equal(y.numpy(), np.arange(5000, dtype=np.float32) - 1)


def test_a_changed_topology_is_instantiated_again():
    x = tp.ones(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x + 1.0
    with tp.cuda.graph(g, update=True):
        y = (x + 1.0) * 4.0  # one node more
    assert not g.last_update.updated
    assert "topology changed" in g.last_update.reason and str(g.last_update).startswith("instantiated again: ")
    g.replay()
    assert y.tolist() == [8.0] * 4


def test_a_graph_with_a_while_node_is_instantiated_again_and_right():
    def countdown(g, n, acc, flag):
        tp.gt(n, 0, out=flag)
        with g.while_(flag, max_iters=50):  # a wrong update cannot run away
            acc.add_(1.0)
            n.sub_(1)
            tp.gt(n, 0, out=flag)

    n1, n2 = tp.tensor([3], dtype=tp.int32), tp.tensor([5], dtype=tp.int32)
    acc, flag = tp.zeros(1), tp.empty(1, dtype=tp.bool)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        countdown(g, n1, acc, flag)
    with tp.cuda.graph(g, update=True):
        countdown(g, n2, acc, flag)
    g.replay()
    assert (acc.item(), n1.item(), n2.item()) == (5.0, 3, 0)
    assert g.last_update.updated  # the driver updates conditional nodes too (driver 580)
    assert len(g.hit_limits()) == 0
    n2.fill_(2)
    g.replay()  # the flag and the counter of the updated loop, at a second replay
    assert (acc.item(), n2.item()) == (7.0, 0)


def test_update_on_an_empty_graph_is_a_capture():
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g, update=True):
        y = tp.ones(2) * 5.0
    g.replay()
    assert y.tolist() == [5.0, 5.0] and g.last_update is None


def test_a_failed_update_leaves_the_graph_as_it_was():
    x = tp.ones(3)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x * 7.0
    with pytest.raises(ZeroDivisionError):
        with tp.cuda.graph(g, update=True):
            _ = x * 2.0
            raise ZeroDivisionError
    assert not tp.cuda.graphs.is_current_stream_capturing()
    g.replay()
    assert y.tolist() == [7.0] * 3
    with pytest.raises(ValueError, match="uses the graph's own pool"):
        with tp.cuda.graph(g, update=True, pool=tp.cuda.graph_pool_handle()):
            pass
    with pytest.raises(RuntimeError, match="or capture with update=True"):
        with tp.cuda.graph(g):
            pass


def test_an_update_lets_go_of_what_only_the_kernels_it_replaced_used():
    n = 1 << 12
    out, x = tp.empty(n), tp.ones(n)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        scale_into[n // 256, 256](out, x, 2.0)
    gc.collect()
    base = tp.cuda.memory_allocated()
    for k in range(3):
        x = tp.full((n,), float(k))  # the last x goes: the graph held it for the kernel it replaces
        with tp.cuda.graph(g, update=True):
            scale_into[n // 256, 256](out, x, 2.0)
        g.replay()
        assert out.tolist() == [2.0 * k] * n
        gc.collect()
        assert tp.cuda.memory_allocated() == base
    with pytest.raises(ZeroDivisionError):  # a failed update: the graph keeps what it held
        with tp.cuda.graph(g, update=True):
            scale_into[n // 256, 256](out, tp.zeros(n), 2.0)
            raise ZeroDivisionError
    del x
    gc.collect()
    assert tp.cuda.memory_allocated() == base
    other = tp.full((n,), 9.0)  # not over the x the graph reads
    g.replay()
    assert out.tolist() == [4.0] * n and other.tolist() == [9.0] * n


def test_reset_after_an_update_sees_the_tensors_of_both_captures():
    x = tp.ones(3)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        first = x * 2.0
    with tp.cuda.graph(g, update=True):
        second = x * 3.0
    del second
    with pytest.raises(RuntimeError, match=r"reset\(\) while 1 tensor\(s\) allocated during the capture are alive"):
        g.reset()
    del first
    g.reset()


def test_stage_and_launch_replays_the_updated_graph():
    x = tp.zeros(4)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x + 1.0
    g.stage_and_launch([x], [tp.ones(4)])
    assert y.tolist() == [2.0] * 4
    with tp.cuda.graph(g, update=True):
        y = x + 10.0
    g.stage_and_launch([x], [tp.ones(4)])
    assert y.tolist() == [11.0] * 4


def test_nodes_name_their_kernel_and_the_line_that_launched_it():
    x, out = tp.ones(16), tp.empty(16)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        scale_into[1, 16](out, x, 2.0)
        z = out + 1.0  # an op's kernel
    nodes = g.nodes()
    assert [n.kernel.rsplit(".", 1)[-1] for n in nodes][0] == "scale_into"
    assert len(nodes) == 2 and nodes[0].where.endswith(f"test_graph_update.py:{_line('scale_into[1, 16]')}")
    assert nodes[1].where.endswith(f"test_graph_update.py:{_line('z = out + 1.0')}")
    assert "launched at" in repr(nodes[0]) and nodes[0].grid == (1, 1, 1) and nodes[0].block == (16, 1, 1)
    g.replay()
    assert z.tolist() == [3.0] * 16


def _line(text: str) -> int:
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if text in line and "_line(" not in line)


def test_set_args_changes_one_node_for_every_later_replay():
    x, out = tp.ones(16), tp.empty(16)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        scale_into[1, 16](out, x, 2.0)
    node = g.nodes()[0]
    other = tp.arange(16, dtype=tp.float32)
    node.set_args(out, other, 0.5)  # another tensor, another scalar
    del other
    gc.collect()  # the graph keeps what it was given alive
    for _ in range(2):
        out.fill_(-1.0)
        g.replay()
        np.testing.assert_array_equal(out.numpy(), np.arange(16) * 0.5)
    g.stage_and_launch([out], [tp.zeros(16)])  # the staged copy launches the new arguments too
    np.testing.assert_array_equal(out.numpy(), np.arange(16) * 0.5)


def test_set_args_on_an_op_node_takes_tensors_of_any_shape():
    a = tp.ones(2, 3)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = a * 2.0
    (node,) = g.nodes()
    node.set_args(y, tp.full((2, 3), 4.0), 2.0)  # the flat kernel: out, operand, scalar; a contiguous tensor
    gc.collect()  # stands for its elements, and the graph keeps the tensor given alive
    tp.zeros(2, 3)  # (memory freed would be reused here)
    g.replay()
    assert y.tolist() == [[8.0] * 3] * 2


def test_an_op_node_takes_its_operands_as_addresses_and_refuses_one_not_of_the_outputs_size():
    # The flat kernels take their arrays as element pointers (8 bytes of parameters each, where an
    # array takes 56) and the output's element count, which bounds their reads: set_args takes the
    # count from the output and checks each operand against it, as the capture's shapes did.
    a, b = tp.ones(16), tp.full((16,), 2.0)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = a + b
    (node,) = g.nodes()
    params = node._launcher.pack([y, np.uint64(16), a, b])
    assert params == struct.pack("<QQQQ", y._ptr, 16, a._ptr, b._ptr)
    want = "argument 2 of .*add_aa_flat_exact was captured as a contiguous tensor of 16 float32 elements"
    for wrong, got in [
        (tp.ones(8), "a contiguous tensor of 8 float32 elements"),
        (tp.ones(32)[::2], "a non-contiguous tensor of 16 float32 elements"),
        (tp.ones(16, dtype=tp.float64), "a contiguous tensor of 16 float64 elements"),
        (2.0, "float"),
    ]:
        with pytest.raises(TypeError, match=f"{want} \\(the output's number\\); got {got}$"):
            node.set_args(y, a, wrong)
    with pytest.raises(TypeError, match="add_aa_flat_exact takes 3 arguments as captured; set_args got 4"):
        node.set_args(y, np.uint64(16), a, b)  # the count is the output's, not an argument
    with pytest.raises(TypeError, match="argument 0 of .*add_aa_flat_exact was captured as a contiguous tensor of "
                       "float32 \\(the output\\); got float"):  # fmt: skip
        node.set_args(2.0, a, b)
    with pytest.raises(TypeError, match="argument 0 of .*add_aa_flat_exact was captured as a contiguous tensor of "
                       "16 float32 elements"):  # fmt: skip
        node.set_args(tp.empty(32)[::2], a, b)
    g.replay()
    assert y.tolist() == [3.0] * 16  # nothing changed
    node.set_args(y, tp.full((4, 4), 5.0), b)  # any contiguous tensor of the output's size
    g.replay()
    assert y.tolist() == [7.0] * 16


def test_an_op_node_of_aligned_tensors_refuses_unaligned_ones_and_a_node_of_others_takes_them():
    # Aligned tensors of a multiple of four elements launch the flat kernel that moves groups of four with no
    # bounds check (flat_exact): its node refuses what would make it read or write out of place.
    a, b = tp.ones(16), tp.full((16,), 2.0)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = a + b
    (node,) = g.nodes()
    assert node.kernel.endswith("add_aa_flat_exact")
    shifted = tp.full((17,), 5.0)[1:]  # contiguous, 4 bytes past an aligned address
    with pytest.raises(TypeError, match="argument 1 not 16-byte aligned: capture the op again"):
        node.set_args(y, shifted, b)
    g.replay()
    assert y.tolist() == [3.0] * 16  # nothing changed
    # captured with the unaligned view, the node takes the general kernel and any contiguous tensors
    g2 = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g2):
        z = shifted + b
    (node2,) = g2.nodes()
    assert node2.kernel.endswith("add_aa_flat")
    node2.set_args(z, a, b)
    g2.replay()
    assert z.tolist() == [3.0] * 16


def test_set_args_on_a_strided_op_node_takes_the_count_from_its_output():
    x = tp.arange(32, dtype=tp.float32)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = x[::2] * 2.0  # the flat kernel on 1-D strided arrays: the output an array, then its count
    (node,) = g.nodes()
    other = tp.full((64,), 3.0)
    node.set_args(y, other[::4], 0.5)
    g.replay()
    assert y.tolist() == [1.5] * 16


def test_set_args_refuses_what_the_capture_cannot_take():
    x, out = tp.ones(16), tp.empty(16)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        scale_into[1, 16](out, x, 2.0)
    node = g.nodes()[0]
    with pytest.raises(TypeError, match="scale_into takes 3 arguments as captured; set_args got 2"):
        node.set_args(out, x)
    with pytest.raises(TypeError, match="argument 1 of .*scale_into was captured as a 1-d array of float32"):
        node.set_args(out, tp.ones(16, dtype=tp.int64), 2.0)
    with pytest.raises(TypeError, match="argument 2 of .*scale_into was captured as a number"):
        node.set_args(out, x, x)
    g.replay()
    assert out.tolist() == [2.0] * 16  # nothing changed
    with tp.cuda.graph(g, update=True):
        scale_into[1, 16](out, x, 3.0)
    with pytest.raises(RuntimeError, match="belongs to an earlier capture of this graph"):
        node.set_args(out, x, 2.0)
    with pytest.raises(RuntimeError, match="nodes\\(\\) needs a captured graph"):
        tp.cuda.CUDAGraph().nodes()


def test_set_args_after_an_update_in_place_edits_the_updated_executable():
    """The driver edits an executable's nodes through the nodes of the graph it
    was instantiated from, also after cuGraphExecUpdate gave it a new graph."""
    a, b, out = tp.ones(16), tp.full((16,), 3.0), tp.empty(16)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        scale_into[1, 16](out, a, 2.0)
    with tp.cuda.graph(g, update=True):
        scale_into[1, 16](out, b, 2.0)
    assert g.last_update.updated
    (node,) = g.nodes()
    node.set_args(out, b, 10.0)
    g.replay()
    assert out.tolist() == [30.0] * 16
    g.stage_and_launch([b], [tp.ones(16)])  # the staged copy is the updated graph, with the new arguments
    assert out.tolist() == [10.0] * 16
    with tp.cuda.graph(g, update=True):  # a second update, then its nodes
        scale_into[1, 16](out, a, 1.0)
    g.nodes()[0].set_args(out, b, 0.5)
    g.replay()
    assert out.tolist() == [0.5] * 16


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int32", "int64", "uint32", "bool"])
def test_set_args_packs_a_python_number_as_numpy_converts_it(dtype):
    """set_args packs Python numbers without NumPy where it can; the bytes are
    NumPy's conversion's, also for a float given for an integer (truncated) and
    for a value out of a float's range (inf)."""
    from numba.cuda import types
    from numba.cuda.np.numpy_support import from_dtype

    from tensorplay.cuda.kernel_nodes import arg_plan, pack_args
    from tensorplay.runtime.backend.params import scalar_struct

    (plan,) = arg_plan([types.boolean if dtype == "bool" else from_dtype(np.dtype(dtype))])
    values = [0, 1, 7, -3, 2.5, -0.1, True, False, 1e300, 2**40, 1 / 3]
    for v in values:
        try:
            with np.errstate(over="ignore"):
                want = scalar_struct(np.dtype(dtype)).pack(np.dtype(dtype).type(v))
        except (OverflowError, ValueError) as e:  # NumPy refuses it: so does set_args
            with pytest.raises(type(e)):
                pack_args([plan], (v,), "k")
            continue
        with np.errstate(over="ignore"):
            assert pack_args([plan], (v,), "k") == want, (dtype, v)


# The driver updates no conditional node's parameters (its kind, its number of
# bodies) nor its bodies' topology: cuGraphExecUpdate fails with
# CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, and as cuda-bindings gives no result
# info then, the driver backend names the code (the top-level node counts match).
REFUSED_CONDITIONAL = "the driver refused the update (CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE)"


def _switch_of(g, index, x, n):
    with g.switch_(index, n) as cases:
        for i in range(n):
            x[i : i + 1].add_(1.0)
            if i < n - 1:
                cases.next()


def _if_of(g, flag, x, n):
    with g.if_(flag):
        for _ in range(n):
            x[:1].add_(1.0)


def _while_of(g, flag, x, n):
    with g.while_(flag, max_iters=n):  # the loop runs its cap: the flag stays true
        x[:1].add_(1.0)


UPDATES = {  # what the first capture held -> what the second does, and x after one replay of the second
    "a 2-case switch to a 3-case one": ((_switch_of, 2), (_switch_of, 3), [0.0, 0.0, 1.0]),
    "an if node to a while node": ((_if_of, 1), (_while_of, 3), [3.0, 0.0, 0.0]),
    "an if node whose body gets another node": ((_if_of, 1), (_if_of, 2), [2.0, 0.0, 0.0]),
}


@pytest.mark.parametrize("change", list(UPDATES))
def test_a_changed_conditional_node_is_instantiated_again_as_the_driver_refuses_it(change):
    (first, n1), (second, n2), want = UPDATES[change]
    index, flag, x = tp.tensor([2]), tp.tensor([True]), tp.zeros(3)
    pred = {_switch_of: index, _if_of: flag, _while_of: flag}
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        first(g, pred[first], x, n1)
    with tp.cuda.graph(g, update=True):
        second(g, pred[second], x, n2)
    assert not g.last_update.updated and g.last_update.reason == REFUSED_CONDITIONAL
    g.replay()
    assert x.tolist() == want  # what the second capture does


# ====================================================================================
# set_args on an elementwise op's node with tensors of another size or shape: the
# node launches a grid that covers them (grown where the captured one would not), and
# refuses operands that are not of the output's shape.
# ====================================================================================


def _captured_op(fn, *inputs):
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        y = fn(*inputs)
    (node,) = g.nodes()
    return g, node, y


def _host(n, seed):
    return np.random.default_rng(seed).uniform(-3.0, 3.0, n).astype(np.float32)


def test_set_args_with_more_elements_than_an_exact_node_launched_for_writes_them_all():
    # x * 2.0 on 8 aligned elements is the flat_exact kernel: a thread per group of four, no loop,
    # on one block of 32 threads (128 elements); 1024 elements need a grid eight times as large.
    g, node, _ = _captured_op(lambda x: x * 2.0, tp.ones(8))
    assert node.kernel.endswith("mul_as_flat_exact") and node.grid[0] * node.block[0] * 4 < 1024
    src, out = _host(1024, 0), tp.zeros(1024)
    node.set_args(out, tp.tensor(src), 3.0)
    g.replay()
    np.testing.assert_allclose(out.numpy(), src.astype(np.float64) * 3.0, rtol=1e-6)
    (grown,) = g.nodes()  # the node says what it launches now
    assert grown.grid[0] * grown.block[0] * 4 >= 1024 and f"<<<{grown.grid}, {grown.block}>>>" in repr(grown)
    small, out16 = _host(16, 1), tp.zeros(16)
    node.set_args(out16, tp.tensor(small), 0.5)  # fewer elements: the larger grid's extra threads do nothing
    g.replay()
    np.testing.assert_allclose(out16.numpy(), small.astype(np.float64) * 0.5, rtol=1e-6)
    big, out2k = _host(2048, 2), tp.zeros(2048)
    static = tp.tensor(big)
    grown.set_args(out2k, static, -1.0)  # another KernelNode of the same node grows it further
    node.set_args(out2k, static, 2.0)  # and the first one launches that grid too
    g.replay()
    np.testing.assert_allclose(out2k.numpy(), big.astype(np.float64) * 2.0, rtol=1e-6)
    fresh = _host(2048, 3)
    g.stage_and_launch([static], [tp.tensor(fresh)])  # the staged copy launches the grown grid too
    np.testing.assert_allclose(out2k.numpy(), fresh.astype(np.float64) * 2.0, rtol=1e-6)


def test_set_args_with_more_elements_than_a_looping_node_launched_for_grows_its_grid():
    # 10 elements (not a multiple of four) take the flat kernel, which loops over its grid:
    # more elements are right on the captured grid, and given the grid the op would launch now.
    from tensorplay.runtime.launch import grid_1d

    g, node, _ = _captured_op(lambda x: x + 1.0, tp.ones(10))
    assert node.kernel.endswith("add_as_flat")
    src, out = _host(1000, 4), tp.zeros(1000)
    node.set_args(out, tp.tensor(src), 1.5)
    g.replay()
    np.testing.assert_allclose(out.numpy(), src.astype(np.float64) + 1.5, rtol=1e-6)
    (grown,) = g.nodes()
    assert (grown.grid, grown.block) == grid_1d(1000)


def test_set_args_on_an_exact_node_refuses_what_its_kernel_cannot_take_and_changes_nothing():
    x = tp.ones(8)  # kept: the graph reads it at each replay
    g, node, y = _captured_op(lambda x: x * 2.0, x)
    name = ".*mul_as_flat_exact"
    for args, message in [
        ((tp.zeros(6), tp.ones(6), 1.0), "6 elements, not a multiple of four: capture the op again"),
        (
            (tp.zeros(1024, dtype=tp.float64), tp.ones(1024), 1.0),
            f"argument 0 of {name} was captured as a contiguous tensor of 1024 float32 elements .* got a "
            "contiguous tensor of 1024 float64 elements",
        ),
        (
            (tp.zeros(2048)[::2], tp.ones(1024), 1.0),
            f"argument 0 of {name} .* got a non-contiguous tensor of 1024 float32 elements",
        ),
        (
            (tp.zeros(1024), tp.ones(512), 1.0),
            f"argument 1 of {name} was captured as a contiguous tensor of 1024 float32 elements .* got a "
            "contiguous tensor of 512 float32 elements",
        ),
    ]:
        with pytest.raises(TypeError, match=message):
            node.set_args(*args)
    g.replay()
    assert y.tolist() == [2.0] * 8 and node.grid == (1, 1, 1)  # nothing changed


def test_set_args_refuses_an_operand_array_not_of_the_outputs_shape():
    # Strided operands reach the kernel as arrays, indexed with the output's indices: one of
    # another shape would be read past its end.
    x = tp.arange(32, dtype=tp.float32)
    g, node, y = _captured_op(lambda x: x[::2] * 2.0, x)
    with pytest.raises(TypeError, match=r"argument 1 of .*mul_as_flat was captured as an array of the output's "
                       r"shape \(16,\); got shape \(8,\)"):  # fmt: skip
        node.set_args(y, tp.ones(64)[::8], 0.5)
    g.replay()
    np.testing.assert_array_equal(y.numpy(), np.arange(0, 32, 2) * 2.0)  # nothing changed
    # a broadcast operand is captured expanded to the output's shape: set_args takes it so
    a, b = tp.tensor(_host(80, 5).reshape(2, 40)), tp.tensor(_host(40, 6).reshape(1, 40))
    g2, node2, z = _captured_op(lambda a, b: a + b, a, b)
    with pytest.raises(TypeError, match=r"argument 2 of .*add_aa_rows2 was captured as an array of the output's "
                       r"shape \(2, 40\); got shape \(1, 40\): pass a broadcast operand expand\(\)ed"):  # fmt: skip
        node2.set_args(z, a, b)
    c = tp.tensor(_host(40, 7).reshape(1, 40))
    node2.set_args(z, a, c.expand(2, 40))
    g2.replay()
    np.testing.assert_allclose(z.numpy(), a.numpy().astype(np.float64) + c.numpy(), rtol=1e-6)
