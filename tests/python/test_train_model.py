"""dtrain.train(model, ...): a script's model trained under the strategies
(threads, a pipeline, mpirun), the same run as the CLI's, on_metrics, and the
refusals."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import dtrain
from test_dtrain import DTRAIN, blobs, quick
F = dtrain.nn.functional


class TwoLayer(dtrain.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = dtrain.nn.Linear(4, 32)
        self.fc2 = dtrain.nn.Linear(32, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def mlp_sequential():
    return dtrain.nn.Sequential(dtrain.nn.Flatten(), dtrain.nn.Linear(4, 256), dtrain.nn.ReLU(),
                                dtrain.nn.Linear(256, 256), dtrain.nn.ReLU(), dtrain.nn.Linear(256, 3))


def test_sequential_two_workers_equals_the_cli_run(tmp_path):
    x, y = blobs(640, 3)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    cli = subprocess.run([DTRAIN, "train", "--dataset", "npy", "--train-data", str(tmp_path / "x.npy"),
                          "--train-labels", str(tmp_path / "y.npy"), "--max-steps", "30", "--epochs", "100",
                          "--batch-size", "16", "--workers", "2", "--seed", "5", "--optimizer", "adam",
                          "--lr", "0.01", "--progress", "off", "--save", str(tmp_path / "cli.safetensors")],
                         capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    model = mlp_sequential()  # the mlp's layers, with the CLI's initial weights for seed 5
    model.load_state_dict(dtrain.models.build("mlp", seed=5, sample_shape=[4], classes=3).state_dict())
    cfg = quick(training={"max_steps": 30, "batch_size": 16}, optimizer={"name": "adam", "lr": 0.01},
                parallel={"workers": 2})
    result = dtrain.train(model, data=(x, y), config=cfg)
    assert result["workers"] == 2
    saved = dtrain.load(str(tmp_path / "cli.safetensors"))
    mine = model.state_dict()
    assert set(mine) == {k for k in saved if not k.startswith("optimizer.")}
    for name, value in mine.items():
        np.testing.assert_array_equal(value, saved[name], err_msg=name)


def test_python_module_trains_with_two_workers_and_reports_metrics():
    data, test = blobs(900, 1), blobs(300, 2)
    model = TwoLayer()
    before = model.state_dict()
    records = []
    cfg = quick(parallel={"workers": 2}, training={"batch_size": 16}, logging={"log_every": 10})
    result = dtrain.train(model, data=data, test=test, config=cfg, on_metrics=records.append)
    assert result["test_accuracy"] > 0.9 and result["strategy"] == "allreduce"
    assert not np.array_equal(before["fc1.weight"], model.state_dict()["fc1.weight"])
    # The trained parameters are the model's now: its own accuracy on the test set.
    logits = np.asarray(model(dtrain.tensor(test[0])))
    assert (logits.argmax(1) == test[1]).mean() == pytest.approx(result["test_accuracy"], abs=1e-6)
    steps = [r["step"] for r in records if "loss" in r]
    assert steps == list(range(10, 61, 10)) and "test_accuracy" in records[-1]


def test_sequential_under_a_pipeline_and_a_python_forward_refused():
    data, test = blobs(600, 1), blobs(200, 2)
    cfg = quick(parallel={"strategy": "pipeline", "pipeline_stages": 2})
    result = dtrain.train(mlp_sequential(), data=data, test=test, config=cfg)
    assert result["strategy"] == "pipeline" and result["test_accuracy"] > 0.9
    with pytest.raises(ValueError, match=r"not a sequence of layers"):
        dtrain.train(TwoLayer(), data=data, config=cfg)
    with pytest.raises(ValueError, match=r"TwoLayer: tensor parallelism cuts a sequence of layers"):
        dtrain.train(TwoLayer(), data=data, config=quick(parallel={"workers": 2, "tensor_parallel": 2}))


def test_bad_calls_raise():
    with pytest.raises(ValueError, match=r"expected a dtrain.nn module or a dtrain.Config"):
        dtrain.train("mlp")
    with pytest.raises(ValueError, match=r"on_metrics: expected a callable"):
        dtrain.train(TwoLayer(), data=blobs(64, 1), config=quick(), on_metrics=3)
    def raising(record):
        raise KeyError("boom")
    with pytest.raises(RuntimeError, match=r"^on_metrics raised KeyError: 'boom'$"):
        dtrain.train(TwoLayer(), data=blobs(600, 1), config=quick(parallel={"workers": 2}, logging={"log_every": 10}),
                     on_metrics=raising)
    with pytest.raises(ValueError, match=r"n_layer"):
        dtrain.train(TwoLayer(), data=blobs(64, 1), config=quick(model={"n_layer": 2}))


def test_mpirun_two_processes_train_a_python_model(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(
        "import json, numpy as np, dtrain\n"
        "F = dtrain.nn.functional\n"
        "class Net(dtrain.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__(); self.a = dtrain.nn.Linear(4, 16); self.b = dtrain.nn.Linear(16, 2)\n"
        "    def forward(self, x): return self.b(F.relu(self.a(x)))\n"
        "rng = np.random.default_rng(1)\n"
        "x = rng.normal(size=(512, 4)).astype(np.float32); y = (x[:, 0] > 0).astype(np.int64)\n"
        "model = Net(); before = model.state_dict()['a.weight'].copy()\n"
        "cfg = dtrain.Config(parallel={'backend': 'mpi'}, training={'max_steps': 40, 'epochs': 50, 'batch_size': 16},"
        " optimizer={'name': 'adam', 'lr': 0.01}, logging={'progress': 'off'})\n"
        "r = dtrain.train(model, data=(x, y), test=(x[:128], y[:128]), config=cfg)\n"
        "if r is not None:\n"
        "    print(json.dumps({'workers': r['workers'], 'backend': r['backend'], 'acc': r['test_accuracy'],\n"
        "                      'changed': bool((model.state_dict()['a.weight'] != before).any())}))\n")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", sys.executable, str(script)],
                         capture_output=True, text=True, env=env, timeout=180)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    assert len(lines) == 1 and lines[0]["workers"] == 2 and lines[0]["backend"] == "mpi"
    assert lines[0]["changed"] and lines[0]["acc"] > 0.9


STRATEGIES = {
    "single": quick(),
    "allreduce": quick(parallel={"workers": 2}),
    "zero-3": quick(parallel={"workers": 2}, memory={"zero": 3}),
    "ps": quick(parallel={"strategy": "ps", "workers": 2}),
    "hogwild": quick(parallel={"strategy": "hogwild", "workers": 2}),
    "local-sgd": quick(parallel={"strategy": "local-sgd", "workers": 2}),
    "sandblaster": quick(parallel={"strategy": "sandblaster", "workers": 2}, optimizer={"name": "lbfgs"},
                         training={"max_steps": 10}),
    "fedavg": dtrain.Config(parallel={"strategy": "fedavg", "workers": 2}, federated={"rounds": 3},
                            logging={"progress": "off"}),
}


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
@pytest.mark.parametrize("make", [TwoLayer, mlp_sequential], ids=["python-forward", "sequential"])
def test_every_strategy_trains_a_script_model(strategy, make):
    data, test = blobs(600, 1), blobs(200, 2)
    model = make()
    before = model.state_dict()
    records = []
    result = dtrain.train(model, data=data, test=test, config=STRATEGIES[strategy], on_metrics=records.append)
    assert any("test_accuracy" in r for r in records)  # on_metrics saw the evaluation
    assert result["strategy"] == ("allreduce" if strategy == "zero-3" else strategy)
    after = model.state_dict()
    assert any(not np.array_equal(before[k], after[k]) for k in before)  # the trained weights came back
    logits = np.asarray(model.eval()(dtrain.tensor(test[0])))
    assert (logits.argmax(1) == test[1]).mean() == pytest.approx(result["test_accuracy"], abs=1e-6)


class Residual(dtrain.nn.Module):
    """x + fc(x): a Python-defined layer inside a Sequential."""

    def __init__(self, width):
        super().__init__()
        self.fc = dtrain.nn.Linear(width, width)

    def forward(self, x):
        return x + F.relu(self.fc(x))


def test_sequential_holding_a_python_layer_trains_with_two_workers():
    model = dtrain.nn.Sequential(dtrain.nn.Linear(4, 16), Residual(16), dtrain.nn.Linear(16, 3))
    assert [n for n, _ in model.named_parameters()] == ["0.weight", "0.bias", "1.fc.weight", "1.fc.bias",
                                                        "2.weight", "2.bias"]
    before = model[1].state_dict()["fc.weight"]
    result = dtrain.train(model, data=blobs(600, 1), test=blobs(200, 2), config=quick(parallel={"workers": 2}))
    assert result["test_accuracy"] > 0.9
    assert not np.array_equal(before, model[1].state_dict()["fc.weight"])
