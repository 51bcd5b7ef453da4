#!/usr/bin/env bash
# A real SLURM cluster on one machine, on the emulated hosts of scripts/netsim.sh:
# one slurmd per host, each inside that host's network namespace (so a job's
# traffic crosses the emulated links), with a hostname (= node name) and a /tmp
# of its own as on real nodes (OpenMPI's mpirun then recognizes its own node;
# jobs must work under a shared directory, not /tmp, as on a cluster); the
# controller (slurmctld) and a munge daemon of its own in the root namespace,
# the controller on the bridge address. Debian's packages (slurmctld slurmd
# slurm-client munge), nothing simulated: jobs go through sbatch / srun /
# squeue / scontrol with SLURM_CONF pointing at the cluster's slurm.conf.
#
#   slurm.sh up N [--rate 1gbit] [--cpus-per-node C]
#                          (re)create the network (netsim.sh up N --rate R) and a
#                          cluster of nodes <pre>h0..<pre>h(N-1), C CPUs each
#                          (default: this machine's cores), partition "dtrain"
#   slurm.sh down          stop every daemon of the cluster, remove its state and the network
#   slurm.sh status        the daemons and sinfo
#   slurm.sh env           the line to evaluate: export SLURM_CONF=...
#   slurm.sh wait-idle     wait (60 s at most) until every node is idle
#
# State (config, munge key and socket, spools, logs) in /run/<pre>slurm, where
# <pre> is netsim's prefix: dtrain- or, with DTRAIN_NETSIM_ID=K, dtrainK- (and
# the controller's port 6817 + 2K, so that instances do not collide). No
# outside network, no file outside that directory; root only.
set -euo pipefail

die() { echo "slurm: $*" >&2; exit 1; }
usage() { echo "slurm: $*" >&2; exit 2; }  # bad arguments

here="$(cd "$(dirname "$0")" && pwd)"
netsim="$here/netsim.sh"
id="${DTRAIN_NETSIM_ID:-0}"
[[ "$id" =~ ^[0-9]+$ ]] && ((id <= 254)) || usage "DTRAIN_NETSIM_ID must be 0..254 (got '$id')"
if ((id == 0)); then pre="dtrain-"; else pre="dtrain${id}-"; fi
net="10.213.${id}"
state="/run/${pre}slurm"
conf="$state/slurm.conf"
port=$((6817 + 2 * id))

need_tools() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces and the daemons)"
  local t
  for t in slurmctld slurmd munged sinfo scontrol unshare; do
    command -v "$t" >/dev/null || die "'$t' not found (apt-get install slurmctld slurmd slurm-client munge)"
  done
}

# Ends the process in a pid file (TERM, then KILL after 10 s) and removes the file.
stop_pidfile() {
  local f="$1" pid i
  [[ -f "$f" ]] || return 0
  pid=$(cat "$f" 2>/dev/null || true)
  if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; ++i)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

cmd_down() {
  need_tools
  if [[ -d "$state" ]]; then
    local f
    # Job processes first (slurmstepd and what it started live in the hosts'
    # namespaces: netsim's down kills them with the namespaces only if nothing
    # else holds them), then the node daemons, the controller, munge.
    for f in "$state"/slurmd-*.pid; do [[ -e "$f" ]] && stop_pidfile "$f"; done
    local n
    for n in $(ip netns list | awk '{print $1}' | grep -E "^${pre}h[0-9]+$" || true); do
      bash "$netsim" kill "${n#"${pre}h"}" 2>/dev/null || true
    done
    stop_pidfile "$state/slurmctld.pid"
    stop_pidfile "$state/munged.pid"
    rm -rf "$state"
  fi
  bash "$netsim" down
}

write_conf() {  # nodes cpus
  local n="$1" cpus="$2" i
  cat > "$conf" <<EOF
# Written by scripts/slurm.sh: an emulated cluster of $n nodes (netsim instance $id).
ClusterName=dtrain$id
SlurmctldHost=${pre}ctl($net.254)
SlurmctldPort=$port
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: also how long a requeued job waits before it may start again
# (120 s by default); tests requeue jobs.
AuthInfo=socket=$state/munge.sock,cred_expire=10
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool/%n
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd-%n.pid
SlurmctldLogFile=$state/slurmctld.log
SlurmdLogFile=$state/slurmd-%n.log
# Nothing that needs a writable cgroup hierarchy (containers, CI): processes
# tracked by their parentage, tasks bound to their CPUs by sched_setaffinity.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
# The configured CPUs count, not the machine's (several nodes share its cores).
SlurmdParameters=config_overrides
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
# A requeued job starts within seconds of becoming eligible (not up to a minute).
SchedulerParameters=sched_interval=2,bf_interval=5
MpiDefault=none
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# Short cycles: tests requeue jobs and wait for nodes.
SlurmdTimeout=60
InactiveLimit=0
KillWait=30
MinJobAge=60
MessageTimeout=20
EOF
  # slurmd loads a cgroup plugin whatever the plugins above; autodetection fails
  # on a tmpfs /sys/fs/cgroup with v1 hierarchies (containers).
  echo "CgroupPlugin=$(cgroup_plugin)" > "$state/cgroup.conf"
  for ((i = 0; i < n; ++i)); do
    echo "NodeName=${pre}h$i NodeAddr=$net.$((i + 1)) NodeHostname=${pre}h$i CPUs=$cpus RealMemory=1000 State=UNKNOWN" >> "$conf"
  done
  echo "PartitionName=dtrain Nodes=ALL Default=YES MaxTime=INFINITE State=UP" >> "$conf"
}

