"""--machine: a phase measured > 25% off the simulator's prediction is named on stderr and
in the result line's "drift" (issue 58; cli/PredictionDrift.h).

Usage: drift_test.py DTRAIN SOURCE_DIR
A CPU run of the mlp against the DGX-2 (V100) machine file: its compute is predicted on a
GPU, so it is measured a hundred times slower than predicted, however busy this machine is.
Checked: one stderr line per "drift" entry, each naming its phase and its ratio, compute
among them with its ratio > 1.25, and "predicted_phases" holding the same ratios as
measured_ms / predicted_ms.
"""
import json
import re
import subprocess
import sys


def fail(msg, err=""):
    print("FAIL:", msg)
    print(err)
    sys.exit(1)


dtrain, src = sys.argv[1], sys.argv[2]
p = subprocess.run([dtrain, "train", "--model", "mlp", "--dataset", "synthetic", "--synthetic-size", "1024",
                    "--epochs", "10", "--workers", "2", "--batch-size", "32", "--max-steps", "20",
                    "--progress", "off", "--machine", src + "/plan/clusters/dgx2-v100.json"],
                   capture_output=True, text=True, timeout=120)
if p.returncode != 0:
    fail("the run failed", p.stderr)
result = json.loads(p.stdout.strip().splitlines()[-1])
phases, drift = result["predicted_phases"], result["drift"]
for name, row in phases.items():
    if abs(row["ratio"] - row["measured_ms"] / row["predicted_ms"]) > 1e-9 * row["ratio"]:
        fail("inconsistent ratio of " + name, json.dumps(phases))
lines = [l for l in p.stderr.splitlines() if l.startswith("dtrain: drift: ")]
if len(lines) != len(drift):
    fail("%d drift lines for %d entries" % (len(lines), len(drift)), p.stderr)
for line, entry in zip(lines, drift):
    m = re.match(r"dtrain: drift: (.+) ([\d.]+)x the prediction \(", line)
    if not m or m.group(1) != entry["phase"] or abs(float(m.group(2)) - entry["ratio"]) > 0.01 * entry["ratio"]:
        fail("line and entry differ: %s / %s" % (line, entry), p.stderr)
compute = [e for e in drift if e["phase"] == "compute"]
if not compute or compute[0]["ratio"] <= 1.25 or "compute" not in phases:
    fail("compute not reported as drifting", json.dumps(drift))
print("ok:", lines)
