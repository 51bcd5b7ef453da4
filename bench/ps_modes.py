#!/usr/bin/python3
"""Parameter-server consistency modes under a straggler: time to reach 85% test accuracy, and
server updates/s vs the number of servers.

  bench/ps_modes.py [--rounds 3] [--seeds 0,1,2] [--epochs 3] [--eval-every 50] [--servers 2]
                    [--straggler-worker 3] [--delay-ms 10] [--modes allreduce,ps-sync,...]
                    [--dir /tmp/dtrain-ps-modes] [--plot docs/ps-time-to-accuracy.png]
                    [--out-md FILE] [--from-dir DIR] [--skip-updates] [--updates-only]
                    [--bench-seconds T] [--dry-run]

Part 1 (time to accuracy). `dtrain train --model mlp --workers 4 --batch-size 64` on the local
backend (ranks as threads of one process), worker 3 slowed by a fixed 10 ms per step
(--straggler 3:10), for: allreduce; ps sync; ps sync with 1 backup worker; ps ssp with
staleness 2 and 8; ps async; hogwild (ps modes with --servers 2). Each run writes a JSON-lines
metrics file (DIR/<mode>-r<round>.jsonl) and its final stdout JSON (DIR/<mode>-r<round>.json).
Every --eval-every steps worker 0 copies the parameters (--eval-deferred) and the copies are
evaluated on the whole test set after training, so an evaluation never pauses worker 0 while
free-running workers (async, ssp, hogwild) go on; an evaluation record carries time_s, the
training seconds at the copy. Time to 85% of a run = time_s of the
FIRST evaluation with test_accuracy >= 0.85 (no interpolation unless --interpolate, which
interpolates linearly between the two bracketing evaluations); a run that never gets there
counts as +inf ("not reached"). The table gives, per mode, the median over rounds of time to
85% (with min-max and how many rounds reached it), of the final test accuracy and of
samples/s (all from the runs' own reports), and the median time relative to allreduce.
Rounds alternate the modes (round r runs every mode once, in order, with seed --seeds[r]).
The plot (time on x, test accuracy on y) draws every round of every mode faintly and the
round whose time to 85% is the median (lower median for an even count; ties/no crossing:
median final accuracy) in bold, one colour per mode, with a dashed line at 0.85 and a triangle
on it at each mode's median time (also in the legend). A live run first deletes the selected
modes' old files in DIR and records its settings in DIR/args.json (--from-dir labels use them).

Part 2 (server throughput). `dtrain bench ps --servers S --workers 4 --model mlp` for
S = 1, 2, 4, alternating S within each round; median updates/s per S and the ratio to S = 1.

Reproduce the docs (docs/ps-time-to-accuracy.png and the tables), after building ./build:
  /usr/bin/python3 bench/ps_modes.py --out-md /tmp/ps-modes.md
Rebuild the table and plot from kept files without running anything:
  /usr/bin/python3 bench/ps_modes.py --from-dir /tmp/dtrain-ps-modes --plot /tmp/x.png
"""
import argparse, glob, json, math, os, re, shlex, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTRAIN = os.path.join(ROOT, "build", "dtrain")
MODES = {  # slug -> (label, extra flags); {S} is replaced by --servers
    "allreduce": ("allreduce", "--strategy allreduce"),
    "ps-sync": ("ps sync", "--strategy ps --servers {S} --consistency sync"),
    "ps-sync-backup1": ("ps sync, 1 backup", "--strategy ps --servers {S} --consistency sync --backup-workers 1"),
    "ps-ssp2": ("ps ssp s=2", "--strategy ps --servers {S} --consistency ssp --staleness 2"),
    "ps-ssp8": ("ps ssp s=8", "--strategy ps --servers {S} --consistency ssp --staleness 8"),
    "ps-ssp2-lazy": ("ps ssp s=2, lazy reads", "--strategy ps --servers {S} --consistency ssp --staleness 2 --ssp-reads lazy"),
    "ps-async": ("ps async", "--strategy ps --servers {S} --consistency async"),
    "hogwild": ("hogwild", "--strategy hogwild"),
}
LABEL_ARGS = ("model", "workers", "batch_size", "servers", "straggler_worker", "delay_ms", "epochs",
              "eval_every", "train_args")


def die(msg, tail=""):
    print(f"ps_modes.py: error: {msg}", file=sys.stderr)
    if tail:
        print(tail, file=sys.stderr)
    sys.exit(1)


