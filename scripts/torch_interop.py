#!/usr/bin/python3
"""PyTorch <-> dtrain checkpoint interoperability (safetensors, without the safetensors package).

Run with /usr/bin/python3 (Debian's interpreter with python3-torch and numpy).

  torch_interop.py load MODEL FILE [--eval]
      Reads a dtrain checkpoint FILE (or any safetensors file), validates its layout as
      strictly as the reference safetensors implementation does, builds MODEL exactly as
      /work/shared/bench/torch_train.py does (mlp | lenet), drops the "optimizer.*" and "strategy.*" keys and
      calls load_state_dict(strict=True). Prints one line "ok: ..." with the tensor count and
      the dtrain metadata. With --eval, also prints the Fashion-MNIST test accuracy of the
      loaded model ("test_acc=0.8412"), to compare with dtrain's evaluation of the same file.

  torch_interop.py save MODEL FILE [--seed S] [--train-steps K] [--eval]
      Builds MODEL with torch.manual_seed(S) (default 0), optionally trains it K SGD steps
      (batch 64, lr 0.05, momentum 0.9, as torch_train.py) on Fashion-MNIST, and writes its
      state_dict to FILE as safetensors (hand-written writer) for dtrain to load. With --eval,
      prints the test accuracy, which dtrain must reproduce after loading FILE.

  torch_interop.py selftest DIR
      Round-trips both models' state_dicts through the writer and the reader in DIR (no dtrain
      needed) and checks the byte layout; exits non-zero on any mismatch.

Exit status: 0 on success, 1 on any error (one line on stderr), 2 on bad arguments.
"""
import json
import struct
import sys

import numpy as np
import torch
import torch.nn as nn

FASHION = "/usr/share/datasets/fashion-mnist/"

# safetensors dtype name -> (numpy dtype used to read the bytes, torch dtype)
DTYPES = {
    "F64": (np.float64, torch.float64),
    "F32": (np.float32, torch.float32),
    "F16": (np.float16, torch.float16),
    "BF16": (np.int16, torch.bfloat16),  # numpy has no bfloat16: read raw, reinterpret
    "I64": (np.int64, torch.int64),
    "I32": (np.int32, torch.int32),
    "I16": (np.int16, torch.int16),
    "I8": (np.int8, torch.int8),
    "U8": (np.uint8, torch.uint8),
    "BOOL": (np.bool_, torch.bool),
}
TORCH_TO_NAME = {t: n for n, (_, t) in DTYPES.items()}


class FormatError(Exception):
    pass


def build_model(name):
    """The reference architectures of /work/shared/bench/torch_train.py, same layer indices."""
    if name == "mlp":
        return nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256),
                             nn.ReLU(), nn.Linear(256, 10))
    if name == "lenet":
        return nn.Sequential(nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                             nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                             nn.Linear(84, 10))
    raise FormatError(f"unknown model '{name}' (expected mlp or lenet)")


def read_safetensors(path):
    """Returns ({name: tensor} in data order, metadata dict). Validates like the reference
    implementation: header within the file, tensors contiguous from offset 0 to the end of
    the data section, sizes matching shape and dtype."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise FormatError(f"{path}: too short ({len(data)} bytes)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise FormatError(f"{path}: header length {n} beyond file size {len(data)}")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: bad JSON header ({e})")
    if not isinstance(header, dict):
        raise FormatError(f"{path}: header is not an object")
    metadata = header.pop("__metadata__", {}) or {}
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise FormatError(f"{path}: __metadata__ must map strings to strings")
    body = memoryview(data)[8 + n:]
    entries = sorted(header.items(), key=lambda kv: tuple(kv[1]["data_offsets"]))
    expected_begin = 0
    tensors = {}
    for name, e in entries:
        if e.get("dtype") not in DTYPES:
            raise FormatError(f"{path}: tensor {name}: unknown dtype {e.get('dtype')!r}")
        np_dtype, torch_dtype = DTYPES[e["dtype"]]
        shape = e["shape"]
        begin, end = e["data_offsets"]
        numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if begin != expected_begin:
            raise FormatError(f"{path}: tensor {name}: data_offsets {e['data_offsets']} leave a gap "
                              f"or overlap (expected begin {expected_begin})")
        if end - begin != numel * np.dtype(np_dtype).itemsize:
            raise FormatError(f"{path}: tensor {name}: {end - begin} bytes for shape {shape} "
                              f"of {e['dtype']}")
        if end > len(body):
            raise FormatError(f"{path}: tensor {name}: data_offsets beyond the data section")
        expected_begin = end
        arr = np.frombuffer(body, dtype=np_dtype, count=numel, offset=begin).reshape(shape).copy()
        t = torch.from_numpy(arr)
        tensors[name] = t.view(torch.bfloat16) if torch_dtype == torch.bfloat16 else t
    if expected_begin != len(body):
        raise FormatError(f"{path}: {len(body) - expected_begin} trailing bytes after the last tensor")
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} like the reference writer: larger dtypes first (stable), header
    space-padded to a multiple of 8, little-endian data."""
    items = sorted(tensors.items(), key=lambda kv: -kv[1].element_size())  # stable sort
    header = {}
    if metadata:
        header["__metadata__"] = dict(metadata)
    blobs, offset = [], 0
    for name, t in items:
        t = t.detach().cpu().contiguous()
        if t.dtype not in TORCH_TO_NAME:
            raise FormatError(f"tensor {name}: unsupported dtype {t.dtype}")
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": TORCH_TO_NAME[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def fashion(split):
    import gzip

    def idx(name):
        with gzip.open(FASHION + name) as f:
            data = f.read()
        magic, n = struct.unpack(">II", data[:8])
        if magic == 2051:
            r, c = struct.unpack(">II", data[8:16])
            return np.frombuffer(data, np.uint8, offset=16).reshape(n, 1, r, c)
        return np.frombuffer(data, np.uint8, offset=8)

    prefix = "train" if split == "train" else "t10k"
    x = torch.tensor(idx(f"{prefix}-images-idx3-ubyte.gz"), dtype=torch.float32) / 255.0
    y = torch.tensor(idx(f"{prefix}-labels-idx1-ubyte.gz"), dtype=torch.long)
    return x, y


