# boot: hmat
# timeout: 150
# hemem and hpwp on the live machine, on the fault sampler (writes: userfaultfd write-protect
# faults of a random sample of 2 MiB ranges per tick; reads: DAMON's region counts): a program
# whose sets are transparent huge pages, started on node 1, keeps writing its hot set; within the
# run its hot huge pages are on node 0 and its data is intact with every copy write-protected.
# The program's own fill writes its cold set too, a burst these policies rightly see as hot (PEBS
# would as well), and with free fast memory nothing is demoted; so the program may use only 6 MiB
# of node 0 (three 2 MiB ranges): the two hot ranges must win that room, and at most one cold
# range may stay in the spare one.
. /lib/vmtest.sh
kernel_balancing_off
echo always >/sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null || true
printf '[tiers]\nfast_limit_mib = 6\n' >/tmp/limit.toml

for policy in hpwp hemem; do
	manage $policy --policy $policy --config /tmp/limit.toml -- terrace-hotcold --thp --hot-mib 4 --cold-mib 16 \
		--seconds 11 --start-node 1 --report-every 5
	grep -q 'access sampling' /tmp/log || fail "$policy: no access sampling on the live machine"
	hot0=$(pages_at hot 0)
	cold1=$(pages_at cold 1)
	[ "$hot0" -ge 973 ] || fail "$policy: only $hot0 of 1024 hot pages on node 0"
	[ "$cold1" -ge 3584 ] || fail "$policy: only $cold1 of 4096 cold pages on node 1 (at most 512 fit beside the hot set)"
	grep -q 'hotcold checksum ok' /tmp/out || fail "$policy: checksum"
	faults=$(sed -n 's/.*; \([0-9]*\) sampled write faults.*/\1/p' /tmp/log)
	[ "${faults:-0}" -gt 0 ] || fail "$policy: the fault sampler caught no write"
	first=$(first_report hot 0 973)
	note "$policy: hot $hot0/1024 on node0 (95% by the $first report), cold $cold1/4096 on node1, $faults write faults sampled; $(policy_cost)"
done
