# boot: hmat
# timeout: 120
# kernel-tiering on the live machine is the kernel's own mechanism: Terrace switches NUMA
# balancing's tiering mode and demotion on for the run, reports /proc/vmstat's counters, and puts
# the settings back afterwards. A program started on node 1 gets its hot pages promoted to node 0
# by the kernel; the cold ones stay; the data is intact.
# 24 s: run alone, the kernel's NUMA scanner promoted the hot set 4-6 s into the program (five
# runs), but in clean-clone CI, with docs/policies.md's reproductions running beside the guest, once
# at 10 s and once not within a 12 s run (no hint fault at all).
. /lib/vmtest.sh
kernel_balancing_off

terrace run --policy kernel-tiering -- terrace-hotcold --hot-mib 4 --cold-mib 16 --seconds 24 --start-node 1 \
	--report-every 5 >/tmp/out 2>/tmp/log
rc=$?
cat /tmp/out
grep -E "kernel|done" /tmp/log | tail -n 8
[ $rc -eq 0 ] || fail "terrace run exited $rc"
hot0=$(pages_at hot 0)
cold1=$(pages_at cold 1)
[ -n "$hot0" ] && [ "$hot0" -ge 973 ] || fail "only ${hot0:-0} of 1024 hot pages on node 0"
[ -n "$cold1" ] && [ "$cold1" -ge 3891 ] || fail "only ${cold1:-0} of 4096 cold pages stayed on node 1"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
grep -q 'pgpromote_success +' /tmp/log || fail "no promotion counted in /proc/vmstat"
[ "$(cat /proc/sys/kernel/numa_balancing)" = 0 ] || fail "numa_balancing was not restored"
first=$(first_report hot 0 973)
note "kernel-tiering (the kernel's own): hot $hot0/1024 on node0 (95% by the $first report), cold $cold1/4096 on node1; $(policy_cost)"
