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


def _numeric_grad(f, x, eps=1e-2):
    """Central differences of the scalar f(x) in float64 (f takes a NumPy array)."""
    g = np.zeros_like(x, dtype=np.float64)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        g[i] = (f(up) - f(down)) / (2 * eps)
    return g


@pytest.mark.parametrize("op", ["+", "-", "*"])
@pytest.mark.parametrize("shapes", [((4, 6), (6,)), ((4, 1), (1, 6)), ((2, 3, 4), (3, 1)), ((5,), (3, 1))])
def test_elementwise_ops_broadcast_as_numpy_forward_and_backward(op, shapes):
    rng = np.random.default_rng(0)
    a0, b0 = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    apply = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y}[op]
    a = dtrain.nn.Parameter(a0)
    b = dtrain.nn.Parameter(b0)
    y = apply(a, b)
    np.testing.assert_allclose(np.asarray(y), apply(a0, b0), rtol=1e-6)
    weights = rng.standard_normal(np.broadcast_shapes(*shapes)).astype(np.float32)
    (y * dtrain.tensor(weights)).sum().backward()  # a weighted sum: each output counts
    loss = lambda x, z: float((apply(x.astype(np.float64), z.astype(np.float64)) * weights).sum())
    np.testing.assert_allclose(np.asarray(a.grad), _numeric_grad(lambda x: loss(x, b0), a0), rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(np.asarray(b.grad), _numeric_grad(lambda z: loss(a0, z), b0), rtol=1e-3, atol=1e-3)
    assert a.grad.shape == a0.shape and b.grad.shape == b0.shape  # summed over broadcast axes


def test_shapes_that_do_not_broadcast_name_both():
    a = dtrain.tensor(np.zeros((32, 64), np.float32))
    with pytest.raises(ValueError, match=r"could not be broadcast together with shapes \(32,64\) \(63,\)"):
        a * dtrain.tensor(np.zeros(63, np.float32))
    np.testing.assert_array_equal(np.asarray(F.add(a, dtrain.tensor(np.ones(64, np.float32)))), np.ones((32, 64)))
