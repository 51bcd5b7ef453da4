#!/usr/bin/env bash
# CTest `netsim`: two emulated hosts (scripts/netsim.sh) joined by a 100 Mbit/s
# link; the mpi backend's allreduce conformance cases and a short `dtrain train
# --backend mpi` run with one rank on each host must succeed. No timing checks.
# Exit 77 (CTest SKIP_RETURN_CODE) where network namespaces cannot be made.
#   netsim_test.sh NETSIM_SH COMM_MPI_TESTS DTRAIN
set -uo pipefail
netsim="$1" mpitests="$2" dtrain="$3"

# Its own instance (names dtrain213-*, subnet 10.213.213.0/24); the lock
# serializes concurrent runs (ctest -j, other build trees) of this test.
NETSIM_ID=213 NETSIM_LOCK=dtrain-netsim-test.lock source "$(dirname "$0")/common.sh"

# The token bucket: 16 KiB at 100 Mbit/s, one GSO packet and more (128 KiB)
# from 500 Mbit/s (what calibrate --netsim writes as burst_bytes), as set.
[[ $(bash "$netsim" burst 100mbit) == 16384 && $(bash "$netsim" burst 1gbit) == 131072 ]] ||
  fail "netsim.sh burst: $(bash "$netsim" burst 100mbit) at 100mbit, $(bash "$netsim" burst 1gbit) at 1gbit"
! bash "$netsim" up 2 --burst 12 2>/dev/null || fail "netsim.sh up --burst 12 (under one packet) was accepted"
bash "$netsim" up 2 --rate 100mbit || fail "netsim.sh up 2 --rate 100mbit"
bash "$netsim" status
tc -n "dtrain${DTRAIN_NETSIM_ID}-h0" qdisc show dev eth0 | grep -q "burst 16Kb" ||
  fail "host 0's link is not shaped with a 16 KiB bucket: $(tc -n dtrain${DTRAIN_NETSIM_ID}-h0 qdisc show dev eth0)"

# Generous communication timeouts: the ranks share 2 cores with other builds.
run() { timeout 240 bash "$netsim" mpirun -np 2 -- env DTRAIN_COMM_TIMEOUT_MS=120000 "$@"; }

echo "--- allreduce conformance, 1 rank on each of 2 hosts"
run "$mpitests" --gtest_filter='MpiConformance.Allreduce*:MpiConformance.Hierarchical*:MpiConformance.Broadcast:MpiConformance.Allgather:MpiConformance.PointToPoint' ||
  fail "comm_mpi_tests across 2 emulated hosts"

echo "--- dtrain train --backend mpi, 1 rank on each of 2 hosts"
out=$(run "$dtrain" train --backend mpi --model mlp --dataset synthetic --synthetic-size 1000 \
      --batch-size 16 --max-steps 5 --seed 7 --progress off) || fail "dtrain train across 2 emulated hosts"
echo "$out"
last=$(tail -n 1 <<<"$out")
grep -q '"workers":2' <<<"$last" || fail "the final line does not report 2 workers"
# Measured traffic: one mlp gradient (1.07 MB) each step over the link.
sent=$(grep -o '"bytes_sent_per_worker":[0-9.e+]*' <<<"$last" | cut -d: -f2)
[[ -n "$sent" ]] && awk -v s="$sent" 'BEGIN { exit !(s > 1e6) }' ||
  fail "bytes_sent_per_worker ($sent) is not the measured gradient traffic"
# The hierarchical allreduce of 64 MiB with 2 ranks on each of 2 hosts: OpenMPI's
# nonblocking reduce/broadcast inside a host overflowed the stack (SIGSEGV, 2 runs
# of 3) until large collectives took dtrain's own algorithms.
echo "--- hierarchical allreduce, 64 MiB, 2 ranks on each of 2 hosts at 1 Gbit/s"
bash "$netsim" down >/dev/null 2>&1
bash "$netsim" up 2 --rate 1gbit || fail "netsim.sh up 2 --rate 1gbit"
for attempt in 1 2 3; do
  out=$(timeout 240 bash "$netsim" mpirun -np 4 --ranks-per-host 2 -- env DTRAIN_COMM_TIMEOUT_MS=120000 \
        "$dtrain" bench allreduce --backend mpi --workers 4 --algo hier --min-bytes 67108864 --iters 3 2>&1) ||
    fail "hierarchical allreduce of 64 MiB, run $attempt: $(tail -n 3 <<<"$out")"
  grep -q ' hier .* ok' <<<"$out" || fail "hierarchical allreduce of 64 MiB, run $attempt: no 'ok' row"
done
echo "netsim test passed"
