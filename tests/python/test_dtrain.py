"""`import dtrain` from Python: configurations from dicts and TOML files, NumPy
data, training under the strategies, errors as exceptions with dtrain's lines,
and the same run as the CLI's, bitwise."""
import hashlib
import json
import os
import struct
import subprocess

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


def test_models_lists_the_registry():
    assert {"mlp", "lenet", "gpt-tiny"} <= set(dtrain.models())
