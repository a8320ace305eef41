# boot: hmat
# timeout: 120
# Soft-dirty sees only writes; with DAMON for the referenced bit, a set that is only read is hot
# too. Under age, the read set moves to node 0 with the written one, and most of the cold set
# stays on node 1: DAMON's regions are adaptive, and one that straddles the edge of a hot set
# makes some cold pages look referenced (about 10-15% here), so the bound is 75%, not 95%.
. /lib/vmtest.sh
kernel_balancing_off

manage age --policy age -- terrace-hotcold --hot-mib 2 --cold-mib 8 --read-mib 2 --seconds 30 --start-node 1 \
	--report-every 5
grep -q 'referenced from DAMON' /tmp/log || fail "DAMON was not used for the referenced bit"
# Its regions come from its trace event, through perf's per-CPU tracepoint events, which patch
# nothing in the scheduler (a tracefs instance did, and this emulated guest did not always
# survive it; docs/live.md).
grep -q 'DAMON: regions read from the damon_aggregated trace event' /tmp/log ||
	fail "DAMON's regions were not read from its trace event: $(grep -m 3 'DAMON' /tmp/log)"
read0=$(pages_at read 0)
cold1=$(pages_at cold 1)
[ -n "$read0" ] && [ "$read0" -ge 461 ] || fail "only ${read0:-0} of 512 read-only hot pages on node 0"
[ -n "$cold1" ] && [ "$cold1" -ge 1536 ] || fail "only ${cold1:-0} of 2048 cold pages stayed on node 1"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
note "age with DAMON: read-only hot set $read0/512 on node0, cold $cold1/2048 on node1"
