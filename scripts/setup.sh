#!/usr/bin/env bash
# Installs what dtrain needs from Debian's packages (only when missing), then
# configures and builds it in ./build. Idempotent: a second run only rebuilds.
# By default it builds only the libraries and the `dtrain` binary (the front door
# of the README must take minutes on 2 cores); the tests and benchmarks are for
# scripts/test.sh.
#   DTRAIN_EXTRA_PACKAGES="..."  more packages to install (the test script adds GoogleTest, python3-torch)
#   DTRAIN_BUILD_DIR=dir         build directory (default: build)
#   DTRAIN_BUILD_ALL=1           build every target: tests and benchmarks too (scripts/test.sh sets it)
#   DTRAIN_PACKAGES_ONLY=1       install the packages, build nothing (scripts/fuzz.sh, sanitize.sh)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config libopenblas-dev libdnnl-dev libsodium-dev zlib1g-dev libturbojpeg0-dev libpng-dev
          nlohmann-json3-dev libcli11-dev libtomlplusplus-dev libcpp-httplib-dev python3-dev python3-pybind11 python3-numpy libopenmpi-dev openmpi-bin dataset-fashion-mnist bible-kjv
          ${DTRAIN_EXTRA_PACKAGES:-})
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    # apt-get needs root: sudo when it works without a password, else say what to
    # install and stop before building anything half-way.
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
      sudo="sudo"
    else
      echo "setup: missing Debian packages; as root run: apt-get install -y --no-install-recommends ${missing[*]}" >&2
      exit 1
    fi
  fi
  echo "setup: installing ${missing[*]}" >&2
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

[ "${DTRAIN_PACKAGES_ONLY:-0}" = 1 ] && exit 0

build="${DTRAIN_BUILD_DIR:-build}"
if [ "${DTRAIN_BUILD_ALL:-0}" = 1 ]; then
  # Tests required: a suite that silently lost GoogleTest must not pass.
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDTRAIN_BUILD_TESTS=ON >/dev/null
  cmake --build "$build" -j "$(nproc)"
else
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  # dtrain and the Python module (`import dtrain` with PYTHONPATH=build/python).
  cmake --build "$build" -j "$(nproc)" --target dtrain dtrain_python
fi
