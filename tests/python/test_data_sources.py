"""dtrain.data.Shards and dtrain.data.ImageFolder as train(data=...): the streamed
sources from Python, on shards and a folder of PNGs this test writes."""
import io
import struct
import tarfile
import zlib

import numpy as np
import pytest

import dtrain


def _png(rgb):
    """A PNG of an [H, W, 3] uint8 array (zlib and struct: no imaging library needed)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, body):
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def _colour_images(n, rng):
    """Images of class 0 (mostly red) and 1 (mostly blue), 16 to 23 pixels a side."""
    for i in range(n):
        label = i % 2
        h, w = rng.integers(16, 24, size=2)
        img = rng.integers(20, 100, size=(h, w, 3))
        img[:, :, 0 if label == 0 else 2] += 120
        yield label, img.astype(np.uint8)


def _add(tar, name, payload):
    info = tarfile.TarInfo(name)
    info.size = len(payload)
    tar.addfile(info, io.BytesIO(payload))


def test_image_folder_and_image_shards_train_above_chance(tmp_path):
    rng = np.random.default_rng(0)
    for split, n in (("train", 80), ("val", 20)):
        for i, (label, img) in enumerate(_colour_images(n, rng)):
            d = tmp_path / "folder" / split / ("red" if label == 0 else "blue")
            d.mkdir(parents=True, exist_ok=True)
            (d / ("%d.png" % i)).write_bytes(_png(img))
    cfg = dtrain.Config(training={"epochs": 3, "batch_size": 10}, logging={"progress": "off"})
    r = dtrain.train(cfg, data=dtrain.data.ImageFolder(str(tmp_path / "folder"), image_size=12,
                                                       normalize=(0.5, 0.5), loader_threads=2))
    assert r["dataset"] == "imagefolder"
    assert r["test_accuracy"] > 0.75  # chance: 0.5
    assert "imagefolder" not in cfg.to_toml()  # the source changed a copy

    for part in range(2):  # the same images as shards of .png members
        with tarfile.open(tmp_path / ("train-%d.tar" % part), "w") as tar:
            for i, (label, img) in enumerate(_colour_images(40, rng)):
                _add(tar, "%d-%03d.png" % (part, i), _png(img))
                _add(tar, "%d-%03d.cls" % (part, i), str(label).encode())
    r = dtrain.train(cfg, data=dtrain.data.Shards(str(tmp_path / "train-{0..1}.tar"), image_size=12))
    assert r["dataset"] == "shards"
    assert r["shards"] == 2


def test_sources_refuse_what_they_cannot_use(tmp_path):
    with pytest.raises(Exception, match="no such file|no file matches"):
        dtrain.train(dtrain.Config(), data=dtrain.data.Shards(str(tmp_path / "none-*.tar")))
    with pytest.raises(ValueError, match="names its own test set"):
        dtrain.train(dtrain.Config(), data=dtrain.data.ImageFolder(str(tmp_path), image_size=8),
                     test=(np.zeros((1, 2)), np.zeros(1)))
