"""`import dtrain` from Python: configurations from dicts and TOML files, NumPy
data, training under the strategies, errors as exceptions with dtrain's lines,
and the same run as the CLI's, bitwise."""
import hashlib
import json
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import dtrain

DTRAIN = os.environ.get("DTRAIN_BIN", "build/dtrain")


def blobs(n, seed, features=4, classes=3):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % classes
    x = rng.normal(0, 0.4, size=(n, features)).astype(np.float32)
    x[np.arange(n), y % features] += 2.0
    return x, y.astype(np.int64)


def quick(**groups):
    base = {"training": {"max_steps": 60, "epochs": 100, "batch_size": 32, "seed": 5},
            "logging": {"progress": "off"}}
    for group, keys in groups.items():
        base.setdefault(group, {}).update(keys)
    return dtrain.Config(**base)


def tensors(path):
    """The data section of a safetensors file (the header names the dataset)."""
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    return hashlib.sha256(raw[8 + n:]).hexdigest()


def test_mlp_learns_numpy_arrays_with_one_and_two_workers():
    data, test = blobs(900, 1), blobs(300, 2)
    one = dtrain.train(quick(), data=data, test=test)
    two = dtrain.train(quick(training={"batch_size": 16}, parallel={"workers": 2}), data=data, test=test)
    assert one["test_accuracy"] > 0.9
    assert two["strategy"] == "allreduce" and two["workers"] == 2
    assert one["dataset"] == "memory"
    # The global-batch rule: 2 workers x 16 is the run of 1 x 32.
    assert one["train_loss"] == pytest.approx(two["train_loss"], abs=1e-4)
    assert one["config"]["training"]["batch_size"] == 32


def test_max_steps_alone_crosses_epochs():
    # 64 samples of batch 32: 2 steps an epoch; max_steps is the steps trained (README's one-liner).
    cfg = dtrain.Config(training={"max_steps": 20, "batch_size": 32}, logging={"progress": "off"})
    r = dtrain.train(cfg, data=blobs(64, 1))
    assert r["steps"] == 20 and r["epochs_completed"] == 10


def test_openmp_waits_passively_unless_the_user_chose():
    code = ("import dtrain, numpy as np\n"
            "x = np.zeros((64, 2), np.float32); y = np.zeros(64, np.int64)\n"
            "cfg = dtrain.Config(training={'max_steps': 1}, logging={'progress': 'off'})\n"
            "print(dtrain.train(cfg, data=(x, y))['omp_wait_policy'])\n")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    for policy, expected in ((None, "passive"), ("active", "active")):
        if policy:
            env["OMP_WAIT_POLICY"] = policy
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == expected


