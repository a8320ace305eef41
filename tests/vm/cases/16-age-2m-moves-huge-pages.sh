# boot: hmat
# timeout: 120
# 2 MiB pages on the live machine: a program whose sets are transparent huge pages, started on
# node 1, under age-2m (the policy's page is a 2 MiB range): the hot set's huge pages move to
# node 0 whole and the data is intact. KNOWN ISSUE (docs/live.md): the cold set's huge pages are
# promoted and demoted again and again (soft-dirty reports them written after they move), so
# where the cold set ends up is reported, not asserted.
. /lib/vmtest.sh
kernel_balancing_off
echo always >/sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || true

printf '[trackers]\nreferenced = "soft-dirty"\n' >/tmp/sd.toml
manage age-2m --policy age-2m --config /tmp/sd.toml -- terrace-hotcold --thp --hot-mib 4 --cold-mib 16 \
	--seconds 25 --start-node 1 --report-every 5
hot0=$(pages_at hot 0)
cold1=$(pages_at cold 1)
[ -n "$hot0" ] && [ "$hot0" -ge 973 ] || fail "only ${hot0:-0} of 1024 hot 4 KiB pages on node 0"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
note "age-2m: hot $hot0/1024 on node0; cold ${cold1:-0}/4096 on node1 at the end (known issue: cold huge pages bounce)"
