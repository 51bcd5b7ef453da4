#!/usr/bin/env python3
"""dtrain train --tensorboard DIR, read back by an independent reader.

The event file is parsed with Python's protobuf (Debian's python3-protobuf) against
the fields of TensorBoard's published event.proto and summary.proto (built here as
descriptors), its TFRecord frames checked with a CRC-32C written here; the scalars
must be the numbers of the run's metrics file, step by step.

usage: tensorboard_test.py DTRAIN
"""
import glob
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
except ImportError:
    print("python3-protobuf is not installed (scripts/test.sh installs it): skipped")
    sys.exit(77)

F = descriptor_pb2.FieldDescriptorProto


def event_classes():
    """Event and Summary as tensorflow/core/util/event.proto and
    tensorflow/core/framework/summary.proto define the fields read here."""
    f = descriptor_pb2.FileDescriptorProto(name="tb_event.proto", package="tensorboard")
    value = f.message_type.add(name="Value")
    value.field.add(name="tag", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    value.field.add(name="simple_value", number=2, type=F.TYPE_FLOAT, label=F.LABEL_OPTIONAL)
    summary = f.message_type.add(name="Summary")
    summary.field.add(name="value", number=1, type=F.TYPE_MESSAGE, label=F.LABEL_REPEATED,
                      type_name=".tensorboard.Value")
    event = f.message_type.add(name="Event")
    event.field.add(name="wall_time", number=1, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL)
    event.field.add(name="step", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    event.field.add(name="file_version", number=3, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    event.field.add(name="summary", number=5, type=F.TYPE_MESSAGE, label=F.LABEL_OPTIONAL,
                    type_name=".tensorboard.Summary")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    desc = pool.FindMessageTypeByName("tensorboard.Event")
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frames(path):
    data = open(path, "rb").read()
    at = 0
    while at < len(data):
        (length,) = struct.unpack_from("<Q", data, at)
        (length_crc,) = struct.unpack_from("<I", data, at + 8)
        assert length_crc == masked(data[at:at + 8]), f"length CRC at byte {at}"
        body = data[at + 12:at + 12 + length]
        (body_crc,) = struct.unpack_from("<I", data, at + 12 + length)
        assert body_crc == masked(body), f"data CRC at byte {at}"
        yield body
        at += 12 + length + 4


def main():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    dtrain = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="dtrain-tb-")
    metrics, logdir = os.path.join(tmp, "m.jsonl"), os.path.join(tmp, "tb", "run")
    r = subprocess.run([dtrain, "train", "--dataset", "synthetic", "--synthetic-size", "512",
                        "--epochs", "1", "--log-every", "2", "--eval-every", "4", "--progress", "off",
                        "--metrics", metrics, "--tensorboard", logdir],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    assert len(files) == 1, files
    Event = event_classes()
    events = []
    for body in frames(files[0]):
        e = Event()
        e.ParseFromString(body)
        events.append(e)
    assert events[0].file_version == "brain.Event:2", events[0]
    # Every record with a step: its numbers, as float32, at that step, in order.
    want = []
    for line in open(metrics):
        rec = json.loads(line)
        if "step" not in rec:
            continue
        want.append((rec["step"], {k: v for k, v in rec.items()
                                   if k != "step" and isinstance(v, (int, float))
                                   and not isinstance(v, bool)}))
    got = [(e.step, {v.tag: v.simple_value for v in e.summary.value}) for e in events[1:]]
    assert len(got) == len(want), (len(got), len(want))
    for (gs, gv), (ws, wv) in zip(got, want):
        assert gs == ws, (gs, ws)
        assert set(gv) == set(wv), (gs, set(gv) ^ set(wv))
        for k, v in wv.items():
            assert math.isclose(gv[k], v, rel_tol=1e-6, abs_tol=1e-30), (gs, k, gv[k], v)
    assert any("loss" in v for _, v in got) and any("test_accuracy" in v for _, v in got)
    print(f"{len(got)} events read back from {files[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
