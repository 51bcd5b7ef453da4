#!/usr/bin/env bash
# An OCI image of dtrain from Debian's packages only (no registry pull):
#   scripts/container.sh build [TAG]    (TAG default: dtrain:VERSION, and dtrain:latest)
# Two debootstrapped Debian 12 roots under build-container/ (kept, so a second
# build only rebuilds what changed):
#   build-root: scripts/setup.sh's packages (compilers, -dev); the working tree is
#     copied to /src and `pip install .` (setup.py: CMake) installs the `dtrain`
#     program and the Python package into /out/usr/local.
#   runtime: no compilers: the shared libraries the program and the module link
#     (found by ldd + dpkg -S in build-root), python3-numpy, OpenMPI and ssh (for
#     MPIJob launchers), Fashion-MNIST and bible-kjv; /out/usr/local and the
#     examples and configs (/usr/local/share/dtrain); user dtrain (uid 1000).
# `podman import` turns it into the image: USER 1000, WORKDIR /workspace (mount the
# run directory there; the image itself may be --read-only).
#   DTRAIN_DEBIAN_MIRROR=URL    Debian mirror (default: this machine's APT source)
#   DTRAIN_CMAKE_ARGS="..."     CMake options (default -DDTRAIN_NATIVE=OFF: the
#                               image runs on other x86-64 CPUs than the builder's)
#   CCACHE_DIR=dir              the host's ccache, bind-mounted into build-root
# Needs root (debootstrap, chroot) and installs debootstrap and podman when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source=$PWD

