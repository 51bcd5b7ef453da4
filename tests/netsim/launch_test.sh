#!/usr/bin/env bash
# CTest `netsim`: `dtrain launch` loses a host and goes on. Three emulated hosts
# (scripts/netsim.sh), one rank each, the mlp on synthetic data, a checkpoint
# every 10 steps; the test hook DTRAIN_TEST_DIE_AT_STEP=25 / DTRAIN_TEST_DIE_RANK=2
# makes host 2's rank _exit(9) after step 25 (then, a second run, host 0's rank 0). The launcher must find host 2 lost,
# restart on hosts 0 and 1 from step 20 with the same global batch (2 x 24 for
# 3 x 16) and finish; the final model must equal (1e-4 relative: only the
# summation order may differ) a run without failures that trains 20 steps on 3
# workers and then 20 on 2 from that checkpoint. What that comparison catches: a
# global batch not kept (2 x 16 after step 20: 0.78 relative difference), a wrong
# seed or model; not where the switch happened (the data order is a function of
# the global step, so switching at 25 gives the same model): steps_redone <= 10
# covers the restart point. No timing checks.
# Exit 77 (CTest SKIP_RETURN_CODE) where network namespaces cannot be made.
#   launch_test.sh NETSIM_SH DTRAIN
set -uo pipefail
netsim="$1" dtrain="$2"

skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces"
for t in ip tc mpirun flock python3; do command -v "$t" >/dev/null || skip "'$t' not found"; done

# Its own instance (names dtrain214-*, subnet 10.213.214.0/24), never a user's network.
export DTRAIN_NETSIM_ID=214 DTRAIN_NETSIM_SH="$netsim"
lockdir=/run/lock; [[ -d $lockdir ]] || lockdir=/tmp
exec 9>"$lockdir/dtrain-netsim-launch-test.lock"
flock -w 900 9 || fail "another launch test held $lockdir/dtrain-netsim-launch-test.lock for 15 minutes"
work=$(mktemp -d)
trap 'bash "$netsim" down >/dev/null 2>&1; rm -rf "$work"' EXIT

probe=dtrain214-probe
ip netns del "$probe" 2>/dev/null
if ! ip netns add "$probe" 2>/dev/null ||
   ! ip -n "$probe" link add name probe0 type veth peer name probe1 2>/dev/null ||
   ! tc -n "$probe" qdisc add dev probe0 root tbf rate 100mbit burst 64kb latency 50ms 2>/dev/null; then
  ip netns del "$probe" 2>/dev/null
  skip "cannot create network namespaces, veth pairs or tbf qdiscs here"
fi
ip netns del "$probe"

common=(--model mlp --dataset synthetic --seed 7 --max-steps 40 --progress off --threads 1)

# A field of the result line $last.
num() { python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$last" "$1"; }

# One elastic run: rank DIE's host dies after step 25; the launcher must go on on KEPT.
launch_case() {  # DIE KEPT
  local die="$1" kept="$2" ck="$work/ckpt$1"
  echo "--- dtrain launch on 3 emulated hosts; host $die's rank dies after step 25"
  # Generous communication timeouts: the ranks share 2 cores with other builds.
  out=$(DTRAIN_COMM_TIMEOUT_MS=120000 DTRAIN_TEST_DIE_AT_STEP=25 DTRAIN_TEST_DIE_RANK=$die \
        timeout 600 "$dtrain" launch --netsim 3 --rate 1gbit --min-hosts 2 -- \
        train "${common[@]}" --batch-size 16 --checkpoint-every 10 --checkpoint-dir "$ck" \
        --save "$work/launched$die.safetensors") || fail "dtrain launch exited $?"
  echo "$out"
  last=$(tail -n 1 <<<"$out")
  [[ "$(num restarts)" == 1 ]] || fail "restarts is '$(num restarts)', not 1"
  [[ "$(num hosts_lost)" == 1 ]] || fail "hosts_lost is '$(num hosts_lost)', not 1"
  redone=$(num steps_redone)
  [[ -n "$redone" ]] && ((redone >= 1 && redone <= 10)) || fail "steps_redone is '$redone', not in 1..10"
  [[ "$(num workers)" == 2 ]] || fail "the final run reports workers '$(num workers)', not 2"
  [[ "$(num global_batch)" == 48 ]] || fail "the final run's global batch is '$(num global_batch)', not 48"
  [[ -n "$(num seconds_to_recover)" ]] || fail "no seconds_to_recover"
  cat "$ck/launch.jsonl"
  grep '"event":"failure"' "$ck/launch.jsonl" | grep -q "\"hosts_lost\":\"$die\"" ||
    fail "launch.jsonl records no loss of host $die"
  grep '"event":"restart"' "$ck/launch.jsonl" | grep -q "\"hosts\":\"$kept\"" ||
    fail "launch.jsonl records no restart on hosts $kept"
}
launch_case 2 0,1
# Host 0 holds rank 0, the reporting rank that writes checkpoints and the result line.
launch_case 0 1,2

echo "--- the same schedule without failures: 20 steps on 3 workers, then 20 on 2"
"$dtrain" train "${common[@]}" --workers 3 --batch-size 16 --max-steps 20 --save "$work/s20.safetensors" >/dev/null ||
  fail "reference run, steps 1..20"
"$dtrain" train "${common[@]}" --workers 2 --batch-size 24 --resume "$work/s20.safetensors" \
  --save "$work/reference.safetensors" >/dev/null || fail "reference run, steps 21..40"

for die in 2 0; do
python3 - "$work/launched$die.safetensors" "$work/reference.safetensors" <<'PY' || fail "the model of the run that lost host $die differs from the reference"
import json, struct, sys
def tensors(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    head = json.loads(b[8:8 + n]); data = b[8 + n:]
    out = {}
    for k, v in head.items():
        if k == "__metadata__" or v["dtype"] != "F32": continue
        s, e = v["data_offsets"]
        out[k] = struct.unpack("<%df" % ((e - s) // 4), data[s:e])
    return out
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
assert a and a.keys() == b.keys(), "different tensors"
worst = 0.0
for k in a:
    num = sum((x - y) ** 2 for x, y in zip(a[k], b[k])) ** 0.5
    den = max(sum(y * y for y in b[k]) ** 0.5, 1e-12)
    worst = max(worst, num / den)
print("largest relative difference of a tensor: %.3g over %d tensors" % (worst, len(a)))
sys.exit(0 if worst <= 1e-4 else 1)
PY
done
echo "launch test passed"
