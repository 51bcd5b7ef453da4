#!/usr/bin/env bash
# Fuzzes every parser of outside bytes with libFuzzer (clang from Debian) under
# AddressSanitizer + UndefinedBehaviorSanitizer, SECONDS per target (default 60),
# starting from the kept corpus (tests/fuzz/corpus/<target>). A crash, leak,
# sanitizer report or hang (an input over 10 s) stops that target and leaves the
# input in build-fuzz/findings/<target>/; fix the code, then keep the input as
# tests/fuzz/corpus/<target>/found-<what> so that every test run replays it.
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]    targets: see tests/fuzz/CMakeLists.txt
# Which check rejected an input: DTRAIN_FUZZ_VERBOSE=1 build-fuzz/tests/fuzz/fuzz_replay_<target> FILE
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
DTRAIN_EXTRA_PACKAGES="clang libclang-rt-14-dev libgtest-dev" DTRAIN_PACKAGES_ONLY=1 bash scripts/setup.sh
build="${DTRAIN_FUZZ_BUILD_DIR:-build-fuzz}"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDTRAIN_BUILD_TESTS=ON -DDTRAIN_FUZZ=ON -DDTRAIN_SANITIZE=address,undefined >/dev/null
targets=("$@")
if ((${#targets[@]} == 0)); then
  mapfile -t targets < <(ls tests/fuzz/corpus)
fi
cmake --build "$build" -j "$(nproc)" --target "${targets[@]/#/fuzz_}"
# UBSan findings are errors, not warnings scrolling past.
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="detect_leaks=1"
status=0
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  findings="$build/findings/$t"
  mkdir -p "$work" "$findings"
  echo "fuzz: $t for ${seconds} s" >&2
  # New inputs go to the working corpus; the kept one is read only.
  if ! "$build/tests/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
      -artifact_prefix="$findings/" -print_final_stats=1 "$work" "tests/fuzz/corpus/$t" \
      >"$build/findings/$t.log" 2>&1; then
    echo "fuzz: $t FOUND A PROBLEM: $(ls "$findings" | head -3) (log: $build/findings/$t.log)" >&2
    status=1
  else
    echo "fuzz: $t ok, $(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$build/findings/$t.log" | grep -o '[0-9]*$') inputs" >&2
  fi
done
exit $status
