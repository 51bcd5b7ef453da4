#!/usr/bin/python3
"""Peer: PyTorch local SGD (torch.distributed.algorithms.model_averaging's
PeriodicModelAverager: every H steps one allreduce of the flattened
parameters, divided by the world size), Gloo, CPU, Fashion-MNIST mlp.

The model, data path and optimizer are those of $PEERS/torch_ddp_compress.py
(mlp 784-256-256-10, batch 64 per rank, SGD lr 0.05 momentum 0.9, one thread
per process), with a cosine schedule over the run (torch's CosineAnnealingLR,
as dtrain's --schedule cosine). One process per emulated host:
  torch_local_sgd.py --period H --rank I --world-size N --master-addr A [--epochs 3]
Rank 0 prints one JSON line (seconds, samples/s, test accuracy at the end,
bytes it handed to allreduce)."""
import argparse, gzip, json, os, struct, sys, time
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = "1"
import numpy as np
import torch, torch.nn as nn, torch.nn.functional as F, torch.distributed as dist
from torch.distributed.algorithms.model_averaging import averagers

D = "/usr/share/datasets/fashion-mnist/"


def idx(path):
    with gzip.open(D + path) as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 2051:
        r, c = struct.unpack(">II", data[8:16])
        return np.frombuffer(data, np.uint8, offset=16).reshape(n, 1, r, c)
    return np.frombuffer(data, np.uint8, offset=8)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--period", type=int, required=True)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--rank", type=int, required=True)
    p.add_argument("--world-size", type=int, required=True)
    p.add_argument("--master-addr", default="127.0.0.1")
    p.add_argument("--master-port", type=int, default=29560)
    a = p.parse_args()
    os.environ["MASTER_ADDR"] = a.master_addr
    os.environ["MASTER_PORT"] = str(a.master_port)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    dist.init_process_group("gloo", rank=a.rank, world_size=a.world_size)
    n, rank = a.world_size, a.rank
    xtr = torch.tensor(idx("train-images-idx3-ubyte.gz"), dtype=torch.float32) / 255.0
    ytr = torch.tensor(idx("train-labels-idx1-ubyte.gz"), dtype=torch.long)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                          nn.Linear(256, 10))
    for t in model.parameters():  # replicas start equal (DDP would broadcast rank 0's)
        dist.broadcast(t.data, 0)
    param_bytes = sum(t.numel() * t.element_size() for t in model.parameters())
    B = 64
    N = xtr.shape[0]
    shard = N // n
    per_epoch = shard // B
    total = per_epoch * a.epochs
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total)
    averager = averagers.PeriodicModelAverager(period=a.period, warmup_steps=0)
    g = torch.Generator()
    g.manual_seed(1)
    dist.barrier()
    t0 = time.perf_counter()
    steps = syncs = 0
    for ep in range(a.epochs):
        perm = torch.randperm(N, generator=g)[rank * shard:(rank + 1) * shard]
        for i in range(0, per_epoch * B, B):
            ix = perm[i:i + B]
            loss = F.cross_entropy(model(xtr[ix]), ytr[ix])
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            # Averages at its calls 0, H, 2H, ... (torch 1.13 counts from 0).
            syncs += 1 if steps % a.period == 0 else 0
            averager.average_parameters(model.parameters())
            steps += 1
    dist.barrier()
    dt = time.perf_counter() - t0
    if rank == 0:
        xte = torch.tensor(idx("t10k-images-idx3-ubyte.gz"), dtype=torch.float32) / 255.0
        yte = torch.tensor(idx("t10k-labels-idx1-ubyte.gz"), dtype=torch.long)
        with torch.no_grad():
            acc = round((model(xte).argmax(1) == yte).float().mean().item(), 4)
        print(json.dumps({"bench": "torch_local_sgd", "period": a.period, "world_size": n, "epochs": a.epochs,
                          "steps": steps, "syncs": syncs, "seconds": round(dt, 3),
                          "samples_per_s": round(steps * B * n / dt, 1), "test_accuracy": acc,
                          "allreduce_payload_bytes": syncs * param_bytes, "torch": torch.__version__}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
