"""The same network, data and configuration trained from Python and from the
CLI: samples/s (the result line's, training steps only) for
  builtin   dtrain.train(Config(model mlp|lenet))          vs  dtrain train --model mlp|lenet
  seq       dtrain.train(Sequential(the mlp's layers), ...) vs  dtrain train --model mlp
  module    dtrain.train(a Module whose forward is Python)  vs  dtrain train --model mlp
on Fashion-MNIST, 1 worker, 1 thread. Runs alternate (CLI, then each Python
form, then PyTorch's torch_train.py with --torch) and the table gives medians.
The Python forward's own cost is timed directly: a forward of the Module minus
one of the Sequential with the same layers (the fastest of 15 rounds each, so
that the other work on a shared machine counts least).
    PYTHONPATH=build/python /usr/bin/python3 bench/python_vs_cli.py [--reps 5] [--steps 600] [--batch 64]
        [--torch ../shared/bench/torch_train.py]"""
import argparse
import json
import statistics
import subprocess

import dtrain

F = dtrain.nn.functional


class PythonMlp(dtrain.nn.Module):
    """The mlp (784 -> 256 -> 256 -> 10) with its forward in Python."""

    def __init__(self, inputs=784, hidden=256, classes=10):
        super().__init__()
        self.fc1 = dtrain.nn.Linear(inputs, hidden)
        self.fc2 = dtrain.nn.Linear(hidden, hidden)
        self.fc3 = dtrain.nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(F.flatten(x))))))


def sequential_mlp(inputs=784, hidden=256, classes=10):
    n = dtrain.nn
    return n.Sequential(n.Flatten(), n.Linear(inputs, hidden), n.ReLU(), n.Linear(hidden, hidden), n.ReLU(),
                        n.Linear(hidden, classes))


def groups(model, steps, batch):
    return {"model": {"name": model}, "data": {"name": "fashion-mnist"},
            "training": {"max_steps": steps, "batch_size": batch, "epochs": 100, "seed": 1},
            "parallel": {"workers": 1}, "logging": {"progress": "off"}} | {"training": {
            "max_steps": steps, "batch_size": batch, "epochs": 100, "seed": 1, "threads": 1}}


def cli(model, steps, batch, binary):
    out = subprocess.run([binary, "train", "--model", model, "--dataset", "fashion-mnist", "--max-steps", str(steps),
                          "--batch-size", str(batch), "--epochs", "100", "--seed", "1", "--workers", "1", "--threads", "1",
                          "--progress", "off"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["samples_per_s"]


def forward_cost_us(batch, shape, sizes, calls=200, rounds=15):
    """One forward of PythonMlp minus one of the Sequential with the same layers
    (both run the same C++ kernels): microseconds, the fastest round of each.
    With tiny layers the kernels cost next to nothing and the difference is the
    Python forward's dispatch alone, which the load on a shared machine blurs less."""
    import time
    import numpy as np
    x = dtrain.tensor(np.random.default_rng(0).normal(size=(batch,) + shape).astype(np.float32))
    models = {"module": PythonMlp(*sizes), "seq": sequential_mlp(*sizes)}
    best = {k: float("inf") for k in models}
    for _ in range(rounds):
        for k, m in models.items():
            t = time.perf_counter()
            for _ in range(calls):
                m(x)
            best[k] = min(best[k], (time.perf_counter() - t) / calls * 1e6)
    return best["module"] - best["seq"], best["seq"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--cli", default="build/dtrain")
    ap.add_argument("--torch", default="", help="torch_train.py: PyTorch's run of the same networks, 1 thread")
    a = ap.parse_args()
    runs = {k: [] for k in ["cli-mlp", "py-mlp", "seq", "module", "cli-lenet", "py-lenet"]}
    if a.torch:
        runs.update({"torch-mlp": [], "torch-lenet": []})
    for _ in range(a.reps):
        runs["cli-mlp"].append(cli("mlp", a.steps, a.batch, a.cli))
        runs["py-mlp"].append(dtrain.train(dtrain.Config(**groups("mlp", a.steps, a.batch)))["samples_per_s"])
        cfg = groups("mlp", a.steps, a.batch)
        del cfg["model"]
        runs["seq"].append(dtrain.train(sequential_mlp(), config=dtrain.Config(**cfg))["samples_per_s"])
        runs["module"].append(dtrain.train(PythonMlp(), config=dtrain.Config(**cfg))["samples_per_s"])
        runs["cli-lenet"].append(cli("lenet", a.steps // 4, a.batch, a.cli))
        runs["py-lenet"].append(dtrain.train(dtrain.Config(**groups("lenet", a.steps // 4, a.batch)))["samples_per_s"])
        if a.torch:
            for m in ("mlp", "lenet"):
                out = subprocess.run(["/usr/bin/python3", a.torch, m, "1", "1"], capture_output=True, text=True,
                                     check=True).stdout
                runs["torch-" + m].append(float(out.split("samples_per_s=")[1].split()[0]))
    med = {k: statistics.median(v) for k, v in runs.items()}
    best = {k: max(v) for k, v in runs.items()}
    # On a shared machine the load changes between rounds: the ratio within each
    # round (runs seconds apart) is steadier than the ratio of the medians.
    paired = lambda k, base: statistics.median(x / y for x, y in zip(runs[k], runs[base]))
    print("| run | samples/s, median of %d | best | vs CLI: medians | per round (median) | best |" % a.reps)
    print("|---|---|---|---|---|---|")
    for k, base in [("cli-mlp", "cli-mlp"), ("py-mlp", "cli-mlp"), ("seq", "cli-mlp"), ("module", "cli-mlp"),
                    ("cli-lenet", "cli-lenet"), ("py-lenet", "cli-lenet")] + (
                    [("torch-mlp", "cli-mlp"), ("torch-lenet", "cli-lenet")] if a.torch else []):
        print("| %s | %.0f | %.0f | %.3f | %.3f | %.3f |" % (k, med[k], best[k], med[k] / med[base], paired(k, base),
                                                        best[k] / best[base]))
    for k, v in runs.items():
        print("  %s: %s" % (k, " ".join("%.0f" % x for x in v)))
    step_us = lambda sps: a.batch / sps * 1e6
    cost, seq_us = forward_cost_us(a.batch, (1, 28, 28), (784, 256, 10))
    print("Python forward's cost, the mlp: %.1f us per forward (the Sequential's forward: %.0f us; batch %d)"
          % (cost, seq_us, a.batch))
    cost, seq_us = forward_cost_us(1, (4,), (4, 4, 2), calls=2000)
    print("Python forward's cost, the same layers shrunk to 4 wide, batch 1: %.2f us per forward "
          "(the Sequential's forward: %.2f us)" % (cost, seq_us))
    print("per-step time, best runs: CLI mlp %.0f us, Python-forward Module %.0f us: %+.0f us per step (batch %d)"
          % (step_us(best["cli-mlp"]), step_us(best["module"]), step_us(best["module"]) - step_us(best["cli-mlp"]),
             a.batch))


if __name__ == "__main__":
    main()
