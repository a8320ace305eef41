# boot: hmat
# timeout: 120
# ambix's SWITCH and Threshold on the live machine, with DRAM full (case 17 has room and
# promotes with PROMOTE_INT): the fast tier is limited with `[tiers] fast_limit_mib` to exactly
# the program's cold set, which is first-touched on node 0; the hot set, which the program keeps
# writing, is first-touched on node 1. The first round's DEMOTE walk finds every cold page
# written (by the fill) and clears their bits (Ambix thesis §4.3.2), so it takes none; the next
# round finds them untouched since, and SWITCH pairs each write-hot page with a cold one, while
# Threshold demotes the excess over 95% (Ambix §4.3.3), passing over the pages SWITCH is
# demoting. Checked: pairs were exchanged (the machine's "exchanged N of M pairs" lines) and no
# page was refused as already moving, the hot set ends on node 0, as many cold pages went to
# node 1, the program's hot and cold pages on node 0 end at most 95% of the limit, and the
# checksum holds.
. /lib/vmtest.sh
kernel_balancing_off

hot_mib=4
cold_mib=8
printf '[trackers]\nreferenced = "soft-dirty"\n[tiers]\nfast_limit_mib = %d\n' $cold_mib >/tmp/am.toml
manage 'ambix, DRAM full' --policy ambix --config /tmp/am.toml -- terrace-hotcold --hot-mib $hot_mib \
	--cold-mib $cold_mib --start-node 1 --cold-node 0 --seconds 12 --report-every 2

pairs=$(sed -n 's/.*exchanged \([0-9]*\) of [0-9]* pairs.*/\1/p' /tmp/log | awk '{ n += $1 } END { print n + 0 }')
hot0=$(pages_at hot 0)
cold0=$(pages_at cold 0)
cold1=$(pages_at cold 1)
limit=$((cold_mib * 256))
[ "$pairs" -gt 0 ] || fail "no pair was exchanged: $(grep -m3 'ambix' /tmp/log)"
# Every round's SWITCH pairs were exchanged, all of them: a pair whose cold page Threshold also
# demoted would be refused as an exchange of two pages in one tier, and its round would have no
# "exchanged N of N" line.
for n in $(sed -n 's/.*ambix: SWITCH \([1-9][0-9]*\) pairs.*/\1/p' /tmp/log | sort -u); do
	grep -q "exchanged $n of $n pairs" /tmp/log ||
		fail "a round planned $n SWITCH pairs and did not exchange them all: $(grep -m2 "SWITCH $n pairs" /tmp/log)"
done
notmoved=$(sed -n 's/.* done: [0-9]* pages moved, \([0-9]*\) not moved.*/\1/p' /tmp/log)
[ "${notmoved:-1}" -eq 0 ] || fail "$notmoved pages not moved: $(grep -m3 'not moved\|refused\|busy' /tmp/log)"
[ "$hot0" -ge 973 ] || fail "only $hot0 of 1024 hot pages on node 0"
# Each promotion went with a demotion (SWITCH), and Threshold demoted beyond them.
[ "$cold1" -ge "$hot0" ] || fail "$hot0 hot pages came up but only $cold1 cold pages went down"
# Threshold keeps DRAM at most 95% full (the program's other pages on node 0 only add to it).
[ $((hot0 + cold0)) -le $((limit * 95 / 100)) ] ||
	fail "node 0 holds $hot0 hot and $cold0 cold pages, over 95% of the $limit-page limit"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
first=$(first_report hot 0 973)
note "ambix, DRAM full: $pairs pairs exchanged; hot $hot0/1024 on node0 (95% by the $first report), cold $cold1/$limit on node1, $((hot0 + cold0)) of $limit pages on node0; $(policy_cost)"
