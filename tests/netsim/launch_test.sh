#!/usr/bin/env bash
# CTest `netsim`: `dtrain launch` on three emulated hosts (scripts/netsim.sh),
# one rank each, the mlp on synthetic data, 100 steps of a global batch of 48,
# a checkpoint every 10 steps, --comm-timeout 15. Once the first attempt has
# finished step 15 the test injects a fault from outside:
#   kill-host   SIGKILL to every dtrain process of host 2
#   kill-rank0  SIGKILL to rank 0 (host 0: the reporter that writes checkpoints)
#   link-down   host 2's link down (ip link set eth0 down in its namespace): its
#               peers wait, fail after --comm-timeout naming it, the probe finds
#               host 2 silent
#   rejoin      link-down with --rejoin, then the link up again once the restarted
#               job trains: host 2 must be back at the following restart
# Each launch must go on without the host from the newest checkpoint (restarts,
# hosts_lost, steps_redone <= --checkpoint-every, the records in launch.jsonl),
# and its final model must equal that of an uninterrupted run of 100 steps on
# 3 x 16 (the data order is a function of the global step, so a kept global
# batch gives the same model up to summation order: 1e-3 relative; a batch not
# kept, 2 x 16, differed by 0.78) and, to 1e-4, that of a run without failures
# that switches worker counts at the steps the launch resumed from. Rank 0's worker sleeps 50 ms a step
# (--straggler 0:50) so that the faults land mid-run. No timing checks: each
# case prints its time from the fault to training again ("recovered in").
# Exit 77 (CTest SKIP_RETURN_CODE) where network namespaces cannot be made.
#   launch_test.sh NETSIM_SH DTRAIN [CASE...]   (default: all four)
set -uo pipefail
netsim="$1" dtrain="$2"
shift 2
cases=("$@")
((${#cases[@]})) || cases=(kill-host kill-rank0 link-down rejoin)

# Its own instance (names dtrain214-*, subnet 10.213.214.0/24).
NETSIM_ID=214 NETSIM_LOCK=dtrain-netsim-launch-test.lock source "$(dirname "$0")/common.sh" python3
export DTRAIN_NETSIM_SH="$netsim"
work=$(mktemp -d)
netsim_on_exit 'rm -rf "$work"'

steps=100
common=(--model mlp --dataset synthetic --seed 7 --max-steps $steps --progress off --threads 1)

# A field of the result line $last.
num() { python3 -c 'import json, sys; print(json.loads(sys.argv[1]).get(sys.argv[2], ""))' "$last" "$1"; }
# The step attempt K's reporter finished last ("" before its first).
progress() { tr -d ' ' <"$ck/launch/attempt-$1/progress" 2>/dev/null; }
wait_step() {  # ATTEMPT STEP: until that attempt has finished STEP (or the launch ended)
  local s
  while kill -0 "$lp" 2>/dev/null; do
    s=$(progress "$1")
    [[ -n "$s" && "$s" -ge "$2" ]] && return 0
    sleep 0.05
  done
  return 1
}
# The dtrain ranks running in emulated host I, by their world rank (all when no rank given).
ranks_on() {  # I [RANK]
  local p
  for p in $(ip netns pids "dtrain214-h$1" 2>/dev/null); do
    [[ "$(cat /proc/$p/comm 2>/dev/null)" == dtrain ]] || continue
    [[ -z "${2:-}" ]] || tr '\0' '\n' </proc/$p/environ 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" || continue
    echo "$p"
  done
}
# The same, asked again for up to 5 s: a scan of /proc can miss a process
# (seen once under ctest -j2: rank 0 running, none found).
ranks_on_retry() {  # I [RANK]
  local pids k
  for k in $(seq 50); do
    pids=$(ranks_on "$@")
    [[ -n "$pids" ]] && { echo "$pids"; return 0; }
    sleep 0.1
  done
}
now() { date +%s.%N; }

launch_case() {  # CASE
  local name="$1" extra=() lost kept restarts=1 rejoined=0 pids
  ck="$work/ckpt-$name"
  case "$name" in
    kill-host|link-down) lost=2 kept=0,1 ;;
    kill-rank0) lost=0 kept=1,2 ;;
    rejoin) lost=2 kept=0,1 restarts=2 rejoined=1 extra=(--rejoin --rejoin-probe 1) ;;
    *) fail "unknown case '$name'" ;;
  esac
  echo "--- $name: dtrain launch on 3 emulated hosts"
  timeout 600 "$dtrain" launch --netsim 3 --rate 1gbit --min-hosts 2 "${extra[@]}" -- \
    train "${common[@]}" --batch-size 16 --checkpoint-every 10 --checkpoint-dir "$ck" \
    --comm-timeout 15 --straggler 0:50 --save "$work/launched-$name.safetensors" >"$work/out" 2>"$work/err" &
  lp=$!
  wait_step 0 15 || { cat "$work/err"; fail "$name: the first attempt ended before step 15"; }
  fault=$(now)
  case "$name" in
    kill-host) pids=$(ranks_on_retry 2); [[ -n "$pids" ]] || fail "no dtrain process on host 2"; kill -9 $pids ;;
    kill-rank0) pids=$(ranks_on_retry 0 0)
      [[ -n "$pids" ]] || { ip netns pids dtrain214-h0; ps -eo pid,comm,args | grep -v grep | grep dtrain; fail "no rank 0 on host 0"; }
      kill -9 $pids ;;
    link-down|rejoin) ip -n dtrain214-h2 link set eth0 down || fail "cannot take host 2's link down" ;;
  esac
  echo "fault after step $(progress 0)"
  if [[ $name == rejoin ]]; then
    wait_step 1 0 || { cat "$work/err"; fail "rejoin: no restarted job trained"; }
    linkup=$(now)
    ip -n dtrain214-h2 link set eth0 up || fail "cannot take host 2's link up"
    echo "host 2's link up again after step $(progress 1) of the restarted job"
  fi
  wait "$lp"
  rc=$?
  grep -v '^\[dtrain info\]' "$work/err"
  ((rc == 0)) || fail "$name: dtrain launch exited $rc"
  last=$(tail -n 1 "$work/out")
  [[ "$(num restarts)" == "$restarts" ]] || fail "$name: restarts is '$(num restarts)', not $restarts"
  [[ "$(num hosts_lost)" == 1 ]] || fail "$name: hosts_lost is '$(num hosts_lost)', not 1"
  [[ "$(num hosts_rejoined)" == "$rejoined" ]] || fail "$name: hosts_rejoined is '$(num hosts_rejoined)', not $rejoined"
  redone=$(num steps_redone)
  [[ -n "$redone" ]] && ((redone >= 0 && redone <= 10)) || fail "$name: steps_redone is '$redone', not in 0..10"
  [[ "$(num global_batch)" == 48 ]] || fail "$name: the final run's global batch is '$(num global_batch)', not 48"
  [[ "$(num steps)" == $steps ]] || fail "$name: the final run reports $(num steps) steps, not $steps"
  cat "$ck/launch.jsonl"
  grep '"event":"failure"' "$ck/launch.jsonl" | grep -q "\"hosts_lost\":\"$lost\"" ||
    fail "$name: launch.jsonl records no loss of host $lost"
  grep '"event":"restart"' "$ck/launch.jsonl" | grep -q "\"hosts\":\"$kept\"" ||
    fail "$name: launch.jsonl records no restart on hosts $kept"
  case "$name" in
    link-down)
      # The peers' line names the host they waited for. It reaches us through
      # mpirun's output forwarding, which the launcher's kill (5 s after the
      # first rank fails: rank 2's own timeout, behind the dead link) may cut
      # off on a loaded machine; then the loss must be the probe's verdict.
      # (The line itself is tested without a launcher: CommTimeout.* in parallel_tests.)
      if grep -q "killing the job" "$work/err" && ! grep -qE "timed out|waited|sent no heartbeat" "$work/err"; then
        grep '"event":"failure"' "$ck/launch.jsonl" | grep -q 'did not answer a probe' ||
          fail "link-down: the job was killed before any timeout line, and host 2's loss is not the probe's"
      else
        grep -q "rank 2" <(grep -E "timed out|waited|sent no heartbeat" "$work/err") || fail "link-down: no line naming rank 2"
      fi ;;
    rejoin)
      grep '"event":"rejoin"' "$ck/launch.jsonl" | grep -q '"hosts_rejoined":"2"' || fail "rejoin: no rejoin record for host 2"
      grep '"event":"restart"' "$ck/launch.jsonl" | tail -n 1 | grep -q '"hosts":"0,1,2"' ||
        fail "rejoin: the last restart is not on hosts 0,1,2"
      [[ "$(num workers)" == 3 ]] || fail "rejoin: the final run has '$(num workers)' workers, not 3" ;;
  esac
  # Time from the fault to the first step trained after it (the launcher's record).
  trained=$(grep '"event":"training"' "$ck/launch.jsonl" | head -n 1 | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["time"])')
  echo "recovered in $(python3 -c "print('%.2f' % ($trained - $fault))") s ($name)"
  if [[ $name == rejoin ]]; then
    # From the link up to the first step trained on all three hosts again.
    back=$(grep '"event":"training"' "$ck/launch.jsonl" | grep '"hosts":"0,1,2"' | head -n 1 |
           python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["time"])') || fail "rejoin: no training record on hosts 0,1,2"
    echo "rejoined in $(python3 -c "print('%.2f' % ($back - $linkup))") s (link up to training on 3 hosts)"
  fi
}

