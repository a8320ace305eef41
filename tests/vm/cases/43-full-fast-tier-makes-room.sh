# boot: hmat
# timeout: 240
# Promotion into a full fast tier, on the live machine, by the policies that must demote to make
# room (cases 10, 17 and 19 start with room to spare; 35 and 36 cover nimble's exchange and
# ambix's SWITCH): node 0 is limited with `[tiers] fast_limit_mib` to exactly the program's cold
# set, which is first-touched there and never touched again after the fill; the hot set, which
# the program keeps writing, is first-touched on node 1. age (soft-dirty, 4 KiB pages) and hemem
# and hpwp (the fault sampler, on transparent huge pages) must each move cold pages down to bring
# the hot set up. Checked: at least 973 of 1024 hot pages on node 0 at the end, at least as many
# cold pages on node 1, the program's hot and cold pages on node 0 within the limit, the checksum.
# hemem's first pass can be planned while the program is still filling its cold set, on a free
# range that is gone when it moves: it must then bring node 0 back within the limit (it stayed a
# huge page over, 2,560 pages, until hemem and hpwp demoted an over-full fast tier's excess).
. /lib/vmtest.sh
kernel_balancing_off
echo always >/sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || true

hot_mib=4
cold_mib=8
limit=$((cold_mib * 256))
for policy in age hemem hpwp; do
	case $policy in
	age)
		printf '[trackers]\nreferenced = "soft-dirty"\n[tiers]\nfast_limit_mib = %d\n' $cold_mib >/tmp/full.toml
		thp=""
		;;
	*)
		printf '[tiers]\nfast_limit_mib = %d\n' $cold_mib >/tmp/full.toml
		thp="--thp"
		;;
	esac
	manage "$policy, node 0 full" --policy $policy --config /tmp/full.toml -- terrace-hotcold $thp \
		--hot-mib $hot_mib --cold-mib $cold_mib --start-node 1 --cold-node 0 --seconds 20 --report-every 2
	hot0=$(pages_at hot 0)
	cold0=$(pages_at cold 0)
	cold1=$(pages_at cold 1)
	grep -q 'hotcold checksum ok' /tmp/out || fail "$policy: checksum"
	first=$(first_report hot 0 973)
	note "$policy, node 0 full: hot $hot0/1024 on node0 (95% by the $first report), cold $cold1/$limit on node1, $((hot0 + cold0)) of $limit pages on node0; $(policy_cost)"
	[ "$hot0" -ge 973 ] || fail "$policy: only $hot0 of 1024 hot pages on node 0"
	[ "$cold1" -ge "$hot0" ] || fail "$policy: $hot0 hot pages came up but only $cold1 cold pages went down"
	[ $((hot0 + cold0)) -le $limit ] || fail "$policy: node 0 holds $hot0 hot and $cold0 cold pages, over the $limit-page limit"
done
