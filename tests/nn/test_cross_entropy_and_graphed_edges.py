"""nn fixes, each against an independent reference: ``cross_entropy`` with
masked-out classes (logit -inf) against NumPy in float64, and a graphed module
whose parameter was frozen at capture and unfrozen later.
"""

from __future__ import annotations

import numpy as np
import pytest

import tensorplay as tp
import tensorplay.nn.functional as F

nn = tp.nn

_LOGITS = np.array([[2.0, -np.inf, 0.5], [0.1, 0.2, -np.inf], [-np.inf, 1.0, 3.0]])
_TARGETS = np.array([0, 1, 2])


def _reference(logits: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row losses and their gradient (softmax - one-hot), in float64."""
    shifted = logits - logits.max(1, keepdims=True)
    logp = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    rows = np.arange(len(targets))
    one_hot = np.zeros_like(logits)
    one_hot[rows, targets] = 1.0
    return -logp[rows, targets], np.exp(logp) - one_hot


def test_cross_entropy_with_a_masked_out_class_is_finite():
    loss = F.cross_entropy(tp.tensor(_LOGITS[:2]), tp.tensor(_TARGETS[:2]))
    np.testing.assert_allclose(loss.item(), 0.42290496902816166, rtol=1e-6)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_with_masked_out_classes_matches_numpy(reduction):
    losses, grad = _reference(_LOGITS, _TARGETS)
    scale = {"mean": 1 / len(_TARGETS), "sum": 1.0, "none": 1.0}[reduction]
    x = tp.tensor(_LOGITS).requires_grad_()
    loss = F.cross_entropy(x, tp.tensor(_TARGETS), reduction=reduction)
    expected = {"mean": losses.mean(), "sum": losses.sum(), "none": losses}[reduction]
    np.testing.assert_allclose(loss.detach().numpy(), expected, rtol=1e-12)
    loss.sum().backward()
    assert np.isfinite(x.grad.numpy()).all()
    np.testing.assert_allclose(x.grad.numpy(), grad * scale, rtol=1e-12, atol=1e-15)


def test_cross_entropy_with_masked_out_classes_over_extra_dimensions():
    # (N, C, d) input: the classes are dimension 1
    logits = np.stack([_LOGITS, _LOGITS[::-1]], axis=-1)  # (3, 3, 2)
    targets = np.stack([_TARGETS, _TARGETS[::-1]], axis=-1)  # (3, 2)
    expected = np.stack([_reference(logits[..., k], targets[:, k])[0] for k in range(2)], axis=-1)
    loss = F.cross_entropy(tp.tensor(logits), tp.tensor(targets), reduction="none")
    np.testing.assert_allclose(loss.numpy(), expected, rtol=1e-12)


def test_graphed_module_refuses_a_parameter_unfrozen_after_capture():
    net = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    net[0].weight.requires_grad_(False)  # frozen at capture
    graphed = tp.cuda.make_graphed_callables(net, (tp.ones(3, 2),), num_warmup_iters=1)
    net[0].weight.requires_grad_(True)
    with pytest.raises(ValueError, match=r"^parameter '0\.weight' of graphed Sequential requires grad now"):
        graphed(tp.ones(3, 2))
    with tp.no_grad():  # nothing recorded, so no gradient lost: still replays
        graphed(tp.ones(3, 2))
    net[0].weight.requires_grad_(False)  # as captured again: trains the others
    graphed(tp.ones(3, 2)).sum().backward()
    np.testing.assert_allclose(net[1].bias.grad.numpy(), [3.0])