# The same schedule without failures: the worker counts the launch ran, switched
# at the steps it resumed from (launch.jsonl's start/restart records).
same_schedule() {  # CASE
  local prev="" w r next
  local -a seg
  mapfile -t seg < <(python3 - "$work/ckpt-$1/launch.jsonl" $steps <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = [(r["workers"], r["batch_size"], r["resume_step"]) for r in recs if r["event"] in ("start", "restart")]
for i, (w, b, r) in enumerate(runs):
    end = runs[i + 1][2] if i + 1 < len(runs) else int(sys.argv[2])
    if end > r: print(w, b, end)
PY
)
  for line in "${seg[@]}"; do
    read -r w b next <<<"$line"
    "$dtrain" train "${common[@]}" --workers "$w" --batch-size "$b" --max-steps "$next" ${prev:+--resume "$prev"} \
      --save "$work/same-$1-$next.safetensors" >/dev/null 2>&1 || fail "$1: same-schedule run to step $next"
    prev="$work/same-$1-$next.safetensors"
  done
  echo "$prev"
}

compare() {  # A B LIMIT: largest relative difference of a tensor <= LIMIT
python3 - "$@" <<'PY'
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
print("  vs %s: largest relative difference of a tensor %.3g (limit %s)" % (sys.argv[2].split("/")[-1], worst, sys.argv[3]))
sys.exit(0 if worst <= float(sys.argv[3]) else 1)
PY
}

for c in "${cases[@]}"; do launch_case "$c"; done

echo "--- the same global batch without failures: $steps steps on 3 workers x 16"
"$dtrain" train "${common[@]}" --workers 3 --batch-size 16 --save "$work/reference.safetensors" >/dev/null ||
  fail "reference run"
# Two references: the uninterrupted run, which differs from a launch that ran
# some steps on 2 workers x 24 by summation order only, grown over the steps
# (6e-5 here after 90 steps on 2 workers), and the run that switches worker
# counts where the launch did, which must match to 1e-4.
for c in "${cases[@]}"; do
  echo "$c:"
  compare "$work/launched-$c.safetensors" "$work/reference.safetensors" 1e-3 ||
    fail "the model of case $c differs from the uninterrupted run's"
  compare "$work/launched-$c.safetensors" "$(same_schedule "$c")" 1e-4 ||
    fail "the model of case $c differs from the run with the same schedule without failures"
done
echo "launch test passed"
