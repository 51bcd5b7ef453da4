#!/usr/bin/env bash
# Emulated multi-host network on one machine: N Linux network namespaces (the
# "hosts") on one bridge, every link shaped in both directions by a tbf qdisc
# (egress of the bridge-side veth = into the host, egress of the host's eth0 = out
# of it). Real TCP between real processes, so MPI and dtrain run unchanged; only
# bandwidth is emulated (this kernel has no netem: no added latency or loss).
#
#   netsim.sh up N [--rate 1gbit] [--host-rate I=100mbit ...] [--burst BYTES]
#                                     (re)create hosts 0..N-1 (--burst: the token
#                                     bucket, default below)
#   netsim.sh burst RATE              the token bucket's bytes at RATE (what up uses)
#   netsim.sh down                                               remove them
#   netsim.sh status                                             hosts, addresses, rates
#   netsim.sh mpirun -np K [--ranks-per-host R] [--hosts I,J,..] -- CMD ARGS...
#                                     K ranks, R per host (default 1), on hosts I,J,.. in
#                                     that order (default 0,1,..: as many as K needs)
#   netsim.sh exec I -- CMD ARGS...                              one command on host I
#   netsim.sh probe I                 exit 0 when host I answers over its link (a TCP
#                                     connection to the bridge, refused = it arrived)
#   netsim.sh kill I                  SIGKILL to every process on host I (its namespace)
#
# Touches only its own names (namespaces dtrain-h0.., bridge dtrain-br, veths
# dtrain-v0..) and subnet 10.213.0.0/24 (hosts .1.., the bridge .254, where
# mpirun itself listens). DTRAIN_NETSIM_ID=K (1..254) makes a separate instance
# (names dtrainK-..., subnet 10.213.K.0/24), as the CTest uses so that it never
# disturbs a network a user brought up. Needs root and iproute2.
set -euo pipefail

die() { echo "netsim: $*" >&2; exit 1; }

id="${DTRAIN_NETSIM_ID:-0}"
[[ "$id" =~ ^[0-9]+$ ]] && ((id <= 254)) || die "DTRAIN_NETSIM_ID must be 0..254 (got '$id')"
if ((id == 0)); then pre="dtrain-"; else pre="dtrain${id}-"; fi
net="10.213.${id}"
bridge="${pre}br"
state="/run/${pre}netsim"  # hosts (N) and the mpirun launch agent

ns() { echo "${pre}h$1"; }
veth() { echo "${pre}v$1"; }

need_root() {
  [[ $(id -u) -eq 0 ]] || die "must run as root (network namespaces need CAP_NET_ADMIN)"
  command -v ip >/dev/null || die "'ip' (iproute2) not found"
  command -v tc >/dev/null || die "'tc' (iproute2) not found"
  ip netns list >/dev/null 2>&1 || die "'ip netns' does not work here (no network namespaces)"
}

# tc rate -> bytes per second; empty when tc would not accept it.
rate_bytes() {
  local r="${1,,}" num unit
  [[ "$r" =~ ^([0-9]+(\.[0-9]+)?)(bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)$ ]] || return 0
  num="${BASH_REMATCH[1]}" unit="${BASH_REMATCH[3]}"
  awk -v n="$num" -v u="$unit" 'BEGIN {
    m["bit"]=1/8; m["kbit"]=1e3/8; m["mbit"]=1e6/8; m["gbit"]=1e9/8
    m["bps"]=1; m["kbps"]=1e3; m["mbps"]=1e6; m["gbps"]=1e9
    b = n * m[u]; if (b >= 1000) printf "%d\n", b }'
}

# Egress shaping of one device. burst: 0.5 ms at line rate, at least 16 KiB,
# and from 500 Mbit/s at least 128 KiB. A real link sends nothing faster than
# its rate; a larger bucket lets each step's first bytes after an idle moment
# through at memory speed (the 4 ms this had before sent 1 MB at 1 Gbit/s in
# 5.1 ms after 50 ms idle instead of 9.3, and made the mlp's steps up to 2x
# faster than the link allows; 64 KiB at 100 Mbit/s, 5 ms, passed the mlp
# pipeline's 64 KB messages free: GPipe 133 ms against 153). But a bucket
# under a GSO packet (64 KiB and its headers) makes tbf split them: at
# 1 Gbit/s on 4 hosts (2 cores) a 4-rank ring allreduce then ran at half the
# rate (bus bandwidth 0.06 GB/s with 64 KiB, 0.12 with 128 KiB to 512 KiB).
default_burst() {  # rate -> bytes
  local bps burst
  bps=$(rate_bytes "$1")
  burst=$((bps / 2000)); ((burst >= 16384)) || burst=16384
  ((bps < 62500000 || burst >= 131072)) || burst=131072
  echo "$burst"
}

