"""Edge cases of the sorting, searching, set, scan, counting and random
functions, against NumPy: 0-d inputs of PyTorch's index forms, NumPy integers
where Python ints go, and the refusals inside a capture."""

import numpy as np
import pytest

import tensorplay as tp


@pytest.mark.parametrize("value", [0.0, 2.5, float("nan")])
def test_argwhere_of_a_0d_tensor_is_one_row_or_none_with_no_columns(value):
    want = np.argwhere(np.float32(value))  # (1, 0) if nonzero, else (0, 0)
    x = tp.tensor(value)
    for got in (tp.argwhere(x), x.nonzero(), tp.nonzero(x, as_tuple=False)):
        assert got.dtype is tp.int64
        assert got.shape == want.shape
    assert tp.argwhere(x, size=3, fill_value=-1).shape == (3, 0)
    with pytest.raises(ValueError, match=r"^nonzero\(\) needs a tensor of at least one dimension"):
        tp.nonzero(x)  # the standard's tuple form still refuses a 0-d tensor


def test_histogram_takes_a_numpy_integer_number_of_bins():
    a = np.array([0.0, 1.0, 1.0, 2.5, 4.0])
    hist, edges = tp.histogram(tp.tensor(a), bins=np.int64(4))
    want_hist, want_edges = np.histogram(a, bins=np.int64(4))
    np.testing.assert_array_equal(hist.numpy(), want_hist.astype(np.float64))
    np.testing.assert_array_equal(edges.numpy(), want_edges)
    with pytest.raises(ValueError, match=r"^histogram\(\) takes bins as an int >= 1"):
        tp.histogram(tp.tensor(a), bins=np.bool_(True))


@pytest.mark.parametrize(
    "call",
    [
        lambda x, i: tp.bincount(i),
        lambda x, i: tp.histc(x),
        lambda x, i: tp.histogram(x),
    ],
    ids=["bincount", "histc", "histogram"],
)
def test_data_sized_counting_refuses_a_capture_with_a_capture_error(call):
    x, i = tp.tensor([0.5, 1.5, 2.5]), tp.tensor([1, 3, 3])
    call(x, i)  # eagerly fine
    g = tp.cuda.CUDAGraph()
    with pytest.raises(tp.cuda.CaptureError, match="to size its result, which a capture cannot do"):
        with tp.cuda.graph(g):
            call(x, i)
    assert not tp.cuda.is_current_stream_capturing()