def test_same_run_as_the_cli_bitwise(tmp_path):
    x, y = blobs(640, 3)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    cli = subprocess.run([DTRAIN, "train", "--dataset", "npy", "--train-data", str(tmp_path / "x.npy"),
                          "--train-labels", str(tmp_path / "y.npy"), "--max-steps", "30", "--epochs", "100",
                          "--batch-size", "32", "--seed", "5", "--optimizer", "adam", "--lr", "0.01",
                          "--progress", "off", "--save", str(tmp_path / "cli.safetensors")],
                         capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    cfg = quick(training={"max_steps": 30}, optimizer={"name": "adam", "lr": 0.01},
                checkpoint={"save": str(tmp_path / "py.safetensors")})
    dtrain.train(cfg, data=(x, y))
    assert tensors(tmp_path / "cli.safetensors") == tensors(tmp_path / "py.safetensors")


def test_config_from_toml_and_back(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[optimizer]\nname = "adamw"\nlr = 0.002\n[parallel]\nworkers = 2\n')
    cfg = dtrain.Config.load(str(path))
    printed = cfg.to_toml()
    assert 'name = "adamw"' in printed and "workers = 2" in printed
    again = tmp_path / "again.toml"
    again.write_text(printed)
    assert dtrain.Config.load(str(again)).to_toml() == printed


def test_bad_input_raises_with_dtrains_line():
    with pytest.raises(ValueError, match=r"unknown key 'batch_sise' in 'training'; did you mean batch_size\?"):
        dtrain.Config(training={"batch_sise": 3})
    with pytest.raises(ValueError, match=r"\[training\] batch_size must be >= 1 \(got 0\)"):
        dtrain.Config(training={"batch_size": 0})
    with pytest.raises(ValueError, match=r"\[training\] epochs: expected an integer, got str"):
        dtrain.Config(training={"epochs": "3"})
    with pytest.raises(ValueError, match=r"\[ps\] servers does not apply to --strategy single"):
        dtrain.train(quick(ps={"servers": 2}), data=blobs(64, 1))
    with pytest.raises(ValueError, match=r"labels must be integers"):
        dtrain.train(quick(), data=(np.zeros((8, 2), np.float32), np.zeros(8, np.float32)))
    with pytest.raises(ValueError, match=r"same N"):
        dtrain.train(quick(), data=(np.zeros((8, 2), np.float32), np.zeros(7, np.int64)))
    with pytest.raises(ValueError, match=r"did you mean \[ps\] servers or \[sandblaster\] servers\?"):
        dtrain.Config(parallel={"servers": 1})
    with pytest.raises(ValueError, match=r"\[training\] threads: expected an integer or \"auto\", got str"):
        dtrain.Config(training={"threads": "many"})
    nan = np.zeros((8, 2), np.float32)
    nan[5, 1] = np.nan
    with pytest.raises(ValueError, match=r"sample 5 holds NaN at feature 1 \(flat index 11\); input features "
                                         r"must be finite"):
        dtrain.train(quick(), data=(nan, np.zeros(8, np.int64)))


def test_models_lists_the_registry():
    assert {"mlp", "lenet", "gpt-tiny"} <= set(dtrain.models.names())


def test_checkpoints_both_ways_and_into_pytorch(tmp_path):
    torch = pytest.importorskip("torch")
    x, y = blobs(320, 4)
    path = str(tmp_path / "mlp.safetensors")
    dtrain.train(quick(training={"max_steps": 10}, checkpoint={"save": path}), data=(x, y))
    state = dtrain.load(path)
    model_keys = {k: v for k, v in state.items() if not k.startswith("optimizer.")}
    assert model_keys["1.weight"].shape == (256, 4) and model_keys["5.weight"].shape == (3, 256)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(4, 256), torch.nn.ReLU(),
                              torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 3))
    net.load_state_dict({k: torch.from_numpy(v) for k, v in model_keys.items()}, strict=True)
    # The other way: weights from Python start a dtrain run (its step 0 is theirs).
    edited = dict(model_keys)
    edited["5.bias"] = np.array([0.0, 0.0, 7.0], dtype=np.float32)
    start = str(tmp_path / "start.safetensors")
    dtrain.save(start, edited)
    back = dtrain.load(start)
    np.testing.assert_array_equal(back["5.bias"], edited["5.bias"])
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    r = subprocess.run([DTRAIN, "train", "--dataset", "npy", "--train-data", str(tmp_path / "x.npy"),
                        "--train-labels", str(tmp_path / "y.npy"), "--max-steps", "2", "--progress", "off",
                        "--load", start, "--save", str(tmp_path / "after.safetensors")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert dtrain.load(str(tmp_path / "after.safetensors"))["5.bias"][2] > 5.0  # started from 7
    with pytest.raises(ValueError, match="dtype"):
        dtrain.save(str(tmp_path / "bad.safetensors"), {"a": np.array(["x"])})


def test_mpirun_with_two_processes(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(
        "import json, numpy as np, dtrain\n"
        "rng = np.random.default_rng(1)\n"
        "x = rng.normal(size=(512, 4)).astype(np.float32); y = (x[:, 0] > 0).astype(np.int64)\n"
        "cfg = dtrain.Config(parallel={'backend': 'mpi'}, training={'max_steps': 20, 'epochs': 50, 'batch_size': 16},"
        " logging={'progress': 'off'})\n"
        "r = dtrain.train(cfg, data=(x, y))\n"
        "if r is not None: print(json.dumps({'workers': r['workers'], 'backend': r['backend']}))\n")
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    out = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", sys.executable, str(script)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]
    assert lines == [{"workers": 2, "backend": "mpi"}]


def test_ctrl_c_saves_then_raises_keyboard_interrupt(tmp_path):
    """A SIGINT while C++ trains (DTRAIN_STOP_AT_STEP raises it after step 7, as a
    Ctrl-C would): the step finishes, the checkpoint is written, then
    KeyboardInterrupt; resuming ends bitwise where an uninterrupted run does."""
    x, y = blobs(512, 1)
    ckpt = str(tmp_path / "ckpt")
    code = (
        "import os, sys, numpy as np, dtrain\n"
        "sys.path.insert(0, %r)\n"
        "from test_dtrain import blobs, quick\n"
        "x, y = blobs(512, 1)\n"
        "try:\n"
        "    dtrain.train(quick(checkpoint={'dir': %r}), (x, y))\n"
        "    print('finished')\n"
        "except KeyboardInterrupt as e:\n"
        "    print('KeyboardInterrupt:', e)\n" % (os.path.dirname(__file__), ckpt))
    env = dict(os.environ, DTRAIN_STOP_AT_STEP="7")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "KeyboardInterrupt: stopped by SIGINT after step 7: checkpoint " in out.stdout, out.stdout
    assert sorted(os.listdir(ckpt)) == ["latest.safetensors", "step-000000007.safetensors"]
    straight = str(tmp_path / "straight.safetensors")
    resumed = str(tmp_path / "resumed.safetensors")
    dtrain.train(quick(checkpoint={"save": straight}), (x, y))
    dtrain.train(quick(checkpoint={"save": resumed, "dir": ckpt, "resume": "auto"}), (x, y))
    assert tensors(resumed) == tensors(straight)


def test_ctrl_c_leaves_the_stopped_step_in_the_model_and_its_file():
    """A run of the script's model stopped after step 5 (no [checkpoint] given):
    the temporary checkpoint the message names is kept and its parameters are
    the model's, not the initial ones."""
    code = (
        "import os, re, sys, numpy as np, dtrain\n"
        "sys.path.insert(0, %r)\n"
        "from test_dtrain import blobs, quick\n"
        "x, y = blobs(512, 1)\n"
        "model = dtrain.models.build('mlp', seed=5, sample_shape=[4], classes=3)\n"
        "before = model.state_dict()['1.weight'].copy()\n"
        "try:\n"
        "    dtrain.train(model, (x, y), config=quick())\n"
        "except KeyboardInterrupt as e:\n"
        "    path = re.search(r'checkpoint (\\S+\\.safetensors)', str(e)).group(1)\n"
        "    saved = dtrain.load(path)['1.weight']\n"
        "    now = model.state_dict()['1.weight']\n"
        "    print(str(e).endswith(\"the model holds that step's parameters\"),"
        " np.array_equal(saved, now), not np.array_equal(before, now))\n"
        "    os.remove(path)\n" % os.path.dirname(__file__))
    env = dict(os.environ, DTRAIN_STOP_AT_STEP="5")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "True"], out.stdout + out.stderr


def test_on_metrics_gets_a_curve_by_default():
    records = []
    dtrain.train(quick(training={"max_steps": 30}), data=blobs(256, 1), on_metrics=records.append)
    assert [r["step"] for r in records if "loss" in r] == [10, 20, 30]
    records.clear()  # [logging] log_every, when given, wins
    dtrain.train(quick(training={"max_steps": 30}, logging={"log_every": 15}), data=blobs(256, 1),
                 on_metrics=records.append)
    assert [r["step"] for r in records if "loss" in r] == [15, 30]