shape() {  # netns-or-empty dev rate [burst-bytes]
  local burst
  burst=${4:-$(default_burst "$3")}
  ip ${1:+-n "$1"} link set "$2" up
  tc ${1:+-n "$1"} qdisc replace dev "$2" root tbf rate "$3" burst "$burst" latency 50ms
}

hosts() { [[ -f "$state/hosts" ]] && cat "$state/hosts" || echo 0; }

cmd_down() {
  need_root
  local n
  for n in $(ip netns list | awk '{print $1}' | grep -E "^${pre}h[0-9]+$" || true); do
    ip netns del "$n"
    rm -rf "/tmp/$n.ompi"  # its OpenMPI session directory (the launch agent's)
  done
  for n in $(ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${pre}(v[0-9]+|br)$" || true); do
    ip link del "$n" 2>/dev/null || true  # a veth goes with its peer's namespace
  done
  rm -rf "$state"
}

cmd_up() {
  local n="" rate="1gbit" spec i burst=""
  declare -A hostRate=()
  while (($#)); do
    case "$1" in
      --rate) rate="${2:-}"; shift 2 || die "--rate needs a value (e.g. 1gbit)" ;;
      --rate=*) rate="${1#*=}"; shift ;;
      --burst) burst="${2:-}"; shift 2 || die "--burst needs a byte count (e.g. 65536)" ;;
      --burst=*) burst="${1#*=}"; shift ;;
      --host-rate|--host-rate=*)
        if [[ "$1" == *=* ]]; then spec="${1#*=}"; shift; else spec="${2:-}"; shift 2 || die "--host-rate needs I=RATE"; fi
        [[ "$spec" =~ ^([0-9]+)=(.+)$ ]] || die "--host-rate takes I=RATE (e.g. 1=100mbit), got '$spec'"
        hostRate[${BASH_REMATCH[1]}]="${BASH_REMATCH[2]}" ;;
      -*) die "up: unknown option '$1'" ;;
      *) [[ -z "$n" ]] || die "up: unexpected argument '$1'"; n="$1"; shift ;;
    esac
  done
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && n <= 200)) || die "up needs a host count N in 1..200 (got '${n}')"
  [[ -n "$(rate_bytes "$rate")" ]] || die "bad rate '$rate' (use e.g. 100mbit, 1gbit, 12.5mbps)"
  [[ -z "$burst" || ( "$burst" =~ ^[0-9]+$ && burst -ge 1600 ) ]] ||
    die "--burst takes the token bucket's size in bytes, at least 1600 (one packet), got '$burst'"
  for i in "${!hostRate[@]}"; do
    ((i < n)) || die "--host-rate $i=...: there are only hosts 0..$((n - 1))"
    [[ -n "$(rate_bytes "${hostRate[$i]}")" ]] || die "bad rate '${hostRate[$i]}' for host $i"
  done
  need_root
  cmd_down  # idempotent: the same command always leaves the same network
  mkdir -p "$state"
  ip link add "$bridge" type bridge
  ip addr add "$net.254/24" dev "$bridge"
  ip link set "$bridge" up
  for ((i = 0; i < n; ++i)); do
    local h v r
    h=$(ns "$i") v=$(veth "$i") r="${hostRate[$i]:-$rate}"
    ip netns add "$h"
    ip link add "$v" type veth peer name eth0 netns "$h"
    ip link set "$v" master "$bridge"
    ip -n "$h" link set lo up
    ip -n "$h" addr add "$net.$((i + 1))/24" dev eth0
    shape "" "$v" "$r" "$burst"      # into host i
    shape "$h" eth0 "$r" "$burst"    # out of host i
  done
  echo "$n" > "$state/hosts"
  echo "netsim: $n hosts up on $net.0/24 (${pre}h0..${pre}h$((n - 1))), links $rate${hostRate[*]:+, some hosts otherwise: see status}"
}