usage() { echo "usage: scripts/container.sh build [TAG]" >&2; exit 2; }
[ "${1:-}" = build ] && [ $# -le 2 ] || usage
version=$(sed -n 's/^project(dtrain.*VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
tag=${2:-dtrain:$version}
if [ "$(id -u)" -ne 0 ]; then
  echo "container: debootstrap and chroot need root; as root run: bash scripts/container.sh build" >&2
  exit 1
fi
step() { echo "container: $* (${SECONDS} s)" >&2; }

tools=()
command -v debootstrap >/dev/null || tools+=(debootstrap)
command -v podman >/dev/null || tools+=(podman)
if ((${#tools[@]})); then
  step "installing ${tools[*]}"
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${tools[@]}"
fi

# The mirror this machine's APT uses (deb822 or one-line format).
defaultMirror() {
  sed -n 's/^URIs: *\([^ ]*\).*/\1/p; s/^deb \+\(\[[^]]*\] \+\)\?\(http[^ ]*\) .*/\2/p' \
    /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null | grep -v security | head -1 || true
}
mirror=${DTRAIN_DEBIAN_MIRROR:-$(defaultMirror)}
mirror=${mirror:-http://deb.debian.org/debian}
work=$source/build-container
mkdir -p "$work"

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
# mountInto ROOT: /proc, /sys and DNS for apt and builds inside. Not the host's
# /dev: the root keeps the device nodes debootstrap made, so that nothing run
# inside (a compiler's or ccache's -o /dev/null as root) can replace the host's.
mountInto() {
  local d
  for d in proc sys; do
    mount --bind "/$d" "$1/$d" && mounted+=("$1/$d")
  done
  cp /etc/resolv.conf "$1/etc/resolv.conf"
}
inRoot() { local root=$1; shift; chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

bootstrap() {  # bootstrap ROOT: a minimal Debian 12, once
  if [ ! -f "$1/.bootstrapped" ]; then
    step "debootstrap $1 from $mirror"
    rm -rf "$1"
    debootstrap --variant=minbase bookworm "$1" "$mirror" >"$1.log" 2>&1 ||
      { tail -5 "$1.log" >&2; exit 1; }
    touch "$1/.bootstrapped"
  fi
}

# --- build stage -----------------------------------------------------------------
build=$work/build-root
bootstrap "$build"
mountInto "$build"
ccache=()
if [ -n "${CCACHE_DIR:-}" ] && [ -d "$CCACHE_DIR" ]; then
  mkdir -p "$build/ccache" && mount --bind "$CCACHE_DIR" "$build/ccache" && mounted+=("$build/ccache")
  ccache=(CCACHE_DIR=/ccache CCACHE_BASEDIR=/src CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache)
fi
step "build stage: scripts/setup.sh's packages"
mkdir -p "$build/src"
mkdir -p "$build/scripts" && cp scripts/setup.sh "$build/scripts/setup.sh"
inRoot "$build" DTRAIN_PACKAGES_ONLY=1 DTRAIN_EXTRA_PACKAGES="python3-pip python3-setuptools python3-wheel ccache" \
  DEBIAN_FRONTEND=noninteractive bash /scripts/setup.sh

step "build stage: pip install . (CMake: dtrain, the Python module)"
# The working tree as a fresh clone has it; build-pip/ (CMake's tree) is kept.
find "$build/src" -mindepth 1 -maxdepth 1 ! -name build-pip -exec rm -rf {} +
git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf - | tar -xf - -C "$build/src"
rm -rf "$build/out"
inRoot "$build" "${ccache[@]}" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
  DTRAIN_CMAKE_ARGS="${DTRAIN_CMAKE_ARGS:--DDTRAIN_NATIVE=OFF}" \
  bash -c 'cd /src && pip install -q --no-index --no-build-isolation --break-system-packages --no-warn-script-location \
           --root /out --prefix /usr .'

# (Debian's pip installs --prefix /usr into /usr/local, away from the packages' files.)
# Runtime packages: those that own the libraries the program and the module link
# (through alternatives' links: libopenblas.so.0 is one).
linked=$(inRoot "$build" bash -s <<'EOF'
find /out \( -path '*/bin/dtrain' -o -name '_dtrain*.so' \) -print0 | xargs -0 ldd | awk '/=> \//{print $3}' | sort -u |
  while read -r lib; do dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null; done |
  cut -d: -f1 | sort -u | tr '\n' ' '
EOF
)
runtimePackages="$linked python3-numpy openmpi-bin openssh-client openssh-server dataset-fashion-mnist bible-kjv"

# --- runtime stage -----------------------------------------------------------------
base=$work/runtime-base
bootstrap "$base"
if [ "$(cat "$base/.packages" 2>/dev/null)" != "$runtimePackages" ]; then
  step "runtime: $runtimePackages"
  mountInto "$base"
  inRoot "$base" apt-get update -q >/dev/null
  inRoot "$base" DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $runtimePackages >/dev/null
  inRoot "$base" apt-get clean
  echo "$runtimePackages" >"$base/.packages"
  cleanup; mounted=()
fi

step "runtime: dtrain, examples, user 1000"
runtime=$work/runtime
rm -rf "$runtime"
cp -a "$base" "$runtime"
rm -f "$runtime/.bootstrapped" "$runtime/.packages"
rm -f "$runtime"/etc/ssh/ssh_host_*  # no host key shared by every container of the image
rm -rf "$runtime"/var/lib/apt/lists/* "$runtime"/var/cache/apt/* "$runtime"/usr/share/doc/* "$runtime"/usr/share/man/*
cp -a "$build/out/usr/local/." "$runtime/usr/local/"
mkdir -p "$runtime/usr/local/share/dtrain"
cp -r examples configs "$runtime/usr/local/share/dtrain/"
inRoot "$runtime" useradd -u 1000 -m -s /bin/bash dtrain
mkdir -p "$runtime/workspace" && chown 1000:1000 "$runtime/workspace"
# sshd as uid 1000 for mpi-operator's workers (port 2222; the keys that
# mpi-operator mounts at ~/.ssh serve as host key too), and ssh to that port.
cat >"$runtime/home/dtrain/.sshd_config" <<'EOF'
Port 2222
PidFile /home/dtrain/.sshd.pid
HostKey /home/dtrain/.ssh/id_rsa
StrictModes no
EOF
chown 1000:1000 "$runtime/home/dtrain/.sshd_config"
printf 'Host *\n  Port 2222\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n' \
  >"$runtime/etc/ssh/ssh_config.d/dtrain.conf"
: >"$runtime/etc/resolv.conf"

step "podman import $tag"
tar --numeric-owner -C "$runtime" -cf - . |
  podman import --change "USER 1000" --change "WORKDIR /workspace" \
    --change "ENV OMP_WAIT_POLICY=passive" --change 'CMD ["dtrain", "--help"]' - "$tag" >/dev/null
podman tag "$tag" dtrain:latest
size=$(podman image inspect "$tag" --format '{{.Size}}')
step "built $tag: $((size / 1000000)) MB"
