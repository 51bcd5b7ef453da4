#!/usr/bin/python3
"""dtrain simulate's predictions against dtrain train on emulated hosts.

For each model (mlp, gpt-small) and link rate: calibrate (`dtrain calibrate
--netsim HOSTS --rate R`, or --machine FILE), then for each configuration below
write its TOML (`dtrain train ... --print-config`), predict it (`dtrain
simulate`), run it (`netsim.sh mpirun -np N --ranks-per-host K -- dtrain train
--config FILE --backend mpi`, --max-steps S, log_every = 1 in the TOML) and compare the
predicted step time and the largest rank's peak memory with the measured ones: the
median step of the metrics file after the first --warmup steps, the median of
--repeats runs (3, each configuration in turn). Per scenario
(model x rate, and model x rate x memory limit): Kendall's tau of predicted vs
measured samples/s and whether `dtrain plan`'s first choice (run too) is within
5% of the measured best. Where the two differ, both run --decide more times, in
turn, and the verdict takes the medians of all their runs (one run on these
shared cores can be 15% off its neighbours: a verdict on 5% needs more than
three). The memory limit (4 hosts): the median of the lossless one-rank-per-host
configurations' predicted peaks, so that about half of them fit; `dtrain plan
--memory-per-rank` chooses under it, and the measured best is the best of those
whose measured peak fits. Each model is profiled right before its runs
(`dtrain calibrate --from`: compute and the model, the links kept from the
pass's calibration), which predicts them; profiled again before each later pass
and after the last, and every row predicted a second time from those profiles'
median ("during": the machine's drift during the runs taken out; --no-reprofile
skips both and predicts from the pass's calibration).

  bench/plan_vs_measured.py --rate 100mbit [--machine bench/machines/zen4-2core-netsim4-100mbit.json]
  bench/plan_vs_measured.py --rate 100mbit --hosts 2 --held-out   # the held-out scenario
  bench/plan_vs_measured.py --rate 1gbit --plan-only --machine D/machine-1gbit.json --dir D --json-out D/rows.jsonl
      # only the plan's choices (the memory-limited one too), beside an earlier run's rows

Takes /tmp/netsim.lock itself around netsim up..down (calibrate takes it on its own).
Writes one JSON line per run to stdout and a summary at the end; --json-out keeps them.
"""
import argparse, fcntl, json, math, os, re, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NETSIM = os.path.join(ROOT, "scripts", "netsim.sh")

# Global batch per model (samples per optimizer step), steps per run (at least
# `steps`, up to `max_steps` where the predicted step leaves time: STEADY_S).
# The mlp trains on Fashion-MNIST, its own data (rounds before 2026-11-27 18:30
# used --dataset synthetic, whose samples are generated, 784 random draws each:
# 0.65 ms a 256-sample batch per rank on 2 Zen 5 cores, work no real loader
# does and the simulator does not model).
# The mlp's fastest rows (5-7 ms a step at 1 Gbit/s) need ~800 steps for
# STEADY_S: capped at 100, their runs measured 0.6 s and spread 2.7x (PowerSGD
# at 1 Gbit/s: 4.0, 10.9 and 8.4 ms, 2026-11-28 11:30; 600 steps: 5.4-5.6).
MODELS = {"mlp": {"batch": 256, "steps": 30, "max_steps": 800, "extra": "--dataset fashion-mnist",
                  "base": "[data]\nname = \"fashion-mnist\"\n[training]\nmax_steps = 30\n"},
          "gpt-small": {"batch": 16, "steps": 12, "max_steps": 40, "extra": "",
                        "base": "[training]\nmax_steps = 18\n"}}
# Seconds of steady steps a run measures where its steps allow: gpt-small's
# steps at 1 Gbit/s vary 90-275 ms within a run (4 ranks on 2 cores), and the
# medians of 9 steps of dp 4 + ZeRO 1 ranged 104-151 ms over 4 runs, of 37
# steps 115-129 (2026-11-27, Zen 5).
STEADY_S = 4.0


