#!/usr/bin/python3
"""McMahan et al. 2017 Table 2's structure on Fashion-MNIST: rounds of dtrain's simulated
FedAvg to a target test accuracy, FedSGD vs FedAvg (E, B), IID vs 2-shard non-IID,
100 clients, C = 0.1. Prints a markdown table (rounds, speedup over FedSGD, seconds).
Usage: fedavg_rounds.py [model] [target] [lr] [max_rounds_fedsgd] [max_rounds_fedavg]"""
import json, subprocess, sys

model = sys.argv[1] if len(sys.argv) > 1 else "mlp"
target = float(sys.argv[2]) if len(sys.argv) > 2 else 0.80
lr = sys.argv[3] if len(sys.argv) > 3 else "0.1"
cap_sgd = sys.argv[4] if len(sys.argv) > 4 else "600"
cap_avg = sys.argv[5] if len(sys.argv) > 5 else "300"
settings = [("FedSGD", 1, 0), ("FedAvg", 1, 50), ("FedAvg", 1, 10), ("FedAvg", 5, 50), ("FedAvg", 5, 10)]
print(f"| setting | E | B | IID rounds | (speedup) | non-IID rounds | (speedup) | IID s | non-IID s |")
print("|---|---|---|---|---|---|---|---|---|")
base = {}
for name, e, b in settings:
    cells, secs = [], []
    for part in ("iid", "shards"):
        cmd = ["./build/dtrain", "train", "--strategy", "fedavg", "--model", model, "--clients", "100",
               "--client-fraction", "0.1", "--partition", part, "--local-epochs", str(e),
               "--local-batch", str(b), "--lr", lr, "--rounds", cap_sgd if b == 0 else cap_avg,
               "--target-accuracy", str(target), "--workers", "2", "--progress", "off"]
        j = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1])
        r = j["rounds_to_target"]
        if name == "FedSGD": base[part] = r
        speed = f"{base[part] / r:.1f}x" if r and base.get(part) else "-"
        cells += [str(r) if r else f">{j['rounds']} ({j['test_accuracy']:.3f})", speed]
        secs.append(f"{j['seconds']:.1f}")
        print(f"# {name} E={e} B={b} {part}: {json.dumps(j)}", file=sys.stderr, flush=True)
    print(f"| {name} | {e} | {'inf' if b == 0 else b} | " + " | ".join(cells) + " | " + " | ".join(secs) + " |", flush=True)
