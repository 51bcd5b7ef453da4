#!/usr/bin/env bash
# The test suite under the sanitizers, each in its own build directory:
#   bash scripts/sanitize.sh address [CTEST ARGS...]  AddressSanitizer + UndefinedBehaviorSanitizer,
#                                                     every test but the three below (build-asan)
#   bash scripts/sanitize.sh address-quick [...]      the same on the layers below nn: core, tensor,
#                                                     autograd, optim, data and the data parsers'
#                                                     fuzz corpus (IDX, .npy); what CI runs (.ci/run),
#                                                     as it builds only those layers
#   bash scripts/sanitize.sh thread  [CTEST ARGS...]  ThreadSanitizer on the tests of threads talking:
#                                                     comm, parallel, federated (build-tsan)
# Not under either: python_tests (the interpreter is not instrumented; it would need
# the sanitizer runtime preloaded), package_install (builds an outside project with
# its own flags) and the netsim label (emulated hosts; minutes each).
# Findings are errors: UBSan halts on the first report, TSan exits 66.
# Hogwild!'s races are the algorithm (lock-free updates of shared parameters):
# tests/sanitizers/tsan.supp names exactly those functions, nothing else.
# Extra arguments go to ctest (e.g. -R Resume to run a part).
set -euo pipefail
cd "$(dirname "$0")/.."
kind="${1:?usage: sanitize.sh address|thread [CTEST ARGS...]}"
shift
case "$kind" in
  address) build=build-asan; sanitize=address,undefined
           targets=(dtrain_test_binaries)  # the tests' binaries: no benchmarks, no Python module
           select=(-LE "netsim|python|package" -E "Mpi|^comm_mpi_")
           # Tests of processes under mpirun: ASan and UBSan on, LeakSanitizer off.
           # OpenMPI (not instrumented) leaves allocations of its own at exit, made
           # from modules it has unloaded by then ("unknown module" frames), so no
           # suppression can name them; every such process reported them.
           mpiSelect=(-LE "netsim|python|package" -R "Mpi|^comm_mpi_") ;;
  address-quick) build=build-asan; sanitize=address,undefined
           quick=(core_tests tensor_tests autograd_tests optim_tests data_tests)
           targets=("${quick[@]}" fuzz_replay_idx fuzz_replay_npy)
           select=(-L "^($(IFS='|'; echo "${quick[*]}")|fuzz_data)\$") ;;
  thread)  build=build-tsan; sanitize=thread
           # The local backend's ranks as threads; OpenMPI's internals are not
           # instrumented (its runs would report its own synchronization).
           targets=(comm_tests parallel_tests compress_tests federated_tests dtrain)
           select=(-L "^(comm_tests|parallel_tests|compress_tests|federated_tests)\$" -E "Mpi") ;;
  *) echo "sanitize.sh: unknown sanitizer '$kind' (address or thread)" >&2; exit 2 ;;
esac
DTRAIN_EXTRA_PACKAGES="libgtest-dev iproute2" DTRAIN_PACKAGES_ONLY=1 bash scripts/setup.sh
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDTRAIN_BUILD_TESTS=ON \
  -DDTRAIN_SANITIZE="$sanitize" >/dev/null
cmake --build "$build" -j "$(nproc)" ${targets:+--target "${targets[@]}"}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
# OpenMPI's and OpenBLAS's own allocations at exit are not dtrain's leaks.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp"
export TSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/tsan.supp:halt_on_error=1:second_deadlock_stack=1"
status=0
ctest --test-dir "$build" --no-tests=error --output-on-failure -j "$(nproc)" "${select[@]}" "$@" || status=1
if [ -n "${mpiSelect+x}" ]; then
  ASAN_OPTIONS="detect_leaks=0:abort_on_error=0" \
    ctest --test-dir "$build" --no-tests=ignore --output-on-failure -j "$(nproc)" "${mpiSelect[@]}" "$@" || status=1
fi
exit $status
