#!/usr/bin/env python3
"""Images decoded + augmented per second by one loader thread: dtrain's
(bench/ImageDecodeBench.cpp: libjpeg-turbo/libpng, RandomResizedCrop + flip +
normalise in C++) against torchvision's transforms on PIL (the work one
DataLoader worker does per sample), and PyTorch's DataLoader with one worker
process over torchvision's ImageFolder, on the same JPEG files; rounds
alternate, medians reported.

  /usr/bin/python3 bench/image_loader.py --bench build/bench/image_decode_bench \
      [--images 200] [--size 224] [--rounds 5] [--width 500 --height 375]

The JPEGs (ImageNet's typical 500x375, quality 90, smooth noise so they
compress like photos) are written to a temporary folder with PIL."""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

import numpy as np
import torch
import torchvision
from PIL import Image
from torchvision import transforms


def write_images(root, n, width, height):
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        small = rng.integers(0, 256, size=(height // 16, width // 16, 3), dtype=np.uint8)
        img = Image.fromarray(small).resize((width, height), Image.BICUBIC)
        d = os.path.join(root, "train", "c%d" % (i % 2))
        os.makedirs(d, exist_ok=True)
        paths.append(os.path.join(d, "%05d.jpg" % i))
        img.save(paths[-1], quality=90)
    return paths


def torchvision_pipeline(size):
    return transforms.Compose([
        transforms.RandomResizedCrop(size), transforms.RandomHorizontalFlip(), transforms.ToTensor(),
        transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))])


def torchvision_round(paths, pipeline):
    start = time.perf_counter()
    for p in paths:
        with open(p, "rb") as f:
            pipeline(Image.open(f).convert("RGB"))
    return len(paths) / (time.perf_counter() - start)


def dataloader_round(root, pipeline, n):
    ds = torchvision.datasets.ImageFolder(os.path.join(root, "train"), transform=pipeline)
    loader = torch.utils.data.DataLoader(ds, batch_size=32, num_workers=1, shuffle=True)
    start = time.perf_counter()
    for _ in loader:
        pass
    return n / (time.perf_counter() - start)


def dtrain_round(bench, size, paths):
    out = subprocess.run([bench, str(size), "1"] + paths, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["images_per_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--images", type=int, default=200)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--width", type=int, default=500)
    ap.add_argument("--height", type=int, default=375)
    a = ap.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as root:
        paths = write_images(root, a.images, a.width, a.height)
        pipeline = torchvision_pipeline(a.size)
        rates = {"dtrain": [], "torchvision": [], "dataloader_1_worker": []}
        for _ in range(a.rounds):  # alternating
            rates["dtrain"].append(dtrain_round(a.bench, a.size, paths))
            rates["torchvision"].append(torchvision_round(paths, pipeline))
            rates["dataloader_1_worker"].append(dataloader_round(root, pipeline, len(paths)))
        med = {k: statistics.median(v) for k, v in rates.items()}
        print(json.dumps({"images": a.images, "size": a.size, "source": "%dx%d JPEG q90" % (a.width, a.height),
                          "rounds": a.rounds, "median_images_per_s": med,
                          "dtrain_over_torchvision": med["dtrain"] / med["torchvision"],
                          "dtrain_over_dataloader": med["dtrain"] / med["dataloader_1_worker"],
                          "all": rates}))


if __name__ == "__main__":
    main()
