# boot: hmat
# timeout: 180
# needs: objects-runtime
# host-programs: numactl
# Object tiering's priorities on the live machine (issue 15; object tiering §5.5, Fig. 8; docs/live.md,
# "Objects"): two programs under one `terrace run --objects`, started by a wrapper script, each with
# a hot site of 16 objects of 1 MiB (tests/vm/programs/objects-hotcold.c), all memory preferred on
# node 1 and node 0 limited to 18 MiB, whose 90% holds one program's hot objects. The low-priority
# program runs alone for 12 s and must get node 0; then the wrapper starts the other with
# TERRACE_PRIORITY=1 for 12 s: the policy must give node 0 to it (75% of its hot pages at its end)
# and take it from the low-priority program (at most 25% of its hot pages there 10 s in); once the
# high-priority program has ended, the low-priority one's hot objects must be back on node 0 (75%).
. /lib/vmtest.sh
kernel_balancing_off
prog=$(host_program objects-hotcold)
[ -f /bin/libterrace_alloc.so ] || fail "no /bin/libterrace_alloc.so beside terrace"
printf '[tiers]\nfast_limit_mib = 18\n' >/tmp/obj.toml
# HOT COLD MIB SECONDS RENEW_AT RENEW: no cold objects and no renewal in the high-priority program.
cat >/tmp/pair.sh <<SCRIPT
"$prog" 16 4 1 40 999 0 >/tmp/low &
sleep 12
TERRACE_PRIORITY=1 "$prog" 16 0 1 12 999 0 >/tmp/high
wait
SCRIPT
# alpha = 0.5, as in case 39: the seed's 0.1 takes about ten 2 s ticks to rank an object.
on_node 1 terrace run --objects --policy objects:trigger=time,alpha=0.5 --config /tmp/obj.toml -- \
	sh /tmp/pair.sh >/tmp/out 2>/tmp/log
rc=$?
grep -v 'moved' /tmp/log | tail -n 4
[ "$rc" -eq 0 ] || fail "terrace run --objects exited $rc: $(tail -n 3 /tmp/log)"
for p in low high; do
	grep -q 'MISMATCH' /tmp/$p && fail "a value of the $p-priority program read back wrong: $(grep MISMATCH /tmp/$p)"
	grep -q 'objects-hotcold values ok' /tmp/$p || fail "the $p-priority program did not finish its checks: $(tail -n 2 /tmp/$p)"
done
# hot0 FILE LINE-PREFIX: the hot pages on node 0 in the line that starts so ("... hot H of N pages
# on node 0"; N is 4096 less pages the kernel reported busy at that instant), or nothing.
hot0() { grep "^objects-hotcold $2 hot" "$1" | head -n 1 | sed -n 's/.* hot \([0-9]*\) of [0-9]* pages on node 0.*/\1/p'; }
alone=$(hot0 /tmp/low t=10)
during=$(hot0 /tmp/low t=22)
high=$(hot0 /tmp/high end:)
after=$(hot0 /tmp/low end:)
[ -n "$alone" ] && [ -n "$during" ] && [ -n "$high" ] && [ -n "$after" ] ||
	fail "a report is missing: low '$alone' '$during' '$after', high '$high'; $(grep -c . /tmp/low) lines from the low-priority program"
note "low-priority hot pages on node 0: $alone of 4096 alone (10 s), $during while the high-priority program runs (22 s), $after at its end (40 s); high-priority: $high of 4096 at its end"
[ "$alone" -ge 3072 ] || fail "alone, the low-priority program's hot objects did not get node 0 ($alone of 4096)"
[ "$high" -ge 3072 ] || fail "the high-priority program's hot objects did not get node 0 ($high of 4096)"
[ "$during" -le 1024 ] || fail "the low-priority program kept node 0 while the high-priority one ran ($during of 4096)"
[ "$after" -ge 3072 ] || fail "the low-priority program's hot objects did not come back to node 0 ($after of 4096)"
