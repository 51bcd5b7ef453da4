"""dtrain.Tensor and NumPy: shared memory where the layout allows, copies where
it does not, and dtype/shape errors as ValueError with dtrain's line."""
import numpy as np
import pytest

import dtrain
F = dtrain.nn.functional


def test_float32_c_contiguous_is_shared_both_ways():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = dtrain.tensor(a)
    view = np.asarray(t)
    assert np.shares_memory(a, view) and view.shape == (3, 4)
    a[1, 2] = 42.0  # the tensor sees the array's memory
    assert np.asarray(t)[1, 2] == 42.0
    assert t.shape == (3, 4) and t.dtype == "float32"


def test_other_layouts_and_dtypes_are_copied():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = dtrain.tensor(a)
    assert t.dtype == "float32" and not np.shares_memory(a, np.asarray(t))
    np.testing.assert_array_equal(np.asarray(t), a.astype(np.float32))
    b = np.arange(12, dtype=np.float32).reshape(3, 4).T  # not C-contiguous
    np.testing.assert_array_equal(np.asarray(dtrain.tensor(b)), b)
    assert dtrain.tensor(np.array([1, 2, 3])).dtype == "int32"


def test_op_outputs_and_gradients_are_views():
    w = dtrain.nn.Parameter(np.ones((2, 3), np.float32))
    x = dtrain.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    y = F.linear(x, w)
    np.testing.assert_allclose(np.asarray(y), np.arange(6).reshape(2, 3) @ np.ones((3, 2)))
    y.sum().backward()
    g = np.asarray(w.grad)
    np.testing.assert_allclose(g, np.tile(np.arange(6).reshape(2, 3).sum(0), (2, 1)))
    assert np.shares_memory(g, np.asarray(w.grad))


def test_bad_input_raises_value_error_with_dtrains_line():
    with pytest.raises(ValueError, match=r"dtrain.tensor: expected a float or integer array \(got dtype <U1\)"):
        dtrain.tensor(np.array(["x"]))
    with pytest.raises(ValueError, match=r"got dtype object"):
        dtrain.tensor(object())
    a = dtrain.tensor(np.zeros((2, 3), np.float32))
    b = dtrain.tensor(np.zeros((4, 5), np.float32))
    with pytest.raises(ValueError, match=r"\[2, 3\]"):
        F.matmul(a, b)
    with pytest.raises(ValueError, match=r"labels"):
        F.cross_entropy(a, np.zeros(2, np.float32))
