# boot: hmat
# The guest itself: two NUMA nodes, node 1 memory-only and in a lower (higher-numbered) memory tier
# than node 0, the terrace binary runs (with the libraries it links), and commands can run as an
# unprivileged user.
. /lib/vmtest.sh

[ -d /sys/devices/system/node/node0 ] || fail "no node0"
[ -d /sys/devices/system/node/node1 ] || fail "no node1: the guest has one NUMA node"
echo "online nodes: $(cat /sys/devices/system/node/online)"

cpus1=$(cat /sys/devices/system/node/node1/cpulist)
[ -z "$cpus1" ] || fail "node1 has CPUs: '$cpus1'"
cpus0=$(cat /sys/devices/system/node/node0/cpulist)
[ "$cpus0" = "0-1" ] || fail "node0 CPUs are '$cpus0', expected 0-1"

for t in /sys/devices/virtual/memory_tiering/memory_tier*; do
	[ -f "$t/nodelist" ] && echo "${t##*/}: $(cat "$t/nodelist")"
done
t0=$(node_tier 0)
t1=$(node_tier 1)
[ -n "$t0" ] || fail "node0 is in no memory tier"
[ -n "$t1" ] || fail "node1 is in no memory tier"
[ "$t1" -gt "$t0" ] || fail "node1 is in memory_tier$t1, not below node0's memory_tier$t0"
note "node0 in memory_tier$t0, node1 in memory_tier$t1"

v=$(/bin/terrace --version) || fail "/bin/terrace --version failed"
echo "terrace --version: $v"
case $v in terrace*) ;; *) fail "unexpected --version output: $v" ;; esac

u=$(as_user alice 'id -u') || fail "su to alice failed"
[ "$u" = 1000 ] || fail "su alice: id -u printed '$u', expected 1000"
u=$(as_user bob 'id -u') || fail "su to bob failed"
[ "$u" = 1001 ] || fail "su bob: id -u printed '$u', expected 1001"
echo ok
