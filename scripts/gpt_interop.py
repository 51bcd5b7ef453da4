#!/usr/bin/python3
"""dtrain's GPT against the reference PyTorch model of ../shared/bench/torch_gpt.py.

Run with /usr/bin/python3 (Debian's interpreter with python3-torch and numpy).

  gpt_interop.py compare FILE [--reference PATH] [--tol T]
      FILE is a safetensors file written by dtrain's test: the model's state_dict
      (nanoGPT keys, lm_head.weight included), "input.tokens" and "input.targets"
      (I32 [B, T]), dtrain's "output.logits" [B, T, V], "output.loss" [] and
      "grad.<parameter>" gradients of the loss; metadata n_layer, n_head, n_embd,
      block. Builds the GPT class defined in torch_gpt.py (its own source, executed
      without running the script), calls load_state_dict(strict=True), and checks
      logits, loss and gradients: max |dtrain - torch| <= T * max(1, max |torch|)
      per tensor (default 1e-4). Prints one line per mismatch and "ok: ..." at the end.

  gpt_interop.py load FILE [--reference PATH]
      FILE is a checkpoint of `dtrain train --model gpt-* --save FILE`: drops its
      "optimizer." keys, builds torch_gpt.py's GPT with the sizes the tensors show
      (n_head does not shape any parameter: 1), calls load_state_dict(strict=True) and
      checks that lm_head.weight is still tied to transformer.wte.weight.

Exit status: 0 when everything matches, 1 on a mismatch or error, 2 on bad arguments.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_interop import read_safetensors  # noqa: E402

DEFAULT_REFERENCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                                 "bench", "torch_gpt.py")


def reference_gpt_class(path):
    """The GPT class of torch_gpt.py: the source between its '# ---- model' and '# ---- data'
    markers, executed with the names it uses (the script itself parses flags and trains)."""
    src = open(path).read()
    begin, end = src.index("# ---- model"), src.index("# ---- data")
    ns = dict(math=math, torch=torch, nn=nn, F=F, VOCAB=256, SDPA=None)
    exec(compile(src[begin:end], path, "exec"), ns)
    return ns["GPT"]


def max_err(got, want, floor):
    return (got - want).abs().max().item(), max(floor, want.abs().max().item())


def compare(path, reference, tol):
    tensors, meta = read_safetensors(path)
    cfg = {k: int(meta[k]) for k in ("n_layer", "n_head", "n_embd", "block")}
    torch.manual_seed(0)
    model = reference_gpt_class(reference)(cfg["n_layer"], cfg["n_head"], cfg["n_embd"], cfg["block"],
                                           False)
    state = {k: v for k, v in tensors.items() if not k.split(".")[0] in ("input", "output", "grad")}
    model.load_state_dict(state, strict=True)
    assert model.lm_head.weight is model.transformer.wte.weight  # the tie survives loading
    x, y = tensors["input.tokens"].long(), tensors["input.targets"].long()
    logits = model(x)
    loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))
    loss.backward()
    # (name, dtrain, torch, floor of the error scale): outputs relative to max(1, max |torch|),
    # gradients (small) relative to their own largest element.
    checks = [("logits", tensors["output.logits"], logits.detach(), 1.0),
              ("loss", tensors["output.loss"], loss.detach(), 1.0)]
    for name, p in model.named_parameters():
        checks.append(("grad." + name, tensors["grad." + name], p.grad, 1e-12))
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
    if bad:
        return 1
    err, _ = max_err(tensors["output.logits"], logits.detach(), 1.0)
    print(f"ok: {len(checks)} tensors match (logits max err {err:.2g}, loss {loss.item():.6f})")
    return 0


def load(path, reference):
    tensors, _ = read_safetensors(path)
    state = {k: v for k, v in tensors.items() if not k.startswith(("optimizer.", "strategy."))}
    n_embd = state["transformer.wte.weight"].shape[1]
    block = state["transformer.wpe.weight"].shape[0]
    n_layer = len({k.split(".")[2] for k in state if k.startswith("transformer.h.")})
    model = reference_gpt_class(reference)(n_layer, 1, n_embd, block, False)
    model.load_state_dict(state, strict=True)
    assert model.lm_head.weight is model.transformer.wte.weight  # the tie survives loading
    assert torch.equal(model.lm_head.weight, state["lm_head.weight"])
    print(f"ok: {len(state)} tensors loaded strictly (n_layer {n_layer}, n_embd {n_embd}, block {block})")
    return 0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["compare", "load"])
    ap.add_argument("file")
    ap.add_argument("--reference", default=DEFAULT_REFERENCE)
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args(argv)
    if args.command == "load":
        return load(args.file, args.reference)
    return compare(args.file, args.reference, args.tol)


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except SystemExit:
        raise
    except Exception as e:  # one line, as torch_interop.py
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
