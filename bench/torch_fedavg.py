#!/usr/bin/python3
"""Peer for dtrain's simulated FedAvg round wall time: the same FedAvg round in PyTorch
(Debian python3-torch), the selected clients trained one after another in one process,
as a straightforward simulation does (mlp or lenet, IID partition of Fashion-MNIST into
100 clients of 600 samples, plain SGD on the clients, averaging weighted by n_k).
Usage: torch_fedavg.py {mlp|lenet} E B clients_per_round rounds [threads] [lr]
Prints one JSON line: median round seconds (evaluation excluded), final test accuracy."""
import json, os, sys, time
os.environ["OPENBLAS_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = sys.argv[6] if len(sys.argv) > 6 else "1"
import numpy as np
import torch, torch.nn as nn, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from torch_interop import fashion  # Fashion-MNIST as float tensors in [0, 1] and labels

model_name, E, B, m, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
threads = int(sys.argv[6]) if len(sys.argv) > 6 else 1
lr = float(sys.argv[7]) if len(sys.argv) > 7 else 0.05
torch.set_num_threads(threads)
torch.manual_seed(0)
xtr, ytr = fashion("train")
xte, yte = fashion("test")

def make():
    if model_name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))

K = 100
clients = torch.randperm(xtr.shape[0]).chunk(K)
server, client = make(), make()
rng = np.random.default_rng(0)
times = []
for r in range(rounds):
    t0 = time.perf_counter()
    chosen = rng.choice(K, m, replace=False)
    glob = [p.detach().clone() for p in server.parameters()]
    total = sum(len(clients[k]) for k in chosen)
    acc = [torch.zeros_like(p) for p in glob]
    for k in chosen:
        with torch.no_grad():
            for p, g in zip(client.parameters(), glob): p.copy_(g)
        opt = torch.optim.SGD(client.parameters(), lr=lr)
        ids = clients[k]
        bs = B if B > 0 else len(ids)
        for _ in range(E):
            perm = ids[torch.randperm(len(ids))]
            for i in range(0, len(perm), bs):
                j = perm[i:i + bs]
                loss = F.cross_entropy(client(xtr[j]), ytr[j])
                opt.zero_grad(); loss.backward(); opt.step()
        with torch.no_grad():
            w = len(ids) / total
            for a, p, g in zip(acc, client.parameters(), glob): a.add_(p - g, alpha=w)
    with torch.no_grad():
        for p, a in zip(server.parameters(), acc): p.add_(a)
    times.append(time.perf_counter() - t0)
with torch.no_grad():
    test_acc = (server(xte).argmax(1) == yte).float().mean().item()
print(json.dumps({"peer": "torch", "torch": torch.__version__, "model": model_name, "E": E, "B": B,
                  "clients_per_round": m, "rounds": rounds, "threads": threads,
                  "round_s_median": sorted(times)[len(times) // 2], "test_accuracy": test_acc}))