cmd_status() {
  need_root
  local n i h
  n=$(hosts)
  if ((n == 0)); then echo "netsim: down"; return 0; fi
  echo "netsim: $n hosts on $net.0/24 (bridge $bridge at $net.254)"
  for ((i = 0; i < n; ++i)); do
    h=$(ns "$i")
    if ! ip netns list | grep -qE "^$h( |$)"; then echo "  $h: MISSING (run up again)"; continue; fi
    printf '  %s  %s  out: %s  in: %s\n' "$h" \
      "$(ip -n "$h" -o -4 addr show dev eth0 | awk '{print $4}')" \
      "$(tc -n "$h" qdisc show dev eth0 | grep -o 'rate [^ ]*' || echo unshaped)" \
      "$(tc qdisc show dev "$(veth "$i")" | grep -o 'rate [^ ]*' || echo unshaped)"
  done
}

cmd_exec() {
  local i="${1:-}"; shift || true
  [[ "${1:-}" == "--" ]] && shift
  need_root
  [[ "$i" =~ ^[0-9]+$ ]] && ((i < $(hosts))) || die "exec: no host '$i' (netsim has $(hosts) hosts)"
  (($#)) || die "exec needs a command"
  exec ip netns exec "$(ns "$i")" "$@"
}

cmd_probe() {
  local i="${1:-}" h out
  need_root
  [[ "$i" =~ ^[0-9]+$ ]] && ((i < $(hosts))) || die "probe: no host '$i' (netsim has $(hosts) hosts)"
  h=$(ns "$i")
  ip netns list | grep -qE "^$h( |$)" || return 1
  # No ping here: a TCP connection from the host to a closed port of the bridge.
  # "Connection refused" means the SYN crossed the link and the RST came back;
  # a link that is down gives "Network is unreachable" or no answer (timeout).
  out=$(timeout 3 ip netns exec "$h" bash -c "exec 3<>/dev/tcp/$net.254/9" 2>&1) && return 0
  [[ "$out" == *"Connection refused"* ]]
}

cmd_kill() {
  local i="${1:-}" pids
  need_root
  [[ "$i" =~ ^[0-9]+$ ]] && ((i < $(hosts))) || die "kill: no host '$i' (netsim has $(hosts) hosts)"
  pids=$(ip netns pids "$(ns "$i")" 2>/dev/null || true)
  [[ -z "$pids" ]] || kill -KILL $pids 2>/dev/null || true
}

cmd_mpirun() {
  local np="" rph=1 n i only=""
  while (($#)); do
    case "$1" in
      -np|-n) np="${2:-}"; shift 2 || die "-np needs a value" ;;
      --ranks-per-host) rph="${2:-}"; shift 2 || die "--ranks-per-host needs a value" ;;
      --hosts) only="${2:-}"; shift 2 || die "--hosts needs a list I,J,..." ;;
      --) shift; break ;;
      *) die "mpirun: unknown option '$1' (usage: mpirun -np K [--ranks-per-host R] [--hosts I,J,..] -- CMD...)" ;;
    esac
  done
  need_root
  command -v mpirun >/dev/null || die "mpirun (OpenMPI) not found"
  (($#)) || die "mpirun needs a command after --"
  [[ "$np" =~ ^[0-9]+$ ]] && ((np >= 1)) || die "mpirun needs -np K >= 1 (got '$np')"
  [[ "$rph" =~ ^[0-9]+$ ]] && ((rph >= 1)) || die "--ranks-per-host must be >= 1 (got '$rph')"
  n=$(hosts)
  ((n > 0)) || die "no emulated network: run 'netsim.sh up N' first"
  local need=$(((np + rph - 1) / rph))
  local -a chosen=()
  if [[ -n "$only" ]]; then
    # A chosen subset (dtrain launch drops lost hosts): in the given order.
    [[ "$only" =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--hosts takes host numbers I,J,... (got '$only')"
    IFS=, read -r -a chosen <<<"$only"
    for i in "${chosen[@]}"; do ((i < n)) || die "--hosts: no host $i (netsim has $n hosts)"; done
    ((need <= ${#chosen[@]})) || die "-np $np at $rph per host needs $need hosts, but --hosts names ${#chosen[@]}"
  else
    ((need <= n)) || die "-np $np at $rph per host needs $need hosts, but only $n are up"
    for ((i = 0; i < need; ++i)); do chosen+=("$i"); done
  fi
  # OpenMPI's rsh launcher runs "AGENT HOST orted ...": start it inside that namespace.
  cat > "$state/agent" <<'EOF'
#!/usr/bin/env bash
host="$1"; shift
# Every emulated host has the same hostname and /tmp: give each its own OpenMPI
# session directory, or two orteds racing to create the same one fail with
# "mkdir ... File exists" (seen under ctest -j2 load).
tmp="/tmp/$host.ompi"
mkdir -p "$tmp"
exec ip netns exec "$host" env OMPI_MCA_orte_tmpdir_base="$tmp" bash -c "$*"
EOF
  chmod +x "$state/agent"
  hostfile="$state/hostfile.$$"  # global: the EXIT trap runs after this function returns
  trap 'rm -f "$hostfile"' EXIT
  : > "$hostfile"
  for ((i = 0; i < need; ++i)); do echo "$(ns "${chosen[$i]}") slots=$rph" >> "$hostfile"; done
  # btl tcp,self: ranks on one emulated host also talk TCP (over loopback); with
  # vader (shared memory) added, ranks crashed (SIGSEGV) in OpenMPI 4.1.4 here.
  # Each orted sees only its own ranks, so it cannot tell the 2 cores are shared:
  # with more ranks than cores, make idle ranks yield instead of spinning.
  # rtc ^hwloc: each orted otherwise maps its hwloc topology into shared memory
  # at an address it guessed free, and in about one start in four here that
  # address was not free: orted died with SIGSEGV in hwloc_shmem_topology_write
  # (OpenMPI 4.1.4, Debian 12). Ranks do not need that shared copy.
  local yield=0
  ((np > $(nproc))) && yield=1
  # dtrain's --threads auto divides a host's cores among its ranks, but every
  # emulated host shares this machine's cores: give each rank its share of them.
  local threads="${OMP_NUM_THREADS:-$(( $(nproc) / np > 1 ? $(nproc) / np : 1 ))}"
  # mpirun runs in the background so that SIGTERM / SIGINT to this script reach it
  # (bash would die on them and leave mpirun running): mpirun passes them on to
  # the ranks once, which then stop cleanly (dtrain launch stops a job this way).
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    mpirun --allow-run-as-root -np "$np" --hostfile "$hostfile" --map-by slot --bind-to none \
    --mca plm_rsh_agent "$state/agent" --mca routed direct --mca btl tcp,self \
    --mca btl_tcp_if_include "$net.0/24" --mca oob_tcp_if_include "$net.0/24" \
    --mca mpi_yield_when_idle "$yield" --mca rtc ^hwloc -x OMP_NUM_THREADS="$threads" "$@" <&0 &
  local mpid=$! rc=0
  trap 'kill -TERM "$mpid" 2>/dev/null' TERM
  trap 'kill -INT "$mpid" 2>/dev/null' INT
  # wait returns early (> 128) when a trapped signal arrives: wait again until mpirun is gone.
  while :; do
    wait "$mpid" && rc=0 || rc=$?
    kill -0 "$mpid" 2>/dev/null || break
  done
  return "$rc"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  down) shift; cmd_down ;;
  status) shift; cmd_status ;;
  exec) shift; cmd_exec "$@" ;;
  mpirun) shift; cmd_mpirun "$@" ;;
  probe) shift; cmd_probe "$@" ;;
  kill) shift; cmd_kill "$@" ;;
  burst) [[ -n "$(rate_bytes "${2:-}")" ]] || die "burst needs a rate (e.g. 1gbit), got '${2:-}'"; default_burst "$2" ;;
  *) die "usage: netsim.sh up N [--rate 1gbit] [--host-rate I=RATE] [--burst BYTES] | down | status | burst RATE | mpirun -np K [--ranks-per-host R] [--hosts I,J,..] -- CMD... | exec I -- CMD... | probe I | kill I" ;;
esac