def configs(model, hosts, held_out):
    """slug -> (ranks, ranks per host, flags). G: the global batch."""
    G = MODELS[model]["batch"]
    comp = "--compress powersgd --compress-rank 4 --compress-start-step 0"  # no plain steps first
    if held_out:  # 2 hosts: 2 ranks (1 per host) or 4 (2 per host)
        return {
            "dp2": (2, 1, f"--strategy allreduce --batch-size {G // 2}"),
            "dp2-zero2": (2, 1, f"--strategy allreduce --zero 2 --batch-size {G // 2}"),
            "pp2-1f1b": (2, 1, f"--pipeline-stages 2 --micro-batches 4 --pipeline-schedule 1f1b --batch-size {G}"),
            "tp2": (2, 1, f"--tensor-parallel 2 --batch-size {G}"),
            "dp4-pack": (4, 2, f"--strategy allreduce --batch-size {G // 4}"),
            "dp2xtp2-pack": (4, 2, f"--tensor-parallel 2 --placement pack --batch-size {G // 2}"),
            "dp2xtp2-spread": (4, 2, f"--tensor-parallel 2 --placement spread --batch-size {G // 2}"),
        }
    return {
        "dp4": (4, 1, f"--strategy allreduce --batch-size {G // 4}"),
        "dp4-zero1": (4, 1, f"--strategy allreduce --zero 1 --batch-size {G // 4}"),
        "dp4-zero2": (4, 1, f"--strategy allreduce --zero 2 --batch-size {G // 4}"),
        "dp4-zero3": (4, 1, f"--strategy allreduce --zero 3 --batch-size {G // 4}"),
        "dp4-powersgd": (4, 1, f"--strategy allreduce {comp} --batch-size {G // 4}"),
        "ps1x3": (3, 1, f"--strategy ps --servers 1 --consistency sync --batch-size {G // 3 // 4 * 4}"),
        "pp4-gpipe": (4, 1, f"--pipeline-stages 4 --micro-batches 4 --pipeline-schedule gpipe --batch-size {G}"),
        "pp4-1f1b": (4, 1, f"--pipeline-stages 4 --micro-batches 4 --pipeline-schedule 1f1b --batch-size {G}"),
        "dp2xpp2-interleaved": (4, 1, f"--pipeline-stages 2 --virtual-stages 2 --micro-batches 4 "
                                      f"--pipeline-schedule 1f1b --batch-size {G // 2}"),
        "tp4": (4, 1, f"--tensor-parallel 4 --batch-size {G}"),
        "dp2xtp2": (4, 1, f"--tensor-parallel 2 --batch-size {G // 2}"),
        "dp8-pack": (8, 2, f"--strategy allreduce --batch-size {G // 8}"),
        "dp4xtp2-pack": (8, 2, f"--tensor-parallel 2 --placement pack --batch-size {G // 4}"),
        "dp4xtp2-spread": (8, 2, f"--tensor-parallel 2 --placement spread --batch-size {G // 4}"),
    }


def sh(cmd, **kw):
    print("+", cmd, file=sys.stderr, flush=True)
    return subprocess.run(cmd, shell=True, capture_output=True, text=True, **kw)


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line")


def kendall_tau(xs, ys):
    n, s = len(xs), 0
    for i in range(n):
        for j in range(i + 1, n):
            a, b = xs[i] - xs[j], ys[i] - ys[j]
            s += (a * b > 0) - (a * b < 0)
    return 2 * s / (n * (n - 1)) if n > 1 else float("nan")


def largest_peak(pred, every_rank=True):
    """The largest rank's predicted peak (what decides whether a configuration
    fits); rows measured before every rank's peak was kept compare rank 0's."""
    peaks = [r["peak"] for r in pred["memory_per_rank"]]
    return max(peaks) if every_rank else peaks[0]


def rank_peaks_mib(pred):
    """Every rank's predicted peak, MiB."""
    return [round(x["peak"] / 2**20, 3) for x in pred["memory_per_rank"]]


def rank_worst(r):
    """The largest error of any one rank's predicted peak (0 where the row lacks them)."""
    pred, meas = r.get("pred_peaks_mib", []), r.get("meas_peaks_mib", [])
    if not pred or len(pred) != len(meas):
        return 0.0
    return max(((p - m) / m for p, m in zip(pred, meas)), key=abs)


def lossless_one_per_host(slug, per_host):
    """What dtrain plan's first choice is compared with: lossless, one rank per host."""
    return per_host == 1 and "powersgd" not in slug and not slug.startswith("plan-choice")


def measured_best(rows, limit_mib=math.inf):
    """The fastest measured lossless one-rank-per-host row whose measured peak fits
    `limit_mib` (dtrain plan ranks lossless configurations first: its choice is
    compared with the best of those); None where none fits."""
    cands = [r for r in rows if lossless_one_per_host(r["config"], r["ranks_per_host"])
             and r["meas_peak_mib"] <= limit_mib]
    return max(cands, key=lambda r: r["meas_samples_per_s"]) if cands else None


def during_summary(rows):
    """MAE, worst and Kendall's tau of the predictions made from the profiles taken during the runs."""
    return {"tau_during": round(kendall_tau([r["pred_during_samples_per_s"] for r in rows],
                                            [r["meas_samples_per_s"] for r in rows]), 3),
            "step_mae_during": round(statistics.mean(abs(r["step_err_during"]) for r in rows), 3),
            "step_worst_during": max((r["step_err_during"] for r in rows), key=abs)}