# cgroup/v2 where /sys/fs/cgroup is the unified hierarchy, else cgroup/v1.
cgroup_plugin() {
  if [[ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" == cgroup2fs ]]; then echo cgroup/v2; else echo cgroup/v1; fi
}

cmd_up() {
  local n="" rate="1gbit" cpus
  cpus=$(nproc)
  while (($#)); do
    case "$1" in
      --rate) rate="${2:-}"; shift 2 || usage "--rate needs a value (e.g. 1gbit)" ;;
      --rate=*) rate="${1#*=}"; shift ;;
      --cpus-per-node) cpus="${2:-}"; shift 2 || usage "--cpus-per-node needs a count" ;;
      --cpus-per-node=*) cpus="${1#*=}"; shift ;;
      -*) usage "up: unknown option '$1'" ;;
      *) [[ -z "$n" ]] || usage "up: unexpected argument '$1'"; n="$1"; shift ;;
    esac
  done
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 64)) || usage "up needs a node count N in 1..64 (got '${n}')"
  [[ "$cpus" =~ ^[0-9]+$ ]] && ((cpus >= 1 && cpus <= 1024)) ||
    usage "--cpus-per-node takes a count from 1 to 1024 (got '$cpus')"
  need_tools
  cmd_down >/dev/null  # idempotent: the same command always leaves the same cluster
  trap 'cmd_down >/dev/null 2>&1' EXIT  # a failed start leaves no daemon behind
  bash "$netsim" up "$n" --rate "$rate" >/dev/null
  mkdir -p "$state/ctld" "$state/spool"
  chmod 755 "$state"
  # A key of this cluster only (never /etc/munge's); munged insists on 0400 and
  # on a state directory nobody else can write.
  head -c 1024 /dev/urandom > "$state/munge.key"
  chmod 400 "$state/munge.key"
  munged --force --key-file="$state/munge.key" --socket="$state/munge.sock" \
    --pid-file="$state/munged.pid" --log-file="$state/munged.log" --seed-file="$state/munged.seed" ||
    die "munged did not start: $(tail -n 2 "$state/munged.log" 2>/dev/null)"
  write_conf "$n" "$cpus"
  # slurmctld runs only where the hostname is SlurmctldHost's name: its own UTS namespace.
  unshare --uts bash -c "hostname '${pre}ctl' && SLURM_CONF='$conf' exec slurmctld -f '$conf'" ||
    die "slurmctld did not start: $(tail -n 3 "$state/slurmctld.log" 2>/dev/null)"
  local i node
  for ((i = 0; i < n; ++i)); do
    node="${pre}h$i"
    mkdir -p "$state/spool/$node" "$state/tmp/$node"
    chmod 1777 "$state/tmp/$node"
    # Its own network (the host's namespace), hostname (UTS namespace) and /tmp
    # (a mount namespace): as on separate machines, where the pmix plugin's
    # and OpenMPI's directories under /tmp, named by job and host, do not meet.
    ip netns exec "$node" unshare --uts --mount bash -c \
      "hostname '$node' && mount --bind '$state/tmp/$node' /tmp &&
       SLURM_CONF='$conf' exec slurmd -f '$conf' -N '$node'" ||
      die "slurmd of $node did not start: $(tail -n 3 "$state/slurmd-$node.log" 2>/dev/null)"
  done
  cmd_wait_idle
  trap - EXIT
  echo "slurm: $n nodes up (${pre}h0..${pre}h$((n - 1)), $cpus CPUs each, links $rate), controller $net.254:$port"
  echo "slurm: export SLURM_CONF=$conf"
}

cmd_wait_idle() {
  local i states
  for ((i = 0; i < 600; ++i)); do
    states=$(SLURM_CONF="$conf" sinfo -h -N -o '%t' 2>/dev/null | sort -u | tr '\n' ' ')
    [[ "$states" == "idle " ]] && return 0
    sleep 0.1
  done
  die "nodes not idle after 60 s (states: ${states:-no answer}); logs in $state"
}

cmd_status() {
  need_tools
  [[ -f "$conf" ]] || { echo "slurm: down"; return 0; }
  local f name
  for f in "$state"/munged.pid "$state"/slurmctld.pid "$state"/slurmd-*.pid; do
    name=$(basename "$f" .pid)
    if [[ -f "$f" ]] && kill -0 "$(cat "$f")" 2>/dev/null; then echo "  $name: running (pid $(cat "$f"))"
    else echo "  $name: NOT RUNNING"; fi
  done
  SLURM_CONF="$conf" sinfo -N -l || true
  echo "export SLURM_CONF=$conf"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) shift; cmd_down ;;
  status) shift; cmd_status ;;
  env) echo "export SLURM_CONF=$conf" ;;
  wait-idle) shift; cmd_wait_idle ;;
  *) usage "usage: slurm.sh up N [--rate 1gbit] [--cpus-per-node C] | down | status | env | wait-idle" ;;
esac
