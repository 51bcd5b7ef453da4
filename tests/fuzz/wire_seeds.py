#!/usr/bin/env python3
# Writes the seeds of the wire-message fuzz targets (psmessages, sandblaster, federated): python3 wire_seeds.py CORPUS_DIR
# (make_seeds.sh runs it).
# Parameter-server messages (FuzzPsMessages): byte 0 the channel, then a Header
# (parallel/ps/Protocol.h: kind, worker, 7 int64 counters, lr, waitS, 8 int64
# memory fields, flags, slots: 152 bytes), then the payload.
import json, math, os, struct, sys
c = sys.argv[1]
os.makedirs(f"{c}/psmessages", exist_ok=True)
os.makedirs(f"{c}/sandblaster", exist_ok=True)
os.makedirs(f"{c}/federated", exist_ok=True)
def header(kind, worker=0, step=0, seq=0, version=0, min_clock=0, total=0, opt_steps=0, extra=0,
           lr=0.0, wait_s=0.0, memory=(0,) * 8, flags=0, slots=0):
    return struct.pack("<ii7q2d8qii", kind, worker, step, seq, version, min_clock, total, opt_steps,
                       extra, lr, wait_s, *memory, flags, slots)
floats = lambda *v: struct.pack(f"<{len(v)}f", *v)
def ps(name, channel, body):
    open(f"{c}/psmessages/{name}", "wb").write(bytes([channel]) + body)
ps("seed-init", 0, header(1, total=16, version=3, opt_steps=3, slots=2) + floats(*range(8)))
ps("seed-push", 1, header(2, worker=1, step=5, seq=5, version=4, lr=0.1, flags=1))
ps("seed-pull", 2, header(3, worker=1, step=6, seq=6))
ps("seed-done", 2, header(4, worker=1, step=9, seq=9, wait_s=1.5, memory=(1, 2, 3, 4, 5, 6, 7, 8)))
ps("seed-params", 3, header(5, step=5, version=5, min_clock=4, flags=2))
ps("seed-params-no-live-worker", 3, header(5, step=5, version=5, min_clock=2**63 - 1))
mem = [0] * 8
stats = json.dumps({"server": 0, "updates": 5, "pushes": 15, "dropped": 1, "bytes_in": 100, "bytes_out": 90,
                    "seconds": 0.5, "staleness": [3] + [0] * 32, "applied_per_step": [3, 3],
                    "dropped_per_step": [0, 1], "ssp_max_ahead": 0, "dead_workers": [2],
                    "readmitted_workers": [], "worker_wait_s": [0.1, 0.2, -1], "memory": mem,
                    "worker_memory": [mem, mem, mem]}).encode()
ps("seed-final", 4, header(6, version=5, opt_steps=5, total=16, slots=1, extra=len(stats)) + floats(*range(8)) + stats)
# Malformed: each is one line from the decoder.
ps("seed-bad-negative-step", 1, header(2, step=-1))
ps("seed-bad-nan-lr", 1, header(2, lr=math.nan))
ps("seed-bad-kind", 3, header(6))
ps("seed-bad-slots", 4, header(6, slots=9))
ps("seed-bad-version-overflow", 1, header(2, version=2**63 - 1))

# Sandblaster (FuzzSandblaster): byte 0 the shard's slice (3 floats here), then
# (+5: the run has shards), then records: 0 command (op, a, b, c as doubles), 1 gradient head + slice, 2 reply,
# 3 unit header (20 int64), 4 answer head. Ops: ShardProtocol.h's order.
OPS = ["init", "pairdots", "evalbegin", "evalend", "stepbegin", "backinit", "back", "scale", "forward",
       "finishdir", "steepest", "setx", "pair", "keeppair", "clear", "gatherx", "gatherhistory", "done"]
def cmd(op, a=0.0, b=0.0, c_=0.0):
    return bytes([0]) + struct.pack("<4d", OPS.index(op), a, b, c_)
def vec(*v):  # a vector kInit receives: a byte, then the floats
    return bytes([0]) + floats(*v)
def grad(evaluation, unit, *v):
    return bytes([1]) + struct.pack("<2d", evaluation, unit) + floats(*v)
