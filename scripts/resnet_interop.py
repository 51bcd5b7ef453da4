#!/usr/bin/python3
"""dtrain's resnet-20 against the reference PyTorch model of ../shared/bench/torch_resnet.py.

Run with /usr/bin/python3 (Debian's interpreter with python3-torch and numpy).

  resnet_interop.py step FILE [--reference PATH] [--tol T] [--grad-tol G]
      FILE is a safetensors file written by dtrain's test: the model's state_dict before
      the step (torchvision names, BatchNorm buffers included), "input.x" [B, C, H, W],
      "input.y" (I32 [B]), dtrain's "output.logits", "output.loss", "grad.<parameter>"
      and "after.<name>" (every parameter and buffer after one SGD step); metadata lr,
      momentum, weight_decay, blocks (n per stage). Builds torch_resnet.py's ResNet20
      class (its own source, executed without running the script), load_state_dict
      (strict=True), runs one training-mode step (cross-entropy, backward, torch.optim.SGD)
      and checks logits, loss, the updated parameters and the BatchNorm running statistics:
      max |dtrain - torch| <= T * max(1, max |torch|) per tensor (default T 1e-4),
      num_batches_tracked exactly; gradients by |dtrain - torch| / |torch| <= G (L2 norms,
      default G 1e-2: see the comment in step()).

  resnet_interop.py load FILE [--reference PATH]
      FILE is a dtrain checkpoint (`dtrain train --model resnet-20 --save FILE`): drops
      its "optimizer." and "strategy." keys and calls load_state_dict(strict=True).

  resnet_interop.py save FILE [--seed S] [--reference PATH]
      Writes the state_dict of ResNet20 as torch_resnet.py initializes it
      (torch.manual_seed(S)) to FILE, for dtrain to load.

Exit status: 0 when everything matches, 1 on a mismatch or error, 2 on bad arguments.
"""
import argparse
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_interop import read_safetensors, write_safetensors  # noqa: E402

DEFAULT_REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                                 "bench", "torch_resnet.py")


def reference_resnet_class(path):
    """ResNet20 of torch_resnet.py: its source from 'class BasicBlock' to the data section
    ('D = '), executed with the names it uses (the script itself parses flags and trains)."""
    src = open(path).read()
    begin, end = src.index("class BasicBlock"), src.index("\nD = ")
    ns = dict(torch=torch, nn=nn, F=F)
    exec(compile(src[begin:end], path, "exec"), ns)
    return ns["ResNet20"]


def max_err(got, want, floor):
    return (got.double() - want.double()).abs().max().item(), max(floor, want.abs().max().item())


def step(path, reference, tol, grad_tol):
    tensors, meta = read_safetensors(path)
    x, y = tensors["input.x"], tensors["input.y"].long()
    model = reference_resnet_class(reference)(x.shape[1], tensors["fc.weight"].shape[0],
                                              int(meta["blocks"]))
    state = {k: v for k, v in tensors.items()
             if k.split(".")[0] not in ("input", "output", "grad", "after")}
    model.load_state_dict(state, strict=True)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=float(meta["lr"]), momentum=float(meta["momentum"]),
                          weight_decay=float(meta["weight_decay"]))
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    opt.zero_grad()
    loss.backward()
    checks = [("logits", tensors["output.logits"], logits.detach(), 1.0),
              ("loss", tensors["output.loss"], loss.detach(), 1.0)]
    # Gradients by their relative L2 error: an input of a ReLU within rounding
    # of zero can fall on the other side in float32 (dtrain's and torch's
    # convolutions round differently), and with BatchNorm's coupling across the
    # batch that flip moves every gradient below it by up to ~1e-3 of its norm
    # (seen at 1 run in 3); a wrong formula moves them by far more.
    grads = [("grad." + name, tensors["grad." + name], p.grad) for name, p in model.named_parameters()]
    opt.step()
    for name, t in model.state_dict().items():
        if name.endswith("num_batches_tracked"):
            if not torch.equal(tensors["after." + name], t):
                print(f"after.{name}: {tensors['after.' + name].item()} != torch {t.item()}")
                return 1
            continue
        checks.append(("after." + name, tensors["after." + name], t, 1.0))
    bad = 0
    for name, got, want, floor in checks:
        if got.shape != want.shape:
            print(f"{name}: shape {list(got.shape)} != torch {list(want.shape)}")
            bad += 1
            continue
        err, scale = max_err(got, want, floor)
        if not err <= tol * scale:
            print(f"{name}: max |dtrain - torch| = {err:.3g} > {tol} * {scale:.3g}")
            bad += 1
    worst = 0.0
    for name, got, want in grads:
        if got.shape != want.shape:
            print(f"{name}: shape {list(got.shape)} != torch {list(want.shape)}")
            bad += 1
            continue
        rel = ((got.double() - want.double()).norm() / max(1e-30, want.double().norm())).item()
        worst = max(worst, rel)
        if not rel <= grad_tol:
            print(f"{name}: |dtrain - torch| / |torch| = {rel:.3g} > {grad_tol}")
            bad += 1
    if bad:
        return 1
    err, _ = max_err(tensors["output.logits"], logits.detach(), 1.0)
    print(f"ok: {len(checks) + len(grads)} tensors match (logits max err {err:.2g}, "
          f"gradients' worst relative L2 error {worst:.2g}, loss {loss.item():.6f})")
    return 0


def load(path, reference):
    tensors, _ = read_safetensors(path)
    state = {k: v for k, v in tensors.items() if not k.startswith(("optimizer.", "strategy."))}
    blocks = len({k.split(".")[1] for k in state if k.startswith("layer1.")})
    model = reference_resnet_class(reference)(state["conv1.weight"].shape[1],
                                              state["fc.weight"].shape[0], blocks)
    model.load_state_dict(state, strict=True)
    print(f"ok: {len(state)} tensors loaded strictly ({blocks} blocks per stage)")
    return 0


def save(path, seed, reference):
    torch.manual_seed(seed)
    model = reference_resnet_class(reference)()
    write_safetensors(path, model.state_dict())
    print(f"ok: wrote {len(model.state_dict())} tensors to {path}")
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["step", "load", "save"])
    ap.add_argument("file")
    ap.add_argument("--reference", default=DEFAULT_REFERENCE)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--grad-tol", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.command == "load":
        return load(args.file, args.reference)
    if args.command == "save":
        return save(args.file, args.seed, args.reference)
    return step(args.file, args.reference, args.tol, args.grad_tol)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
