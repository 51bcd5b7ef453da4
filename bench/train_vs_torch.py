#!/usr/bin/python3
"""Single-process training throughput: dtrain vs PyTorch (../shared/bench/torch_train.py),
alternating runs on the same machine, medians and ratios.

  bench/train_vs_torch.py [--models mlp,lenet] [--threads 1,2] [--rounds 5] [--epochs 1]

Also runs ../shared/bench/gemm_peak.c (built here) in the same environment (so with the same
OpenBLAS kernels, e.g. the ones OPENBLAS_CORETYPE selects, as dtrain and PyTorch), and reports the fraction of that sgemm peak the mlp training reaches, counting the FLOPs a step
really needs (forward 2*MACs; backward: weight grads of all layers, input grads of layers 2-3).
Prints a markdown table (paste into docs/PERFORMANCE.md) and one JSON line.
"""
import argparse, json, os, re, statistics, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "bench")
DTRAIN = os.path.join(ROOT, "build", "dtrain")

def run_dtrain(model, threads, epochs):
    out = subprocess.run([DTRAIN, "train", "--model", model, "--threads", str(threads),
                          "--epochs", str(epochs), "--progress", "off"],
                         check=True, capture_output=True, text=True).stdout
    j = json.loads(out.strip().splitlines()[-1])
    return j["samples_per_s"], j["test_accuracy"]

def run_torch(model, threads, epochs):
    out = subprocess.run(["/usr/bin/python3", os.path.join(SHARED, "torch_train.py"), model,
                          str(threads), str(epochs)], check=True, capture_output=True, text=True).stdout
    sps = float(re.search(r"samples_per_s=(\d+)", out).group(1))
    acc = float(re.search(r"test_acc=([\d.]+)", out).group(1))
    return sps, acc

def gemm_peak():
    exe = "/tmp/dtrain_gemm_peak"
    if not os.path.exists(exe):
        subprocess.run(["gcc", "-O2", os.path.join(SHARED, "gemm_peak.c"), "-lopenblas", "-o", exe], check=True)
    out = subprocess.run([exe], check=True, capture_output=True, text=True,
                         env=dict(os.environ, OPENBLAS_NUM_THREADS="1")).stdout
    gf = [float(x) for x in re.findall(r"GFLOP/s=([\d.]+)", out)]
    mem = re.search(r"GB/s\(copied bytes\)=([\d.]+)", out)
    return max(gf), float(mem.group(1)) if mem else None

MLP_FLOPS_PER_SAMPLE = 2 * (784 * 256 + 256 * 256 + 256 * 10) * 2 + 2 * (256 * 256 + 256 * 10)

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="mlp,lenet")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--epochs", type=int, default=1)
    a = ap.parse_args()
    rows, summary = [], {}
    for model in a.models.split(","):
        for t in [int(x) for x in a.threads.split(",")]:
            d, p, da, pa = [], [], [], []
            for r in range(a.rounds):  # alternate, so drift hits both sides alike
                s, acc = run_dtrain(model, t, a.epochs); d.append(s); da.append(acc)
                s, acc = run_torch(model, t, a.epochs); p.append(s); pa.append(acc)
                print(f"{model} threads={t} round {r+1}: dtrain {d[-1]:.0f} torch {p[-1]:.0f}", file=sys.stderr)
            md, mp = statistics.median(d), statistics.median(p)
            rows.append((model, t, md, mp, md / mp, statistics.median(da), statistics.median(pa)))
            summary[f"{model}_t{t}"] = {"dtrain": md, "torch": mp, "ratio": md / mp}
    peaks = []
    for _ in range(3):
        peaks.append(gemm_peak())
    blas = (statistics.median(p[0] for p in peaks), statistics.median(p[1] for p in peaks))
    core = os.environ.get("OPENBLAS_CORETYPE", "OpenBLAS's choice")
    print("| model | threads | dtrain samples/s | PyTorch samples/s | ratio | dtrain acc | PyTorch acc |")
    print("|---|---|---|---|---|---|---|")
    for m, t, md, mp, r, da, pa in rows:
        print(f"| {m} | {t} | {md:.0f} | {mp:.0f} | {r:.2f}x | {da:.4f} | {pa:.4f} |")
    for m, t, md, mp, r, da, pa in rows:
        if m == "mlp":
            for name, peak in ((f"OPENBLAS_CORETYPE={core}", blas[0]),):
                print(f"\nmlp threads={t}: {md * MLP_FLOPS_PER_SAMPLE / 1e9:.1f} GFLOP/s = "
                      f"{100 * md * MLP_FLOPS_PER_SAMPLE / 1e9 / peak:.0f}% of sgemm peak {peak:.1f} GFLOP/s ({name}); "
                      f"PyTorch {mp * MLP_FLOPS_PER_SAMPLE / 1e9:.1f} GFLOP/s = {100 * mp * MLP_FLOPS_PER_SAMPLE / 1e9 / peak:.0f}%")
    summary["sgemm_peak_gflops"] = blas[0]
    summary["openblas_coretype"] = core
    summary["memcpy_gbs"] = blas[1]
    print(json.dumps(summary))

if __name__ == "__main__":
    main()
