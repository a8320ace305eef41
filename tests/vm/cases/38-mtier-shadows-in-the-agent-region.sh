# boot: hmat
# timeout: 90
# Shadow copies on the live machine (docs/live.md, "Shadow copies"): the read set is mapped
# through Terrace's shadow agent (a memfd with two slots per page) and made read-only, all first
# touched on node 1, node 0 limited to a 4 MiB pool. mtier promotes with a copy that keeps the
# node-1 copy as the shadow, and demotes a still-clean page by switching back to it (no copy).
# At 5 s the program makes the read set writable and writes every word: each shadowed page's
# write must drop its shadow, and no later demotion may switch back to a stale one. Every value
# is checked every second and at the end (mtier §3.1; issue 14's tests).
. /lib/vmtest.sh
kernel_balancing_off
printf '[trackers]\nreferenced = "soft-dirty"\n[tiers]\nfast_limit_mib = 4\n' >/tmp/mt.toml
manage mtier --policy mtier:epoch=100ms --config /tmp/mt.toml -- terrace-hotcold --hot-mib 1 --cold-mib 1 \
	--read-mib 8 --protect-read --shadow-read --write-read-at 5 --seconds 9 --start-node 1 --verify-every 1 \
	--report-every 1
grep -q 'hotcold shadow agent connected' /tmp/out || fail "the agent did not connect: $(grep 'shadow agent' /tmp/out)"
grep -q 'shadow agent connected' /tmp/log || fail "Terrace did not take the agent's connection"
grep -q 'MISMATCH' /tmp/out && fail "a value read back wrong: $(grep MISMATCH /tmp/out)"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
grep -q 'hotcold wrote the read set' /tmp/out || fail "the program did not write its read set"
switched=$(sed -n 's/.*; \([0-9]*\) moved by switching back to their shadow.*/\1/p' /tmp/log)
dropped=$(sed -n 's/.* \([0-9]*\) shadows dropped by writes$/\1/p' /tmp/out)
[ -n "$switched" ] && [ "$switched" -gt 0 ] || fail "no page was switched back to its shadow: $(grep ' done:' /tmp/log)"
[ -n "$dropped" ] && [ "$dropped" -gt 0 ] || fail "no write dropped a shadow: $(grep 'hotcold shadow' /tmp/out)"
seen=$(grep '^hotcold t=' /tmp/out | while read -r l; do _count read 0 "$l"; done | sort -n | tail -n 1)
[ "${seen:-0}" -gt 0 ] || fail "no report saw a page of the read set on node 0"
[ "$seen" -le 1024 ] || fail "a report saw $seen pages of the read set on node 0, more than the pool's 1024"
read0=$(pages_at read 0)
[ "$read0" -le 1024 ] || fail "the pool holds $read0 pages, more than its 1024"
moved=$(sed -n 's/.* done: \([0-9]*\) pages moved.*/\1/p' /tmp/log)
took=$(sed -n 's/.* migration \([0-9.]*\) s over.*/\1/p' /tmp/log)
note "shadows: of $moved pages moved (migration $took s), $switched switched back without a copy, $dropped shadows dropped by the writes at 5 s; read pages on node 0 up to $seen (pool 1024); every value checked each second: ok; $(grep -o 'host-wide TLB.*received' /tmp/log)"
