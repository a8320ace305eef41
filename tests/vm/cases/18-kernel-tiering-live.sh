# boot: hmat
# timeout: 120
# kernel-tiering on the live machine is the kernel's own mechanism: Terrace switches NUMA
# balancing's tiering mode and demotion on for the run, reports /proc/vmstat's counters, and puts
# the settings back afterwards. A program started on node 1 gets its hot pages promoted to node 0
# by the kernel; the cold ones stay; the data is intact.
. /lib/vmtest.sh
kernel_balancing_off

terrace run --policy kernel-tiering -- terrace-hotcold --hot-mib 4 --cold-mib 16 --seconds 25 --start-node 1 \
	--report-every 5 >/tmp/out 2>/tmp/log
rc=$?
cat /tmp/out
grep -E "kernel|done" /tmp/log | tail -n 8
[ $rc -eq 0 ] || fail "terrace run exited $rc"
end=$(grep '^hotcold end' /tmp/out) || fail "no end report"
hot0=$(echo "$end" | sed -n 's/.*hot [^|]*node0=\([0-9]*\).*/\1/p')
cold1=$(echo "$end" | sed -n 's/.*cold [^|]*node1=\([0-9]*\).*/\1/p')
[ -n "$hot0" ] && [ "$hot0" -ge 973 ] || fail "only ${hot0:-0} of 1024 hot pages on node 0"
[ -n "$cold1" ] && [ "$cold1" -ge 3891 ] || fail "only ${cold1:-0} of 4096 cold pages stayed on node 1"
grep -q 'hotcold checksum ok' /tmp/out || fail "checksum"
grep -q 'pgpromote_success +' /tmp/log || fail "no promotion counted in /proc/vmstat"
[ "$(cat /proc/sys/kernel/numa_balancing)" = 0 ] || fail "numa_balancing was not restored"
first=$(sed -n 's/^hotcold t=\([0-9.]*\)s hot [^|]*node0=\([0-9]*\).*/\1 \2/p' /tmp/out | awk '$2 >= 973 { print $1 "s"; exit }')
note "kernel-tiering (the kernel's own): hot $hot0/1024 on node0 (95% by the ${first:-(never)} report), cold $cold1/4096 on node1"
