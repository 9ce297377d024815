"""Conditional nodes set from your own kernels with values outside 32 bits:
the driver's value is an unsigned 32-bit integer, so a value is taken modulo
2**32 (-1 is 4294967295, past every case of a switch; 2**32 is 0, false),
checked against that host model."""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp

U32 = 1 << 32
VALUES = [-1, U32, U32 + 1, -U32 + 2, 1, 0]  # as int64 kernel arguments


def _as_u32(value: int) -> int:
    """What the driver's handle holds after ``set_conditional(handle, value)``."""
    return value % U32


@tp.jit
def _set_from(handle, value):
    """Sets ``handle`` to ``value[0]`` (an int64): the setter's uint32 parameter takes it modulo 2**32."""
    if tp.cuda.grid(1) == 0:
        tp.cuda.set_conditional(handle, value[0])


@tp.jit
def _again_from(x, value, loop):
    if tp.cuda.grid(1) == 0:
        x[0] += 1.0
        tp.cuda.set_conditional(loop, value[0])


def test_a_switch_runs_the_case_of_the_value_modulo_2_to_the_32():
    value, x = tp.zeros(1, dtype=tp.int64), tp.zeros(3)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        case = g.conditional_handle()
        _set_from[1, 1](case, value)
        with g.switch_(case, 3) as cases:
            for i in range(3):
                x[i : i + 1].add_(1.0)
                if i < 2:
                    cases.next()
    expect = np.zeros(3)
    for v in VALUES:
        value.fill_(v)
        g.replay()
        if _as_u32(v) < 3:  # -1 is 4294967295: no case, not the last one
            expect[_as_u32(v)] += 1
        np.testing.assert_array_equal(x.numpy(), expect, err_msg=f"set_conditional(handle, {v})")


def test_an_if_node_runs_iff_the_value_modulo_2_to_the_32_is_not_zero():
    value, hits = tp.zeros(1, dtype=tp.int64), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        flag = g.conditional_handle()
        _set_from[1, 1](flag, value)
        with g.if_(flag):
            hits.add_(1.0)
    expect = 0
    for v in VALUES:
        value.fill_(v)
        g.replay()
        expect += _as_u32(v) != 0  # 2**32 is 0: false
        assert hits.item() == expect, f"set_conditional(handle, {v})"


@pytest.mark.parametrize("v", [U32, U32 + 1, -1])
def test_a_do_while_stops_when_its_value_modulo_2_to_the_32_is_zero(v):
    value, x = tp.tensor([v]), tp.zeros(1)
    g = tp.cuda.CUDAGraph()
    with tp.cuda.graph(g):
        with g.while_(max_iters=5) as loop:  # the cap stops a loop that would never end
            _again_from[1, 1](x, value, loop)
    g.replay()
    passes = 1 if _as_u32(v) == 0 else 5
    assert x.item() == passes and loop.iterations.item() == passes and loop.hit_limit == (passes == 5)
