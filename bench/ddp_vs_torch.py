#!/usr/bin/python3
"""Data-parallel training throughput: dtrain --strategy allreduce vs PyTorch DDP over Gloo
(../shared/bench/torch_ddp.py), 2 workers, batch 64 per worker, one thread per worker,
alternating runs on the same machine, medians and ratios.

  bench/ddp_vs_torch.py [--models mlp,lenet] [--rounds 3] [--epochs 1] [--dtrain PATH]
                        [--fusion 0.05,0.25,1,4] [--no-torch] [--no-mpi] [--no-sweep]

Measures, per model:
  - samples/s of torch DDP (2 procs), dtrain --workers 2 --backend local, and
    mpirun -np 2 dtrain --backend mpi, and the ratios to torch;
  - scaling efficiency on local: samples/s of 2 workers / (2 x samples/s of 1 worker);
  - the overlap/fusion table: step time, communication time, hidden and exposed
    communication per step, with and without overlap, for several --fusion-mb.
Prints markdown tables (for docs/PERFORMANCE-ddp.md), the spread of each median
(min-max), and one JSON line.
"""
import argparse, json, os, re, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "bench")
MPI_ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")


def dtrain_json(cmd, env=None):
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_dtrain(args, model, epochs, extra=(), mpi=False):
    base = [args.dtrain, "train", "--model", model, "--epochs", str(epochs), "--progress", "off"]
    if mpi:
        return dtrain_json(["mpirun", "--oversubscribe", "-np", "2"] + base +
                           ["--backend", "mpi"] + list(extra), env=MPI_ENV)
    return dtrain_json(base + list(extra))


def run_torch(model, epochs):
    out = subprocess.run(["/usr/bin/python3", os.path.join(SHARED, "torch_ddp.py"), model, "2",
                          str(epochs)], check=True, capture_output=True, text=True).stdout
    return {"samples_per_s": float(re.search(r"samples_per_s=(\d+)", out).group(1)),
            "test_accuracy": float(re.search(r"test_acc=([\d.]+)", out).group(1))}


def med(xs):
    return statistics.median(xs)


def spread(xs):
    m = med(xs)
    return (max(xs) - min(xs)) / m * 100 if m else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mlp,lenet")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--dtrain", default=os.path.join(ROOT, "build-ddp", "dtrain"))
    ap.add_argument("--fusion", default="0.05,0.25,1,4")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--no-mpi", action="store_true")
    ap.add_argument("--no-sweep", action="store_true")
    args = ap.parse_args()
    result = {}
    for model in args.models.split(","):
        runs = {"torch": [], "local": [], "mpi": [], "single": []}
        for r in range(args.rounds):  # alternate peer and dtrain within each round
            if not args.no_torch:
                runs["torch"].append(run_torch(model, args.epochs)["samples_per_s"])
            runs["local"].append(run_dtrain(args, model, args.epochs, ["--workers", "2"])["samples_per_s"])
            if not args.no_mpi:
                runs["mpi"].append(run_dtrain(args, model, args.epochs, mpi=True)["samples_per_s"])
            runs["single"].append(run_dtrain(args, model, args.epochs)["samples_per_s"])
            print(f"# {model} round {r + 1}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in runs.items() if v),
                  file=sys.stderr, flush=True)
        m = {k: med(v) for k, v in runs.items() if v}
        s = {k: spread(v) for k, v in runs.items() if v}
        res = {"samples_per_s": m, "spread_pct": s,
               "scaling_efficiency_local": m["local"] / (2 * m["single"])}
        if "torch" in m:
            res["local_vs_torch"] = m["local"] / m["torch"]
            if "mpi" in m:
                res["mpi_vs_torch"] = m["mpi"] / m["torch"]
        sweep = []
        if not args.no_sweep:
            configs = [(f, ov) for f in map(float, args.fusion.split(",")) for ov in (True, False)]
            samples = {c: [] for c in configs}
            for r in range(args.rounds):
                for f, ov in configs:
                    extra = ["--workers", "2", "--fusion-mb", str(f)] + ([] if ov else ["--no-overlap"])
                    samples[(f, ov)].append(run_dtrain(args, model, args.epochs, extra))
            for (f, ov), js in samples.items():
                sweep.append({"fusion_mb": f, "overlap": ov,
                              "step_ms": med([2 * 64 / j["samples_per_s"] * 1e3 for j in js]),
                              "comm_ms": med([j["comm_ms"] for j in js]),
                              "hidden_ms": med([j["hidden_ms"] for j in js]),
                              "exposed_ms": med([j["exposed_comm_ms"] for j in js]),
                              "buckets": js[0]["buckets"],
                              "spread_pct": spread([j["samples_per_s"] for j in js])})
        res["sweep"] = sweep
        result[model] = res

    print("| model | torch DDP (2 procs) | dtrain local x2 | dtrain mpi x2 | local/torch | mpi/torch | dtrain 1 worker | scaling eff. (local) |")
    print("|---|---|---|---|---|---|---|---|")
    for model, r in result.items():
        m, s = r["samples_per_s"], r["spread_pct"]
        cell = lambda k: f"{m[k]:.0f} (±{s[k] / 2:.0f}%)" if k in m else "-"
        print(f"| {model} | {cell('torch')} | {cell('local')} | {cell('mpi')} | "
              f"{r.get('local_vs_torch', 0):.2f}x | {r.get('mpi_vs_torch', 0):.2f}x | {cell('single')} | "
              f"{r['scaling_efficiency_local'] * 100:.0f}% |")
    for model, r in result.items():
        if not r["sweep"]:
            continue
        print(f"\n{model}, 2 local workers: step time and communication per step (medians, ms)\n")
        print("| --fusion-mb | buckets | overlap | step | comm | hidden | exposed | spread |")
        print("|---|---|---|---|---|---|---|---|")
        for e in r["sweep"]:
            print(f"| {e['fusion_mb']:g} | {e['buckets']:.0f} | {'on' if e['overlap'] else 'off'} | "
                  f"{e['step_ms']:.2f} | {e['comm_ms']:.2f} | {e['hidden_ms']:.2f} | "
                  f"{e['exposed_ms']:.2f} | ±{e['spread_pct'] / 2:.0f}% |")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