def run(cmd, what):
    """Runs cmd; returns the JSON object on its last stdout line; dies on failure."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        die(f"{what}: cannot run {cmd[0]}: {e.strerror}")
    tail = "\n".join(p.stderr.strip().splitlines()[-20:])
    if p.returncode != 0:
        die(f"{what} exited with status {p.returncode}: {shlex.join(cmd)}", "--- stderr tail ---\n" + tail)
    lines = p.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, ValueError):
        die(f"{what}: last stdout line is not a JSON object: {shlex.join(cmd)}", tail)


def train_cmd(a, slug, seed, metrics):
    cmd = [a.dtrain, "train", "--model", a.model, "--workers", str(a.workers), "--batch-size",
           str(a.batch_size), "--epochs", str(a.epochs), "--eval-every", str(a.eval_every),
           "--log-every", str(a.log_every or a.eval_every), "--metrics", metrics,
           "--progress", "off", "--seed", str(seed), "--eval-deferred"]
    if a.delay_ms > 0:
        cmd += ["--straggler", f"{a.straggler_worker}:{a.delay_ms:g}"]
    return cmd + shlex.split(a.train_args) + MODES[slug][1].format(S=a.servers).split()


def updates_cmd(a, s):
    cmd = [a.dtrain, "bench", "ps", "--servers", str(s), "--workers", str(a.workers), "--model", a.model]
    return cmd + (["--seconds", f"{a.bench_seconds:g}"] if a.bench_seconds else [])


def read_evals(path):
    """(time_s, test_accuracy) of the evaluation records of a metrics file, in time order.
    Other records (training loss, final staleness histogram, ...) are skipped."""
    ev = set()
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
            except ValueError:
                die(f"{path}:{n}: not a JSON line")
            if (isinstance(r, dict) and isinstance(r.get("test_accuracy"), (int, float))
                    and isinstance(r.get("time_s"), (int, float)) and "loss" not in r
                    and "staleness_histogram" not in r):
                ev.add((float(r["time_s"]), float(r["test_accuracy"])))
    return sorted(ev)


def time_to(evals, thr, interpolate):
    prev = None  # the evaluation before; the first one is taken as is (nothing brackets it)
    for t, acc in evals:
        if acc >= thr:
            if interpolate and prev and t > prev[0]:
                return prev[0] + (thr - prev[1]) / (acc - prev[1]) * (t - prev[0])
            return t
        prev = (t, acc)
    return math.inf


def applied_samples_per_s(res):
    """Samples whose gradients were applied, per second, over all workers. The run's own
    samples_per_s counts worker 0's steps x the global batch, which overstates free-running
    modes (the straggler does fewer steps) and counts the gradients backup workers drop."""
    b, s = res["batch_size"], res["seconds"]
    # Over worker 0's training time: in free-running modes (async, ssp, hogwild) the
    # straggler's steps after worker 0 finished are included, up to its 1/W share.
    if res.get("strategy") == "ps":
        if res.get("consistency") == "sync":
            return res["server_updates"][0] * (res["workers"] - res.get("backup_workers", 0)) * b / s
        return res["server_pushes"][0] * res.get("push_every", 1) * b / s
    if res.get("strategy") == "hogwild" and "hogwild_updates_per_worker" in res:
        return sum(res["hogwild_updates_per_worker"]) * b / s
    return res["samples_per_s"]


def analyse(a, runs):
    """runs: slug -> list of (evals, result-or-None). Returns rows for the table and plot."""
    rows = []
    for slug, rs in runs.items():
        if not rs:
            continue
        t = [time_to(ev, a.threshold, a.interpolate) for ev, _ in rs]
        fin = [(res or {}).get("test_accuracy", ev[-1][1] if ev else math.nan) for ev, res in rs]
        sps = [applied_samples_per_s(res) for _, res in rs if res and "samples_per_s" in res]
        order = sorted(range(len(rs)), key=lambda i: (t[i], -fin[i]))
        rows.append({"slug": slug, "label": MODES[slug][0], "t": t, "t_med": statistics.median(t),
                     "fin_med": statistics.median(fin), "sps_med": statistics.median(sps) if sps else None,
                     "curves": [ev for ev, _ in rs], "median_round": order[(len(rs) - 1) // 2]})
    return rows


def fmt_s(x):
    return "not reached" if math.isinf(x) else f"{x:.1f}"


def table(a, rows):
    base = next((r["t_med"] for r in rows if r["slug"] == "allreduce"), None)
    out = [f"{a.model}, {a.workers} workers (local backend), batch {a.batch_size}/worker, "
           f"straggler: worker {a.straggler_worker} +{a.delay_ms:g} ms/step, --servers {a.servers}, "
           f"evaluation every {a.eval_every} steps; time to {a.threshold:.0%} test accuracy = "
           f"{'interpolated between evaluations' if a.interpolate else 'first evaluation at or above it'}"
           f" (training time, evaluation excluded); medians of {max(len(r['t']) for r in rows)} rounds\n",
           f"| mode | time to {a.threshold:.0%} (s) | min-max (s) | reached | vs allreduce | "
           "final test acc. | applied samples/s |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        fin = [x for x in r["t"] if not math.isinf(x)]
        ratio = (f"{r['t_med'] / base:.2f}x" if base and not math.isinf(base) and not math.isinf(r["t_med"])
                 else "-")
        sps = "-" if r["sps_med"] is None else f"{r['sps_med']:.0f}"
        rng = "-" if not fin else f"{min(fin):.1f}-{fmt_s(max(r['t'])).replace('not reached', 'never')}"
        out.append(f"| {r['label']} | {fmt_s(r['t_med'])} | {rng} | "
                   f"{len(fin)}/{len(r['t'])} | {ratio} | {r['fin_med']:.4f} | {sps} |")
    return "\n".join(out)


def plot(a, rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(9, 5.5), dpi=120)
    for i, r in enumerate(rows):
        c = f"C{i % 10}"
        for k, ev in enumerate(r["curves"]):
            if ev and k != r["median_round"]:
                ax.plot(*zip(*ev), color=c, alpha=0.25, lw=0.8)
        ev = r["curves"][r["median_round"]]
        if ev:
            ax.plot(*zip(*ev), color=c, lw=2, marker=".", ms=4,
                    label=f"{r['label']} ({fmt_s(r['t_med'])}{'' if math.isinf(r['t_med']) else ' s'})")
            if not math.isinf(r["t_med"]):  # the median time to the threshold, on the dashed line
                ax.plot([r["t_med"]], [a.threshold], color=c, marker="v", ms=8, mec="k", mew=0.5)
    ax.axhline(a.threshold, color="gray", ls="--", lw=1)
    lo = min((acc for r in rows for ev in r["curves"] for _, acc in ev), default=0)
    ax.set_ylim(max(0.0, min(lo, a.threshold) - 0.02), None)
    ax.set_xlim(0, None)
    ax.set_xlabel("training time (s, evaluation excluded)")
    ax.set_ylabel("test accuracy")
    ax.set_title(f"{a.model}, {a.workers} workers, worker {a.straggler_worker} delayed {a.delay_ms:g} ms/step: "
                 f"time to {a.threshold:.0%} test accuracy", fontsize=10)
    ax.legend(title=f"mode (median time to {a.threshold:.0%}); bold: median round, faint: other rounds",
              fontsize=8, title_fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    print(f"# plot written to {path}", file=sys.stderr)


def updates_table(a, res):
    out = [f"\nparameter servers, {a.model} ({next(iter(res.values()))[0].get('parameters', '?')} parameters), "
           f"{a.workers} workers: server updates/s, medians of {max(map(len, res.values()))} rounds\n",
           "| servers S | updates/s | spread | vs S=1 | MB/s |", "|---|---|---|---|---|"]
    one = statistics.median(j["updates_per_s"] for j in res[1]) if 1 in res else None
    for s, js in sorted(res.items()):
        u = [j["updates_per_s"] for j in js]
        m = statistics.median(u)
        b = [j["bytes_per_s"] for j in js if "bytes_per_s" in j]
        out.append(f"| {s} | {m:.1f} | ±{(max(u) - min(u)) / m * 50 if m else 0:.0f}% | "
                   f"{f'{m / one:.2f}x' if one else '-'} | {f'{statistics.median(b) / 1e6:.1f}' if b else '-'} |")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dtrain", default=DTRAIN)
    ap.add_argument("--model", default="mlp")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--servers", type=int, default=2, help="servers of the ps modes (part 1)")
    ap.add_argument("--straggler-worker", type=int, default=3)
    ap.add_argument("--delay-ms", type=float, default=10, help="0: no straggler")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--train-args", default="", help="extra flags for every train run, e.g. '--lr 0.2 --momentum 0.5'")
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--log-every", type=int, default=0, help="default: --eval-every")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seeds", default="0,1,2", help="seed of round r: seeds[r %% len]")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--threshold", type=float, default=0.85)
    ap.add_argument("--interpolate", action="store_true")
    ap.add_argument("--dir", default="/tmp/dtrain-ps-modes", help="where metrics files are written")
    ap.add_argument("--from-dir", help="re-use DIR/<mode>-r<round>.jsonl (and .json) instead of running")
    ap.add_argument("--plot", default=os.path.join(ROOT, "docs", "ps-time-to-accuracy.png"))
    ap.add_argument("--out-md")
    ap.add_argument("--update-servers", default="1,2,4")
    ap.add_argument("--bench-seconds", type=float, default=0, help="--seconds of dtrain bench ps")
    ap.add_argument("--skip-updates", action="store_true")
    ap.add_argument("--updates-only", action="store_true")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    modes = a.modes.split(",")
    bad = [m for m in modes if m not in MODES]
    if bad:
        ap.error(f"unknown mode(s) {','.join(bad)}; known: {','.join(MODES)}")
    seeds = [int(s) for s in a.seeds.split(",")]
    ss = [int(s) for s in a.update_servers.split(",")]
    d = a.from_dir or a.dir
    if not a.from_dir and not a.dry_run:
        if not os.access(a.dtrain, os.X_OK):
            die(f"{a.dtrain} not found or not executable (build it: cmake --build build, or pass --dtrain)")
        os.makedirs(d, exist_ok=True)
    cfg = os.path.join(d, "args.json")  # the labels of a --from-dir table come from the runs
    if a.from_dir and os.path.exists(cfg):
        vars(a).update({k: v for k, v in json.load(open(cfg)).items() if k in LABEL_ARGS})
    elif not a.dry_run:
        json.dump({k: getattr(a, k) for k in LABEL_ARGS}, open(cfg, "w"))
    md = []
    runs = {m: [] for m in modes}
    if not a.updates_only:
        if a.from_dir:
            for m in modes:
                files = glob.glob(os.path.join(d, f"{m}-r*.jsonl"))
                for f in sorted(files, key=lambda f: int(re.search(r"-r(\d+)\.jsonl$", f)[1])):
                    res = f[:-1] if os.path.exists(f[:-1]) else None  # .jsonl -> .json
                    ev = read_evals(f)
                    if not ev:
                        die(f"{f}: no evaluation records (test_accuracy with time_s)")
                    runs[m].append((ev, json.load(open(res)) if res else None))
                if not files:
                    print(f"# {m}: no {m}-r*.jsonl in {d}, skipped", file=sys.stderr)
        else:
            for f in [] if a.dry_run else sum((glob.glob(os.path.join(d, f"{m}-r*.json*")) for m in modes), []):
                os.remove(f)  # stale rounds of an earlier run would mix into a later --from-dir
            for r in range(a.rounds):  # round-robin: every mode once per round
                for m in modes:
                    metrics = os.path.join(d, f"{m}-r{r + 1}.jsonl")
                    cmd = train_cmd(a, m, seeds[r % len(seeds)], metrics)
                    if a.dry_run:
                        print(shlex.join(cmd))
                        continue
                    res = run(cmd, f"{m} round {r + 1}")
                    with open(metrics[:-1], "w") as f:
                        json.dump(res, f)
                    ev = read_evals(metrics) if os.path.exists(metrics) else []
                    if not ev:
                        die(f"{m} round {r + 1}: no evaluation records with time_s in {metrics}")
                    runs[m].append((ev, res))
                    t = time_to(ev, a.threshold, a.interpolate)
                    print(f"# round {r + 1} {m}: time to {a.threshold:.0%} {fmt_s(t)}, final acc. "
                          f"{res.get('test_accuracy', ev[-1][1]):.4f}", file=sys.stderr, flush=True)
        rows = analyse(a, runs)
        if rows:
            md.append(table(a, rows))
            print(md[-1], flush=True)
            plot(a, rows, a.plot)
        elif not a.dry_run:
            die(f"no runs to report (looked in {d})")
    if not a.skip_updates:
        res = {}
        if a.from_dir:
            for f in glob.glob(os.path.join(d, "updates-s*-r*.json")):
                res.setdefault(int(re.search(r"updates-s(\d+)-r", f)[1]), []).append(json.load(open(f)))
        else:
            for f in [] if a.dry_run else glob.glob(os.path.join(d, "updates-s*-r*.json")):
                os.remove(f)
            for r in range(a.rounds):  # alternate S within each round
                for s in ss:
                    cmd = updates_cmd(a, s)
                    if a.dry_run:
                        print(shlex.join(cmd))
                        continue
                    j = run(cmd, f"bench ps --servers {s} round {r + 1}")
                    with open(os.path.join(d, f"updates-s{s}-r{r + 1}.json"), "w") as f:
                        json.dump(j, f)
                    res.setdefault(s, []).append(j)
                    print(f"# round {r + 1} S={s}: {j['updates_per_s']:.1f} updates/s", file=sys.stderr, flush=True)
        if res:
            md.append(updates_table(a, res))
            print(md[-1])
        elif a.from_dir:
            print(f"# no updates-s*-r*.json in {d}; server table skipped", file=sys.stderr)
    if a.out_md and md:
        with open(a.out_md, "w") as f:
            f.write("\n\n".join(m.strip("\n") for m in md) + "\n")


if __name__ == "__main__":
    main()
