"""Module state and graphed modules at their edges, each against worked-out
numbers or NumPy in float64.

``load_state_dict`` with values over the module's own memory (entries
swapped, a transposed view of a weight); a module graphed again (after a
parameter is unfrozen, for another shape); a graphed module whose parameter
was replaced after the capture.
"""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn as nn

# -- load_state_dict reads every value before it writes any -------------------------------------


def _pair() -> nn.Module:
    m = nn.Module()
    m.a = nn.Parameter(tp.tensor([1.0, 2.0]))
    m.b = nn.Parameter(tp.tensor([3.0, 4.0]))
    return m


def test_loading_a_state_dict_with_swapped_entries_swaps_them():
    m = _pair()
    sd = m.state_dict()  # views of the module's own memory
    m.load_state_dict({"a": sd["b"], "b": sd["a"]})
    assert m.a.tolist() == [3.0, 4.0]
    assert m.b.tolist() == [1.0, 2.0]


def test_loading_a_transposed_view_of_a_weight_into_itself():
    m = nn.Module()
    m.w = nn.Parameter(tp.tensor(np.arange(9.0).reshape(3, 3)))
    m.load_state_dict({"w": m.state_dict()["w"].t()})
    np.testing.assert_array_equal(m.w.numpy(), np.arange(9.0).reshape(3, 3).T)


def test_loading_the_modules_own_state_dict_keeps_values_and_tensors():
    m = _pair()
    a, b = m.a, m.b
    m.load_state_dict(m.state_dict(keep_vars=True))
    assert m.a is a and m.b is b
    assert (m.a.tolist(), m.b.tolist()) == ([1.0, 2.0], [3.0, 4.0])


# -- a module graphed again ---------------------------------------------------------------------


def _linear(weight, bias) -> nn.Linear:
    fc = nn.Linear(2, 1)
    with tp.no_grad():
        fc.weight.copy_(tp.tensor([weight]))
        fc.bias.copy_(tp.tensor([bias]))
    return fc


def test_a_module_graphed_again_after_unfreezing_gets_every_gradient():
    fc = _linear([1.0, -2.0], 0.5)
    fc.weight.requires_grad_(False)
    tp.cuda.make_graphed_callables(fc, (tp.ones(3, 2),), num_warmup_iters=1)
    fc.weight.requires_grad_(True)
    with pytest.raises(ValueError, match=r"^parameter 'weight' of graphed Linear requires grad now"):
        fc(tp.ones(3, 2))
    tp.cuda.make_graphed_callables(fc, (tp.ones(3, 2),), num_warmup_iters=1)  # as that message advises
    x = np.array([[1.0, 2.0], [3.0, -1.0], [0.5, 0.0]])
    out = fc(tp.tensor(x, dtype=tp.float32))
    out.sum().backward()
    np.testing.assert_allclose(out.numpy()[:, 0], x @ [1.0, -2.0] + 0.5, rtol=1e-6)
    np.testing.assert_allclose(fc.weight.grad.numpy(), [x.sum(0)], rtol=1e-6)
    np.testing.assert_allclose(fc.bias.grad.numpy(), [3.0])


def test_a_module_graphed_again_for_another_shape_takes_that_shape():
    fc = _linear([2.0, 1.0], -1.0)
    tp.cuda.make_graphed_callables(fc, (tp.ones(3, 2),), num_warmup_iters=1)
    tp.cuda.make_graphed_callables(fc, (tp.ones(4, 2),), num_warmup_iters=1)
    x = np.arange(8.0).reshape(4, 2)
    out = fc(tp.tensor(x, dtype=tp.float32))
    out.sum().backward()
    np.testing.assert_allclose(out.numpy()[:, 0], x @ [2.0, 1.0] - 1.0)
    np.testing.assert_allclose(fc.weight.grad.numpy(), [x.sum(0)])
    with pytest.raises(ValueError, match=r"^graphed Linear was captured for shape \(4, 2\)"):
        fc(tp.ones(3, 2))


def test_a_failed_graphing_leaves_the_earlier_graphs_in_place():
    fc = _linear([1.0, 1.0], 0.0)
    tp.cuda.make_graphed_callables(fc, (tp.ones(3, 2),), num_warmup_iters=1)
    graphed_forward = fc.forward
    with pytest.raises(ValueError, match=r"^linear expects input of shape \(\*, 2\)"):
        tp.cuda.make_graphed_callables(fc, (tp.ones(3, 5),), num_warmup_iters=1)  # fails in the warm-up
    assert fc.forward is graphed_forward
    assert fc(tp.ones(3, 2)).tolist() == [[2.0]] * 3


# -- a parameter replaced after the capture -----------------------------------------------------


def test_a_graphed_module_refuses_a_parameter_assigned_after_capture():
    fc = _linear([1.0, 1.0], 0.0)
    tp.cuda.make_graphed_callables(fc, (tp.ones(3, 2),), num_warmup_iters=1)
    fc.weight = nn.Parameter(tp.tensor([[5.0, -1.0]]))
    with pytest.raises(ValueError, match=r"^parameter 'weight' of graphed Linear is not the tensor it was captured"):
        fc(tp.ones(3, 2))
    with tp.no_grad(), pytest.raises(ValueError, match="is not the tensor it was captured"):
        fc(tp.ones(3, 2))  # the forward alone would read the old weight too
    tp.cuda.make_graphed_callables(fc, (tp.ones(3, 2),), num_warmup_iters=1)
    out = fc(tp.ones(3, 2))
    out.sum().backward()
    assert out.tolist() == [[4.0]] * 3
    assert fc.weight.grad.tolist() == [[3.0, 3.0]]


def test_a_graphed_module_refuses_parameters_cast_after_capture():
    fc = _linear([1.0, 1.0], 0.0)
    tp.cuda.make_graphed_callables(fc, (tp.ones(3, 2),), num_warmup_iters=1)
    fc.double()
    with pytest.raises(ValueError, match=r"^parameter 'weight' of graphed Linear is not the tensor"):
        fc(tp.ones(3, 2))


def test_loading_a_state_dict_into_a_graphed_module_is_read_by_the_replay():
    fc = _linear([1.0, 1.0], 0.0)
    tp.cuda.make_graphed_callables(fc, (tp.ones(3, 2),), num_warmup_iters=1)
    fc.load_state_dict({"weight": tp.tensor([[2.0, 3.0]]), "bias": tp.tensor([-1.0])})
    assert fc(tp.ones(3, 2)).tolist() == [[4.0]] * 3
