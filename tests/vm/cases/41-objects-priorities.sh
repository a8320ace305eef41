# boot: hmat
# timeout: 180
# needs: objects-runtime
# host-programs: numactl
# Object tiering's priorities on the live machine (issue 15; object tiering §5.5, Fig. 8; docs/live.md,
# "Objects"): two programs under one `terrace run --objects`, started by a wrapper script, each with
# a hot site of 16 objects of 1 MiB (tests/vm/programs/objects-hotcold.c), all memory preferred on
# node 1 and node 0 limited to 18 MiB, whose 90% holds one program's hot objects. The low-priority
# program runs alone for 12 s and must get node 0 and keep it (75% of its hot pages in each report
# from 8 to 11 s); then the wrapper starts the other with TERRACE_PRIORITY=1 for 12 s: the policy
# must give node 0 to it (75% of its hot pages at its end) and take it from the low-priority program
# (at most 25% of its hot pages in each report from 18 to 22 s); once the high-priority program has
# ended, the low-priority one's hot objects must be back on node 0 and stay (75% in each report
# from 32 s to its end). Each report counts, not one instant: until the runtime kept huge pages to
# one object each, khugepaged's 2 MiB pages over two 1 MiB objects made a move of a few pages drag
# thousands of hot pages to node 1 for a tick (docs/objects-runtime.md, "Huge pages"), which a
# check at one instant caught only when it fell on it. No huge page may move at all here.
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
thp_before=$(vmstat thp_migration_success)
# alpha = 0.5, as in case 39: the seed's 0.1 takes about ten 2 s ticks to rank an object.
on_node 1 terrace run --objects --policy objects:trigger=time,alpha=0.5 --config /tmp/obj.toml -- \
	sh /tmp/pair.sh >/tmp/out 2>/tmp/log
rc=$?
thp_after=$(vmstat thp_migration_success)
grep -v 'moved' /tmp/log | tail -n 4
# hot0 FILE: "T:H" per report, H the hot pages on node 0 T seconds in ("... t=T hot H of N pages
# on node 0"; N is 4096 less pages the kernel reported busy at that instant).
hot0() { sed -n 's/^objects-hotcold t=\([0-9]*\) hot \([0-9]*\) of.*/\1:\2/p' "$1" | tr '\n' ' '; }
low=$(hot0 /tmp/low)
echo "low-priority hot pages on node 0, second:pages: $low"
echo "high-priority hot pages on node 0, second:pages: $(hot0 /tmp/high)"
[ "$rc" -eq 0 ] || fail "terrace run --objects exited $rc: $(tail -n 3 /tmp/log)"
for p in low high; do
	hotcold_ok /tmp/$p "the $p-priority program"
done
# span least|most FROM TO: the fewest / most hot pages on node 0 in the low-priority program's
# reports from FROM to TO seconds, or nothing if there is no report in that span.
span() { echo "$low" | tr ' ' '\n' | awk -F: -v a="$2" -v b="$3" -v f="$1" '$1 >= a && $1 <= b {
	if (n++ == 0 || (f == "least" ? $2 < v : $2 > v)) v = $2 } END { if (n) print v }'; }
alone=$(span least 8 11)
during=$(span most 18 22)
after=$(span least 32 40)
hotcold_end /tmp/high
high=$hot0
hotcold_end /tmp/low
after_end=$hot0
[ -n "$alone" ] && [ -n "$during" ] && [ -n "$after" ] && [ -n "$after_end" ] && [ -n "$high" ] ||
	fail "a report is missing: low '$alone' '$during' '$after' '$after_end', high '$high'; $(grep -c . /tmp/low) lines from the low-priority program"
note "low-priority hot pages on node 0: at least $alone of 4096 alone (8-11 s), at most $during while the high-priority program runs (18-22 s), at least $after after it (32-39 s) and $after_end at its end; high-priority: $high of 4096 at its end; huge pages moved: $((thp_after - thp_before))"
[ "$alone" -ge 3072 ] || fail "alone, the low-priority program's hot objects did not get node 0 and keep it (down to $alone of 4096)"
[ "$high" -ge 3072 ] || fail "the high-priority program's hot objects did not get node 0 ($high of 4096)"
[ "$during" -le 1024 ] || fail "the low-priority program kept node 0 while the high-priority one ran (up to $during of 4096)"
[ "$after" -ge 3072 ] && [ "$after_end" -ge 3072 ] ||
	fail "the low-priority program's hot objects did not come back to node 0 and stay (down to $after, $after_end at its end, of 4096)"
[ "$thp_after" -eq "$thp_before" ] ||
	fail "$((thp_after - thp_before)) huge pages moved: an object shared one with another (thp_migration_success)"
