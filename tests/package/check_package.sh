#!/usr/bin/env bash
# Installs dtrain from BUILD_DIR into a temporary prefix, then configures, builds
# and runs the outside project next to this script (tests/package) against it:
# find_package(dtrain CONFIG REQUIRED) + dtrain::dtrain must be all it takes.
#   check_package.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-package.XXXXXX")
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" >/dev/null
# The installed tree alone: the source tree's src/ must not be what the user compiles against.
test -f "$work/prefix/include/dtrain/nn/Module.h"
test -f "$work/prefix/lib/cmake/dtrain/dtrainConfig.cmake"
if grep -rq -- "-march=native" "$work/prefix/lib/cmake/dtrain"; then
  echo "check_package: -march=native leaks into the exported targets" >&2; exit 1
fi

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$here" -B "$work/app" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
      -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/app"
"$work/app/app"