def reply(v0, v1, pairs):
    return bytes([2]) + struct.pack("<3d", v0, v1, pairs)
def unit_header(kind=0, evaluation=1, unit=0, follow=1, x=(0, 2, [4, 3]), y=(4, 1, [4])):
    h = [kind, evaluation, unit, follow]
    for dtype, dims, shape in (x, y):
        h += [dtype, dims] + shape + [0] * (6 - len(shape))
    return bytes([3]) + struct.pack("<20q", *h)
def answer(evaluation, unit, loss):
    return bytes([4]) + struct.pack("<3d", evaluation, unit, loss)
def sb(name, body, n=3, shards=False):  # byte 0: the slice (mod 5), then whether there are shards
    open(f"{c}/sandblaster/{name}", "wb").write(bytes([n + (5 if shards else 0)]) + body)
step = (cmd("init", 1, 2) + vec(1, 2, 3) + vec(0.1, 0.2, 0.3) + vec(0.3, 0.2, 0.1) + cmd("pairdots", 0)
        + cmd("evalbegin", 1, 2, 8) + grad(1, 0, 1, 1, 1) + grad(1, 1, 2, 2, 2) + grad(1, 1, 9, 9, 9)
        + cmd("evalend", 1) + cmd("stepbegin") + cmd("backinit") + cmd("back", 0, 0.5) + cmd("scale", 1.0)
        + cmd("forward", 0, 0.1) + cmd("finishdir") + cmd("setx", 0.5) + cmd("evalbegin", 2, 1, 8)
        + grad(2, 0, 0.5, 0.5, 0.5) + cmd("evalend", 2) + cmd("pair", 0.5) + cmd("keeppair")
        + cmd("gatherx") + cmd("gatherhistory") + cmd("steepest") + cmd("clear") + grad(-1, -1, 0, 0, 0)
        + cmd("done"))
sb("seed-shard-step", step)
sb("seed-shard-empty-slice", cmd("init", 0, 4) + vec() + cmd("evalbegin", 1, 1, 1) + grad(1, 0)
   + cmd("evalend", 1) + cmd("stepbegin") + cmd("steepest"), n=0)
sb("seed-coordinator", reply(1.0, 2.0, 3) + answer(1, 0, 0.7) + unit_header() + unit_header(follow=0)
   + unit_header(kind=1))
sb("seed-worker-with-shards", unit_header(follow=2) + unit_header(follow=0), shards=True)
sb("seed-bad-nan-op", bytes([0]) + struct.pack("<4d", math.nan, 0, 0, 0))
sb("seed-bad-pair-index", cmd("back", 5, 1.0))
sb("seed-bad-keep-without-pair", cmd("keeppair"))
sb("seed-bad-unit", grad(1, -3, 0, 0, 0) + answer(1, 1e300, 0))
sb("seed-bad-dims", unit_header(x=(0, 7, [1, 1, 1, 1, 1, 1])))
sb("seed-bad-extent-overflow", unit_header(x=(0, 2, [2**40, 2**40])))

# Federated (FuzzFederated): byte 0 the message (even: a host's update during
# round 2; odd: an exchange record), byte 1 the round's client slots (mod 4).
def fed(name, kind, slots, body):
    open(f"{c}/federated/{name}", "wb").write(bytes([kind, slots]) + body)
fed("seed-update", 0, 3, struct.pack("<2qdq", 2, 1, 0.25, 10) + floats(0.1, 0.2, 0.3))
fed("seed-update-late", 0, 3, struct.pack("<2qdq", 1, 1, 0.25, 10) + floats(0.1, 0.2, 0.3))
fed("seed-record", 1, 3, struct.pack("<2d", 0.25, 10.0) + floats(0.1, 0.2, 0.3))
fed("seed-bad-slot", 0, 3, struct.pack("<2qdq", 2, 3, 0.25, 10))
fed("seed-bad-negative-slot", 0, 3, struct.pack("<2qdq", 2, -1, 0.25, 10))
fed("seed-bad-steps", 1, 3, struct.pack("<2d", 0.25, math.nan))
fed("seed-bad-steps-huge", 1, 3, struct.pack("<2d", 0.25, 1e300))
