# boot: hmat
# timeout: 90
# Nimble's exchange on the live machine keeps both nodes' occupancy (issue 13): node 0 is full (the
# fast tier is limited with `[tiers] fast_limit_mib` to exactly the program's cold set, which is
# first-touched there), the hot set is first-touched on node 1. Every promotion must then be
# paired with a demotion: nimble-exchange-4k (base pages, 4 callers, 512 pages in flight; with
# `page_size=4k`, the lists on 4 KiB pages as for a program without huge pages, which this one is,
# so that each pair is one page each way and the nodes' page counts can be compared exactly)
# carries them out as pairs of move_pages batches. The program's other pages (its heap and
# stack, a few hundred) are first-touched on node 0 too, so node 0 starts over the limit by
# them, and the first period sends that excess down one way before it exchanges (docs/policies.md,
# "nimble", over capacity). Checked: pairs were exchanged (the machine's "exchanged N of M
# pairs" log lines) and whatever moved one way (pages moved - 2 x pairs) is at most node 0's
# excess at the start; the program's pages per node (/proc/PID/numa_maps) before the first round
# and 7 s later differ by those one-way moves alone, within 16 pages (the program's own
# allocations after its start report: the strings it formats for its reports; it maps nothing
# else); the hot set ends mostly on node 0, and the checksum holds. Period 1 s instead of Nimble's 5 s. The hot set comes up over
# several periods: the lists' aging (Nimble's own, docs/policies.md "nimble") deactivates half of
# each active list a period and reactivates a page found referenced at two scans in a row, each
# scan taking half of the inactive list, so about half of the hot pages left on node 1 come up
# every two periods (one run: 512, 256, 128, 64, 50 left at 1, 4, 6, 8, 10 s); the program runs
# 16 s so that at most a few dozen are left.
. /lib/vmtest.sh
kernel_balancing_off

hot_mib=4
cold_mib=8
printf '[trackers]\nreferenced = "soft-dirty"\n[tiers]\nfast_limit_mib = %d\n' $cold_mib >/tmp/ex.toml
terrace run --policy nimble-exchange-4k:period=1s,page_size=4k --config /tmp/ex.toml -- terrace-hotcold \
	--hot-mib $hot_mib --cold-mib $cold_mib --start-node 1 --cold-node 0 --seconds 16 --report-every 1 \
	>/tmp/out 2>/tmp/log &
rpid=$!
trap 'kill $rpid 2>/dev/null' EXIT

# The program's pid once it has filled both sets ("hotcold start" follows the fill).
i=0
until grep -q '^hotcold start' /tmp/out 2>/dev/null; do
	i=$((i + 1))
	[ $i -le 300 ] || { cat /tmp/out /tmp/log; fail "the program did not start within 30 s"; }
	sleep 0.1
done
pid=$(sed -n 's/^hotcold pid=\([0-9]*\) .*/\1/p' /tmp/out)
before=$(pages_per_node "$pid")
grep -q 'exchanged [1-9]' /tmp/log && fail "pairs were exchanged before the first snapshot: $(grep exchanged /tmp/log)"
echo "before: $before"

# Exchanges keep each node's page count, so the second snapshot may fall between rounds: the
# program's report at 7 s.
i=0
until grep -q '^hotcold t=[7-9]' /tmp/out 2>/dev/null; do
	i=$((i + 1))
	[ $i -le 600 ] || { cat /tmp/out /tmp/log; fail "no report at 7 s within 60 s"; }
	sleep 0.1
done
after=$(pages_per_node "$pid")
echo "after:  $after"
wait $rpid
rc=$?
trap - EXIT
cat /tmp/out
grep -v 'moved' /tmp/log | tail -n 6
grep 'moved' /tmp/log | head -n 4
[ $rc -eq 0 ] || fail "terrace run exited $rc"

pairs=$(sed -n 's/.*exchanged \([0-9]*\) of [0-9]* pairs.*/\1/p' /tmp/log | awk '{ n += $1 } END { print n + 0 }')
moved=$(sed -n 's/.*done: \([0-9]*\) pages moved.*/\1/p' /tmp/log)
[ "$pairs" -gt 0 ] || fail "no pair was exchanged"
node() { echo "$1" | tr ' ' '\n' | sed -n "s/^node$2=//p"; }
one_way=$((moved - 2 * pairs))
excess=$(($(node "$before" 0) - cold_mib * 256))
[ "$one_way" -ge 0 ] || fail "$moved pages moved, fewer than 2 x $pairs exchanged pairs"
[ "$one_way" -le $((excess > 0 ? excess : 0)) ] ||
	fail "$one_way pages moved one way, more than node 0's $excess pages over the limit at the start"
for n in 0 1; do
	b=$(node "$before" $n)
	a=$(node "$after" $n)
	d=$((a - b))
	[ $n -eq 0 ] && d=$((d + one_way)) || d=$((d - one_way))
	[ "${d#-}" -le 16 ] ||
		fail "node $n held $b pages of the program before the exchanges and $a after, with $one_way moved one way"
done
hot0=$(pages_at hot 0)
[ "$hot0" -ge 973 ] || fail "only $hot0 of 1024 hot pages on node 0"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
note "nimble-exchange-4k, node 0 full: $pairs pairs exchanged, $moved pages moved ($one_way one way, node 0 $excess over at the start); program's pages before $before, after $after; hot $hot0/1024 on node0, cold $(pages_at cold 1)/2048 on node1"
