#!/usr/bin/env bash
# The image (issue 57): scripts/container.sh build from SOURCE_DIR (root:
# debootstrap), then as uid 1000 with the image read-only and only the run
# directory mounted (/workspace), no network:
#   1. `dtrain train`, the README's default run: test accuracy >= 0.82 (0.830 there);
#   2. deploy/kubernetes' MPIJob command (mpirun, 4 ranks, same environment), 3
#      steps, then again: it resumes from the checkpoint on the mounted volume.
# Prints the image's build time and size.
#   check_container.sh SOURCE_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
version=$(sed -n 's/^project(dtrain.*VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
image=dtrain:$version
start=$SECONDS
bash "$src/scripts/container.sh" build "$image"
echo "check_container: image built in $((SECONDS - start)) s"

run=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-container.XXXXXX")
trap 'rm -rf "$run"' EXIT
chown 1000:1000 "$run"
# podman where it can run; else (a VM without CAP_SYS_RESOURCE: crun's setrlimit
# fails) the image's root filesystem under chroot, as uid 1000, the run
# directory bind-mounted at /workspace: the same files, without the isolation.
rootfs=$src/build-container/runtime
inImage() {
  if [ "$engine" = podman ]; then
    podman --cgroup-manager cgroupfs run --rm --read-only --user 1000 --network none \
      $envFlags -v "$run:/workspace" "$image" "$@"
  else
    # Its own /dev (debootstrap's nodes), not the host's.
    mount --bind /proc "$rootfs/proc" && mount --bind "$run" "$rootfs/workspace"
    local rc=0
    chroot --userspec=1000:1000 "$rootfs" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/dtrain \
      OMP_WAIT_POLICY=passive $(sed 's/-e //g' <<<"$envFlags") sh -c 'cd /workspace && exec "$@"' sh "$@" || rc=$?
    umount -l "$rootfs/workspace" "$rootfs/proc"
    return $rc
  fi
}
envFlags=""
engine=podman
if ! podman run --rm "$image" true 2>"$run/podman.err"; then
  echo "check_container: podman cannot run here ($(head -1 "$run/podman.err")): the image's root filesystem under chroot instead" >&2
  engine=chroot
fi
if inImage id -u | grep -qx 0; then echo "check_container: runs as root" >&2; exit 1; fi
inImage dtrain train 2>&1 | tee "$run/train.out" | tail -2
accuracy=$(sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p' "$run/train.out")
python3 -c "import sys; a = float(sys.argv[1]); sys.exit(0 if a >= 0.82 else 'test accuracy %.4f < 0.82' % a)" "$accuracy"
echo "check_container: dtrain train in the image: test accuracy $accuracy"

# The MPIJob's launcher command and environment, as the manifest has them.
mpijob=$(python3 -c '
import sys, yaml
job = yaml.safe_load(open(sys.argv[1]))
c = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
print(" ".join("-e %s=%s" % (e["name"], e["value"]) for e in c.get("env", [])))
print("\x1f".join(c["command"]))
print(job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] * job["spec"].get("slotsPerWorker", 1))' "$src/deploy/kubernetes/mpijob.yaml")
envFlags=$(sed -n 1p <<<"$mpijob")  # -e NAME=VALUE ...
IFS=$'\x1f' read -r -a command <<<"$(sed -n 2p <<<"$mpijob")"
ranks=$(sed -n 3p <<<"$mpijob")
# One pod here instead of one per rank: the ranks are slots of this container
# (mpi-operator's hostfile would give them).
command=("${command[0]}" -np "$ranks" --oversubscribe "${command[@]:1}")
for steps in 3 6; do
  inImage "${command[@]}" --max-steps "$steps" >"$run/mpi-$steps.out" 2>&1 ||
    { tail -20 "$run/mpi-$steps.out" >&2; exit 1; }
  test -f "$run/checkpoints/step-00000000$steps.safetensors"
done
grep -q "resumed from .* at step 3" "$run/mpi-6.out"
echo "check_container: the MPIJob's command ran in the image (4 ranks) and resumed from its checkpoint"
podman image inspect "$image" --format 'check_container: image {{.Id}}: {{.Size}} bytes'
