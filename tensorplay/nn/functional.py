"""Functional forms of the layers and losses, built from tensor ops.

Everything here is a composite of differentiable primitives (``exp``, ``log``,
``sum``, ``max``, ``matmul``, ``*``...): the gradients come from those, so this
file holds no gradient code. ``linear`` and ``mse_loss`` are primitives of
their own there (one autograd node each, the most common of a training
step). Inputs are checked with a sentence that names the function and prints
the shapes involved.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _differentiable as AG
from .._differentiable import tracked
from .._dtype import bfloat16, float16, float32, promote
from .._factories import arange
from .._functions import where
from .._indexing_functions import index_select
from .._manipulation_functions import pad
from .._matmul import linear as _linear
from .._random import dropout as _dropout
from .._tensor import Tensor

__all__ = [
    "cross_entropy", "dropout", "embedding", "gelu", "layer_norm", "linear", "log_softmax", "mse_loss", "pad", "relu",
    "sigmoid", "silu", "softmax", "softplus", "tanh",
]  # fmt: skip

REDUCTIONS = ("mean", "sum", "none")
_CLASS_INDICES: dict[int, Tensor] = {}  # 0..C-1 on the device, made once per C (a capture cannot copy from the host)


def _check_tensor(fn: str, what: str, x) -> None:
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn} expects a Tensor as {what}, got {type(x).__name__}")


def _check_float(fn: str, what: str, x) -> None:
    _check_tensor(fn, what, x)
    if not x.dtype.is_floating_point:
        raise TypeError(f"{fn} expects a floating point tensor as {what}, got {x.dtype.name}")


def check_reduction(fn: str, reduction) -> None:
    """ValueError unless ``reduction`` is "mean", "sum" or "none"."""
    if not isinstance(reduction, str) or reduction not in REDUCTIONS:
        raise ValueError(f"{fn} expects reduction 'mean', 'sum' or 'none', got {reduction!r}")


def _reduce(loss: Tensor, reduction: str) -> Tensor:
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    return loss


def relu(x: Tensor) -> Tensor:
    """``max(x, 0)`` elementwise.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> F.relu(tp.tensor([-1.0, 2.0])).tolist()
    [0.0, 2.0]
    """
    _check_tensor("relu", "input", x)
    return x.relu()


def tanh(x: Tensor) -> Tensor:
    """The hyperbolic tangent elementwise.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> F.tanh(tp.tensor([0.0])).tolist()
    [0.0]
    """
    _check_tensor("tanh", "input", x)
    return x.tanh()


def sigmoid(x: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))`` elementwise.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> F.sigmoid(tp.tensor([0.0])).tolist()
    [0.5]
    """
    _check_tensor("sigmoid", "input", x)
    return x.sigmoid()


