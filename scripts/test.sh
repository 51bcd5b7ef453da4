#!/usr/bin/env bash
# Set-up (packages, configure, build) and the whole test suite under CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
# PyTorch (Debian's python3-torch) checks checkpoint interoperability.
DTRAIN_EXTRA_PACKAGES="python3-torch python3-numpy" bash scripts/setup.sh
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "${DTRAIN_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)" "$@"
