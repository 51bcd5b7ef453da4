#!/usr/bin/env bash
# `pip install .` and the wheel, as a user installs them (issue 57), from a fresh
# copy of SOURCE_DIR, as an ordinary user (dtrainuser when started as root), with
# no package index (--no-index: the build requirements are Debian's packages):
#   1. venv --system-site-packages + `pip install --no-build-isolation .`, then from
#      another directory: import dtrain and train; `dtrain --version`; `dtrain train`.
#   2. `python -m build --wheel --no-isolation` (reuses step 1's CMake tree), the
#      wheel into a second venv, and tests/python under pytest from outside the
#      source tree against that installed package.
#   check_pip.sh SOURCE_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/AsUser.sh"

if [ "${1:-}" != --as-user ]; then
  work=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-pip.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  fresh_copy "$1" "$work/src"
  cp -r "$1/tests/python" "$work/pytests"  # the tests, away from the source tree
  run_as_ordinary_user "$work" bash "$here/check_pip.sh" --as-user "$work"
  exit
fi

work=$2
cd "$work"
use_ccache_read_only
version=$(sed -n 's/^project(dtrain.*VERSION \([0-9.]*\).*/\1/p' src/CMakeLists.txt)
[ -n "$version" ]
step() { echo "check_pip: $* (${SECONDS} s)"; }

step "pip install --no-build-isolation ."
/usr/bin/python3 -m venv --system-site-packages v
(cd src && ../v/bin/pip install -q --no-index --no-build-isolation .)

mkdir run && cd run
step "import dtrain from $PWD"
../v/bin/python - "$work/v" "$version" <<'PY'
import math, sys, numpy as np, dtrain
from importlib.metadata import version
venv, expected = sys.argv[1], sys.argv[2]
assert dtrain.__file__.startswith(venv + "/"), "dtrain imported from %s, not the venv" % dtrain.__file__
assert dtrain.__version__ == version("dtrain") == expected, (dtrain.__version__, version("dtrain"), expected)
x = np.random.default_rng(0).random((512, 8), dtype=np.float32)
r = dtrain.train(dtrain.Config(training={"max_steps": 30}, logging={"progress": "off"}),
                 data=(x, (x[:, 0] > 0.5).astype("i8")))
assert math.isfinite(r["train_loss"]), r
print("check_pip: trained from the installed package:", r["train_loss"])
PY
step "dtrain on PATH"
PATH="$work/v/bin:$PATH"
[ "$(command -v dtrain)" = "$work/v/bin/dtrain" ]
[ "$(dtrain --version)" = "dtrain $version" ]
OMP_NUM_THREADS=1 dtrain train --max-steps 20 --threads 1 | tee train.out
grep -q "test_accuracy" train.out
cd "$work"

step "python -m build --wheel --no-isolation"
(cd src && ../v/bin/python -m build --wheel --no-isolation --outdir "$work/dist" . >"$work/build.log" 2>&1) ||
  { tail -20 "$work/build.log" >&2; exit 1; }
wheel=$(ls dist/dtrain-"$version"-*.whl)
/usr/bin/python3 -m venv --system-site-packages v2
v2/bin/pip install -q --no-index "$wheel"
mkdir run2 && cd run2
step "tests/python against $wheel"
PATH="$work/v2/bin:$PATH" DTRAIN_BIN="$work/v2/bin/dtrain" OMP_NUM_THREADS=1 \
  ../v2/bin/python -m pytest -q -p no:cacheprovider "$work/pytests"
../v2/bin/python -c 'import dtrain, sys; assert dtrain.__file__.startswith(sys.argv[1]), dtrain.__file__' "$work/v2/"
step "done"
