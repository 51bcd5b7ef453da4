#!/usr/bin/env bash
# CTest `netsim_hier_sweep`: the hierarchical allreduce through each host's
# shared memory (comm/mpi/MpiHier.cpp) on emulated hosts at 1 Gbit/s, with
# 2 x 2, 4 x 2 and 4 x 4 hosts x ranks (and 2 + 1, which takes the generic
# algorithm): every result against its closed form (MpiConformance.Hierarchical*:
# empty, tiny, odd, several blocks with an odd tail; 64 MiB at 2 x 2 and 4 x 2).
# No timing checks. Exit 77 (CTest SKIP_RETURN_CODE) where network namespaces
# cannot be made.
#   hier_sweep_test.sh NETSIM_SH COMM_MPI_TESTS
set -uo pipefail
netsim="$1" mpitests="$2"

NETSIM_ID=215 NETSIM_LOCK=dtrain-netsim-hier-test.lock source "$(dirname "$0")/common.sh"

bash "$netsim" up 4 --rate 1gbit >/dev/null || fail "netsim.sh up 4 --rate 1gbit"

# sweep NP RANKS_PER_HOST [gtest args...]. Generous timeouts: up to 16 ranks
# share the 2 cores with other builds.
sweep() {
  local np="$1" rph="$2"
  shift 2
  echo "--- $np ranks, $rph a host: $*"
  timeout 300 bash "$netsim" mpirun -np "$np" --ranks-per-host "$rph" -- \
    env DTRAIN_COMM_TIMEOUT_MS=120000 "$mpitests" "$@" ||
    fail "$np ranks, $rph a host: $*"
}

sizes='--gtest_filter=MpiConformance.HierarchicalSizes'
large='--gtest_filter=MpiConformance.*Hierarchical*'  # the sizes and 64 MiB
sweep 4 2 "$large" --gtest_also_run_disabled_tests
sweep 8 2 "$large" --gtest_also_run_disabled_tests
sweep 16 4 "$sizes"
sweep 3 2 "$sizes"
echo "netsim hier sweep passed"
