# Shared preamble of the netsim CTests (sourced): skip/fail, the checks that the
# machine can emulate hosts at all, a netsim instance of the test's own and a
# lock that serializes the runs sharing it.
#   NETSIM_ID=K NETSIM_LOCK=NAME source common.sh TOOL...
# Exits 77 (CTest SKIP_RETURN_CODE) where the test cannot run: not root, a tool
# missing, no network namespaces / veth pairs / tbf qdiscs. Takes the lock
# $lockdir/NAME on fd 9 (15 minutes at most), exports DTRAIN_NETSIM_ID=K (names
# dtrainK-*, subnet 10.213.K.0/24: never the network a user brought up) and sets
# an EXIT trap that takes the instance down (add to it with netsim_on_exit).

skip() { echo "SKIPPED: $*"; exit 77; }
fail() { echo "FAILED: $*"; exit 1; }

[[ $(id -u) -eq 0 ]] || skip "needs root to create network namespaces"
for t in ip tc mpirun flock "$@"; do command -v "$t" >/dev/null || skip "'$t' not found"; done

export DTRAIN_NETSIM_ID="$NETSIM_ID"
lockdir=/run/lock; [[ -d $lockdir ]] || lockdir=/tmp
exec 9>"$lockdir/$NETSIM_LOCK"
flock -w 900 9 || fail "another netsim test held $lockdir/$NETSIM_LOCK for 15 minutes"
netsim_exit_extra=""
netsim_on_exit() { netsim_exit_extra+="$1; "; }
trap 'bash "$netsim" down >/dev/null 2>&1; eval "$netsim_exit_extra"' EXIT

# Can this kernel / container make namespaces, veths and tbf at all?
probe="dtrain${NETSIM_ID}-probe"
ip netns del "$probe" 2>/dev/null
if ! ip netns add "$probe" 2>/dev/null ||
   ! ip -n "$probe" link add name probe0 type veth peer name probe1 2>/dev/null ||
   ! tc -n "$probe" qdisc add dev probe0 root tbf rate 100mbit burst 64kb latency 50ms 2>/dev/null; then
  ip netns del "$probe" 2>/dev/null
  skip "cannot create network namespaces, veth pairs or tbf qdiscs here"
fi
ip netns del "$probe"