def evaluate(model):
    x, y = fashion("test")
    model.eval()
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def cmd_load(model_name, path, do_eval):
    tensors, metadata = read_safetensors(path)
    state = {k: v for k, v in tensors.items() if not k.startswith(("optimizer.", "strategy."))}
    model = build_model(model_name)
    model.load_state_dict(state, strict=True)  # raises on missing/unexpected keys or shapes
    dtrain_meta = " ".join(f"{k}={v}" for k, v in sorted(metadata.items()))
    line = (f"ok: loaded {len(state)} model tensors into {model_name} "
            f"({len(tensors) - len(state)} optimizer tensors skipped) {dtrain_meta}").rstrip()
    if do_eval:
        line += f" test_acc={evaluate(model):.4f}"
    print(line)


def cmd_save(model_name, path, seed, train_steps, do_eval):
    torch.manual_seed(seed)
    model = build_model(model_name)
    if train_steps > 0:
        import torch.nn.functional as F
        x, y = fashion("train")
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        perm = torch.randperm(x.shape[0])
        for s in range(train_steps):
            i = perm[(s * 64) % (x.shape[0] - 63):][:64]
            loss = F.cross_entropy(model(x[i]), y[i])
            opt.zero_grad()
            loss.backward()
            opt.step()
    write_safetensors(path, model.state_dict())
    line = f"ok: wrote {len(model.state_dict())} tensors of {model_name} to {path}"
    if do_eval:
        line += f" test_acc={evaluate(model):.4f}"
    print(line)


def cmd_selftest(directory):
    import os
    for name in ("mlp", "lenet"):
        torch.manual_seed(1)
        sd = build_model(name).state_dict()
        sd["extra.count"] = torch.tensor(7, dtype=torch.int64)  # like num_batches_tracked
        sd["extra.half"] = torch.arange(3, dtype=torch.bfloat16)
        path = os.path.join(directory, f"selftest_{name}.safetensors")
        write_safetensors(path, sd, {"model": name})
        with open(path, "rb") as f:
            raw = f.read()
        (n,) = struct.unpack("<Q", raw[:8])
        assert n % 8 == 0, "header not padded to a multiple of 8"
        back, meta = read_safetensors(path)
        assert meta == {"model": name}, meta
        assert list(back) == ["extra.count"] + [k for k in sd if k not in ("extra.count", "extra.half")] \
            + ["extra.half"], list(back)
        for k, v in sd.items():
            assert back[k].dtype == v.dtype and torch.equal(back[k], v), k
        del back["extra.count"], back["extra.half"]
        build_model(name).load_state_dict(back, strict=True)
    print("ok: selftest passed")


def main(argv):
    import argparse
    ap = argparse.ArgumentParser(prog="torch_interop.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("load")
    p.add_argument("model", choices=["mlp", "lenet"])
    p.add_argument("file")
    p.add_argument("--eval", action="store_true")
    p = sub.add_parser("save")
    p.add_argument("model", choices=["mlp", "lenet"])
    p.add_argument("file")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--train-steps", type=int, default=0)
    p.add_argument("--eval", action="store_true")
    p = sub.add_parser("selftest")
    p.add_argument("dir")
    a = ap.parse_args(argv)
    if a.cmd == "load":
        cmd_load(a.model, a.file, a.eval)
    elif a.cmd == "save":
        cmd_save(a.model, a.file, a.seed, a.train_steps, a.eval)
    else:
        cmd_selftest(a.dir)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (FormatError, RuntimeError, KeyError, ValueError, OSError, AssertionError) as e:
        print("torch_interop: error: " + " ".join(str(e).split()), file=sys.stderr)
        sys.exit(1)
