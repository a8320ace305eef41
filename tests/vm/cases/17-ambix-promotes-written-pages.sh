# boot: hmat
# timeout: 120
# ambix on the live machine: a program started on node 1 keeps writing its hot set; ambix's
# Switch (triggered by dirty slow-tier pages, the live machine having no bandwidth counters)
# promotes the write-hot pages to node 0 with PROMOTE_INT; the cold set stays; data intact.
. /lib/vmtest.sh
kernel_balancing_off

printf '[trackers]\nreferenced = "soft-dirty"\n' >/tmp/sd.toml
manage ambix --policy ambix --config /tmp/sd.toml -- terrace-hotcold --hot-mib 4 --cold-mib 16 --seconds 12 \
	--start-node 1 --report-every 5
hot0=$(pages_at hot 0)
cold1=$(pages_at cold 1)
[ -n "$hot0" ] && [ "$hot0" -ge 973 ] || fail "only ${hot0:-0} of 1024 hot pages on node 0"
[ -n "$cold1" ] && [ "$cold1" -ge 3891 ] || fail "only ${cold1:-0} of 4096 cold pages stayed on node 1"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
first=$(first_report hot 0 973)
note "ambix: hot $hot0/1024 on node0 (95% by the $first report), cold $cold1/4096 on node1; $(policy_cost)"