def dropout(x: Tensor, p: float = 0.5, training: bool = True) -> Tensor:
    """Each element zeroed with probability ``p``, the others scaled by
    ``1 / (1 - p)``, while ``training``; ``x`` itself otherwise.

    The mask is a draw of the random generator (``tp.manual_seed``): a fresh
    one at every call, and at every replay of a graph that captured the call.
    One kernel draws, masks and scales; the gradient is the mask, scaled.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> y = F.dropout(tp.ones(1000), p=0.25).numpy()
    >>> sorted(set(y.tolist())) == [0.0, float(tp.tensor(1 / 0.75))]  # dropped, or kept and scaled
    True
    >>> F.dropout(tp.ones(3), training=False).tolist()
    [1.0, 1.0, 1.0]
    """
    _check_float("dropout", "input", x)
    p = _dropout_probability(p)
    if not training or p == 0:
        return x
    if p == 1:
        return x * 0.0
    return _dropout(x, p)


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``x @ weight.T + bias``: an affine map of the last dimension.

    Parameters
    ----------
    x : Tensor
        Shape ``(*, in_features)``.
    weight : Tensor
        Shape ``(out_features, in_features)``.
    bias : Tensor, optional
        Shape ``(out_features,)``.

    Returns
    -------
    Tensor
        Shape ``(*, out_features)``.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> w = tp.tensor([[1.0, 2.0], [0.0, 1.0], [1.0, 0.0]])
    >>> F.linear(tp.tensor([[1.0, 1.0]]), w, tp.tensor([0.0, 0.5, -1.0])).tolist()
    [[3.0, 1.5, 0.0]]
    """
    _check_tensor("linear", "input", x)
    _check_tensor("linear", "weight", weight)
    if weight.ndim != 2:
        raise ValueError(f"linear expects a weight of shape (out_features, in_features), got shape {weight.shape}")
    if x.ndim == 0 or x.shape[-1] != weight.shape[1]:
        raise ValueError(
            f"linear expects input of shape (*, {weight.shape[1]}) for a weight of shape {weight.shape}, "
            f"got input of shape {x.shape}"
        )
    if bias is not None:
        _check_tensor("linear", "bias", bias)
        if bias.shape != (weight.shape[0],):
            raise ValueError(
                f"linear expects a bias of shape ({weight.shape[0]},) for a weight of shape {weight.shape}, "
                f"got bias of shape {bias.shape}"
            )
    if tracked(x) or tracked(weight) or tracked(bias):
        return AG.linear(x, weight, bias)
    return _linear(x, weight, bias)


def _empty_along(x: Tensor, dim: int) -> bool:
    """Whether ``x`` has no elements along ``dim`` (checked as a dimension of
    ``x``): then a softmax over it is empty too, as in PyTorch, while the max
    it subtracts for stability has no value to take."""
    return x.ndim > 0 and x.shape[x._dim(dim)] == 0


def softmax(x: Tensor, dim: int) -> Tensor:
    """``exp(x) / exp(x).sum(dim)``, computed stably (the max of ``dim`` is
    subtracted first).

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> F.softmax(tp.tensor([[0.0, 0.0], [1000.0, 1000.0]]), dim=1).tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    """
    _check_float("softmax", "input", x)
    if _empty_along(x, dim):
        return x.clone()
    e = (x - x.amax(dim, keepdim=True).detach()).exp()
    return e / e.sum(dim, keepdim=True)


def log_softmax(x: Tensor, dim: int) -> Tensor:
    """``log(softmax(x, dim))`` computed as ``x - max - log(sum(exp(x - max)))``,
    finite even where ``softmax`` underflows to 0.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> F.log_softmax(tp.tensor([0.0, 0.0]), dim=0).exp().tolist()
    [0.5, 0.5]
    """
    _check_float("log_softmax", "input", x)
    if _empty_along(x, dim):
        return x.clone()
    shifted = x - x.amax(dim, keepdim=True).detach()
    return shifted - shifted.exp().sum(dim, keepdim=True).log()


def mse_loss(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002 (PyTorch's name)
    """The squared error ``(input - target) ** 2``, averaged (``"mean"``), summed
    (``"sum"``) or elementwise (``"none"``).

    ``input`` and ``target`` must have the same shape: a silent broadcast of
    ``(N, 1)`` against ``(N,)`` is a classic bug, so it is an error here.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> F.mse_loss(tp.tensor([1.0, 2.0]), tp.tensor([0.0, 0.0])).item()
    2.5
    """
    check_reduction("mse_loss", reduction)
    _check_float("mse_loss", "input", input)
    _check_tensor("mse_loss", "target", target)
    if input.shape != target.shape:
        raise ValueError(
            f"mse_loss expects input and target of the same shape, got input {input.shape} and target {target.shape}"
        )
    if tracked(input) or tracked(target):
        return AG.mse_loss(input, target, reduction)
    diff = input - target
    return _reduce(diff * diff, reduction)


def _class_indices(n: int) -> Tensor:
    classes = _CLASS_INDICES.get(n)
    if classes is None:
        classes = _CLASS_INDICES[n] = arange(n)
    return classes


def cross_entropy(input: Tensor, target: Tensor, reduction: str = "mean") -> Tensor:  # noqa: A002
    """The negative log-likelihood of the target classes under
    ``log_softmax(input)`` over the class dimension.

    Parameters
    ----------
    input : Tensor
        Unnormalised scores (logits), floating point: ``(C,)``, ``(N, C)`` or
        ``(N, C, d1, ...)``; the classes are dimension 1 (0 for 1-D input).
    target : Tensor
        Integer class indices in ``[0, C)``: ``()``, ``(N,)`` or ``(N, d1, ...)``.
        Indices are not range-checked (that would need a host sync); one out
        of range picks no class and adds 0 to the loss.
    reduction : {"mean", "sum", "none"}
        ``"none"`` gives one loss per target element.

    Notes
    -----
    The target classes are picked by comparing ``target.unsqueeze(-1)`` with
    the class indices ``0..C-1``, which are copied to the device the first time
    each ``C`` is seen: warm up before capturing a graph that calls this.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> logits = tp.tensor([[0.0, 0.0], [0.0, 0.0]])
    >>> round(F.cross_entropy(logits, tp.tensor([0, 1])).item(), 4)  # log(2)
    0.6931
    """
    check_reduction("cross_entropy", reduction)
    _check_float("cross_entropy", "input", input)
    _check_tensor("cross_entropy", "target", target)
    if target.dtype.kind != "i":
        hint = " (class probabilities are not supported)" if target.dtype.is_floating_point else ""
        raise TypeError(f"cross_entropy expects target of integer class indices (int64), got {target.dtype.name}{hint}")
    if input.ndim == 0:
        raise ValueError("cross_entropy expects input with a class dimension, got a 0-d tensor")
    class_dim = 1 if input.ndim >= 2 else 0
    expected = input.shape[:1] + input.shape[2:] if input.ndim >= 2 else ()
    if target.shape != expected:
        raise ValueError(
            f"cross_entropy expects target of shape {expected} for input of shape {input.shape} "
            f"(classes in dimension {class_dim}), got target of shape {target.shape}"
        )
    logp = log_softmax(input, class_dim)
    if input.ndim > 2:  # classes last, to line up with target.unsqueeze(-1)
        logp = logp.permute(0, *range(2, input.ndim), 1)
    # where(), not a product with a 0/1 mask: a masked-out class (logit -inf)
    # has log-probability -inf, and -inf * 0 would make the loss NaN.
    is_target = target.unsqueeze(-1) == _class_indices(input.shape[class_dim])
    return _reduce(-where(is_target, logp, 0.0).sum(-1), reduction)


def _dropout_probability(p) -> float:
    """``p`` as a float from 0 to 1 (a Python or NumPy real number), else a sentence."""
    if isinstance(p, (bool, np.bool_)) or not isinstance(p, (int, float, np.integer, np.floating)):
        raise TypeError(f"expected the dropout probability as a number from 0 to 1, got {type(p).__name__}")
    if not 0 <= p <= 1:  # NaN too
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p!r}")
    return float(p)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """``x * Phi(x)``, Phi the standard normal's distribution function:
    ``0.5 x (1 + erf(x / sqrt(2)))``, or with ``approximate="tanh"``
    ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``, as PyTorch.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> [round(v, 4) for v in F.gelu(tp.tensor([-1.0, 0.0, 1.0])).tolist()]
    [-0.1587, 0.0, 0.8413]
    """
    _check_float("gelu", "input", x)
    if approximate == "none":
        return x * 0.5 * (1.0 + (x * (1.0 / math.sqrt(2.0))).erf())
    if approximate == "tanh":
        return x * 0.5 * (1.0 + ((x + x * x * x * 0.044715) * math.sqrt(2.0 / math.pi)).tanh())
    raise ValueError(f"gelu expects approximate 'none' or 'tanh', got {approximate!r}")


def silu(x: Tensor) -> Tensor:
    """``x * sigmoid(x)`` elementwise (also called swish).

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> [round(v, 4) for v in F.silu(tp.tensor([-1.0, 0.0, 1.0])).tolist()]
    [-0.2689, 0.0, 0.7311]
    """
    _check_float("silu", "input", x)
    return x * x.sigmoid()


def softplus(x: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta x)) / beta``, and ``x`` itself where ``beta x > threshold``
    (where the two agree to float precision), as PyTorch.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> [round(v, 4) for v in F.softplus(tp.tensor([-1.0, 0.0, 30.0])).tolist()]
    [0.3133, 0.6931, 30.0]
    """
    _check_float("softplus", "input", x)
    scaled = x * beta
    big = scaled > threshold
    return where(big, x, where(big, 0.0, scaled).exp().log1p() * (1.0 / beta))


