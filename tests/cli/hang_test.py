"""A hung run's diagnosis names the right rank and call (issue 58; comm/HangReport.h).

Usage: hang_test.py DTRAIN CASE [MPIEXEC]
  local_skip: 3 local ranks, rank 2 does not enter its first collective of step 3
              (DTRAIN_TEST_SKIP_CALL: it waits in a receive instead); --call-timeout 2.
  mpi_skip:   the same under mpirun -np 3.
  local_signal: SIGUSR2 while 2 local ranks run: the files and the line, the run goes on.
  mpi_stop:   mpirun -np 3, rank 1's process stops itself (SIGSTOP) after step 3
              (DTRAIN_TEST_STOP_AT_STEP); --comm-timeout 1.
Each: the run fails (no hang: an outer timeout), one "dtrain: hang:" diagnosis names
the rank and the call the others wait in, and every rank that could wrote its flight
recorder into the run directory (a stopped rank cannot).
"""
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

RUN = ["train", "--model", "mlp", "--dataset", "synthetic", "--synthetic-size", "512",
       "--epochs", "10", "--batch-size", "16", "--max-steps", "20", "--progress", "off"]


def fail(msg, err=""):
    print("FAIL:", msg)
    print(err)
    sys.exit(1)


def run(cmd, env_extra, timeout=90):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1", **env_extra)
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        fail("the run hung", (e.stderr or b"").decode() if isinstance(e.stderr, bytes) else e.stderr)
    return p.returncode, p.stderr


def check(code, err, pattern, run_dir, ranks_with_files):
    if code == 0:
        fail("the run succeeded", err)
    lines = [l for l in err.splitlines() if l.startswith("dtrain: hang: ") and "last 64 calls" not in l]
    if len(lines) != 1:
        fail("expected one diagnosis line, got %d" % len(lines), err)
    if not re.search(pattern, lines[0]):
        fail("the diagnosis does not match %r" % pattern, err)
    for r in ranks_with_files:
        path = os.path.join(run_dir, "flight-rank%d.json" % r)
        if not os.path.exists(path):
            fail("no " + path, err)
        with open(path) as f:
            j = json.load(f)
        if j["rank"] != r or not j["calls"]:
            fail("bad " + path, json.dumps(j)[:500])
        if j["calls"][-1]["kind"] not in ("allreduce", "recv"):
            fail("unexpected last call in " + path, json.dumps(j["calls"][-1]))
    print("ok:", lines[0])


def signal_case(dtrain, run_dir):
    """SIGUSR2 on a running run: each rank's file, and the line naming rank 1, which
    sleeps 3 s a step (--straggler) while rank 0 waits for it; the run goes on. (Its last
    bucket's allreduce may be posted as the sleep begins: then that is what it last did.)"""
    p = subprocess.Popen([dtrain] + RUN + ["--workers", "2", "--max-steps", "3", "--straggler", "1:3000",
                                           "--run-dir", run_dir], stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(run_dir, "config.toml")) and time.time() < deadline:
        time.sleep(0.05)
    time.sleep(1.5)  # inside step 1's straggler sleep (3 s)
    p.send_signal(signal.SIGUSR2)
    try:
        _, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("the run hung")
    if p.returncode != 0:
        fail("the run did not go on after SIGUSR2", err)
    lines = [l for l in err.splitlines() if l.startswith("dtrain: SIGUSR2: ") and "last 64 calls" not in l]
    if len(lines) != 1 or not re.search(r"^dtrain: SIGUSR2: rank 1 \(host [^)]+\) never entered allreduce #\d+ "
                                        r"of step 1 \(last: (straggler delay of step 1|allreduce #\d+ of step 1, ended) [\d.]+ s ago\); "
                                        r"rank 0 waits in it$",
                                        lines[0]):
        fail("no SIGUSR2 line naming rank 1", err)
    for r in (0, 1):
        with open(os.path.join(run_dir, "flight-rank%d.json" % r)) as f:
            if json.load(f)["rank"] != r:
                fail("bad file of rank %d" % r)
    print("ok:", lines[0])


def main():
    dtrain, case = sys.argv[1], sys.argv[2]
    mpiexec = sys.argv[3] if len(sys.argv) > 3 else "mpirun"
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        mpi = [mpiexec, "--oversubscribe", "-np", "3"]
        if case == "local_skip":
            code, err = run([dtrain] + RUN + ["--workers", "3", "--call-timeout", "2", "--run-dir", run_dir],
                            {"DTRAIN_TEST_SKIP_CALL": "2:3"})
            check(code, err, r"^dtrain: hang: rank 2 \(host [^)]+\) never entered allreduce #\d+ of step 3 "
                  r"\(waits in recv from rank 0 \(tag \d+\) of step 3 since [\d.]+ s\); ranks 0, 1 wait in it$",
                  run_dir, [0, 1, 2])
        elif case == "mpi_skip":
            code, err = run(mpi + ["-x", "DTRAIN_TEST_SKIP_CALL", dtrain] + RUN +
                            ["--backend", "mpi", "--call-timeout", "2", "--run-dir", run_dir],
                            {"DTRAIN_TEST_SKIP_CALL": "2:3"})
            check(code, err, r"^dtrain: hang: rank 2 \(host [^)]+\) never entered allreduce #\d+ of step 3 "
                  r"\(waits in recv from rank 0 \(tag \d+\) of step 3 since [\d.]+ s\); ranks 0, 1 wait in it$",
                  run_dir, [0, 1, 2])
        elif case == "mpi_stop":
            code, err = run(mpi + ["-x", "DTRAIN_TEST_STOP_AT_STEP", dtrain] + RUN +
                            ["--backend", "mpi", "--comm-timeout", "1", "--run-dir", run_dir],
                            {"DTRAIN_TEST_STOP_AT_STEP": "1:3"})
            # Rank 1 is described as of its last heartbeat (at most a beat period
            # before it stopped): somewhere in steps 1-3.
            check(code, err, r"^dtrain: hang: rank 1 \(host [^)]+\) never entered allreduce #\d+ of step 3 "
                  r"\(no heartbeat for [\d.]+ s: stopped, dead or cut off; at its last one it "
                  r".*\); ranks 0, 2 wait in it$", run_dir, [0, 2])
        elif case == "local_signal":
            signal_case(dtrain, run_dir)
        else:
            fail("unknown case " + case)


main()
