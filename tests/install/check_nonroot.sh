#!/usr/bin/env bash
# Without root (issue 57), from a fresh copy of SOURCE_DIR as an ordinary user
# (dtrainuser when started as root):
#   1. scripts/setup.sh with a package missing says, in one line, the apt-get
#      install it would need, and stops (non-zero) before configuring anything.
#   2. `cmake -S . -B build` configures and `cmake --build build` builds (the core
#      layer here; the pip test, tests/install/check_pip.sh, builds the rest as
#      an ordinary user too).
#   check_nonroot.sh SOURCE_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/AsUser.sh"

if [ "${1:-}" != --as-user ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-nonroot.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  fresh_copy "$1" "$work/src"
  run_as_ordinary_user "$work" bash "$here/check_nonroot.sh" --as-user "$work"
  exit
fi

cd "$2/src"
[ "$(id -u)" -ne 0 ] || { echo "check_nonroot: runs as root, not as an ordinary user" >&2; exit 1; }
use_ccache_read_only

missing=dtrain-no-such-package
if DTRAIN_EXTRA_PACKAGES=$missing bash scripts/setup.sh >stdout 2>stderr; then
  echo "check_nonroot: setup.sh succeeded with $missing missing" >&2; exit 1
fi
cat stderr
[ "$(wc -l <stderr)" -eq 1 ] && [ ! -s stdout ]
grep -q "apt-get install .*$missing" stderr
[ ! -e build ] || { echo "check_nonroot: setup.sh configured before stopping" >&2; exit 1; }

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target dtrain_core >/dev/null
[ -f build/src/core/libdtrain_core.a ]
echo "check_nonroot: $(id -un) configured and built dtrain_core"