def layer_norm(
    x: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5
) -> Tensor:
    """Normalise over the last ``len(normalized_shape)`` dimensions: subtract
    their mean, divide by ``sqrt(var + eps)`` (the biased variance), then scale
    by ``weight`` and shift by ``bias``, as PyTorch.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> [round(v, 4) for v in F.layer_norm(tp.tensor([[1.0, 2.0, 3.0]]), (3,)).tolist()[0]]
    [-1.2247, 0.0, 1.2247]
    """
    _check_float("layer_norm", "input", x)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    if tuple(x.shape[len(x.shape) - len(shape) :]) != shape or len(shape) > len(x.shape):
        raise ValueError(
            f"layer_norm expects an input whose last dimensions are normalized_shape {shape}, "
            f"got shape {tuple(x.shape)}"
        )
    out_dtype = x.dtype
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != shape:
            raise ValueError(f"layer_norm expects {name} of shape {shape}, got {tuple(p.shape)}")
        if p is not None:
            out_dtype = promote(out_dtype, p.dtype)
    # Half inputs are normalised in float32, as PyTorch: in float16 the squared
    # deviations overflow once |x - mean| > 256 (and bfloat16 keeps 8 bits).
    work = x.to(float32) if x.dtype in (float16, bfloat16) else x
    dims = tuple(range(len(x.shape) - len(shape), len(x.shape)))
    centred = work - work.mean(dims, True)
    y = centred / ((centred * centred).mean(dims, True) + eps).sqrt()
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y if y.dtype is out_dtype else y.to(out_dtype)


def embedding(input: Tensor, weight: Tensor) -> Tensor:  # noqa: A002 (PyTorch's name)
    """The rows of ``weight`` (num_embeddings, embedding_dim) that the integer
    tensor ``input`` names: shape ``input.shape + (embedding_dim,)``; the
    gradient adds into the rows named.

    Examples
    --------
    >>> import tensorplay as tp
    >>> import tensorplay.nn.functional as F
    >>> F.embedding(tp.tensor([[2, 0]]), tp.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])).tolist()
    [[[4.0, 5.0], [0.0, 1.0]]]
    """
    _check_tensor("embedding", "input", input)
    _check_tensor("embedding", "weight", weight)
    if input.dtype.is_floating_point or len(weight.shape) != 2:
        raise TypeError(
            f"embedding expects an integer index tensor and a 2-D weight, got {input.dtype.name} indices "
            f"and a weight of shape {tuple(weight.shape)}"
        )
    rows = index_select(weight, 0, input.reshape(-1))
    return rows.reshape(tuple(input.shape) + (weight.shape[1],))
