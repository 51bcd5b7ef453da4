#!/usr/bin/env bash
# Installs what dtrain needs from Debian's packages (only when missing), then
# configures and builds it in ./build. Idempotent: a second run only rebuilds.
#   DTRAIN_EXTRA_PACKAGES="..."  more packages to install (the test script adds python3-torch)
#   DTRAIN_BUILD_DIR=dir         build directory (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake ninja-build pkg-config libopenblas-dev libdnnl-dev libsodium-dev libgtest-dev zlib1g-dev
          nlohmann-json3-dev libcli11-dev libopenmpi-dev openmpi-bin dataset-fashion-mnist bible-kjv
          iproute2
          ${DTRAIN_EXTRA_PACKAGES:-})
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

build="${DTRAIN_BUILD_DIR:-build}"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j "$(nproc)"