def toml_path(d, r):
    return os.path.join(d, f"{r['model']}-{r['rate']}-h{r['hosts']}-{r['config']}.toml")


def same_config(toml_a, toml_b):
    """Whether two TOML files say the same but for comments (False where one is missing)."""
    def text(path):
        try:
            return [l for l in open(path).read().splitlines() if not l.startswith("#")]
        except OSError:
            return None
    return text(toml_a) is not None and text(toml_a) == text(toml_b)


def plan_vs_best(d, plan, best):
    """The plan's choice's measured samples/s over the measured best's; 1 where the
    plan chose that very configuration: two sets of runs of one configuration differ
    by noise alone (the mlp's tp 4 at 1 Gbit/s, 9 runs each: medians 5.57 and 5.14
    ms), which says nothing of the choice."""
    if same_config(toml_path(d, plan), toml_path(d, best)):
        return 1.0
    return plan["meas_samples_per_s"] / best["meas_samples_per_s"]


def memory_limit(entries):
    """The memory-limited scenario's limit, bytes: the median of the predicted
    largest peaks of the lossless one-rank-per-host configurations, rounded up
    to a MiB (about half of them fit)."""
    peaks = [largest_peak(e[5]) for e in entries if lossless_one_per_host(e[0], e[3])]
    return math.ceil(statistics.median(peaks) / 2**20) * 2**20 if len(peaks) >= 2 else None


def logged_every_step(toml, out=None):
    """The configuration with log_every = 1 (written to `out`, else in place): the runs
    record every step's time, and every logged step sums the loss over the ranks, which
    the prediction counts too."""
    text = re.sub(r"(?m)^log_every = \d+$", "log_every = 1", open(toml).read())
    with open(out or toml, "w") as f:
        f.write(text)
    return out or toml


def long_enough(toml, model, step_s, warmup):
    """Sets the TOML's max_steps (and epochs, where fewer) so that the run's steps
    after `warmup` last about STEADY_S at the predicted `step_s`, within the
    model's steps..max_steps; returns the steps."""
    m = MODELS[model]
    steps = max(m["steps"], min(m["max_steps"], warmup + math.ceil(STEADY_S / max(step_s, 1e-6))))
    text = re.sub(r"(?m)^max_steps = \d+$", f"max_steps = {steps}", open(toml).read())
    text = re.sub(r"(?m)^epochs = (\d+)$", lambda e: f"epochs = {max(int(e.group(1)), steps)}", text)
    with open(toml, "w") as f:
        f.write(text)
    return steps


