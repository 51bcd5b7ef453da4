"""dtrain.nn: a Module defined in Python (gradients against finite differences,
copies, state_dict into PyTorch with strict=True), built-in models by name,
and generate's determinism."""
import copy

import numpy as np
import pytest

import dtrain
F = dtrain.nn.functional


class Scaled(dtrain.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = dtrain.nn.Conv2d(1, 3, 3, padding=1)
        self.fc = dtrain.nn.Linear(3 * 2 * 2, 4)
        self.w = dtrain.nn.Parameter(np.random.default_rng(0).normal(size=(4, 4)).astype(np.float32))

    def forward(self, x):
        h = F.max_pool2d(F.tanh(self.conv(x)), 2)
        return F.linear(F.gelu(self.fc(F.flatten(h))), self.w)


def loss_of(model, x, y):
    return F.cross_entropy(model(dtrain.tensor(x)), y)


def test_module_gradients_match_finite_differences():
    dtrain.manual_seed(3)
    model = Scaled()
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 1, 4, 4)).astype(np.float32)
    y = np.array([0, 3, 1])
    model.zero_grad()
    loss_of(model, x, y).backward()
    eps = 1e-2
    for name, p in model.named_parameters():
        data, grad = np.asarray(p), np.asarray(p.grad).copy()
        for idx in [(0,) * data.ndim, tuple(s - 1 for s in data.shape)]:
            old = data[idx]
            data[idx] = old + eps
            up = loss_of(model, x, y).item()
            data[idx] = old - eps
            down = loss_of(model, x, y).item()
            data[idx] = old
            assert grad[idx] == pytest.approx((up - down) / (2 * eps), rel=0.05, abs=2e-3), (name, idx)


def test_children_and_parameters_are_registered_in_order():
    model = Scaled()
    assert [n for n, _ in model.named_parameters()] == ["w", "conv.weight", "conv.bias", "fc.weight", "fc.bias"]
    with pytest.raises(ValueError, match=r"Scaled.fc is registered already"):
        model.fc = dtrain.nn.Linear(2, 2)


def test_deepcopy_is_an_independent_replica():
    model = Scaled()
    twin = copy.deepcopy(model)
    x = np.random.default_rng(2).normal(size=(2, 1, 4, 4)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(model(dtrain.tensor(x))), np.asarray(twin(dtrain.tensor(x))))
    np.asarray(twin.fc.weight)[:] = 0
    assert np.abs(model.state_dict()["fc.weight"]).sum() > 0


def test_forward_returning_numpy_says_what_to_return():
    class Numpy(dtrain.nn.Module):
        def forward(self, x):
            return np.zeros((2, 3), np.float32)

    with pytest.raises(ValueError, match=r"Numpy.forward returned ndarray: return a dtrain Tensor"):
        Numpy()(dtrain.tensor(np.zeros((2, 4), np.float32)))


def test_load_state_dict_converts_floats_and_refuses_integers():
    model, other = Scaled(), Scaled()
    with pytest.raises(ValueError, match=r"'fc.weight' has dtype int32, the model's is float32"):
        other.load_state_dict(dict(model.state_dict(), **{"fc.weight": np.zeros((4, 12), np.int32)}))
    other.load_state_dict({k: v.astype(np.float64) for k, v in model.state_dict().items()})
    np.testing.assert_array_equal(other.state_dict()["fc.weight"], model.state_dict()["fc.weight"])


def test_state_dict_loads_into_pytorch_strict():
    torch = pytest.importorskip("torch")
    model = Scaled()

    class TorchScaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(4, 4))
            self.conv = torch.nn.Conv2d(1, 3, 3, padding=1)
            self.fc = torch.nn.Linear(12, 4)

        def forward(self, x):
            h = torch.nn.functional.max_pool2d(torch.tanh(self.conv(x)), 2)
            return torch.nn.functional.linear(torch.nn.functional.gelu(self.fc(h.flatten(1)), approximate="tanh"), self.w)

    net = TorchScaled()
    net.load_state_dict({k: torch.from_numpy(v) for k, v in model.state_dict().items()}, strict=True)
    x = np.random.default_rng(3).normal(size=(2, 1, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(net(torch.from_numpy(x)).detach().numpy(), np.asarray(model(dtrain.tensor(x))),
                               rtol=1e-4, atol=1e-5)
    # And back: torch's weights into a dtrain model.
    other = Scaled()
    other.load_state_dict({k: v.detach().numpy() for k, v in net.state_dict().items()})
    np.testing.assert_array_equal(other.state_dict()["fc.weight"], model.state_dict()["fc.weight"])
    with pytest.raises(ValueError, match=r"load_state_dict: missing key 'fc.bias'"):
        other.load_state_dict({k: v for k, v in model.state_dict().items() if k != "fc.bias"})
    with pytest.raises(ValueError, match=r"'fc.weight' has shape \[2, 2\], the model's is \[4, 12\]"):
        other.load_state_dict(dict(model.state_dict(), **{"fc.weight": np.zeros((2, 2), np.float32)}))


def test_builtin_models_by_name_and_gpt_state_into_torch_names():
    mlp = dtrain.models.build("mlp", seed=5, sample_shape=[4], classes=3)
    assert mlp.state_dict()["1.weight"].shape == (256, 4)
    again = dtrain.models.build("mlp", seed=5, sample_shape=[4], classes=3)
    np.testing.assert_array_equal(mlp.state_dict()["1.weight"], again.state_dict()["1.weight"])
    gpt = dtrain.models.build("gpt-tiny")
    state = gpt.state_dict()
    assert "lm_head.weight" in state and "transformer.h.1.attn.c_attn.weight" in state
    with pytest.raises(ValueError, match=r"unknown model|gpt-small"):
        dtrain.models.build("gpt-enormous")


def test_generate_is_deterministic_for_a_seed():
    gpt = dtrain.models.build("gpt-tiny", seed=1)
    a = dtrain.generate(gpt, "To be", max_new_tokens=20, seed=7)
    b = dtrain.generate(gpt, "To be", max_new_tokens=20, seed=7)
    c = dtrain.generate(gpt, "To be", max_new_tokens=20, seed=8)
    assert a == b and a.startswith("To be") and a != c
    with pytest.raises(ValueError, match=r"not a language model"):
        dtrain.generate(dtrain.models.build("mlp"), "x")
