# boot: hmat
# timeout: 90
# mtier on the live machine: a program with a hot set it keeps writing, a cold set and a read set
# it never writes after filling them, all first touched on node 1; node 0 limited to a 4 MiB
# pool. mtier rotates pages never written lately through node 0 every 100 ms epoch (with the
# kernel's migration: user space keeps no shadows, which the log must say once), so the written
# hot set must never enter the pool, the pool must never hold more than its 1024 pages, pages
# must move, and every value must read back intact. The run's log must end with the kernel's own
# TLB shootdown counts (docs/live.md, "TLB shootdowns").
. /lib/vmtest.sh
kernel_balancing_off
printf '[trackers]\nreferenced = "soft-dirty"\n[tiers]\nfast_limit_mib = 4\n' >/tmp/mt.toml
manage mtier --policy mtier:epoch=100ms --config /tmp/mt.toml -- terrace-hotcold --hot-mib 2 --cold-mib 4 \
	--read-mib 4 --seconds 12 --start-node 1 --verify-every 3 --report-every 3
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
grep -q 'MISMATCH' /tmp/out && fail "a value read back wrong during the run"
moved=$(sed -n 's/.* done: \([0-9]*\) pages moved.*/\1/p' /tmp/log)
[ -n "$moved" ] && [ "$moved" -gt 0 ] || fail "mtier moved no page (${moved:-no done line})"
hot0=$(pages_at hot 0)
[ "$hot0" -eq 0 ] || fail "$hot0 pages of the hot set, written all along, entered the pool"
cold0=$(pages_at cold 0)
read0=$(pages_at read 0)
pool=$((cold0 + read0))
[ "$pool" -le 1024 ] || fail "the pool holds $pool pages, more than its 1024"
warnings=$(grep -c 'shadow copies is not available here' /tmp/log)
[ "$warnings" -eq 1 ] || fail "the lacking shadow copies were reported $warnings times, not once"
grep -q 'host-wide TLB shootdowns during the run: [0-9]* shootdown interrupts' /tmp/log ||
	fail "no kernel TLB count in the log: $(grep -i tlb /tmp/log | tail -n 2)"
note "mtier: $moved pages moved; pool at the end: $cold0 cold + $read0 read of 1024; hot in pool: 0; $(grep -o 'host-wide TLB.*' /tmp/log)"
