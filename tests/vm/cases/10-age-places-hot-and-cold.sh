# boot: hmat
# timeout: 150
# A program whose memory starts on the slow node: under the age policy on soft-dirty alone its hot
# set moves to node 0 within a bounded time while its cold set stays on node 1; its data is intact.
. /lib/vmtest.sh
kernel_balancing_off

printf '[trackers]\nreferenced = "soft-dirty"\n' >/tmp/sd.toml
manage age --policy age --config /tmp/sd.toml -- terrace-hotcold --hot-mib 4 --cold-mib 16 --seconds 10 \
	--start-node 1 --report-every 5
started_on /tmp/out 1 1024 4096
hot0=$(pages_at hot 0)
cold1=$(pages_at cold 1)
[ -n "$hot0" ] && [ "$hot0" -ge 973 ] || fail "only ${hot0:-0} of 1024 hot pages on node 0"
[ -n "$cold1" ] && [ "$cold1" -ge 3891 ] || fail "only ${cold1:-0} of 4096 cold pages stayed on node 1"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
first=$(first_report hot 0 973)
note "age: hot $hot0/1024 on node0, cold $cold1/4096 on node1 at 10 s; 95% of hot pages on node0 by the $first report; $(policy_cost)"
grep -q 'moved' /tmp/log || fail "no batch log line"
