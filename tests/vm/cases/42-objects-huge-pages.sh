# boot: hmat
# timeout: 120
# needs: objects-runtime
# host-programs: numactl
# Object tiering on transparent huge pages (docs/objects-runtime.md, "Huge pages"; docs/policies.md,
# objects): the test program's objects of 4 MiB, 6 hot and 4 cold, started with its memory
# preferred on node 1 and node 0 limited to 28 MiB (90% of it holds the 24 MiB hot site). The
# runtime starts each object on a 2 MiB boundary, so the kernel backs it with huge pages of its
# own, and the policy's records are whole huge pages, so each move carries its own record alone:
# the hot objects must end on node 0 and the cold ones on node 1 (90% each), huge pages must have
# been made for them and moved whole, every value intact.
. /lib/vmtest.sh
kernel_balancing_off
grep -q '\[never\]' /sys/kernel/mm/transparent_hugepage/enabled &&
	fail "the guest kernel makes no transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
prog=$(host_program objects-hotcold)
printf '[tiers]\nfast_limit_mib = 28\n' >/tmp/obj.toml
made=$(vmstat thp_fault_alloc) collapsed=$(vmstat thp_collapse_alloc) moved=$(vmstat thp_migration_success)
# alpha = 0.5, as in case 39. HOT COLD MIB SECONDS RENEW_AT RENEW: no renewal.
on_node 1 terrace run --objects --policy objects:trigger=time,alpha=0.5 --config /tmp/obj.toml -- \
	"$prog" 6 4 4 16 999 0 >/tmp/out 2>/tmp/log
rc=$?
made=$(($(vmstat thp_fault_alloc) - made + $(vmstat thp_collapse_alloc) - collapsed))
moved=$(($(vmstat thp_migration_success) - moved))
grep -v 'moved' /tmp/log | tail -n 4
[ "$rc" -eq 0 ] || fail "terrace run --objects exited $rc: $(tail -n 3 /tmp/log)"
hotcold_ok /tmp/out
hotcold_end /tmp/out
note "4 MiB objects on huge pages: $end; huge pages made $made, moved whole $moved; $(grep -c 'pages to node' /tmp/log) batches"
[ "$hotall" -eq 6144 ] && [ "$coldall" -eq 4096 ] || fail "the objects are not all present: $end"
[ "$made" -gt 0 ] || fail "the kernel made no huge page for the objects (thp_fault_alloc and thp_collapse_alloc unchanged)"
[ "$moved" -gt 0 ] || fail "no huge page moved whole (thp_migration_success unchanged)"
[ "$hot0" -ge $((hotall * 90 / 100)) ] || fail "the hot site's objects are not on node 0: $end"
[ "$cold1" -ge $((coldall * 90 / 100)) ] || fail "the cold site's objects are not on node 1: $end"
