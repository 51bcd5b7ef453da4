#!/usr/bin/python3
"""The allreduce auto rule A/B (PERFORMANCE.md, "Allreduce `auto` across hosts"): the old choice
for these buckets (--allreduce-algo rhd) against auto, alternating, 3 rounds, on 4 emulated hosts,
with the TOML files of a plan_vs_measured.py run (its --dir, the first argument).
Run from the repository root under: flock /tmp/netsim.lock bench/allreduce_auto_ab.py /tmp/plan_vs_measured (a plan_vs_measured.py --dir, or tests/plan/rounds/<round>)"""

import json, os, statistics, subprocess, sys
R = sys.argv[1] if len(sys.argv) > 1 else "tests/plan/rounds/xeon-2026-11-28-1755"

def samples_per_s(toml, np_, rph, algo, tag):
    m = f"/tmp/{tag}.metrics.jsonl"
    if os.path.exists(m): os.remove(m)
    cmd = (f"scripts/netsim.sh mpirun -np {np_} --ranks-per-host {rph} -- build/dtrain train --config {toml} "
           f"--allreduce-algo {algo} --progress off --log-every 1 --metrics {m}")
    p = subprocess.run(cmd, shell=True, capture_output=True, text=True, timeout=600)
    if p.returncode: sys.exit(p.stderr[-500:])
    recs = [r for r in map(json.loads, open(m)) if "samples_per_s" in r and "step" in r]
    sps = statistics.median(r["samples_per_s"] for r in recs if r["step"] > 3)
    return sps
for rate in ["100mbit", "1gbit"]:
    subprocess.run(f"scripts/netsim.sh up 4 --rate {rate}", shell=True, check=True, capture_output=True)
    for model, cfg, np_, rph in [("gpt-small", "dp8-pack", 8, 2), ("gpt-small", "dp4", 4, 1), ("mlp", "dp8-pack", 8, 2), ("mlp", "dp4", 4, 1)]:
        toml = f"{R}/{model}-{rate}-h4-{cfg}.toml"
        t = {"rhd": [], "auto": []}
        for _ in range(3):
            for algo in ("rhd", "auto"):
                t[algo].append(samples_per_s(toml, np_, rph, algo, f"{model}-{rate}-{cfg}-{algo}"))
        row = {"rate": rate, "model": model, "config": cfg, "rhd_sps": [round(x, 1) for x in t["rhd"]],
               "auto_sps": [round(x, 1) for x in t["auto"]], "rhd_med": round(statistics.median(t["rhd"]), 1),
               "auto_med": round(statistics.median(t["auto"]), 1)}
        print(json.dumps(row), flush=True)
    subprocess.run("scripts/netsim.sh down", shell=True, capture_output=True)
