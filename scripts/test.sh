#!/usr/bin/env bash
# Set-up (packages, configure, build) and the whole test suite under CTest.
set -euo pipefail
cd "$(dirname "$0")/.."
# GoogleTest runs the suite; PyTorch (Debian's python3-torch) checks checkpoint
# interoperability; iproute2 is for the emulated network (scripts/netsim.sh), the
# SLURM daemons, client and munge for the emulated cluster on it (scripts/slurm.sh);
# Chromium loads dtrain dashboard's page (ctest -L browser), python3-protobuf reads
# the TensorBoard event files back; venv, setuptools, wheel, build and yaml for the
# pip-install and manifest tests (tests/install).
DTRAIN_EXTRA_PACKAGES="libgtest-dev iproute2 python3-torch python3-pytest python3-yaml python3-venv python3-setuptools python3-wheel python3-build slurmctld slurmd slurm-client munge chromium python3-protobuf" DTRAIN_BUILD_ALL=1 bash scripts/setup.sh
echo "test.sh: set-up and build: ${SECONDS} s"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ctest --test-dir "${DTRAIN_BUILD_DIR:-build}" --no-tests=error --output-on-failure -j "$(nproc)" "$@"
