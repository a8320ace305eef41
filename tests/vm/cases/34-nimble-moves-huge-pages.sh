# boot: hmat
# timeout: 120
# Nimble on the live machine: a program whose sets are transparent huge pages, started on node
# 1, under nimble (2 MiB pages, 4 copy threads and 8 pages in flight asked for, exchange). Node 0
# has room, so the active huge pages come up with plain moves; the hot set must end in node 0
# whole and the data intact. The kernel cannot copy one page with several threads: the policy's
# log must say so once instead of pretending (docs/live.md, "Mechanisms"). The period is 1 s
# instead of Nimble's 5 s so that the run sees 25 of them.
. /lib/vmtest.sh
kernel_balancing_off
echo always >/sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || true

moved_before=$(vmstat thp_migration_success)
split_before=$(vmstat thp_migration_split)
printf '[trackers]\nreferenced = "soft-dirty"\n' >/tmp/sd.toml
manage nimble --policy nimble:period=1s --config /tmp/sd.toml -- terrace-hotcold --thp --hot-mib 4 \
	--cold-mib 16 --seconds 25 --start-node 1 --report-every 5
hot0=$(pages_at hot 0)
[ -n "$hot0" ] && [ "$hot0" -ge 973 ] || fail "only ${hot0:-0} of 1024 hot 4 KiB pages on node 0"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
warnings=$(grep -c 'multi-threaded copy is not available here' /tmp/log)
[ "$warnings" -eq 1 ] || fail "the lacking copy threads were reported $warnings times, not once"
moved=$(($(vmstat thp_migration_success) - moved_before))
split=$(($(vmstat thp_migration_split) - split_before))
[ "$moved" -gt 0 ] || fail "no huge page was migrated whole (thp_migration_success +0)"
[ "$split" -eq 0 ] || fail "$split huge pages were split to migrate"
note "nimble: hot $hot0/1024 on node0; cold $(pages_at cold 0)/4096 on node0; huge pages moved whole: $moved, split: 0"
