#!/usr/bin/python3
"""McMahan et al. 2017 Table 2's structure on Fashion-MNIST: rounds of dtrain's simulated
FedAvg to a target test accuracy, FedSGD vs FedAvg (E, B), IID vs 2-shard non-IID,
100 clients, C = 0.1. Prints a markdown table (rounds, speedup over FedSGD, seconds).
Usage: fedavg_rounds.py [model] [target] [lr] [max_rounds_fedsgd] [max_rounds_fedavg] [grid] [fedsgd_eval_every] [partitions]
grid: "small" (FedSGD and E in {1, 5} x B in {50, 10}; the default) or "full" (the paper's
E in {1, 5, 20} x B in {inf, 50, 10}); FedSGD's rounds are many and cheap, so it may evaluate
every fedsgd_eval_every rounds (default 1; its rounds to target are then exact to that many);
partitions: "iid,shards" (default), or one of them."""
import json, subprocess, sys

model = sys.argv[1] if len(sys.argv) > 1 else "mlp"
target = float(sys.argv[2]) if len(sys.argv) > 2 else 0.80
lr = sys.argv[3] if len(sys.argv) > 3 else "0.1"
cap_sgd = sys.argv[4] if len(sys.argv) > 4 else "600"
cap_avg = sys.argv[5] if len(sys.argv) > 5 else "300"
grid = sys.argv[6] if len(sys.argv) > 6 else "small"
sgd_eval = sys.argv[7] if len(sys.argv) > 7 else "1"
partitions = (sys.argv[8] if len(sys.argv) > 8 else "iid,shards").split(",")
if grid == "full":  # E = 1, B = inf is FedSGD itself
    settings = [("FedSGD", 1, 0)] + [("FedAvg", e, b) for e in (1, 5, 20) for b in (0, 50, 10) if (e, b) != (1, 0)]
else:
    settings = [("FedSGD", 1, 0), ("FedAvg", 1, 50), ("FedAvg", 1, 10), ("FedAvg", 5, 50), ("FedAvg", 5, 10)]
label = {"iid": "IID", "shards": "non-IID"}
print("| setting | E | B | " + " | ".join(f"{label[p]} rounds | (speedup)" for p in partitions) + " | "
      + " | ".join(f"{label[p]} s" for p in partitions) + " |")
print("|---|---|---|" + "---|---|" * len(partitions) + "---|" * len(partitions))
base = {}
for name, e, b in settings:
    cells, secs = [], []
    for part in partitions:
        cmd = ["./build/dtrain", "train", "--strategy", "fedavg", "--model", model, "--clients", "100",
               "--client-fraction", "0.1", "--partition", part, "--local-epochs", str(e),
               "--local-batch", str(b), "--lr", lr, "--rounds", cap_sgd if b == 0 else cap_avg,
               "--target-accuracy", str(target), "--workers", "2", "--progress", "off",
               "--eval-every", sgd_eval if name == "FedSGD" else "1"]
        j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
        r = j["rounds_to_target"]
        if name == "FedSGD": base[part] = (r, r is None and j["rounds"])  # (rounds, or a lower bound)
        reached, bound = base.get(part, (None, None))
        speed = (f"{reached / r:.1f}x" if r and reached else
                 f">{bound / r:.1f}x" if r and bound else "-")
        cells += [str(r) if r else f">{j['rounds']} ({j['test_accuracy']:.3f})", speed]
        secs.append(f"{j['seconds']:.1f}")
        print(f"# {name} E={e} B={b} {part}: {json.dumps(j)}", file=sys.stderr, flush=True)
    print(f"| {name} | {e} | {'inf' if b == 0 else b} | " + " | ".join(cells) + " | " + " | ".join(secs) + " |", flush=True)
