# boot: nohmat
# The misconfiguration `terrace doctor` must detect: a CPU-less node without HMAT data lands in the
# same memory tier as node 0, so the kernel's own demotion and promotion do nothing.
. /lib/vmtest.sh

[ -d /sys/devices/system/node/node1 ] || fail "no node1: the guest has one NUMA node"
for t in /sys/devices/virtual/memory_tiering/memory_tier*; do
	[ -f "$t/nodelist" ] && echo "${t##*/}: $(cat "$t/nodelist")"
done
t0=$(node_tier 0)
t1=$(node_tier 1)
[ -n "$t0" ] || fail "node0 is in no memory tier"
[ "$t0" = "$t1" ] || fail "node0 is in memory_tier$t0 but node1 in memory_tier${t1:-(none)}"
note "both nodes in memory_tier$t0"
echo ok
