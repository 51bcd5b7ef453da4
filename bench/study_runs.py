"""Shared by the resumable accuracy studies (large_batch.py, syncbn.py): run one
dtrain command, keep its result line as one JSON line of a file, and read back
what a file already holds so that a stopped study goes on where it was."""
import json
import os
import subprocess
import sys
import time


def rows(path):
    """The JSON lines of `path` (none when it does not exist yet)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def run_dtrain(args, what, script):
    """Runs `args` (a dtrain command); returns its result line and the seconds it
    took, or exits with its last stderr lines when it fails."""
    t0 = time.time()
    p = subprocess.run(args, capture_output=True, text=True)
    if p.returncode != 0:
        print(p.stderr[-2000:], file=sys.stderr)
        raise SystemExit(f"{script}: {what} failed (exit {p.returncode})")
    return json.loads(p.stdout.strip().splitlines()[-1]), round(time.time() - t0, 1)


def append_row(path, row):
    with open(path, "a") as f:
        f.write(json.dumps(row) + "\n")
