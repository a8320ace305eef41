# boot: hmat
# timeout: 90
# mtier on the live machine: a program with a hot set it keeps writing, a cold set it never
# writes after filling it, and a read set it makes read-only (mprotect PROT_READ) once filled,
# all first touched on node 1; node 0 limited to a 4 MiB pool. mtier's eligible pages are those
# made read-only (mtier §3.2): it must rotate the read set's pages through node 0 every 100 ms
# epoch (with the kernel's migration: user space keeps no shadow of a program's own memory, which
# the log must say once),
# never the hot or the cold set, never more than the pool's 1024 pages, and every value must read
# back intact. The run's log must end with the kernel's own TLB shootdown counts (docs/live.md,
# "TLB shootdowns").
# The program reports every 0.7 s, a period prime to the pool's: every 20 epochs (2 s) a
# bookkeeping epoch empties the pool for an epoch, and reports every 2 s, locked in phase with
# it, could all land in that empty epoch (one run in 8-14 did: the kernel's numa_maps showed
# the read set half on node 0 at the same seconds).
. /lib/vmtest.sh
kernel_balancing_off
printf '[trackers]\nreferenced = "soft-dirty"\n[tiers]\nfast_limit_mib = 4\n' >/tmp/mt.toml
manage mtier --policy mtier:epoch=100ms --config /tmp/mt.toml -- terrace-hotcold --hot-mib 2 --cold-mib 4 \
	--read-mib 8 --protect-read --seconds 8 --start-node 1 --verify-every 2 --report-every 0.7
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
grep -q 'MISMATCH' /tmp/out && fail "a value read back wrong during the run"
moved=$(sed -n 's/.* done: \([0-9]*\) pages moved.*/\1/p' /tmp/log)
[ -n "$moved" ] && [ "$moved" -gt 0 ] || fail "mtier moved no page (${moved:-no done line})"
hot0=$(pages_at hot 0)
cold0=$(pages_at cold 0)
read0=$(pages_at read 0)
[ "$hot0" -eq 0 ] || fail "$hot0 pages of the hot set, written all along, entered the pool"
[ "$cold0" -eq 0 ] || fail "$cold0 pages of the cold set, writable, entered the pool"
[ "$read0" -le 1024 ] || fail "the pool holds $read0 pages, more than its 1024"
seen=$(grep '^hotcold t=' /tmp/out | while read -r l; do _count read 0 "$l"; done | sort -n | tail -n 1)
[ "${seen:-0}" -gt 0 ] || fail "no report saw a page of the read set on node 0"
warnings=$(grep -c 'outside a shadow region' /tmp/log)
[ "$warnings" -eq 1 ] || fail "shadows asked for outside a shadow region were reported $warnings times, not once"
grep -q 'host-wide TLB shootdowns during the run: [0-9]* shootdown interrupts' /tmp/log ||
	fail "no kernel TLB count in the log: $(grep -i tlb /tmp/log | tail -n 2)"
note "mtier: $moved pages moved; read pages on node 0: up to $seen in the reports, $read0 at the end (pool 1024); hot and cold in the pool: 0; $(grep -o 'host-wide TLB.*' /tmp/log)"