def predicted(a, model, slug, base, per_host, choice, machine):
    """The entry of one configuration whose TOML is base.toml: logged every step,
    predicted, its steps set from the prediction; None where simulate fails.
    (slug, base, toml, ranks per host, plan's choice or None, prediction, runs)"""
    toml = logged_every_step(base + ".toml")
    sim = sh(f"{a.dtrain} simulate --config {toml} --machine {machine} --hosts {a.hosts}")
    if sim.returncode != 0:
        print(f"{slug}: simulate failed: {sim.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    pred = last_json(sim.stdout)
    long_enough(toml, model, pred["step_s"], a.warmup)
    return (slug, base, toml, per_host, choice, pred, [])


def reprofile(a, model, machine, out):
    """`machine` with its compute and `model` measured again now (dtrain calibrate
    --from: the links kept; the file's micro-batch sizes); None where it fails."""
    sizes = ",".join(sorted(json.load(open(machine))["models"][model]["micro_batches"], key=int))
    r = sh(f"{a.dtrain} calibrate --from {machine} --models {model} --micro-batches {sizes} --out {out}")
    if r.returncode != 0:
        print(f"{model}: calibrate --from failed: {r.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return out


def median_json(values):
    """The elementwise median of JSON values of one shape (numbers: their median;
    anything else: the first's)."""
    v0 = values[0]
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return v0 if all(v == v0 for v in values) else statistics.median(values)
    if all(isinstance(v, dict) for v in values):
        return {k: median_json([v[k] for v in values]) if all(k in v for v in values) else v0[k] for k in v0}
    if all(isinstance(v, list) and len(v) == len(v0) for v in values):
        return [median_json(list(x)) for x in zip(*values)]
    return v0


def measure(a, model, toml, ranks, per_host, base):
    metrics = base + ".metrics.jsonl"
    if os.path.exists(metrics):
        os.remove(metrics)
    out = sh(f"{NETSIM} mpirun -np {ranks} --ranks-per-host {per_host} -- {a.dtrain} train --config {toml} "
             f"--progress off --metrics {metrics}", timeout=600)
    if out.returncode != 0:
        return None, out.stderr.strip()[-400:]
    line = last_json(out.stdout)
    with open(metrics) as f:
        recs = [r for r in map(json.loads, f) if "samples_per_s" in r and "step" in r]
    # PowerSGD runs plain allreduce steps first (--compress-start-step, 10 by default).
    text = open(toml).read()
    start = 0
    if '"powersgd"' in text:
        for l in text.splitlines():
            if l.startswith("start_step = "):
                start = int(l.split("=")[1])
    steady = [r["samples_per_s"] for r in recs if r["step"] > max(a.warmup, start)]
    return {"samples_per_s": statistics.median(steady), "run_samples_per_s": line["samples_per_s"],
            "peaks": [r["peak"] for r in line["memory_per_rank"]]}, ""


def during_fixed(rows):
    """during_summary of the rows, or None where a row lacks the second prediction."""
    return during_summary(rows) if rows and all("step_err_during" in r for r in rows) else None


def during_cell(rows, tau_only=False):
    d = during_fixed(rows)
    if not d:
        return "-"
    if tau_only:
        return f"tau {d['tau_during']:.2f}"
    return f"{100 * d['step_mae_during']:.0f}%, {100 * d['step_worst_during']:+.0f}%, {d['tau_during']:.2f}"


# The simulator's bars on the 4-host scenarios (a round's held-out 2-host rows are
# reported, not held to them): what `--report --check` asserts of a recorded round.
BARS = {"step_mae": 0.10, "step_worst": 0.25, "mem_mae": 0.05, "tau": 0.80}


def missed_bars(rows):
    """The bars that the fixed (not plan-choice) 4-host rows miss, one line each."""
    fixed = [r for r in rows if r["hosts"] == 4 and not r["config"].startswith("plan-choice")]
    if not fixed:
        return ["no 4-host rows"]
    missed = []
    mae = statistics.mean(abs(r["step_err"]) for r in fixed)
    worst = max(fixed, key=lambda r: abs(r["step_err"]))
    mem = statistics.mean(abs(r["mem_err"]) for r in fixed)
    if mae > BARS["step_mae"]:
        missed.append(f"step MAE {100 * mae:.1f}% > {100 * BARS['step_mae']:.0f}%")
    if abs(worst["step_err"]) > BARS["step_worst"]:
        missed.append(f"worst step {100 * worst['step_err']:+.0f}% ({worst['model']} {worst['rate']} "
                      f"{worst['config']}) beyond {100 * BARS['step_worst']:.0f}%")
    if mem > BARS["mem_mae"]:
        missed.append(f"memory MAE {100 * mem:.1f}% > {100 * BARS['mem_mae']:.0f}%")
    groups = {}
    for r in fixed:
        groups.setdefault((r["model"], r["rate"]), []).append(r)
    for (model, rate), rs in sorted(groups.items()):
        tau = kendall_tau([r["pred_samples_per_s"] for r in rs], [r["meas_samples_per_s"] for r in rs])
        if tau < BARS["tau"]:
            missed.append(f"Kendall tau {tau:.2f} < {BARS['tau']:.2f} ({model} x {rate})")
    return missed


def report(a):
    """--report ROWS: the tables (markdown) from the rows a run appended; with
    --resimulate, predictions made again by this dtrain from the saved TOML files
    against the same measurements (the model changed, the runs did not)."""
    # A configuration run again (a fixed script) replaces its earlier row.
    latest = {}
    for r in map(json.loads, open(a.report)):
        if "summary" not in r:
            latest[(r["model"], r["rate"], r["hosts"], r["config"])] = r
    rows = list(latest.values())
    machines = {}
    for r in map(json.loads, open(a.report)):
        if r.get("summary") == "all" and (r["hosts"] == 4 or r["rate"] not in machines):
            # The machine file beside the rows (--dir), else where the run left it.
            path, beside = r["machine"], os.path.join(a.dir, os.path.basename(r["machine"]))
            machines[r["rate"]] = beside if os.path.exists(beside) else path
    if a.resimulate:
        for r in rows:
            toml = toml_path(a.dir, r)
            # Rows measured before the TOML files said so ran with --log-every 1.
            toml = logged_every_step(toml, os.path.join(tempfile.gettempdir(), f"plan_vs_measured-{os.getpid()}.toml"))
            # The row's own machine file (the model profiled before its runs), else the pass's.
            own = os.path.join(a.dir, os.path.basename(r.get("machine", "")))
            machine = own if r.get("machine") and os.path.exists(own) else machines[r["rate"]]
            sim = subprocess.run(f"{a.dtrain} simulate --config {toml} --machine {machine} "
                                 f"--hosts {r['hosts']}", shell=True, capture_output=True, text=True)
            pred = last_json(sim.stdout)
            per_step = r["meas_step_ms"] * r["meas_samples_per_s"] / 1e3
            r["pred_step_ms"] = round(1e3 * pred["step_s"], 2)
            r["pred_samples_per_s"] = round(per_step / pred["step_s"], 1)
            r["pred_peak_mib"] = round(largest_peak(pred, "meas_peaks_mib" in r) / 2**20, 2)
            r["pred_peaks_mib"] = rank_peaks_mib(pred)
            r["dominant"] = pred["dominant"]
            r["step_err"] = round(r["pred_step_ms"] / r["meas_step_ms"] - 1, 3)
            r["mem_err"] = round(r["pred_peak_mib"] / r["meas_peak_mib"] - 1, 3)
    print("| model | rate | hosts | configuration | ranks | predicted ms | measured ms | error | "
          "predicted MiB | measured MiB | error | dominant (predicted) | load |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        name = r["config"] + (f" ({r['plan_choice']})" if r.get("plan_choice") else "")
        print(f"| {r['model']} | {r['rate']} | {r['hosts']} | {name} | {r['ranks']} | {r['pred_step_ms']:.1f} | "
              f"{r['meas_step_ms']:.1f} | {100 * r['step_err']:+.0f}% | {r['pred_peak_mib']:.2f} | "
              f"{r['meas_peak_mib']:.2f} | {100 * r['mem_err']:+.0f}% | {r['dominant']} | {r['load']} |")
    print()
    print("| scenario | configurations | step MAE | worst | memory MAE | worst | any rank's worst | Kendall tau | "
          "plan's choice | measured best | plan / best | profiled during the runs: step MAE, worst, tau |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    groups = {}
    for r in rows:
        groups.setdefault((r["model"], r["rate"], r["hosts"]), []).append(r)
    allfixed = {4: [], 2: []}
    for (model, rate, hosts), rs in groups.items():
        fixed = [r for r in rs if not r["config"].startswith("plan-choice")]
        allfixed[hosts if hosts in allfixed else 4] += fixed
        tau = kendall_tau([r["pred_samples_per_s"] for r in fixed], [r["meas_samples_per_s"] for r in fixed])
        worst = max(fixed, key=lambda r: abs(r["step_err"]))
        mworst = max(fixed, key=lambda r: abs(r["mem_err"]))
        rworst = max(fixed, key=lambda r: abs(rank_worst(r)))
        pc = [r for r in rs if r["config"] == "plan-choice"]
        best = measured_best(fixed)
        pcs = (f"{pc[0]['plan_choice']} | {best['config']} | {plan_vs_best(a.dir, pc[0], best):.2f}"
               if pc and best else "- | - | -")
        print(f"| {model} x {rate} x {hosts} hosts | {len(fixed)} | "
              f"{100 * statistics.mean(abs(r['step_err']) for r in fixed):.0f}% | "
              f"{100 * worst['step_err']:+.0f}% ({worst['config']}) | "
              f"{100 * statistics.mean(abs(r['mem_err']) for r in fixed):.0f}% | "
              f"{100 * mworst['mem_err']:+.0f}% ({mworst['config']}) | "
              f"{100 * rank_worst(rworst):+.0f}% ({rworst['config']}) | {tau:.2f} | {pcs} | {during_cell(fixed)} |")
        # The memory-limited scenario: the configurations whose measured peak fits.
        for pm in (r for r in rs if r["config"] == "plan-choice-mem"):
            limit = pm["memory_limit_mib"]
            fit = [r for r in fixed if r["meas_peak_mib"] <= limit]
            best = measured_best(fit)
            if len(fit) < 2 or not best:
                continue
            tau = kendall_tau([r["pred_samples_per_s"] for r in fit], [r["meas_samples_per_s"] for r in fit])
            print(f"| {model} x {rate} x {hosts} hosts x {limit:.0f} MiB | {len(fit)} fit | - | - | - | - | - | "
                  f"{tau:.2f} | {pm['plan_choice']} | {best['config']} | "
                  f"{plan_vs_best(a.dir, pm, best):.2f} | {during_cell(fit, tau_only=True)} |")
    for hosts, fixed in allfixed.items():
        if fixed:
            print(f"\n{hosts} hosts, all: {len(fixed)} configurations, step MAE "
                  f"{100 * statistics.mean(abs(r['step_err']) for r in fixed):.1f}%, worst "
                  f"{100 * max((r['step_err'] for r in fixed), key=abs):+.0f}%, memory MAE "
                  f"{100 * statistics.mean(abs(r['mem_err']) for r in fixed):.1f}%, any rank's memory worst "
                  f"{100 * max((rank_worst(r) for r in fixed), key=abs):+.0f}%"
                  + (f"; profiled during the runs: step MAE {100 * d['step_mae_during']:.1f}%, worst "
                     f"{100 * d['step_worst_during']:+.0f}%" if (d := during_fixed(fixed)) else ""))
    if a.check:
        missed = missed_bars(rows)
        for m in missed:
            print(f"plan_vs_measured.py: {a.report}: {m}", file=sys.stderr)
        return 1 if missed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rate", default="100mbit")
    p.add_argument("--hosts", type=int, default=4)
    p.add_argument("--machine", help="a machine file (default: dtrain calibrate --netsim 4 --rate R first)")
    p.add_argument("--models", default="mlp,gpt-small")
    p.add_argument("--only", help="configuration slugs, comma-separated")
    p.add_argument("--held-out", action="store_true", help="the 2-host configurations")
    p.add_argument("--warmup", type=int, default=3, help="steps not counted")
    p.add_argument("--dir", default="/tmp/plan_vs_measured")
    p.add_argument("--dtrain", default=os.path.join(ROOT, "build", "dtrain"))
    p.add_argument("--json-out", help="append every row and the summary here (JSON lines)")
    p.add_argument("--no-plan", action="store_true", help="skip dtrain plan's first choice")
    p.add_argument("--plan-only", action="store_true", help="only dtrain plan's first choice")
    p.add_argument("--report", help="print the tables from a --json-out file and exit")
    p.add_argument("--repeats", type=int, default=3,
                   help="runs of each configuration, in turn; the median counts")
    p.add_argument("--decide", type=int, default=3,
                   help="more runs each of the plan's choice and the measured best where they differ")
    p.add_argument("--resimulate", action="store_true", help="with --report: predict again with this dtrain")
    p.add_argument("--check", action="store_true",
                   help="with --report: exit 1 naming each of the simulator's bars (BARS) the rows miss")
    p.add_argument("--no-reprofile", dest="reprofile", action="store_false",
                   help="skip profiling the model again around the runs (dtrain calibrate --from) and the "
                        "second prediction from those profiles")
    a = p.parse_args()
    if a.report:
        return report(a)
    os.makedirs(a.dir, exist_ok=True)
    models = a.models.split(",")
    machine = a.machine
    if not machine:
        machine = os.path.join(a.dir, f"machine-{a.rate}.json")
        out = sh(f"{a.dtrain} calibrate --netsim 4 --rate {a.rate} --models {','.join(models)} --out {machine}")
        if out.returncode != 0:
            sys.exit(f"plan_vs_measured.py: calibrate failed: {out.stderr.strip()[-400:]}")
    load0 = os.getloadavg()
    rows, summary = [], []
    lock = open("/tmp/netsim.lock", "w")
    print("waiting for /tmp/netsim.lock", file=sys.stderr, flush=True)
    fcntl.flock(lock, fcntl.LOCK_EX)
    up = sh(f"{NETSIM} up {a.hosts} --rate {a.rate}")
    if up.returncode != 0:
        sys.exit(f"plan_vs_measured.py: netsim: {up.stderr.strip()}")
    t0 = time.time()
    try:
        for model in models:
            cfgs = configs(model, a.hosts, a.held_out)
            only = set(a.only.split(",")) if a.only else None
            scen = []
            # The model profiled right before its runs (dtrain calibrate --from:
            # the links from the pass's calibration) predicts them, as a user
            # calibrates before training: a VM's speed moves 1.5x within the
            # minutes the other model's runs take (gpt-small's forward at
            # micro-batch 4: 12.5 ms at 11:30, 19.8 at 13:52 on 2026-11-28).
            mmachine = machine
            profiles = []
            fresh = False  # a profile taken just now stands for the next pass's
            if a.reprofile:
                upfront = os.path.join(a.dir, f"machine-{a.rate}-h{a.hosts}-{model}.json")
                if reprofile(a, model, machine, upfront):
                    mmachine = upfront
                    profiles.append(upfront)
                    fresh = True
            # Predict every configuration first (the memory limit needs them all),
            # then run them --repeats times in turn (alternating, so a slow minute
            # of the machine hits each one once at most).
            ready = []
            for slug, spec in cfgs.items():
                base = os.path.join(a.dir, f"{model}-{a.rate}-h{a.hosts}-{slug}")
                toml = base + ".toml"
                _, per_host, flags = spec
                out = sh(f"{a.dtrain} train --model {model} --workers {spec[0]} --backend mpi "
                         f"--max-steps {MODELS[model]['steps']} {MODELS[model]['extra']} {flags} --print-config")
                if out.returncode != 0:
                    print(f"{slug}: refused: {out.stderr.strip()[-300:]}", file=sys.stderr)
                    continue
                with open(toml, "w") as f:
                    f.write(out.stdout)
                entry = predicted(a, model, slug, base, per_host, None, mmachine)
                if entry:
                    ready.append(entry)

            def plan_entry(slug, flags=""):
                """dtrain plan's first (lossless) choice on hosts x 1 rank, predicted."""
                base = os.path.join(a.dir, f"{model}-{a.rate}-h{a.hosts}-{slug}")
                # The runs' own steps and data as the base every candidate starts from.
                with open(base + ".base.toml", "w") as f:
                    f.write(MODELS[model]["base"])
                out = sh(f"{a.dtrain} plan --model {model} --global-batch {MODELS[model]['batch']} "
                         f"--hosts {a.hosts} --ranks-per-host 1 --machine {mmachine} --top 1 --json "
                         f"--config {base}.base.toml --write-config {base}.toml {flags}")
                if out.returncode != 0:
                    print(f"plan failed: {out.stderr.strip()[-300:]}", file=sys.stderr)
                    return None
                choice = json.loads(out.stdout.strip().splitlines()[0])["summary"]
                return predicted(a, model, slug, base, 1, choice, mmachine)

            limit = None if a.held_out else memory_limit(ready)
            planned, mem_entry = [], None
            if not a.no_plan and not a.held_out:
                planned = [e for e in [plan_entry("plan-choice")] if e]
                if limit:
                    mem_entry = plan_entry("plan-choice-mem", f"--memory-per-rank {limit}")
            planned = [e for e in planned if not only or e[0] in only]
            if mem_entry and (only and "plan-choice-mem" not in only):
                mem_entry = None
            if mem_entry:
                same = [e for e in planned if e[4] == mem_entry[4]]
                if same:  # the same configuration: its runs count for both
                    mem_entry = mem_entry[:6] + (same[0][6],)
                else:
                    planned.append(mem_entry)
            to_run = planned + ([] if a.plan_only else [e for e in ready if not only or e[0] in only])
            # The rows: what ran, and the memory-limited choice where it shares another's runs.
            scenario = to_run + ([mem_entry] if mem_entry and all(e is not mem_entry for e in to_run) else [])

            # The model profiled again before each later pass and after the last
            # (--reprofile): the predictions made again from their median (the
            # first, up-front profile among them) describe the machine while the
            # runs ran.
            def profile_now():
                if a.reprofile:
                    out = os.path.join(a.dir, f"machine-{a.rate}-h{a.hosts}-{model}-profile{len(profiles) + 1}.json")
                    if reprofile(a, model, machine, out):
                        profiles.append(out)

            def run_in_turn(entries, times):
                """Runs each entry `times` times, in turn, adding to its runs."""
                nonlocal fresh
                for _ in range(times):
                    if not fresh:
                        profile_now()
                    fresh = False
                    for slug, base, toml, per_host, choice, pred, runs in entries:
                        meas, err = measure(a, model, toml, pred["workers"], per_host, base)  # workers: ps servers too
                        if meas is None:
                            print(f"{slug}: train failed: {err}", file=sys.stderr)
                            continue
                        runs.append(meas)
            run_in_turn(to_run, a.repeats)

            # Each plan's choice against the best lossless configuration on one
            # rank per host (the report's comparison; under the memory limit, of
            # those whose measured peak fits): where they differ, more runs of
            # both, in turn.
            def median_rate(entry):
                return statistics.median(m["samples_per_s"] for m in entry[6]) if entry[6] else 0

            def fits(entry, lim):
                return lim is None or max(max(m["peaks"]) for m in entry[6]) <= lim
            for slug, lim in (("plan-choice", None), ("plan-choice-mem", limit)):
                chosen = [e for e in scenario if e[0] == slug and e[6]]
                others = [e for e in to_run if lossless_one_per_host(e[0], e[3]) and e[6] and fits(e, lim)]
                if chosen and others:
                    best = max(others, key=median_rate)
                    if median_rate(best) > median_rate(chosen[0]) and not same_config(chosen[0][2], best[2]):
                        run_in_turn((chosen[0], best), a.decide)
            during = {}
            if profiles and to_run:
                profile_now()
                path = os.path.join(a.dir, f"machine-{a.rate}-h{a.hosts}-{model}-during.json")
                with open(path, "w") as f:
                    json.dump(median_json([json.load(open(q)) for q in profiles]), f, indent=1)
                for q in profiles:
                    if q != mmachine:
                        os.remove(q)
                for e in scenario:
                    sim = sh(f"{a.dtrain} simulate --config {e[2]} --machine {path} --hosts {a.hosts}")
                    if sim.returncode == 0:
                        during[e[0]] = last_json(sim.stdout)
            for slug, base, toml, per_host, choice, pred, runs in scenario:
                if not runs:
                    continue
                ranks = pred["workers"]
                meas = {"samples_per_s": statistics.median(m["samples_per_s"] for m in runs),
                        "run_samples_per_s": statistics.median(m["run_samples_per_s"] for m in runs),
                        "peaks": [max(ps) for ps in zip(*(m["peaks"] for m in runs))]}
                per_step = pred["samples_per_step"]
                if per_step <= 0:  # ps: workers x batch
                    per_step = pred["samples_per_s"] * pred["step_s"]
                row = {"model": model, "rate": a.rate, "hosts": a.hosts, "config": slug, "ranks": ranks,
                       "ranks_per_host": per_host, "plan_choice": choice,
                       "pred_step_ms": round(1e3 * pred["step_s"], 2),
                       "meas_step_ms": round(1e3 * per_step / meas["samples_per_s"], 2),
                       "meas_runs_step_ms": [round(1e3 * per_step / m["samples_per_s"], 2) for m in runs],
                       "pred_samples_per_s": round(pred["samples_per_s"], 1),
                       "meas_samples_per_s": round(meas["samples_per_s"], 1),
                       "meas_run_samples_per_s": round(meas["run_samples_per_s"], 1),
                       "pred_peak_mib": round(largest_peak(pred) / 2**20, 2),
                       "pred_peaks_mib": rank_peaks_mib(pred),
                       "meas_peak_mib": round(max(meas["peaks"]) / 2**20, 2),
                       "meas_peaks_mib": [round(p / 2**20, 3) for p in meas["peaks"]],
                       "dominant": pred["dominant"], "load": round(os.getloadavg()[0], 1),
                       "machine": mmachine}
                if slug == "plan-choice-mem":
                    row["memory_limit_mib"] = limit / 2**20
                if slug in during:
                    row["pred_during_step_ms"] = round(1e3 * during[slug]["step_s"], 2)
                    row["pred_during_samples_per_s"] = round(during[slug]["samples_per_s"], 1)
                    row["step_err_during"] = round(row["pred_during_step_ms"] / row["meas_step_ms"] - 1, 3)
                row["step_err"] = round(row["pred_step_ms"] / row["meas_step_ms"] - 1, 3)
                row["mem_err"] = round(row["pred_peak_mib"] / row["meas_peak_mib"] - 1, 3)
                print(json.dumps(row), flush=True)
                rows.append(row)
                scen.append(row)
            fixed = [r for r in scen if not r["config"].startswith("plan-choice")]
            if len(fixed) >= 2:
                s = {"summary": True, "model": model, "rate": a.rate, "hosts": a.hosts, "configs": len(fixed),
                     "tau": round(kendall_tau([r["pred_samples_per_s"] for r in fixed],
                                              [r["meas_samples_per_s"] for r in fixed]), 3),
                     "step_mae": round(statistics.mean(abs(r["step_err"]) for r in fixed), 3),
                     "step_worst": max((r["step_err"] for r in fixed), key=abs),
                     "mem_mae": round(statistics.mean(abs(r["mem_err"]) for r in fixed), 3),
                     "mem_worst": max((r["mem_err"] for r in fixed), key=abs)}
                if d := during_fixed(fixed):
                    s.update(d)
                for slug, key in (("plan-choice", ""), ("plan-choice-mem", "_mem")):
                    pc = [r for r in scen if r["config"] == slug]
                    lim = pc[0].get("memory_limit_mib", math.inf) if pc else math.inf
                    best = measured_best(fixed, lim)
                    if pc and best:
                        s["plan_choice" + key] = pc[0]["plan_choice"]
                        s["measured_best" + key] = best["config"]
                        s["plan_vs_best" + key] = round(plan_vs_best(a.dir, pc[0], best), 3)
                        s["plan_within_5pct" + key] = s["plan_vs_best" + key] >= 0.95
                print(json.dumps(s), flush=True)
                summary.append(s)
    finally:
        sh(f"{NETSIM} down")
        fcntl.flock(lock, fcntl.LOCK_UN)
    if any(not r["config"].startswith("plan-choice") for r in rows):
        fixed = [r for r in rows if not r["config"].startswith("plan-choice")]
        tot = {"summary": "all", "rate": a.rate, "hosts": a.hosts, "configs": len(fixed),
               "step_mae": round(statistics.mean(abs(r["step_err"]) for r in fixed), 3),
               "step_worst": max((r["step_err"] for r in fixed), key=abs),
               "mem_mae": round(statistics.mean(abs(r["mem_err"]) for r in fixed), 3),
               "mem_worst": max((r["mem_err"] for r in fixed), key=abs),
               "load_before": [round(x, 1) for x in load0], "load_after": [round(x, 1) for x in os.getloadavg()],
               "minutes": round((time.time() - t0) / 60, 1), "machine": machine,
               "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        if d := during_fixed(fixed):
            tot.update(d)
            del tot["tau_during"]  # across scenarios: not a ranking
        print(json.dumps(tot), flush=True)
        summary.append(tot)
    if a.json_out:
        with open(a.json_out, "a") as f:
            for r in rows + summary:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    sys.exit(main())
